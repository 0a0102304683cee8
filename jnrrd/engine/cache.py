"""The decoded-tile cache of a :class:`~jnrrd.engine.volume.Volume` (``open(..., cache_bytes=N)``).

One least-recently-used map from ``(level, tile coords)`` to a decoded tile, shared by every
level of one volume (stored tiles and computed tiles of virtual levels alike), bounded by the
bytes of the arrays it holds. It is what makes a viewer's access pattern cheap: consecutive
slices and a zoom around a point touch the same tiles again and again.

- **Thread-safe.** One lock guards the map; decoding happens outside it. Threads that miss
  the same tile at once decode it once: the first becomes its loader, the others wait for its
  result (single flight).
- **Read-only.** A cached array is marked non-writeable before it is shared; the volume copies
  out of it into each caller's output (or hands out a copy), so no caller can change what the
  next reader sees.
- **Bounded.** The sum of the cached arrays' ``nbytes`` never exceeds the budget: the least
  recently used tiles go first, and a tile larger than the whole budget is not cached.
- **Off when 0.** ``cache_bytes=0`` caches nothing (every read decodes).

Defaults (:func:`default_cache_bytes`): 0 for local files, whose compressed bytes the operating
system's page cache already holds (a re-read costs the decode only); 256 MiB for volumes with
virtual levels (a virtual tile is computed from many level-0 tiles); 256 MiB for remote stores
(a re-read would cost a round trip).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, NamedTuple

import numpy as np

__all__ = ["CacheInfo", "TileCache", "check_cache_bytes", "copy_cached", "default_cache_bytes",
           "DEFAULT_REMOTE_CACHE_BYTES", "DEFAULT_VIRTUAL_CACHE_BYTES"]

#: the default budget for remote stores (a re-read costs a request)
DEFAULT_REMOTE_CACHE_BYTES = 256 << 20
#: the default budget of a local volume with virtual (computed) levels
DEFAULT_VIRTUAL_CACHE_BYTES = 256 << 20


class CacheInfo(NamedTuple):
    """``Volume.cache_info()``: counters since the volume was opened, like
    ``functools.lru_cache``'s."""

    hits: int
    misses: int
    evictions: int
    tiles: int  # tiles held now
    bytes: int  # their total nbytes
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


class TileCache:
    """A thread-safe LRU of read-only arrays bounded by ``max_bytes`` (0: caches nothing)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._map: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        self._pending: dict[Hashable, _Pending] = {}
        self._lock = threading.Lock()
        self._bytes = 0
        self._hits = self._misses = self._evictions = 0

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    def get(self, key: Hashable) -> np.ndarray | None:
        """The cached array of ``key`` (now the most recently used), or None."""
        with self._lock:
            return self._hit(key)

    def _hit(self, key: Hashable) -> np.ndarray | None:
        """:meth:`get` with the lock held."""
        hit = self._map.get(key)
        if hit is not None:
            self._map.move_to_end(key)
            self._hits += 1
        return hit

    def get_many(self, keys: list[Hashable]) -> list[np.ndarray | None]:
        """:meth:`get` of many keys under one lock (hits become the most recently used)."""
        with self._lock:
            found = [self._map.get(k) for k in keys]
            move = self._map.move_to_end
            hits = 0
            for k, v in zip(keys, found, strict=True):
                if v is not None:
                    move(k)
                    hits += 1
            self._hits += hits
        return found

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
        """Cache ``value`` (made read-only) under ``key`` unless it is larger than the whole
        budget; evicts the least recently used arrays to stay within it. Returns the
        read-only array."""
        if value.flags.writeable:
            value = value.view()
            value.flags.writeable = False
        size = value.nbytes
        if size > self.max_bytes:
            return value
        with self._lock:
            old = self._map.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes
            self._map[key] = value
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, gone = self._map.popitem(last=False)
                self._bytes -= gone.nbytes
                self._evictions += 1
        return value

    def clear(self) -> None:
        """Drop every cached array (the counters stay)."""
        with self._lock:
            self._map.clear()
            self._bytes = 0

    def keys(self) -> list[Hashable]:
        """The cached keys, least recently used first."""
        with self._lock:
            return list(self._map)

    def info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self._hits, self._misses, self._evictions, len(self._map),
                             self._bytes, self.max_bytes)


def copy_cached(cache: TileCache, level: int, pieces: list[Any], out: np.ndarray) -> list[Any]:
    """Copy into ``out`` the tile pieces (``coords``, ``src``, ``dst``) of ``level`` whose
    tiles are cached, in the calling thread (a hit is a memory copy: a pool hand-off would
    cost more); return the pieces still to decode."""
    tiles = cache.get_many([(level, p.coords) for p in pieces])
    rest = []
    for p, tile in zip(pieces, tiles, strict=True):
        if tile is None:
            rest.append(p)
        else:
            out[p.dst] = tile[p.src]
    return rest
