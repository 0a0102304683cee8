"""One tile codec engine: stored tile bytes ⇄ tile arrays, for reading, writing and validation.

:class:`TileCodec` holds what the three share: the codec chain built once per stored tile shape,
the raw test, the ``[bytes, compressor]`` shorthand chains and the tile checksums
(docs/format.md#tile-statistics-and-checksums). :class:`TileDecoder` reads and decodes stored tiles
for a ``Volume`` (memory-mapped raw tiles without a copy, one bounded decompress for the shorthand
chains, prefix decoding into a per-thread scratch buffer for ``zstd``/``lz4``); :class:`TileEncoder`
encodes tiles for the writers (compressing the tile's memory in place when it already is the
stored byte order); deep validation (:mod:`jnrrd.validation.deep`) uses the chain cache and the
checksums of a :class:`TileCodec`.
"""

from __future__ import annotations

import math
import sys
import threading
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..codecs import CodecChain, is_raw_chain
from ..codecs.compress import NAMES as STREAM_NAMES
from ..codecs.compress import (
    PREFIX_NAMES,
    compress,
    decompress,
    decompress_prefix,
    zstd_into,
)
from ..dtypes import from_user, storage_dtype, to_user, user_dtype
from ..errors import DataError, where
from ..tiling.levels import Level
from ..tiling.padding import chain_fill
from .sources import Arrivals

__all__ = ["TileCodec", "TileDecoder", "TileEncoder", "checksum_of", "parse_checksum",
           "shorthand_compressor"]

#: largest decoded tile kept in a thread's scratch buffer between reads
_SCRATCH_BYTES = 16 << 20
_SCRATCH = threading.local()


def _scratch(n: int) -> np.ndarray:
    """``n`` bytes of this thread's reusable decode buffer (fresh memory above the cap):
    decoding every tile into new memory costs page faults and unmaps."""
    if n > _SCRATCH_BYTES:
        return np.empty(n, np.uint8)
    buf = getattr(_SCRATCH, "buf", None)
    if buf is None or buf.size < n:
        buf = _SCRATCH.buf = np.empty(n, np.uint8)
    return buf[:n]


def shorthand_compressor(codecs: Sequence[Any]) -> str | None:
    """The compressor of a ``[bytes, compressor]`` chain whose compressor is one of the
    stream primitives of :mod:`jnrrd.codecs.compress` (the ``tile:compression`` shorthand
    chains), else None: such tiles are (de)compressed in one call, without the chain."""
    if (len(codecs) == 2 and isinstance(codecs[0], dict) and codecs[0].get("name") == "bytes"
            and isinstance(codecs[1], dict) and codecs[1].get("name") in STREAM_NAMES):
        return codecs[1]["name"]
    return None


def parse_checksum(entry: Any) -> tuple[str, int] | None:
    """``(algorithm, value)`` of a ``tile:metadata`` entry's prefixed checksum
    (``"crc32:<8 hex>"`` or ``"crc32c:<8 hex>"``), else None: bare values (the spec's
    example) are kept, never verified (docs/format.md#tile-statistics-and-checksums)."""
    c = entry.get("checksum") if isinstance(entry, dict) else None
    if not isinstance(c, str) or ":" not in c:
        return None
    algo, _, hexv = c.partition(":")
    if algo not in ("crc32", "crc32c") or len(hexv) != 8:
        return None
    try:
        return algo, int(hexv, 16)
    except ValueError:
        return None


def checksum_of(algo: str, data: Any) -> int:
    """The ``crc32`` (zlib CRC-32) or ``crc32c`` checksum of stored tile bytes."""
    if algo == "crc32":
        return zlib.crc32(data) & 0xFFFFFFFF
    import crc32c  # on first use (its import costs a command's start ~20 ms)

    return crc32c.crc32c(data) & 0xFFFFFFFF


