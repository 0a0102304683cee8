"""Typed, checked core fields (digest 1.6-1.8, 1.10, 1.11).

:func:`core_fields` reads a :class:`Header` (or any mapping) and returns a frozen
:class:`CoreFields` with normalised values, raising ``HeaderError`` with the file, the field
and what was expected for anything malformed. Lenient readings (aliases, defaults) warn.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import MAX_BLOCK_SIZE, TYPES, canonical_type
from ..errors import HeaderError, JnrrdWarning, UnsupportedError, where
from .model import TILE_URI_PREFIX, find_prefix

__all__ = ["ENCODINGS", "KIND_SIZES", "SPACES", "CoreFields", "DataFilePattern",
           "canonical_space", "core_fields"]

#: accepted spelling -> canonical encoding (digest 1.9; schema aliases txt, text, gz, bz2)
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

#: canonical space name -> space dimension (digest 1.7)
SPACES: dict[str, int] = {
    "right_anterior_superior": 3,
    "left_anterior_superior": 3,
    "left_posterior_superior": 3,
    "right_anterior_superior_time": 4,
    "left_anterior_superior_time": 4,
    "left_posterior_superior_time": 4,
    "scanner_xyz": 3,
    "scanner_xyz_time": 4,
    "3D_right_handed": 3,
    "3D_left_handed": 3,
    "3D_right_handed_time": 4,
    "3D_left_handed_time": 4,
}
_SPACE_LOOKUP: dict[str, str] = {
    **{name.lower(): name for name in SPACES},
    "ras": "right_anterior_superior",
    "las": "left_anterior_superior",
    "lps": "left_posterior_superior",
    "rast": "right_anterior_superior_time",
    "last": "left_anterior_superior_time",
    "lpst": "left_posterior_superior_time",
}

#: JNRRD kind -> the axis size it implies (None: any size), digest 1.7 and teem's kind table
KIND_SIZES: dict[str, int | None] = {
    "domain": None,
    "space": None,
    "time": None,
    "list": None,
    "point": None,
    "vector": None,
    "covariant_vector": None,
    "normal": None,
    "stub": 1,
    "scalar": 1,
    "complex": 2,
    "2_vector": 2,
    "3_color": 3,
    "rgb_color": 3,
    "hsv_color": 3,
    "xyz_color": 3,
    "4_color": 4,
    "rgba_color": 4,
    "3_vector": 3,
    "3_gradient": 3,
    "3_normal": 3,
    "4_vector": 4,
    "quaternion": 4,
    "2d_symmetric_matrix": 3,
    "2d_masked_symmetric_matrix": 4,
    "2d_matrix": 4,
    "2d_masked_matrix": 5,
    "3d_symmetric_matrix": 6,
    "3d_masked_symmetric_matrix": 7,
    "3d_matrix": 9,
    "3d_masked_matrix": 10,
}

_BINARY = frozenset({"raw", "hex", "gzip", "bzip2", "zstd", "lz4"})
_UNKNOWN = frozenset({"???", "none"})
# Digest 1.11: exactly one integer conversion; "%%" is a literal percent.
_PERCENT = re.compile(r"%(%|[-+ 0#]*([0-9]*)[diu])?")
_MAX_WIDTH = 64  # a "%999999999d" would build a gigabyte string (digest §5)
INT64_LIMIT = 2**63  # header integers lie in [-2**63, 2**63)

Number = float | None


@dataclass(frozen=True, slots=True)
class DataFilePattern:
    """``data_file_pattern`` (digest 1.11): files ``format % i`` for i = min, min+step, ..."""

    format: str
    min: int
    max: int
    step: int

    @property
    def count(self) -> int:
        """How many files the pattern names (``max`` need not be reached exactly)."""
        return (self.max - self.min) // self.step + 1

    def file_names(self, *, max_files: int | None = None, source: Any = None) -> list[str]:
        """The file names, in order; ``UnsupportedError`` when over ``max_files``."""
        if max_files is not None and self.count > max_files:
            raise UnsupportedError(
                f"{where(source, 'data_file_pattern')}names {self.count} files, over the "
                f"max_files cap ({max_files}); pass max_files=... to allow it"
            )
        # Safe: the format was checked to hold exactly one integer conversion and "%%".
        return [self.format % i for i in range(self.min, self.max + _sign(self.step), self.step)]


def _sign(x: int) -> int:
    return 1 if x > 0 else -1


@dataclass(frozen=True, slots=True)
class CoreFields:
    """The checked core fields of one header (digest 1.6-1.11); per-axis tuples in file order.

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
        """True when the data lives in other files (digest 1.11)."""
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


