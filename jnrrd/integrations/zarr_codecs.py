"""The codec chain of a Zarr array read as hostile input (:mod:`jnrrd.integrations.zarr_read`).

A Zarr v3 codec list (or the ``filters``/``compressor`` of a Zarr v2 array, mapped to their
v3 equivalents) becomes a :class:`jnrrd.codecs.CodecChain` over the chunk in **header order**
(its shape reversed: the ``bytes`` codec writes axis 0 fastest, which is a C-order chunk of
the reversed shape, docs/format.md#zarr-axis-order), so every decoder is capped at the chunk's size
like a JNRRD tile's. Two Zarr codecs that are no JNRRD tile codecs are decoded here, never
registered for JNRRD files:

- ``sharding_indexed`` (:class:`ShardingDecode`): the shard's index (``index_codecs``) is
  decoded and checked first: every inner chunk must lie inside the shard; each inner chunk is
  decoded by its own capped chain;
- ``blosc`` (:class:`BloscDecode`, numcodecs' c-blosc): the 16-byte header's decompressed
  size must be the chunk's exact size and its compressed size must fit the bytes read, before
  c-blosc sees the data.

Anything else unknown is the registry's ``UnknownCodecError``.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..codecs import (
    DEFAULT_LIMIT,
    ArrayBytesCodec,
    BytesBytesCodec,
    Codec,
    CodecChain,
    TileSpec,
    get_codec,
)
from ..errors import (
    CodecError,
    DataError,
    FormatError,
    MissingDependencyError,
    UnsupportedError,
)

__all__ = ["MAX_INNER_CHUNKS", "BloscDecode", "ShardingDecode", "chunk_chain", "v2_codecs"]

#: an empty inner chunk in a shard index (Zarr v3 sharding: both fields 2**64 - 1)
_EMPTY = 2**64 - 1
_MAX_CODECS = 64  # a codec list longer than this is no real one
#: inner chunks of one shard, at most (its index is 16 bytes per inner chunk)
MAX_INNER_CHUNKS = 1 << 20


@dataclass(frozen=True, eq=False)
class BloscDecode(BytesBytesCodec):
    """Decode-only ``blosc``: the header's sizes checked before numcodecs decompresses."""

    name = "blosc"

    def encoded_size(self, size: int) -> int | None:
        return None

    def max_encoded_size(self, size: int) -> int:
        return size + 16 + size // 16 + 64  # c-blosc's worst case: header and a memcpy

    def encode(self, data: bytes | memoryview, *, tile_index: int = 0) -> bytes:
        raise CodecError("blosc: the OME-Zarr importer only decodes")

    def decode(self, data: bytes | memoryview, *, size: int | None = None,
               limit: int = DEFAULT_LIMIT) -> bytes:
        try:
            from numcodecs import blosc
        except ImportError as exc:
            raise MissingDependencyError("blosc-compressed Zarr chunks need numcodecs: pip "
                                         "install 'jnrrd[zarr]'") from exc
        raw = bytes(data)
        if len(raw) < 16:
            raise DataError(f"blosc: {len(raw)} bytes is shorter than the 16-byte header")
        version, _, _, typesize, nbytes, blocksize, cbytes = struct.unpack("<BBBBIII",
                                                                           raw[:16])
        want = size if size is not None else None
        if version not in (1, 2) or typesize == 0 or (nbytes and blocksize == 0):
            raise DataError(f"blosc: not a blosc 1 header (version {version}, type size "
                            f"{typesize}, block size {blocksize})")
        if (want is not None and nbytes != want) or nbytes > limit:
            raise DataError(f"blosc: the header says {nbytes} bytes decoded; expected "
                            + (f"exactly {want}" if want is not None else f"at most {limit}"))
        if not 16 <= cbytes <= len(raw):
            raise DataError(f"blosc: the header says {cbytes} compressed bytes; the chunk has "
                            f"{len(raw)}")
        try:
            out = blosc.decompress(raw[:cbytes])
        except Exception as exc:  # c-blosc reports corrupt input as RuntimeError
            raise DataError(f"blosc: does not decode: {exc}") from None
        if len(out) != nbytes:
            raise DataError(f"blosc: decoded {len(out)} bytes; the header says {nbytes}")
        return out


