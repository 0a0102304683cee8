"""The filtered pyramid methods of docs/pyramids.md#methods: ``gaussian`` and ``lanczos``.

Both work on a *local* part of the floor-cropped level 0 that includes the filter halo (see
:func:`gaussian_reach`, :func:`lanczos_reach`). Edge handling (``mode="nearest"``, clamped
taps) happens only at the true boundary of the cropped volume: inside it the halo supplies
the real neighbours, so a region computed locally is bit-identical to the same region of a
whole-volume computation (the same float64 operations on the same inputs, in the same order).

A kernel wider than its axis costs no more than the axis: every tap beyond an edge reads the
edge voxel (``mode="nearest"``, clamped taps), so the taps past each edge are *folded* into one
weight on the edge voxel (their sum), which is the same filter. Folding is decided from the
global cropped axis length, so regions and whole volumes fold alike. The Gaussian's
normalisation over a radius beyond ``_EXACT_RADIUS`` uses its closed form (erf with the
Euler–Maclaurin end terms, exact to far below the 1e-9 of docs/pyramids.md#methods); Lanczos kernels
of more than ``MAX_LANCZOS_TAPS`` taps are refused (``UnsupportedError``). A folded Gaussian is
a dense filter over its axis: over ``_DIRECT_FOLDED`` voxels it is applied by FFT.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from scipy.ndimage import correlate1d, gaussian_filter1d

from ..errors import UnsupportedError, where
from .blocks import mean_float, work_dtype

__all__ = ["gaussian_reach", "gaussian_region", "lanczos_reach", "lanczos_region", "lanczos_taps"]

TRUNCATE = 4.0
LANCZOS_A = 3
#: Gaussian kernels up to this radius are summed term by term (as scipy does)
_EXACT_RADIUS = 1 << 16
#: folded Gaussians over axes up to this long are applied directly, longer ones by FFT
_DIRECT_FOLDED = 2048
#: the largest Lanczos kernel computed (6·s taps: scales up to 87 381)
MAX_LANCZOS_TAPS = 1 << 19
#: Lanczos kernels up to this many taps are cached
_CACHED_TAPS = 1 << 12


def gaussian_sigma(s: int) -> float:
    """docs/pyramids.md#methods: sigma = 2·s/6 level-0 voxels on axes with s > 1, else 0."""
    return 2.0 * s / 6.0 if s > 1 else 0.0


def gaussian_radius(s: int) -> int:
    """The kernel radius ``scipy.ndimage.gaussian_filter`` uses for that sigma."""
    sigma = gaussian_sigma(s)
    return int(TRUNCATE * sigma + 0.5) if sigma > 0 else 0


def lanczos_span(s: int) -> tuple[int, int]:
    """The first and last tap offsets (from ``i * s``) of the Lanczos-3 kernel stretched by s."""
    centre = (s - 1) / 2.0
    return math.floor(centre - LANCZOS_A * s) + 1, math.ceil(centre + LANCZOS_A * s) - 1


def lanczos_taps(s: int) -> tuple[np.ndarray, np.ndarray]:
    """Tap offsets (from ``i * s``) and normalised weights of the Lanczos-3 kernel stretched by s.

    Level-L voxel i samples level-0 coordinate ``c = (i + 0.5)·s − 0.5 = i·s + (s − 1)/2``; taps
    are the level-0 voxels strictly inside ``(c − 3s, c + 3s)``. The offsets do not depend on i.
    More than :data:`MAX_LANCZOS_TAPS` taps is an ``UnsupportedError``.
    """
    first, last = lanczos_span(s)
    if last - first + 1 > MAX_LANCZOS_TAPS:
        raise UnsupportedError(
            f"{where(None, 'tile:level_scales')}lanczos at scale {s} needs "
            f"{last - first + 1} kernel taps; at most {MAX_LANCZOS_TAPS} are computed "
            f"(scales up to {MAX_LANCZOS_TAPS // (2 * LANCZOS_A)})")
    if last - first + 1 <= _CACHED_TAPS:
        return _cached_taps(s)
    return _taps(s)


@lru_cache(maxsize=64)
def _cached_taps(s: int) -> tuple[np.ndarray, np.ndarray]:
    return _taps(s)


