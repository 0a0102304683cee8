"""The decoded-tile cache of a :class:`~jnrrd.engine.volume.Volume` (``open(..., cache_bytes=N)``).

One least-recently-used map from ``(level, tile coords)`` to a decoded tile, shared by every
level of one volume (stored tiles and computed tiles of virtual levels alike), bounded by the
memory the tiles take. It is what makes a viewer's access pattern cheap: consecutive
slices and a zoom around a point touch the same tiles again and again.

- **Thread-safe.** One lock guards the map; decoding happens outside it. Threads that miss
  the same tile at once decode it once: the first becomes its loader, the others wait for its
  result (single flight).
- **Read-only.** A cached array is marked non-writeable before it is shared; the volume copies
  out of it into each caller's output (or hands out a copy), so no caller can change what the
  next reader sees.
- **Bounded.** The memory of the cached tiles (an array's ``nbytes``, a brick slot's whole
  pages) never exceeds the budget: the least recently used tiles go first, and a tile larger
  than the whole budget is not cached.
- **Off when 0.** ``cache_bytes=0`` caches nothing (every read decodes).
- **Bricks, when asked for.** With ``JNRRD_CACHE_BRICKS=1`` in the environment (the one
  setting: :func:`bricks_enabled`, docs/api.md) the tiles of a stored level without overlap
  are kept, where the system can reserve the map (Linux), in the level's
  :class:`~jnrrd.engine.bricks.Bricks` (one map with a fixed place per tile): a read whose
  tiles are all cached is then a few NumPy copies (:meth:`TileCache.copy_region`), not one
  step per tile. Copies out of bricks happen under the lock; a brick tile handed out
  (:meth:`TileCache.get`) is a read-only copy. Off by default: plain arrays behave the same
  on every system.

Defaults (:func:`default_cache_bytes`): 0 for local files, whose compressed bytes the operating
system's page cache already holds (a re-read costs the decode only); 256 MiB for volumes with
virtual levels (a virtual tile is computed from many level-0 tiles); 256 MiB for remote stores
(a re-read would cost a round trip).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any, NamedTuple

import numpy as np

from ..tiling.grid import AxisSel, TileGrid
from .bricks import Bricks

__all__ = ["BRICKS_SETTING", "CacheInfo", "TileCache", "bricks_enabled", "check_cache_bytes",
           "default_cache_bytes", "DEFAULT_REMOTE_CACHE_BYTES", "DEFAULT_VIRTUAL_CACHE_BYTES"]

#: the default budget for remote stores (a re-read costs a request)
DEFAULT_REMOTE_CACHE_BYTES = 256 << 20
#: the default budget of a local volume with virtual (computed) levels
DEFAULT_VIRTUAL_CACHE_BYTES = 256 << 20


#: the environment variable that keeps cached tiles in bricks (``"1"``; docs/api.md)
BRICKS_SETTING = "JNRRD_CACHE_BRICKS"


def bricks_enabled() -> bool:
    """Whether caches made now keep stored levels' tiles in bricks (:data:`BRICKS_SETTING`)."""
    return os.environ.get(BRICKS_SETTING, "") == "1"


class CacheInfo(NamedTuple):
    """``Volume.cache_info()``: counters since the volume was opened, like
    ``functools.lru_cache``'s."""

    hits: int
    misses: int
    evictions: int
    tiles: int  # tiles held now
    bytes: int  # the memory they take (arrays' nbytes, brick slots' pages)
    max_bytes: int  # the budget (``cache_bytes``)


