"""Deep checks: read and decode every stored tile (docs/cli.md#validate ``validate --deep``).

Each tile's stored bytes are located exactly as the reader would (offset and size tables,
or the external file), their prefixed checksum is verified
(docs/format.md#tile-statistics-and-checksums), and they are decoded through the tile's codec chain
to the exact stored extent. A bad tile is reported with its global index, level, grid coordinates
and the reason; the other tiles are still checked. Tiles are decoded on a small thread pool (the
compressors release the GIL).
"""

from __future__ import annotations

import functools
import itertools
import math
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import IO, Any

import numpy as np

from .._platform import pread
from .._threads import ordered_map, thread_count
from ..engine.sources import ExternalSource
from ..engine.tiles import TileCodec, checksum_of
from ..errors import DataError, JnrrdError, where
from ..header.fields import CoreFields
from ..policy import Policy
from ..storage import LocalStore
from ..tiling.levels import Level
from ..tiling.locate import derived_offsets, raw_tile_sizes, sizes_to_next
from ..tiling.spec import Tiling
from .report import Report, pointer
from .tiling_base import describe_tile
from .tiling_files import MAX_BAD_TILES

__all__ = ["Progress", "check_tiles"]

Progress = Callable[[int, int], None]
#: tiles decoded per task: enough to amortise the pool, small enough for steady progress
_BATCH = 16
#: tasks handed to the pool at once
_POOL_BATCHES = 64


class _Tiles:
    """Stored bytes and decoding of every stored tile of one file."""

    def __init__(self, tiling: Tiling, core: CoreFields, f: IO[bytes] | None,
                 file_size: int | None, store: Any, policy: Policy,
                 data_start: int | None = None) -> None:
        from ..dtypes import storage_dtype, user_dtype

        self.t = tiling
        self.f = f
        # a stream without a descriptor is read by seek + read: one worker at a time
        self._seek_lock = threading.Lock()
        self.file_size = file_size
        self.policy = policy
        self.type_name = core.type_name
        self.chain_dtype = user_dtype(core.type_name, core.block_size, "uint16")
        self.stored_dtype = storage_dtype(core.type_name, core.endian, core.block_size)
        # the chain per tile shape, the raw test and the checksums, as the reader has them
        self.codec = TileCodec(tiling.codecs, core.type_name, self.chain_dtype,
                               tiling.padding_value, metadata=tiling.metadata)
        self.raw = self.codec.raw
        self.ext = None
        if tiling.storage == "external":
            if store is not None and not getattr(store, "remote", False):
                store = LocalStore(store.root, policy)
            self.ext = ExternalSource(store, pattern=tiling.pattern, files=tiling.files,
                                      base_dir=tiling.base_dir, prefix=tiling.prefix)
        # a remote object's byte ranges: a batch's tiles fetched at once (merged, concurrent)
        # a remote object's byte ranges: through its store (requests merged, concurrent)
        held: Any = f  # a remote object's stream carries its store and key
        self.held = (held.store, held.key) if tiling.storage == "internal" and getattr(
            held, "store", None) is not None else None
        self.remote = self.held is not None or bool(self.ext is not None and self.ext.remote)
        self.offsets: np.ndarray | None = None
        self.sizes: np.ndarray | None = None
        if tiling.storage == "internal":
            self.offsets = tiling.offset_table
            if self.offsets is None:  # the reader's own rule (contiguous raw tiles only)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # the header checks reported it
                    self.offsets = derived_offsets(tiling, self.stored_dtype.itemsize,
                                                   data_start, None, raw=self.raw)
            self.sizes = self._sizes(self.offsets)

    def _sizes(self, offsets: np.ndarray) -> np.ndarray:
        t = self.t
        if t.size_table is not None:
            return t.size_table
        present = offsets >= 0
        if self.raw:
            return raw_tile_sizes(t, self.stored_dtype.itemsize, offsets)
        # The readable range runs to the next larger distinct offset or EOF
        # (docs/format.md#size-table).
        end = self.file_size if self.file_size is not None else int(offsets.max()) + 1
        return sizes_to_next(offsets, present, end)

    def stored(self, level: Level, coords: tuple[int, ...], index: int
               ) -> tuple[bytes | memoryview | None, str | None]:
        """(bytes or None when sparse, a reason when they cannot be read in full)."""
        if self.ext is not None:
            data = self.ext.read(level, coords, self.policy.max_tile_bytes + (1 << 20))
            return data, None
        if self.offsets is None or self.sizes is None or self.f is None:
            raise DataError("internal tiles need the file they are stored in")
        off, size = int(self.offsets[index]), int(self.sizes[index])
        if off < 0:
            return None, None
        # Python integers: an offset or size near 2**63 never reaches pread (docs/security.md#caps).
        end = self.file_size if self.file_size is not None else off + size
        have = max(0, min(size, end - off))
        data = pread(self.f.fileno(), have, off) if have and _has_fileno(self.f) else (
            self._read_at(off, have) if have else b"")
        if len(data) < size:
            return data, (f"truncated: {len(data)} of its {size} bytes are in the file "
                          f"(bytes {off}..{off + size}, file size {self.file_size})")
        return data, None

    def fetch(self, batch: list[tuple[Level, tuple[int, ...], int]]) -> list[Stored]:
        """A callable per tile of ``batch`` giving :meth:`stored`'s answer; a remote file's
        tiles are all requested now (merged and in flight together)."""
        if not self.remote:
            return [functools.partial(self.stored, lv, c, i) for lv, c, i in batch]
        if self.ext is not None:
            limit = self.policy.max_tile_bytes + (1 << 20)
            out: list[Stored] = []
            for lv, c, _ in batch:  # one level per call of the source's prefetch
                pending = self.ext.prefetch(lv, [c], limit)[0]
                out.append(functools.partial(_taken, self.ext, lv, c, pending))
            return out
        assert self.held is not None and self.offsets is not None and self.sizes is not None
        spans: list[tuple[int, int] | None] = []
        shorts: list[str | None] = []
        for _, _, index in batch:
            off, size = int(self.offsets[index]), int(self.sizes[index])
            if off < 0:
                spans.append(None)
                shorts.append(None)
                continue
            end = self.file_size if self.file_size is not None else off + size
            have = max(0, min(size, end - off))
            spans.append((off, off + have))
            shorts.append(None if have >= size else (
                f"truncated: {have} of its {size} bytes are in the file (bytes {off}.."
                f"{off + size}, file size {self.file_size})"))
        store, key = self.held
        fetched = iter(store.get_ranges(key, [s for s in spans if s is not None], wait=False))
        return [functools.partial(_sliced, None if s is None else next(fetched), short)
                for s, short in zip(spans, shorts, strict=True)]

    def _read_at(self, off: int, size: int) -> bytes:
        assert self.f is not None
        with self._seek_lock:
            self.f.seek(off)
            return self.f.read(size)


