"""Classic NRRD field vocabulary and value syntax (teem's NRRD0001-0005 format).

Both directions live here: parsing one ``<field>: <desc>`` value into JSON-ready Python values
(numbers, vectors, quoted strings, per-axis lists with ``nan``/``none``/``???``) and formatting
JNRRD values back into NRRD text. Nothing here touches files.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..dtypes import NRRD_ALIASES, decimal_int
from ..errors import HeaderError, where
from ..header.geometry_fields import canonical_space

__all__ = [
    "ENCODINGS",
    "FIELD_NAMES",
    "KIND_NAMES",
    "NRRD_PREFIX",
    "NRRD_URI",
    "TYPES",
    "WRITE_TYPES",
    "format_number",
    "format_quoted",
    "format_vector",
    "parse_int",
    "parse_number",
    "parse_quoted",
    "parse_vectors",
    "space_name",
    "unescape_kv",
    "escape_kv",
]

#: the declared JNRRD extension that carries what NRRD has and the JNRRD core has not
#: (key/value pairs, comments); see docs/nrrd.md
NRRD_PREFIX = "nrrd"
NRRD_URI = "https://jnrrd.org/extensions/nrrd/v1.0.0"

#: every NRRD field spelling (lower case, single spaces) -> the JNRRD field it fills.
#: teem accepts these case-insensitively; "number" is redundant with "sizes" and ignored.
FIELD_NAMES: dict[str, str] = {
    "content": "content",
    "number": "number",
    "type": "type",
    "block size": "block_size",
    "blocksize": "block_size",
    "dimension": "dimension",
    "space": "space",
    "space dimension": "space_dimension",
    "spacedimension": "space_dimension",
    "sizes": "sizes",
    "spacings": "spacings",
    "thicknesses": "thicknesses",
    "axis mins": "axis_mins",
    "axismins": "axis_mins",
    "axis maxs": "axis_maxs",
    "axismaxs": "axis_maxs",
    "space directions": "space_directions",
    "spacedirections": "space_directions",
    "centers": "centers",
    "centerings": "centers",
    "kinds": "kinds",
    "labels": "labels",
    "units": "units",
    "min": "min",
    "max": "max",
    "old min": "old_min",
    "oldmin": "old_min",
    "old max": "old_max",
    "oldmax": "old_max",
    "endian": "endian",
    "encoding": "encoding",
    "line skip": "line_skip",
    "lineskip": "line_skip",
    "byte skip": "byte_skip",
    "byteskip": "byte_skip",
    "sample units": "sample_units",
    "sampleunits": "sample_units",
    "space units": "space_units",
    "spaceunits": "space_units",
    "space origin": "space_origin",
    "spaceorigin": "space_origin",
    "measurement frame": "measurement_frame",
    "measurementframe": "measurement_frame",
    "data file": "data_file",
    "datafile": "data_file",
}

#: NRRD type spellings (lower case, single spaces) -> JNRRD type (docs/format.md#types); nothing
#: else is a NRRD type (no float16, bfloat16 or complex)
TYPES: dict[str, str] = {
    **{name: name for name in ("int8", "uint8", "int16", "uint16", "int32", "uint32",
                               "int64", "uint64")},
    **NRRD_ALIASES,
    "block": "block",
}
#: JNRRD type -> the spelling written (teem and pynrrd both read these)
WRITE_TYPES: dict[str, str] = {
    **{name: name for name in ("int8", "uint8", "int16", "uint16", "int32", "uint32",
                               "int64", "uint64", "block")},
    "float32": "float",
    "float64": "double",
}

#: NRRD encoding spellings -> JNRRD encoding (NRRD §5; zstd and lz4 are not NRRD encodings)
ENCODINGS: dict[str, str] = {
    "raw": "raw",
    "txt": "ascii",
    "text": "ascii",
    "ascii": "ascii",
    "hex": "hex",
    "gz": "gzip",
    "gzip": "gzip",
    "bz2": "bzip2",
    "bzip2": "bzip2",
}

# teem's kind table spellings; JNRRD uses them lower-cased with "-" -> "_"
# (docs/format.md#core-fields).
_TEEM_KINDS = (
    "domain", "space", "time", "list", "point", "vector", "covariant-vector", "normal",
    "stub", "scalar", "complex", "2-vector", "3-color", "RGB-color", "HSV-color", "XYZ-color",
    "4-color", "RGBA-color", "3-vector", "3-gradient", "3-normal", "4-vector", "quaternion",
    "2D-symmetric-matrix", "2D-masked-symmetric-matrix", "2D-matrix", "2D-masked-matrix",
    "3D-symmetric-matrix", "3D-masked-symmetric-matrix", "3D-matrix", "3D-masked-matrix",
)
#: JNRRD kind -> teem spelling
KIND_NAMES: dict[str, str] = {k.lower().replace("-", "_"): k for k in _TEEM_KINDS}

#: NRRD's per-axis "unknown" markers (centers, kinds, space directions)
UNKNOWN = frozenset({"???", "none"})

_INT = re.compile(r"[+-]?[0-9]+")
_VECTOR = re.compile(r"\(([^()]*)\)")


def _fail(source: Any, field: str, expected: str, found: str) -> HeaderError:
    text = found if len(found) <= 80 else found[:77] + "..."
    return HeaderError(f"{where(source, field)}expected {expected}, found {text!r}")


def parse_int(text: str, source: Any, field: str) -> int:
    """One integer (teem ``%d``)."""
    t = text.strip()
    if not _INT.fullmatch(t):
        raise _fail(source, field, "an integer", text)
    value = decimal_int(t)
    if value is None or not -(2**63) <= value < 2**63:
        raise _fail(source, field, "an integer that fits 64 bits", text)
    return value


def parse_number(tok: str, source: Any, field: str) -> float | None:
    """One floating-point value; ``nan`` (any case) is unknown and becomes ``None``."""
    t = tok.strip()
    try:
        v = float(t)
    except ValueError:
        raise _fail(source, field, "a number (or nan)", tok) from None
    return None if math.isnan(v) else v


def parse_vectors(text: str, source: Any, field: str, *, allow_none: bool
                  ) -> list[list[float | None] | None]:
    """A run of ``(a,b,c)`` vectors (spaces allowed inside), or ``none``/``???`` entries."""
    out: list[list[float | None] | None] = []
    pos, n = 0, len(text)
    while True:
        while pos < n and text[pos].isspace():
            pos += 1
        if pos >= n:
            return out
        m = _VECTOR.match(text, pos)
        if m is not None:
            parts = m.group(1).split(",")
            out.append([parse_number(p, source, f"{field}[{len(out)}]") for p in parts])
            pos = m.end()
            continue
        end = pos
        while end < n and not text[end].isspace():
            end += 1
        word = text[pos:end]
        if allow_none and word.lower() in UNKNOWN:
            out.append(None)
            pos = end
            continue
        what = "'(x,y,...)' vectors or 'none'" if allow_none else "'(x,y,...)' vectors"
        raise _fail(source, field, what, text)


def parse_quoted(text: str, source: Any, field: str) -> list[str]:
    """Double-quoted strings separated by spaces; ``\\"`` and ``\\\\`` are escapes."""
    out: list[str] = []
    pos, n = 0, len(text)
    while True:
        while pos < n and text[pos].isspace():
            pos += 1
        if pos >= n:
            return out
        if text[pos] != '"':
            raise _fail(source, field, 'double-quoted strings ("x" "y")', text)
        pos += 1
        chars: list[str] = []
        while pos < n and text[pos] != '"':
            if text[pos] == "\\" and pos + 1 < n and text[pos + 1] in '"\\':
                pos += 1
            chars.append(text[pos])
            pos += 1
        if pos >= n:
            raise _fail(source, field, "a closing double quote", text)
        pos += 1
        out.append("".join(chars))


