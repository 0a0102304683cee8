"""Core data encodings (docs/format.md#encodings-and-endianness): text forms (ascii, hex)
and streaming compressors.

Decompression with caps lives in :mod:`jnrrd.codecs.compress`; this module holds what only the
untiled data section needs: the text encodings both ways, and compressor objects that take a
volume one slab at a time so the writer never holds a whole compressed copy.
"""

from __future__ import annotations

import bz2
import re
import zlib
from typing import Protocol

import numpy as np

from ..dtypes import bfloat16_words, decimal_int
from ..errors import DataError

__all__ = [
    "BINARY_ENCODINGS",
    "COMPRESSED",
    "ENCODINGS",
    "bfloat16_words",
    "format_ascii",
    "format_hex",
    "parse_ascii",
    "parse_hex",
    "stream_compressor",
]

#: canonical encoding names (aliases are normalised by the header's field checks)
ENCODINGS = ("raw", "ascii", "hex", "gzip", "bzip2", "zstd", "lz4")
#: encoding -> the name used by :mod:`jnrrd.codecs.compress`
COMPRESSED = {"gzip": "gzip", "bzip2": "bz2", "zstd": "zstd", "lz4": "lz4"}
#: encodings whose bytes carry the element byte order
BINARY_ENCODINGS = ("raw", "hex", "gzip", "bzip2", "zstd", "lz4")

_INT_TOKEN = re.compile(rb"[+-]?[0-9]+")
_HEX_JUNK = re.compile(rb"[^0-9A-Fa-f \t\n\r\v\f]")
_WS = re.compile(rb"[ \t\n\r\v\f]+")


def _float_token(tok: bytes) -> float:
    """NRRD §2 float parsing: 'nan' anywhere is NaN, '-inf' is -inf, 'inf' is +inf."""
    low = tok.lower()
    if b"nan" in low:
        return float("nan")
    if b"-inf" in low:
        return float("-inf")
    if b"inf" in low:
        return float("inf")
    return float(tok)


def parse_ascii(text: bytes, count: int, dtype: np.dtype, *, what: str = "") -> np.ndarray:
    """Parse ``count`` whitespace-separated values of ``dtype`` (values beyond are ignored)."""
    tokens = text.split()
    dt = np.dtype(dtype)
    if dt.kind == "c":
        return _parse_complex(tokens, count, dt, what)
    if len(tokens) < count:
        raise DataError(f"{what}ascii data holds {len(tokens)} values, expected {count}")
    tokens = tokens[:count]
    if dt.kind in "iu":
        info = np.iinfo(dt)
        values = []
        for tok in tokens:
            if not _INT_TOKEN.fullmatch(tok):
                raise DataError(f"{what}ascii value {tok[:40]!r} is not an integer ({dt.name})")
            v = decimal_int(tok)
            if v is None or not info.min <= v <= info.max:
                shown = tok.decode() if v is None and len(tok) <= 40 else (
                    f"{tok[:20].decode()}... ({len(tok)} digits)" if v is None else v)
                raise DataError(f"{what}ascii value {shown} is out of range for {dt.name}")
            values.append(v)
        return np.array(values, dtype=dt)
    if dt.kind == "f" or dt.name == "bfloat16":
        try:
            vals = [_float_token(t) for t in tokens]
        except ValueError as exc:
            raise DataError(f"{what}ascii value is not a number: {exc}") from None
        with np.errstate(over="ignore"):
            return np.array(vals, dtype=np.float64).astype(dt)
    raise DataError(f"{what}ascii encoding cannot hold type {dt}")


def _parse_complex(tokens: list[bytes], count: int, dt: np.dtype, what: str) -> np.ndarray:
    if tokens and (tokens[0].startswith(b"(") or tokens[0].endswith(b"j")):
        if len(tokens) < count:
            raise DataError(f"{what}ascii data holds {len(tokens)} values, expected {count}")
        try:
            vals = [complex(t.decode("ascii").strip("()")) for t in tokens[:count]]
        except (ValueError, UnicodeDecodeError):
            raise DataError(f"{what}ascii complex value is malformed") from None
        return np.array(vals, dtype=dt)
    if len(tokens) < 2 * count:
        raise DataError(
            f"{what}ascii data holds {len(tokens)} numbers, expected {2 * count} (re im pairs)"
        )
    try:
        flat = np.array([_float_token(t) for t in tokens[: 2 * count]], dtype=np.float64)
    except ValueError as exc:
        raise DataError(f"{what}ascii value is not a number: {exc}") from None
    out = np.empty(count, dtype=dt)
    # assign the parts: re + 1j*im would turn an infinite imaginary part into NaN + inf j
    out.real = flat[0::2]
    out.imag = flat[1::2]
    return out


