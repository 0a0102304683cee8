"""Writing classic NRRD0005 (``.nrrd`` attached or detached, ``.nhdr`` always detached).

The header given in JNRRD field names (as ``jnrrd.read`` returns it, for JNRRD and NRRD files
alike) is checked with :func:`jnrrd.header.core_fields` and mapped back to NRRD fields; the
``nrrd`` extension's key/value pairs and comments are written as such. The data bytes come from
:func:`jnrrd.writing.stream.encode_chunks`, one slab at a time; files are replaced atomically
(docs/format.md#atomic-writes): a detached data file gets a fresh name, the header is replaced last,
and data files of earlier writes to the same target are removed after that.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..codecs.levels import check_level
from ..dtypes import TYPES, canonical_type, type_name_for
from ..errors import HeaderError, JnrrdWarning, UnsupportedError, check_index_order, where
from ..header import CoreFields, core_fields
from ..header.model import TILE_URI_PREFIX, find_prefix, split_key
from ..storage import fresh_token, reported_as, target_store
from ..writing.source import FileOrder
from ..writing.stream import encode_chunks
from .fields import (
    KIND_NAMES,
    NRRD_PREFIX,
    NRRD_URI,
    WRITE_TYPES,
    escape_kv,
    format_number,
    format_quoted,
    format_vector,
)
from .mapping import from_nrrd_fields, is_nrrd_spelled

__all__ = ["render_nrrd_header", "write_nrrd"]

_ENC_ALIASES = {"gz": "gzip", "bz2": "bzip2", "txt": "ascii", "text": "ascii"}
#: data file extension per encoding (the names pynrrd and teem use)
_EXT = {"raw": "raw", "gzip": "raw.gz", "bzip2": "raw.bz2", "ascii": "txt", "hex": "hex"}
# JNRRD fields this writer maps (everything else is either computed or cannot be said in NRRD)
_MAPPED = frozenset({
    "jnrrd", "type", "dimension", "sizes", "endian", "encoding", "block_size", "content",
    "space", "space_dimension", "space_units", "space_origin", "space_directions",
    "measurement_frame", "spacings", "thicknesses", "axis_mins", "axis_maxs", "centers",
    "kinds", "labels", "units", "min", "max", "old_min", "old_max", "sample_units",
    "extensions",
})
# Describe where the data of the source file was: meaningless for the file being written.
_DATA_PLACEMENT = ("line_skip", "byte_skip", "data_file", "data_files", "data_file_pattern")


def write_nrrd(path: Any, data: Any, header: Mapping[str, Any] | None = None, *,
               index_order: str = "F", encoding: str | None = None,
               detached: bool = False, level: int | None = None,
               storage_options: dict[str, Any] | None = None) -> None:
    """Write ``data`` as classic NRRD0005 to ``path`` (a path, a URL with
    ``storage_options``, or a binary file object).

    ``header`` uses JNRRD field names; ``type``, ``dimension`` and ``sizes`` come from the
    data (a ``type`` in the header converts the data to it). ``encoding``: raw (default),
    ascii, hex, gzip, bzip2 (zstd and lz4 do not exist in NRRD: ``UnsupportedError``);
    ``level`` is the gzip (0-9, zlib's scale; default 1) or bzip2 (1-9; default 9)
    compression level; gzip is deflated on every core into one gzip member (docs/nrrd.md).
    ``detached=True`` (always for ``.nhdr``) writes the data to a fresh file beside the
    header; a file object gets attached data.
    """
    check_index_order(index_order, path)
    stream = None if isinstance(path, (str, os.PathLike)) else path
    if stream is not None and not hasattr(stream, "write"):
        raise TypeError(f"target must be a path or a binary file object, not "
                        f"{type(path).__name__}")
    path = os.fspath(path) if stream is None else getattr(stream, "name", None)
    if stream is not None and detached:
        raise UnsupportedError("detached=True needs a target path")
    detached = detached or (stream is None and path.lower().endswith(".nhdr"))
    if not hasattr(data, "shape") or not hasattr(data, "dtype"):
        data = np.asarray(data)
    src = FileOrder(data, index_order)
    if not src.shape:
        raise UnsupportedError(f"{where(path)}cannot write a 0-dimensional array; reshape it "
                               "to (1,)")
    if header is not None and is_nrrd_spelled(header):
        header = from_nrrd_fields(header, src.shape, source=path)
    given = dict(header or {})
    type_name = _type_name(given, src.dtype, path)
    enc = _encoding(given, encoding, path)
    level = check_level(enc, level, what=where(path))
    out = _prepared(given, src, type_name, enc, path)
    core = core_fields(out, source=path, nrrd=True)
    chunks = encode_chunks(src, type_name=type_name, endian=core.endian, encoding=enc,
                           index_order="F", level=level)
    if stream is not None:
        stream.write(render_nrrd_header(out, core, source=path) + b"\n")
        for c in chunks:
            stream.write(c)
        return
    store, key = target_store(path, storage_options=storage_options)
    with reported_as(path):
        _write_files(store, key, path, out, core, chunks, enc, detached)


def _write_files(store: Any, key: str, path: str, out: dict[str, Any], core: CoreFields,
                 chunks: Any, enc: str, detached: bool) -> None:
    """The header (and data) through the target's write store, atomically
    (docs/format.md#atomic-writes)."""
    previous = store.owned(key)  # what the header this write replaces references
    if not detached:
        with store.stage(key) as f:
            f.write(render_nrrd_header(out, core, source=path) + b"\n")
            for c in chunks:
                f.write(c)
        store.tidy(key, owned=previous)
        return
    # Detached: a fresh data file first, then the header, then the old files go
    # (docs/format.md#atomic-writes).
    name = f"{_stem(key)}.{fresh_token()}.{_EXT[enc]}"
    with store.stage(name) as f:
        for c in chunks:
            f.write(c)
    try:
        with store.stage(key) as f:
            f.write(render_nrrd_header(out, core, data_file=name, source=path))
    except BaseException:
        store.delete(name)
        raise
    store.tidy(key, keep=[name], owned=previous)


def _stem(path: str) -> str:
    name = os.path.basename(path)
    for ext in (".nhdr", ".nrrd"):
        if name.lower().endswith(ext):
            return name[: -len(ext)]
    return name


#: what to do with a type NRRD cannot store
_TYPE_HINTS = {
    "float16": "convert the data to float32 (data.astype(np.float32)) or write JNRRD",
    "bfloat16": "convert the data to float32 (data.astype(np.float32)) or write JNRRD",
    "complex64": "store the real and imaginary parts as float32 on a first axis of kind "
                 "'complex' (np.stack([a.real, a.imag]), kinds ['complex', ...]) or write JNRRD",
    "complex128": "store the real and imaginary parts as float64 on a first axis of kind "
                  "'complex' (np.stack([a.real, a.imag]), kinds ['complex', ...]) or write "
                  "JNRRD",
}


def _type_name(given: Mapping[str, Any], dtype: np.dtype, path: str) -> str:
    name = (canonical_type(given["type"], source=path, nrrd=True)
            if given.get("type") is not None else type_name_for(dtype))
    if name not in WRITE_TYPES:
        raise UnsupportedError(f"{where(path, 'type')}NRRD has no type for {name!r}; "
                               f"{_TYPE_HINTS.get(name, 'write JNRRD')}")
    if name == "block" and dtype.kind != "V":
        raise UnsupportedError(f"{where(path, 'type')}type 'block' needs a void "
                               "(np.dtype('V<n>')) array")
    return name


def _encoding(given: Mapping[str, Any], encoding: str | None, path: str) -> str:
    from_header = given.get("encoding")
    arg = _ENC_ALIASES.get(encoding, encoding) if encoding is not None else None
    hdr = _ENC_ALIASES.get(from_header, from_header) if from_header is not None else None
    # The header's encoding says how its source was stored; an explicit argument is the
    # caller's choice for this file and wins (storage only: the values do not change).
    enc = arg or hdr or "raw"
    if enc in ("zstd", "lz4"):
        raise UnsupportedError(f"{where(path, 'encoding')}{enc} is not a NRRD encoding; use "
                               "raw, ascii, hex, gzip or bzip2, or write JNRRD")
    if enc not in _EXT:
        raise HeaderError(f"{where(path, 'encoding')}expected one of raw, ascii, hex, gzip, "
                          f"bzip2, found {enc!r}")
    return enc


def _prepared(given: dict[str, Any], src: FileOrder, type_name: str, enc: str,
              path: str) -> dict[str, Any]:
    """The header to check and write: data-derived fields set, NumPy values made plain."""
    out = {k: _plain(v) for k, v in given.items()}
    for k in _DATA_PLACEMENT:
        out.pop(k, None)
    out.pop("jnrrd", None)
    out["type"] = type_name
    out["dimension"] = len(src.shape)
    out["sizes"] = list(src.shape)
    out["encoding"] = enc
    if type_name == "block":
        out["block_size"] = src.dtype.itemsize
        out.pop("endian", None)
    elif np.dtype(TYPES[type_name]).itemsize == 1 or enc == "ascii":
        out.pop("endian", None)  # NRRD: endian only where byte order matters
    else:
        endian = out.get("endian") or "little"
        if endian not in ("little", "big"):
            raise HeaderError(f"{where(path, 'endian')}expected 'little' or 'big', found "
                              f"{endian!r}")
        out["endian"] = endian
    dirs = out.get("space_directions")
    if isinstance(dirs, list):
        # an all-NaN row is how pynrrd spells 'none'
        out["space_directions"] = [
            None if isinstance(d, list) and d and all(x is None for x in d) else d
            for d in dirs]
    return out


def _plain(v: Any) -> Any:
    """NumPy arrays and scalars -> lists and Python numbers (core_fields takes JSON values);
    NaN -> None, since both mean "unknown" (NRRD writes either as ``nan``)."""
    if isinstance(v, np.ndarray):
        v = v.tolist()
    elif isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def _one_line(value: str, path: str, field: str) -> str:
    if "\n" in value or "\r" in value:
        raise HeaderError(f"{where(path, field)}expected a single-line string (NRRD header "
                          f"lines cannot hold a line break), found {value[:60]!r}")
    return value


def render_nrrd_header(out: Mapping[str, Any], core: CoreFields, *,
                       data_file: str | None = None, source: Any = None) -> bytes:
    """The NRRD0005 header text for checked fields (no blank line after it)."""
    ext = _extension(out, source)
    lines = ["NRRD0005"]
    for c in ext["comments"]:
        lines.append("# " + _one_line(str(c), source, f"{NRRD_PREFIX}:comments"))
    lines.append(f"type: {WRITE_TYPES[core.type_name]}")
    if core.block_size is not None and core.type_name == "block":
        lines.append(f"block size: {core.block_size}")
    lines.append(f"dimension: {core.dimension}")
    if core.space is not None:
        lines.append(f"space: {core.space.replace('_', '-')}")
    elif core.space_dimension is not None:
        lines.append(f"space dimension: {core.space_dimension}")
    lines.append("sizes: " + " ".join(str(n) for n in core.sizes))
    if core.space_directions is not None:
        lines.append("space directions: " + " ".join(format_vector(d)
                                                     for d in core.space_directions))
    if core.kinds is not None:
        lines.append("kinds: " + " ".join("???" if k is None else KIND_NAMES[k]
                                          for k in core.kinds))
    if core.centers is not None:
        # "centerings" rather than teem's "centers": both read it, pynrrd only this one
        lines.append("centerings: " + " ".join(c or "???" for c in core.centers))
    if "endian" in out:
        lines.append(f"endian: {core.endian}")
    lines.append(f"encoding: {core.encoding}")
    if core.content is not None:
        lines.append("content: " + _one_line(core.content, source, "content"))
    for name, spelled in (("min", "min"), ("max", "max"), ("old_min", "old min"),
                          ("old_max", "old max")):
        v = out.get(name)
        if v is not None:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise HeaderError(f"{where(source, name)}expected a number, found {v!r}")
            lines.append(f"{spelled}: {format_number(v)}")
    if core.sample_units is not None:
        lines.append("sample units: " + _one_line(core.sample_units, source, "sample_units"))
    for name, spelled in (("spacings", "spacings"), ("thicknesses", "thicknesses"),
                          ("axis_mins", "axis mins"), ("axis_maxs", "axis maxs")):
        vals = getattr(core, name)
        if vals is not None:
            lines.append(f"{spelled}: " + " ".join(format_number(v) for v in vals))
    for name, spelled in (("labels", "labels"), ("units", "units"),
                          ("space_units", "space units")):
        vals = getattr(core, name)
        if vals is not None:
            text = " ".join(format_quoted(v) for v in vals)
            lines.append(f"{spelled}: " + _one_line(text, source, name))
    if core.space_origin is not None:
        lines.append("space origin: " + format_vector(core.space_origin))
    if core.measurement_frame is not None:
        lines.append("measurement frame: " + " ".join(format_vector(v)
                                                      for v in core.measurement_frame))
    for key, value in ext["key_values"].items():
        lines.append(f"{escape_kv(key)}:={escape_kv(value)}")
    if data_file is not None:
        lines.append("data file: " + data_file)
    return ("\n".join(lines) + "\n").encode("utf-8")


def _extension(out: Mapping[str, Any], source: Any) -> dict[str, Any]:
    """The ``nrrd`` extension's key/value pairs and comments; warn about what is dropped."""
    prefix = find_prefix(out, NRRD_URI.rsplit("/", 1)[0] + "/") or NRRD_PREFIX
    tile = find_prefix(out, TILE_URI_PREFIX) or "tile"
    kv_field, cm_field = f"{prefix}:key_values", f"{prefix}:comments"
    kvs = out.get(kv_field) or {}
    if not isinstance(kvs, Mapping):
        raise HeaderError(f"{where(source, kv_field)}expected an object of string keys and "
                          f"values, found {type(kvs).__name__}")
    for k, v in kvs.items():
        if not isinstance(k, str) or not k or ":=" in k or k.startswith("#"):
            raise HeaderError(f"{where(source, kv_field)}expected keys that are non-empty, "
                              f"do not start with '#' and do not contain ':=', found {k!r}")
        if not isinstance(v, str):
            raise HeaderError(f"{where(source, f'{kv_field}.{k}')}expected a string value, "
                              f"found {v!r}")
    comments = out.get(cm_field) or []
    if not isinstance(comments, (list, tuple)) or not all(isinstance(c, str)
                                                           for c in comments):
        raise HeaderError(f"{where(source, cm_field)}expected a list of strings, found "
                          f"{comments!r}")
    dropped = []
    tiling = False
    kvs = dict(kvs)
    for key in out:
        parts = split_key(key)
        if parts is not None:
            tiling = tiling or parts[0] == tile
            if parts[0] != tile and key not in (kv_field, cm_field):
                dropped.append(key)
        elif key not in _MAPPED:
            if _plain_pair(key, out[key]) and key not in kvs:
                # pynrrd's custom fields and 3D Slicer's segment keys given as plain header
                # keys: NRRD writes them as key/value pairs
                kvs[key] = out[key] if isinstance(out[key], str) else format_number(out[key])
            else:
                dropped.append(key)
    if dropped:
        note = " (tiling fields are dropped silently: NRRD data is untiled)" if tiling else ""
        warnings.warn(f"{where(source)}NRRD cannot hold the fields {dropped}; they are not "
                      f"written{note}", JnrrdWarning, stacklevel=4)
    return {"key_values": kvs, "comments": list(comments)}


def _plain_pair(key: str, value: Any) -> bool:
    """Whether an unknown plain header key can be a NRRD ``key:=value`` pair: a single-line
    key that NRRD would not read as a comment or a field, and a string or number value."""
    if not key or ":=" in key or key.startswith("#") or any(c in key for c in "\r\n"):
        return False
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return False
    return not (isinstance(value, float) and not math.isfinite(value))
