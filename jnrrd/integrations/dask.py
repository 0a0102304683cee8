"""Dask arrays in: ``Volume.to_dask`` (writing a Dask array is :mod:`.dask_write`).

docs/api.md#volumes (``to_dask(level=0)``). Only this module, :mod:`.dask_write` (and the xarray
backend) import dask, and only when called: importing ``jnrrd`` never imports dask.

Reading: every chunk is one tile's core region, read by a small picklable task that carries
the volume's re-opener (``Volume.reopen``, built by ``jnrrd.open``: path or URL with its
``storage_options``, index order, policy), a stamp of the file's state (inode, size, mtime;
for a URL the object's version token: ETag, generation, ... and size), the level and the
chunk's region — never the ``Volume`` — and opens the file itself through a per-process
cache, so it runs on ``dask.distributed`` workers in other processes. A remote object's
version is asked again by every task, alongside its read (one small request in flight with
the tile requests), so a replaced object is a ``DataError``, never a mix of old and new
bytes. This module never imports the opener.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import DataError, UnsupportedError, no_such_level, where
from ..storage import file_version, is_remote

__all__ = ["FileRef", "InProcess", "adopt", "chunk_sizes", "clear_cache", "core_chunks",
           "read_region", "volume_to_dask"]

# Untiled volumes have no tiles: they are cut into slabs along the slowest file axis.
_UNTILED_CHUNK_BYTES = 64 << 20
_OPEN_VOLUMES = 16


# =============================================================================================
# Reading
# =============================================================================================


@dataclass(frozen=True)
class FileRef:
    """What a worker needs to open a file itself: the volume's re-opener (``Volume.reopen``:
    path or URL, ``storage_options``, index order, policy; built by the opener) and a stamp
    of the file's state (a local file's inode, size and mtime; a remote object's version)."""

    reopen: Callable[[], Any]  # hashable and picklable, with a ``path``
    stamp: Any  # (st_ino, st_size, st_mtime_ns), or the URL's version token, at graph time

    @property
    def path(self) -> str:
        """The file's absolute path (or URL)."""
        return self.reopen.path  # type: ignore[attr-defined]

    @property
    def remote(self) -> bool:
        """Whether the file is a remote object (a URL)."""
        return is_remote(self.path)

    @classmethod
    def of(cls, vol: Any) -> FileRef | None:
        """The reference of an open ``Volume``, or ``None`` when it was not opened by path."""
        reopen = vol.reopen
        if reopen is None:
            return None
        if is_remote(reopen.path):
            return cls(reopen, reopen.version)
        return cls(reopen, file_version(reopen.path))

    @contextlib.contextmanager
    def borrow(self) -> Iterator[Any]:
        """The ``Volume`` for this reference (cached per process), checking the file's stamp
        (a remote object's version is asked while the caller reads, and checked after).

        A volume evicted from the cache while borrowed is closed when its last user is done.
        """
        if self.remote:
            with self._remote_borrow() as vol:
                yield vol
            return
        now = file_version(self.path)
        if now != self.stamp:
            raise self._changed()
        entry = _acquire(self)
        try:
            yield entry.vol
        finally:
            _release(entry)

    @contextlib.contextmanager
    def _remote_borrow(self) -> Iterator[Any]:
        from ..storage import VersionCheck

        check = VersionCheck.start(self.reopen)
        try:
            entry = _acquire(self)
        except Exception:
            if check.result() != self.stamp:
                raise self._changed() from None
            raise
        try:
            if getattr(entry.vol.reopen, "version", self.stamp) != self.stamp:
                raise self._changed()
            try:
                yield entry.vol
            except Exception:
                if check.result() != self.stamp:
                    raise self._changed() from None
                raise
        finally:
            _release(entry)
        if check.result() != self.stamp:
            raise self._changed()

    def _changed(self) -> DataError:
        return DataError(f"{where(self.path)}the file changed after the Dask graph was built "
                         "(a rewrite replaces it); build the graph again")


class _Cached:
    """A cached open volume and how many tasks are reading from it."""

    __slots__ = ("evicted", "users", "vol")

    def __init__(self, vol: Any) -> None:
        self.vol = vol
        self.users = 0
        self.evicted = False


_CACHE: OrderedDict[FileRef, _Cached] = OrderedDict()
_CACHE_LOCK = threading.Lock()


def _acquire(ref: FileRef) -> _Cached:
    with _CACHE_LOCK:
        entry = _CACHE.get(ref)
        if entry is not None:
            _CACHE.move_to_end(ref)
            entry.users += 1
            return entry
    vol = ref.reopen()
    with _CACHE_LOCK:
        entry = _CACHE.get(ref)
        if entry is None:
            entry = _CACHE[ref] = _Cached(vol)
            vol = None
        _CACHE.move_to_end(ref)
        entry.users += 1
        while len(_CACHE) > _OPEN_VOLUMES:
            _evict(_CACHE.popitem(last=False)[1])
    if vol is not None:  # another thread opened it first
        vol.close()
    return entry


