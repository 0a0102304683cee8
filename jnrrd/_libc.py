"""C library functions that Python does not wrap, bound through :mod:`ctypes` (Linux only).

One place binds them: ``sync_file_range(2)`` for the write-back flusher
(:mod:`jnrrd.storage.writeback`), ``madvise(2)`` with advice :mod:`mmap` lacks for
:mod:`jnrrd.engine.prefault`. Each call sets ``errno`` for :func:`ctypes.get_errno`.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

__all__ = ["linux_function"]


def linux_function(name: str, argtypes: list[Any], restype: Any = ctypes.c_int) -> Any:
    """The C library's function ``name`` with its argument and result types, or None where
    the system is not Linux or its C library lacks it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    fn.argtypes = argtypes
    fn.restype = restype
    return fn
