"""``CodecChain``: one tile array ⇄ stored bytes through a validated codec list.

The order is checked once, at construction (array→array*, exactly one array→bytes,
bytes→bytes*), and the per-tile spec is resolved through the chain (shape after transpose,
dtype after cast_value, the fill value transformed like data). Every decoder is given the
exact size it must produce (or a bound derived from the tile size), so decoding is capped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import CodecError
from ._base import (
    DEFAULT_LIMIT,
    ArrayArrayCodec,
    ArrayBytesCodec,
    BytesBytesCodec,
    Codec,
    TileSpec,
    as_dtype,
)
from .registry import get_codec

__all__ = ["CodecChain", "is_raw_chain"]


class CodecChain:
    """A validated codec list bound to one tile shape, dtype and fill value."""

    def __init__(
        self,
        codecs: Sequence[Codec],
        *,
        dtype: Any,
        shape: Sequence[int],
        fill_value: Any = None,
    ) -> None:
        codecs = tuple(codecs)
        for c in codecs:
            if not isinstance(c, Codec):
                raise CodecError(f"codec list entry {c!r} is not a codec; use from_json")
        roles = [_role(c) for c in codecs]
        if roles.count(1) != 1:
            raise CodecError(
                f"codec list {[c.name for c in codecs]} must contain exactly one array->bytes "
                f"codec (found {roles.count(1)})"
            )
        if roles != sorted(roles):
            raise CodecError(
                f"codec list {[c.name for c in codecs]} is out of order: array->array codecs, "
                "then one array->bytes codec, then bytes->bytes codecs"
            )
        if any(not isinstance(n, (int, np.integer)) or n < 0 for n in shape):
            raise CodecError(f"tile shape {tuple(shape)} is not a list of sizes")
        split = roles.index(1)
        self.codecs: tuple[Codec, ...] = codecs
        self._aa: tuple[ArrayArrayCodec, ...] = codecs[:split]  # type: ignore[assignment]
        self._ab: ArrayBytesCodec = codecs[split]  # type: ignore[assignment]
        self._bb: tuple[BytesBytesCodec, ...] = codecs[split + 1 :]  # type: ignore[assignment]
        self.dtype = as_dtype(dtype, "chain dtype")
        self.shape = tuple(int(n) for n in shape)
        self.fill_value = fill_value

        # Resolve the spec through the array->array codecs.
        spec = TileSpec(self.shape, self.dtype, self._fill(fill_value))
        self._specs: list[TileSpec] = []
        for c in self._aa:
            self._specs.append(spec)
            spec = c.resolve(spec)
        self._ab_spec = spec
        self._ab.validate(spec)
        #: The fill value as stored (after the array->array codecs).
        self.encoded_fill_value = spec.fill_value
        #: The dtype handed to the array->bytes codec.
        self.stored_dtype = spec.dtype

        # Sizes: exact where fixed, else a bound, for every bytes->bytes decoder.
        size: int | None = self._ab.encoded_size(spec)
        bound = size if size is not None else DEFAULT_LIMIT
        self._sizes: list[tuple[int | None, int]] = []
        for c in self._bb:
            self._sizes.append((size, bound))
            size = c.encoded_size(size) if size is not None else None
            bound = c.max_encoded_size(bound)
        #: The stored tile size when every codec is fixed-size, else None.
        self.encoded_size = size
        self._simple = not self._aa and not self._bb
        # Decoding walks the codecs backwards: prepare the order once, not per tile.
        self._bb_back = tuple(zip(reversed(self._bb), reversed(self._sizes), strict=True))
        self._aa_back = tuple(zip(reversed(self._aa), reversed(self._specs), strict=True))

    def _fill(self, fill_value: Any) -> Any:
        if fill_value is None:
            return None
        try:
            return np.asarray(fill_value, dtype=self.dtype)[()]
        except (TypeError, ValueError, OverflowError):
            raise CodecError(
                f"fill value {fill_value!r} is not a {self.dtype.name} value"
            ) from None

    @classmethod
    def from_json(
        cls,
        codecs: Sequence[Any],
        *,
        dtype: Any,
        shape: Sequence[int],
        fill_value: Any = None,
        decision: Any = None,
    ) -> CodecChain:
        """Build from Zarr v3 codec JSON (or codec objects); ``decision`` for ``conditional``."""
        if isinstance(codecs, (str, dict)) or not isinstance(codecs, Sequence):
            raise CodecError("codecs: expected a list of codec objects")
        runtime = {"decision": decision} if decision is not None else {}
        built = [get_codec(c, **runtime) for c in codecs]
        return cls(built, dtype=dtype, shape=shape, fill_value=fill_value)

    def with_shape(self, shape: Sequence[int]) -> CodecChain:
        """The same chain for another tile shape (edge tiles)."""
        if tuple(shape) == self.shape:
            return self
        return CodecChain(self.codecs, dtype=self.dtype, shape=shape, fill_value=self.fill_value)

    def to_json(self) -> list[dict[str, Any]]:
        """Canonical JSON of the codec list."""
        return [c.to_json() for c in self.codecs]

    def __repr__(self) -> str:
        return f"CodecChain({self.to_json()!r}, dtype={self.dtype.name}, shape={self.shape})"

    def encode(self, array: Any, *, tile_index: int = 0) -> bytes:
        """Encode one tile (shape ``shape``, indexed like the header's axes)."""
        array = np.asarray(array)
        if array.shape != self.shape:
            raise CodecError(f"tile shape {array.shape}; the chain expects {self.shape}")
        if array.dtype != self.dtype:
            array = array.astype(self.dtype)
        for aa, spec in zip(self._aa, self._specs, strict=True):
            array = aa.encode(array, spec)
        data: bytes | memoryview = self._ab.encode(array, self._ab_spec)
        for bb in self._bb:
            data = bb.encode(data, tile_index=tile_index)
        return data if isinstance(data, bytes) else bytes(data)

    def decode(self, data: bytes | memoryview) -> np.ndarray:
        """Decode one stored tile to an array of ``shape`` and ``dtype`` (native order).

        The result may be a read-only view of the decoded buffer.
        """
        if self._simple:
            return self._ab.decode(data, self._ab_spec)
        for bb, (size, bound) in self._bb_back:
            data = bb.decode(data, size=size, limit=bound)
        array = self._ab.decode(data, self._ab_spec)
        for aa, spec in self._aa_back:
            array = aa.decode(array, spec)
        if array.dtype != self.dtype:
            array = array.astype(self.dtype)
        return array


def _role(codec: Codec) -> int:
    if isinstance(codec, ArrayArrayCodec):
        return 0
    if isinstance(codec, ArrayBytesCodec):
        return 1
    if isinstance(codec, BytesBytesCodec):
        return 2
    raise CodecError(f"codec {codec.name!r} has no role (array->array, array->bytes, ...)")


def is_raw_chain(codecs: Sequence[Any]) -> bool:
    """True when a Zarr v3 codec list is the ``bytes`` codec object alone: tiles are stored
    raw, so every stored size follows from the tile geometry and the element size."""
    return (len(codecs) == 1 and isinstance(codecs[0], dict)
            and codecs[0].get("name") == "bytes")
