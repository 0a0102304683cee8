"""Typed, checked core fields (docs/format.md#core-fields, #types, #encodings-and-endianness,
#where-the-data-is).

:func:`core_fields` reads a :class:`Header` (or any mapping) and returns a frozen
:class:`CoreFields` with normalised values, raising ``HeaderError`` with the file, the field
and what was expected for anything malformed. Lenient readings (aliases, defaults) warn.
The space and per-axis checks live in :mod:`.geometry_fields`, the detached data fields in
:mod:`.detached_fields`, the value checker in :mod:`.checker`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import MAX_BLOCK_SIZE, TYPES, canonical_type
from ..errors import HeaderError, UnsupportedError, where
from .checker import Checker, Number
from .detached_fields import DataFilePattern, detached_fields
from .geometry_fields import check_centers, check_kinds, check_strings, space_fields
from .model import TILE_URI_PREFIX, find_prefix

__all__ = ["ENCODINGS", "CoreFields", "core_fields"]

#: accepted spelling -> canonical encoding (docs/format.md#encodings; schema aliases txt, text, gz,
#: bz2)
ENCODINGS: dict[str, str] = {
    "raw": "raw",
    "ascii": "ascii",
    "txt": "ascii",
    "text": "ascii",
    "hex": "hex",
    "gzip": "gzip",
    "gz": "gzip",
    "bzip2": "bzip2",
    "bz2": "bzip2",
    "zstd": "zstd",
    "lz4": "lz4",
}

_BINARY = frozenset({"raw", "hex", "gzip", "bzip2", "zstd", "lz4"})


@dataclass(frozen=True, slots=True)
class CoreFields:
    """The checked core fields of one header (docs/format.md#core-fields, #types,
    #encodings-and-endianness, #where-the-data-is); per-axis tuples in file order.

    ``endian`` is always ``"little"`` or ``"big"`` (``"little"`` when absent); ``encoding`` is
    canonical (raw, ascii, hex, gzip, bzip2, zstd, lz4); ``space`` is the long underscore form.
    Vector and per-axis numbers are floats, ``None`` where the header says null (unknown).
    ``measurement_frame[i]`` is column ``i`` of the matrix (NRRD §4).
    """

    type_name: str
    dimension: int
    sizes: tuple[int, ...]
    endian: str
    encoding: str
    block_size: int | None = None
    content: str | None = None
    space: str | None = None
    space_dimension: int | None = None
    space_units: tuple[str | None, ...] | None = None
    space_origin: tuple[Number, ...] | None = None
    space_directions: tuple[tuple[Number, ...] | None, ...] | None = None
    measurement_frame: tuple[tuple[Number, ...], ...] | None = None
    spacings: tuple[Number, ...] | None = None
    thicknesses: tuple[Number, ...] | None = None
    axis_mins: tuple[Number, ...] | None = None
    axis_maxs: tuple[Number, ...] | None = None
    centers: tuple[str | None, ...] | None = None
    kinds: tuple[str | None, ...] | None = None
    labels: tuple[str | None, ...] | None = None
    units: tuple[str | None, ...] | None = None
    sample_units: str | None = None
    line_skip: int = 0
    byte_skip: int = 0
    data_file: str | None = None
    data_files: tuple[str, ...] | None = None
    data_file_pattern: DataFilePattern | None = None

    @property
    def count(self) -> int:
        """Number of elements (the product of ``sizes``, a Python int)."""
        return math.prod(self.sizes)

    @property
    def detached(self) -> bool:
        """True when the data lives in other files (docs/format.md#attached-and-detached-data)."""
        return (
            self.data_file is not None
            or self.data_files is not None
            or self.data_file_pattern is not None
        )

    @property
    def itemsize(self) -> int:
        """Bytes per stored element."""
        if self.type_name == "block":
            return int(self.block_size or 0)
        return np.dtype(TYPES[self.type_name]).itemsize


def core_fields(
    header: Mapping[str, Any], *, source: Any = None, nrrd: bool = False
) -> CoreFields:
    """Check and normalise the core fields of ``header`` (docs/format.md#core-fields, #types,
    #encodings-and-endianness, #where-the-data-is).

    ``nrrd=True`` is for headers translated from classic NRRD, where NRRD type names are
    normal and do not warn. Raises ``HeaderError`` naming the field and what was expected.
    """
    c = Checker(source)
    if not isinstance(header, Mapping):
        raise c.fail("header", "a mapping of fields", header)

    def get(field: str, required: bool = False) -> Any:
        if field not in header:
            if required:
                raise HeaderError(f"{where(source, field)}required field is missing")
            return None
        return header[field]

    type_name = canonical_type(get("type", True), source=source, nrrd=nrrd)
    dimension = c.integer(get("dimension", True), "dimension", lo=1)
    if dimension > 16:
        raise c.fail("dimension", "an integer from 1 to 16", dimension)
    sizes = tuple(
        c.integer(v, f"sizes[{i}]", lo=1)
        for i, v in enumerate(c.array(get("sizes", True), "sizes", dimension, "integers >= 1"))
    )

    encoding = _encoding(c, get("encoding"))
    block_size = _block_size(c, get("block_size"), type_name, encoding)
    endian = _endian(c, header, get("endian"), type_name, encoding)

    space, sd, space_origin, space_directions, measurement_frame, space_units = (
        space_fields(c, get, dimension))

    spacings = _numbers(c, get("spacings"), "spacings", dimension)
    if spacings is not None and space_directions is not None:
        both = [i for i, (s, d) in enumerate(zip(spacings, space_directions, strict=True))
                if s is not None and d is not None]
        if both:
            c.warn("spacings", f"axes {both} also have space_directions (NRRD: one or the other)")

    pattern, data_file, data_files = detached_fields(c, header)
    line_skip, byte_skip = _skips(c, get, encoding, nrrd)
    n = math.prod(sizes)
    nfiles = len(data_files) if data_files is not None else (pattern.count if pattern else 0)
    if nfiles and n % nfiles:
        field = "data_files" if data_files is not None else "data_file_pattern"
        raise c.fail(field, f"a file count that divides the {n} elements", nfiles)

    return CoreFields(
        type_name=type_name,
        dimension=dimension,
        sizes=sizes,
        endian=endian,
        encoding=encoding,
        block_size=block_size,
        content=c.string(get("content"), "content", nullable=True),
        space=space,
        space_dimension=sd,
        space_units=space_units,
        space_origin=space_origin,
        space_directions=space_directions,
        measurement_frame=measurement_frame,
        spacings=spacings,
        thicknesses=_numbers(c, get("thicknesses"), "thicknesses", dimension),
        axis_mins=_numbers(c, get("axis_mins"), "axis_mins", dimension),
        axis_maxs=_numbers(c, get("axis_maxs"), "axis_maxs", dimension),
        centers=check_centers(c, get("centers"), dimension),
        kinds=check_kinds(c, get("kinds"), sizes),
        labels=check_strings(c, get("labels"), "labels", dimension),
        units=check_strings(c, get("units"), "units", dimension),
        sample_units=c.string(get("sample_units"), "sample_units", nullable=True),
        line_skip=line_skip,
        byte_skip=byte_skip,
        data_file=data_file,
        data_files=data_files,
        data_file_pattern=pattern,
    )



def _block_size(c: Checker, value: Any, type_name: str, encoding: str) -> int | None:
    """``block_size``: required for type ``block`` (binary encodings only), ignored otherwise."""
    block_size = None
    if value is not None:
        block_size = c.integer(value, "block_size", lo=1)
        if type_name != "block":
            c.warn("block_size", f"ignored for type {type_name!r} (only type 'block' uses it)",
                   depth=1)  # where it pointed when checked in core_fields itself
        elif block_size > MAX_BLOCK_SIZE:
            raise UnsupportedError(
                f"{where(c.source, 'block_size')}{block_size} bytes per element is over the "
                f"largest element NumPy can hold ({MAX_BLOCK_SIZE} bytes)")
    if type_name == "block":
        if block_size is None:
            raise HeaderError(f"{where(c.source, 'block_size')}required for type 'block'")
        if encoding == "ascii":
            raise c.fail("encoding", "a binary encoding for type 'block' (NRRD §5)", "ascii")
    return block_size


def _numbers(c: Checker, value: Any, field: str, dimension: int) -> tuple[Number, ...] | None:
    """A per-axis list of numbers or nulls (spacings, thicknesses, axis mins and maxs)."""
    if value is None:
        return None
    items = c.array(value, field, dimension, "numbers or nulls")
    return tuple(c.number(v, f"{field}[{i}]") for i, v in enumerate(items))


def _skips(c: Checker, get: Callable[[str], Any], encoding: str, nrrd: bool) -> tuple[int, int]:
    """``line_skip`` and ``byte_skip`` (-1: the data is the end of the file)."""
    line_skip = c.integer(_default(get("line_skip"), 0), "line_skip", lo=0)
    byte_skip = c.integer(_default(get("byte_skip"), 0), "byte_skip", lo=-1)
    # NRRD (teem, ITK): -1 also means the end of the decompressed gzip/bzip2 stream
    if byte_skip == -1 and encoding not in (("raw", "gzip", "bzip2") if nrrd else ("raw",)):
        raise c.fail("byte_skip", "-1 only with encoding 'raw' (docs/format.md#line-and-byte-skips)"
                     + ("; in classic NRRD also gzip or bzip2" if nrrd else ""), -1)
    return line_skip, byte_skip

def _default(value: Any, default: Any) -> Any:
    return default if value is None else value


def _encoding(c: Checker, value: Any) -> str:
    if value is None:
        c.warn("encoding", "missing; assuming 'raw'")
        return "raw"
    if not isinstance(value, str) or value.lower() not in ENCODINGS:
        raise c.fail("encoding", f"one of {', '.join(ENCODINGS)}", value)
    return ENCODINGS[value.lower()]


def _endian(
    c: Checker, header: Mapping[str, Any], value: Any, type_name: str, encoding: str
) -> str:
    if value is not None:
        if value not in ("little", "big"):
            raise c.fail("endian", "'little' or 'big'", value)
        return str(value)
    needed = (
        type_name != "block"
        and np.dtype(TYPES[type_name]).itemsize > 1
        and encoding in _BINARY
    )
    # With tile:codecs the bytes codec carries the byte order (docs/format.md#codec-chain).
    tile = find_prefix(header, TILE_URI_PREFIX) or "tile"
    if needed and f"{tile}:codecs" not in header:
        c.warn("endian", f"missing for multi-byte type {type_name!r}; assuming 'little'")
    return "little"
