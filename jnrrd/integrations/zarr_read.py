"""Zarr groups and arrays (v3, and v2 for OME-NGFF 0.4) read as **hostile input**, for the
OME-Zarr importer (docs/security.md, "OME-Zarr stores are untrusted input too").

A Zarr store is read by the same machinery, under the same policy, as a JNRRD file's
external tiles:

- every object through a jnrrd store (:class:`~jnrrd.storage.local.LocalStore` for a path,
  :class:`~jnrrd.storage.remote.RemoteStore` for a URL): keys are confined to the store's
  directory after ``realpath`` (a level folder or chunk linked outside is a
  ``SecurityError`` unless ``allowed_roots``/``allow_parent`` say otherwise), only regular
  files are opened (a FIFO chunk is a ``DataError``, never a blocked ``open``);
- metadata documents are held to ``max_line_bytes`` and parsed like a header line: nesting
  past 64 levels is a ``FormatError``, never a ``RecursionError``;
- shapes and chunk grids are checked before anything is read: 1 to 16 axes (JNRRD's),
  sizes >= 1, at most ``max_tiles`` chunks, each at most ``max_tile_bytes`` decoded, at most
  ``max_levels`` arrays in a pyramid (:func:`check_levels`); a selection allocates at most
  ``max_bytes``;
- chunks are decoded by a capped :class:`jnrrd.codecs.CodecChain`
  (:mod:`jnrrd.integrations.zarr_codecs`): a zstd bomb stops at the chunk's size + 1 byte;
- every failure is a :class:`~jnrrd.errors.JnrrdError` naming the store and the object.

A chunk that is absent holds the fill value (Zarr's rule).
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..codecs import ArrayBytesCodec
from ..errors import (
    DataError,
    FormatError,
    JnrrdError,
    SecurityError,
    UnsupportedError,
)
from ..header.wire import MAX_NESTING
from ..policy import Policy
from ..storage import LocalStore, is_remote, local_path
from .zarr_codecs import MAX_INNER_CHUNKS, ShardingDecode, chunk_chain, v2_codecs

__all__ = ["FILL_RATIO", "FREE_CHUNKS", "ZarrArray", "ZarrGroup", "check_levels",
           "open_group"]

_MAX_DIMS = 16  # JNRRD's (docs/format.md#core-fields)
#: Zarr v3 data types a JNRRD file can hold (bool is read, and refused by the converter)
_V3_TYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
             "float16", "float32", "float64", "complex64", "complex128"}
_FLOAT_WORDS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
_V2_KINDS = {"b": "bool", "i": "int", "u": "uint", "f": "float", "c": "complex"}
#: an array may declare this many chunks whatever it stores ...
FREE_CHUNKS = 1024
#: ... and beyond that at most this many per chunk it stores (ZarrArray.check_occupancy)
FILL_RATIO = 64


def open_group(source: Any, *, storage_options: Mapping[str, Any] | None = None,
               policy: Policy | None = None) -> ZarrGroup:
    """The Zarr group at ``source`` (a directory path or an fsspec URL). A missing local
    directory is ``FileNotFoundError``; anything that is not a readable group is a
    ``JnrrdError``."""
    pol = policy or Policy()
    name = os.fspath(source) if isinstance(source, os.PathLike) else source
    if not isinstance(name, str):
        raise FormatError(f"{name!r:.80}: an OME-Zarr source is a directory path or a URL")
    if is_remote(name):
        from ..storage import RemoteStore, filesystem

        fs, path = filesystem(name, dict(storage_options or {}))
        store: Any = RemoteStore(fs, path.rstrip("/"), pol, source=name)
    else:
        path = local_path(name)
        if "\0" in path:
            raise SecurityError(f"{path!r}: a path cannot contain a NUL byte")
        if not os.path.isdir(path):
            raise FileNotFoundError(errno.ENOENT, "No such directory (a Zarr store)", path)
        store = LocalStore(os.path.abspath(path), pol, source=name)
    return ZarrGroup(store, name, pol)


class ZarrGroup:
    """A Zarr group: ``attrs`` (its attributes), ``zarr_format`` (2 or 3), and
    :meth:`array` for the arrays under it."""

    def __init__(self, store: Any, name: str, policy: Policy) -> None:
        self.store, self.name, self.policy = store, name, policy
        meta = _document(self, "zarr.json")
        if meta is not None:
            self.zarr_format = 3
            if meta.get("zarr_format") != 3 or meta.get("node_type") != "group":
                raise FormatError(f"{name}/zarr.json: not a Zarr v3 group (zarr_format "
                                  f"{meta.get('zarr_format')!r:.20}, node_type "
                                  f"{meta.get('node_type')!r:.20})")
            attrs = meta.get("attributes", {})
        else:
            group = _document(self, ".zgroup")
            if group is None:
                raise FormatError(f"{name}: not a Zarr group (no zarr.json or .zgroup)")
            if group.get("zarr_format") != 2:
                raise FormatError(f"{name}/.zgroup: zarr_format "
                                  f"{group.get('zarr_format')!r:.20}, expected 2")
            self.zarr_format = 2
            attrs = _document(self, ".zattrs") or {}
        if not isinstance(attrs, dict):
            raise FormatError(f"{name}: the group attributes are not an object")
        self.attrs: dict[str, Any] = attrs

    def array(self, path: Any) -> ZarrArray:
        """The array at ``path`` under the group (confined to the store)."""
        if not isinstance(path, str) or not path.strip("/"):
            raise FormatError(f"{self.name}: multiscales dataset path {path!r:.60} is not a "
                              "non-empty string")
        return ZarrArray(self, path.strip("/"))


#: +1 for an opening bracket, -1 for a closing one, 0 for every other byte
_BRACKET_STEP = np.zeros(256, np.int8)
_BRACKET_STEP[[ord("["), ord("{")]] = 1
_BRACKET_STEP[[ord("]"), ord("}")]] = -1
_NOT_BRACKET_OR_QUOTE = bytes(c for c in range(256) if c not in b'[]{}"')


def json_depth(text: bytes) -> int:
    """How deeply lists and objects nest in the valid JSON ``text`` (0 for a scalar), from the
    text in a few passes at C speed (a 10 000-level pyramid's metadata in milliseconds,
    without a Python-level walk of every node): escaped backslashes and quotes are dropped,
    then everything but brackets and quotes, then the strings; the depth is the running sum
    of the brackets left."""
    t = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    t = t.translate(None, _NOT_BRACKET_OR_QUOTE)
    t = b"".join(t.split(b'"')[::2])  # outside the strings: the even pieces
    if not t:
        return 0
    return int(_BRACKET_STEP[np.frombuffer(t, np.uint8)].cumsum(dtype=np.int64).max())


def _document(group: ZarrGroup, key: str) -> dict[str, Any] | None:
    """The JSON object stored under ``key`` (None when absent), read and parsed within the
    caps."""
    cap = group.policy.max_line_bytes
    try:
        raw = group.store.get(key, limit=cap + 1, field="metadata", what=f"{key}: ")
    except FileNotFoundError:
        return None
    if len(raw) > cap:
        raise UnsupportedError(f"{group.name}/{key}: metadata longer than the max_line_bytes "
                               f"cap ({cap}) of jnrrd's readers")
    try:
        obj = json.loads(bytes(raw).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FormatError(f"{group.name}/{key}: not JSON ({exc})") from None
    except RecursionError:
        raise FormatError(f"{group.name}/{key}: JSON nested too deeply") from None
    except ValueError as exc:  # an integer literal past the interpreter's digit limit
        raise FormatError(f"{group.name}/{key}: unreadable JSON value ({exc})") from None
    text = bytes(raw)
    if json_depth(text) > MAX_NESTING + 1:
        raise FormatError(f"{group.name}/{key}: JSON nested more than {MAX_NESTING} levels")
    if not isinstance(obj, dict):
        raise FormatError(f"{group.name}/{key}: expected a JSON object, found "
                          f"{type(obj).__name__}")
    return obj


def check_levels(n: int, policy: Policy, name: Any) -> None:
    """``UnsupportedError`` for more pyramid levels than ``max_levels`` (checked before any
    level's array is opened)."""
    if n > policy.max_levels:
        raise UnsupportedError(f"{name}: multiscales lists {n} datasets, over the max_levels "
                               f"cap ({policy.max_levels}) of jnrrd's readers")


class ZarrArray:
    """One Zarr array: ``shape``, ``dtype``, ``chunks`` (the inner chunks of a sharded
    array), ``fill_value``, ``compression`` (the first compressor's family name, or None),
    all in C order as stored, and C-order basic indexing (``a[0, 2:8, ::2]``) that reads
    only the chunks a selection touches."""

    def __init__(self, group: ZarrGroup, path: str) -> None:
        self.group, self.path = group, path
        self.where = f"{group.name}/{path}: "
        if group.zarr_format == 3:
            meta = _document(group, f"{path}/zarr.json")
            if meta is None:
                raise FormatError(f"{self.where}no zarr.json: not an array of the group")
            self._v3(meta)
        else:
            meta = _document(group, f"{path}/.zarray")
            if meta is None:
                raise FormatError(f"{self.where}no .zarray: not an array of the group")
            self._v2(meta)
        self._check_grid()

    # -- metadata ----------------------------------------------------------------------------
    def _v3(self, meta: dict[str, Any]) -> None:
        w = self.where
        if meta.get("zarr_format") != 3 or meta.get("node_type") != "array":
            raise FormatError(f"{w}zarr.json is not a Zarr v3 array")
        if meta.get("storage_transformers"):
            raise UnsupportedError(f"{w}storage_transformers are not supported")
        self.shape = _shape(meta.get("shape"), w)
        dt = meta.get("data_type")
        if not isinstance(dt, str) or dt not in _V3_TYPES:
            raise UnsupportedError(f"{w}data_type {dt!r:.40} has no JNRRD type (expected one "
                                   f"of {', '.join(sorted(_V3_TYPES))})")
        self.dtype = np.dtype(str(dt))
        grid = meta.get("chunk_grid")
        if not isinstance(grid, dict) or grid.get("name") != "regular":
            raise UnsupportedError(f"{w}chunk_grid {grid!r:.60}: only the regular grid is read")
        self.outer = _sizes(_config(grid, f"{w}chunk_grid").get("chunk_shape"),
                            f"{w}chunk_grid.chunk_shape", 1, len(self.shape))
        enc = meta.get("chunk_key_encoding", {"name": "default"})
        if not isinstance(enc, dict) or not isinstance(enc.get("name"), str) or enc.get(
                "name") not in ("default", "v2"):
            raise UnsupportedError(f"{w}chunk_key_encoding {enc!r:.60}")
        sep = _config(enc, f"{w}chunk_key_encoding").get(
            "separator", "/" if enc["name"] == "default" else ".")
        if not isinstance(sep, str) or sep not in ("/", "."):
            raise FormatError(f"{w}chunk_key_encoding separator {sep!r:.20}")
        self._prefix = "c" if enc["name"] == "default" else ""
        self._sep = sep
        self.fill_value = _fill(meta.get("fill_value"), self.dtype, f"{w}fill_value")
        self.chain = chunk_chain(meta.get("codecs"), self.dtype, self.outer, self.fill_value,
                                 w)

    def _v2(self, meta: dict[str, Any]) -> None:
        w = self.where
        if meta.get("zarr_format") != 2:
            raise FormatError(f"{w}.zarray: zarr_format {meta.get('zarr_format')!r:.20}")
        self.shape = _shape(meta.get("shape"), w)
        self.outer = _sizes(meta.get("chunks"), f"{w}chunks", 1, len(self.shape))
        self.dtype, endian = _v2_dtype(meta.get("dtype"), w)
        sep = meta.get("dimension_separator", ".")
        if not isinstance(sep, str) or sep not in ("/", "."):
            raise FormatError(f"{w}dimension_separator {sep!r:.20}")
        self._prefix, self._sep = "", sep
        self.fill_value = _fill(meta.get("fill_value"), self.dtype, f"{w}fill_value")
        codecs = v2_codecs(meta, len(self.shape), self.dtype.itemsize, endian, w)
        self.chain = chunk_chain(codecs, self.dtype, self.outer, self.fill_value, w)

    def _check_grid(self) -> None:
        pol, w = self.group.policy, self.where
        ab = next(c for c in self.chain.codecs if isinstance(c, ArrayBytesCodec))
        self.chunks = (tuple(ab.inner_shape[::-1]) if isinstance(ab, ShardingDecode)
                       else self.outer)
        outer = math.prod(-(-n // c) for n, c in zip(self.shape, self.outer, strict=True))
        inner = outer * (math.prod(self.outer) // math.prod(self.chunks))
        if inner > pol.max_tiles:
            raise UnsupportedError(f"{w}{inner} chunks, over the max_tiles cap "
                                   f"({pol.max_tiles}) of jnrrd's readers")
        nbytes = math.prod(self.outer) * self.dtype.itemsize
        if nbytes > pol.max_tile_bytes:
            raise UnsupportedError(f"{w}a chunk decodes to {nbytes} bytes, over the "
                                   f"max_tile_bytes cap ({pol.max_tile_bytes})")
        if math.prod(self.outer) // math.prod(self.chunks) > MAX_INNER_CHUNKS:
            raise UnsupportedError(f"{w}more than {MAX_INNER_CHUNKS} inner chunks per shard")
        names = [c.name for c in self.chain.codecs]
        self.compression = next((n for n in names if n not in (
            "bytes", "transpose", "crc32c", "sharding_indexed", "numcodecs.shuffle")), None)
        if isinstance(ab, ShardingDecode):
            self.compression = next((c.name for c in ab.inner if c.name not in (
                "bytes", "transpose", "crc32c", "numcodecs.shuffle")), None)

    def check_occupancy(self) -> None:
        """``UnsupportedError`` for an array that declares more than :data:`FREE_CHUNKS`
        chunks and stores fewer than one of every :data:`FILL_RATIO` (counted by listing
        its folder, stopping once enough are seen). An absent chunk is the fill value, and
        a conversion visits every declared chunk: this keeps its cost within a constant
        factor of what the store holds (a 400-byte array declaring 8 GiB of chunks would
        otherwise cost minutes of writing fill)."""
        declared = math.prod(-(-n // c) for n, c in zip(self.shape, self.outer, strict=True))
        if declared <= FREE_CHUNKS:
            return
        need = -(-declared // FILL_RATIO)
        found = 0
        try:
            for key in self.group.store.walk(self.path):
                found += not key.endswith(("zarr.json", ".zarray", ".zattrs"))
                if found >= need:
                    return
        except OSError as exc:
            raise DataError(f"{self.where}its chunks cannot be listed: {exc}") from None
        raise UnsupportedError(
            f"{self.where}declares {declared} chunks and stores {found}: the OME-Zarr "
            f"importer needs at least one of every {FILL_RATIO} chunks stored once an array "
            f"declares more than {FREE_CHUNKS} (an absent chunk is the fill value, and a "
            "conversion writes every declared chunk)")

    # -- reading ----------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, key: Any) -> np.ndarray:
        sel = _basic(key, self.shape)
        box = tuple(slice(s.start, s.stop) if isinstance(s, slice) else slice(s, s + 1)
                    for s in sel)
        out = self.read(box)
        return out[tuple(slice(None, None, s.step) if isinstance(s, slice) else 0
                         for s in sel)]

    def read(self, box: tuple[slice, ...]) -> np.ndarray:
        """The C-order region ``box`` (step-1 slices inside the shape), chunk by chunk. A
        region no stored chunk touches is the fill value broadcast (read-only, no memory):
        the cost of a store follows the chunks it holds, not the shape it declares."""
        shape = tuple(s.stop - s.start for s in box)
        self.group.policy.check_bytes(math.prod(shape) * self.dtype.itemsize,
                                      f"{self.where}the selection", None)
        if math.prod(shape) == 0:
            return np.empty(shape, dtype=self.dtype)
        ranges = [range(s.start // c, (s.stop - 1) // c + 1) for s, c in zip(
            box, self.outer, strict=True)]
        out: np.ndarray | None = None
        for coords in np.ndindex(*(len(r) for r in ranges)):
            chunk = tuple(r[i] for r, i in zip(ranges, coords, strict=True))
            data = self._chunk(chunk)
            if data is None:
                continue
            if out is None:
                out = np.full(shape, self.fill_value, dtype=self.dtype)
            lo = [c * n for c, n in zip(chunk, self.outer, strict=True)]
            src = tuple(slice(max(s.start, a) - a, min(s.stop, a + n) - a)
                        for s, a, n in zip(box, lo, self.outer, strict=True))
            dst = tuple(slice(max(s.start, a) - s.start, min(s.stop, a + n) - s.start)
                        for s, a, n in zip(box, lo, self.outer, strict=True))
            out[dst] = data[src]
        if out is None:
            return np.broadcast_to(np.asarray(self.fill_value, dtype=self.dtype), shape)
        return out

    def _chunk(self, coords: tuple[int, ...]) -> np.ndarray | None:
        """The decoded chunk at ``coords`` (C order), or None when it is absent."""
        key = self._key(coords)
        limit = self.group.policy.max_tile_bytes + (1 << 20)
        store = self.group.store
        if isinstance(store, LocalStore) and not os.path.lexists(
                os.path.join(store.root, self.path, *key.split("/"))):
            return None  # absent: no name to resolve (whatever exists goes through the policy)
        try:
            raw = store.get(f"{self.path}/{key}", limit=limit + 1, field="chunk",
                            what=f"{self.where}chunk {key}: ")
        except FileNotFoundError:
            return None
        if len(raw) > limit:
            raise DataError(f"{self.where}chunk {key}: over {limit} bytes stored")
        try:
            return self.chain.decode(raw).T  # header order -> C order
        except JnrrdError as exc:
            raise type(exc)(f"{self.where}chunk {key}: {exc}") from None
        except (ValueError, OverflowError, MemoryError) as exc:
            raise DataError(f"{self.where}chunk {key}: does not decode: {exc}") from None

    def _key(self, coords: tuple[int, ...]) -> str:
        parts = [self._prefix] if self._prefix else []
        return self._sep.join([*parts, *map(str, coords)])


def _config(obj: dict[str, Any], field: str) -> dict[str, Any]:
    """The ``configuration`` object of a named metadata object (absent: empty)."""
    config = obj.get("configuration")
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise FormatError(f"{field}.configuration: expected an object, found {config!r:.60}")
    return config


def _shape(value: Any, where_: str) -> tuple[int, ...]:
    if isinstance(value, list) and not 1 <= len(value) <= _MAX_DIMS:
        raise UnsupportedError(f"{where_}{len(value)} axes; a JNRRD file holds 1 to "
                               f"{_MAX_DIMS}")
    return _sizes(value, f"{where_}shape", 1)


def _sizes(value: Any, field: str, low: int, n: int | None = None) -> tuple[int, ...]:
    if (not isinstance(value, list) or (n is not None and len(value) != n)
            or not all(type(v) is int and low <= v < 2**62 for v in value)):
        want = f"{n} integers" if n is not None else "a list of integers"
        raise FormatError(f"{field}: expected {want} from {low} to 2**62, found {value!r:.80}")
    return tuple(value)


def _v2_dtype(value: Any, where_: str) -> tuple[np.dtype, str | None]:
    """A v2 ``dtype`` string (``<u2``, ``|u1``, ``>f4``, ``<c8``, ``|b1``) and its byte
    order (None for one-byte types)."""
    m = re.fullmatch(r"([<>|])([biufc])([0-9]{1,2})", value) if isinstance(value, str) \
        else None
    name = None
    if m is not None:
        kind, size = m.group(2), int(m.group(3))
        name = "bool" if (kind, size) == ("b", 1) else f"{_V2_KINDS[kind]}{size * 8}"
    if m is None or name not in _V3_TYPES:
        raise UnsupportedError(f"{where_}dtype {value!r:.40} has no JNRRD type (numeric "
                               "types only)")
    endian = {"<": "little", ">": "big"}.get(m.group(1)) if int(m.group(3)) > 1 else None
    return np.dtype(name), endian


def _fill(value: Any, dtype: np.dtype, field: str) -> Any:
    """The fill value as a NumPy scalar of ``dtype`` (Zarr's JSON encodings: numbers, NaN
    and infinities as words, v3 hex strings of the raw bits, complex as pairs)."""
    try:
        if value is None:
            return dtype.type(0)
        if dtype.kind == "c" and isinstance(value, list) and len(value) == 2:
            return dtype.type(complex(_fill(value[0], np.dtype("f8"), field),
                                      _fill(value[1], np.dtype("f8"), field)))
        if isinstance(value, str):
            if value in _FLOAT_WORDS and dtype.kind in "fc":
                return dtype.type(_FLOAT_WORDS[value])
            if value.startswith("0x") and dtype.kind == "f" and len(value) == 2 + 2 * \
                    dtype.itemsize:  # the raw bits, most significant first
                return np.frombuffer(bytes.fromhex(value[2:]),
                                     dtype=dtype.newbyteorder(">"))[0].astype(dtype)
            raise ValueError(value)
        if isinstance(value, bool) or isinstance(value, (int, float)):
            out = np.asarray(value).astype(dtype)
            if dtype.kind in "iub" and out != value:
                raise ValueError(value)
            return out[()]
    except (ValueError, TypeError, OverflowError):
        pass
    raise FormatError(f"{field}: {value!r:.60} is not a {dtype.name} value")


def _basic(key: Any, shape: tuple[int, ...]) -> list[slice | int]:
    """A basic C-order selection as one non-negative ``slice`` (step >= 1) or index per axis
    (``IndexError``/``TypeError`` as NumPy gives them for a caller's bad key)."""
    key = key if isinstance(key, tuple) else (key,)
    if sum(k is Ellipsis for k in key) > 1:
        raise IndexError("an index can only have a single ellipsis")
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (len(shape) - len(key) + 1) + key[i + 1:]
    if len(key) > len(shape):
        raise IndexError(f"too many indices: {len(key)} for {len(shape)} axes")
    key = key + (slice(None),) * (len(shape) - len(key))
    out: list[slice | int] = []
    for k, n in zip(key, shape, strict=True):
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            if step < 1:
                raise IndexError("negative steps are not supported when reading Zarr")
            out.append(slice(start, max(start, stop), step))
        elif isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            i = int(k) + (n if k < 0 else 0)
            if not 0 <= i < n:
                raise IndexError(f"index {k} is out of bounds for an axis of size {n}")
            out.append(i)
        else:
            raise TypeError(f"Zarr arrays take ints and slices, not {type(k).__name__}")
    return out