def check_cache_bytes(value: Any) -> int | None:
    """``cache_bytes`` as given (``None``: the default for the storage kind), checked: a
    non-negative int, else ``TypeError`` / ``ValueError`` naming the argument."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"cache_bytes must be an int (bytes of decoded tiles; 0 turns the "
                        f"cache off) or None, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"cache_bytes must be >= 0 (bytes of decoded tiles; 0 turns the cache "
                         f"off), got {value}")
    return int(value)


def default_cache_bytes(*, remote: bool = False, virtual_levels: bool = False) -> int:
    """The budget used when ``cache_bytes`` is not given (docs/api.md, "cache_bytes")."""
    if remote:
        return DEFAULT_REMOTE_CACHE_BYTES
    return DEFAULT_VIRTUAL_CACHE_BYTES if virtual_levels else 0


class _Pending:
    """A tile being loaded by one thread while others wait for it."""

    __slots__ = ("done", "value")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None


class _InBricks(NamedTuple):
    """A cache entry whose tile lives in its level's bricks."""

    bricks: Bricks
    coords: tuple[int, ...]
    nbytes: int  # the slot's bytes (whole pages)


class TileCache:
    """A thread-safe LRU of read-only arrays bounded by ``max_bytes`` (0: caches nothing).

    ``levels``: the stored levels whose tiles may live in bricks, level → ``(grid, dtype)``
    (used only when :func:`bricks_enabled`); their tiles' keys are ``(level, coords)``. Other
    keys are any hashable.
    """

    def __init__(self, max_bytes: int,
                 levels: Mapping[Hashable, tuple[TileGrid, np.dtype]] | None = None) -> None:
        self.max_bytes = max_bytes
        self._map: OrderedDict[Hashable, np.ndarray | _InBricks] = OrderedDict()
        self._pending: dict[Hashable, _Pending] = {}
        self._lock = threading.Lock()
        self._bytes = 0
        self._hits = self._misses = self._evictions = 0
        self._layouts = dict(levels or {}) if bricks_enabled() else {}
        self._closed = False
        self._bricks: dict[Hashable, Bricks | None] = {}

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    def get(self, key: Hashable) -> np.ndarray | None:
        """The cached array of ``key`` (now the most recently used), or None."""
        with self._lock:
            return self._hit(key)

    def _hit(self, key: Hashable) -> np.ndarray | None:
        """:meth:`get` with the lock held (a tile in bricks comes out as a read-only copy)."""
        hit = self._map.get(key)
        if hit is None:
            return None
        self._map.move_to_end(key)
        self._hits += 1
        if isinstance(hit, _InBricks):
            return _read_only(hit.bricks.tile(hit.coords))
        return hit

    def copy_hits(self, level: Hashable, pieces: list[Any], out: np.ndarray) -> list[Any]:
        """Copy into ``out`` the tile pieces (``coords``, ``src``, ``dst``) of ``level`` whose
        tiles are cached, in the calling thread (a hit is a memory copy: a pool hand-off would
        cost more); return the pieces still to decode."""
        rest = []
        with self._lock:
            get, move = self._map.get, self._map.move_to_end
            for p in pieces:
                key = (level, p.coords)
                hit = get(key)
                if hit is None:
                    rest.append(p)
                    continue
                move(key)
                if type(hit) is _InBricks:
                    hit.bricks.copy_into(p.coords, p.src, out, p.dst)
                else:
                    out[p.dst] = hit[p.src]
            self._hits += len(pieces) - len(rest)
        return rest

    def copy_region(self, level: Hashable, sel: tuple[AxisSel, ...], out: np.ndarray) -> bool:
        """Copy a step-1 selection of ``level`` into ``out`` (its shape) when every tile it
        touches is in the level's bricks: one NumPy copy per block of whole tiles. False
        (nothing copied) when the level has no bricks, ``out`` is not F-contiguous, the
        selection has a step, or a tile is missing."""
        if not self._bricks or not out.flags.f_contiguous:
            return False
        with self._lock:
            bricks = self._bricks.get(level)
            hits = bricks.copy_region(sel, out) if bricks is not None else 0
            self._hits += hits
        return hits > 0

    def get_or_load(self, key: Hashable, load: Callable[[], np.ndarray | None]
                    ) -> np.ndarray | None:
        """The array of ``key``: from the cache, from another thread already loading it, or
        from ``load()`` (whose result is cached; ``None``, e.g. a sparse tile, is not)."""
        if not self.enabled:
            return load()
        while True:
            with self._lock:
                hit = self._hit(key)
                if hit is not None:
                    return hit
                pending = self._pending.get(key)
                if pending is None:
                    pending = self._pending[key] = _Pending()
                    self._misses += 1
                    break
            pending.done.wait()
            if pending.value is not None:
                with self._lock:
                    self._hits += 1
                return pending.value
            # the loader failed or found nothing (a sparse tile): look again, maybe as the
            # loader this time
        value = None
        try:
            value = load()
            if value is not None:
                value = self.put(key, value)
        finally:
            pending.value = value
            with self._lock:
                del self._pending[key]
            pending.done.set()
        return value

    def put(self, key: Hashable, value: np.ndarray) -> np.ndarray:
        """Cache ``value`` under ``key`` unless it is larger than the whole budget; evicts the
        least recently used tiles to stay within it. Returns ``value`` made read-only (the
        caller's array is left alone)."""
        value = _read_only(value)
        with self._lock:
            if self._closed:  # a loader that finished after the volume was closed
                return value
            bricks = self._bricks_for(key)
            if bricks is not None and bricks.fits(key[1], value):  # type: ignore[index]
                size = bricks.slot_bytes
            else:
                bricks, size = None, value.nbytes
            if size > self.max_bytes:
                return value
            self._drop(key)
            if bricks is not None:
                bricks.store(key[1], value)  # type: ignore[index]
                self._map[key] = _InBricks(bricks, key[1], size)  # type: ignore[index]
            else:
                self._map[key] = value
            self._bytes += size
            self._evict()
        return value

    def _bricks_for(self, key: Hashable) -> Bricks | None:
        """The bricks a tile of ``key`` goes to (made on first use), with the lock held."""
        level = key[0] if isinstance(key, tuple) and len(key) == 2 else None
        if level not in self._layouts:
            return None
        if level not in self._bricks:
            self._bricks[level] = Bricks.create(*self._layouts[level])
        return self._bricks[level]

    def _drop(self, key: Hashable) -> None:
        """Forget ``key`` (with the lock held)."""
        old = self._map.pop(key, None)
        if old is not None:
            self._bytes -= old.nbytes
            if type(old) is _InBricks:
                old.bricks.release(old.coords)

    def _evict(self) -> None:
        """Drop least recently used tiles until the budget holds (with the lock held); a tile
        in bricks read by :meth:`copy_region` since it was last looked at is kept once more
        (those reads do not reorder the map: second chance)."""
        while self._bytes > self.max_bytes:
            key, old = self._map.popitem(last=False)
            if type(old) is _InBricks:
                if old.bricks.take_used(old.coords):
                    self._map[key] = old
                    continue
                old.bricks.release(old.coords)
            self._bytes -= old.nbytes
            self._evictions += 1

    def clear(self, *, close: bool = False) -> None:
        """Drop every cached array (the counters stay). ``close=True``: for good (the volume
        is closed): nothing is cached after, and the bricks' maps are unmapped instead of
        emptied."""
        with self._lock:
            self._map.clear()
            self._bytes = 0
            bricks = self._bricks
            if close:
                self._layouts, self._bricks, self._closed = {}, {}, True
            for b in bricks.values():
                if b is not None:
                    b.close() if close else b.clear()

    def keys(self) -> list[Hashable]:
        """The cached keys, least recently used first."""
        with self._lock:
            return list(self._map)

    def info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self._hits, self._misses, self._evictions, len(self._map),
                             self._bytes, self.max_bytes)


def _read_only(value: np.ndarray) -> np.ndarray:
    """``value`` as a read-only array (a view when it is writeable: the owner keeps its own)."""
    if value.flags.writeable:
        value = value.view()
        value.flags.writeable = False
    return value
