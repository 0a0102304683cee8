"""Stored integers with a rescale (DICOM RescaleSlope/Intercept, NIfTI scl_slope/scl_inter).

The values a reader gives are ``stored * slope + intercept``. :func:`plan_rescale` decides
their type and whether a tiled JNRRD can keep the stored integers themselves, decoded on read
by a ``scale_offset`` + ``cast_value`` codec pair (docs/clinical.md#rescaled-values):

- **integer slope and intercept**: the values are integers; their type is the smallest
  integer type holding ``[lo, hi] * slope + intercept`` over the stored type's range (as GDCM
  chooses it). When that type is wider than the stored one and the slope is 1 or -1, the tiles
  keep the stored integers: ``scale_offset`` (``offset`` = intercept, ``scale`` = slope)
  and ``cast_value`` to the stored type.
- **otherwise** the values are floating point (``float_dtype``, float32 by default), computed
  as ``float64(stored) * slope + intercept`` rounded once to that type. The tiles keep the
  stored integers when ``scale_offset`` (``offset`` = intercept, ``scale`` = 1/slope) and
  ``cast_value`` give back exactly those values for **every** stored value in ``[lo, hi]``
  (checked exhaustively through the codec chain, for stored types of up to 16 bits); else the
  values are stored as floats.

Only level 0 is exact through the codecs: coarser pyramid levels are rounded to the stored
integer grid (within half a slope), since a block average is rarely on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Rescale", "Rescaled", "plan_rescale", "varying_type"]

_INT_TYPES = [np.dtype(t) for t in ("u1", "i1", "u2", "i2", "u4", "i4", "i8")]
#: the largest stored range checked value by value for the float codec path
_EXHAUSTIVE = 1 << 16


@dataclass(frozen=True)
class Rescale:
    """How ``stored * slope + intercept`` is given and stored: ``dtype`` of the values,
    ``codecs`` (array→array codec JSON keeping the stored integers, or ``None``) and the
    ``padding_value`` those codecs can carry (the value of stored 0)."""

    stored: np.dtype
    slope: float
    intercept: float
    dtype: np.dtype
    codecs: list[dict[str, Any]] | None
    padding_value: Any

    @property
    def identity(self) -> bool:
        return self.slope == 1 and self.intercept == 0 and self.dtype == self.stored

    def apply(self, raw: np.ndarray) -> np.ndarray:
        """The values of the stored integers ``raw``."""
        if self.identity:
            return np.asarray(raw, dtype=self.dtype)
        if self.dtype.kind in "iu":
            # the values' type holds stored * slope + intercept for every stored value of
            # the stored range, so the arithmetic can stay in it
            out = np.asarray(raw).astype(self.dtype)
            if self.slope != 1:
                out *= self.dtype.type(int(self.slope))
            if self.intercept:
                out += self.dtype.type(int(self.intercept))
            return out
        return (np.asarray(raw).astype(np.float64) * self.slope + self.intercept).astype(
            self.dtype)


def plan_rescale(stored: Any, slope: float, intercept: float, *,
                 stored_range: tuple[int, int] | None = None,
                 float_dtype: Any = np.float32) -> Rescale:
    """The :class:`Rescale` of stored values of type ``stored`` (range ``stored_range``,
    default the type's) for ``slope`` and ``intercept``."""
    st = np.dtype(stored)
    slope, intercept = float(slope), float(intercept)
    if slope == 1 and intercept == 0:
        return Rescale(st, 1.0, 0.0, st, None, 0)
    if st.kind not in "iu":  # float stored values: plain float arithmetic, no codec
        ft = np.result_type(st, np.dtype(float_dtype))
        return Rescale(st, slope, intercept, ft, None, 0)
    lo, hi = stored_range if stored_range is not None else (int(np.iinfo(st).min),
                                                             int(np.iinfo(st).max))
    if slope.is_integer() and intercept.is_integer():
        dtype = _int_type([(lo, hi, slope, intercept)])
        codecs = None
        if abs(slope) == 1 and dtype.itemsize > st.itemsize:
            codecs = [_scale_offset(int(intercept), int(slope)),
                      {"name": "cast_value", "configuration": {"data_type": st.name}}]
        return Rescale(st, slope, intercept, dtype, codecs, int(intercept))
    dtype = np.dtype(float_dtype)
    plan = Rescale(st, slope, intercept, dtype, None, 0)
    value0 = plan.apply(np.zeros(1, st))[0].item()
    codecs = [_scale_offset(_typed(intercept, dtype), _typed(1.0 / slope, dtype)),
              {"name": "cast_value", "configuration": {"data_type": st.name}}]
    if hi - lo < _EXHAUSTIVE and lo <= 0 <= hi and _exact(plan, codecs, lo, hi, value0):
        return Rescale(st, slope, intercept, dtype, codecs, value0)
    return plan


def _int_type(ranges: list[tuple[int, int, float, float]]) -> np.dtype:
    """The smallest integer type holding ``lo * slope + intercept`` and ``hi * slope +
    intercept`` of every ``(lo, hi, slope, intercept)`` (integer slopes and intercepts)."""
    ends = [v for lo, hi, s, i in ranges for v in (lo * int(s) + int(i), hi * int(s) + int(i))]
    low, high = min(ends), max(ends)
    return next((t for t in _INT_TYPES if np.iinfo(t).min <= low and high <= np.iinfo(t).max),
                np.dtype("i8"))


def varying_type(stored: Any, rescales: list[tuple[float, float]], *,
                 stored_range: tuple[int, int] | None = None,
                 float_dtype: Any = np.float64) -> np.dtype:
    """The values' type of images whose rescale differs from image to image: the smallest
    integer type holding every image's rescaled range when every slope and intercept is an
    integer (exact, as GDCM types a single image), else ``float_dtype``."""
    st = np.dtype(stored)
    if st.kind not in "iu" or not all(float(s).is_integer() and float(i).is_integer()
                                      for s, i in rescales):
        return np.result_type(st, np.dtype(float_dtype)) if st.kind == "f" else np.dtype(
            float_dtype)
    lo, hi = stored_range if stored_range is not None else (int(np.iinfo(st).min),
                                                             int(np.iinfo(st).max))
    return _int_type([(lo, hi, s, i) for s, i in rescales])


def _scale_offset(offset: Any, scale: Any) -> dict[str, Any]:
    config = {}
    if offset != 0:
        config["offset"] = offset
    if scale != 1:
        config["scale"] = scale
    return {"name": "scale_offset", "configuration": config}


def _typed(value: float, dtype: np.dtype) -> float:
    """``value`` rounded to ``dtype`` (as the codec will parse it), as a Python float."""
    return float(np.asarray(value, dtype=dtype))


def _exact(plan: Rescale, codecs: list[dict[str, Any]], lo: int, hi: int, fill: Any) -> bool:
    """Whether the codec chain encodes every value of stored ``lo..hi`` to that stored value
    and decodes it back to the same value."""
    from ..codecs import CodecChain
    from ..errors import CodecError

    raw = np.arange(lo, hi + 1, dtype=np.int64).astype(plan.stored)
    values = plan.apply(raw)
    if not np.all(np.isfinite(values)):
        return False
    try:
        chain = CodecChain.from_json([*codecs, {"name": "bytes",
                                                "configuration": {"endian": "little"}}],
                                     dtype=plan.dtype, shape=raw.shape, fill_value=fill)
        encoded = chain.encode(values)
        back = chain.decode(encoded)
    except CodecError:
        return False
    return (encoded == raw.astype(plan.stored.newbyteorder("<")).tobytes()
            and np.array_equal(back, values))


class Rescaled:
    """A lazy array-like of the values of a stored-integer array-like ``raw`` (NumPy slicing
    semantics; each read converts only what it reads)."""

    def __init__(self, raw: Any, plan: Rescale) -> None:
        self._raw, self.plan = raw, plan
        self.shape = tuple(int(n) for n in raw.shape)
        self.dtype = plan.dtype
        self.ndim = len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __getitem__(self, key: Any) -> np.ndarray:
        return self.plan.apply(np.asarray(self._raw[key]))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self[...]
        return out if dtype is None else out.astype(dtype, copy=False)