@dataclass(frozen=True, eq=False)
class ShardingDecode(ArrayBytesCodec):
    """Decode-only ``sharding_indexed``: a shard (header order) from its inner chunks."""

    name = "sharding_indexed"
    inner_shape: tuple[int, ...] = ()  # header order
    inner: tuple[Any, ...] = ()  # the inner codecs (built)
    index: tuple[Any, ...] = ()  # the index codecs (built)
    at_end: bool = True
    source: str = ""
    _cache: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    def validate(self, spec: TileSpec) -> None:
        if len(spec.shape) != len(self.inner_shape) or any(
                s % c for s, c in zip(spec.shape, self.inner_shape, strict=True)):
            raise FormatError(f"{self.source}sharding_indexed: chunk_shape "
                              f"{list(self.inner_shape[::-1])} does not divide the shard "
                              f"shape {list(spec.shape[::-1])}")
        n = math.prod(s // c for s, c in zip(spec.shape, self.inner_shape, strict=True))
        if n > MAX_INNER_CHUNKS:
            raise UnsupportedError(f"{self.source}sharding_indexed: {n} inner chunks per "
                                   f"shard, over the importer's {MAX_INNER_CHUNKS}")

    def encoded_size(self, spec: TileSpec) -> int | None:
        return None

    def encode(self, array: np.ndarray, spec: TileSpec) -> bytes:
        raise CodecError("sharding_indexed: the OME-Zarr importer only decodes")

    def _chains(self, spec: TileSpec) -> tuple[CodecChain, CodecChain, tuple[int, ...]]:
        got = self._cache.get(spec.dtype)
        if got is None:
            grid = tuple(s // c for s, c in zip(spec.shape, self.inner_shape, strict=True))
            index = CodecChain(self.index, dtype=np.uint64, shape=(2, *grid))
            if index.encoded_size is None:
                raise FormatError(f"{self.source}sharding_indexed: index_codecs "
                                  f"{[c.name for c in self.index]} do not give a fixed size")
            inner = CodecChain(self.inner, dtype=spec.dtype, shape=self.inner_shape)
            got = self._cache[spec.dtype] = (index, inner, grid)
        return got

    def decode(self, data: bytes | memoryview, spec: TileSpec) -> np.ndarray:
        index, inner, grid = self._chains(spec)
        view = memoryview(data).cast("B")
        size = index.encoded_size
        assert size is not None
        if len(view) < size:
            raise DataError(f"{self.source}sharding_indexed: the shard holds {len(view)} "
                            f"bytes, fewer than its {size}-byte index")
        raw = view[len(view) - size:] if self.at_end else view[:size]
        table = index.decode(raw)  # (2, *grid): offsets, sizes
        out = np.full(spec.shape, spec.fill_value if spec.fill_value is not None else 0,
                      dtype=spec.dtype, order="F")
        for coords in np.ndindex(*grid):
            off, n = int(table[(0, *coords)]), int(table[(1, *coords)])
            if off == _EMPTY and n == _EMPTY:
                continue
            if off > len(view) or n > len(view) - off:
                raise DataError(f"{self.source}sharding_indexed: inner chunk "
                                f"{list(coords[::-1])} at bytes {off}..{off + n} runs past "
                                f"the shard's {len(view)} bytes")
            region = tuple(slice(c * s, (c + 1) * s)
                           for c, s in zip(coords, self.inner_shape, strict=True))
            out[region] = inner.decode(view[off:off + n])
        return out


def v2_codecs(meta: Mapping[str, Any], ndim: int, itemsize: int, endian: str | None,
              where: str) -> list[Any]:
    """The Zarr v3 codec list equivalent to a v2 array's ``order``, ``filters`` and
    ``compressor``."""
    out: list[Any] = []
    order = meta.get("order", "C")
    if not isinstance(order, str) or order not in ("C", "F"):
        raise FormatError(f"{where}order: expected 'C' or 'F', found {order!r:.40}")
    if order == "F" and ndim > 1:
        out.append({"name": "transpose", "configuration": {"order": list(range(ndim))[::-1]}})
    out.append({"name": "bytes", "configuration": {"endian": endian or "little"}}
               if itemsize > 1 else {"name": "bytes"})
    for f in _list(meta.get("filters"), f"{where}filters"):
        out.append(_v2_codec(f, f"{where}filters", itemsize))
    comp = meta.get("compressor")
    if comp is not None:
        out.append(_v2_codec(comp, f"{where}compressor", itemsize))
    return out


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > _MAX_CODECS:
        raise FormatError(f"{where}: expected a list of codec objects, found {value!r:.60}")
    return value


def _v2_codec(c: Any, where: str, itemsize: int) -> Any:
    """A numcodecs v2 codec object as Zarr v3 codec JSON."""
    if not isinstance(c, dict) or not isinstance(c.get("id"), str):
        raise FormatError(f"{where}: expected a codec object with an 'id', found {c!r:.60}")
    cid, level = c["id"], c.get("level", c.get("clevel"))
    if not isinstance(level, (int, type(None))) or isinstance(level, bool):
        raise FormatError(f"{where}: {cid!r:.40}: level {level!r:.40} is not an integer")
    if cid == "blosc":
        return {"name": "blosc"}
    if cid == "shuffle":
        return {"name": "numcodecs.shuffle",
                "configuration": {"elementsize": c.get("elementsize", itemsize)}}
    names = {"zlib": "numcodecs.zlib", "gzip": "gzip", "zstd": "zstd", "bz2": "numcodecs.bz2",
             "lz4": "numcodecs.lz4"}
    if cid not in names:
        raise CodecError(f"{where}: the numcodecs codec {cid!r:.40} is not supported by the "
                         f"OME-Zarr importer (supported: blosc, shuffle, {', '.join(names)})")
    config = {} if level is None or cid == "lz4" else {"level": level}
    return {"name": names[cid], "configuration": config} if config else {"name": names[cid]}


def chunk_chain(codecs: Any, dtype: np.dtype, chunk: Sequence[int], fill: Any, where: str
                ) -> CodecChain:
    """The capped chain decoding one chunk of C-order shape ``chunk`` into a header-order
    array (shape reversed); ``fill`` fills the empty inner chunks of a shard."""
    built = _built(codecs, len(chunk), where)
    if any(isinstance(c, ShardingDecode) for c in built) and not isinstance(
            built[-1], ShardingDecode):
        # a shard's encoded size has no bound a bytes->bytes decoder after it could be capped
        # at (zarr-python never writes one)
        raise UnsupportedError(f"{where}codecs: bytes->bytes codecs after sharding_indexed "
                               "are not supported by the OME-Zarr importer")
    try:
        return CodecChain(built, dtype=dtype, shape=tuple(chunk)[::-1], fill_value=fill)
    except CodecError as exc:
        raise CodecError(f"{where}codecs: {exc}") from None


def _built(codecs: Any, ndim: int, where: str) -> list[Codec]:
    out: list[Codec] = []
    for c in _list(codecs, f"{where}codecs"):
        if not isinstance(c, (dict, str)):
            raise FormatError(f"{where}codecs: expected codec objects, found {c!r:.60}")
        name = c if isinstance(c, str) else c.get("name")
        config = {} if isinstance(c, str) else c.get("configuration") or {}
        if not isinstance(config, dict):
            raise FormatError(f"{where}codecs: {name!r:.40}: configuration is not an object")
        if name == "blosc":
            out.append(BloscDecode())
        elif name == "sharding_indexed":
            out.append(_sharding(config, ndim, where))
        elif name == "transpose":
            out.append(get_codec({"name": "transpose", "configuration": {
                "order": _header_transpose(config.get("order"), ndim, where)}}))
        else:
            out.append(get_codec(c))
    return out


def _header_transpose(order: Any, ndim: int, where: str) -> list[int]:
    """A Zarr ``transpose`` order (C axes) as the jnrrd order over the reversed axes:
    ``p[i] = n - 1 - o[n - 1 - i]`` (docs/format.md#zarr-axis-order)."""
    if (not isinstance(order, list) or len(order) != ndim
            or sorted(o for o in order if isinstance(o, int)) != list(range(ndim))):
        raise FormatError(f"{where}transpose: order {order!r:.60} is not a permutation of "
                          f"{ndim} axes")
    return [ndim - 1 - order[ndim - 1 - i] for i in range(ndim)]


def _sharding(config: Mapping[str, Any], ndim: int, where: str) -> ShardingDecode:
    inner = config.get("chunk_shape")
    if (not isinstance(inner, list) or len(inner) != ndim
            or not all(type(c) is int and c >= 1 for c in inner)):
        raise FormatError(f"{where}sharding_indexed: chunk_shape {inner!r:.60} is not {ndim} "
                          "sizes >= 1")
    location = config.get("index_location", "end")
    if not isinstance(location, str) or location not in ("start", "end"):
        raise FormatError(f"{where}sharding_indexed: index_location {location!r:.40}")
    index = config.get("index_codecs", [{"name": "bytes", "configuration": {
        "endian": "little"}}, {"name": "crc32c"}])
    if math.prod(inner) <= 0:
        raise FormatError(f"{where}sharding_indexed: empty inner chunks")
    codecs = _built(config.get("codecs"), ndim, where)
    if any(isinstance(c, ShardingDecode) for c in codecs):
        raise UnsupportedError(f"{where}sharding_indexed: shards inside shards are not "
                               "supported by the OME-Zarr importer")
    return ShardingDecode(inner_shape=tuple(inner)[::-1], inner=tuple(codecs),
                          index=tuple(_built(index, ndim + 1, where)),
                          at_end=location == "end", source=where)
