"""Where bytes live: the :class:`Store` protocol and its implementations.

A store holds objects under keys: ``'/'``-separated names relative to the store's root (a
header's ``data_file`` or a tile file name, as the header spells it). The tiling layer says
which key and byte range hold a tile (:mod:`jnrrd.tiling.locate`), a store fetches those bytes,
the engine decodes them; nothing here knows about headers, tiles or codecs.

- :mod:`.local`: files on the local disk (path confinement under the reader's policy, only
  regular files opened, memory maps and ``pread``);
- :mod:`.fileobj`: a caller's binary stream as a reader of one object;
- :mod:`.resolve`: a path, file object or URL → store, key and opened reader;
- :mod:`.writes`: the write half on the local disk (:class:`WriteStore`: objects put under
  fresh names, staged objects committed by atomic replace, ``fsync``), with
  :mod:`.writeback` (positional writes, in-kernel copies, the write-back flusher) and
  :mod:`.names` (fresh tokens, temporary names);
- :mod:`.atomic`, :mod:`.leftovers`: atomic replacement and the leftovers of interrupted
  writes.

A writer decides what goes where; it hands bytes to a :class:`WriteStore`. The order a tiled
write uses: external tiles are ``put`` under a fresh prefix (in any order, concurrently if
the store allows), ``sync``ed, and the header is committed last as a :class:`Staged` object;
an internal file is one staged object whose commit makes it visible at once.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["Staged", "Store", "WriteStore"]


@runtime_checkable
class Store(Protocol):
    """Objects under keys: the read methods every store has.

    Writers add ``put`` (a whole object) and staged objects with ``commit`` (write, then make
    visible at once); those write methods are declared next to these by the write side.
    """

    def get(self, key: str, *, limit: int | None = None) -> bytes | memoryview:
        """The whole object, at most ``limit`` bytes (memory follows what it holds, not
        ``limit``); ``FileNotFoundError`` when absent."""
        ...

    def get_ranges(self, key: str, ranges: Sequence[tuple[int, int]]
                   ) -> list[bytes | memoryview]:
        """The bytes ``start:stop`` of one object for each ``(start, stop)``, in order."""
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
    """A new object being written: invisible under its key until :meth:`commit`."""

    def write(self, data: Any) -> None:
        """Append ``data`` at the current position."""
        ...

    def write_at(self, data: memoryview, offset: int) -> None:
        """Write ``data`` at ``offset`` (safe from several threads at once)."""
        ...

    def commit(self) -> None:
        """Make the object visible under its key at once, replacing any old one (durably,
        unless the write asked otherwise)."""
        ...

    def abort(self) -> None:
        """Drop the object; the key's old object stays."""
        ...


@runtime_checkable
class WriteStore(Protocol):
    """The write methods of a store (the target of ``jnrrd.write``)."""

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

    def stage(self, key: str) -> Staged:
        """A new object for ``key``, visible only once committed."""
        ...

    def delete(self, key: str) -> None:
        """Remove the object ``key``."""
        ...

    def discard(self, prefix: str) -> None:
        """Remove everything under ``prefix`` (best effort)."""
        ...
