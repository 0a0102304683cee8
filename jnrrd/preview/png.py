"""A minimal PNG writer: 8-bit RGB, one IDAT chunk, filter 0 (PNG specification, ISO/IEC
15948, §11). Only :mod:`zlib` and :mod:`struct`: a preview needs no imaging library."""

from __future__ import annotations

import os
import struct
import zlib

import numpy as np

from ..errors import ArgumentError
from ..storage import atomic_file, local_target

__all__ = ["encode_png", "write_png"]

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: PNG limits width and height to 2**31 - 1 (§11.2.2)
_MAX_SIDE = 2**31 - 1


def _chunk(kind: bytes, data: bytes) -> bytes:
    # length, type, data, CRC-32 over type + data (§5.3)
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def _picture(rgb: np.ndarray, what: str) -> np.ndarray:
    """``rgb`` as an array a PNG can hold, else an :class:`ArgumentError` starting ``what``."""
    a = np.asarray(rgb)
    if a.ndim != 3 or a.shape[2] != 3 or a.dtype != np.uint8:
        raise ArgumentError(f"{what}: rgb: expected an H x W x 3 uint8 array, got shape "
                            f"{a.shape} dtype {a.dtype}")
    h, w = int(a.shape[0]), int(a.shape[1])
    if not (0 < h <= _MAX_SIDE and 0 < w <= _MAX_SIDE):
        raise ArgumentError(f"{what}: rgb: a PNG needs 1 to {_MAX_SIDE} rows and columns, "
                            f"got {h} x {w}")
    return a


def encode_png(rgb: np.ndarray, *, level: int = 6) -> bytes:
    """The PNG bytes of an ``H x W x 3`` ``uint8`` array (row 0 at the top).

    :class:`~jnrrd.ArgumentError` for another shape or dtype, or an empty picture."""
    a = _picture(rgb, "encode_png")
    h, w = int(a.shape[0]), int(a.shape[1])
    # bit depth 8, colour type 2 (truecolour), deflate, filter method 0, no interlace
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    # every scanline starts with its filter type byte: 0 (None)
    rows = np.empty((h, 1 + 3 * w), dtype=np.uint8)
    rows[:, 0] = 0
    rows[:, 1:] = np.ascontiguousarray(a).reshape(h, 3 * w)
    idat = zlib.compress(rows.tobytes(), level)
    return _SIGNATURE + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")


def write_png(path: str | os.PathLike[str], rgb: np.ndarray) -> None:
    """Write ``rgb`` (``H x W x 3`` ``uint8``) as a PNG file at ``path``.

    The bytes go to a temporary file beside ``path`` (named as every temporary file of this
    library, so ``jnrrd cleanup`` knows it) that replaces it when complete: a failed write
    never leaves a partial picture."""
    data = encode_png(_picture(rgb, f"{os.fspath(path)}: write_png"))
    with local_target(path), atomic_file(os.fspath(path)) as f:  # errors name ``path``
        f.write(data)