class TileCodec:
    """The codec chain of one file's tiles, built once per stored tile shape (thread-safe),
    and the facts every tile path needs: raw or not, shorthand compressor, checksums."""

    def __init__(self, codecs: Sequence[Any], type_name: str, chain_dtype: np.dtype,
                 padding_value: Any, decision: Any = None,
                 metadata: Sequence[Any] | None = None) -> None:
        self.codecs = list(codecs)
        self.type_name = type_name
        #: the element type the codecs see (bfloat16 as its 16-bit words)
        self.chain_dtype = chain_dtype
        self.fill = padding_value
        self.decision = decision
        self._chains: dict[tuple[int, ...], Any] = {}
        self._lock = threading.Lock()
        #: the chain is ``[bytes]`` alone: every stored size follows from the geometry
        self.raw = is_raw_chain(self.codecs)
        #: ``[bytes, compressor]``: one (de)compress call per tile, no chain
        self.simple = shorthand_compressor(self.codecs)
        self.checksums = _checksums(metadata)

    def chain(self, shape: tuple[int, ...]) -> Any:
        """The :class:`~jnrrd.codecs.CodecChain` for stored tiles of ``shape``."""
        c = self._chains.get(shape)
        if c is None:
            with self._lock:
                c = self._chains.get(shape)
                if c is None:
                    c = CodecChain.from_json(
                        list(self.codecs), dtype=self.chain_dtype, shape=shape,
                        fill_value=chain_fill(self.fill, self.type_name),
                        decision=self.decision,
                    )
                    self._chains[shape] = c
        return c

    def checksum(self, index: int) -> tuple[str, int] | None:
        """The prefixed checksum recorded for global tile ``index``, or None."""
        if self.checksums is None or index >= len(self.checksums):
            return None
        return self.checksums[index]


def _checksums(metadata: Sequence[Any] | None) -> list[tuple[str, int] | None] | None:
    if metadata is None:
        return None
    out = [parse_checksum(m) for m in metadata]
    return out if any(c is not None for c in out) else None


