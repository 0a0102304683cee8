"""Dask arrays out: ``jnrrd.write`` of a Dask array (reading is :mod:`.dask`).

docs/api.md#writing (``write`` accepts a Dask array; pyramid methods) and
docs/format.md#writer-layout-and-atomicity (writer layout and atomicity). Dask is imported only when
called.

Writing: level 0 is rechunked to the tile cores; each stored tile is one task that gathers
the core blocks its stored extent (halo, padding) touches, encodes the tile and writes it to a
file. Pyramid levels are Dask arrays too: each level chunk is computed by
:func:`jnrrd.pyramid.compute_region` from the level-0 (or, for max/min, finer-level) blocks
under it plus the filter halo, so the results are those of the NumPy writer bit for bit.
"""

from __future__ import annotations

import copy
import math
import shutil
import sys
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..engine.tiles import TileEncoder
from ..errors import UnsupportedError, where
from ..storage import MARK, LocalWriteStore, WriteStore, fresh_token, target_store
from ..tiling.padding import all_padding, value_fill
from ..writing.layout import TilePlan, header_space, internal_layout
from ..writing.quality import quality_by_region
from ..writing.sinks import ExternalSink, Tables
from ..writing.source import tile_dtype, values
from .dask import chunk_sizes, core_chunks

__all__ = ["write_dask"]

# Largest level-0 region one pyramid task may gather (the float64 filters count 8 bytes/voxel).
_PYRAMID_TASK_BYTES = 64 << 20


def _assemble(lo: Sequence[int], hi: Sequence[int], bounds: Sequence[Any],
              arrays: Sequence[np.ndarray], dtype: np.dtype, fill: Any = None) -> np.ndarray:
    """The region ``[lo, hi)`` (F order) from blocks at ``bounds`` (``((lo, hi), ...)`` each).

    Positions no block covers hold ``fill`` (they lie outside the volume: ``pad`` edges).
    """
    shape = tuple(h - lo_ for lo_, h in zip(lo, hi, strict=True))
    if len(arrays) == 1 and fill is None and all(
        b == (l_, h) for b, l_, h in zip(bounds[0], lo, hi, strict=True)
    ):
        return arrays[0]
    out = (np.empty(shape, dtype=dtype, order="F") if fill is None
           else np.full(shape, fill, dtype=dtype, order="F"))
    for blk, arr in zip(bounds, arrays, strict=True):
        src, dst = [], []
        for (b0, b1), l_, h in zip(blk, lo, hi, strict=True):
            s0, s1 = max(b0, l_), min(b1, h)
            if s1 <= s0:
                break
            src.append(slice(s0 - b0, s1 - b0))
            dst.append(slice(s0 - l_, s1 - l_))
        else:
            out[tuple(dst)] = arr[tuple(src)]
    return out


class _Blocks:
    """Block bounds of a chunked Dask array, to find the blocks a region touches."""

    def __init__(self, arr: Any) -> None:
        self.name = arr.name
        self.edges = [np.concatenate([[0], np.cumsum(c)]).astype(np.int64) for c in arr.chunks]

    def touching(self, lo: Sequence[int], hi: Sequence[int]
                 ) -> tuple[list[tuple[tuple[int, int], ...]], list[tuple[Any, ...]]]:
        """``(bounds, keys)`` of the blocks that intersect ``[lo, hi)`` (clipped to the array)."""
        ranges = []
        for e, l_, h in zip(self.edges, lo, hi, strict=True):
            l_, h = max(int(l_), 0), min(int(h), int(e[-1]))
            if h <= l_:
                return [], []
            first = int(np.searchsorted(e, l_, side="right")) - 1
            last = int(np.searchsorted(e, h, side="left")) - 1
            ranges.append(range(first, last + 1))
        bounds, keys = [], []
        for idx in np.ndindex(*(len(r) for r in ranges)):
            bi = tuple(r[i] for r, i in zip(ranges, idx, strict=True))
            bounds.append(tuple((int(e[i]), int(e[i + 1]))
                                for e, i in zip(self.edges, bi, strict=True)))
            keys.append((self.name, *bi))
        return bounds, keys


@dataclass(frozen=True)
class _LevelSpec:
    """How one pyramid level is computed from its source array (docs/pyramids.md#methods)."""

    shape0: tuple[int, ...]  # the source's shape
    scale: tuple[int, ...]  # relative to the source
    method: str
    dtype: np.dtype


