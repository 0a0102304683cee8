"""gzip at libdeflate speed through the ``deflate`` package (a core dependency; zlib where it
cannot be installed: :func:`engine` says which is in use).

libdeflate inflates a whole gzip member in one call, about twice as fast as zlib, and
compresses about three times as fast at level 6 with slightly smaller output. It needs the
whole input at once and an output buffer of the final size: exactly the situation of a tile,
or of a data section whose size the header states (its compressed bytes come from a memory
map of the file, so nothing is read into memory twice).

The library is reached through the ``deflate`` extension module. Where that module exports
libdeflate's own functions (Linux, macOS), they are called through :mod:`ctypes`: the member
is decoded straight into the caller's buffer (no allocation, no copy), with the GIL
released, and the call reports where the member ends, so a second member or trailing bytes
are seen and handed to the strict streaming decoder. Elsewhere ``deflate.gzip_decompress`` is
used, and a stream whose last 8 bytes are not this member's CRC-32 and length (a second
member, trailing bytes) goes to the streaming decoder too.

Every function here returns ``None`` whenever it cannot give the exact answer (library
missing, corrupt or truncated data, output larger than the buffer, more than one member): the
caller then runs the zlib streaming path, which produces the same result or the same error
as without libdeflate. Nothing here ever writes past the buffer it is given.
"""

from __future__ import annotations

import ctypes
import threading
import zlib
from types import ModuleType
from typing import Any

import numpy as np

_deflate: ModuleType | None
try:  # a core dependency, but zlib stands in where it could not be installed
    import deflate as _deflate
except ImportError:  # pragma: no cover - exercised by monkeypatching ``available``
    _deflate = None

__all__ = ["available", "crc32", "deflate_raw", "engine", "gzip_compress", "inflate_into"]

_MAGIC = b"\x1f\x8b"
_SUCCESS, _INSUFFICIENT_SPACE = 0, 3
_SIZE_T = ctypes.c_size_t


def _bind() -> Any:
    """libdeflate's C functions inside the ``deflate`` extension module, or None."""
    if _deflate is None:
        return None
    try:
        lib = ctypes.CDLL(_deflate._deflate.__file__)
        lib.libdeflate_alloc_decompressor.restype = ctypes.c_void_p
        lib.libdeflate_alloc_decompressor.argtypes = []
        fn = lib.libdeflate_gzip_decompress_ex
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, _SIZE_T, ctypes.c_void_p, _SIZE_T,
                       ctypes.POINTER(_SIZE_T), ctypes.POINTER(_SIZE_T)]
    except (AttributeError, OSError):
        return None
    return lib


_lib = _bind()
#: False when the ``deflate`` package is not installed (tests set it to force the fallback)
available = _deflate is not None


def engine() -> str:
    """The gzip engine in use: ``"libdeflate"`` (its functions called straight into the
    caller's buffer), ``"libdeflate (copy)"`` (through ``deflate.gzip_decompress``, where the
    module does not export them), or ``"zlib"`` (no ``deflate`` package)."""
    if not available:
        return "zlib"
    return "libdeflate" if _lib is not None else "libdeflate (copy)"


# A libdeflate decompressor is not safe to share between threads running at the same time.
_local = threading.local()


def _decompressor() -> int:
    d = getattr(_local, "d", None)
    if d is None:
        d = _local.d = _lib.libdeflate_alloc_decompressor()
        if not d:
            raise MemoryError("libdeflate could not allocate a decompressor")
    return d


def inflate_into(data: Any, out: memoryview) -> tuple[int | None, int] | None:
    """Decode the gzip member at the start of ``data`` into ``out`` (writable bytes).

    Returns ``(compressed bytes the member used, bytes written)``; the first is ``None`` when
    the member's end is not known (then the member is the whole of ``data``, or at least its
    last 8 bytes are this member's CRC-32 and length). ``None`` when libdeflate is missing or
    refuses: not gzip, corrupt, truncated, or decoding to more than ``len(out)`` bytes.
    """
    if not available or bytes(data[:2]) != _MAGIC:
        return None
    src = np.frombuffer(data, dtype=np.uint8)
    if _lib is not None:
        dst = np.frombuffer(out, dtype=np.uint8)
        used, got = _SIZE_T(0), _SIZE_T(0)
        res = _lib.libdeflate_gzip_decompress_ex(
            _decompressor(), src.ctypes.data, src.size, dst.ctypes.data, dst.size,
            ctypes.byref(used), ctypes.byref(got))
        if res != _SUCCESS:
            return None
        return used.value, got.value
    return _inflate_copy(src, out)


def _inflate_copy(src: np.ndarray, out: memoryview) -> tuple[int | None, int] | None:
    """Through ``deflate.gzip_decompress`` (an allocation and a copy; the member's end
    unknown, so the trailer stands in for it)."""
    if _deflate is None:
        return None
    try:
        got = _deflate.gzip_decompress(src, max(len(out), 1))
    except _deflate.DeflateError:
        return None
    n = len(got)
    if n > len(out) or src.size < 18:
        return None
    trailer = src[-8:].tobytes()
    if int.from_bytes(trailer[4:], "little") != n & 0xFFFFFFFF:
        return None
    if int.from_bytes(trailer[:4], "little") != _deflate.crc32(got):
        return None
    out[:n] = got
    return None, n


#: libdeflate's level for a zlib level: two higher, so that the default (zlib 6 → libdeflate 8)
#: is no larger than zlib's output (0.998× on the benchmark volume, about 3× faster)
LEVEL_OFFSET = 2


def gzip_compress(data: Any, level: int) -> bytes | None:
    """One gzip member (mtime 0) for zlib ``level`` 1-9 (libdeflate level ``level + 2``), or
    None without libdeflate or for level 0 (stored blocks: zlib's)."""
    if not available or _deflate is None or level == 0:
        return None
    return bytes(_deflate.gzip_compress(data, min(level + LEVEL_OFFSET, 12)))


def deflate_raw(data: Any, level: int) -> bytearray | None:
    """A raw DEFLATE stream (RFC 1951, its last block final) at libdeflate ``level`` 1-12, or
    None without libdeflate (the last part of a parallel gzip write:
    :mod:`jnrrd.codecs.gzip_stream`)."""
    if not available or _deflate is None:
        return None
    return _deflate.deflate_compress(data, level)


def crc32(data: Any) -> int:
    """The CRC-32 of ``data`` through libdeflate (about 3x zlib's speed); zlib's without it."""
    if _deflate is None:
        return zlib.crc32(data)
    return int(_deflate.crc32(data))
