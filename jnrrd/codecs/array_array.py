"""array→array codecs: ``transpose`` and ``scale_offset``.

``scale_offset`` follows the merged zarr-extensions text
(docs/codecs.md#scale_offset-and-cast_value-quantization): parameters are typed by the array's
dtype, arithmetic stays in that dtype, integer overflow and inexact integer division are
errors, float overflow gives ±Infinity.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import CodecError
from ._base import ArrayArrayCodec, TileSpec, is_real, parse_scalar, same_value, scalar_json

__all__ = ["ScaleOffset", "Transpose"]


@dataclass(frozen=True, init=False)
class Transpose(ArrayArrayCodec):
    """Permute the axes: ``encoded.shape[i] == input.shape[order[i]]``.

    ``order`` refers to the axes of the array as handed to it (header axis order,
    docs/format.md#axis-order).
    """

    name = "transpose"

    order: tuple[int, ...]
    inverse: tuple[int, ...] = field(init=False, compare=False, repr=False)

    def __init__(self, order: Sequence[int]) -> None:
        if isinstance(order, (str, bytes)) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in order
        ):
            raise CodecError(f"transpose: order: {order!r} is not a list of integers")
        order = tuple(order)
        if sorted(order) != list(range(len(order))):
            raise CodecError(f"transpose: order: {list(order)} is not a permutation of 0..n-1")
        object.__setattr__(self, "order", order)
        object.__setattr__(self, "inverse", tuple(int(i) for i in np.argsort(order)))

    def _config_json(self) -> dict[str, Any]:
        return {"order": list(self.order)}

    def resolve(self, spec: TileSpec) -> TileSpec:
        """The permuted shape; the order must have one entry per axis."""
        if len(self.order) != len(spec.shape):
            raise CodecError(
                f"transpose: order {list(self.order)} has {len(self.order)} entries; the tile "
                f"has {len(spec.shape)} axes"
            )
        return TileSpec(tuple(spec.shape[i] for i in self.order), spec.dtype, spec.fill_value)

    def encode(self, array: np.ndarray, spec: TileSpec) -> np.ndarray:
        """A transposed view (no copy)."""
        return np.transpose(array, self.order)

    def decode(self, array: np.ndarray, spec: TileSpec) -> np.ndarray:
        """The inverse permutation (a view)."""
        return np.transpose(array, self.inverse)


Scalar = int | float | str  # a JSON scalar in the fill-value encoding ("NaN", "0x3f80", ...)


@dataclass(frozen=True)
class ScaleOffset(ArrayArrayCodec):
    """``encoded = (x - offset) * scale``; ``decoded = (y / scale) + offset``, in x's dtype.

    ``offset`` and ``scale`` are kept as their canonical JSON scalars (``"+Infinity"`` becomes
    ``"Infinity"``, a NaN ``"NaN"``, a NumPy scalar a Python number); they are typed by the
    tile's dtype only when a chain resolves them. An empty configuration is a no-op.
    """

    name = "scale_offset"

    # Defaults are dropped from the JSON (docs/codecs.md#canonical-json), compared numerically.
    offset: Scalar = 0
    scale: Scalar = 1

    def __post_init__(self) -> None:
        for name in ("offset", "scale"):
            value = getattr(self, name)
            checked = value.item() if isinstance(value, np.generic) else value
            if isinstance(checked, bool) or not isinstance(checked, (int, float, str)):
                raise CodecError(f"scale_offset: {name}: {value!r} is not a JSON scalar")
            object.__setattr__(self, name, scalar_json(value))

    def _params(self, dtype: np.dtype) -> tuple[Any, Any]:
        if not is_real(dtype) or dtype.kind == "b":
            raise CodecError(
                f"scale_offset: data type {dtype.name} is not supported (integer or float only)"
            )
        offset = parse_scalar(self.offset, dtype, f"scale_offset: offset for {dtype.name}")
        scale = parse_scalar(self.scale, dtype, f"scale_offset: scale for {dtype.name}")
        if scale == 0:
            raise CodecError("scale_offset: scale: 0 cannot be inverted")
        if dtype.kind == "f" and not (np.isfinite(offset) and np.isfinite(scale)):
            raise CodecError("scale_offset: offset and scale must be finite")
        return offset, scale

    def resolve(self, spec: TileSpec) -> TileSpec:
        """Same shape and dtype; the fill value is encoded and must survive a round trip."""
        self._params(spec.dtype)
        fill = spec.fill_value
        if fill is not None:
            arr = np.asarray([fill], dtype=spec.dtype)
            enc = self.encode(arr, spec)
            back = self.decode(enc, spec)
            if not same_value(back[0], arr[0]):
                raise CodecError(
                    f"scale_offset: the fill value {scalar_json(arr[0])} encodes to "
                    f"{scalar_json(enc[0])}, which decodes to {scalar_json(back[0])}"
                )
            fill = enc[0]
        return TileSpec(spec.shape, spec.dtype, fill)

    def encode(self, array: np.ndarray, spec: TileSpec) -> np.ndarray:
        """Encode in the array's own dtype; integer overflow is a ``CodecError``."""
        offset, scale = self._params(spec.dtype)
        if spec.dtype.kind == "f":
            with np.errstate(over="ignore", invalid="ignore"):
                return (array - offset) * scale
        if array.size == 0:
            return array.copy()
        # Integers: the map is affine, so its extremes over the tile are at the tile's min and
        # max. Checking those in exact Python integers proves the dtype arithmetic below
        # cannot wrap (intermediate x - offset included).
        info = np.iinfo(spec.dtype)
        lo, hi = int(array.min()), int(array.max())
        off, sc = int(offset), int(scale)
        for x in (lo, hi):
            d = x - off
            if not info.min <= d <= info.max or not info.min <= d * sc <= info.max:
                raise CodecError(
                    f"scale_offset: ({x} - {off}) * {sc} = {d * sc} (intermediate {d}) is "
                    f"outside {spec.dtype.name}"
                )
        with np.errstate(over="ignore"):
            out = array - offset
            if sc != 1:
                out *= scale
        return out

    def decode(self, array: np.ndarray, spec: TileSpec) -> np.ndarray:
        """Decode with true division; an inexact integer division is a ``CodecError``."""
        offset, scale = self._params(spec.dtype)
        if spec.dtype.kind == "f":
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                return (array / scale) + offset
        if array.size == 0:
            return array.astype(spec.dtype, copy=True)
        info = np.iinfo(spec.dtype)
        off, sc = int(offset), int(scale)
        if sc != 1:
            bad = np.remainder(array, scale) != 0
            if bad.any():
                y = int(array[bad][0])
                raise CodecError(
                    f"scale_offset: decode {y} / {sc} is not an integer; {spec.dtype.name} "
                    "needs exact division"
                )
        lo, hi = int(array.min()), int(array.max())
        for y in (lo, hi):
            q = y // sc
            if not info.min <= q <= info.max or not info.min <= q + off <= info.max:
                raise CodecError(
                    f"scale_offset: decode {y} / {sc} + {off} = {q + off} is outside "
                    f"{spec.dtype.name}"
                )
        with np.errstate(over="ignore"):
            out = array // scale if sc != 1 else array.copy()
            out += offset
        return out
