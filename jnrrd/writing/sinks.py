"""Where a tiled write's encoded tiles go (the bytes themselves go through the storage layer,
:mod:`jnrrd.storage.writes`).

Internal files (:class:`DirectSink`): one staged object; level-0 tiles straight into it after
reserved header space (:func:`~jnrrd.writing.layout.header_space`), coarser levels spooled and
appended, the header written last with the offsets of docs/format.md#tile-offsets
(:mod:`jnrrd.writing.layout`), then committed. External datasets (:class:`ExternalSink`): one object
per tile under a fresh prefix (docs/format.md#atomic-writes); the header is committed last by the
writer.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import IO, Any

import numpy as np

from .._threads import OrderedQueue
from ..storage import WriteStore, stem
from ..tiling.levels import Level, raw_stored_sizes
from ..tiling.locate import expand_pattern
from .layout import TilePlan, header_space, internal_layout

__all__ = ["DirectSink", "ExternalSink", "Tables"]


class Tables:
    """Sizes and metadata per stored tile (what :func:`~jnrrd.writing.layout.fixed_point`
    reads)."""

    def __init__(self, sizes: list[int | None], meta: list[dict[str, Any]]) -> None:
        self.sizes, self.meta = sizes, meta
        #: where rows are stored in the background (set by the writer); None: in the caller
        self.later: OrderedQueue | None = None

    def record(self, level: Level, coords: tuple[int, ...], data: Any,
               meta: dict[str, Any]) -> bool:
        """Note a tile's size and metadata; False for a sparse tile (nothing to store)."""
        g = level.first + level.grid.index(coords)
        self.meta[g] = meta
        if data is None:
            return False
        self.sizes[g] = len(data)
        return True

    def tile_offsets(self, level: Level) -> np.ndarray | None:
        """File offsets of ``level``'s tiles when known before they are encoded (then tiles
        are written in place by :meth:`write_at` and noted with :meth:`written`); None: tiles
        go through :meth:`put`, in order."""
        return None

    def write_at(self, data: memoryview, offset: int) -> None:
        """Write a tile at its :meth:`tile_offsets` offset (from any thread)."""
        raise AssertionError("this sink has no positional tiles")

    def written(self, level: Level, coords: tuple[int, ...], nbytes: int,
                meta: dict[str, Any]) -> None:
        """Note a tile of ``nbytes`` written in place at its :meth:`tile_offsets` offset."""
        raise AssertionError("this sink has no positional tiles")


class ExternalSink(Tables):
    """External storage: one object per tile under a fresh prefix beside the header."""

    def __init__(self, plan: TilePlan, store: WriteStore, key: str, token: str) -> None:
        super().__init__([None] * plan.nstored, [{} for _ in range(plan.nstored)])
        self.plan = plan
        self.store = store
        self.dir_name = f"{stem(key)}.{token}.tiles"
        #: the local path of the tile directory (what the leftovers sweep keeps)
        self.dir = store.path(self.dir_name)
        store.reserve(self.dir_name)

    def tile_key(self, level: Level, coords: tuple[int, ...]) -> str:
        """The key of a tile's object in the store."""
        rel = expand_pattern(self.plan.pattern or "", coords, level.index,
                             level.grid.index(coords))
        return f"{self.dir_name}/{rel}"

    def put(self, level: Level, coords: tuple[int, ...], data: Any,
            meta: dict[str, Any]) -> None:
        """Store one encoded tile (``None``: sparse)."""
        if not self.record(level, coords, data, meta):
            return
        self.store.put(self.tile_key(level, coords), data)

    def fsync_all(self) -> None:
        """Make every stored tile durable (before the header is committed)."""
        self.store.sync(self.dir_name)

    def close(self, *, failed: bool) -> None:
        """After a failure: remove the tiles stored so far."""
        if failed:
            self.store.discard(self.dir_name)


class DirectSink(Tables):
    """Internal storage without a second copy of level 0.

    Level-0 tiles go straight into the output file after space reserved for the header;
    coarser levels (an eighth of the data, or less) are spooled and appended; the header is
    written into its space last. When every tile size is known in advance (raw tiles, no
    statistics) the reservation is the exact fixed point of docs/format.md#tile-offsets, so tiles
    follow the header without a gap. Otherwise the space is an upper bound and the gap is
    zero-filled (docs/format.md#tile-offsets allows a gap; it is never read). Should a tile ever
    outgrow the bound, the file is rewritten with the exact layout.
    """

    def __init__(self, plan: TilePlan, store: WriteStore, key: str, token: str,
                 build: Callable[..., bytes], itemsize: int, exact: bool) -> None:
        super().__init__([None] * plan.nstored, [{} for _ in range(plan.nstored)])
        self.plan, self.build = plan, build
        self.out = store.stage(key, token=token, random_access=True, write_back=True)
        self._spools: dict[int, IO[bytes]] = {}
        for lv in plan.levels[1:]:
            if lv.stored:
                self._spools[lv.index] = self.out.scratch(f".level{lv.index}")
        self.start = header_space(plan, build, itemsize, exact)
        self.out.file.seek(self.start)
        self._at: np.ndarray | None = None
        if exact:
            # exact layout: every stored tile is contiguous from start, in global order
            sizes = raw_stored_sizes(plan.levels, itemsize)
            self._at = self.start + np.concatenate([[0], np.cumsum(sizes)[:-1]])

    def tile_offsets(self, level: Level) -> np.ndarray | None:
        if self._at is None or not level.stored:
            return None
        return self._at[level.first:level.first + level.grid.ntiles]

    def write_at(self, data: memoryview, offset: int) -> None:
        self.out.write_at(data, offset)

    def written(self, level: Level, coords: tuple[int, ...], nbytes: int,
                meta: dict[str, Any]) -> None:
        g = level.first + level.grid.index(coords)
        self.meta[g] = meta
        self.sizes[g] = nbytes
        self.out.wrote(nbytes)

    def put(self, level: Level, coords: tuple[int, ...], data: Any,
            meta: dict[str, Any]) -> None:
        """Store one encoded tile (``None``: sparse). Calls arrive in linear order per level."""
        if not self.record(level, coords, data, meta):
            return
        if level.index:
            self._spools[level.index].write(data)
            return
        self.out.write(data)

    def fsync_all(self) -> None:
        """Everything is flushed by the commit."""

    def finish(self, quality: list[Any] | None) -> None:
        """Append the spooled levels and write the header (then :meth:`commit`)."""
        f = self.out.file
        pos = f.seek(0, os.SEEK_END)
        pos = max(pos, self.start)
        for lv in self.plan.levels[1:]:
            if lv.stored:
                spool = self._spools[lv.index]
                spool.flush()
                size = spool.seek(0, os.SEEK_END)
                f.seek(pos)
                self.out.append(spool, size)
                pos += size
        header, offsets, fits = internal_layout(self.plan, self, self.build, quality,
                                                self.start)
        if not fits:
            # A tile outgrew the reserved header bound: lay the file out again, exactly.
            first = next((o for o in offsets if o >= 0), len(header))
            self.out.relayout(header, first, self.start)
            return
        f.seek(0)
        f.write(header)
        f.write(b"\0" * (self.start - len(header)))

    def commit(self) -> None:
        """Make the finished file visible under the target (fsync, replace, directory
        fsync)."""
        self.out.commit()

    def close(self, *, failed: bool) -> None:
        """Close the files; after a failure, remove them."""
        if failed:
            self.out.abort()
        else:
            self.out.close()
