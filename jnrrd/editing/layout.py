"""What the two storage layouts of an editable volume share (docs/editing.md, "Layouts"):
the counters of the bytes they move, and the interface the writable volume drives.

A layout reads a tile's stored bytes given its table entry, stages the bytes of a new
version of a tile (not visible to any reader before a commit names them), retires an entry
a commit will no longer name, and publishes a commit atomically. Every byte goes through
the storage layer (:mod:`jnrrd.storage`) and is counted in :class:`Counters`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ..header import Header
from ..policy import Policy
from ..tiling.levels import Level
from .tables import Tables

__all__ = ["Counters", "Layout", "aligned", "put_whole", "room_for"]

#: the least header room an editable internal file reserves
MIN_ROOM = 64 << 10


@dataclass
class Counters:
    """Bytes and requests a volume moved through the storage layer since it was opened."""

    #: tile reads and their bytes (a tile-aligned write reads none)
    reads: int = 0
    bytes_read: int = 0
    #: writes and their bytes: tiles, headers, journals, copies of a rewrite
    writes: int = 0
    bytes_written: int = 0
    #: of these, the journals of in-place commits (a copy of the header each)
    journal_bytes: int = 0

    def read(self, n: int) -> None:
        self.reads += 1
        self.bytes_read += n

    def wrote(self, n: int) -> None:
        self.writes += 1
        self.bytes_written += n


def aligned(n: int, to: int = 4096) -> int:
    """``n`` rounded up to a multiple of ``to``."""
    return -(-n // to) * to


def room_for(header_len: int, ntiles: int) -> int:
    """The header room reserved for a header of ``header_len`` bytes over ``ntiles`` stored
    tiles: twice the header plus 32 bytes a tile (offsets and sizes still to grow), at least
    :data:`MIN_ROOM`, in whole pages. Running out of it costs one rewrite of the file, which
    doubles it again (docs/editing.md, "Costs")."""
    return aligned(max(MIN_ROOM, 2 * header_len + 32 * ntiles))


class Layout(Protocol):
    """The interface of :class:`~jnrrd.editing.internal.LocalInternal`,
    :class:`~jnrrd.editing.internal.RemoteInternal` and
    :class:`~jnrrd.editing.external.External`."""

    external: bool
    counters: Counters
    #: the header of the last commit, as parsed back before it was published
    header: Header | None

    def read(self, level: Level, coords: tuple[int, ...], index: int, entry: Any
             ) -> bytes | memoryview | None:
        """The stored bytes of a tile with table entry ``entry`` (``None``: sparse)."""
        ...

    def stage(self, level: Level, coords: tuple[int, ...], index: int, data: Any) -> Any:
        """Store the bytes of a new version of a tile; return its table entry."""
        ...

    def retire(self, level: Level, coords: tuple[int, ...], index: int, entry: Any) -> None:
        """``entry`` will not be named by the next commit (its bytes may go after it)."""
        ...

    def prefetch(self, level: Level, items: list[tuple[tuple[int, ...], int, Any]]
                 ) -> list[Any]:
        """Start reading the tiles ``(coords, index, entry)`` at once (a remote layout);
        one pending read per tile (``None`` for no entry)."""
        ...

    def take(self, level: Level, coords: tuple[int, ...], pending: Any
             ) -> bytes | memoryview | None:
        """The bytes of a read started by :meth:`prefetch` (waits for them)."""
        ...

    def publish(self, header: Header, prefix: str, tables: Tables, lock: Any,
                policy: Policy, name: Any) -> Tables:
        """Make ``tables`` (and ``header``) the file's content atomically; return the tables
        as committed (a rewrite moves tiles)."""
        ...

    def rewrite(self, header: Header, prefix: str, tables: Tables, lock: Any,
                policy: Policy, name: Any) -> Tables:
        """Publish as a fresh copy without superseded bytes (``jnrrd.compact``)."""
        ...

    def abort(self) -> None:
        """Drop everything staged since the last commit."""
        ...

    def close(self) -> None:
        """Release files and handles."""
        ...


def put_whole(store: Any, key: str, data: bytes) -> None:
    """Replace the object ``key`` of a write store by ``data`` at once (a staged object:
    atomic replace on a local disk, one upload to an object store)."""
    staged = store.stage(key)
    try:
        staged.write(data)
        staged.commit()
    except BaseException:
        staged.abort()
        raise