class TileDecoder(TileCodec):
    """Reads and decodes the stored tiles of one file (a ``Volume``'s tiles)."""

    def __init__(self, tiling: Any, core: Any, source: Any, policy: Any, name: Any) -> None:
        # Codecs see the stored element type: bfloat16 as its 16-bit words.
        super().__init__(tiling.codecs, core.type_name,
                         user_dtype(core.type_name, core.block_size, "uint16"),
                         tiling.padding_value, metadata=tiling.metadata)
        self.tiling = tiling
        self.source = source
        self.name = name
        self.policy = policy
        self.bf16 = policy.bfloat16
        self.dtype = user_dtype(core.type_name, core.block_size, policy.bfloat16)
        self.stored_dtype = storage_dtype(core.type_name, core.endian or "little",
                                          core.block_size)
        #: whether the tiles come over the network (fetch a batch at once: :meth:`prefetch`)
        self.remote = bool(getattr(source, "remote", False))
        self._limits: dict[int, tuple[Any, int]] = {}
        #: the file's prefix of error messages (built once: a read names it per tile)
        self.where = where(name)

    def stored_bytes(self, level: Level, coords: tuple[int, ...],
                     fetched: Fetched | None = None) -> Any:
        """The stored bytes of a tile (None when sparse), from ``fetched`` when it has them."""
        if fetched is not None and coords in fetched.pending:
            return fetched.take(coords)
        return self.source.read(level, coords, self.tile_limit(level))

    def checked_bytes(self, level: Level, coords: tuple[int, ...]) -> Any:
        """The stored bytes of a tile (None when sparse), checksum verified."""
        data = self.stored_bytes(level, coords)
        if data is not None:
            self._verify(level.first + level.grid.index(coords), data)
        return data

    def tile_limit(self, level: Level) -> int:
        """The most bytes a tile file of ``level`` is read (and a remote one requested) for:
        a raw or shorthand-compressed tile is never longer than its decoded size plus a
        compressor's worst-case overhead (under 1/64 + 64 KiB for gzip, zstd, lz4, bzip2),
        so memory follows the tile, not the cap; other chains up to ``max_tile_bytes``."""
        grid = level.grid
        known = self._limits.get(level.index)
        if known is not None and known[0] is grid:
            return known[1]  # (asked once per tile read)
        limit = self.policy.max_tile_bytes + (1 << 20)
        if self.raw or self.simple:
            n = math.prod(grid.max_stored_shape()) * self.stored_dtype.itemsize
            limit = min(limit, n + n // 64 + (64 << 10))
        self._limits[level.index] = (grid, limit)
        return limit

    def prefetch(self, level: Level, coords: list[tuple[int, ...]]) -> Fetched:
        """Start fetching the stored bytes of the tiles ``coords`` of ``level`` at once."""
        return Fetched(self, level, coords)

    def decode(self, level: Level, coords: tuple[int, ...], planes: int | None = None,
               scratch: bool = False, fetched: Fetched | None = None) -> np.ndarray | None:
        """The stored tile (stored extent, user dtype, F order), or None when sparse.

        ``planes``: only the first ``planes`` indices along the last (slowest) axis are
        needed; a ``zstd``/``lz4`` tile then stops decoding there (the result is that prefix).
        ``scratch``: the result may live in this thread's scratch buffer, valid until its next
        ``scratch`` decode (for callers that copy it out at once).
        """
        shape = level.grid.stored_shape(coords)
        data = self.stored_bytes(level, coords, fetched)
        if data is None:
            return None
        index = level.first + level.grid.index(coords)
        self._verify(index, data)
        if planes is not None and 0 < planes < shape[-1] and self.simple in PREFIX_NAMES:
            shape = (*shape[:-1], planes)
            need = math.prod(shape) * self.stored_dtype.itemsize
            buf = _scratch(need) if scratch and self.simple == "zstd" else None
            data = decompress_prefix(self.simple, data, need, out=buf,
                                     what=f"{self.where}tile {index}: ")
            arr = np.frombuffer(data, self.stored_dtype).reshape(shape, order="F")
        elif self.raw or self.simple:
            count = math.prod(shape)
            need = count * self.stored_dtype.itemsize
            if self.simple == "zstd" and scratch:  # no fresh memory (and faults) per tile
                buf = _scratch(need)
                zstd_into(data, buf.data, exact=True,
                          what=f"{self.where}tile {index}: ")
                data = buf
            elif self.simple:
                gz = self.simple == "gzip"
                data = decompress(self.simple, data, need,
                                  allow_zlib=self.tiling.gzip_lenient and gz,
                                  what=f"{self.where}tile {index}: ",
                                  out=_scratch(need) if scratch and gz else None)
            elif len(data) < need:
                raise DataError(f"{where(self.name)}tile {index}: {len(data)} bytes stored, "
                                f"expected {need}")
            arr = np.frombuffer(data, self.stored_dtype, count).reshape(shape, order="F")
        else:
            try:
                arr = self.chain(shape).decode(data)
            except DataError as exc:
                raise DataError(f"{where(self.name)}tile {index}: {exc}") from None
        if self.type_name == "bfloat16" or not arr.dtype.isnative:
            arr = to_user(arr, self.type_name, self.bf16)
        return arr

    def _verify(self, index: int, data: Any) -> None:
        if self.checksums is None:
            return
        expected = self.checksums[index]
        if expected is None:
            return
        algo, value = expected
        found = checksum_of(algo, data)
        if found != value:
            raise DataError(
                f"{where(self.name)}tile {index}: {algo} checksum {found:08x} does not match "
                f"{self.tiling.prefix}:metadata[{index}].checksum {value:08x}"
            )


class Fetched:
    """The stored bytes of a batch of tiles of one level, requested together (a remote
    source: byte ranges merged, requests in flight while earlier tiles decode)."""

    def __init__(self, decoder: TileDecoder, level: Level, coords: list[tuple[int, ...]]
                 ) -> None:
        self.source, self.level = decoder.source, level
        started = self.source.prefetch(level, coords, decoder.tile_limit(level))
        self.pending = dict(zip(coords, started, strict=True))

    def as_they_arrive(self, coords: Sequence[tuple[int, ...]],
                       tasks: Sequence[Callable[[], None]]) -> list[Callable[[], None]]:
        """``tasks`` (one per tile of ``coords``) as interchangeable closures, each running
        the task of a tile whose bytes have arrived (:class:`~.sources.Arrivals`): run in any
        order and on any threads, they run every task once, in the order the bytes come."""
        arrivals = Arrivals([self.pending.get(c) for c in coords])

        def run() -> None:
            tasks[arrivals.next()]()
        return [run] * len(tasks)

    def take(self, coords: tuple[int, ...]) -> Any:
        """The bytes of the tile at ``coords`` (waits for them; ``None`` when sparse)."""
        return self.source.take(self.level, coords, self.pending[coords])


class TileEncoder(TileCodec):
    """Per-tile encoding for the writers: chain per stored shape, stats and checksums.

    ``plan`` is the writer's tile plan (its ``codecs``, ``type_name``, ``padding_value``,
    ``decision``, ``tile_stats`` and ``checksum``).
    """

    def __init__(self, plan: Any, chain_dtype: np.dtype) -> None:
        super().__init__(plan.codecs, plan.type_name, chain_dtype, plan.padding_value,
                         decision=plan.decision)
        self.plan = plan
        self._simple = _native_shorthand(self.codecs, chain_dtype, self.raw, self.simple)
        # raw tiles ([bytes] alone): every stored size follows from the geometry
        self.fixed_size = self.raw

    def encode(self, tile: np.ndarray, index: int) -> bytes | memoryview:
        """The stored bytes of one tile (global index ``index``)."""
        # Slabs and pyramids work on values; bfloat16 becomes its 16-bit words only here.
        if self.plan.type_name == "bfloat16":
            tile = from_user(tile, "bfloat16")
        if self._simple is not None and tile.dtype == self.chain_dtype:
            # [bytes] or [bytes, compressor] in native byte order: the F-ordered tile's memory
            # is already the stored byte order, so compress it in place (no chain, no copy).
            name, level = self._simple
            flat = np.asfortranarray(tile).T.data.cast("B")
            # raw: the byte view itself (it keeps the tile alive until it is written)
            return flat if name is None else compress(name, flat, level=level)
        return self.chain(tile.shape).encode(tile, tile_index=index)

    def raw_native(self, dtype: np.dtype) -> bool:
        """Tiles of ``dtype`` are stored as their F-ordered memory (raw, native order)."""
        return (self._simple == (None, None) and dtype == self.chain_dtype
                and self.plan.type_name != "bfloat16")

    def metadata(self, core: np.ndarray, data: bytes | memoryview | None) -> dict[str, Any]:
        """The ``tile:metadata`` entry of one tile (stats of its core, checksum of ``data``)."""
        meta: dict[str, Any] = {}
        if self.plan.tile_stats:
            lo, hi = _min_max(core)
            meta["min"], meta["max"] = lo, hi
        if data is None:  # a sparse tile stores nothing to check
            return meta
        if self.plan.checksum in ("crc32", "crc32c"):
            meta["checksum"] = f"{self.plan.checksum}:{checksum_of(self.plan.checksum, data):08x}"
        return meta


def _native_shorthand(codecs: list[Any], dtype: np.dtype, raw: bool, simple: str | None
                      ) -> tuple[str | None, int | None] | None:
    """``(compressor or None, level)`` when the chain is a shorthand chain this machine can
    encode without byte swapping; else None (the general chain runs)."""
    if not (raw or simple):
        return None
    endian = (codecs[0].get("configuration") or {}).get("endian", "little")
    if dtype.kind == "V" or (dtype.itemsize > 1 and endian != sys.byteorder):
        return None
    if raw:
        return None, None
    cfg = codecs[1].get("configuration") or {}
    if set(cfg) - {"level"}:
        return None
    return simple, cfg.get("level")


def _min_max(a: np.ndarray) -> tuple[Any, Any]:
    if a.size == 0:
        return None, None
    if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
        f = a.astype(np.float64)
        if np.isnan(f).all():
            return None, None
        return _json_num(np.nanmin(f)), _json_num(np.nanmax(f))
    if a.dtype.kind == "c":
        return None, None
    return int(a.min()), int(a.max())


def _json_num(v: float) -> float | None:
    return None if v != v else float(v)
