"""Whole levels and level regions computed from level 0 (docs/pyramids.md#methods)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import DataError, HeaderError, where
from . import blocks
from .methods import axis_source, check_method, compute_local

__all__ = ["compute_region", "downsample", "source_region"]

Region = tuple[slice, ...]


def _bounds(level: tuple[int, ...], region: Any) -> tuple[tuple[int, int], ...]:
    """``region`` (step-1 slices in level voxels) as clipped ``(start, stop)`` pairs."""
    if not isinstance(region, tuple) or len(region) != len(level):
        raise HeaderError(f"{where(None, 'region')}expected a tuple of {len(level)} slices, "
                          f"found {region!r}")
    out = []
    for sl, n in zip(region, level, strict=True):
        if not isinstance(sl, slice) or sl.step not in (None, 1):
            raise HeaderError(f"{where(None, 'region')}expected slices with step 1, "
                              f"found {sl!r}")
        try:
            start, stop, _ = sl.indices(n)
        except TypeError as exc:
            raise HeaderError(f"{where(None, 'region')}expected integer slice bounds, "
                              f"found {sl!r}") from exc
        out.append((start, max(start, stop)))
    return tuple(out)


def _plan(shape0: Any, scale: Any, method: Any) -> tuple[tuple[int, ...], ...]:
    shape = blocks.check_shape(shape0)
    s = blocks.check_scale(shape, scale)
    check_method(method)
    level = tuple(max(1, n // k) for n, k in zip(shape, s, strict=True))
    block = blocks.effective_block(shape, s)
    cropped = tuple(n * b for n, b in zip(level, block, strict=True))
    return shape, s, level, block, cropped


def source_region(shape0: Sequence[int], scale: Sequence[int], method: str,
                  region: Region) -> Region:
    """The level-0 region (clipped to the volume) that level-L ``region`` is computed from.

    That is the blocks under the region, plus the filter halo for ``gaussian``/``lanczos``;
    an empty region gives empty slices.
    """
    _, s, level, block, cropped = _plan(shape0, scale, method)
    bounds = _bounds(level, region)
    if any(r1 <= r0 for r0, r1 in bounds):
        return tuple(slice(0, 0) for _ in bounds)
    return tuple(slice(*axis_source(method, n0, k, b, r0, r1))
                 for n0, k, b, (r0, r1) in zip(cropped, s, block, bounds, strict=True))


def compute_region(read0: Callable[[Region], np.ndarray], shape0: Sequence[int],
                   scale: Sequence[int], method: str, region: Region, *,
                   dtype: Any = None) -> np.ndarray:
    """Level-L voxels of ``region``, reading only :func:`source_region` of level 0 via ``read0``.

    ``dtype`` is the level-0 (and result) type; by default that of the array ``read0`` returns.
    The result equals ``downsample(level0, scale, method)[region]`` (bit for bit: the same
    arithmetic on the same voxels, edges handled only at the true volume boundary).
    """
    shape, s, level, block, cropped = _plan(shape0, scale, method)
    bounds = _bounds(level, region)
    src = source_region(shape, s, method, region)
    x = np.asarray(read0(src))
    want = tuple(sl.stop - sl.start for sl in src)
    if x.shape != want:
        raise DataError(f"{where(None, 'level 0')}read {src} returned shape {x.shape}, "
                        f"expected {want}")
    dt = blocks.check_dtype(x.dtype if dtype is None else dtype)
    if x.dtype != dt:
        x = x.astype(dt)
    out_shape = tuple(r1 - r0 for r0, r1 in bounds)
    if 0 in out_shape:
        return np.empty(out_shape, dtype=dt)
    lo = tuple(sl.start for sl in src)
    return compute_local(x, s, block, cropped, lo, bounds, method, dt)


def downsample(a: Any, scale: Sequence[int], method: str = "average") -> np.ndarray:
    """The whole level of ``scale`` computed from a whole level-0 array
    (docs/pyramids.md#methods)."""
    a = np.asarray(a)
    shape = blocks.check_shape(a.shape, "array shape")
    level = tuple(max(1, n // k) for n, k in zip(shape, blocks.check_scale(shape, scale),
                                                     strict=True))
    return compute_region(lambda sl: a[sl], shape, scale, method,
                          tuple(slice(0, n) for n in level))
