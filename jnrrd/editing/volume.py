"""The writable volume: ``jnrrd.open(path, mode="r+")`` and ``jnrrd.create`` (docs/editing.md).

A :class:`WritableVolume` reads like any :class:`~jnrrd.Volume` (its own changes included)
and takes ``vol[selection] = array`` (any basic selection, NumPy broadcasting), ``append``,
``resize``, ``commit`` and ``abort``. Changed level-0 tiles are kept decoded in memory (a
tile read back only when the write covers part of it) up to ``dirty_bytes``, beyond which
the oldest are encoded and staged early. ``commit`` rebuilds the pyramid levels under what
changed (:mod:`.pyramid`), stages every changed tile and publishes them with the new header
through the layout (:mod:`.internal`, :mod:`.external`); ``abort`` drops it all. One thread
writes at a time; one writer at a time holds the volume (:mod:`jnrrd.storage.locks`).
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import warnings
from collections.abc import Sequence
from itertools import islice
from typing import Any, cast

import numpy as np

from .._threads import OrderedQueue, run_parallel
from ..codecs.compress import zstd_into
from ..engine.tiles import TileDecoder, TileEncoder, parse_checksum
from ..engine.volume import LevelView, Volume
from ..errors import ArgumentError, JnrrdWarning, UnsupportedError, where
from ..header import Header
from ..tiling.grid import AxisSel, normalize_selection
from ..tiling.levels import Level
from ..tiling.padding import all_padding
from ..tiling.spec import Tiling
from .ahead import Ahead
from .headers import stale_fields
from .info import external_bytes
from .layout import Counters
from .patches import Patches
from .pyramid import rebuild_levels, union
from .reshape import (
    append_to,
    drop_outside,
    pyramid_box,
    relevel,
    replace_tile,
    take_changed,
)
from .session import DIRTY_BYTES, EncodePlan, Session, Source
from .tables import Box, Tables, write_pieces

__all__ = ["DIRTY_BYTES", "Session", "WritableVolume"]
#: tiles encoded (in parallel) and staged at a time
_BATCH = 64
#: tiles of one write handled at a time (read back together, then written)
_PIECES = 256


class WritableVolume(Volume):
    """A volume open for writing (see the module doc)."""

    mode = "r+"
    _copies_stored_runs = False  # tiles changed in memory are newer than the stored bytes

    def __init__(self, header: Header, core: Any, tiling: Tiling, tables: Tables,
                 session: Session, *, index_order: str = "F") -> None:
        self._s = session
        self._committed = tables
        self._tables = tables.copy()
        self._dirty: dict[tuple[int, tuple[int, ...]], np.ndarray] = {}
        self._dirty_nbytes = 0
        #: changed level-0 voxels since the last commit, one box per level-0 tile
        self._dirty0: dict[tuple[int, ...], Box] = {}
        self._changed = False
        self._base = (Header(header), core, tiling)
        super().__init__(Header(header), tiling=tiling, core=core, policy=session.policy,
                         source=cast(Any, Source(self, getattr(session.layout, "remote",
                                                                False))),
                         name=session.name,
                         index_order=index_order, cache_bytes=0)
        if session.stats is not None:
            stats, algo = session.stats
        else:
            meta = tiling.metadata or ()
            stats = any(isinstance(m, dict) and "min" in m for m in meta)
            algos = [c[0] for m in meta if (c := parse_checksum(m)) is not None]
            algo = algos[0] if algos else None
        self._encoder = TileEncoder(
            EncodePlan(list(tiling.codecs), core.type_name, tiling.padding_value,
                        tile_stats=stats, checksum=algo),
            self._decoder.chain_dtype if self._decoder is not None else self._dtype)
        self._fill = self._fill_value()
        self._ahead = Ahead(self._encode)
        self._patches = Patches()

    # -- state ------------------------------------------------------------------------------
    @property
    def counters(self) -> Counters:
        """Bytes and requests moved through the storage layer since the volume was opened
        (tile reads, tile and header writes, journals)."""
        return self._s.layout.counters

    @property
    def uncommitted(self) -> bool:
        """Whether there are changes since the last commit."""
        return self._changed

    @property
    def _tiled(self) -> Tiling:
        assert self._tiling is not None
        return self._tiling

    def _check_writable(self) -> None:
        self._check_open()

    def _rebind(self, header: Header, core: Any, tiling: Tiling) -> None:
        """Take a new header, core fields and tiling (a resize, a commit, an abort)."""
        meta = self._tables.metadata()
        tiling = dataclasses.replace(tiling, metadata=tuple(meta) if meta is not None else None)
        self._header, self._core, self._tiling = header, core, tiling
        self._levels = tiling.levels
        self._decoder = TileDecoder(tiling, core, self._source, self._policy, self.name)
        self._level = self._levels[0]
        self.levels = (self, *(LevelView(self, lv) for lv in self._levels[1:]))

    # -- writing ----------------------------------------------------------------------------
    def __setitem__(self, key: Any, value: Any) -> None:
        """Write ``value`` (broadcast like NumPy) to a basic selection of level 0."""
        self._check_writable()
        sel = normalize_selection(key, self.shape, self.name)
        counts = tuple(s.count for s in sel if not s.drop)
        if isinstance(value, (np.ndarray, np.generic)):
            arr = np.asarray(value).astype(self._dtype, copy=False)
        else:
            arr = np.array(value, dtype=self._dtype)  # Python numbers: NumPy's range checks
        arr = np.broadcast_to(arr, counts)
        for axis, s in enumerate(sel):
            if s.drop:
                arr = np.expand_dims(arr, axis)
        arr = arr[tuple(slice(None, None, -1) if s.reverse else slice(None) for s in sel)]
        if self.c_order:
            sel, arr = sel[::-1], arr.T
        self._write0(tuple(AxisSel(s.start, s.step, s.count) for s in sel), arr)

    def _write0(self, sel: tuple[AxisSel, ...], values: np.ndarray) -> None:
        level = self._levels[0]
        grid = level.grid
        bbox = tuple((s.start, s.last + 1) for s in sel)
        pyramid = any(lv.stored for lv in self._levels[1:])
        self._changed = True
        pieces = write_pieces(grid, sel)
        while batch := list(islice(pieces, _PIECES)):  # memory: a batch of tiles at a time
            for p in batch:
                self._ahead.touched((0, p.coords))
                tile = self._dirty.get((0, p.coords))
                if tile is None and not p.covered:  # part of a tile not read yet: later
                    self._dirty_nbytes += self._patches.add(p.coords, p.src, values[p.dst])
                else:
                    if tile is None:  # covered whole: earlier partial writes are moot
                        self._dirty_nbytes -= self._patches.drop(p.coords)
                        tile = self._tile_for_write(level, p.coords, True)
                    tile[p.src] = values[p.dst]
                if not pyramid:
                    continue  # the changed voxels matter only to the levels above
                core = grid.core(p.coords)
                box = tuple((max(b0, c.start), min(b1, c.stop))
                            for (b0, b1), c in zip(bbox, core, strict=True))
                if all(lo < hi for lo, hi in box):
                    self._dirty0[p.coords] = union(self._dirty0.get(p.coords), box)
            self._evict()
        self._ahead.tick(level, self._dirty)

    def _tile_for_write(self, level: Level, coords: tuple[int, ...], covered: bool
                        ) -> np.ndarray:
        """The changed tile in memory: read back (and merged) only when the write does not
        cover the tile's part inside the volume."""
        key = (level.index, coords)
        tile = self._dirty.get(key)
        if tile is not None:
            return tile
        tile = (self._writable(level, coords, None) if covered
                else self._read_writable(level, coords))
        self._dirty[key] = tile
        self._dirty_nbytes += tile.nbytes
        return tile

    def _writable(self, level: Level, coords: tuple[int, ...], old: np.ndarray | None
                  ) -> np.ndarray:
        """A tile to change: a copy of ``old`` (its positions outside the volume set to the
        padding value), or all padding."""
        grid = level.grid
        if old is not None and all(lo >= 0 and hi <= n for (lo, hi), n in zip(
                grid.stored_bounds(coords), grid.shape, strict=True)):
            return np.array(old, dtype=self._dtype, order="F")  # all inside: one copy
        tile = np.full(grid.stored_shape(coords), self._fill, dtype=self._dtype, order="F")
        if old is not None:
            inside = grid.valid_in_stored(coords)
            tile[inside] = old[inside]
        return tile

    def _read_writable(self, level: Level, coords: tuple[int, ...], fetched: Any = None
                       ) -> np.ndarray:
        """A stored tile as a tile to change. A zstd tile inside the volume is decoded
        straight into the new array (no copy, no second buffer)."""
        dec, grid = self._decoder, level.grid
        assert dec is not None
        if dec.simple != "zstd" or dec.stored_dtype != self._dtype or not all(
                lo >= 0 and hi <= n for (lo, hi), n in zip(grid.stored_bounds(coords),
                                                          grid.shape, strict=True)):
            return self._writable(level, coords, dec.decode(level, coords, fetched=fetched))
        data = dec.stored_bytes(level, coords, fetched)
        if data is None:
            return self._writable(level, coords, None)
        index = level.first + grid.index(coords)
        dec._verify(index, data)
        tile = np.empty(grid.stored_shape(coords), self._dtype, order="F")
        zstd_into(data, memoryview(cast(Any, tile.T)).cast("B"), exact=True,
                  what=f"{dec.where}tile {index}: ")
        return tile

    def _patched(self, coords: tuple[int, ...], fetched: Any = None) -> np.ndarray:
        """A level-0 tile with partial writes pending, read back and patched (the pending
        writes are kept: the caller installs the tile and drops them)."""
        return self._patches.apply(coords, self._read_writable(self._levels[0], coords,
                                                               fetched))

    def _materialize(self, coords: list[tuple[int, ...]]) -> None:
        """Read back and patch (in parallel) tiles with partial writes pending."""
        for c, tile in self._read_tiles(self._levels[0], coords, writable=True).items():
            assert tile is not None
            self._dirty[(0, c)] = tile
            self._dirty_nbytes += tile.nbytes - self._patches.drop(c)

    def _read(self, level: Level, sel: tuple[AxisSel, ...], out: Any = None) -> np.ndarray:
        if len(self._patches):  # a read sees the writes: bring the patched tiles in
            self._materialize(self._patches.coords())
        return super()._read(level, sel, out)

    def _read_tiles(self, level: Level, coords: list[tuple[int, ...]], *,
                    writable: bool = False) -> dict[tuple[int, ...], np.ndarray | None]:
        """Stored tiles, decoded in parallel (fetched at once from an object store);
        ``writable``: level-0 tiles to change, with their pending writes applied."""
        assert self._decoder is not None
        dec = self._decoder
        fetched = dec.prefetch(level, coords) if dec.remote and coords else None
        out: list[Any] = [None] * len(coords)

        def job(i: int) -> Any:
            def run() -> None:
                out[i] = (self._patched(coords[i], fetched) if writable
                          else dec.decode(level, coords[i], fetched=fetched))
            return run

        run_parallel([job(i) for i in range(len(coords))])
        return dict(zip(coords, out, strict=True))

    def _stored(self, level: Level, coords: tuple[int, ...]) -> np.ndarray | None:
        """A tile as its current entry stores it (None: sparse)."""
        assert self._decoder is not None
        return self._decoder.decode(level, coords)

    def _decoded(self, level: Level, coords: tuple[int, ...], planes: int | None = None,
                 fetched: Any = None) -> np.ndarray | None:
        if level.index == 0 and coords in self._patches:  # (read_tile: one tile)
            self._materialize([coords])
        tile = self._dirty.get((level.index, coords))
        if tile is not None:
            return tile
        return super()._decoded(level, coords, planes, fetched)

    def _stored_bytes(self, level: Level) -> int:
        if not level.stored or self._tables.external:
            return 0 if not level.stored else external_bytes(self, level)
        t = self._tables.entries[level.index]
        return int(t[t[:, 0] >= 0, 1].sum())

    def _evict(self) -> None:
        """Encode and stage the oldest changed level-0 tiles beyond the memory budget."""
        if self._dirty_nbytes <= self._s.dirty_bytes:
            return
        tiles: list[tuple[tuple[int, ...], np.ndarray | None]] = [
            (c, t) for (li, c), t in self._dirty.items() if li == 0]
        tiles += [(c, None) for c in self._patches.coords()]  # read back when stored
        self._store(self._levels[0], tiles[:max(1, len(tiles) // 2)])

    def _store(self, level: Level,
               items: Sequence[tuple[tuple[int, ...], np.ndarray | None]]) -> None:
        """Encode tiles (in parallel), stage them, point the tables at them: a batch is
        staged on a background thread while the next one is encoded. A tile ``None`` has
        partial writes pending: it is read back, patched and encoded in one task."""
        staging = OrderedQueue() if len(items) > _BATCH else None
        failed = True
        try:
            for start in range(0, len(items), _BATCH):
                batch = items[start:start + _BATCH]
                # tiles encoded ahead (docs/editing.md, "Memory") are not encoded again
                encoded: list[Any] = [self._ahead.take((level.index, c)) for c, _ in batch]
                dec = self._decoder
                later = [c for c, t in batch if t is None]
                fetched = dec.prefetch(level, later) if dec and dec.remote and later else None
                run_parallel([self._encode_job(encoded, i, level, c, t, fetched)
                              for i, (c, t) in enumerate(batch) if encoded[i] is None])
                put = functools.partial(self._put_all, level, batch, encoded)
                if staging is None:
                    put()
                else:
                    staging.submit(put)
            if staging is not None:
                staging.drain()
            failed = False
        finally:
            if staging is not None:
                staging.close(failed=failed)

    def _put_all(self, level: Level,
                 batch: Sequence[tuple[tuple[int, ...], np.ndarray | None]],
                 encoded: list[Any]) -> None:
        for (coords, _), (data, meta) in zip(batch, encoded, strict=True):
            self._put(level, coords, data, meta)

    def _encode_job(self, out: list[Any], i: int, level: Level, coords: tuple[int, ...],
                    tile: np.ndarray | None, fetched: Any = None) -> Any:
        def run() -> None:
            whole = self._patched(coords, fetched) if tile is None else tile
            out[i] = self._encode(level, coords, whole)
        return run

    def _encode(self, level: Level, coords: tuple[int, ...], tile: np.ndarray
                ) -> tuple[Any, dict[str, Any]]:
        grid = level.grid
        core = tile[grid.stored_from_core(coords)]
        first = core[(slice(0, 1),) * core.ndim]  # most tiles differ from padding at once
        if all_padding(first, self._fill) and all_padding(core, self._fill):
            return None, self._encoder.metadata(core, None)  # all padding: stays sparse
        data: Any = self._encoder.encode(tile, level.first + grid.index(coords))
        return data, self._encoder.metadata(core, data)

    def _put(self, level: Level, coords: tuple[int, ...], data: Any,
             meta: dict[str, Any]) -> None:
        layout, index = self._s.layout, level.grid.index(coords)
        old = self._tables.get(level.index, index)
        new = None if data is None else layout.stage(level, coords, index, data)
        if old is not None and old != new:
            layout.retire(level, coords, index, old)
        self._tables.set(level.index, index, new, meta)
        dec = self._decoder
        if dec is not None and dec.checksums is not None:
            dec.checksums[level.first + index] = parse_checksum(meta)
        tile = self._dirty.pop((level.index, coords), None)
        if tile is not None:
            self._dirty_nbytes -= tile.nbytes
        if level.index == 0:
            self._dirty_nbytes -= self._patches.drop(coords)

    def append(self, data: Any, axis: int | None = None) -> None:
        """Grow ``axis`` (default: the last header axis) by ``data``'s extent along it and
        write ``data`` there. ``data`` has the volume's shape on every other axis, or one
        axis less (one slice)."""
        self._check_writable()
        append_to(self, data, axis)

    def resize(self, shape: Sequence[int]) -> None:
        """Grow or shrink level 0 to ``shape``: new voxels read as the fill value
        (``tile:padding_value``), tiles beyond the new shape are dropped."""
        self._check_writable()
        new = tuple(operator.index(n) for n in shape)
        if len(new) != self.ndim or any(n < 1 for n in new):
            raise ArgumentError(f"{where(self.name, 'resize')}expected {self.ndim} sizes, "
                                f"each ≥ 1, got {tuple(shape)}")
        if self.c_order:
            new = new[::-1]
        old_levels, old0 = self._levels, self._levels[0].shape
        if new == old0:
            return
        if len(self._patches):  # tiles with pending writes take their new extent in memory
            self._materialize(self._patches.coords())
        levels = relevel(old_levels, new, self._policy, self.name)
        kept = take_changed(self, old_levels, levels)
        drop_outside(self, old_levels, levels)
        layout: Any = self._s.layout
        pattern = getattr(layout, "pattern", None) if self._tables.external else None
        self._tables = self._tables.remapped(
            levels, layout.name if pattern and "{i}" in pattern else None)
        header = Header(self._header)
        header["sizes"] = list(new)
        core = dataclasses.replace(self._core, sizes=new)
        tiling = dataclasses.replace(self._tiled, levels=levels,
                                     nstored=sum(lv.grid.ntiles for lv in levels if lv.stored))
        self._rebind(header, core, tiling)
        for (li, coords), (was_box, values) in kept.items():
            replace_tile(self, levels[li], coords, was_box, values)
        for axis in range(len(new)):
            if new[axis] != old0[axis]:
                box = pyramid_box(levels, old0, new, axis)  # None without stored levels
                if box is not None:
                    self._mark_dirty(box)
        self._changed = True
        self._evict()

    def _mark_dirty(self, box: Box) -> None:
        """Record level-0 voxels the pyramid must compute again."""
        grid = self._levels[0].grid
        region = tuple(slice(lo, hi) for lo, hi in box)
        for coords in grid.tiles_in_region(region):
            core = grid.core(coords)
            part = tuple((max(b0, c.start), min(b1, c.stop))
                         for (b0, b1), c in zip(box, core, strict=True))
            self._dirty0[coords] = union(self._dirty0.get(coords), part)

    # -- commits ----------------------------------------------------------------------------
    def commit(self) -> None:
        """Make every change since the last commit visible at once (atomically: after a
        crash the file is at this commit or the last one). A failed commit aborts."""
        self._check_writable()
        if not self._changed:
            return
        s = self._s
        try:
            rebuild_levels(self)
            level0 = self._levels[0]
            tiles: list[tuple[tuple[int, ...], np.ndarray | None]] = [
                (c, t) for (li, c), t in self._dirty.items() if li == 0]
            tiles += [(c, None) for c in self._patches.coords()]
            self._store(level0, sorted(tiles, key=lambda ct: level0.grid.index(ct[0])))
            header = Header(self._header)
            stale_fields(header, s.prefix, self.name)
            committed = s.layout.publish(header, s.prefix, self._tables, s.lock,
                                         self._policy, self.name)
        except BaseException:
            self.abort()
            raise
        self._committed, self._tables = committed, committed.copy()
        self._reset()
        self._take_header(s.layout.header or header)

    def _reset(self) -> None:
        self._ahead.clear()
        self._patches.clear()
        self._dirty.clear()
        self._dirty_nbytes = 0
        self._dirty0.clear()
        self._changed = False

    def abort(self) -> None:
        """Drop every change since the last commit (the file never saw them)."""
        self._check_writable()
        self._s.layout.abort()
        self._tables = self._committed.copy()
        self._reset()
        header, core, tiling = self._base
        self._rebind(Header(header), core, tiling)

    def close(self) -> None:
        """Release the file and the lock; uncommitted changes are dropped, with a warning
        (commit first, or use the volume as a context manager)."""
        if self._closed:
            return
        try:
            if self._changed:
                warnings.warn(f"{where(self.name)}closed with uncommitted changes: they were "
                              "dropped (call vol.commit() first)", JnrrdWarning, stacklevel=2)
                self.abort()
        finally:
            try:
                self._s.layout.close()
            finally:
                self._s.lock.release()
                super().close()

    def __enter__(self) -> WritableVolume:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None:
                self.commit()
            elif not self._closed:
                self.abort()
        finally:
            self.close()

    def _compact(self) -> None:
        """Commit, then rewrite the file without superseded bytes (``jnrrd.compact``)."""
        self.commit()
        s = self._s
        header = Header(self._header)
        stale_fields(header, s.prefix, self.name)
        self._committed = s.layout.rewrite(header, s.prefix, self._tables, s.lock,
                                           self._policy, self.name)
        self._tables = self._committed.copy()
        self._take_header(s.layout.header or header)

    def _take_header(self, header: Header) -> None:
        """The committed header becomes the volume's (and the state an abort returns to)."""
        self._base = (Header(header), self._core, self._tiled)
        self._rebind(Header(header), self._core, self._tiled)

    def __reduce__(self) -> tuple[Any, ...]:
        raise UnsupportedError(f"{where(self.name)}a volume open for writing cannot be "
                               "pickled; pickle one opened for reading")
