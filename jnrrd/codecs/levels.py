"""The ``compression_level`` a data encoding or tile compression takes, checked up front.

``jnrrd.write``/``jnrrd.convert`` (``compression_level=``) and ``jnrrd convert``
(``--compression-level``) name one level for the data's compressor; a value outside its range
is an error naming the field before anything is written, never the compressor's own message
halfway through the file.
"""

from __future__ import annotations

import operator
from typing import Any

from ..errors import UnsupportedError
from .compress import _LEVEL_RANGE

__all__ = ["LEVEL_RANGE", "check_level"]

#: the levels each compressor takes (gzip: zlib's scale, whichever engine deflates)
LEVEL_RANGE: dict[str, tuple[int, int]] = dict(_LEVEL_RANGE)


def check_level(encoding: str, level: Any, *, what: str = "") -> int | None:
    """``level`` checked for a data ``encoding`` (gzip, bzip2/bz2, zstd, lz4): an
    ``UnsupportedError`` naming ``compression_level`` and the range when it is out of range,
    or when the encoding takes no level (raw, ascii, hex). ``None`` passes; NumPy integers
    become ints."""
    if level is None:
        return None
    name = {"bzip2": "bz2"}.get(encoding, encoding)
    if name not in LEVEL_RANGE:
        raise UnsupportedError(f"{what}compression_level: the {encoding} encoding is not "
                               "compressed; a level applies to gzip, bzip2, zstd and lz4")
    lo, hi = LEVEL_RANGE[name]
    if hasattr(level, "__index__") and not isinstance(level, bool):
        level = operator.index(level)
    if isinstance(level, bool) or not isinstance(level, int) or not lo <= level <= hi:
        scale = " (zlib's scale)" if name == "gzip" else ""
        raise UnsupportedError(f"{what}compression_level: {encoding} takes an integer from "
                               f"{lo} to {hi}{scale}, got {level!r:.40}")
    return level
