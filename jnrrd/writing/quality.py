"""The level quality of a tiled write (docs/format.md#level-quality ``tile:level_quality``) when the
levels are not built in the writer's single pass: level 0 read region by region and fed to
the pyramid builder. Used by the NumPy and Dask writers."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .layout import TilePlan
from .source import read_dtype

__all__ = ["quality_by_region"]


def quality_by_region(plan: TilePlan, read0: Callable[[tuple[slice, ...]], np.ndarray]
                      ) -> list[Any]:
    """``tile:level_quality`` of every level, computed from level 0 read region by region
    (slabs along the last axis) through the pyramid builder."""
    from ..pyramid.builder import PyramidBuilder

    builder = PyramidBuilder(plan.shape, read_dtype(read0, plan), plan.scales, plan.method,
                             quality=True)
    axis = len(plan.shape) - 1
    step = max(1, math.lcm(*(s[axis] for s in plan.scales)))
    n = plan.shape[axis]
    for k in range(0, n, step * 8):
        key = tuple(slice(k, min(n, k + step * 8)) if a == axis else slice(0, m)
                    for a, m in enumerate(plan.shape))
        for _ in builder.feed(read0(key)) or ():
            pass
    for _ in builder.finish() or ():
        pass
    return builder.quality()
