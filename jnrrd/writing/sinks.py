"""Where a tiled write's encoded tiles go.

Internal files (:class:`DirectSink`): level-0 tiles straight into the output after reserved
header space (:func:`~jnrrd.writing.layout.header_space`), coarser levels spooled and appended,
the header written last with the offsets of digest 2.7 (:mod:`jnrrd.writing.layout`). External
datasets (:class:`ExternalSink`): one file per tile in a fresh directory (CONVENTIONS §1.2).
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

import numpy as np

from .._threads import OrderedQueue, start_daemon
from ..storage.atomic import durable
from ..storage.names import stem, tmp_marker
from ..tiling.levels import Level, raw_stored_sizes
from ..tiling.locate import expand_pattern
from .layout import TilePlan, header_space, internal_layout

__all__ = ["DirectSink", "ExternalSink", "Tables", "copy_range", "pwrite_all"]


class Tables:
    """Sizes and metadata per stored tile (what :func:`~jnrrd.writing.layout.fixed_point`
    reads)."""

    def __init__(self, sizes: list[int | None], meta: list[dict[str, Any]]) -> None:
        self.sizes, self.meta = sizes, meta
        #: where rows are stored in the background (set by the writer); None: in the caller
        self.later: OrderedQueue | None = None
        #: fsync before the replace; read here because puts may run on another thread
        self.durable = durable()

    def record(self, level: Level, coords: tuple[int, ...], data: Any,
               meta: dict[str, Any]) -> bool:
        """Note a tile's size and metadata; False for a sparse tile (nothing to store)."""
        g = level.first + level.grid.index(coords)
        self.meta[g] = meta
        if data is None:
            return False
        self.sizes[g] = len(data)
        return True

    def tile_offsets(self, level: Level) -> np.ndarray | None:
        """File offsets of ``level``'s tiles when known before they are encoded (then tiles
        are written in place by :func:`pwrite_all` on :attr:`fd` and noted with
        :meth:`written`); None: tiles go through :meth:`put`, in order."""
        return None

    def written(self, level: Level, coords: tuple[int, ...], nbytes: int,
                meta: dict[str, Any]) -> None:
        """Note a tile of ``nbytes`` written in place at its :meth:`tile_offsets` offset."""
        raise AssertionError("this sink has no positional tiles")


def pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    """Write all of ``data`` at ``offset`` of ``fd`` (positional, thread-safe)."""
    done = 0
    while done < len(data):
        done += os.pwrite(fd, data[done:], offset + done)


class ExternalSink(Tables):
    """External storage: one file per tile in a fresh directory beside the header."""

    def __init__(self, plan: TilePlan, target: str, token: str) -> None:
        super().__init__([None] * plan.nstored, [{} for _ in range(plan.nstored)])
        self.plan = plan
        self.target = target
        self.dir_name = f"{stem(target)}.{token}.tiles"
        self.dir = os.path.join(os.path.dirname(os.path.abspath(target)), self.dir_name)
        os.makedirs(self.dir)

    def put(self, level: Level, coords: tuple[int, ...], data: Any,
            meta: dict[str, Any]) -> None:
        """Store one encoded tile (``None``: sparse)."""
        if not self.record(level, coords, data, meta):
            return
        rel = expand_pattern(self.plan.pattern or "", coords, level.index,
                             level.grid.index(coords))
        path = os.path.join(self.dir, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)

    def fsync_all(self) -> None:
        if not self.durable:
            return
        for root, _, files in os.walk(self.dir):
            for name in files:
                fd = os.open(os.path.join(root, name), os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)

    def close(self, *, failed: bool) -> None:
        if failed:
            shutil.rmtree(self.dir, ignore_errors=True)