def _release(entry: _Cached) -> None:
    with _CACHE_LOCK:
        entry.users -= 1
        close = entry.evicted and entry.users == 0
    if close:
        entry.vol.close()


def _evict(entry: _Cached) -> None:
    """Close an entry that left the cache (later, when a reader still holds it)."""
    entry.evicted = True
    if entry.users == 0:
        entry.vol.close()


def adopt(ref: FileRef, vol: Any) -> None:
    """Keep an already open ``vol`` (owned by the caller until now) as the cache entry of
    ``ref``, sparing a second header parse; closed at once if the entry exists."""
    with _CACHE_LOCK:
        if ref not in _CACHE:
            _CACHE[ref] = _Cached(vol)
            vol = None
            while len(_CACHE) > _OPEN_VOLUMES:
                _evict(_CACHE.popitem(last=False)[1])
    if vol is not None:
        vol.close()


def clear_cache() -> None:
    """Close the volumes this process keeps open for Dask and xarray reads."""
    with _CACHE_LOCK:
        entries = list(_CACHE.values())
        _CACHE.clear()
        for e in entries:
            _evict(e)


atexit.register(clear_cache)


class InProcess:
    """A ``Volume`` opened from a file object: usable by threads, never sent to a process."""

    def __init__(self, vol: Any) -> None:
        self.vol = vol

    @contextlib.contextmanager
    def borrow(self) -> Iterator[Any]:
        """The volume itself (it stays open: its owner closes it)."""
        yield self.vol

    def __reduce__(self) -> Any:
        raise UnsupportedError("a volume opened from a file object cannot be sent to another "
                               "process; open it by path to use dask.distributed")


def read_region(ref: FileRef | InProcess, level: int, region: tuple[slice, ...]) -> np.ndarray:
    """One chunk: ``region`` (caller's axis order) of level ``level``."""
    with ref.borrow() as vol:
        return np.asarray(vol.levels[level][region])


def volume_to_dask(vol: Any, level: int = 0) -> Any:
    """Level ``level`` of ``vol`` as a ``dask.array.Array`` whose chunks are the tile cores.

    Axes follow the volume's ``index_order``. Untiled volumes are split into slabs along the
    slowest file axis. Virtual levels are computed chunk by chunk, as ``vol.levels[k]`` does.
    """
    from ..optional import require

    da = require("dask.array", extra="dask", feature="to_dask()", package="dask",
                 pip="dask[array]")
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    if not 0 <= level < len(vol.levels):
        raise no_such_level(vol.name, level, len(vol.levels))
    lv = vol.levels[level].level
    ref: FileRef | InProcess = FileRef.of(vol) or InProcess(vol)
    chunks = _read_chunks(lv, vol.dtype.itemsize, vol.tiled)
    if vol.index_order == "C":
        chunks = chunks[::-1]
    name = "jnrrd-read-" + tokenize(ref if isinstance(ref, FileRef) else id(vol), level, chunks)
    starts = [np.concatenate([[0], np.cumsum(c)]).tolist() for c in chunks]
    dsk: dict[Any, Any] = {}
    for idx in np.ndindex(*(len(c) for c in chunks)):
        region = tuple(slice(s[i], s[i + 1]) for s, i in zip(starts, idx, strict=True))
        dsk[(name, *idx)] = (read_region, ref, level, region)
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=())
    meta = np.empty((0,) * len(chunks), dtype=vol.dtype)
    return da.Array(graph, name, chunks, meta=meta)


def _read_chunks(lv: Any, itemsize: int, tiled: bool) -> tuple[tuple[int, ...], ...]:
    """Chunk sizes per file axis: tile cores, or slabs along the last axis when untiled."""
    grid = lv.grid
    if tiled:
        return core_chunks(grid)
    shape = grid.shape
    plane = max(1, math.prod(shape[:-1]) * itemsize)
    step = max(1, _UNTILED_CHUNK_BYTES // plane)
    return (*((n,) for n in shape[:-1]), chunk_sizes(shape[-1], step))


def chunk_sizes(n: int, step: int) -> tuple[int, ...]:
    """``n`` cut in chunks of ``step`` (the last one shorter); ``(0,)`` when ``n`` is 0."""
    return tuple(min(step, n - k) for k in range(0, n, step)) or (0,)


def core_chunks(grid: Any) -> tuple[tuple[int, ...], ...]:
    """The tile cores of a grid as Dask chunks (file axis order; untiled axes whole)."""
    out: list[tuple[int, ...]] = [(n,) for n in grid.shape]
    for k, a in enumerate(grid.axes):
        out[a] = chunk_sizes(grid.shape[a], grid.tile[k])
    return tuple(out)