class _Checker:
    """Holds the source for messages; one method per value shape."""

    def __init__(self, source: Any) -> None:
        self.source = source

    def fail(self, field: str, expected: str, found: Any) -> HeaderError:
        text = repr(found)
        if len(text) > 80:
            text = text[:77] + "..."
        return HeaderError(f"{where(self.source, field)}expected {expected}, found {text}")

    def warn(self, field: str, message: str) -> None:
        warnings.warn(f"{where(self.source, field)}{message}", JnrrdWarning, stacklevel=4)

    def integer(self, value: Any, field: str, *, lo: int | None = None) -> int:
        """An int (integral floats accepted, booleans rejected: digest 1.6) that fits a signed
        64-bit integer, like every count, size and skip (so no arithmetic on it can reach
        NumPy or the OS out of range)."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(field, _int_text(lo), value)
        if isinstance(value, float):
            if not value.is_integer():
                raise self.fail(field, _int_text(lo), value)
            value = int(value)
        if (lo is not None and value < lo) or not -INT64_LIMIT <= value < INT64_LIMIT:
            raise self.fail(field, _int_text(lo) + " that fits 64 bits", value)
        return value

    def number(self, value: Any, field: str, *, nullable: bool = True) -> Number:
        if value is None and nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(field, "a number" + (" or null" if nullable else ""), value)
        try:
            return float(value)
        except OverflowError:  # an int beyond float range
            raise self.fail(field, "a number within float range", value) from None

    def string(self, value: Any, field: str, *, nullable: bool = False) -> str | None:
        if value is None and nullable:
            return None
        if not isinstance(value, str):
            raise self.fail(field, "a string" + (" or null" if nullable else ""), value)
        return value

    def array(self, value: Any, field: str, length: int | None, what: str) -> list[Any]:
        if not isinstance(value, list | tuple):
            raise self.fail(field, f"a list of {_len_text(length)}{what}", value)
        if length is not None and len(value) != length:
            raise self.fail(field, f"a list of {length} {what}, not {len(value)}", value)
        return list(value)


def _int_text(lo: int | None) -> str:
    return "an integer" if lo is None else f"an integer >= {lo}"


def _len_text(length: int | None) -> str:
    return "" if length is None else f"{length} "


def core_fields(
    header: Mapping[str, Any], *, source: Any = None, nrrd: bool = False
) -> CoreFields:
    """Check and normalise the core fields of ``header`` (digest 1.6-1.11).

    ``nrrd=True`` is for headers translated from classic NRRD, where NRRD type names are
    normal and do not warn. Raises ``HeaderError`` naming the field and what was expected.
    """
    c = _Checker(source)
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
    block_size = None
    if get("block_size") is not None:
        block_size = c.integer(header["block_size"], "block_size", lo=1)
        if type_name != "block":
            c.warn("block_size", f"ignored for type {type_name!r} (only type 'block' uses it)")
        elif block_size > MAX_BLOCK_SIZE:
            raise UnsupportedError(
                f"{where(source, 'block_size')}{block_size} bytes per element is over the "
                f"largest element NumPy can hold ({MAX_BLOCK_SIZE} bytes)")
    if type_name == "block":
        if block_size is None:
            raise HeaderError(f"{where(source, 'block_size')}required for type 'block'")
        if encoding == "ascii":
            raise c.fail("encoding", "a binary encoding for type 'block' (NRRD §5)", "ascii")
    endian = _endian(c, header, get("endian"), type_name, encoding)

    space, sd = _space(c, get("space"), get("space_dimension"))
    sd = _infer_space_dimension(c, sd, get("space_origin"), get("space_directions"))
    space_origin = _vector(c, get("space_origin"), "space_origin", sd)
    space_directions = _directions(c, get("space_directions"), dimension, sd)
    frame = get("measurement_frame")
    measurement_frame = None
    if frame is not None:
        measurement_frame = tuple(
            _vector(c, col, f"measurement_frame[{i}]", sd)
            for i, col in enumerate(
                c.array(frame, "measurement_frame", _need_sd(c, sd, "measurement_frame"),
                        "columns")
            )
        )
    space_units = _strings(c, get("space_units"), "space_units", sd)

    def per_axis_numbers(field: str) -> tuple[Number, ...] | None:
        value = get(field)
        if value is None:
            return None
        items = c.array(value, field, dimension, "numbers or nulls")
        return tuple(c.number(v, f"{field}[{i}]") for i, v in enumerate(items))

    spacings = per_axis_numbers("spacings")
    if spacings is not None and space_directions is not None:
        both = [i for i, (s, d) in enumerate(zip(spacings, space_directions, strict=True))
                if s is not None and d is not None]
        if both:
            c.warn("spacings", f"axes {both} also have space_directions (NRRD: one or the other)")

    pattern, data_file, data_files = _detached(c, header)
    line_skip = c.integer(_default(get("line_skip"), 0), "line_skip", lo=0)
    byte_skip = c.integer(_default(get("byte_skip"), 0), "byte_skip", lo=-1)
    # NRRD (teem, ITK): -1 also means the end of the decompressed gzip/bzip2 stream
    if byte_skip == -1 and encoding not in (("raw", "gzip", "bzip2") if nrrd else ("raw",)):
        raise c.fail("byte_skip", "-1 only with encoding 'raw' (digest 1.11)"
                     + ("; in classic NRRD also gzip or bzip2" if nrrd else ""), -1)
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
        thicknesses=per_axis_numbers("thicknesses"),
        axis_mins=per_axis_numbers("axis_mins"),
        axis_maxs=per_axis_numbers("axis_maxs"),
        centers=_centers(c, get("centers"), dimension),
        kinds=_kinds(c, get("kinds"), sizes),
        labels=_strings(c, get("labels"), "labels", dimension),
        units=_strings(c, get("units"), "units", dimension),
        sample_units=c.string(get("sample_units"), "sample_units", nullable=True),
        line_skip=line_skip,
        byte_skip=byte_skip,
        data_file=data_file,
        data_files=data_files,
        data_file_pattern=pattern,
    )


def _default(value: Any, default: Any) -> Any:
    return default if value is None else value


def _encoding(c: _Checker, value: Any) -> str:
    if value is None:
        c.warn("encoding", "missing; assuming 'raw'")
        return "raw"
    if not isinstance(value, str) or value.lower() not in ENCODINGS:
        raise c.fail("encoding", f"one of {', '.join(ENCODINGS)}", value)
    return ENCODINGS[value.lower()]


def _endian(
    c: _Checker, header: Mapping[str, Any], value: Any, type_name: str, encoding: str
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
    # With tile:codecs the bytes codec carries the byte order (CONVENTIONS §1.2).
    tile = find_prefix(header, TILE_URI_PREFIX) or "tile"
    if needed and f"{tile}:codecs" not in header:
        c.warn("endian", f"missing for multi-byte type {type_name!r}; assuming 'little'")
    return "little"


def canonical_space(space: Any) -> str | None:
    """The long underscore form of a ``space`` name (digest 1.7: any case, ``-`` as ``_``,
    the short forms RAS, LPS, ...); ``None`` when ``space`` is not a known space name."""
    key = space.lower().replace("-", "_") if isinstance(space, str) else None
    return _SPACE_LOOKUP.get(key) if key is not None else None


def _space(c: _Checker, space: Any, sd_value: Any) -> tuple[str | None, int | None]:
    name = None
    sd = None
    if space is not None:
        name = canonical_space(space)
        if name is None:
            raise c.fail("space", "a space name such as 'right_anterior_superior' or 'RAS'", space)
        sd = SPACES[name]
    if sd_value is not None:
        given = c.integer(sd_value, "space_dimension", lo=1)
        if sd is not None and given != sd:
            raise c.fail("space_dimension", f"{sd} (the dimension of space {name!r})", given)
        sd = given
    return name, sd


def _infer_space_dimension(
    c: _Checker, sd: int | None, origin: Any, directions: Any
) -> int | None:
    """Without ``space``/``space_dimension``, take sd from the origin or a direction (warn)."""
    if sd is not None:
        return sd
    candidates = [origin] if isinstance(origin, list | tuple) else []
    if isinstance(directions, list | tuple):
        candidates += [d for d in directions if isinstance(d, list | tuple) and d]
    if not candidates:
        return None
    sd = len(candidates[0])
    if sd == 0:
        return None
    c.warn("space_dimension", f"missing (and no space); inferred {sd} from the space vectors")
    return sd


def _need_sd(c: _Checker, sd: int | None, field: str) -> int:
    if sd is None:
        raise HeaderError(f"{where(c.source, field)}needs 'space' or 'space_dimension'")
    return sd


def _vector(c: _Checker, value: Any, field: str, sd: int | None) -> tuple[Number, ...] | None:
    if value is None:
        return None
    items = c.array(value, field, _need_sd(c, sd, field), "numbers")
    return tuple(c.number(v, f"{field}[{i}]") for i, v in enumerate(items))


def _directions(
    c: _Checker, value: Any, dimension: int, sd: int | None
) -> tuple[tuple[Number, ...] | None, ...] | None:
    if value is None:
        return None
    out: list[tuple[Number, ...] | None] = []
    for i, v in enumerate(c.array(value, "space_directions", dimension, "vectors or nulls")):
        field = f"space_directions[{i}]"
        if isinstance(v, list | tuple) and len(v) == 0:
            c.warn(field, "[] read as null (a non-spatial axis)")
            v = None
        out.append(_vector(c, v, field, sd))
    return tuple(out)


def _strings(
    c: _Checker, value: Any, field: str, length: int | None
) -> tuple[str | None, ...] | None:
    if value is None:
        return None
    if length is None:
        length = _need_sd(c, length, field)
    items = c.array(value, field, length, "strings")
    return tuple(c.string(v, f"{field}[{i}]", nullable=True) for i, v in enumerate(items))


def _centers(c: _Checker, value: Any, dimension: int) -> tuple[str | None, ...] | None:
    if value is None:
        return None
    out: list[str | None] = []
    for i, v in enumerate(c.array(value, "centers", dimension, "centerings")):
        if v is not None and not isinstance(v, str):
            raise c.fail(f"centers[{i}]", "'cell', 'node' or null", v)
        key = v.lower() if isinstance(v, str) else v
        if v is None or key in _UNKNOWN:
            out.append(None)
        elif key in ("cell", "node"):
            out.append(key)
        else:
            raise c.fail(f"centers[{i}]", "'cell', 'node' or null", v)
    return tuple(out)


def _kinds(c: _Checker, value: Any, sizes: tuple[int, ...]) -> tuple[str | None, ...] | None:
    if value is None:
        return None
    out: list[str | None] = []
    for i, v in enumerate(c.array(value, "kinds", len(sizes), "kinds")):
        if v is not None and not isinstance(v, str):
            raise c.fail(f"kinds[{i}]", "a kind name or null", v)
        key = v.lower().replace("-", "_") if v is not None else None
        if key is None or key in _UNKNOWN:
            out.append(None)
            continue
        if key not in KIND_SIZES:
            raise c.fail(f"kinds[{i}]", "a kind such as 'domain', 'space' or 'rgb_color'", v)
        expected = KIND_SIZES[key]
        if expected is not None and sizes[i] != expected:
            c.warn(f"kinds[{i}]", f"kind {key!r} implies size {expected}, axis has {sizes[i]}")
        out.append(key)
    return tuple(out)


def _detached(
    c: _Checker, header: Mapping[str, Any]
) -> tuple[DataFilePattern | None, str | None, tuple[str, ...] | None]:
    given = [f for f in ("data_file", "data_files", "data_file_pattern") if f in header]
    if len(given) > 1:
        raise HeaderError(
            f"{where(c.source, given[1])}expected at most one of data_file, data_files, "
            f"data_file_pattern; found {', '.join(given)}"
        )
    data_file = None
    data_files = None
    pattern = None
    if "data_file" in header:
        data_file = c.string(header["data_file"], "data_file")
        if not data_file:
            raise c.fail("data_file", "a non-empty path", data_file)
    elif "data_files" in header:
        items = c.array(header["data_files"], "data_files", None, "paths")
        if not items:
            raise c.fail("data_files", "a non-empty list of paths", items)
        data_files = tuple(str(c.string(v, f"data_files[{i}]")) for i, v in enumerate(items))
        if not all(data_files):
            raise c.fail("data_files", "non-empty paths", list(data_files))
    elif "data_file_pattern" in header:
        pattern = _pattern(c, header["data_file_pattern"])
    return pattern, data_file, data_files


def _pattern(c: _Checker, value: Any) -> DataFilePattern:
    field = "data_file_pattern"
    if not isinstance(value, Mapping):
        raise c.fail(field, "an object {format, min, max, step}", value)
    extra = sorted(set(value) - {"format", "min", "max", "step"})
    if extra:
        c.warn(field, f"unknown keys {extra} ignored")
    for key in ("format", "min", "max"):
        if key not in value:
            raise HeaderError(f"{where(c.source, f'{field}.{key}')}required key is missing")
    fmt = c.string(value["format"], f"{field}.format")
    assert fmt is not None
    conversions = 0
    for m in _PERCENT.finditer(fmt):
        spec = m.group(1)
        if spec is None:
            raise c.fail(f"{field}.format", "exactly one %d/%i/%u conversion ('%%' for %)", fmt)
        if spec != "%":
            conversions += 1
            if m.group(2) and int(m.group(2)) > _MAX_WIDTH:
                raise c.fail(f"{field}.format", f"a field width up to {_MAX_WIDTH}", fmt)
    if conversions != 1:
        raise c.fail(f"{field}.format", "exactly one %d/%i/%u conversion ('%%' for %)", fmt)
    lo = c.integer(value["min"], f"{field}.min")
    hi = c.integer(value["max"], f"{field}.max")
    if "step" in value:
        step = c.integer(value["step"], f"{field}.step")
    else:
        c.warn(f"{field}.step", "missing; assuming 1")
        step = 1
    if step == 0 or (hi > lo and step < 0) or (hi < lo and step > 0):
        sign = "positive " if hi > lo else "negative " if hi < lo else ""
        raise c.fail(f"{field}.step", f"a non-zero {sign}step from min {lo} to max {hi}", step)
    return DataFilePattern(format=fmt, min=lo, max=hi, step=step)
