"""Bricks: the cached tiles of one stored level at fixed places in one reserved memory map.

Off unless asked for: the decoded-tile cache (:mod:`jnrrd.engine.cache`) keeps the tiles of a
stored level without overlap here only with the setting ``JNRRD_CACHE_BRICKS=1``
(docs/api.md, "cache_bytes"), and only where the system can reserve such a map (Linux:
:func:`jnrrd._platform.reserve_anonymous`); elsewhere, and by default, tiles are kept as
arrays. The map is laid out as the level's tile grid: tile ``coords`` lives in slot
``grid.index(coords)`` (first axis fastest), each slot a whole number of pages holding the
tile's F-ordered memory. The map reserves address space, not memory: only the pages of cached
tiles are resident, and an evicted tile's pages are given back at once
(:func:`jnrrd._platform.release_pages`), so the cache's byte budget is what it costs; closing
the volume unmaps it.

Why: with every tile at a place that follows from its coordinates, the cached level is one
strided NumPy array of shape ``grid + tile``. A read whose tiles are all cached is then one
NumPy copy per block of whole tiles (at most 3 per axis: a partial first tile, whole tiles, a
partial last tile), not one Python step per tile; a selection of whole tile rows (a tile's
voxels along the first axis) is one ``np.take`` of rows: a 512² slice across 64 tiles of 64³
is a single NumPy call whatever its axis (docs/performance.md has what it costs).

Not thread-safe on its own: the cache calls every method under its lock, and no view of the
map leaves it (an evicted slot reads as zeros).
"""

from __future__ import annotations

import math
import mmap
from functools import lru_cache
from itertools import product
from typing import Any

import numpy as np

from .._platform import release_pages, reserve_anonymous
from ..tiling.grid import AxisSel, TileGrid

__all__ = ["Bricks"]

#: the largest map reserved for one level (address space, not memory)
MAX_RESERVED = 1 << 46
#: the most tiles of a level kept in bricks (two flags per tile are held for the whole grid)
MAX_TILES = 1 << 24
#: slots are padded to whole pages: at most this share of a slot may be padding
_MAX_PADDING = 1 / 8
#: whole tile rows are gathered with ``np.take`` when at least this long, and at most this many
_MIN_ROW = 64
_MAX_ROWS = 1 << 16