Stored = Callable[[], "tuple[bytes | memoryview | None, str | None]"]


def _taken(ext: ExternalSource, level: Level, coords: tuple[int, ...], pending: Any
           ) -> tuple[bytes | memoryview | None, str | None]:
    return ext.take(level, coords, pending), None


def _sliced(pending: Any, short: str | None) -> tuple[memoryview | None, str | None]:
    if pending is None:
        return None, None
    return pending.result(), short


def _has_fileno(f: Any) -> bool:
    try:
        f.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    return True




def _check_one(tiles: _Tiles, level: Level, coords: tuple[int, ...], index: int,
               stored: Stored) -> list[tuple[str, str, Any, Any]]:
    """Problems of one tile as ``(field, reason, found, expected)``."""
    t = tiles.t
    table_field = (pointer(t.field("offset_table"), index) if t.storage == "internal"
                   else t.field("files") if t.pattern is None else t.field("pattern"))
    out: list[tuple[str, str, Any, Any]] = []
    try:
        data, short = stored()
    except JnrrdError as exc:
        return [(table_field, f"cannot be read: {_plain(exc)}", None, "readable tile bytes")]
    if data is None:
        return out  # sparse: recorded as not stored
    if short is not None:
        out.append((table_field, short, len(data), int(tiles.sizes[index])))  # type: ignore
    expected = tiles.codec.checksum(index)
    if expected is not None and short is None:
        algo, value = expected
        found = checksum_of(algo, data)
        if found != value:
            out.append((pointer(t.field("metadata"), index, "checksum"),
                        f"{algo} checksum of the stored bytes is {found:08x}, the header "
                        f"records {value:08x}", f"{algo}:{found:08x}", f"{algo}:{value:08x}"))
    shape = level.grid.stored_shape(coords)
    if tiles.raw:
        need = math.prod(shape) * tiles.stored_dtype.itemsize
        if len(data) < need and short is None:
            out.append((table_field, f"holds {len(data)} bytes, its {list(shape)} voxels need "
                        f"{need}", len(data), need))
        return out
    if short is not None:
        return out  # decoding a cut stream only restates the truncation
    try:
        arr = tiles.codec.chain(shape).decode(data)
    except (JnrrdError, ValueError, OverflowError, MemoryError) as exc:
        out.append((table_field, f"does not decode: {_plain(exc)}", None,
                    f"{list(shape)} voxels of {t.codecs[-1].get('name')}-coded data"))
        return out
    if tuple(arr.shape) != tuple(shape):
        out.append((table_field, f"decodes to shape {list(arr.shape)}", list(arr.shape),
                    list(shape)))
    return out


def _plain(exc: BaseException) -> str:
    return str(exc).removeprefix(where(None))


def _all_tiles(levels: tuple[Level, ...]) -> Iterator[tuple[Level, tuple[int, ...], int]]:
    for lv in levels:
        if lv.stored:
            for local, coords in enumerate(lv.grid.all_coords()):
                yield lv, coords, lv.first + local