def level_block(spec: _LevelSpec, region: tuple[slice, ...], bounds: list[Any],
                arrays: list[np.ndarray]) -> np.ndarray:
    """One chunk of a pyramid level, from the source blocks under it (and the filter halo)."""
    from ..pyramid.region import compute_region

    def read0(src: tuple[slice, ...]) -> np.ndarray:
        return _assemble([s.start for s in src], [s.stop for s in src], bounds, arrays,
                         spec.dtype)

    return compute_region(read0, spec.shape0, spec.scale, spec.method, region,
                          dtype=spec.dtype)


def _level_array(src: Any, spec: _LevelSpec, grid: Any) -> Any:
    """The level of ``grid`` as a Dask array chunked like its tile cores."""
    import dask.array as da
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    from ..pyramid.methods import METHOD_DEFS
    from ..pyramid.region import source_region

    shape = grid.shape
    want = core_chunks(grid)
    per = [c[0] for c in want]
    # Bound the level-0 region one task gathers: halve the widest chunk until it fits.
    item = 8 if METHOD_DEFS[spec.method].float_work else max(1, spec.dtype.itemsize)

    def cost(c: list[int]) -> int:
        # An interior chunk where the volume has one: its halo is not clipped on either side.
        r = tuple(slice(max(0, min(k, n - k)), max(0, min(k, n - k)) + k)
                  for k, n in zip(c, shape, strict=True))
        s = source_region(spec.shape0, spec.scale, spec.method, r)
        return math.prod(x.stop - x.start for x in s) * item

    while cost(per) > _PYRAMID_TASK_BYTES and max(per) > 1:
        a = max(range(len(per)), key=lambda i: per[i] * spec.scale[i])
        per[a] = -(-per[a] // 2)
    chunks = tuple(chunk_sizes(n, c) for n, c in zip(shape, per, strict=True))
    name = "jnrrd-level-" + tokenize(src.name, spec, chunks)
    blocks = _Blocks(src)
    starts = [np.concatenate([[0], np.cumsum(c)]).tolist() for c in chunks]
    dsk: dict[Any, Any] = {}
    for idx in np.ndindex(*(len(c) for c in chunks)):
        region = tuple(slice(s[i], s[i + 1]) for s, i in zip(starts, idx, strict=True))
        need = source_region(spec.shape0, spec.scale, spec.method, region)
        bounds, keys = blocks.touching([s.start for s in need], [s.stop for s in need])
        dsk[(name, *idx)] = (level_block, spec, region, bounds, keys)
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=[src])
    arr = da.Array(graph, name, chunks, meta=np.empty((0,) * len(shape), dtype=spec.dtype))
    return arr if chunks == want else arr.rechunk(want)


@dataclass
class TileJob:
    """What every tile task shares: the plan (without callbacks), codecs, fill, output.

    ``dtype`` is that of the values tiles are cut from (bfloat16 stays a float type);
    ``chain_dtype`` the codecs' (bfloat16 as its words: the encoder converts).
    """

    plan: TilePlan
    dtype: np.dtype
    chain_dtype: np.dtype
    fill: Any
    store: WriteStore
    out_dir: str  # the prefix of the tiles' keys in ``store``
    key: str

    def tile_key(self, level: Any, coords: tuple[int, ...]) -> str:
        """Where the encoded tile goes: the pattern (external) or its global index (spool)."""
        from ..tiling.locate import expand_pattern

        if self.plan.storage == "external":
            rel = expand_pattern(self.plan.pattern or "", coords, level.index,
                                 level.grid.index(coords))
            return f"{self.out_dir}/{rel}"
        return f"{self.out_dir}/{level.first + level.grid.index(coords)}"


_ENCODERS: OrderedDict[str, TileEncoder] = OrderedDict()
_ENCODERS_LOCK = threading.Lock()


def _encoder(job: TileJob) -> TileEncoder:
    """One encoder (codec chains per tile shape) per write and process."""
    with _ENCODERS_LOCK:
        enc = _ENCODERS.get(job.key)
        if enc is None:
            enc = _ENCODERS[job.key] = TileEncoder(job.plan, job.chain_dtype)
            while len(_ENCODERS) > 4:
                _ENCODERS.popitem(last=False)
        return enc


