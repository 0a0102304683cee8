"""Where each stored tile of an editable volume is, level by level (docs/editing.md).

:class:`Tables` holds one entry per tile of every stored level, by level and level-local
linear index (first tiled axis fastest, as in the file): for internal storage the byte range
``(offset, size)`` in the file (``-1`` for a sparse tile), for external storage the tile
file's name under ``tile:base_dir`` (:data:`BY_PATTERN` when ``tile:pattern`` names it,
``None`` for a sparse tile). ``tile:metadata`` entries ride along when the file has them.
Resizing maps every entry to its tile's new index (:meth:`Tables.remapped`); the header's
tables come out in global order (:meth:`Tables.internal_tables`, :meth:`Tables.files`).
Also here: the pieces of a write, tile by tile (:func:`write_pieces`), which with overlap
reach every tile whose stored extent holds a voxel, halos included.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from itertools import product
from typing import Any, NamedTuple

import numpy as np

from ..tiling.grid import AxisSel, TileGrid
from ..tiling.levels import Level
from ..tiling.spec import Tiling

__all__ = ["BY_PATTERN", "Box", "Tables", "WritePiece", "covers", "write_pieces"]

#: an external tile named by ``tile:pattern`` (no ``tile:files`` entry)
BY_PATTERN = ""
#: a box of voxels: ``(start, stop)`` per axis
Box = tuple[tuple[int, int], ...]


class Tables:
    """Tile locations of every stored level (see the module doc)."""

    def __init__(self, external: bool, levels: Sequence[Level],
                 entries: dict[int, np.ndarray], meta: dict[int, list[Any]] | None) -> None:
        self.external = external
        self.levels = tuple(levels)
        self.entries = entries
        self.meta = meta

    @classmethod
    def of(cls, tiling: Tiling, sizes: np.ndarray | None = None) -> Tables:
        """The tables of a parsed header (internal storage: ``sizes`` as the reader derives
        them when the header has no ``size_table``)."""
        external = tiling.storage == "external"
        entries: dict[int, np.ndarray] = {}
        meta: dict[int, list[Any]] | None = {} if tiling.metadata is not None else None
        for lv in tiling.levels:
            if not lv.stored:
                continue
            lo, hi = lv.first, lv.first + lv.grid.ntiles
            if external:
                names = np.full(lv.grid.ntiles, BY_PATTERN, dtype=object)
                for (li, coords), name in (tiling.files or {}).items():
                    if li == lv.index:
                        names[lv.grid.index(coords)] = name
                entries[lv.index] = names
            else:
                table = np.empty((lv.grid.ntiles, 2), np.int64)
                given = tiling.size_table if sizes is None else sizes
                assert tiling.offset_table is not None and given is not None
                table[:, 0] = tiling.offset_table[lo:hi]
                table[:, 1] = given[lo:hi]
                table[table[:, 0] < 0] = -1
                entries[lv.index] = table
            if meta is not None:
                assert tiling.metadata is not None
                meta[lv.index] = [dict(m) if isinstance(m, dict) else {}
                                  for m in tiling.metadata[lo:hi]]
        return cls(external, tiling.levels, entries, meta)

    def copy(self) -> Tables:
        return Tables(self.external, self.levels,
                      {k: v.copy() for k, v in self.entries.items()},
                      None if self.meta is None else {k: [dict(m) for m in v]
                                                      for k, v in self.meta.items()})

    # -- one tile ---------------------------------------------------------------------------
    def get(self, level: int, index: int) -> Any:
        """The entry of a tile: ``(offset, size)`` or ``None`` (internal); a name,
        :data:`BY_PATTERN` or ``None`` (external)."""
        e = self.entries[level][index]
        if self.external:
            return e
        off, size = int(e[0]), int(e[1])
        return None if off < 0 else (off, size)

    def set(self, level: int, index: int, entry: Any, meta: dict[str, Any] | None) -> None:
        """Point a tile at new bytes (``None``: sparse), with its metadata entry."""
        if self.external:
            self.entries[level][index] = entry
        else:
            self.entries[level][index] = (-1, -1) if entry is None else entry
        if self.meta is not None:
            self.meta[level][index] = dict(meta or {})

    def relocate(self, level: int, index: int, entry: Any) -> None:
        """Move a tile's bytes (a rewrite): its metadata stays."""
        self.entries[level][index] = entry

    # -- resizing ---------------------------------------------------------------------------
    def remapped(self, levels: Sequence[Level],
                 name_of: Callable[[Level, tuple[int, ...], int], str] | None = None
                 ) -> Tables:
        """The tables over new level grids (a resize): each tile keeps its entry at its new
        index; tiles outside the new grid are dropped, new tiles are sparse. ``name_of``
        names the pattern-named tiles explicitly first (a pattern with ``{i}`` names a tile
        by its linear index, which a resize changes)."""
        entries: dict[int, np.ndarray] = {}
        meta: dict[int, list[Any]] | None = {} if self.meta is not None else None
        old = {lv.index: lv for lv in self.levels}
        for lv in levels:
            if not lv.stored:
                continue
            src, grid = self.entries[lv.index], lv.grid
            was = old[lv.index].grid
            if self.external:
                if name_of is not None:
                    src = src.copy()
                    for i in np.flatnonzero(src == BY_PATTERN):
                        src[i] = name_of(old[lv.index], was.coords(int(i)), int(i))
                new = np.full(grid.ntiles, None, dtype=object)
            else:
                new = np.full((grid.ntiles, 2), -1, np.int64)
            keep, moved = _index_map(was, grid)
            new[moved] = src[keep]
            entries[lv.index] = new
            if meta is not None and self.meta is not None:
                m: list[Any] = [{} for _ in range(grid.ntiles)]
                for a, b in zip(keep.tolist(), moved.tolist(), strict=True):
                    m[b] = self.meta[lv.index][a]
                meta[lv.index] = m
        return Tables(self.external, levels, entries, meta)

    # -- the header's tables ----------------------------------------------------------------
    def internal_tables(self) -> tuple[list[int | None], list[int | None]]:
        """``(offset_table, size_table)`` in global order (``None`` for sparse tiles)."""
        offs: list[int | None] = []
        sizes: list[int | None] = []
        for lv in self.levels:
            if lv.stored:
                t = self.entries[lv.index]
                sparse = t[:, 0] < 0
                offs += [None if s else int(o) for o, s in zip(t[:, 0], sparse, strict=True)]
                sizes += [None if s else int(n) for n, s in zip(t[:, 1], sparse, strict=True)]
        return offs, sizes

    def files(self) -> list[dict[str, Any]]:
        """The ``tile:files`` entries: every tile not named by the pattern."""
        out = []
        for lv in self.levels:
            if lv.stored:
                names = self.entries[lv.index]
                for i in np.flatnonzero(names != BY_PATTERN):
                    out.append({"level": lv.index, "indices": list(lv.grid.coords(int(i))),
                                "file": names[i]})
        return out

    def metadata(self) -> list[Any] | None:
        """``tile:metadata`` in global order (``None`` when the file has none)."""
        if self.meta is None:
            return None
        return [m for lv in self.levels if lv.stored for m in self.meta[lv.index]]

    def live_bytes(self) -> int:
        """Bytes of the tiles the tables point at (internal storage)."""
        return int(sum(int(t[t[:, 0] >= 0, 1].sum()) for t in self.entries.values()))

    def tiles(self) -> Iterator[tuple[Level, int, Any]]:
        """``(level, index, entry)`` of every tile that is not sparse, in global order."""
        for lv in self.levels:
            if lv.stored:
                for i in range(lv.grid.ntiles):
                    e = self.get(lv.index, i)
                    if e is not None:
                        yield lv, i, e


