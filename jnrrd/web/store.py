"""A volume as a Zarr v3 group with OME-Zarr 0.5 metadata, answered key by key.

:class:`ZarrStore` is what ``jnrrd serve`` publishes (docs/web-view.md): the group's
``zarr.json`` (attributes ``ome``, the OME-NGFF 0.5 ``multiscales`` of
:mod:`jnrrd.integrations.ngff`, and ``jnrrd``, the header without its per-tile tables, as
:func:`jnrrd.kerchunk_refs` writes them), one array per pyramid level at ``"0"``, ``"1"``, ...
and their chunks at ``"<level>/c/<i>/<j>/..."``. Axes are the header's reversed (C order,
docs/format.md): the chunk key's first index is the tile coordinate along the slowest header
axis.

A chunk is one of:

- **the stored tile, unchanged** — when the level is stored, its tiles carry no halo, the
  tile's stored shape is the chunk shape, and the file's codec chain is made only of codecs
  every web viewer decodes (:data:`PASSTHROUGH_CODECS`); its ``zarr.json`` then lists that
  chain (transpose orders remapped to the reversed axes);
- **absent** (HTTP 404) — a sparse tile: Zarr readers fill it with ``fill_value``, the file's
  ``tile:padding_value``;
- **re-encoded** — otherwise (a chain with other codecs, overlapping tiles, a cut ``variable``
  edge tile, a virtual level, an untiled file, a stored ``gzip`` tile that is a zlib stream):
  the chunk's voxels are read through the volume (its decoded-tile cache) and encoded with the
  array's chain, which is the file's own when it qualifies, else :data:`REENCODED_CODECS`.
  Edge chunks are padded with the fill value to the full chunk shape.

Untiled files (and classic NRRD) get chunks of :func:`default_chunk` voxels.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._threads import ordered_map
from ..codecs import CodecChain
from ..errors import ArgumentError, UnsupportedError, where
from ..integrations.ngff import multiscales
from ..integrations.zarr_refs import header_attribute, zarr_codecs, zarr_fill_value
from ..tiling.kinds import axis_kinds, is_domain

__all__ = ["CHUNK_CACHE_BYTES", "PASSTHROUGH_CODECS", "REENCODED_CODECS", "ArrayLayout",
           "ZarrStore", "default_chunk"]

#: codecs that zarr-python, neuroglancer, vizarr (zarrita.js) and the OME-Zarr validator all
#: decode: a chain of these is served as stored (numcodecs.* and bz2 are zarr-python's only)
PASSTHROUGH_CODECS = frozenset({"bytes", "transpose", "gzip", "zstd", "crc32c"})
#: the chain of re-encoded chunks when the file's own does not qualify (gzip: every Zarr
#: reader has it; level 1 keeps the per-request encode cheap)
REENCODED_CODECS: tuple[dict[str, Any], ...] = (
    {"name": "bytes", "configuration": {"endian": "little"}},
    {"name": "gzip", "configuration": {"level": 1}},
)
#: element types with a Zarr v3 name that zarr-python and the web viewers read
_TYPES = frozenset({"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                    "float16", "float32", "float64"})
#: the chunk answers kept (stored bytes as served, or re-encoded ones)
CHUNK_CACHE_BYTES = 64 << 20
_CHUNK_KEY = re.compile(r"(0|[1-9][0-9]{0,8})/c((?:/(?:0|[1-9][0-9]{0,17}))+)")
_GZIP_MAGIC = b"\x1f\x8b"


def default_chunk(shape: Sequence[int], kinds: Sequence[str | None]) -> tuple[int, ...]:
    """The chunk of an untiled file (header order): what ``jnrrd.write`` tiles with by default
    (64 voxels per domain axis from 3-D up, 256 in 2-D, 65 536 in 1-D), the whole axis for
    non-domain axes (vectors, colours), never more than the axis."""
    domain = [a for a in range(len(shape)) if is_domain(kinds[a])]
    size = 64 if len(domain) >= 3 else 256 if len(domain) == 2 else 65536
    return tuple(min(size, n) if a in domain else n for a, n in enumerate(shape))


@dataclass(frozen=True)
class ArrayLayout:
    """One level as a Zarr array, header axis order."""

    level: int
    shape: tuple[int, ...]
    chunk: tuple[int, ...]
    #: chunks per axis
    grid: tuple[int, ...]
    #: whether a chunk may be the stored tile itself (see the module docstring)
    passthrough: bool


class ZarrStore:
    """The Zarr v3 keys of an open volume (``jnrrd.open(...)``, header axis order ``"F"``),
    its values served as ``dtype`` (default: the volume's; another one re-encodes every chunk),
    its axes named ``axis_names`` (header order; default: :func:`~jnrrd.integrations.ngff.
    axis_names`, the file's labels).

    ``documents`` maps the metadata keys to their JSON bytes; :meth:`lookup` tells a key's
    kind; :meth:`chunk` gives a chunk's bytes (``None``: absent). Thread-safe when the volume
    is. ``UnsupportedError`` for an element type the web viewers have no name for.
    """

    def __init__(self, vol: Any, *, name: str | None = None, dtype: Any = None,
                 axis_names: Sequence[str] | None = None,
                 chunk_cache_bytes: int = CHUNK_CACHE_BYTES) -> None:
        if vol.index_order != "F":
            raise ArgumentError(f"{where(vol.name, 'index_order')}ZarrStore needs a volume "
                                "opened with index_order='F'")
        self.vol = vol
        #: the volume's name in the metadata and pages
        self.name = name or "volume"
        stored_name = str(getattr(vol.core, "type_name", np.dtype(vol.dtype).name))
        dtype = np.dtype(vol.dtype if dtype is None else dtype)
        if dtype.name not in _TYPES:
            shown = stored_name if dtype == vol.dtype else dtype.name
            raise UnsupportedError(
                f"{where(vol.name, 'type')}{shown!r} has no Zarr v3 data type the web "
                f"viewers read ({', '.join(sorted(_TYPES))})")
        self.dtype = dtype
        tiling = vol.tiling
        self.fill = _fill(tiling.padding_value if tiling is not None else None, dtype)
        own = _own_chain(vol) if dtype == vol.dtype else None
        self.file_chain = own is not None
        self.codecs_json = own[1] if own is not None else [dict(c) for c in REENCODED_CODECS]
        self._chain_json = own[0] if own is not None else list(REENCODED_CODECS)
        #: a stored gzip tile may be a zlib stream the reader accepts leniently: checked
        self._check_gzip = bool(own is not None and tiling.gzip_lenient and any(
            c.get("name") == "gzip" for c in own[0]))
        self.arrays = [self._layout(k) for k in range(len(vol.levels))]
        self._chains = [CodecChain.from_json(self._chain_json, dtype=dtype, shape=a.chunk,
                                             fill_value=self.fill) for a in self.arrays]
        self.documents = self._documents(name, axis_names)
        self._cache = _Cache(chunk_cache_bytes)

    # -- layout ---------------------------------------------------------------------------
    def _layout(self, k: int) -> ArrayLayout:
        vol = self.vol
        lv = vol.levels[k]
        shape = tuple(lv.level.shape)
        if not vol.tiled:
            kinds = axis_kinds(vol.header, len(shape))
            whole = default_chunk(shape, kinds)
            return ArrayLayout(k, shape, whole, _ceil_div(shape, whole), False)
        grid = lv.level.grid
        chunk = list(shape)
        for i, a in enumerate(grid.axes):
            t = grid.tile[i]
            # the stored shape of a full tile: pad edges store every tile whole; variable
            # edges store a lone tile at the axis' length
            chunk[a] = t if grid.edge == "pad" or grid.grid[i] > 1 else min(t, shape[a])
        passthrough = bool(self.file_chain and lv.level.stored and not any(grid.overlap))
        return ArrayLayout(k, shape, tuple(chunk), _ceil_div(shape, chunk), passthrough)

    def _documents(self, name: str | None, axis_names: Sequence[str] | None
                   ) -> dict[str, bytes]:
        vol = self.vol
        attributes: dict[str, Any] = {"ome": multiscales(vol, name=name)}
        if axis_names is not None:  # header order; the NGFF axes are reversed
            axes = attributes["ome"]["multiscales"][0]["axes"]
            for axis, new in zip(axes, reversed(list(axis_names)), strict=True):
                axis["name"] = new
        if vol.tiled:
            attributes["jnrrd"] = header_attribute(vol.header, vol.tiling.prefix)
        else:
            attributes["jnrrd"] = header_attribute(vol.header, "tile")
        dims = [a["name"] for a in attributes["ome"]["multiscales"][0]["axes"]]
        arrays = {str(arr.level): {
            "zarr_format": 3, "node_type": "array",
            "shape": list(arr.shape[::-1]), "data_type": self.dtype.name,
            "chunk_grid": {"name": "regular",
                           "configuration": {"chunk_shape": list(arr.chunk[::-1])}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": zarr_fill_value(self.fill, self.dtype.name),
            "codecs": self.codecs_json, "attributes": {}, "dimension_names": dims,
        } for arr in self.arrays}
        # the arrays' metadata also inline in the group (zarr-python's consolidated metadata,
        # which readers may ignore): an HTTP store cannot be listed, so this is how a reader
        # finds the group's members in one request
        docs = {"zarr.json": _dumps({
            "zarr_format": 3, "node_type": "group", "attributes": attributes,
            "consolidated_metadata": {"kind": "inline", "must_understand": False,
                                      "metadata": arrays}})}
        for key, meta in arrays.items():
            docs[f"{key}/zarr.json"] = _dumps(meta)
        return docs

    # -- keys -----------------------------------------------------------------------------
    def lookup(self, key: str) -> bytes | tuple[ArrayLayout, tuple[int, ...]] | None:
        """A metadata document, ``(array, chunk coordinates in header order)`` for a chunk
        key inside the grid, or ``None`` for every other key."""
        doc = self.documents.get(key)
        if doc is not None:
            return doc
        m = _CHUNK_KEY.fullmatch(key)
        if m is None:
            return None
        level = int(m.group(1))
        if level >= len(self.arrays):
            return None
        arr = self.arrays[level]
        coords = tuple(int(c) for c in m.group(2)[1:].split("/"))[::-1]
        if len(coords) != len(arr.grid) or any(c >= g for c, g in zip(coords, arr.grid,
                                                                      strict=True)):
            return None
        return arr, coords

    def chunk(self, arr: ArrayLayout, coords: tuple[int, ...]) -> tuple[bytes | None, bool]:
        """``(bytes, stored)`` of the chunk at ``coords`` (header order): ``bytes`` is
        ``None`` for an absent chunk (a sparse tile, or a re-encoded chunk whose every voxel
        is the fill value); ``stored`` says the bytes are the stored tile's, unchanged.
        Answers are kept in a small cache (``chunk_cache_bytes``): a chunk asked for again
        (a HEAD then a GET, a second viewer, the first view's own tiles) costs no read."""
        key = (arr.level, coords)
        found = self._cache.get(key)
        if found is None:
            found = self._answer(arr, coords)
            self._cache.put(key, found)
        return found

    def _answer(self, arr: ArrayLayout, coords: tuple[int, ...]) -> tuple[bytes | None, bool]:
        lv = self.vol.levels[arr.level]
        if arr.passthrough:
            grid = lv.level.grid
            tile = tuple(coords[a] for a in grid.axes)
            if grid.stored_shape(tile) == arr.chunk:
                data = lv.read_tile_bytes(tile)
                if data is None:
                    return None, False
                if not self._check_gzip or bytes(data[:2]) == _GZIP_MAGIC:
                    return bytes(data), True
        region = tuple(slice(c * s, min((c + 1) * s, n))
                       for c, s, n in zip(coords, arr.chunk, arr.shape, strict=True))
        data = np.asarray(lv[region])
        if data.dtype != self.dtype:
            data = data.astype(self.dtype)
        if _all_fill(data, self.fill):
            return None, False
        if data.shape != arr.chunk:  # an edge chunk: Zarr chunks are whole
            full = np.full(arr.chunk, self.fill, dtype=self.dtype, order="F")
            full[tuple(slice(0, n) for n in data.shape)] = data
            data = full
        return bytes(self._chains[arr.level].encode(data)), False

    def middle_plane(self) -> np.ndarray:
        """The coarsest level's plane across its first two axes (header order) through the
        middle of the others, read through the chunks: the tiles fetched for it (from a
        remote file) stay in the chunk cache for the viewer's first requests."""
        arr = self.arrays[-1]
        n = min(2, len(arr.shape))
        mid = [s // 2 for s in arr.shape[n:]]
        out = np.full(arr.shape[:n], self.fill, dtype=self.dtype)
        chain = self._chains[arr.level]
        heads = list(itertools.product(*(range(g) for g in arr.grid[:n])))
        inner = tuple(m // c for m, c in zip(mid, arr.chunk[n:], strict=True))
        # the chunks fetched a few at a time (a remote file: requests in flight together)
        answers = ordered_map(lambda head: self.chunk(arr, (*head, *inner))[0], heads,
                              workers=max(1, min(8, len(heads))), name="jnrrd-web-plane")
        for head, data in zip(heads, answers, strict=True):
            if data is None:
                continue
            block = chain.decode(data)
            block = block[(slice(None),) * n + tuple(
                m % c for m, c in zip(mid, arr.chunk[n:], strict=True))]
            dst = tuple(slice(h * c, min((h + 1) * c, s))
                        for h, c, s in zip(head, arr.chunk[:n], arr.shape[:n], strict=True))
            out[dst] = block[tuple(slice(0, d.stop - d.start) for d in dst)]
        return out


    def centre_chunk(self, level: int = 0) -> np.ndarray | None:
        """The voxels of ``level``'s chunk at the volume's centre (decoded through the chunk
        cache; ``None`` when it is absent): a sample with the full resolution's variation,
        which an averaged coarse level smooths away."""
        arr = self.arrays[level]
        coords = tuple((s // 2) // c for s, c in zip(arr.shape, arr.chunk, strict=True))
        data = self.chunk(arr, coords)[0]
        if data is None:
            return None
        block = self._chains[level].decode(data)
        return block[tuple(slice(0, min(c, s - k * c)) for c, s, k in
                           zip(arr.chunk, arr.shape, coords, strict=True))]


class _Cache:
    """A byte-bounded LRU of chunk answers, safe from many threads."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max(0, int(max_bytes))
        self._items: OrderedDict[Any, tuple[bytes | None, bool]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Any) -> tuple[bytes | None, bool] | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: Any, value: tuple[bytes | None, bool]) -> None:
        size = len(value[0] or b"") + 64
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= len(old[0] or b"") + 64
            self._items[key] = value
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, dropped = self._items.popitem(last=False)
                self._bytes -= len(dropped[0] or b"") + 64


def _all_fill(data: np.ndarray, fill: Any) -> bool:
    if isinstance(fill, float) and math.isnan(fill):
        return bool(np.isnan(data).all())
    return bool((data == fill).all())


def _own_chain(vol: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
    """The file's tile chain and its Zarr form when every codec is in
    :data:`PASSTHROUGH_CODECS` and the stored type is the served one, else ``None``."""
    tiling = vol.tiling
    if tiling is None or vol.core.type_name != np.dtype(vol.dtype).name:
        return None
    chain = [dict(c) for c in tiling.codecs]
    if not chain or any(c.get("name") not in PASSTHROUGH_CODECS for c in chain):
        return None
    try:
        return chain, zarr_codecs(chain, len(vol.core.sizes))
    except UnsupportedError:
        return None


def _fill(value: Any, dtype: np.dtype) -> Any:
    """The fill value as a Python number of the served type (0 when the file has none)."""
    if value is None:
        value = 0
    return float(value) if dtype.kind == "f" else int(value)


def _ceil_div(shape: Sequence[int], chunk: Sequence[int]) -> tuple[int, ...]:
    return tuple(max(1, -(-n // c)) for n, c in zip(shape, chunk, strict=True))


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, allow_nan=False, separators=(",", ":")).encode()
