"""NRRD-spelled header dicts (as pynrrd's ``nrrd.read`` returns them) -> JNRRD fields.

pynrrd gives ``{"space directions": ndarray, "kinds": ["RGB-color", ...], "sizes": ndarray,
"study id": "A-17", ...}``. :func:`jnrrd.write` maps such a dict exactly as the NRRD reader maps
the file pynrrd would write from it: each value is rendered as its NRRD header text and goes
through the reader's own translation (:class:`jnrrd.nrrd.translate.Translator`), so there is one
mapping, not two. Keys that are not NRRD fields are key/value pairs (``nrrd:key_values``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..errors import HeaderError, where
from ..header import Header
from ..header.model import CORE_FIELDS, split_key
from .fields import (
    FIELD_NAMES,
    NRRD_PREFIX,
    NRRD_URI,
    format_number,
    format_quoted,
    format_vector,
    unescape_kv,
)
from .translate import RawHeader, Translator

__all__ = ["from_nrrd_fields", "is_nrrd_spelled"]

#: NRRD spellings that are not JNRRD field names ("space directions", "centerings", ...)
_NRRD_ONLY = frozenset(k for k in FIELD_NAMES if k not in CORE_FIELDS)
# Where the source file kept its data: meaningless for the file being written (the JNRRD and
# NRRD writers drop the JNRRD spellings of these too). "number" is redundant with "sizes".
_DROPPED = frozenset({"line_skip", "byte_skip", "data_file", "number"})
_INTEGER = ("dimension", "space_dimension", "block_size")
_NUMBER = ("min", "max", "old_min", "old_max")
_NUMBERS = ("spacings", "thicknesses", "axis_mins", "axis_maxs")
_WORDS = ("kinds", "centers")
_QUOTED = ("labels", "units", "space_units")
_TEXT = ("type", "space", "endian", "encoding", "content", "sample_units")


def is_nrrd_spelled(header: Mapping[str, Any]) -> bool:
    """Whether ``header`` uses NRRD field spellings (pynrrd's ``nrrd.read`` dicts).

    True when there is no ``jnrrd`` key and a key is a NRRD spelling that is not a JNRRD field
    name (``space directions``, ``centerings``, ``old min``, ...) or holds white space (NRRD
    key/value pairs may, JNRRD fields never do), or ``sizes`` is a NumPy array (as
    ``nrrd.read`` returns it).
    """
    if "jnrrd" in header:
        return False
    for key in header:
        if not isinstance(key, str):
            continue
        if " ".join(key.split()).lower() in _NRRD_ONLY or any(c.isspace() for c in key):
            return True
    return isinstance(header.get("sizes"), np.ndarray)


def from_nrrd_fields(header: Mapping[str, Any], sizes: tuple[int, ...], *,
                     source: Any = None) -> Header:
    """The JNRRD header for NRRD-spelled ``header`` and data of file-order shape ``sizes``.

    ``dimension`` and ``sizes`` come from the data (as for any header given to ``write``);
    ``type`` and ``encoding`` are kept only when given. Values are NumPy arrays or lists (NaN
    and all-NaN space-direction rows are unknown, as pynrrd spells ``nan``/``none``) or NRRD
    header text. A malformed value is a ``HeaderError`` naming the key as given.
    """
    raw = RawHeader(version=5)
    passthrough: dict[str, Any] = {}
    key_values: dict[str, str] = {}
    found = header.get("extensions")
    declared: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    for key, value in header.items():
        spelled = " ".join(str(key).split()).lower()
        if spelled in FIELD_NAMES:
            jname = FIELD_NAMES[spelled]
            if jname in _DROPPED:
                continue
            if jname in raw.fields or jname in passthrough:
                raise HeaderError(f"{where(source, str(key))}the field is given twice (also as "
                                  f"{raw.fields[jname][0] if jname in raw.fields else jname!r})"
                                  "; expected each field once")
            if jname in ("dimension", "sizes"):
                continue  # from the data
            raw.fields[jname] = (str(key), _text(jname, value, str(key), source), 0)
        elif key in CORE_FIELDS or key == "extensions" or _namespaced(key, declared):
            if key in raw.fields:
                raise HeaderError(f"{where(source, str(key))}the field is given twice (also "
                                  f"as {raw.fields[key][0]!r}); expected each field once")
            passthrough[key] = value
        else:
            # as the reader reads the pair pynrrd writes verbatim: teem's \n and \\ escapes
            key_values[unescape_kv(str(key))] = unescape_kv(_kv_text(value, str(key), source))
    given_type = "type" in raw.fields
    given_encoding = "encoding" in raw.fields
    raw.fields["dimension"] = ("dimension", str(len(sizes)), 0)
    raw.fields["sizes"] = ("sizes", " ".join(str(int(n)) for n in sizes), 0)
    # type and encoding are required in a file, optional here: placeholders, dropped below
    raw.fields.setdefault("type", ("type", "uint8", 0))
    raw.fields.setdefault("encoding", ("encoding", "raw", 0))
    raw.key_values = key_values
    out = Translator(raw, source).run()
    if not given_type:
        del out["type"]
    if not given_encoding:
        del out["encoding"]
    return _merged(out, passthrough, source)


def _namespaced(key: Any, declared: Mapping[str, Any]) -> bool:
    parts = split_key(key) if isinstance(key, str) else None
    return parts is not None and (parts[0] in declared or parts[0] in (NRRD_PREFIX, "tile"))


def _merged(out: Header, passthrough: Mapping[str, Any], source: Any) -> Header:
    """The translated fields plus the JNRRD-spelled ones given alongside them."""
    kv_field = f"{NRRD_PREFIX}:key_values"
    for key, value in passthrough.items():
        if key == "extensions":
            ext = dict(value or {})
            if out.get("extensions", {}).get(NRRD_PREFIX) and ext.get(NRRD_PREFIX, NRRD_URI) \
                    != NRRD_URI:
                raise HeaderError(f"{where(source, 'extensions')}prefix {NRRD_PREFIX!r} is "
                                  f"bound to {ext[NRRD_PREFIX]!r}, but the key/value pairs "
                                  f"need it for {NRRD_URI}")
            out["extensions"] = {**ext, **out.get("extensions", {})}
        elif key == kv_field and kv_field in out:
            given = dict(value or {})
            clash = sorted(k for k in out[kv_field] if k in given and given[k] !=
                           out[kv_field][k])
            if clash:
                raise HeaderError(f"{where(source, kv_field)}the keys {clash} are also given "
                                  "as NRRD key/value pairs, with other values")
            out[kv_field] = {**given, **out[kv_field]}
        else:
            out[key] = value
    return out


def _plain(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    return v


def _items(value: Any, key: str, source: Any) -> list[Any]:
    value = _plain(value)
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise HeaderError(f"{where(source, key)}expected a list (or array) of values, found "
                          f"{value!r}")
    return [_plain(v) for v in value]


def _unknown(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _text(jname: str, value: Any, key: str, source: Any) -> str:
    """``value`` as the NRRD header text pynrrd would write for field ``jname``."""
    value = _plain(value)
    if isinstance(value, str):
        return value.strip()  # already NRRD text (e.g. a custom field map's raw string)
    try:
        if jname in _INTEGER or jname in _NUMBER:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError
            return str(value) if jname in _INTEGER else format_number(value)
        if jname in _TEXT:
            raise TypeError
        items = _items(value, key, source)
        if jname in _NUMBERS:
            return " ".join(format_number(None if _unknown(v) else float(v)) for v in items)
        if jname in _WORDS:
            return " ".join("???" if v is None else _word(v) for v in items)
        if jname in _QUOTED:
            return " ".join(format_quoted(None if v is None else _string(v)) for v in items)
        if jname == "space_origin":
            return format_vector([float(v) for v in items])
        if jname == "space_directions":
            return " ".join(
                "none" if row is None or all(_unknown(x) for x in _items(row, key, source))
                else format_vector([float(x) for x in _items(row, key, source)])
                for row in items)
        if jname == "measurement_frame":
            return " ".join(format_vector([float(x) for x in _items(row, key, source)])
                            for row in items)
    except (TypeError, ValueError):
        pass
    raise HeaderError(f"{where(source, key)}expected the value as pynrrd gives it (or its NRRD "
                      f"text), found {value!r}")


def _word(v: Any) -> str:
    if not isinstance(v, str) or not v or any(c.isspace() for c in v):
        raise TypeError
    return v


def _string(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError
    return v


def _kv_text(value: Any, key: str, source: Any) -> str:
    """A key/value pair's value: text, or a number written as NRRD writes numbers."""
    value = _plain(value)
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value) if isinstance(value, int) else format_number(value)
    raise HeaderError(f"{where(source, key)}not a NRRD field, so a key/value pair, whose value "
                      f"must be a string (or a number); found {type(value).__name__}. Format "
                      "it as the text to store")
