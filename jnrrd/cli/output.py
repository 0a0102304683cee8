"""How ``jnrrd convert`` writes its output: checks that make a bad option value a usage error
(exit 2), progress for every output kind, and errors that name the output the user gave."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import CodecError, JnrrdError
from ..progress import Reporting, mib_progress
from .common import UsageError

__all__ = ["Reporting", "check_codecs", "check_output_dir", "mib_progress", "write_output"]


def check_output_dir(path: str, *, directory_ok: bool = False) -> None:
    """The directory ``path`` goes into must exist (an ``OSError`` naming ``path``, not the
    writer's temporary files); ``path`` itself must not be a directory unless
    ``directory_ok`` (an OME-Zarr group is one)."""
    if "://" in path:
        return
    d = os.path.dirname(os.path.abspath(path.rstrip("/\\") or path))
    if not os.path.isdir(d):
        raise FileNotFoundError(errno.ENOENT, "its directory does not exist", path)
    if os.path.isdir(path) and not directory_ok:
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
        if field.startswith(("write():", "compression_level:")) or (
                tiling_asked and field.startswith("tile:")):
            raise UsageError(msg) from None
        raise
    except (ValueError, TypeError) as e:
        raise UsageError(str(e)) from None
