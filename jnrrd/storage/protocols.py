"""The protocols every store implements: :class:`Store` (the read methods), :class:`WriteStore`
(the write methods) and :class:`Staged` (a new object, invisible until committed).

A writer decides what goes where; it hands bytes to a :class:`WriteStore`. The order a tiled
write uses: external tiles are ``put`` under a fresh prefix (in any order, concurrently if
the store allows), ``sync``ed, and the header is committed last as a :class:`Staged` object;
an internal file is one staged object whose commit makes it visible at once.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import IO, Any, Protocol, runtime_checkable

__all__ = ["Staged", "Store", "WriteStore"]


@runtime_checkable
class Store(Protocol):
    """Objects under keys: the read methods every store has.

    Writers add ``put`` (a whole object) and staged objects with ``commit`` (write, then make
    visible at once); those write methods are declared next to these by the write side.
    """

    def get(self, key: str, *, limit: int | None = None) -> bytes | bytearray | memoryview:
        """The whole object, at most ``limit`` bytes (memory follows what it holds, not
        ``limit``); ``FileNotFoundError`` when absent."""
        ...

    def get_ranges(self, key: str, ranges: Sequence[tuple[int, int | None]], *,
                   field: str = "data_file", limit: int | None = None, wait: bool = True,
                   out: Sequence[Any] | None = None) -> list[Any]:
        """The bytes ``start:stop`` of one object for each ``(start, stop)``, in order: the
        one read seam (:mod:`.objects`). ``stop`` ``None``: to the object's end, at most
        ``limit`` bytes; ``wait=False``: pending buffers at once (``result()``); ``out``:
        read into these buffers."""
        ...

    def size(self, key: str) -> int:
        """The object's size in bytes; ``FileNotFoundError`` when absent."""
        ...

    def exists(self, key: str) -> bool:
        """Whether the object exists (and can hold data)."""
        ...

    def version(self, key: str) -> Hashable:
        """A token that changes when the object is replaced or rewritten."""
        ...


@runtime_checkable
class Staged(Protocol):
    """A new object being written: invisible under its key until :meth:`commit`.

    An internal file's writer also uses the object as a local file: :attr:`file` (sequential
    writes and seeks), :meth:`scratch` files appended with :meth:`append`, :meth:`relayout`,
    :meth:`wrote`. A remote store backs its staged objects with a local temporary file and
    uploads it at :meth:`commit`. As a context manager it commits when the block succeeds and
    drops the object otherwise.
    """

    file: IO[bytes]

    def write(self, data: Any) -> None:
        """Append ``data`` at the current position."""
        ...

    def write_at(self, data: memoryview, offset: int) -> None:
        """Write ``data`` at ``offset`` (safe from several threads at once)."""
        ...

    def wrote(self, nbytes: int) -> None:
        """Note ``nbytes`` written by :meth:`write_at` (the local store starts writing them
        back to disk now and then)."""
        ...

    def scratch(self, suffix: str) -> IO[bytes]:
        """A scratch file that goes with this object (removed when it is committed or
        dropped)."""
        ...

    def append(self, src: IO[bytes], size: int) -> None:
        """Copy the first ``size`` bytes of ``src`` to the position of :attr:`file`."""
        ...

    def relayout(self, head: bytes, first: int, tail_from: int) -> None:
        """Commit instead ``head``, zeros up to ``first``, then this object's bytes from
        ``tail_from`` on."""
        ...

    def commit(self) -> None:
        """Make the object visible under its key at once, replacing any old one (durably,
        unless the write asked otherwise)."""
        ...

    def abort(self) -> None:
        """Drop the object; the key's old object stays."""
        ...

    def close(self) -> None:
        """Close its files (after :meth:`commit` or before :meth:`abort`)."""
        ...

    def __enter__(self) -> Staged:
        """The object itself: the block writes it."""
        ...

    def __exit__(self, kind: Any, value: Any, tb: Any) -> None:
        """Commit when the block succeeded, else abort; close either way."""
        ...


@runtime_checkable
class WriteStore(Protocol):
    """The write methods of a store (the target of ``jnrrd.write``).

    ``put`` may return before the object is stored (a remote store may upload tiles
    concurrently); :meth:`sync` waits until everything put under a prefix is stored durably,
    and only then does a writer commit the header that names those objects.
    """

    def path(self, key: str) -> str:
        """Where ``key`` lives (a local path, or a URL), for messages and the leftovers
        sweep."""
        ...

    def put(self, key: str, data: Any) -> None:
        """Write a whole object under a fresh key (nobody reads it before a header names it;
        not atomic, durable only after :meth:`sync`)."""
        ...

    def reserve(self, prefix: str) -> None:
        """Claim a fresh prefix for :meth:`put` (``FileExistsError`` when taken)."""
        ...

    def sync(self, prefix: str) -> None:
        """Make every object put under ``prefix`` durable."""
        ...

    def stage(self, key: str, *, token: str | None = None, random_access: bool = False,
              write_back: bool = False) -> Staged:
        """A new object for ``key``, visible only once committed."""
        ...

    def append_object(self, staged: Staged, key: str, size: int) -> None:
        """Append the first ``size`` bytes of the object ``key`` to ``staged``."""
        ...

    def delete(self, key: str) -> None:
        """Remove the object ``key``."""
        ...

    def discard(self, prefix: str) -> None:
        """Remove everything under ``prefix`` (best effort)."""
        ...

    def owned(self, key: str) -> list[str]:
        """The fresh data files and tile prefixes beside ``key`` that its current header
        references and a write to ``key`` made (:mod:`.ownership`): what a rewrite removes
        once its new header is in place. Called before the new header is committed."""
        ...

    def tidy(self, key: str, *, keep: Iterable[str] = (), owned: Iterable[str] = ()
             ) -> list[str]:
        """After ``key``'s new header is in place (or before a write, without ``owned``):
        remove the names in ``owned`` (what :meth:`owned` returned before the header was
        replaced), except the keys in ``keep``; a local store also removes ``key``'s
        temporary files. Nothing else is removed, however it is named. Best effort; returns
        what was removed."""
        ...