Batch = list[tuple[Level, tuple[int, ...], int]]
#: a remote file's tiles are requested a window at a time (the next one while this one
#: decodes): at most this many stored bytes, or _WINDOW_TILES tiles, per window
_WINDOW_BYTES = 64 << 20
_WINDOW_TILES = 1024


def _batches(work: Iterator[tuple[Level, tuple[int, ...], int]]) -> Iterator[Batch]:
    """``work`` in lists of :data:`_BATCH` tiles, made as they are taken (a 10^7-tile level
    is never listed whole)."""
    while True:
        batch = list(itertools.islice(work, _BATCH))
        if not batch:
            return
        yield batch


def _local_results(tiles: _Tiles, batches: Iterator[Batch], workers: int
                   ) -> Iterator[list[tuple[int, Any]]]:
    """:func:`_run` over a local file's batches on the pool, :data:`_POOL_BATCHES` batches at
    a time (so stopping early waits for those only)."""
    while True:
        window = list(itertools.islice(batches, _POOL_BATCHES))
        if not window:
            return
        yield from ordered_map(functools.partial(_run, tiles), window, workers=workers,
                               name="jnrrd-validate")


def _run(tiles: _Tiles, batch: Batch, stored: list[Stored] | None = None
         ) -> list[tuple[int, Any]]:
    if stored is None:
        stored = tiles.fetch(batch)
    return [(index, _check_one(tiles, lv, coords, index, got))
            for (lv, coords, index), got in zip(batch, stored, strict=True)]


def _windows(tiles: _Tiles, batches: Iterator[Batch]) -> Iterator[list[Batch]]:
    window: list[Batch] = []
    nbytes = ntiles = 0
    for batch in batches:
        if tiles.sizes is not None:
            nbytes += sum(max(0, int(tiles.sizes[i])) for _, _, i in batch)
        ntiles += len(batch)
        window.append(batch)
        if nbytes >= _WINDOW_BYTES or ntiles >= _WINDOW_TILES:
            yield window
            window, nbytes, ntiles = [], 0, 0
    if window:
        yield window


def _remote_results(tiles: _Tiles, batches: Iterator[Batch], workers: int
                    ) -> Iterator[list[tuple[int, Any]]]:
    """:func:`_run` over a remote file's batches: each window's byte ranges merged into few
    large requests (:meth:`_Tiles.fetch` of the whole window), the next window in flight
    while this one decodes; memory holds two windows."""

    def fetched(window: list[Batch] | None) -> list[tuple[Batch, list[Stored]]] | None:
        if window is None:
            return None
        flat = tiles.fetch([t for b in window for t in b])
        out, k = [], 0
        for b in window:
            out.append((b, flat[k:k + len(b)]))
            k += len(b)
        return out

    it = _windows(tiles, batches)
    current = fetched(next(it, None))
    while current is not None:
        ahead = fetched(next(it, None))
        yield from ordered_map(lambda item: _run(tiles, *item), current, workers=workers,
                               name="jnrrd-validate")
        current = ahead


def check_tiles(tiling: Tiling, core: CoreFields, f: IO[bytes] | None, file_size: int | None,
                store: Any, policy: Policy, report: Report,
                progress: Progress | None = None, workers: int | None = None,
                data_start: int | None = None) -> None:
    """Decode every stored tile; report each bad one with its index and the reason.

    ``store`` holds the header's directory (external tiles), local or remote."""
    try:
        tiles = _Tiles(tiling, core, f, file_size, store, policy, data_start)
    except JnrrdError as exc:
        report.error("", f"tiles not checked: {_plain(exc)}")
        return
    total = tiling.nstored
    batches = _batches(_all_tiles(tiling.levels))
    n = max(1, workers or min(4, thread_count(policy.io.threads)))
    done = bad = 0
    if progress is not None:
        progress(0, total)
    # in order, so the report is deterministic
    results = (_remote_results(tiles, batches, n) if tiles.remote
               else _local_results(tiles, batches, n))
    try:
        for result in results:
            for index, problems in result:
                bad += bool(problems)
                for field, reason, found, expected in problems:
                    report.error(field, f"{describe_tile(tiling.levels, index)}: {reason}",
                                 found, expected)
            done += len(result)
            if progress is not None:
                progress(done, total)
            if bad >= MAX_BAD_TILES and done < total:
                # a header of a few hundred bytes may claim 10^7 tiles that are not there:
                # the check costs what the file holds, not what its header claims
                report.note("", f"stopped after {bad} bad tiles: {total - done} of the {total} "
                            "stored tiles were not checked", total - done, None)
                break
    finally:
        close = getattr(results, "close", None)
        if close is not None:
            close()  # waits only for the tiles already handed to the pool
        if tiles.ext is not None:
            tiles.ext.close()