def _index_map(was: TileGrid, now: TileGrid) -> tuple[np.ndarray, np.ndarray]:
    """``(old indices, new indices)`` of the tiles both grids hold."""
    if was.grid == now.grid:
        idx = np.arange(was.ntiles)
        return idx, idx
    coords = np.unravel_index(np.arange(was.ntiles), was.grid, order="F")
    inside = np.ones(was.ntiles, bool)
    for c, g in zip(coords, now.grid, strict=True):
        inside &= c < g
    keep = np.flatnonzero(inside)
    moved = np.ravel_multi_index(tuple(c[keep] for c in coords), now.grid, order="F")
    return keep, np.asarray(moved, dtype=np.int64)


class WritePiece(NamedTuple):
    """One tile's part of a write: where in the stored tile, where in the value (ascending
    order over all axes), and whether the write covers the tile's whole valid extent."""

    coords: tuple[int, ...]
    src: tuple[slice, ...]
    dst: tuple[slice, ...]
    covered: bool


def write_pieces(grid: TileGrid, sel: Sequence[AxisSel]) -> Iterator[WritePiece]:
    """The tiles whose stored extent (inside the volume, halo included) holds voxels of the
    selection, and the slices of each (every copy of a voxel is written)."""
    if any(s.count == 0 for s in sel):
        return
    per_axis: list[list[tuple[int, slice, slice, bool]]] = []
    for k, a in enumerate(grid.axes):
        s, size, o, n = sel[a], grid.tile[k], grid.overlap[k], grid.shape[a]
        first = max(0, (s.start - o) // size)
        last = min(grid.grid[k] - 1, (s.last + o) // size)
        opts = []
        for t in range(first, last + 1):
            v0, v1 = max(0, t * size - o), min(n, (t + 1) * size + o)
            stored_lo = t * size - o if grid.edge == "pad" else v0
            piece = _axis_piece(s, v0, v1, stored_lo)
            if piece is not None:
                opts.append((t, *piece))
        per_axis.append(opts)
    whole = [slice(s.start, s.last + 1, s.step) for s in sel]
    out = [slice(0, s.count) for s in sel]
    untiled_cover = all(_covers(sel[a], 0, grid.shape[a]) for a in range(len(sel))
                        if a not in grid.axes)
    for combo in product(*reversed(per_axis)):
        combo = combo[::-1]
        src, dst = list(whole), list(out)
        for (_, sl_src, sl_dst, _), a in zip(combo, grid.axes, strict=True):
            src[a], dst[a] = sl_src, sl_dst
        yield WritePiece(tuple(c[0] for c in combo), tuple(src), tuple(dst),
                         untiled_cover and all(c[3] for c in combo))


def _axis_piece(s: AxisSel, v0: int, v1: int, stored_lo: int
                ) -> tuple[slice, slice, bool] | None:
    """(stored-tile slice, value slice, covered) of selection ``s`` on the voxel range
    ``[v0, v1)`` of a tile stored from ``stored_lo``; None when ``s`` misses it."""
    i0 = max(0, -(-(v0 - s.start) // s.step))
    i1 = min(s.count, -(-(v1 - s.start) // s.step))
    if i0 >= i1:
        return None
    first = s.start + i0 * s.step - stored_lo
    return (slice(first, first + (i1 - i0 - 1) * s.step + 1, s.step), slice(i0, i1),
            _covers(s, v0, v1))


def _covers(s: AxisSel, v0: int, v1: int) -> bool:
    """Whether the selection holds every index of ``[v0, v1)``."""
    return (s.step == 1 or v1 - v0 == 1) and s.start <= v0 and s.last >= v1 - 1 and (
        s.step == 1 or (v0 - s.start) % s.step == 0)


def covers(box: Box, region: Box) -> bool:
    """Whether ``box`` contains ``region``."""
    return all(b0 <= r0 and r1 <= b1 for (b0, b1), (r0, r1) in zip(box, region, strict=True))
