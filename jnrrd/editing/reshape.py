"""What a resize changes besides the shape (docs/editing.md, "Resizing"): the level grids,
the tiles whose stored extent changes (``variable`` edges) or whose padding must be cleaned
(the new edge tiles of level 0 when an axis shrinks: positions outside the volume hold the
padding value), and the level-0 voxels the pyramid must compute again."""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from itertools import product
from typing import Any

import numpy as np

from ..errors import ArgumentError, SelectionError, UnsupportedError, where
from ..policy import Policy
from ..pyramid.blocks import effective_block
from ..tiling.grid import TileGrid
from ..tiling.levels import Level, level_shape
from .tables import Box

__all__ = ["append_to", "changed_tiles", "drop_outside", "pyramid_box", "relevel", "replace_tile",
           "take_changed", "valid_box"]


def relevel(levels: Sequence[Level], shape0: tuple[int, ...], policy: Policy,
            source: object) -> tuple[Level, ...]:
    """The levels of the same file at level-0 shape ``shape0`` (same scales, tiles, overlap,
    edges), checked against the readers' tile caps."""
    out, first, total = [], 0, 0
    for lv in levels:
        g = lv.grid
        grid = TileGrid(level_shape(shape0, lv.scale), g.axes, g.tile, g.overlap, g.edge)
        total += grid.ntiles
        out.append(Level(lv.index, lv.scale, grid, lv.stored, first if lv.stored else -1))
        if lv.stored:
            first += grid.ntiles
    if total > policy.max_tiles:
        raise UnsupportedError(f"{where(source, 'sizes')}{list(shape0)} needs {total} tiles, "
                               f"over the max_tiles cap ({policy.max_tiles}) the readers "
                               "apply")
    return tuple(out)


def valid_box(grid: TileGrid, coords: tuple[int, ...]) -> Box:
    """The voxels of a tile's stored extent that lie inside the level."""
    return tuple((s.start, s.stop) for s in grid.valid_region(coords))


def changed_tiles(old: Level, new: Level) -> Iterator[tuple[int, ...]]:
    """Tiles of both grids that a resize changes: their stored extent differs, or (level 0)
    part of what was inside the volume is now outside it and must become padding. (With
    ``pad`` edges, growing changes none: a tile's positions outside the volume already hold
    the padding value, which is what new voxels read as.)"""
    was, now = old.grid, new.grid
    if was.edge == "pad" and all(n >= o for n, o in zip(now.shape, was.shape, strict=True)):
        return
    ranges: list[range | None] = []
    for k in range(len(was.grid)):
        a = was.axes[k]
        if was.shape[a] == now.shape[a]:
            ranges.append(None)
        else:
            edge = min(was.grid[k], now.grid[k]) - 1
            ranges.append(range(max(0, edge - 1), min(was.grid[k], now.grid[k])))
    seen: set[tuple[int, ...]] = set()
    for k, r in enumerate(ranges):
        if r is None:
            continue
        axes = [r if j == k else range(min(was.grid[j], now.grid[j]))
                for j in range(len(ranges))]
        for coords in product(*axes):
            if coords in seen:
                continue
            seen.add(coords)
            if was.stored_bounds(coords) != now.stored_bounds(coords):
                yield coords
            elif new.index == 0 and any(n1 < o1 for (_, n1), (_, o1) in zip(
                    valid_box(now, coords), valid_box(was, coords), strict=True)):
                yield coords


def pyramid_box(levels: Sequence[Level], old0: tuple[int, ...], new0: tuple[int, ...],
                axis: int) -> Box | None:
    """The level-0 voxels (new shape) along ``axis`` from which the stored levels must be
    computed again after ``axis`` went from ``old0[axis]`` to ``new0[axis]`` voxels: from
    one voxel before the smaller floor-cropped extent of any level (blocks that gained or
    lost voxels, filters whose clamped edge moved) to the end. None without stored levels
    above 0."""
    lo = None
    for lv in levels[1:]:
        if not lv.stored:
            continue
        for shape in (old0, new0):
            block = effective_block(shape, lv.scale)
            cropped = level_shape(shape, lv.scale)[axis] * block[axis]
            lo = cropped if lo is None else min(lo, cropped)
    if lo is None:
        return None
    return tuple((max(0, lo - 1), n) if a == axis else (0, n) for a, n in enumerate(new0))


