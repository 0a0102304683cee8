"""Codec roles, the per-tile spec, and the JSON helpers every codec shares (docs/codecs.md).

A codec is a frozen value object (a frozen dataclass) built from its Zarr v3 JSON; it compares
by configuration and ``to_json()`` gives its canonical JSON. Three roles (zarr-python's split):
array→array codecs transform an in-memory tile, exactly one array→bytes codec serializes it, and
bytes→bytes codecs transform the serialized bytes. Codecs see only a small :class:`TileSpec`
(shape, dtype, fill value), never the JNRRD header.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import math
import warnings
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..errors import CodecError, DataError

__all__ = [
    "DEFAULT_LIMIT",
    "ArrayArrayCodec",
    "ArrayBytesCodec",
    "BytesBytesCodec",
    "Codec",
    "TileSpec",
]

# Upper bound on any decoded size that cannot be derived from the tile geometry; the reader
# policy's default ``max_tile_bytes`` (1 GiB). Decoders never allocate it up front.
DEFAULT_LIMIT = 1 << 30


@dataclass(frozen=True)
class TileSpec:
    """What a codec may know about the tile it transforms: shape, dtype and fill value."""

    shape: tuple[int, ...]
    dtype: np.dtype
    fill_value: Any = None

    @property
    def nbytes(self) -> int:
        """The size of the tile's elements in bytes."""
        return math.prod(self.shape) * self.dtype.itemsize


class Codec:
    """Common base: name, configuration equality, canonical JSON.

    Every built-in codec is a frozen dataclass whose comparing fields are its configuration;
    a third-party codec is written the same way
    (docs/architecture.md#adding-a-compressor-or-any-codec).
    """

    name: ClassVar[str] = ""
    #: Zarr v3 names accepted on read besides ``name`` (e.g. ``optional`` for ``conditional``).
    aliases: ClassVar[tuple[str, ...]] = ()
    #: The encoded bytes end with their own end marker, so a decoder given more bytes than the
    #: codec wrote (up to the next tile, or to the end of the file) stops in the right place.
    #: A chunked internal file whose chain ends in such a codec may omit ``size_table``
    #: (docs/format.md#internal-storage); every other chain needs it. Decides nothing else.
    self_delimiting: ClassVar[bool] = False

    def to_json(self) -> dict[str, Any]:
        """Canonical Zarr v3 JSON (docs/codecs.md#canonical-json: required keys always,
        optional keys only when they differ from the default)."""
        config = self._config_json()
        return {"name": self.name, "configuration": config} if config else {"name": self.name}

    def _config_json(self) -> dict[str, Any]:
        """The ``configuration`` object: every configuration field (a dataclass field that
        ``__init__`` takes and equality compares) except those equal to their default."""
        config: dict[str, Any] = {}
        if not dataclasses.is_dataclass(self):
            return config
        for f in dataclasses.fields(self):
            if not (f.init and f.compare):
                continue
            value = getattr(self, f.name)
            if f.default is not dataclasses.MISSING and value == f.default:
                continue
            config[f.name] = value
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any], **runtime: Any) -> Codec:
        """Build from an already schema-validated configuration object."""
        return cls(**config)

    def with_runtime(self, **runtime: Any) -> Codec:
        """This codec with the non-serialized settings of ``get_codec(..., **runtime)``
        (``conditional`` takes ``decision``/``trial_encode``); codecs that take none return
        themselves."""
        return self

    # A codec class that is not a dataclass (written before codecs were dataclasses) keeps
    # the old behaviour: equal and hashed by its canonical JSON, printed with it, immutable.
    # Dataclass codecs generate their own __eq__, __hash__, __repr__ and __setattr__.

    def _key(self) -> Any:
        return self.to_json()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Codec) and type(self) is type(other) and \
            self._key() == other._key()

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self._key())))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_json().get('configuration', {})!r})"

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, key: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _set(self, **values: Any) -> None:
        """Deprecated: the way codecs stored their configuration before they were frozen
        dataclasses. Still works; declare the configuration as dataclass fields instead."""
        warnings.warn(
            f"{type(self).__name__}: Codec._set is deprecated; declare the configuration as "
            "fields of a frozen dataclass (docs/architecture.md#adding-a-compressor-or-any-codec)",
            DeprecationWarning,
            stacklevel=2,
        )
        for key, value in values.items():
            object.__setattr__(self, key, value)


class ArrayArrayCodec(Codec):
    """array→array: may change shape (transpose) or dtype (cast_value), never to bytes."""

    def resolve(self, spec: TileSpec) -> TileSpec:
        """The spec of the encoded array; raises ``CodecError`` if the input is unsupported.

        Also transforms the fill value (docs/codecs.md#fill-values: fill values go through the
        codec like data).
        """
        return spec

    def encode(self, array: np.ndarray, spec: TileSpec) -> np.ndarray:
        """Encode one tile whose input spec is ``spec``."""
        raise CodecError(f"{self.name}: encode is not available")

    def decode(self, array: np.ndarray, spec: TileSpec) -> np.ndarray:
        """Decode back to an array described by ``spec`` (the encode input spec)."""
        raise CodecError(f"{self.name}: decode is not available")