class Bricks:
    """The decoded tiles of one stored level in one map (see the module docstring); create
    with :meth:`create`, which says None when this level or platform cannot have one."""

    def __init__(self, grid: TileGrid, dtype: np.dtype, slot: int, buffer: mmap.mmap) -> None:
        nd = len(grid.shape)
        counts = [1] * nd  # untiled axes: one tile holding the whole axis
        for k, a in enumerate(grid.axes):
            counts[a] = grid.grid[k]
        # without overlap a tile starts at coords × tile size; it is shorter than that only
        # when it is the axis's one tile (a variable edge), so the largest stored extent is
        # also the step from one tile to the next wherever there is a next
        extents = grid.max_stored_shape()
        self.grid, self.dtype = grid, dtype
        self.counts, self.extents = tuple(counts), tuple(extents)
        #: bytes one tile takes in the map (a whole number of pages)
        self.slot_bytes = slot
        self._map = buffer
        tile_strides = [slot * math.prod(counts[:a]) for a in range(nd)]
        elem_strides = [dtype.itemsize * math.prod(extents[:a]) for a in range(nd)]
        #: the level as ``grid + tile`` dimensions: ``view[coords]`` is the F-ordered tile
        self._view = np.ndarray(self.counts + self.extents, dtype, buffer=buffer,
                                strides=tuple(tile_strides + elem_strides))
        #: a view's (n0, ..., m0, ...) dimensions as (n0, m0, n1, m1, ...): tiles of an axis
        #: next to their voxels
        self._order = tuple(i for a in range(nd) for i in (a, nd + a))
        # the map as an array of tile rows (voxels along the first axis), to gather whole rows
        # (:meth:`_gather_rows`), where rows are long enough and slots whole rows
        row = extents[0] * dtype.itemsize
        self._rows = np.ndarray((len(buffer) // row,), f"V{row}", buffer=buffer) \
            if row >= _MIN_ROW and slot % row == 0 else None
        slot_rows = slot // row
        #: rows from one tile to the next along each axis; rows per step inside a tile
        self._tile_rows = tuple(slot_rows * math.prod(counts[:a]) for a in range(nd))
        self._row_steps = (0,) + tuple(math.prod(extents[1:a]) for a in range(1, nd))
        #: per axis (tile extent, rows from one tile to the next, rows per in-tile step); the
        #: first axis has no in-tile step (a selection there starts on a whole row)
        self._axis_rows = tuple(zip(self.extents, self._tile_rows, self._row_steps, strict=True))
        self._present = np.zeros(self.counts, bool)
        #: tiles used through :meth:`copy_region` since the cache last looked (second chance)
        self._used = np.zeros(self.counts, bool)
        #: the tile spans of the last region found present and marked used, until a tile is
        #: released or a mark taken: consecutive slices through the same tiles skip the check
        self._known: tuple[tuple[int, int], ...] | None = None
        self._known_tiles = 0

    @classmethod
    def create(cls, grid: TileGrid, dtype: np.dtype) -> Bricks | None:
        """Bricks for ``grid``'s tiles of ``dtype``, or None: a level with overlap (its stored
        tiles overlap their neighbours), slots that would be more than an eighth padding,
        more than :data:`MAX_TILES` tiles, or no reserved map on this system."""
        if any(grid.overlap) or dtype.hasobject \
                or not 0 < grid.ntiles <= MAX_TILES:
            return None
        tile_bytes = dtype.itemsize * math.prod(grid.max_stored_shape())
        page = mmap.PAGESIZE
        slot = -(-tile_bytes // page) * page
        if tile_bytes == 0 or slot - tile_bytes > _MAX_PADDING * slot:
            return None
        size = slot * grid.ntiles
        if size > MAX_RESERVED:
            return None
        buffer = reserve_anonymous(size)
        return None if buffer is None else cls(grid, dtype, slot, buffer)

    # -- one tile ---------------------------------------------------------------------------
    def _full(self, coords: tuple[int, ...]) -> tuple[int, ...]:
        """``coords`` over every axis (untiled axes: tile 0)."""
        full = [0] * len(self.counts)
        for k, a in enumerate(self.grid.axes):
            full[a] = coords[k]
        return tuple(full)

    def fits(self, coords: tuple[int, ...], tile: np.ndarray) -> bool:
        """Whether ``tile`` is the stored tile at ``coords`` as bricks keep it."""
        return tile.dtype == self.dtype and tile.shape == self.grid.stored_shape(coords)

    def _stored(self, coords: tuple[int, ...]) -> np.ndarray:
        """The part of the slot at ``coords`` that holds its stored tile (a view)."""
        view = self._view[self._full(coords)]
        return view[tuple(slice(0, n) for n in self.grid.stored_shape(coords))]

    def store(self, coords: tuple[int, ...], tile: np.ndarray) -> None:
        """Copy a stored tile (:meth:`fits`) into its slot."""
        self._stored(coords)[...] = tile
        full = self._full(coords)
        self._present[full] = True
        self._used[full] = False
        self._known = None

    def tile(self, coords: tuple[int, ...]) -> np.ndarray:
        """A copy of the stored tile at ``coords`` (present)."""
        return np.array(self._stored(coords), order="F")

    def copy_into(self, coords: tuple[int, ...], src: tuple[slice, ...], out: np.ndarray,
                  dst: tuple[slice, ...]) -> None:
        """``out[dst] = tile[src]`` for the present tile at ``coords``."""
        out[dst] = self._view[self._full(coords)][src]

    def take_used(self, coords: tuple[int, ...]) -> bool:
        """Whether the tile at ``coords`` was read by :meth:`copy_region` since it was stored
        or last asked about (the mark is cleared)."""
        full = self._full(coords)
        used = bool(self._used[full])
        if used:
            self._used[full] = False
            self._known = None
        return used

    def release(self, coords: tuple[int, ...]) -> None:
        """Forget the tile at ``coords`` and give its pages back."""
        self._present[self._full(coords)] = False
        self._known = None
        release_pages(self._map, self.slot_bytes * self.grid.index(coords), self.slot_bytes)

    def clear(self) -> None:
        """Forget every tile and give every page back."""
        self._present[...] = False
        self._used[...] = False
        self._known = None
        release_pages(self._map, 0, len(self._map))

    def close(self) -> None:
        """Forget every tile and unmap the map; these bricks are not used again."""
        buffer = self._map
        del self._view, self._map, self._rows  # no view of the map stays here
        self._present[...] = False
        self._known = None
        try:
            buffer.close()
        except BufferError:  # a view still lives: the map goes with it
            pass

    # -- a region ---------------------------------------------------------------------------
    def copy_region(self, sel: tuple[AxisSel, ...], out: np.ndarray) -> int:
        """Copy a step-1 selection into ``out`` (a fresh F-ordered array of its shape) when
        every tile it touches is present; returns how many tiles that was (0: a step, or some
        tile is missing; nothing was copied)."""
        # one pass over the axes: the tile spans, and where the selection's first tile row
        # lies and its pattern (for :meth:`_gather_rows`)
        spans, pattern, first = [], [], 0
        for s, (e, tile_rows, step) in zip(sel, self._axis_rows, strict=True):
            if s.step != 1:
                return 0
            tile, at = divmod(s.start, e)
            spans.append((tile, (s.start + s.count - 1) // e + 1))
            first += tile * tile_rows + at * step
            pattern.append((at, s.count, e) if s.count > 1 else (0, 1, 1))
        known = tuple(spans)
        if known != self._known:
            tiles = tuple([slice(lo, hi) for lo, hi in spans])
            if not self._present[tiles].all():
                return 0
            self._used[tiles] = True
            self._known, self._known_tiles = known, math.prod([hi - lo for lo, hi in spans])
        if not self._gather_rows(sel[0], first, pattern, out):
            blocks = [_segments(s.start, s.start + s.count, e)
                      for s, e in zip(sel, self.extents, strict=True)]
            for combo in product(*blocks):
                src = self._view[tuple(c[0] for c in combo) + tuple(c[1] for c in combo)]
                np.copyto(_split(out, combo), src.transpose(self._order))
        return self._known_tiles

    def _gather_rows(self, s0: AxisSel, first: int, pattern: list[tuple[int, int, int]],
                     out: np.ndarray) -> bool:
        """Copy the selection as whole tile rows (a tile's voxels along the first axis, one
        run of memory in the slot and in ``out``) with one ``np.take``: each row is then a
        single fixed-size copy, where the block copies step through its voxels (a 512² slice
        across 64³ tiles is 4096 rows of 128 bytes). ``s0`` is the selection's first axis,
        ``first`` its first row, ``pattern`` per axis (start inside the first tile, count,
        tile extent). False when the selection does not cover whole rows, rows are short, or
        there are too many (the block copies do it then)."""
        e0 = self.extents[0]
        if self._rows is None or s0.start % e0 or s0.count % e0 or out.size // e0 > _MAX_ROWS:
            return False
        # the rows read are ``first + index``; the index (cached) depends only on where the
        # selection starts inside its first tiles, so consecutive slices share it
        pattern[0] = (0, s0.count // e0, 1)  # the first axis counted in whole rows
        index = _row_index(tuple(pattern), self._tile_rows, self._row_steps)
        flat = np.ndarray((index.size,), self._rows.dtype, buffer=out)
        self._rows[first:].take(index, out=flat, mode="clip")  # every index is in range
        return True


@lru_cache(maxsize=16)
def _row_index(pattern: tuple[tuple[int, int, int], ...], tile_rows: tuple[int, ...],
               row_steps: tuple[int, ...]) -> np.ndarray:
    """The rows (counted from a selection's first) that hold a selection's tile rows, in the
    output's order: ``pattern`` has per axis (start inside the first tile, count, tile extent;
    the first axis counted in tiles). Read-only; cached, as consecutive slices share it."""
    index = np.zeros(tuple(c for _, c, _ in pattern[:0:-1]) + (pattern[0][1],), np.intp)
    for a, (at, count, extent) in enumerate(pattern):
        j = np.arange(at, at + count, dtype=np.intp)
        steps = (j // extent) * tile_rows[a] + (j % extent) * row_steps[a] - at * row_steps[a]
        index += steps.reshape((-1,) + (1,) * a) if a else steps
    index = index.reshape(-1)
    index.flags.writeable = False
    return index


@lru_cache(maxsize=4096)
def _segments(lo: int, hi: int, extent: int) -> tuple[tuple[slice, slice, slice, int], ...]:
    """``[lo, hi)`` on one axis as (tile slice, in-tile slice, output slice, in-tile length)
    blocks: a partial first tile, the whole tiles, a partial last tile (each when present)."""
    first, last = lo // extent, (hi - 1) // extent
    if first == last:
        return ((slice(first, first + 1), slice(lo - first * extent, hi - first * extent),
                 slice(0, hi - lo), hi - lo),)
    out = []
    body_lo, body_hi = first, last + 1  # tiles fully inside [lo, hi)
    if lo % extent:
        body_lo += 1
        n = extent - lo % extent
        out.append((slice(first, first + 1), slice(lo % extent, extent), slice(0, n), n))
    if hi % extent:
        body_hi -= 1
    if body_hi > body_lo:
        o = body_lo * extent - lo
        out.append((slice(body_lo, body_hi), slice(0, extent),
                    slice(o, o + (body_hi - body_lo) * extent), extent))
    if hi % extent:
        n = hi % extent
        out.append((slice(last, last + 1), slice(0, n), slice(hi - lo - n, hi - lo), n))
    return tuple(out)


def _split(out: np.ndarray, combo: Any) -> np.ndarray:
    """The block ``out[output slices]`` of a C- or F-contiguous ``out`` with each axis split
    into (tiles, in-tile length): the destination whose shape matches the bricks'
    ``(n0, m0, n1, m1, ...)`` view."""
    shape, strides, offset = [], [], 0
    for c, s in zip(combo, out.strides, strict=True):
        o, m = c[2], c[3]
        offset += o.start * s
        shape += [(o.stop - o.start) // m, m]
        strides += [m * s, s]
    return np.ndarray(tuple(shape), out.dtype, buffer=out, offset=offset, strides=tuple(strides))
