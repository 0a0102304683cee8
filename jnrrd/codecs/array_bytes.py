"""The ``bytes`` codec: the array→bytes serializer (Zarr v3 core spec,
docs/format.md#tile-codecs).

A tile is indexed like the header's axes (axis 0 first) and ``bytes`` writes it with axis 0
fastest (Fortran order). For a Zarr reader the same bytes are a C-order chunk of the reversed
shape.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from ..errors import CodecError, DataError
from ._base import ArrayBytesCodec, TileSpec

__all__ = ["Bytes"]

_NATIVE = sys.byteorder


@dataclass(frozen=True)
class Bytes(ArrayBytesCodec):
    """Serialize a tile in the given byte order, axis 0 fastest."""

    name = "bytes"

    endian: str | None = None  # "little" or "big"; required for multi-byte types

    def __post_init__(self) -> None:
        if self.endian not in (None, "little", "big"):
            raise CodecError(f"bytes: endian: {self.endian!r} is not 'little' or 'big'")

    def validate(self, spec: TileSpec) -> None:
        """Multi-byte types need an endian (Zarr v3 core: required unless itemsize 1)."""
        if spec.dtype.kind not in "biufc":
            raise CodecError(f"bytes: data type {spec.dtype} cannot be serialized")
        if spec.dtype.itemsize > 1 and self.endian is None:
            raise CodecError(
                f"bytes: endian is required for the multi-byte data type {spec.dtype.name}"
            )

    def _stored(self, dtype: np.dtype) -> np.dtype:
        if dtype.itemsize == 1 or self.endian is None:
            return dtype
        return dtype.newbyteorder("<" if self.endian == "little" else ">")

    def encode(self, array: np.ndarray, spec: TileSpec) -> bytes | memoryview:
        """Bytes of ``array`` in the configured order, axis 0 fastest."""
        array = np.asarray(array)
        if array.shape != spec.shape:
            raise CodecError(f"bytes: array shape {array.shape}; expected {spec.shape}")
        stored = self._stored(spec.dtype)
        if array.dtype != stored:
            array = array.astype(stored)
        if array.flags.f_contiguous:
            # The transposed view of a Fortran-ordered array is C-contiguous: no copy.
            return array.T.data.cast("B") if array.size else b""
        return array.tobytes(order="F")

    def decode(self, data: bytes | memoryview, spec: TileSpec) -> np.ndarray:
        """The tile as a native-order array (a read-only view when no conversion is needed)."""
        if len(data) != spec.nbytes:
            raise DataError(
                f"bytes: tile data is {len(data)} bytes; expected {spec.nbytes} "
                f"({'x'.join(map(str, spec.shape)) or 'scalar'} {spec.dtype.name})"
            )
        stored = self._stored(spec.dtype)
        array = np.frombuffer(data, dtype=stored).reshape(spec.shape, order="F")
        if stored != spec.dtype:
            array = array.astype(spec.dtype)
        return array
