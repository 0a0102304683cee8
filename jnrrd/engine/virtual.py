"""Reads of virtual pyramid levels (levels the file does not store): each tile computed from
level 0 as the writer would store it, through the decoded-tile cache (docs/pyramids.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..tiling.grid import AxisSel
from ..tiling.levels import Level

if TYPE_CHECKING:
    from ..tiling.spec import Tiling
    from .cache import TileCache


class VirtualLevels:
    """The virtual-level reads of :class:`~.volume.Volume` (a base class: the volume
    provides the cache, the tiling, the levels and the level-0 read)."""

    _cache: TileCache
    _tiling: Tiling | None
    _levels: tuple[Level, ...]

    if TYPE_CHECKING:  # the volume's
        @property
        def dtype(self) -> np.dtype: ...

        def _read(self, level: Level, sel: tuple[AxisSel, ...], out: Any = None
                  ) -> np.ndarray: ...

    def _read_virtual(self, level: Level, sel: tuple[AxisSel, ...], out: np.ndarray) -> None:
        grid = level.grid
        for piece in grid.pieces(sel):
            core = self._virtual_core(level, piece.coords)
            src = grid.stored_from_core(piece.coords)
            # piece.src indexes the stored tile; shift into the core array
            shifted = tuple(
                slice(s.start - c.start, s.stop - c.start if s.stop is not None else None, s.step)
                for s, c in zip(piece.src, src, strict=True)
            )
            out[piece.dst] = core[shifted]

    def _virtual_core(self, level: Level, coords: tuple[int, ...]) -> np.ndarray:
        """The core of a virtual level's tile, computed (through the decoded-tile cache)."""
        core = self._cache.get_or_load(
            (level.index, coords), lambda: self._virtual_region(level, level.grid.core(coords)))
        assert core is not None
        return core

    def _virtual_region(self, level: Level, region: tuple[slice, ...]) -> np.ndarray:
        """Level-L voxels of ``region``, computed from level 0 as the writer would store them."""
        from ..pyramid.region import compute_region

        assert self._tiling is not None
        base = self._levels[0]

        def read0(r: tuple[slice, ...]) -> np.ndarray:
            return self._read(base, tuple(AxisSel(s.start, 1, s.stop - s.start) for s in r))

        return compute_region(read0, base.shape, level.scale, self._tiling.downsample_method,
                              region, dtype=self.dtype)

