"""JNRRD element types ⇄ NumPy dtypes (docs/format.md#types, #endianness).

Stored elements have an explicit byte order; arrays handed to users are in native order.
``bfloat16`` is stored as 16-bit words and handed out as ``ml_dtypes.bfloat16`` when that
package is installed (else ``float32``, exactly), or as the raw ``uint16`` words on request.
This module imports nothing from the header, so codecs can use it.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any, Literal

import numpy as np

from .errors import HeaderError, JnrrdWarning, UnsupportedError, where

__all__ = [
    "TYPES",
    "bfloat16_words",
    "canonical_type",
    "decimal_int",
    "from_user",
    "has_ml_dtypes",
    "storage_dtype",
    "to_user",
    "type_name_for",
    "user_dtype",
]

BFloat16Mode = Literal["ml_dtypes", "float32", "uint16"]

#: the largest element NumPy can describe (``np.dtype(("V", n))``), bytes
MAX_BLOCK_SIZE = 2**31 - 1
#: significant decimal digits of the widest integer any header count or element can hold
#: (2**64 - 1 has 20)
MAX_INT_DIGITS = 20

#: canonical JNRRD type name -> NumPy dtype character code (block and bfloat16 are special)
TYPES: dict[str, str] = {
    "int8": "i1",
    "uint8": "u1",
    "int16": "i2",
    "uint16": "u2",
    "int32": "i4",
    "uint32": "u4",
    "int64": "i8",
    "uint64": "u8",
    "float16": "f2",
    "bfloat16": "u2",
    "float32": "f4",
    "float64": "f8",
    "complex64": "c8",
    "complex128": "c16",
    "block": "V",
}

#: teem's NRRD type names, accepted (with a warning in JNRRD files) and never written
NRRD_ALIASES: dict[str, str] = {
    **dict.fromkeys(["signed char", "int8_t"], "int8"),
    **dict.fromkeys(["uchar", "unsigned char", "uint8_t"], "uint8"),
    **dict.fromkeys(
        ["short", "short int", "signed short", "signed short int", "int16_t"], "int16"
    ),
    **dict.fromkeys(["ushort", "unsigned short", "unsigned short int", "uint16_t"], "uint16"),
    **dict.fromkeys(["int", "signed int", "int32_t"], "int32"),
    **dict.fromkeys(["uint", "unsigned int", "uint32_t"], "uint32"),
    **dict.fromkeys(
        [
            "longlong",
            "long long",
            "long long int",
            "signed long long",
            "signed long long int",
            "int64_t",
        ],
        "int64",
    ),
    **dict.fromkeys(
        ["ulonglong", "unsigned long long", "unsigned long long int", "uint64_t"], "uint64"
    ),
    "float": "float32",
    "double": "float64",
}


def has_ml_dtypes() -> bool:
    """True when ``ml_dtypes`` can be imported."""
    try:
        import ml_dtypes  # noqa: F401
    except ImportError:
        return False
    return True


def _bf16() -> np.dtype:
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


def canonical_type(name: Any, *, source: Any = None, nrrd: bool = False) -> str:
    """Return the canonical JNRRD type name for ``name`` (NRRD aliases warn unless ``nrrd``)."""
    if not isinstance(name, str):
        raise HeaderError(f"{where(source, 'type')}expected a type name string, found {name!r}")
    if name in TYPES:
        return name
    alias = NRRD_ALIASES.get(name) or NRRD_ALIASES.get(" ".join(name.split()))
    if alias is not None:
        if not nrrd:
            warnings.warn(
                f"{where(source, 'type')}NRRD type name {name!r} accepted as {alias!r}",
                JnrrdWarning,
                stacklevel=3,
            )
        return alias
    raise HeaderError(
        f"{where(source, 'type')}unknown type {name!r}; expected one of {', '.join(TYPES)}"
    )


def decimal_int(text: str | bytes) -> int | None:
    """The value of a checked decimal token (``[+-]?[0-9]+``), or ``None`` when it has more
    than :data:`MAX_INT_DIGITS` significant digits.

    ``int()`` refuses strings longer than the interpreter's digit limit (4,300 by default)
    with a bare ``ValueError``, and a longer value fits no 64-bit field anyway; leading zeros
    do not count, so ``000…01`` is 1.
    """
    s = text.decode("ascii") if isinstance(text, bytes) else text
    sign = -1 if s.startswith("-") else 1
    digits = s.lstrip("+-").lstrip("0") or "0"
    if len(digits) > MAX_INT_DIGITS:
        return None
    return sign * int(digits)


def storage_dtype(
    type_name: str, endian: str = "little", block_size: int | None = None
) -> np.dtype:
    """The dtype of stored elements, with an explicit byte order (bfloat16 as 16-bit words)."""
    code = TYPES[type_name]
    if code == "V":
        if not block_size or block_size < 1:
            raise HeaderError(f"type 'block' needs a positive block_size, found {block_size!r}")
        if block_size > MAX_BLOCK_SIZE:
            raise UnsupportedError(f"block_size: {block_size} bytes per element is over the "
                                   f"largest element NumPy can hold ({MAX_BLOCK_SIZE} bytes)")
        return np.dtype(("V", int(block_size)))
    dt = np.dtype(code)
    if dt.itemsize == 1:
        return dt
    return dt.newbyteorder("<" if endian == "little" else ">")


def user_dtype(
    type_name: str, block_size: int | None = None, bfloat16: BFloat16Mode | None = None
) -> np.dtype:
    """The native-order dtype of arrays handed to users for this type."""
    if type_name == "bfloat16":
        mode = _bf16_mode(bfloat16)
        if mode == "ml_dtypes":
            return _bf16()
        return np.dtype("f4" if mode == "float32" else "u2")
    if type_name == "block":
        return storage_dtype("block", block_size=block_size)
    return np.dtype(TYPES[type_name]).newbyteorder("=")


def _bf16_mode(mode: BFloat16Mode | None) -> BFloat16Mode:
    if mode is None:
        return "ml_dtypes" if has_ml_dtypes() else "float32"
    if mode == "ml_dtypes" and not has_ml_dtypes():
        from .errors import MissingDependencyError

        raise MissingDependencyError(
            "bfloat16='ml_dtypes' needs the ml_dtypes package: pip install ml_dtypes "
            "(jnrrd's extra jnrrd[bf16])"
        )
    return mode


def to_user(
    stored: np.ndarray, type_name: str, bfloat16: BFloat16Mode | None = None
) -> np.ndarray:
    """Convert an array of stored elements to the user dtype (native byte order).

    The result may share memory with ``stored`` when no conversion is needed.
    """
    if type_name == "bfloat16":
        words = stored if stored.dtype.isnative else stored.astype(stored.dtype.newbyteorder("="))
        mode = _bf16_mode(bfloat16)
        if mode == "uint16":
            return words
        if mode == "ml_dtypes":
            return words.view(_bf16())
        # Exact: a bfloat16 is the top half of the float32 with the same value.
        return (words.astype(np.uint32) << 16).view(np.float32)
    if stored.dtype.kind == "V" or stored.dtype.isnative:
        return stored
    return stored.astype(stored.dtype.newbyteorder("="))


def from_user(data: np.ndarray, type_name: str) -> np.ndarray:
    """Convert user data to stored element values (native order) for ``type_name``.

    For ``bfloat16`` this accepts ``ml_dtypes.bfloat16`` arrays (bit-exact), ``uint16`` words,
    or any float array, rounded to nearest-even (NaN keeps its sign as a quiet NaN).
    """
    if type_name == "bfloat16":
        if data.dtype.name == "bfloat16":
            return data.view(np.uint16)
        if data.dtype.kind in "ui" and data.dtype.itemsize == 2:
            return data.astype(np.uint16, copy=False)
        return bfloat16_words(data)
    if type_name == "block":
        return data
    target = np.dtype(TYPES[type_name])
    if data.dtype == target:
        return data
    return data.astype(target)


def bfloat16_words(values: Any) -> np.ndarray:
    """Round float64 values to bfloat16 words (nearest even, NaN kept as a quiet NaN).

    Rounding float64 → float32 → bfloat16 could round twice; rounding to float32 *to odd*
    first (truncate, then set the last bit when inexact) makes the second rounding exact.
    """
    v = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        f = v.astype(np.float32)
        back = f.astype(np.float64)
        inexact = (back != v) & np.isfinite(v)
        away = inexact & (np.abs(back) > np.abs(v))
    u = f.view(np.uint32).copy()
    u[away] -= np.uint32(1)  # one float32 ulp toward zero: the truncated value
    u[inexact] |= np.uint32(1)
    f = u.view(np.float32)
    # float32 → bfloat16, nearest even (docs/format.md#types)
    rounded = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))
               >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(f)
    if nan.any():
        sign = ((u >> np.uint32(16)) & np.uint32(0x8000)).astype(np.uint16)
        rounded = np.where(nan, np.uint16(0x7FC0) | sign, rounded)
    return rounded


def type_name_for(dtype: Any) -> str:
    """The JNRRD type name for a NumPy dtype (``UnsupportedError`` for bool, strings...)."""
    dt = np.dtype(dtype)
    if dt.name == "bfloat16":
        return "bfloat16"
    if dt.kind == "V" and dt.fields is None:
        return "block"
    if dt.kind in "iufc":
        name = {
            "i": f"int{dt.itemsize * 8}",
            "u": f"uint{dt.itemsize * 8}",
            "f": f"float{dt.itemsize * 8}",
            "c": f"complex{dt.itemsize * 8}",
        }[dt.kind]
        if name in TYPES:
            return name
    raise UnsupportedError(
        f"dtype {dt} has no JNRRD type; convert it first (e.g. bool -> uint8)"
    )


def native_endian() -> str:
    """``"little"`` or ``"big"``: this machine's byte order."""
    return sys.byteorder