class ArrayBytesCodec(Codec):
    """array→bytes: the single serializer of a chain."""

    def validate(self, spec: TileSpec) -> None:
        """Raise ``CodecError`` if this codec cannot serialize arrays of ``spec``."""

    def encoded_size(self, spec: TileSpec) -> int | None:
        """Exact output size in bytes, or None when it depends on the data."""
        return spec.nbytes

    def encode(self, array: np.ndarray, spec: TileSpec) -> bytes | memoryview:
        """Serialize one tile."""
        raise CodecError(f"{self.name}: encode is not available")

    def decode(self, data: bytes | memoryview, spec: TileSpec) -> np.ndarray:
        """Deserialize one tile (``DataError`` when the size is wrong)."""
        raise CodecError(f"{self.name}: decode is not available")


class BytesBytesCodec(Codec):
    """bytes→bytes: compressors, checksums, padding, the conditional wrapper."""

    def encoded_size(self, size: int) -> int | None:
        """Exact output size for an input of ``size`` bytes, or None when data-dependent."""
        return size

    def max_encoded_size(self, size: int) -> int:
        """An upper bound of the output size (used to cap decoders of variable-size stages)."""
        exact = self.encoded_size(size)
        return exact if exact is not None else 2 * size + (1 << 16)

    def encode(self, data: bytes | memoryview, *, tile_index: int = 0) -> bytes:
        """Encode the bytes of one tile."""
        raise CodecError(f"{self.name}: encode is not available")

    def decode(
        self, data: bytes | memoryview, *, size: int | None = None, limit: int = DEFAULT_LIMIT
    ) -> bytes | memoryview:
        """Decode; ``size`` is the exact expected output when known, else at most ``limit``."""
        raise CodecError(f"{self.name}: decode is not available")


# ---- helpers ---------------------------------------------------------------------------------


def check_size(name: str, out: bytes | memoryview, size: int | None, limit: int) -> None:
    """DataError unless ``out`` has exactly ``size`` bytes (or at most ``limit``)."""
    if size is not None and len(out) != size:
        raise DataError(f"{name}: decoded {len(out)} bytes; expected exactly {size}")
    if size is None and len(out) > limit:
        raise DataError(f"{name}: decoded more than {limit} bytes")


def b64decode(value: str, name: str, field: str) -> bytes:
    """Strict base64 (RFC 4648) or ``CodecError``."""
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise CodecError(f"{name}: {field}: not valid base64: {value!r}") from None


def b64encode(value: bytes) -> str:
    """base64 text of ``value``."""
    return base64.b64encode(value).decode("ascii")


REAL_KINDS = "iuf"


def is_real(dtype: np.dtype) -> bool:
    """True for the integer and floating-point types the Zarr scalar codecs define."""
    return dtype.kind in REAL_KINDS and dtype.itemsize <= 8 and dtype.kind != "c"


def parse_scalar(value: Any, dtype: np.dtype, what: str) -> Any:
    """A JSON scalar in the Zarr v3 fill-value encoding of ``dtype``, as a NumPy scalar.

    Integers must be JSON integers in range; floats take numbers, ``"NaN"``, ``"Infinity"``,
    ``"+Infinity"`` (accepted on read), ``"-Infinity"`` and ``"0x…"`` hex bit patterns.
    """
    if isinstance(value, np.generic):
        value = value.item()
    if dtype.kind in "iu":
        if isinstance(value, bool) or not isinstance(value, int):
            raise CodecError(f"{what}: {value!r} is not a {dtype.name} value (an integer)")
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise CodecError(f"{what}: {value} is not representable in {dtype.name}")
        return dtype.type(value)
    if dtype.kind == "f":
        if isinstance(value, str):
            special = {"NaN": math.nan, "Infinity": math.inf, "+Infinity": math.inf,
                       "-Infinity": -math.inf}
            if value in special:
                return dtype.type(special[value])
            if value.startswith("0x") and len(value) == 2 + 2 * dtype.itemsize:
                try:
                    bits = int(value[2:], 16)
                except ValueError:
                    raise CodecError(f"{what}: {value!r} is not a hex bit pattern") from None
                raw = bits.to_bytes(dtype.itemsize, "big")
                return np.frombuffer(raw, dtype=dtype.newbyteorder(">"))[0].astype(dtype)
            raise CodecError(f"{what}: {value!r} is not a {dtype.name} value")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise CodecError(f"{what}: {value!r} is not a {dtype.name} value (a number)")
        with np.errstate(over="ignore"):
            return dtype.type(value)
    raise CodecError(f"{what}: data type {dtype.name} has no scalar encoding here")


def scalar_json(value: Any) -> Any:
    """The Zarr v3 fill-value JSON of a NumPy/Python scalar (``"Infinity"`` written)."""
    if isinstance(value, str):
        return "Infinity" if value == "+Infinity" else value
    if isinstance(value, (np.integer, int)) and not isinstance(value, bool):
        return int(value)
    f = float(value)
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    return f if isinstance(value, (float, np.floating)) else value


def same_value(a: Any, b: Any) -> bool:
    """Scalar equality for the fill round-trip check: NaN equals NaN."""
    fa, fb = np.asarray(a), np.asarray(b)
    if fa.dtype.kind == "f" and fb.dtype.kind == "f" and np.isnan(fa) and np.isnan(fb):
        return True
    return bool(fa == fb)


def as_dtype(value: Any, what: str = "data_type") -> np.dtype:
    """A NumPy dtype from a Zarr v3 data type name or a dtype-like (native byte order)."""
    try:
        dtype = np.dtype(value)
    except TypeError:
        raise CodecError(f"{what}: {value!r} is not a data type") from None
    if dtype.kind not in "biufc" or dtype.itemsize == 0:
        raise CodecError(f"{what}: {dtype} is not a numeric data type a codec supports")
    return dtype.newbyteorder("=")
