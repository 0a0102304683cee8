"""Pyramid levels under changed regions, rebuilt on commit (docs/editing.md, "Pyramids").

A change to level 0 (a write, an append, a resize) is recorded as boxes of level-0 voxels,
one per level-0 tile it touched. On commit, each stored level finds the level voxels whose
value depends on those voxels: the blocks over them for ``average``, ``max``, ``min`` and
``mode``, and further out as far as the filter reaches for ``gaussian`` and ``lanczos`` (the
inverse of :func:`jnrrd.pyramid.methods.axis_source`). Those voxels are computed from level
0 exactly as the writer computes them (:func:`jnrrd.pyramid.compute_region`, reading only
the level-0 voxels they need) and merged into the level's tiles; so the levels equal those
of a fresh ``jnrrd.write`` of the same data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..pyramid import compute_region, source_region
from ..pyramid.blocks import effective_block
from ..pyramid.methods import METHOD_DEFS, axis_source
from ..tiling.grid import AxisSel, TileGrid
from ..tiling.levels import Level
from .tables import Box

__all__ = ["level_boxes", "rebuild_levels", "recompute", "union"]

#: a level region is computed in pieces whose level-0 source holds at most this many bytes
_SOURCE_BYTES = 64 << 20


def union(a: Box | None, b: Box) -> Box:
    """The bounding box of two boxes."""
    if a is None:
        return b
    return tuple((min(x0, y0), max(x1, y1)) for (x0, x1), (y0, y1) in zip(a, b, strict=True))


def level_boxes(level: Level, dirty: dict[tuple[int, ...], Box], shape0: tuple[int, ...],
                method: str) -> dict[tuple[int, ...], Box]:
    """For each tile of ``level`` that a change reaches: the box of its level voxels to
    compute again (inside the tile's stored extent within the level)."""
    out: dict[tuple[int, ...], Box] = {}
    grid = level.grid
    for box0 in dirty.values():
        image = _image(box0, shape0, level, method)
        if image is None:
            continue
        for coords in _tiles_reaching(grid, image):
            valid = grid.valid_region(coords)
            part = tuple((max(i0, v.start), min(i1, v.stop))
                         for (i0, i1), v in zip(image, valid, strict=True))
            if all(p0 < p1 for p0, p1 in part):
                out[coords] = union(out.get(coords), part)
    return out


def _tiles_reaching(grid: TileGrid, image: Box) -> Iterator[tuple[int, ...]]:
    """Tiles whose stored extent (halo included) meets ``image``."""
    region = [slice(lo, hi) for lo, hi in image]
    for k, a in enumerate(grid.axes):
        o = grid.overlap[k]
        region[a] = slice(max(0, image[a][0] - o), min(grid.shape[a], image[a][1] + o))
    return grid.tiles_in_region(tuple(region))


def _image(box0: Box, shape0: tuple[int, ...], level: Level, method: str) -> Box | None:
    """The level voxels whose value depends on a voxel of ``box0`` (None: none)."""
    scale, shape = level.scale, level.shape
    block = effective_block(shape0, scale)
    out = []
    for (lo, hi), s, b, n in zip(box0, scale, block, shape, strict=True):
        cropped = n * b
        lo, hi = max(lo, 0), min(hi, cropped)
        if lo >= hi:
            return None
        if METHOD_DEFS[method].reach is None:
            i0, i1 = lo // b, min(n, -(-hi // b))
        else:
            i0, i1 = _reached(method, cropped, s, b, n, lo, hi)
        if i0 >= i1:
            return None
        out.append((i0, i1))
    return tuple(out)


def _reached(method: str, n0: int, s: int, b: int, n: int, lo: int, hi: int
             ) -> tuple[int, int]:
    """Level rows ``[i0, i1)`` whose source rows (:func:`axis_source`) meet ``[lo, hi)``:
    two binary searches (the sources move forward with the row)."""

    def src(i: int) -> tuple[int, int]:
        return axis_source(method, n0, s, b, i, i + 1)

    a, z = 0, n
    while a < z:
        m = (a + z) // 2
        if src(m)[1] > lo:
            z = m
        else:
            a = m + 1
    i0, z = a, n
    while a < z:
        m = (a + z) // 2
        if src(m)[0] >= hi:
            z = m
        else:
            a = m + 1
    return i0, a


def recompute(read0: Callable[[tuple[slice, ...]], np.ndarray], shape0: tuple[int, ...],
              level: Level, method: str, box: Box, dtype: Any) -> np.ndarray:
    """The level voxels of ``box`` computed from level 0, in pieces along the last axis
    whose level-0 source stays within :data:`_SOURCE_BYTES`."""
    region = tuple(slice(lo, hi) for lo, hi in box)
    src = source_region(shape0, level.scale, method, region)
    need = int(np.prod([s.stop - s.start for s in src])) * 8
    last = len(box) - 1
    while last > 0 and box[last][1] - box[last][0] == 1:
        last -= 1
    lo, hi = box[last]
    if need <= _SOURCE_BYTES or hi - lo == 1:
        return compute_region(read0, shape0, level.scale, method, region, dtype=dtype)
    mid = (lo + hi) // 2
    first = tuple((lo, mid) if a == last else r for a, r in enumerate(box))
    second = tuple((mid, hi) if a == last else r for a, r in enumerate(box))
    return np.concatenate([recompute(read0, shape0, level, method, first, dtype),
                           recompute(read0, shape0, level, method, second, dtype)],
                          axis=last)


def rebuild_levels(vol: Any, batch: int = 32) -> None:
    """Compute the stored levels of a writable volume again under its changed level-0
    voxels, and stage their tiles (``vol._store``), ``batch`` tiles at a time."""
    base, method = vol._levels[0], vol._tiled.downsample_method

    def read0(r: tuple[slice, ...]) -> np.ndarray:
        return vol._read(base, tuple(AxisSel(s.start, 1, s.stop - s.start) for s in r))

    for lv in vol._levels[1:]:
        if not lv.stored:
            continue
        boxes: dict[tuple[int, ...], Box | None] = dict(
            level_boxes(lv, vol._dirty0, base.shape, method))
        for li, coords in list(vol._dirty):
            if li == lv.index:
                boxes.setdefault(coords, None)
        order = sorted(boxes, key=lv.grid.index)
        for start in range(0, len(order), batch):
            part = order[start:start + batch]
            # the stored tiles the new voxels merge into, read at once
            old = vol._read_tiles(lv, [c for c in part if (lv.index, c) not in vol._dirty
                                       and boxes[c] != _valid(lv.grid, c)])
            vol._store(lv, [(c, _level_tile(vol, lv, c, boxes[c], old, read0, method))
                            for c in part])


def _valid(grid: TileGrid, coords: tuple[int, ...]) -> Box:
    return tuple((s.start, s.stop) for s in grid.valid_region(coords))


def _level_tile(vol: Any, level: Level, coords: tuple[int, ...], box: Box | None,
                old: dict[tuple[int, ...], np.ndarray | None],
                read0: Callable[[tuple[slice, ...]], np.ndarray], method: str) -> np.ndarray:
    """A level tile with ``box`` computed again: from the changed tile in memory, else from
    the stored one (``old``; unless the box covers all of it), its padding clean."""
    grid = level.grid
    tile = vol._dirty.get((level.index, coords))
    if tile is None:
        tile = np.full(grid.stored_shape(coords), vol._fill, dtype=vol._dtype, order="F")
        stored = old.get(coords)
        if stored is not None:
            inside = grid.valid_in_stored(coords)
            tile[inside] = stored[inside]
    if box is not None:
        lo = [b for b, _ in grid.stored_bounds(coords)]
        dst = tuple(slice(b0 - s, b1 - s) for (b0, b1), s in zip(box, lo, strict=True))
        tile[dst] = recompute(read0, vol._levels[0].shape, level, method, box, vol._dtype)
    return tile