def encode_tile(job: TileJob, level: int, coords: tuple[int, ...], bounds: list[Any],
                arrays: list[np.ndarray]) -> tuple[int, int | None, dict[str, Any]]:
    """Assemble one stored tile (halo, padding), encode it and write its file.

    Returns ``(global index, stored size or None when sparse, tile metadata)``.
    """
    lv = job.plan.levels[level]
    grid = lv.grid
    sb = grid.stored_bounds(coords)
    inside = all(lo >= 0 and hi <= n for (lo, hi), n in zip(sb, grid.shape, strict=True))
    tile = _assemble([b[0] for b in sb], [b[1] for b in sb], bounds, arrays, job.dtype,
                     None if inside else job.fill)
    tile = np.asfortranarray(tile)
    core = tile[grid.stored_from_core(coords)]
    g = lv.first + grid.index(coords)
    enc = _encoder(job)
    if job.plan.sparse and all_padding(core, job.fill):
        return g, None, enc.metadata(core, None)
    data = enc.encode(tile, g)
    job.store.put(job.tile_key(lv, coords), data)
    return g, len(data), enc.metadata(core, data)



def _tile_tables(plan: Any, sink: ExternalSink | None, key: str, token: str
                 ) -> tuple[str, ExternalSink | Tables]:
    """Where the tiles go and the tables their sizes and metadata fill: the external sink
    itself, or a spool directory beside an internal target."""
    if sink is not None:
        return sink.dir_name, sink
    return (f".{key}{MARK}{token}.tiles",
            Tables([None] * plan.nstored, [{} for _ in range(plan.nstored)]))

def write_dask(path: str, darr: Any, plan: TilePlan, build: Callable[..., bytes], *,
               index_order: str, storage_options: dict[str, Any] | None = None) -> None:
    """Write a Dask array as a tiled dataset, computing and encoding tiles on the active
    Dask scheduler (docs/format.md#writer-layout-and-atomicity).

    External tiles are written by the task that encodes them into a fresh tile directory,
    the header last. Internal tiles are spooled one file per tile beside the target, then
    laid out after the header exactly as the NumPy writer lays them out (``header_space`` and
    ``internal_layout`` of :mod:`jnrrd.writing.layout`: the same bytes for the same data).
    """
    from dask.base import tokenize

    x = darr.T if index_order == "C" else darr
    if tuple(int(n) for n in x.shape) != tuple(plan.shape):
        raise UnsupportedError(f"{where(path)}array shape {x.shape} does not match the plan's "
                               f"{plan.shape}")
    chain_dtype = np.dtype(np.uint16) if plan.type_name == "bfloat16" else tile_dtype(plan, x)
    # The values the file stores, as the NumPy writer's read0 (pyramids average values).
    vdtype = values(np.empty(0, dtype=x.dtype), plan.type_name).dtype
    if x.dtype != vdtype:
        x = x.map_blocks(values, plan.type_name, dtype=vdtype)
    stored = [lv for lv in plan.levels if lv.stored]
    if len(stored) > 1 or plan.quality:
        from ..pyramid.blocks import check_dtype
        from ..pyramid.methods import check_method

        check_dtype(vdtype)
        check_method(plan.method)
    token = fresh_token()
    work = copy.copy(plan)
    work.progress = None  # runs on workers: no client callbacks in the graph
    store, key = target_store(path, storage_options=storage_options)
    store.tidy(key)
    previous = store.owned(key)  # what the header this write replaces references
    sink = ExternalSink(plan, store, key, token) if plan.storage == "external" else None
    out_dir, tables = _tile_tables(plan, sink, key, token)
    spool = _spool_store(store) if sink is None else store
    if sink is None:
        spool.reserve(out_dir)
    failed = True
    try:
        fill = value_fill(plan.padding_value, plan.type_name)
        job = TileJob(work, vdtype, chain_dtype, fill, spool, out_dir,
                      "jnrrd-" + token + tokenize(path))
        arrays = _level_arrays(x, plan, vdtype)
        for g, size, meta in _run(job, arrays, plan.progress):
            tables.sizes[g] = size
            tables.meta[g] = meta
        quality = None
        if plan.quality:
            x0 = arrays[0]
            quality = quality_by_region(plan, lambda key: np.asarray(x0[key].compute()))
        with store.stage(key) as out:
            if sink is not None:
                sink.fsync_all()
                out.write(build(plan, tables.sizes, [], tables.meta, sink.dir_name, quality))
            else:
                exact = (_encoder(job).fixed_size and not plan.tile_stats and not plan.quality
                         and not plan.sparse)
                start = header_space(plan, build, chain_dtype.itemsize, exact)
                header, offsets, fits = internal_layout(plan, tables, build, quality, start)
                first = start if fits else next((o for o in offsets if o >= 0), len(header))
                out.write(header)
                out.write(b"\0" * (first - len(header)))
                for g, size in enumerate(tables.sizes):
                    if size is not None:
                        spool.append_object(out, f"{out_dir}/{g}", size)
        failed = False
    finally:
        if sink is not None:
            sink.close(failed=failed)
        else:
            _drop_spool(spool, store, out_dir)
    keep = [sink.dir_name] if sink is not None else []
    store.tidy(key, keep=keep, owned=previous)


