"""Where bytes live: the :class:`Store` protocol and its implementations.

A store holds objects under keys: ``'/'``-separated names relative to the store's root (a
header's ``data_file`` or a tile file name, as the header spells it). The tiling layer says
which key and byte range hold a tile (:mod:`jnrrd.tiling.locate`), a store fetches those bytes,
the engine decodes them; nothing here knows about headers, tiles or codecs.

- :mod:`.local`: files on the local disk (path confinement under the reader's policy, only
  regular files opened, memory maps and ``pread``);
- :mod:`.fileobj`: a caller's binary stream as a reader of one object;
- :mod:`.resolve`: a path, file object or URL → store, key and opened reader;
- :mod:`.atomic`, :mod:`.leftovers`: atomic replacement and the leftovers of interrupted
  writes.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Protocol, runtime_checkable

__all__ = ["Store"]


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
