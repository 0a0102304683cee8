"""How ``jnrrd convert`` writes its output: checks that make a bad option value a usage error
(exit 2), progress for every output kind, and errors that name the output the user gave."""

from __future__ import annotations

import errno
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import CodecError, JnrrdError
from .common import UsageError

__all__ = ["Reporting", "check_codecs", "check_output_dir", "mib_progress", "write_output"]


def check_output_dir(path: str) -> None:
    """The directory ``path`` goes into must exist (an ``OSError`` naming ``path``, not the
    writer's temporary files)."""
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise FileNotFoundError(errno.ENOENT, "its directory does not exist", path)
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, "is a directory", path)


def check_codecs(codecs: Sequence[Any], dtype: Any, ndim: int) -> None:
    """Build the ``--codecs`` chain once for ``dtype`` before anything is read or written:
    an unknown codec or a bad configuration is a usage error naming ``--codecs``."""
    from ..codecs import CodecChain

    try:
        CodecChain.from_json(list(codecs), dtype=np.dtype(dtype), shape=(1,) * ndim)
    except CodecError as e:
        raise UsageError(f"--codecs: {e}") from None


def write_output(write: Callable[..., None], path: str, data: Any, header: Any, *,
                 tiling_asked: bool, **kw: Any) -> None:
    """``write(path, data, header, **kw)`` with option errors turned into usage errors.

    ``jnrrd.write`` raises a plain ``ValueError``/``TypeError`` only for an impossible option
    value; and when the command line asks for a layout, the input's tiling fields are dropped,
    so an error about a ``tile:`` field of the output comes from the options too.
    """
    try:
        write(path, data, header, **kw)
    except JnrrdError as e:
        # the writer's messages name the output first ("out.jnrrd: tile:pattern: ...")
        msg = str(e)
        field = msg[len(path) + 2:] if msg.startswith(f"{path}: ") else msg
        if field.startswith("write():") or tiling_asked and field.startswith("tile:"):
            raise UsageError(msg) from None
        raise
    except (ValueError, TypeError) as e:
        raise UsageError(str(e)) from None


def mib_progress(bar: Callable[[int, int], None] | None, total_bytes: int
                 ) -> Callable[[int], None] | None:
    """``report(done_bytes)`` drawing ``bar(done, total)`` in MiB (rounded up, at least 1)."""
    if bar is None:
        return None
    total = max(1, math.ceil(total_bytes / (1 << 20)))

    def report(done_bytes: int) -> None:
        bar(total if done_bytes >= total_bytes else done_bytes >> 20, total)

    return report


class Reporting:
    """An array-like over ``data`` that reports the bytes read through it, for writers (NRRD,
    untiled JNRRD) that read their input one slab at a time and draw no progress themselves."""

    def __init__(self, data: Any, report: Callable[[int], None]) -> None:
        self._data = data
        self._report = report
        self._done = 0
        self.shape = tuple(int(n) for n in data.shape)
        self.dtype = np.dtype(data.dtype)
        self.ndim = len(self.shape)

    def __getitem__(self, key: Any) -> np.ndarray:
        out = np.asarray(self._data[key])
        self._done += out.nbytes
        self._report(self._done)
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self[...] if dtype is None else self[...].astype(dtype, copy=False)
