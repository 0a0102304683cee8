"""Which file format ``jnrrd.write`` writes, and the classic NRRD side of it.

The format comes from ``write(..., format="jnrrd"|"nrrd")`` or the target's suffix, compared
case-insensitively (docs/format.md#file-format-by-suffix); header dicts in NRRD spellings (pynrrd's
``nrrd.read``) are mapped to JNRRD fields by the NRRD reader's own translation before either writer
sees them.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import UnsupportedError

__all__ = ["FILE_FORMATS", "SUFFIXES", "file_format_of", "jnrrd_spelled", "write_nrrd_target"]

#: file suffix (compared in lower case) -> file format (docs/format.md#file-format-by-suffix)
SUFFIXES = {".jnrrd": "jnrrd", ".nrrd": "nrrd", ".nhdr": "nrrd"}
FILE_FORMATS = ("jnrrd", "nrrd")
_TILE_FORMATS = ("contiguous", "chunked")


def file_format_of(target: Any, format: str | None, options: dict[str, Any]) -> str:
    """The file format to write (``"jnrrd"``/``"nrrd"``), from ``format`` or the suffix.

    ``format="contiguous"|"chunked"`` (the tile layout's former keyword) moves to
    ``options["tile_format"]`` with a ``DeprecationWarning``.
    """
    if format in _TILE_FORMATS:
        warnings.warn("write(format='contiguous'|'chunked') is deprecated: the tile layout "
                      "is tile_format=...; format= names the file format ('jnrrd'/'nrrd')",
                      DeprecationWarning, stacklevel=3)
        given = options.get("tile_format")
        if given is not None and given != format:
            raise ValueError(f"format={format!r} (deprecated tile layout) disagrees with "
                             f"tile_format={given!r}")
        options["tile_format"] = format
        format = None
    if format is not None and format not in FILE_FORMATS:
        raise ValueError(f"format must be 'jnrrd' or 'nrrd' (the file format), got {format!r}")
    if not isinstance(target, (str, os.PathLike)):
        return format or "jnrrd"
    path = os.fspath(target)
    suffix = os.path.splitext(path)[1].lower()
    by_suffix = SUFFIXES.get(suffix)
    known = ", ".join(SUFFIXES)
    if format is None:
        if by_suffix is None:
            raise UnsupportedError(f"{path}: cannot tell the file format from the suffix "
                                   f"{suffix or '(none)'!r}; expected one of {known} (any "
                                   "case), or pass format='jnrrd' or format='nrrd'")
        return by_suffix
    if by_suffix is not None and by_suffix != format:
        raise UnsupportedError(f"{path}: format={format!r} disagrees with the suffix "
                               f"{suffix!r}, which means {by_suffix}")
    return format


def jnrrd_spelled(header: Mapping[str, Any] | None, data: Any, index_order: str,
                   target: Any) -> Mapping[str, Any] | None:
    """A header in NRRD spellings (pynrrd's ``nrrd.read``) mapped to JNRRD fields as the
    NRRD reader maps them (jnrrd.nrrd.mapping); any other header unchanged."""
    from ..nrrd.mapping import from_nrrd_fields, is_nrrd_spelled

    if header is None or not is_nrrd_spelled(header):
        return header
    if any(not isinstance(n, (int, np.integer)) for n in data.shape):
        return header  # an unknown (Dask) shape: refused below with its own message
    shape = tuple(int(n) for n in data.shape)
    return from_nrrd_fields(header, shape if index_order == "F" else shape[::-1],
                            source=os.fspath(target) if isinstance(target, (str, os.PathLike))
                            else None)


def write_nrrd_target(target: Any, data: Any, header: Mapping[str, Any] | None, *,
                index_order: str, encoding: str | None, detached: bool,
                tiling: Mapping[str, Any], storage_options: dict[str, Any] | None = None
                      ) -> None:
    """Classic NRRD: untiled, so asking for anything tiled is an error, not ignored."""
    from ..nrrd.writer import write_nrrd

    asked = sorted(k for k, v in tiling.items()
                   if k not in ("progress", "compression_level") and v not in (None, False))
    if asked:
        raise UnsupportedError(f"{_name(target)}NRRD files are untiled: the option(s) "
                               f"{asked} need a JNRRD target (.jnrrd or format='jnrrd')")
    is_path = isinstance(target, (str, os.PathLike))
    detached = detached or (is_path and os.fspath(target).lower().endswith(".nhdr"))
    write_nrrd(os.fspath(target) if is_path else target, data, header,
               index_order=index_order, encoding=encoding, detached=detached,
               level=tiling.get("compression_level"), storage_options=storage_options)


def _name(target: Any) -> str:
    return f"{os.fspath(target)}: " if isinstance(target, (str, os.PathLike)) else ""