def _level_arrays(x: Any, plan: TilePlan, dtype: np.dtype) -> dict[int, Any]:
    """Lazy Dask arrays of every level up to the last stored one, chunked by tile cores."""
    top = max(lv.index for lv in plan.levels if lv.stored)
    arrays = {0: x.rechunk(core_chunks(plan.levels[0].grid))}
    for lv in plan.levels[1: top + 1]:
        prev = plan.levels[lv.index - 1]
        if _can_cascade(plan, prev.scale, lv.scale):
            # max/min of maxima/minima of nested blocks is the same value
            # (docs/pyramids.md#methods).
            rel = tuple(s // p for s, p in zip(lv.scale, prev.scale, strict=True))
            spec = _LevelSpec(prev.shape, rel, plan.method, dtype)
            arrays[lv.index] = _level_array(arrays[prev.index], spec, lv.grid)
        else:
            spec = _LevelSpec(tuple(plan.shape), tuple(lv.scale), plan.method, dtype)
            arrays[lv.index] = _level_array(arrays[0], spec, lv.grid)
    return arrays


def _can_cascade(plan: TilePlan, finer: tuple[int, ...], scale: tuple[int, ...]) -> bool:
    """Max/min may start from a finer level when its blocks nest exactly in this level's:
    the scales divide, and no axis is shorter than the scale (whose block is the whole axis,
    beyond the finer level's floor-cropped extent)."""
    return plan.method in ("max", "min") and all(
        s % f == 0 and n >= s for f, s, n in zip(finer, scale, plan.shape, strict=True))


def _run(job: TileJob, arrays: dict[int, Any],
         progress: Callable[[int, int], None] | None) -> list[Any]:
    """Build one task per stored tile and compute them all on the active scheduler."""
    import dask
    from dask.base import tokenize
    from dask.delayed import Delayed
    from dask.highlevelgraph import HighLevelGraph

    name = "jnrrd-encode-" + tokenize(job.key, *(a.name for a in arrays.values()))
    dsk: dict[Any, Any] = {}
    deps = []
    for lv in job.plan.levels:
        if not lv.stored:
            continue
        arr = arrays[lv.index]
        deps.append(arr)
        blocks = _Blocks(arr)
        for coords in lv.grid.all_coords():
            sb = lv.grid.stored_bounds(coords)
            bounds, keys = blocks.touching([b[0] for b in sb], [b[1] for b in sb])
            dsk[(name, lv.first + lv.grid.index(coords))] = (
                encode_tile, job, lv.index, coords, bounds, keys)
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=deps)
    tasks = [Delayed(k, graph, layer=name) for k in dsk]
    total = len(tasks)
    if progress is None:
        return list(dask.compute(*tasks))
    client = _active_client()
    if client is not None:
        from distributed import as_completed

        out = []
        for done, fut in enumerate(as_completed(client.compute(tasks)), 1):
            out.append(fut.result())
            progress(done, total)
        return out
    from dask.callbacks import Callback

    count = [0]

    def posttask(key: Any, *_: Any) -> None:
        if isinstance(key, tuple) and key and key[0] == name:
            count[0] += 1
            progress(count[0], total)

    with Callback(posttask=posttask):
        return list(dask.compute(*tasks))


def _spool_store(store: WriteStore) -> WriteStore:
    """Where an internal write's tiles wait for their layout: beside the target, except for
    an object store written from this process's own scheduler (no ``distributed`` client):
    then a local temporary directory, so that tiles are not uploaded twice."""
    if getattr(store, "remote", False) and _active_client() is None:
        return LocalWriteStore(tempfile.mkdtemp(prefix="jnrrd-spool-"))
    return store


def _drop_spool(spool: Any, store: WriteStore, out_dir: str) -> None:
    """Remove the spooled tiles (and a local spool's temporary directory)."""
    spool.discard(out_dir)
    if spool is not store:
        shutil.rmtree(spool.root, ignore_errors=True)


def _active_client() -> Any:
    """The ``distributed.Client`` Dask would compute on now, if any."""
    if "distributed" not in sys.modules:
        return None
    from dask.base import get_scheduler
    from distributed import Client

    owner = getattr(get_scheduler(), "__self__", None)
    return owner if isinstance(owner, Client) else None