def space_name(text: str, source: Any, field: str = "space") -> str:
    """The JNRRD long underscore form of a NRRD space ("RAS", "right-anterior-superior")."""
    name = canonical_space(text.strip())
    if name is None:
        raise _fail(source, field, "a NRRD space such as 'right-anterior-superior' or 'RAS'",
                    text)
    return name


def unescape_kv(text: str) -> str:
    """teem key/value escapes: ``\\n`` is a newline, ``\\\\`` a backslash."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in "n\\":
            out.append("\n" if text[i + 1] == "n" else "\\")
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def escape_kv(text: str) -> str:
    """Inverse of :func:`unescape_kv`."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_number(v: float | int | None) -> str:
    """A number as NRRD text: unknown (None, NaN) is ``nan``; ``repr`` round-trips floats."""
    if v is None:
        return "nan"
    f = float(v)
    if math.isnan(f):
        return "nan"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    if f.is_integer() and abs(f) < 1e16:
        return str(int(f))
    return repr(f)


def format_vector(vec: Any) -> str:
    """``(a,b,c)``, or ``none`` for a missing vector."""
    if vec is None:
        return "none"
    return "(" + ",".join(format_number(x) for x in vec) + ")"


def format_quoted(value: str | None) -> str:
    """A double-quoted string (``None`` is the empty string, NRRD's unknown label)."""
    s = "" if value is None else value
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
