"""Level quality (docs/format.md#level-quality ``tile:level_quality``) and per-level geometry
(docs/format.md#per-level-geometry)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import HeaderError, where
from . import blocks

__all__ = ["QualityAccumulator", "level_geometry", "level_quality"]

_CHUNK = 1 << 22  # level-0 voxels compared per step: bounds the float64 temporaries


class QualityAccumulator:
    """Running rmse/psnr of one level, fed with matching level-0 and level pieces.

    Level L is upsampled by nearest-neighbour replication and compared with the floor-cropped
    level 0. ``psnr`` uses the dtype's range for integers and the range of the compared
    (floor-cropped) level-0 data for floats; it is ``None`` when rmse is 0 or undefined.
    """

    def __init__(self, dtype: np.dtype, block: Sequence[int]) -> None:
        self.dtype = np.dtype(dtype)
        self.block = tuple(block)
        self.sse = 0.0
        self.count = 0
        self.lo = math.inf
        self.hi = -math.inf

    def add(self, x0: np.ndarray, level: np.ndarray) -> None:
        """Add level voxels ``level`` and the level-0 blocks ``x0`` under them (block-aligned)."""
        rows = max(1, _CHUNK // max(1, math.prod(level.shape[:-1]) * math.prod(self.block)))
        b_last = self.block[-1]
        for j in range(0, level.shape[-1], rows):
            lv = level[..., j:j + rows]
            x = x0[..., j * b_last:(j + lv.shape[-1]) * b_last]
            shape = [d for n, b in zip(lv.shape, self.block, strict=True) for d in (b, n)]
            crop = tuple(slice(0, n * b) for n, b in zip(lv.shape, self.block, strict=True))
            xv = np.asarray(x[crop], dtype=np.float64).reshape(shape, order="F")
            up = np.asarray(lv, dtype=np.float64).reshape(
                [d for n in lv.shape for d in (1, n)], order="F")
            # With order="F", axis d of x becomes (b_d, n_d): the member index varies fastest.
            diff = (xv - up).reshape(-1)
            self.sse += float(np.dot(diff, diff))
            self.count += diff.size
            if self.dtype.kind not in "iu" and diff.size:
                self.lo = min(self.lo, float(np.min(xv)))
                self.hi = max(self.hi, float(np.max(xv)))

    def result(self) -> dict[str, float | None]:
        """``{"rmse": float, "psnr": float | None}``."""
        if self.count == 0:
            return {"rmse": 0.0, "psnr": None}
        rmse = math.sqrt(self.sse / self.count)
        if self.dtype.kind in "iu":
            info = np.iinfo(self.dtype)
            peak = float(int(info.max) - int(info.min))
        else:
            peak = self.hi - self.lo
        if not math.isfinite(rmse):
            return {"rmse": None, "psnr": None}
        if rmse == 0 or not (math.isfinite(peak) and peak > 0):
            return {"rmse": rmse, "psnr": None}
        return {"rmse": rmse, "psnr": 20.0 * math.log10(peak / rmse)}


def level_quality(level0: Any, level: Any, scale: Sequence[int]) -> dict[str, float | None]:
    """rmse/psnr of ``level`` (of ``scale``) against ``level0`` (docs/format.md#level-quality)."""
    x0 = np.asarray(level0)
    lv = np.asarray(level)
    shape = blocks.check_shape(x0.shape, "level 0 shape")
    s = blocks.check_scale(shape, scale)
    want = tuple(max(1, n // k) for n, k in zip(shape, s, strict=True))
    if lv.shape != want:
        raise HeaderError(f"{where(None, 'level')}expected shape {want} for scale {s}, "
                          f"found {lv.shape}")
    acc = QualityAccumulator(x0.dtype, blocks.effective_block(shape, s))
    acc.add(x0, lv)
    return acc.result()


def level_geometry(scale: Sequence[int], space_origin: Sequence[float] | None,
                   space_directions: Sequence[Sequence[float] | None],
                   centers: Sequence[str | None] | None = None
                   ) -> tuple[list[float] | None, list[list[float] | None]]:
    """Level origin and directions (docs/format.md#per-level-geometry).

    ``dir_L,d = dir_0,d · s_d``; ``origin_L = origin_0 + Σ_d (s_d − 1)/2 · dir_0,d`` over
    cell-centred axes (the default when ``centers`` or an entry is missing/null); node-centred
    axes leave the origin alone. ``None`` directions (non-spatial axes) stay ``None``.
    """
    s = tuple(scale)
    if len(space_directions) != len(s):
        raise HeaderError(f"{where(None, 'space_directions')}expected {len(s)} entries (one "
                          f"per axis), found {len(space_directions)}")
    cen = [None] * len(s) if centers is None else list(centers)
    if len(cen) != len(s):
        raise HeaderError(f"{where(None, 'centers')}expected {len(s)} entries, found {len(cen)}")
    for c in cen:
        if c not in (None, "cell", "node", "???"):
            raise HeaderError(f"{where(None, 'centers')}expected 'cell', 'node' or null, "
                              f"found {c!r}")
    origin = None if space_origin is None else [float(v) for v in space_origin]
    dirs: list[list[float] | None] = []
    for d, (k, vec) in enumerate(zip(s, space_directions, strict=True)):
        if vec is None:
            dirs.append(None)
            continue
        v = [float(c) for c in vec]
        if origin is not None and len(v) != len(origin):
            raise HeaderError(f"{where(None, 'space_directions')}axis {d}: expected "
                              f"{len(origin)} components, found {len(v)}")
        dirs.append([c * k for c in v])
        if origin is not None and cen[d] != "node":
            origin = [o + (k - 1) / 2.0 * c for o, c in zip(origin, v, strict=True)]
    return origin, dirs
