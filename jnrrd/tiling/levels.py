"""Resolution levels: scales, level shapes, per-level grids, stored/virtual
(docs/format.md#stored-and-virtual-levels).

An integer scale applies to tiled axes only; a list is positional over ``tile:dimensions`` or
per-axis over all axes (non-tiled entries must be 1). Level shape ``max(1, floor(N / s))``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import HeaderError
from .grid import TileGrid
from .values import is_int

__all__ = ["Level", "expand_scale", "level_shape", "levels_from_argument", "raw_stored_sizes"]


@dataclass(frozen=True)
class Level:
    """One resolution level: its scale (all axes), grid, and where its tiles are counted."""

    index: int
    scale: tuple[int, ...]
    grid: TileGrid
    stored: bool
    first: int  # global index of its first tile among stored levels (-1 when virtual)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.grid.shape


def level_shape(shape0: Sequence[int], scale: Sequence[int]) -> tuple[int, ...]:
    """``max(1, floor(N / s))`` per axis."""
    return tuple(max(1, n // s) for n, s in zip(shape0, scale, strict=True))


def expand_scale(
    value: Any,
    ndim: int,
    axes: Sequence[int],
    *,
    field: str = "tile:level_scales",
    prefix: str = "",
) -> tuple[int, ...]:
    """One level's scale over all axes from an int, a positional or a per-axis list."""
    if is_int(value):
        s = int(value)
        if s < 1:
            raise HeaderError(f"{prefix}{field}: scale must be ≥ 1, found {value!r}")
        return tuple(s if a in axes else 1 for a in range(ndim))
    if isinstance(value, (list, tuple)) and all(is_int(v) and v >= 1 for v in value):
        ints = [int(v) for v in value]
        if len(ints) == len(axes):
            full = [1] * ndim
            for a, s in zip(axes, ints, strict=True):
                full[a] = s
            return tuple(full)
        if len(ints) == ndim:
            for a in range(ndim):
                if a not in axes and ints[a] != 1:
                    raise HeaderError(
                        f"{prefix}{field}: axis {a} is not tiled, so its scale must be 1, "
                        f"found {ints[a]}"
                    )
            return tuple(ints)
    raise HeaderError(
        f"{prefix}{field}: expected an integer ≥ 1 or a list of {len(axes)} (tiled axes) or "
        f"{ndim} (all axes) integers ≥ 1, found {value!r}"
    )


def levels_from_argument(
    levels: Any, ndim: int, axes: Sequence[int], scaled: Sequence[int] | None = None
) -> list[tuple[int, ...]]:
    """Scales for ``write(levels=...)``: ``N`` (scales 2**k), or a list of ints/lists.

    An integer (``N`` or a list entry) scales the ``scaled`` axes (default: every tiled axis;
    the writer passes the tiled domain axes, docs/format.md#domain-axes); a list entry is per tiled
    axis or per axis as in ``tile:level_scales``.
    """
    scaled = axes if scaled is None else scaled
    if is_int(levels):
        n = int(levels)
        if n < 1:
            raise ValueError(f"levels must be ≥ 1, got {levels!r}")
        return [tuple(2**k if a in scaled else 1 for a in range(ndim)) for k in range(n)]
    if isinstance(levels, (list, tuple)) and levels:
        scales = [expand_scale(v, ndim, scaled if is_int(v) else axes, field="levels")
                  for v in levels]
        if any(s != 1 for s in scales[0]):
            raise ValueError("levels: the first level must have scale 1 (full resolution)")
        return scales
    raise ValueError(f"levels must be an int or a non-empty list of scales, got {levels!r}")


def raw_stored_sizes(levels: Sequence[Level], itemsize: int) -> np.ndarray:
    """Stored bytes of every tile of the stored levels when tiles are raw (voxels × element
    size, halo and padding included), in global tile order, as int64."""
    parts = [lv.grid.stored_voxels() * itemsize for lv in levels if lv.stored]
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