def _taps(s: int) -> tuple[np.ndarray, np.ndarray]:
    centre = (s - 1) / 2.0
    first, last = lanczos_span(s)
    offsets = np.arange(first, last + 1)
    t = (offsets - centre) / s
    w = np.sinc(t) * np.sinc(t / LANCZOS_A)
    w = w / w.sum()
    offsets.flags.writeable = False
    w.flags.writeable = False
    return offsets, w


def lanczos_reach(n0: int, s: int, b: int, r0: int, r1: int) -> tuple[int, int]:
    """Level-0 rows ``[lo, hi)`` of the cropped axis (length ``n0``) that ``lanczos`` level
    rows ``[r0, r1)`` (``r0 < r1``) read: the taps around each output sample, clamped."""
    if s == 1:
        return r0, r1
    first, last = lanczos_span(s)
    lo = min(max(r0 * s + first, 0), n0 - 1)
    hi = min(max((r1 - 1) * s + last, 0), n0 - 1) + 1
    return lo, hi


def gaussian_reach(n0: int, s: int, b: int, r0: int, r1: int) -> tuple[int, int]:
    """Level-0 rows ``[lo, hi)`` that ``gaussian`` level rows ``[r0, r1)`` (``r0 < r1``)
    read: the blocks under them plus the filter radius, clipped to the cropped axis."""
    r = gaussian_radius(s)
    return max(0, r0 * b - r), min(n0, r1 * b + r)


def gaussian_region(x: np.ndarray, scale: Sequence[int], block: Sequence[int],
                    lo: Sequence[int], region: Sequence[tuple[int, int]],
                    n0: Sequence[int] | None = None) -> np.ndarray:
    """Gaussian-filtered block means (float64) of ``region``; ``x`` starts at level-0 ``lo``.

    ``n0``: the cropped level-0 shape (kernels at least as wide as their axis are folded).
    """
    y = x.astype(work_dtype(x.dtype), copy=False)
    for axis, s in enumerate(scale):
        sigma = gaussian_sigma(s)
        if sigma <= 0:
            continue
        radius = gaussian_radius(s)
        n = None if n0 is None else n0[axis]
        if n is None or radius < n:
            # exactly scipy.ndimage.gaussian_filter's pass over this axis
            y = gaussian_filter1d(y, sigma, axis, truncate=TRUNCATE, mode="nearest")
        elif n <= _DIRECT_FOLDED:  # the local part is the whole axis (halo reaches both edges)
            y = correlate1d(y, _folded_gaussian(sigma, radius, n), axis, mode="nearest")
        else:  # a dense n×n filter per line: by FFT, O(n log n) instead of O(n²)
            y = _fft_nearest(y, _folded_gaussian(sigma, radius, n), axis)
    core = tuple(slice(r0 * b - o, r1 * b - o)
                 for (r0, r1), b, o in zip(region, block, lo, strict=True))
    return mean_float(y[core], block)


def _fft_nearest(y: np.ndarray, w: np.ndarray, axis: int) -> np.ndarray:
    """``correlate1d(y, w, axis, mode="nearest")`` for a symmetric ``w`` of ``2n + 1``
    weights over an axis of length ``n``, by FFT (float64 rounding, not bit-identical)."""
    from scipy.signal import fftconvolve

    n = y.shape[axis]
    pad = [(0, 0)] * y.ndim
    pad[axis] = (n, n)
    ext = np.pad(y, pad, mode="edge")
    shape = [1] * y.ndim
    shape[axis] = len(w)
    return fftconvolve(ext, w[::-1].reshape(shape), mode="valid", axes=axis)


def _folded_gaussian(sigma: float, radius: int, n: int) -> np.ndarray:
    """The normalised Gaussian of ``radius`` (>= n) with the taps at distance >= n from the
    centre folded into the two outermost weights (2n + 1 weights in all)."""
    k = np.arange(-(n - 1), n, dtype=np.float64)
    inner = np.exp(-0.5 / (sigma * sigma) * k * k)
    total = _gaussian_total(sigma, radius)
    w = np.empty(2 * n + 1)
    w[1:-1] = inner / total
    w[0] = w[-1] = max(0.0, (1.0 - w[1:-1].sum()) / 2.0)
    return w