def _load_sync_file_range() -> Any:
    """Linux ``sync_file_range(2)`` through ctypes, or None where it is not available."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        fn = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_SYNC_FILE_RANGE = _load_sync_file_range()
_SYNC_FILE_RANGE_WRITE = 2
#: start writing level-0 data back to disk every this many bytes, while encoding goes on
_SYNC_EVERY = (16 if _SYNC_FILE_RANGE is not None else 64) << 20


class _Flusher:
    """Overlaps the disk write-back the final ``fsync`` needs with the encoding still to do.

    ``kick`` starts writing back what was written so far: on Linux with
    ``sync_file_range(SYNC_FILE_RANGE_WRITE)``, which returns at once; elsewhere with an
    ``fdatasync`` in a background thread (at most one at a time; a kick while one runs is
    dropped). The closing ``fsync`` then finds little left to flush. Correctness never depends
    on it: ``finish`` still fsyncs.
    """

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None

    def kick(self, f: IO[bytes]) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        f.flush()
        fd = f.fileno()
        if _SYNC_FILE_RANGE is not None:
            _SYNC_FILE_RANGE(fd, 0, 0, _SYNC_FILE_RANGE_WRITE)  # best effort, never waits
            return

        def run() -> None:
            try:
                os.fdatasync(fd)
            except (OSError, ValueError):  # best effort: the final fsync reports real errors
                pass

        self._thread = start_daemon(run, name="jnrrd-flush")

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None


class DirectSink(Tables):
    """Internal storage without a second copy of level 0.

    Level-0 tiles go straight into the output file after space reserved for the header;
    coarser levels (an eighth of the data, or less) are spooled and appended; the header is
    written into its space last. When every tile size is known in advance (raw tiles, no
    statistics) the reservation is the exact fixed point of digest 2.7, so tiles follow the
    header without a gap. Otherwise the space is an upper bound and the gap is zero-filled
    (digest 2.7 allows a gap; it is never read). Should a tile ever outgrow the bound, the
    file is rewritten with the exact layout.
    """

    def __init__(self, plan: TilePlan, target: str, token: str, build: Callable[..., bytes],
                 itemsize: int, exact: bool) -> None:
        super().__init__([None] * plan.nstored, [{} for _ in range(plan.nstored)])
        self.plan, self.build = plan, build
        self.tmp = f"{tmp_marker(target)}{token}"
        self._spools: dict[int, IO[bytes]] = {}
        self._paths = [self.tmp]
        self.f: IO[bytes] = open(self.tmp, "w+b")
        for lv in plan.levels[1:]:
            if lv.stored:
                path = f"{self.tmp}.level{lv.index}"
                self._paths.append(path)
                self._spools[lv.index] = open(path, "w+b")
        self.start = header_space(plan, build, itemsize, exact)
        self.f.seek(self.start)
        self.fd = self.f.fileno()
        self._unsynced = 0
        self._flusher = _Flusher()
        self._at: np.ndarray | None = None
        if exact:
            # exact layout: every stored tile is contiguous from start, in global order
            sizes = raw_stored_sizes(plan.levels, itemsize)
            self._at = self.start + np.concatenate([[0], np.cumsum(sizes)[:-1]])

    def tile_offsets(self, level: Level) -> np.ndarray | None:
        if self._at is None or not level.stored:
            return None
        return self._at[level.first:level.first + level.grid.ntiles]

    def written(self, level: Level, coords: tuple[int, ...], nbytes: int,
                meta: dict[str, Any]) -> None:
        g = level.first + level.grid.index(coords)
        self.meta[g] = meta
        self.sizes[g] = nbytes
        self._unsynced += nbytes
        if self._unsynced >= _SYNC_EVERY and self.durable:
            self._unsynced = 0
            self._flusher.kick(self.f)

    def put(self, level: Level, coords: tuple[int, ...], data: Any,
            meta: dict[str, Any]) -> None:
        """Store one encoded tile (``None``: sparse). Calls arrive in linear order per level."""
        if not self.record(level, coords, data, meta):
            return
        if level.index:
            self._spools[level.index].write(data)
            return
        self.f.write(data)
        self._unsynced += len(data)
        if self._unsynced >= _SYNC_EVERY and self.durable:
            self._unsynced = 0
            self._flusher.kick(self.f)

    def fsync_all(self) -> None:
        """Everything is flushed in :meth:`finish`."""

    def finish(self, quality: list[Any] | None) -> str:
        """Append the spooled levels, write the header; returns the finished temporary file."""
        f = self.f
        pos = f.seek(0, os.SEEK_END)
        pos = max(pos, self.start)
        for lv in self.plan.levels[1:]:
            if lv.stored:
                spool = self._spools[lv.index]
                spool.flush()
                size = spool.seek(0, os.SEEK_END)
                f.seek(pos)
                copy_range(spool, f, size)
                pos += size
        header, offsets, fits = internal_layout(self.plan, self, self.build, quality,
                                                self.start)
        if not fits:
            f.flush()
            return self._rewrite(header, offsets)
        f.seek(0)
        f.write(header)
        f.write(b"\0" * (self.start - len(header)))
        f.flush()
        self._flusher.join()
        if self.durable:
            os.fsync(f.fileno())
        return self.tmp

    def _rewrite(self, header: bytes, offsets: list[int]) -> str:
        """A tile outgrew the reserved header bound: lay the file out again, exactly."""
        fresh = self.tmp + ".exact"
        self._paths.append(fresh)
        first = next((o for o in offsets if o >= 0), len(header))
        with open(fresh, "wb") as out, open(self.tmp, "rb") as tail:
            out.write(header)
            out.write(b"\0" * (first - len(header)))
            tail.seek(self.start)
            shutil.copyfileobj(tail, out, 8 << 20)
            out.flush()
            if self.durable:
                os.fsync(out.fileno())
        self._paths.remove(fresh)
        return fresh

    def close(self, *, failed: bool, keep: str | None = None) -> None:
        self._flusher.join()
        self.f.close()
        for f in self._spools.values():
            f.close()
        for p in self._paths:
            if p != keep:
                try:
                    os.unlink(p)
                except OSError:
                    pass


def copy_range(src: IO[bytes], dst: IO[bytes], size: int) -> None:
    """Append the first ``size`` bytes of ``src`` at ``dst``'s position (``copy_file_range``
    where the kernel has it)."""
    src.seek(0)
    dst.flush()
    if hasattr(os, "copy_file_range"):
        try:
            done = 0
            out_pos = dst.tell()
            while done < size:
                n = os.copy_file_range(src.fileno(), dst.fileno(), size - done,
                                       done, out_pos + done)
                if n == 0:
                    break
                done += n
            if done == size:
                dst.seek(out_pos + size)
                return
            src.seek(done)
            dst.seek(out_pos + done)
            size -= done
        except OSError:
            src.seek(0)
    shutil.copyfileobj(src, dst, 8 << 20)
