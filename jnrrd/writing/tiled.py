"""The tiled writer: bounded memory, parallel encoding, atomic replacement.

The source (a NumPy array, a ``np.memmap`` or any array-like with ``shape``/``dtype``/
``__getitem__``) is read one slab of tiles at a time along the slowest tiled axis. Tiles are
encoded on the shared thread pool and handed to a sink (:mod:`jnrrd.writing.sinks`), which
stores them through the target's write store (:mod:`jnrrd.storage.writes`): internal tiles go
into one staged object, the header written last with the fixed-point offsets of
docs/format.md#tile-offsets, then committed; external tiles are put under a fresh prefix, synced,
and the header committed last. Pyramid levels are built in the same pass
(:class:`jnrrd.pyramid.PyramidBuilder`) when the last axis is tiled.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .._threads import OrderedQueue, Running
from ..engine.tiles import TileEncoder
from ..storage import fresh_token, target_store
from ..tiling.grid import TileGrid
from ..tiling.levels import Level
from ..tiling.padding import all_padding, value_fill
from .layout import TilePlan
from .quality import quality_by_region
from .sinks import DirectSink, ExternalSink
from .source import FileOrder, read_dtype, tile_dtype, values

__all__ = ["write_tiled"]


_BUFFERS = threading.local()
#: largest tile kept in a thread's reusable buffer between writes
_BUFFER_BYTES = 16 << 20


def _tile_buffer(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """This thread's reusable F-ordered tile buffer (no page faults on every tile); tiles
    above ``_BUFFER_BYTES`` get fresh memory instead of being held between writes."""
    if math.prod(shape) * dtype.itemsize > _BUFFER_BYTES:
        return np.empty(shape, dtype, order="F")
    key = (shape, dtype)
    buf = getattr(_BUFFERS, "tile", None)
    if buf is None or buf[0] != key:
        buf = _BUFFERS.tile = (key, np.empty(shape, dtype, order="F"))
    return buf[1]


def _stored_tile(slab: np.ndarray, slab_lo: int, axis: int, grid: TileGrid,
                 coords: tuple[int, ...], fill: Any, reuse: bool = False) -> np.ndarray:
    """Cut one stored tile (F order, stored extent, padding filled) out of a slab whose
    ``axis`` starts at volume index ``slab_lo`` (into this thread's buffer with ``reuse``)."""
    bounds = grid.stored_bounds(coords)
    shape = tuple(hi - lo for lo, hi in bounds)
    src, dst, partial = [], [], False
    for a, (lo, hi) in enumerate(bounds):
        n = grid.shape[a]
        vlo, vhi = max(lo, 0), min(hi, n)
        off = slab_lo if a == axis else 0
        src.append(slice(vlo - off, vhi - off))
        dst.append(slice(vlo - lo, vhi - lo))
        partial |= (vlo, vhi) != (lo, hi)
    if not partial and not reuse:
        return np.asfortranarray(slab[tuple(src)])
    if reuse:
        tile = _tile_buffer(shape, slab.dtype)
        if partial:
            tile.fill(fill)
    else:
        tile = np.full(shape, fill, dtype=slab.dtype, order="F")
    tile[tuple(dst)] = slab[tuple(src)]
    return tile


def _row_coords(grid: TileGrid, t: int) -> list[tuple[int, ...]]:
    """Coordinates of the tiles whose slowest tiled coordinate is ``t`` (linear order)."""
    from itertools import product

    inner = [range(g) for g in grid.grid[:-1]]
    return [(*tuple(reversed(rev)), t) for rev in product(*reversed(inner))]


def row_bounds(grid: TileGrid, t: int) -> tuple[int, int]:
    """Volume range (with halo, clipped) that tile row ``t`` needs along the slowest tiled axis."""
    size, o, n = grid.tile[-1], grid.overlap[-1], grid.shape[grid.axes[-1]]
    return max(0, t * size - o), min(n, (t + 1) * size + o)


def write_level(plan: TilePlan, enc: TileEncoder, sink: ExternalSink, level: Level,
                read: Callable[[tuple[slice, ...]], np.ndarray], fill: Any,
                on_core_slab: Callable[[np.ndarray], None] | None = None,
                tick: Callable[[int], None] | None = None) -> None:
    """Encode and store every tile of ``level`` from ``read`` (level voxels), row by row."""
    grid = level.grid
    axis = grid.axes[-1]
    for t in range(grid.grid[-1]):
        lo, hi = row_bounds(grid, t)
        key = tuple(slice(lo, hi) if a == axis else slice(0, m) for a, m in enumerate(grid.shape))
        write_row(plan, enc, sink, level, t, lo, read(key), fill, on_core_slab, tick)


def write_row(plan: TilePlan, enc: TileEncoder, sink: ExternalSink, level: Level, t: int, lo: int,
              slab: np.ndarray, fill: Any,
              on_core_slab: Callable[[np.ndarray], None] | None = None,
              tick: Callable[[int], None] | None = None) -> None:
    """Encode (in parallel) and store the tiles of row ``t`` from its slab (halo included)."""
    grid = level.grid
    axis = grid.axes[-1]
    coords = _row_coords(grid, t)
    results: list[Any] = [None] * len(coords)
    at = sink.tile_offsets(level) if enc.raw_native(slab.dtype) else None

    def job(i: int, c: tuple[int, ...]) -> Callable[[], None]:
        if at is not None:
            return positional(i, c, at)

        def run() -> None:
            tile = _stored_tile(slab, lo, axis, grid, c, fill)
            core = tile[grid.stored_from_core(c)]
            g = level.first + grid.index(c)
            if plan.sparse and all_padding(core, fill):
                results[i] = (None, enc.metadata(core, None))
                return
            data = enc.encode(tile, g)
            results[i] = (data, enc.metadata(core, data))
        return run

    def positional(i: int, c: tuple[int, ...], at: np.ndarray) -> Callable[[], None]:
        # Raw tiles at offsets known in advance: cut into a reused buffer, written in place.
        def run() -> None:
            tile = _stored_tile(slab, lo, axis, grid, c, fill, reuse=True)
            data = tile.T.data.cast("B")
            sink.write_at(data, int(at[grid.index(c)]))
            results[i] = (len(data), enc.metadata(tile[grid.stored_from_core(c)], data))
        return run

    running = Running([job(i, c) for i, c in enumerate(coords)])
    if on_core_slab is not None:
        # The pyramid consumes this row (NumPy reductions release the GIL) while the pool
        # encodes its tiles: both cores stay busy.
        size = grid.tile[-1]
        core_lo, core_hi = t * size, min((t + 1) * size, grid.shape[axis])
        sl = tuple(slice(core_lo - lo, core_hi - lo) if a == axis else slice(None)
                   for a in range(slab.ndim))
        try:
            on_core_slab(slab[sl])
        except BaseException:
            running.wait(raise_errors=False)
            raise
    running.wait()

    def store() -> None:
        for c, (data, meta) in zip(coords, results, strict=True):
            if at is not None:
                sink.written(level, c, data, meta)
            else:
                sink.put(level, c, data, meta)

    later: OrderedQueue | None = sink.later
    if later is None:
        store()
    else:
        later.submit(store)
    if tick is not None:
        tick(len(coords))


def write_tiled(target: str, data: FileOrder, plan: TilePlan,
                build_header: Callable[[TilePlan, list[int | None], list[int], list[Any],
                                        str | None, list[Any] | None], bytes],
                storage_options: dict[str, Any] | None = None) -> None:
    """Write a tiled dataset atomically to a path or URL. ``build_header(plan, sizes,
    offsets, metadata, base_dir, quality)`` renders the header bytes for given tables (called
    until offsets reach their fixed point)."""
    token = fresh_token()
    store, key = target_store(target, storage_options=storage_options)
    store.tidy(key)
    previous = store.owned(key)  # what the header this write replaces references
    chain_dtype = np.dtype(np.uint16) if plan.type_name == "bfloat16" else tile_dtype(plan, data)
    enc = TileEncoder(plan, chain_dtype)
    if plan.storage == "internal":
        exact = (enc.fixed_size and not plan.tile_stats and not plan.quality
                 and not plan.sparse)
        sink: Any = DirectSink(plan, store, key, token, build_header, chain_dtype.itemsize,
                               exact)
    else:
        sink = ExternalSink(plan, store, key, token)
    fill = value_fill(plan.padding_value, plan.type_name)
    total = plan.nstored
    done = [0]

    def tick(n: int) -> None:
        done[0] += n
        if plan.progress is not None:
            plan.progress(done[0], total)

    def read0(key: tuple[slice, ...]) -> np.ndarray:
        return values(np.asarray(data[key]), plan.type_name)

    # Rows are stored on a background thread while the next row is encoded (and its pyramid
    # computed); puts stay in order, one thread at a time.
    sink.later = later = OrderedQueue()
    failed = True
    quality: list[Any] | None = None
    try:
        level0 = plan.levels[0]
        others = [lv for lv in plan.levels[1:] if lv.stored]
        streaming = bool(others) and plan.axes[-1] == len(plan.shape) - 1
        if streaming:
            quality = _write_streaming(plan, enc, sink, read0, fill, tick, others)
        else:
            write_level(plan, enc, sink, level0, read0, fill, tick=tick)
            for lv in others:
                write_level(plan, enc, sink, lv, _level_reader(plan, lv, read0), fill,
                            tick=tick)
            if plan.quality:
                quality = quality_by_region(plan, read0)
        later.drain()
        if plan.storage == "internal":
            sink.finish(quality)
            sink.commit()
        else:
            sink.fsync_all()  # every tile durable before the header names them
            with store.stage(key) as out:
                out.write(build_header(plan, sink.sizes, [], sink.meta, sink.dir_name,
                                       quality))
        failed = False
    finally:
        later.close(failed=failed)
        sink.close(failed=failed)
    keep = [sink.dir_name] if plan.storage == "external" else []
    store.tidy(key, keep=keep, owned=previous)


def _level_reader(plan: TilePlan, level: Level, read0: Callable[[tuple[slice, ...]], np.ndarray]
                  ) -> Callable[[tuple[slice, ...]], np.ndarray]:
    from ..pyramid.region import compute_region

    def read(region: tuple[slice, ...]) -> np.ndarray:
        return compute_region(read0, plan.shape, level.scale, plan.method, region)

    return read


def _write_streaming(plan: TilePlan, enc: TileEncoder, sink: ExternalSink,
                     read0: Callable[[tuple[slice, ...]], np.ndarray], fill: Any,
                     tick: Callable[[int], None], others: list[Level]) -> list[Any] | None:
    """Level 0 tile slabs feed the pyramid builder; finished level rows become tile slabs."""
    from ..pyramid.builder import PyramidBuilder

    level0 = plan.levels[0]
    axis = len(plan.shape) - 1
    builder = PyramidBuilder(plan.shape, read_dtype(read0, plan),
                             [lv.scale for lv in plan.levels], plan.method, quality=plan.quality)
    rows = {lv.index: _RowBuffer(lv) for lv in others}

    def route(pieces: Any) -> None:
        for li, region, arr in pieces or ():
            rb = rows.get(li)
            if rb is None:
                continue
            rb.add(region[axis].start, arr)
            for t, lo, slab in rb.ready():
                write_row(plan, enc, sink, rb.level, t, lo, slab, fill, tick=tick)

    write_level(plan, enc, sink, level0, read0, fill,
                on_core_slab=lambda core: route(builder.feed(core)), tick=tick)
    route(builder.finish())
    for rb in rows.values():
        for t, lo, slab in rb.ready():
            write_row(plan, enc, sink, rb.level, t, lo, slab, fill, tick=tick)
        if rb.next_t != rb.level.grid.grid[-1]:
            raise RuntimeError(f"level {rb.level.index}: pyramid rows incomplete")
    return builder.quality() if plan.quality else None


class _RowBuffer:
    """Collects a level's computed rows (along the last axis) until a tile row is complete."""

    def __init__(self, level: Level) -> None:
        self.level = level
        g = level.grid
        self.axis = g.axes[-1]
        self.size, self.o, self.n = g.tile[-1], g.overlap[-1], g.shape[self.axis]
        self.start = 0  # volume index of the first buffered row
        self.parts: list[np.ndarray] = []  # joined only when a tile row is complete
        self.have = 0  # volume index after the last buffered row
        self.next_t = 0

    @property
    def buf(self) -> np.ndarray | None:
        if len(self.parts) > 1:
            self.parts = [np.concatenate(self.parts, axis=self.axis)]
        return self.parts[0] if self.parts else None

    @buf.setter
    def buf(self, value: np.ndarray) -> None:
        self.parts = [value]

    def add(self, lo: int, arr: np.ndarray) -> None:
        if not self.parts:
            self.start = lo
        else:
            assert lo == self.have, "rows must arrive in order"
        self.parts.append(arr)
        self.have = lo + arr.shape[self.axis]

    def ready(self) -> Iterator[tuple[int, int, np.ndarray]]:
        """Yield (t, lo, slab) for each tile row whose rows (with halo) are all present."""
        while self.parts and self.next_t < self.level.grid.grid[-1]:
            t = self.next_t
            lo, hi = max(0, t * self.size - self.o), min(self.n, (t + 1) * self.size + self.o)
            if self.have < hi:
                return
            buf = self.buf
            assert buf is not None  # rows are buffered (self.parts)
            sl = tuple(slice(lo - self.start, hi - self.start) if a == self.axis
                       else slice(None) for a in range(buf.ndim))
            slab = buf[sl]
            yield t, lo, slab
            self.next_t += 1
            keep_from = max(0, (t + 1) * self.size - self.o)
            cut = keep_from - self.start
            if cut > 0:
                sl = tuple(slice(cut, None) if a == self.axis else slice(None)
                           for a in range(buf.ndim))
                self.buf = buf[sl]
                self.start = keep_from