def format_ascii(values: np.ndarray, per_line: int = 0) -> bytes:
    """Format a 1-D array as ascii text (complex as ``re im`` pairs), one value per line
    unless ``per_line`` asks for more, always ending with a newline.

    Floats are written as the shortest text that reads back to the same value of their own
    type (``0.33333334`` for float32, not the float64 expansion); ``ml_dtypes.bfloat16``
    values are written through float32, which holds every bfloat16 value exactly.
    """
    flat = np.asarray(values).ravel(order="K")
    if flat.dtype.kind == "c":
        flat = np.stack([flat.real, flat.imag], axis=-1).ravel()
    if flat.dtype.name == "bfloat16":
        flat = flat.astype(np.float32)
    if flat.dtype.kind == "f":
        # str() of a NumPy float scalar is its shortest round-trip repr (also nan, inf, -inf)
        items = [str(v) for v in flat]
    else:
        items = [str(int(v)) for v in flat]
    step = max(1, per_line)
    lines = [" ".join(items[i : i + step]) for i in range(0, len(items), step)]
    return ("\n".join(lines) + "\n").encode("ascii") if lines else b""




def parse_hex(text: bytes, nbytes: int, *, what: str = "") -> bytes:
    """Decode hex text (two digits per byte, any case, whitespace ignored) to ``nbytes``."""
    if _HEX_JUNK.search(text):
        bad = _HEX_JUNK.search(text)
        assert bad is not None
        raise DataError(f"{what}hex data contains a non-hex character {bad.group()!r}")
    digits = _WS.sub(b"", text)
    if len(digits) % 2:
        raise DataError(f"{what}hex data has an odd number of digits ({len(digits)})")
    if len(digits) < 2 * nbytes:
        raise DataError(f"{what}hex data holds {len(digits) // 2} bytes, expected {nbytes}")
    return bytes.fromhex(digits[: 2 * nbytes].decode("ascii"))


def format_hex(data: bytes, line: int = 70) -> bytes:
    """Encode bytes as lower-case hex, ``line`` characters per line (NRRD writes 70)."""
    digits = data.hex().encode("ascii")
    return b"".join(digits[i : i + line] + b"\n" for i in range(0, len(digits), line))


class Compressor(Protocol):
    def compress(self, data: bytes | memoryview) -> bytes: ...
    def flush(self) -> bytes: ...


class _Zstd:
    def __init__(self, level: int) -> None:
        import zstandard

        self._obj = zstandard.ZstdCompressor(level=level).compressobj()

    def compress(self, data: bytes | memoryview) -> bytes:
        return self._obj.compress(data)

    def flush(self) -> bytes:
        return self._obj.flush()


class _Lz4:
    def __init__(self, level: int) -> None:
        import lz4.frame

        self._obj = lz4.frame.LZ4FrameCompressor(compression_level=level)
        self._started = False

    def compress(self, data: bytes | memoryview) -> bytes:
        head = b""
        if not self._started:
            head = self._obj.begin()
            self._started = True
        return head + self._obj.compress(bytes(data))

    def flush(self) -> bytes:
        head = b"" if self._started else self._obj.begin()
        self._started = True
        return head + self._obj.flush()


def stream_compressor(encoding: str, level: int | None = None) -> Compressor:
    """A compressor that writes ONE gzip member / bzip2 stream / zstd frame / LZ4 frame."""
    if encoding == "gzip":
        # wbits 16+15: a gzip (RFC 1952) wrapper, never a bare zlib stream (the writer always
        # writes gzip: docs/format.md#encodings-and-endianness)
        return zlib.compressobj(6 if level is None else level, zlib.DEFLATED, 31)
    if encoding == "bzip2":
        return bz2.BZ2Compressor(9 if level is None else level)
    if encoding == "zstd":
        return _Zstd(3 if level is None else level)
    if encoding == "lz4":
        return _Lz4(0 if level is None else level)
    raise ValueError(f"not a compressed encoding: {encoding!r}")
