"""The filtered pyramid methods of CONVENTIONS §3: ``gaussian`` and ``lanczos``.

Both work on a *local* part of the floor-cropped level 0 that includes the filter halo (see
:func:`axis_source`). Edge handling (``mode="nearest"``, clamped taps) happens only at the true
boundary of the cropped volume: inside it the halo supplies the real neighbours, so a region
computed locally is bit-identical to the same region of a whole-volume computation (the same
float64 operations on the same inputs, in the same order).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from scipy.ndimage import gaussian_filter

from .blocks import mean_float, work_dtype

__all__ = ["axis_source", "gaussian_region", "lanczos_region", "lanczos_taps"]

TRUNCATE = 4.0
LANCZOS_A = 3


def gaussian_sigma(s: int) -> float:
    """CONVENTIONS §3: sigma = 2·s/6 level-0 voxels on axes with s > 1, else 0."""
    return 2.0 * s / 6.0 if s > 1 else 0.0


def gaussian_radius(s: int) -> int:
    """The kernel radius ``scipy.ndimage.gaussian_filter`` uses for that sigma."""
    sigma = gaussian_sigma(s)
    return int(TRUNCATE * sigma + 0.5) if sigma > 0 else 0


@lru_cache(maxsize=64)
def lanczos_taps(s: int) -> tuple[np.ndarray, np.ndarray]:
    """Tap offsets (from ``i * s``) and normalised weights of the Lanczos-3 kernel stretched by s.

    Level-L voxel i samples level-0 coordinate ``c = (i + 0.5)·s − 0.5 = i·s + (s − 1)/2``; taps
    are the level-0 voxels strictly inside ``(c − 3s, c + 3s)``. The offsets do not depend on i.
    """
    centre = (s - 1) / 2.0
    first = math.floor(centre - LANCZOS_A * s) + 1
    last = math.ceil(centre + LANCZOS_A * s) - 1
    offsets = np.arange(first, last + 1)
    t = (offsets - centre) / s
    w = np.sinc(t) * np.sinc(t / LANCZOS_A)
    w = w / w.sum()
    offsets.flags.writeable = False
    w.flags.writeable = False
    return offsets, w


def axis_source(method: str, n0: int, s: int, b: int, r0: int, r1: int) -> tuple[int, int]:
    """Level-0 rows ``[lo, hi)`` of the cropped axis (length ``n0``) for level rows [r0, r1)."""
    if r1 <= r0:
        return 0, 0
    if method == "lanczos":
        if s == 1:
            return r0, r1
        offsets, _ = lanczos_taps(s)
        lo = min(max(r0 * s + int(offsets[0]), 0), n0 - 1)
        hi = min(max((r1 - 1) * s + int(offsets[-1]), 0), n0 - 1) + 1
        return lo, hi
    lo, hi = r0 * b, r1 * b
    if method == "gaussian":
        r = gaussian_radius(s)
        lo, hi = max(0, lo - r), min(n0, hi + r)
    return lo, hi


def gaussian_region(x: np.ndarray, scale: Sequence[int], block: Sequence[int],
                    lo: Sequence[int], region: Sequence[tuple[int, int]]) -> np.ndarray:
    """Gaussian-filtered block means (float64) of ``region``; ``x`` starts at level-0 ``lo``."""
    sigma = [gaussian_sigma(s) for s in scale]
    y = gaussian_filter(x.astype(work_dtype(x.dtype), copy=False), sigma, truncate=TRUNCATE,
                        mode="nearest")
    core = tuple(slice(r0 * b - o, r1 * b - o)
                 for (r0, r1), b, o in zip(region, block, lo, strict=True))
    return mean_float(y[core], block)


def lanczos_region(x: np.ndarray, scale: Sequence[int], n0: Sequence[int], lo: Sequence[int],
                   region: Sequence[tuple[int, int]]) -> np.ndarray:
    """Separable Lanczos-3 resampling (float64) of ``region``; ``x`` starts at level-0 ``lo``.

    Axes are resampled in ascending order; tap indices are clamped to the cropped volume
    ``[0, n0)`` (edges clamped) and then made local.
    """
    y = x.astype(work_dtype(x.dtype), copy=False)
    for axis, s in enumerate(scale):
        if s == 1:
            continue  # the kernel is exactly the identity (sinc vanishes at non-zero integers)
        offsets, w = lanczos_taps(s)
        r0, r1 = region[axis]
        base = np.arange(r0, r1) * s - lo[axis]
        top = n0[axis] - 1 - lo[axis]
        acc = None
        for off, wk in zip(offsets.tolist(), w.tolist(), strict=True):
            idx = np.clip(base + off, -lo[axis], top)
            term = np.take(y, idx, axis=axis)
            term *= wk
            if acc is None:
                acc = term
            else:
                acc += term
        y = acc
    return y