def _gaussian_total(sigma: float, radius: int) -> float:
    """``sum(exp(-k²/2σ²) for |k| <= radius)``: term by term up to ``_EXACT_RADIUS``, else
    ``σ√(2π)·erf(r/(σ√2)) + f(r) − r·f(r)/(6σ²)`` (Euler–Maclaurin; the next term is
    O(f(r)/σ³), far below double precision relative to a sum of order σ)."""
    if radius <= _EXACT_RADIUS:
        k = np.arange(-radius, radius + 1, dtype=np.float64)
        return float(np.exp(-0.5 / (sigma * sigma) * k * k).sum())
    r = float(radius)
    fr = math.exp(-0.5 * r * r / (sigma * sigma))
    return (sigma * math.sqrt(2.0 * math.pi) * math.erf(r / (sigma * math.sqrt(2.0)))
            + fr - r * fr / (6.0 * sigma * sigma))


def lanczos_region(x: np.ndarray, scale: Sequence[int], n0: Sequence[int], lo: Sequence[int],
                   region: Sequence[tuple[int, int]]) -> np.ndarray:
    """Separable Lanczos-3 resampling (float64) of ``region``; ``x`` starts at level-0 ``lo``.

    Axes are resampled in ascending order; tap indices are clamped to the cropped volume
    ``[0, n0)`` (edges clamped) and then made local. A kernel with more taps than the axis has
    voxels is folded: each distinct clamped voxel gets the sum of its taps' weights.
    """
    y = x.astype(work_dtype(x.dtype), copy=False)
    for axis, s in enumerate(scale):
        if s == 1:
            continue  # the kernel is exactly the identity (sinc vanishes at non-zero integers)
        offsets, w = lanczos_taps(s)
        r0, r1 = region[axis]
        base = np.arange(r0, r1) * s - lo[axis]
        top = n0[axis] - 1 - lo[axis]
        if len(offsets) > n0[axis]:
            y = _lanczos_folded(y, axis, offsets, w, base, -lo[axis], top)
            continue
        acc: np.ndarray | None = None
        for off, wk in zip(offsets.tolist(), w.tolist(), strict=True):
            idx = np.clip(base + off, -lo[axis], top)
            term = np.take(y, idx, axis=axis)
            term *= wk
            if acc is None:
                acc = term
            else:
                acc += term
        assert acc is not None  # a kernel has at least one tap
        y = acc
    return y


def _lanczos_folded(y: np.ndarray, axis: int, offsets: np.ndarray, w: np.ndarray,
                    base: np.ndarray, bottom: int, top: int) -> np.ndarray:
    """Rows ``base`` resampled along ``axis`` with each clamped voxel's taps summed first.

    The per-voxel weights are sums over the taps in their order and the voxels are then
    accumulated in ascending global order, skipping voxels no row uses: a region and the
    whole axis give bit-identical rows.
    """
    rows = len(base)
    n = top - bottom + 1  # the clamped voxels, local bottom..top
    cum = np.concatenate([[0.0], np.cumsum(w)])
    weights = np.zeros((rows, n))
    for i, b in enumerate(base.tolist()):
        # taps k with b + offsets[k] <= bottom clamp to bottom, >= top to top
        lo_k = int(np.searchsorted(offsets, bottom - b, side="right"))
        hi_k = int(np.searchsorted(offsets, top - b, side="left"))
        weights[i, 0] += cum[lo_k]
        weights[i, n - 1] += cum[-1] - cum[hi_k]
        if hi_k > lo_k:
            pos = b + offsets[lo_k:hi_k] - bottom
            weights[i, pos] += w[lo_k:hi_k]
    shape = list(y.shape)
    shape[axis] = rows
    acc = np.zeros(shape)
    view = np.moveaxis(acc, axis, 0)
    for j in np.flatnonzero(weights.any(axis=0)).tolist():
        col = np.take(y, j + bottom, axis=axis)  # a local index: bottom is -lo
        view += weights[:, j].reshape((rows,) + (1,) * col.ndim) * col
    return acc
