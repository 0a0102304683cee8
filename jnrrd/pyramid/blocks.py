"""Block geometry and exact block reductions (docs/format.md#level-scales-and-sizes,
docs/pyramids.md#methods).

A level-L voxel summarises the level-0 block of ``scale`` voxels under it. On an axis shorter
than its scale the level has one voxel whose block is the whole axis
(docs/format.md#level-scales-and-sizes), so the *effective block* ``b_d`` is ``s_d`` when ``N_d >=
s_d`` and ``N_d`` otherwise; level 0 is then floor-cropped to ``n_d * b_d`` voxels. Every reduction
here works on arrays that start on a block boundary and reduces one axis at a time with a fixed
order of block members, so a region computed from part of level 0 is bit-identical to the same
region of a whole-volume result.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from ..errors import HeaderError, UnsupportedError, where

__all__ = [
    "Sums",
    "block_max",
    "block_min",
    "block_sums",
    "effective_block",
    "finish_mean",
    "level_shape",
    "mean_float",
    "round_to_dtype",
    "work_dtype",
]

_SPLIT = 1 << 32


def check_shape(shape0: Any, field: str = "sizes") -> tuple[int, ...]:
    """``shape0`` as a tuple of positive ints, or ``HeaderError``."""
    try:
        shape = tuple(int(n) for n in shape0)
        ok = all(n == m for n, m in zip(shape, shape0, strict=True)) and len(shape) > 0
    except (TypeError, ValueError):
        ok = False
    if not ok or any(n < 1 for n in shape):
        raise HeaderError(f"{where(None, field)}expected a non-empty list of positive integers, "
                          f"found {shape0!r}")
    return shape


def check_scale(shape0: tuple[int, ...], scale: Any) -> tuple[int, ...]:
    """``scale`` as a tuple of ints >= 1, one per axis of ``shape0``, or ``HeaderError``."""
    field = "tile:level_scales"
    try:
        s = tuple(scale)
        ok = len(s) == len(shape0) and all(
            isinstance(v, int | np.integer) and not isinstance(v, bool) and v >= 1 for v in s)
    except TypeError:
        ok = False
    if not ok:
        raise HeaderError(f"{where(None, field)}expected {len(shape0)} integers >= 1 (one per "
                          f"axis), found {scale!r}")
    return tuple(int(v) for v in s)


def level_shape(shape0: Sequence[int], scale: Sequence[int]) -> tuple[int, ...]:
    """Level shape ``max(1, floor(N / s))`` per axis (docs/format.md#level-scales-and-sizes)."""
    shape = check_shape(shape0)
    s = check_scale(shape, scale)
    return tuple(max(1, n // k) for n, k in zip(shape, s, strict=True))


def effective_block(shape0: tuple[int, ...], scale: tuple[int, ...]) -> tuple[int, ...]:
    """Level-0 voxels per level voxel on each axis: ``s``, or the whole axis when ``N < s``."""
    return tuple(k if n >= k else n for n, k in zip(shape0, scale, strict=True))


def work_dtype(dtype: np.dtype) -> np.dtype:
    """The float type of the float64 arithmetic of docs/pyramids.md#methods (complex128 for
    complex)."""
    return np.dtype(np.complex128 if dtype.kind == "c" else np.float64)


def check_dtype(dtype: Any) -> np.dtype:
    """A dtype the pyramid methods can handle (integers, floats incl. bfloat16, complex)."""
    dt = np.dtype(dtype)
    if dt.kind in "iufc" or dt.name == "bfloat16":
        return dt
    raise UnsupportedError(f"{where(None, 'type')}cannot downsample {dt}: expected an integer, "
                           "float or complex type")


def _members(x: np.ndarray, axis: int, b: int) -> list[np.ndarray]:
    """The ``b`` strided views of block members along ``axis`` (blocks start at index 0)."""
    n = x.shape[axis] // b
    head = (slice(None),) * axis
    return [x[(*head, slice(j, n * b, b))] for j in range(b)]


def _reduce(x: np.ndarray, block: Sequence[int], ufunc: np.ufunc,
            dtype: Any = None) -> np.ndarray:
    """Reduce each block with ``ufunc``, one axis at a time, members in ascending order.

    The axis order is fixed (last axis first) so float sums do not depend on memory layout.
    """
    for axis in reversed(range(x.ndim)):
        b = block[axis]
        parts = _members(x, axis, b)
        if b == 1:
            x = parts[0] if dtype is None else parts[0].astype(dtype, copy=False)
            continue
        acc = ufunc(parts[0], parts[1], dtype=dtype)
        for p in parts[2:]:
            ufunc(acc, p, out=acc, dtype=dtype)
        x = acc
    return x


#: exact (integer) block sums of inputs above this size are computed a few MiB at a time
_CHUNK_BYTES = 4 << 20


def _chunk_axis(x: np.ndarray, block: Sequence[int]) -> int | None:
    """The axis to cut ``x`` along for :func:`_sum_chunked`: the one with the largest stride
    whose slice of one block (``block[a]`` indices) fits ``_CHUNK_BYTES``, unless that is
    the fastest-varying axis (cutting it keeps nothing in cache); None: no such axis."""
    if x.nbytes <= 2 * _CHUNK_BYTES or x.ndim < 2:
        return None
    by_stride = sorted(range(x.ndim), key=lambda a: abs(x.strides[a]), reverse=True)
    for a in by_stride[:-1]:
        if x.shape[a] >= 2 * block[a] and block[a] * x.nbytes // x.shape[a] <= _CHUNK_BYTES:
            return a
    return None


def _layout(x: np.ndarray) -> Literal["C", "F"]:
    """The order NumPy's element-wise results keep for ``x``: "F" for F-ordered input."""
    return "F" if x.flags.f_contiguous or abs(x.strides[0]) < abs(x.strides[-1]) else "C"


def _sum_chunked(x: np.ndarray, block: Sequence[int], acc: np.dtype) -> np.ndarray:
    """``_reduce(x, block, np.add, acc)`` for integer accumulators (exact, so the order of
    the additions does not matter), computed on slices of a few MiB along one axis so that
    the intermediates stay in the CPU cache instead of going through memory at full size."""
    a = _chunk_axis(x, block)
    if a is None:
        return _reduce(x, block, np.add, acc)
    shape = tuple(n // b for n, b in zip(x.shape, block, strict=True))
    out = np.empty(shape, acc, order=_layout(x))
    per = block[a] * max(1, _CHUNK_BYTES // (block[a] * x.nbytes // x.shape[a]))
    head = (slice(None),) * a
    for lo in range(0, shape[a] * block[a], per):
        hi = min(lo + per, shape[a] * block[a])
        out[(*head, slice(lo // block[a], hi // block[a]))] = _reduce(
            x[(*head, slice(lo, hi))], block, np.add, acc)
    return out


def _owned(r: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``r``, copied when it is still a view of the input ``x``."""
    return np.array(r, copy=True) if np.may_share_memory(r, x) else r


def block_max(x: np.ndarray, block: Sequence[int]) -> np.ndarray:
    """Block maximum (NaN propagates)."""
    return _owned(_reduce(x, block, np.maximum), x)


def block_min(x: np.ndarray, block: Sequence[int]) -> np.ndarray:
    """Block minimum (NaN propagates)."""
    return _owned(_reduce(x, block, np.minimum), x)


# --- exact integer means -------------------------------------------------------------------
#
# A block sum is held as parts whose weighted total (weights 2**32 and 1 for the split form) is
# the exact integer sum. The accumulator is chosen so that it provably cannot overflow:
# |sum| <= count * 2**bits (unsigned) or count * 2**(bits-1) (signed), plus count of headroom for
# the rounding offset. 64-bit types are split into a signed high and an unsigned low 32-bit word,
# each summed in int64 (exact for count < 2**31); beyond that Python integers are used.


class Sums:
    """Exact integer block sums of an integer level-0 array, carried between levels."""

    __slots__ = ("count", "dtype", "parts")

    def __init__(self, parts: tuple[np.ndarray, ...], count: int, dtype: np.dtype) -> None:
        self.parts = parts
        self.count = count
        self.dtype = dtype

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the summed level."""
        return self.parts[0].shape

    def rows(self, lo: int, hi: int) -> Sums:
        """Rows ``lo:hi`` along the last axis (views)."""
        return Sums(tuple(p[..., lo:hi] for p in self.parts), self.count, self.dtype)


def _acc_kind(dtype: np.dtype, count: int) -> str | np.dtype:
    bits = dtype.itemsize * 8
    if dtype.kind == "u":
        need, candidates = count << bits, ("uint32", "uint64")
    else:
        need, candidates = (count << (bits - 1)) + count, ("int32", "int64")
    for name in candidates:
        acc = np.dtype(name)
        if need <= np.iinfo(acc).max:
            return acc
    if bits == 64 and count < (1 << 30):
        return "split"
    return "object"


def _split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A 64-bit integer array as (high word, low word), both int64: x = high * 2**32 + low."""
    hi = (x >> 32).astype(np.int64)
    lo = (x & np.array(_SPLIT - 1, dtype=x.dtype)).astype(np.int64)
    return hi, lo


def _as_parts(parts: tuple[np.ndarray, ...], kind: str | np.dtype) -> tuple[np.ndarray, ...]:
    if kind == "object":
        if len(parts) == 2:
            return (parts[0].astype(object) * _SPLIT + parts[1].astype(object),)
        return (parts[0].astype(object),)
    if kind == "split" and len(parts) == 1:
        return _split(parts[0])
    return parts


def block_sums(src: np.ndarray | Sums, block: Sequence[int], dtype: np.dtype | None = None,
               count: int | None = None) -> Sums:
    """Exact block sums of an integer array, or of finer-level ``Sums`` (cascade).

    ``count`` is the number of level-0 voxels per output block (default ``prod(block)``).
    """
    if isinstance(src, Sums):
        parts, dtype, count = src.parts, src.dtype, src.count * math.prod(block)
    else:
        assert dtype is not None
        parts, count = (src,), math.prod(block) if count is None else count
    kind = _acc_kind(dtype, count)
    parts = _as_parts(parts, kind)
    acc = kind if isinstance(kind, np.dtype) else np.dtype(
        object if kind == "object" else np.int64)  # "split": int64 halves
    if acc.kind in "iu":
        out = tuple(_owned(_sum_chunked(p, block, acc), p) for p in parts)
    else:
        out = tuple(_owned(_reduce(p, block, np.add, acc), p) for p in parts)
    return Sums(out, count, dtype)


def _round_div(s: np.ndarray, n: int) -> np.ndarray:
    """``s / n`` rounded half to even, exactly, for an integer (or object) array ``s``."""
    if n == 1:
        return s
    if n & (n - 1) == 0 and s.dtype != object:
        # Power of two: floor((s + n/2 - 1 + parity(s >> k)) / n) rounds half to even; the
        # accumulator has count of headroom, so the addition cannot overflow.
        k = n.bit_length() - 1
        parity = np.right_shift(s, k)
        np.bitwise_and(parity, 1, out=parity)
        parity += s
        parity += n // 2 - 1
        parity >>= k
        return parity
    q = s // n
    r = s - q * n
    up = (2 * r > n) | ((2 * r == n) & ((q & 1) == 1))
    return q + up


def _round_div_split(hi: np.ndarray, lo: np.ndarray, n: int, dtype: np.dtype) -> np.ndarray:
    """``(hi * 2**32 + lo) / n`` rounded half to even, for n < 2**30, without Python ints."""
    qh = hi // n
    rh = hi - qh * n  # 0 <= rh < n
    x = (rh << 32) + lo  # < 2n * 2**32 <= 2**63: no overflow
    q2 = x // n
    r2 = x - q2 * n
    # floor(mean) = qh * 2**32 + q2 lies in the dtype's range; wrap-around arithmetic in
    # 64 bits therefore gives it exactly even if qh * 2**32 alone does not fit.
    floor = (qh.view(np.uint64) << np.uint64(32)) + q2.view(np.uint64)
    up = (2 * r2 > n) | ((2 * r2 == n) & ((q2 & 1) == 1))
    return floor.view(dtype) + up.astype(dtype)


def finish_mean(sums: Sums) -> np.ndarray:
    """The level values: the exact mean of each block, rounded half to even
    (docs/pyramids.md#methods)."""
    n, dtype = sums.count, sums.dtype
    if len(sums.parts) == 2:
        if n < (1 << 30):
            return _round_div_split(sums.parts[0], sums.parts[1], n, dtype)
        (s,) = _as_parts(sums.parts, "object")
    else:
        (s,) = sums.parts
    a = None if s.dtype == object else _chunk_axis(s, (1,) * s.ndim)
    if a is None:
        return np.asarray(_round_div(s, n)).astype(dtype)
    # a few MiB at a time: the temporaries stay in the CPU cache (and are not fresh pages)
    out = np.empty(s.shape, dtype, order=_layout(s))
    per = max(1, _CHUNK_BYTES * s.shape[a] // s.nbytes)
    head = (slice(None),) * a
    for lo in range(0, s.shape[a], per):
        part = (*head, slice(lo, lo + per))
        out[part] = _round_div(s[part], n)
    return out


def mean_float(x: np.ndarray, block: Sequence[int]) -> np.ndarray:
    """Float64 (complex128) block means, members summed in a fixed order."""
    wd = work_dtype(x.dtype)
    s = _owned(_reduce(x, block, np.add, wd), x)
    s /= math.prod(block)
    return s


def round_to_dtype(v: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Float64 values to ``dtype``: integers rounded half to even and clipped; floats cast."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        r = np.rint(v)
        np.clip(r, info.min, info.max, out=r)
        return r.astype(dtype)
    return v.astype(dtype)