# -- what a writable volume does with them (its changed tiles, tables, dirty boxes) -------
def take_changed(vol: Any, old: Sequence[Level], new: Sequence[Level]
                 ) -> dict[tuple[int, tuple[int, ...]], tuple[Box, np.ndarray]]:
    """The values of the tiles a resize changes (read under the old grids)."""
    out = {}
    for lo, ln in zip(old, new, strict=True):
        if not lo.stored or (lo.index and lo.grid.edge == "pad"):
            continue  # pad-edge levels above 0 are rebuilt by the pyramid
        for coords in changed_tiles(lo, ln):
            tile = vol._dirty.get((lo.index, coords))
            if tile is None:
                tile = vol._stored(lo, coords)
            if tile is not None:
                out[(lo.index, coords)] = (valid_box(lo.grid, coords),
                                           tile[lo.grid.valid_in_stored(coords)].copy())
    return out


def drop_outside(vol: Any, old: Sequence[Level], new: Sequence[Level]) -> None:
    """Forget changed tiles outside the new grids, retire their stored bytes."""
    for lo, ln in zip(old, new, strict=True):
        if not lo.stored:
            continue
        if ln.grid.grid == lo.grid.grid and lo.grid.edge == "pad":
            continue  # no tile dropped, none changes its stored extent
        for key in [k for k in vol._dirty if k[0] == lo.index]:
            if any(c >= g for c, g in zip(key[1], ln.grid.grid, strict=True)) or (
                    lo.grid.stored_bounds(key[1]) != ln.grid.stored_bounds(key[1])):
                vol._dirty_nbytes -= vol._dirty.pop(key).nbytes
                vol._ahead.forget(key)
        if ln.grid.grid == lo.grid.grid:
            continue
        for i in range(lo.grid.ntiles):
            coords = lo.grid.coords(i)
            if any(c >= g for c, g in zip(coords, ln.grid.grid, strict=True)):
                entry = vol._tables.get(lo.index, i)
                if entry is not None:
                    vol._s.layout.retire(lo, coords, i, entry)
    shape0 = new[0].shape
    if all(n >= o for n, o in zip(shape0, old[0].shape, strict=True)):
        return  # nothing recorded lies outside
    for c, box in list(vol._dirty0.items()):
        clipped = tuple((b0, min(b1, n)) for (b0, b1), n in zip(box, shape0, strict=True))
        if all(b0 < b1 for b0, b1 in clipped):
            vol._dirty0[c] = clipped
        else:
            del vol._dirty0[c]


def replace_tile(vol: Any, level: Level, coords: tuple[int, ...], was: Box,
                 values: np.ndarray) -> None:
    """A changed tile in memory again, in its new stored extent, with what it held."""
    grid = level.grid
    now = valid_box(grid, coords)
    tile = np.full(grid.stored_shape(coords), vol._fill, dtype=vol._dtype, order="F")
    both = tuple((max(a0, b0), min(a1, b1)) for (a0, a1), (b0, b1) in zip(was, now,
                                                                      strict=True))
    if all(lo < hi for lo, hi in both):
        lo_new = [b for b, _ in grid.stored_bounds(coords)]
        src = tuple(slice(b0 - w0, b1 - w0) for (b0, b1), (w0, _) in zip(both, was,
                                                                       strict=True))
        dst = tuple(slice(b0 - s, b1 - s) for (b0, b1), s in zip(both, lo_new,
                                                                strict=True))
        tile[dst] = values[src]
    key = (level.index, coords)
    vol._ahead.forget(key)
    old = vol._dirty.pop(key, None)
    if old is not None:
        vol._dirty_nbytes -= old.nbytes
    vol._dirty[key] = tile
    vol._dirty_nbytes += tile.nbytes


def append_to(vol: Any, data: Any, axis: int | None) -> None:
    """``vol.append``: grow ``axis`` (default: the last header axis) by ``data``'s extent
    along it (``data`` may lack that axis: one slice), then write ``data`` there."""
    arr = np.asarray(data)
    ndim = vol.ndim
    ax = (ndim - 1 if not vol.c_order else 0) if axis is None else operator.index(axis)
    if not -ndim <= ax < ndim:
        raise SelectionError(f"{where(vol.name, 'append')}axis {axis} does not exist: the "
                             f"volume has {ndim} axes (valid: -{ndim}..{ndim - 1})")
    ax %= ndim
    if arr.ndim == ndim - 1:
        arr = np.expand_dims(arr, ax)
    shape = list(vol.shape)
    if arr.ndim != ndim or any(n != m for i, (n, m) in enumerate(
            zip(arr.shape, shape, strict=True)) if i != ax):
        raise ArgumentError(f"{where(vol.name, 'append')}expected an array of shape "
                            f"{tuple(shape)} with any extent along axis {ax} (or without "
                            f"that axis), got {arr.shape}")
    if arr.shape[ax] == 0:
        return
    start = shape[ax]
    shape[ax] += arr.shape[ax]
    vol.resize(shape)
    vol[tuple(slice(start, None) if i == ax else slice(None) for i in range(ndim))] = arr
