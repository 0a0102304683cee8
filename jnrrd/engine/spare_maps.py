"""Anonymous memory maps kept for reuse: retired bricks' maps and large read outputs.

Fresh memory is not free: the kernel zeroes every page on its first touch, and in a virtual
machine that hands freed memory back to its host (free page reporting) the host faults it in
again too. A 256 MiB read output costs 30 ms to touch when its memory was freed a moment ago
and about 300 ms once the host has taken it back; a raw read of that size is otherwise a
40 ms copy (docs/performance.md, "Fresh output memory").

So anonymous maps are kept, as ``malloc`` keeps freed memory, in :data:`SPARES`:

- a closed volume's bricks (:mod:`jnrrd.engine.bricks`) hand their map here;
- a read's output of :data:`MIN_OUTPUT` bytes or more is made by :func:`empty` on a map of
  its own, which comes back here when the last array using it is gone.

A kept map of :data:`LAZY_FREE` bytes or more has its pages lazily freed (``MADV_FREE``): the
kernel takes them back whenever it needs memory and otherwise leaves them in place, so the
next user writes them without a fault. At most :data:`SPARE_MAPS` such maps holding at most
:data:`SPARE_BYTES` bytes are kept (the oldest go first). Smaller maps (results of a few MiB:
regions, slices, patches) are kept as they are, resident, as ``malloc`` keeps its heap: for
them ``MADV_FREE`` and the first write after it cost about as much as the faults they save.
At most :data:`RESIDENT_MAPS` of those, holding at most :data:`RESIDENT_BYTES`, are kept.
:meth:`SPARES.clear() <_Spares.clear>` gives every kept map back at once. A map is handed out
only when nothing uses it any more, and its old contents never show through: a read writes
every byte of its output, and bricks read only the slots they filled.
"""

from __future__ import annotations

import ctypes
import math
import mmap
import os
import threading
from typing import Any

import numpy as np

__all__ = ["LAZY_FREE", "MIN_OUTPUT", "RESIDENT_BYTES", "RESIDENT_MAPS", "SPARE_BYTES",
           "SPARE_MAPS", "SPARES", "empty"]


def _spare_bytes() -> int:
    """2 GiB, or an eighth of the memory this process may use when that is less (the
    machine's, or its cgroup's limit when it has one)."""
    try:
        ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        ram = 8 << 30
    for limit in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(limit) as f:
                ram = min(ram, int(f.read().strip()))
        except (OSError, ValueError):  # none, or "max"
            pass
    return min(2 << 30, max(ram // 8, 64 << 20))


#: maps of at least this many bytes are kept lazily freed; the most kept, and their bytes
LAZY_FREE = 32 << 20
SPARE_MAPS = 8
SPARE_BYTES = _spare_bytes()
#: smaller maps are kept resident: the most kept, and their bytes
RESIDENT_MAPS = 16
RESIDENT_BYTES = 64 << 20
#: read outputs of at least this many bytes get a map of their own (smaller ones: NumPy's)
MIN_OUTPUT = 4 << 20
_MADV_FREE = getattr(mmap, "MADV_FREE", None)
_OUTPUT_FLAGS = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)
_HUGEPAGE = getattr(mmap, "MADV_HUGEPAGE", None)


class _Spares:
    """The kept maps, oldest first, lazily freed ones and resident ones apart (module
    docstring).

    The locked sections create no container objects (no tuples, lists or generators): a
    garbage collection, and the finalizers it runs, can then not start inside them.
    """

    def __init__(self) -> None:
        # (map, bytes it may hold), oldest first: maps of LAZY_FREE bytes or more, and smaller
        self._maps: list[tuple[mmap.mmap, int]] = []
        self._small: list[tuple[mmap.mmap, int]] = []
        self._lock = threading.Lock()

    def put(self, buffer: mmap.mmap, resident: int) -> None:
        """Keep ``buffer``, whose pages in use hold at most ``resident`` bytes (lazily freed
        when it is large); or give it back: nothing resident, over the limit of its kind, no
        ``MADV_FREE``, or the kept maps busy this very moment (``put`` runs from finalizers,
        which must not wait for a lock their own thread may hold)."""
        size = len(buffer)
        lazy = size >= LAZY_FREE
        entry = (buffer, min(resident, size))
        kept = 0 < entry[1] <= (SPARE_BYTES if lazy else RESIDENT_BYTES) \
            and _MADV_FREE is not None
        if kept and lazy:
            try:
                buffer.madvise(_MADV_FREE, 0, size)
            except (OSError, ValueError):  # a kernel without it, or a closed map
                kept = False
        most, limit = (SPARE_MAPS, SPARE_BYTES) if lazy else (RESIDENT_MAPS, RESIDENT_BYTES)
        gone: list[mmap.mmap] = []
        if not kept or not self._lock.acquire(blocking=False):
            close(buffer)
            return
        try:
            maps = self._maps if lazy else self._small
            maps.append(entry)
            while len(maps) > most or _held(maps) > limit:
                gone.append(maps.pop(0)[0])
        finally:
            self._lock.release()
        for old in gone:
            close(old)

    def take(self, size: int, most: int) -> tuple[mmap.mmap, int] | None:
        """The smallest kept map of ``size`` to ``most`` bytes (no longer kept) with the
        bytes its earlier pages may still hold; or None."""
        with self._lock:
            small = _smallest(self._small, size, most)
            if small >= 0:
                return self._small.pop(small)
            large = _smallest(self._maps, size, most)
            return self._maps.pop(large) if large >= 0 else None

    def resident(self) -> int:
        """The bytes the kept maps held when kept (an upper bound: the kernel may have taken
        some of the lazily freed ones back)."""
        with self._lock:
            return _held(self._maps) + _held(self._small)

    def __len__(self) -> int:
        with self._lock:
            return len(self._maps) + len(self._small)

    def clear(self) -> None:
        """Give every kept map back (results still in use keep theirs)."""
        fresh: list[tuple[mmap.mmap, int]] = []
        fresh_small: list[tuple[mmap.mmap, int]] = []
        with self._lock:
            maps, small = self._maps, self._small
            self._maps, self._small = fresh, fresh_small
        for m, _ in maps + small:
            close(m)

    def _after_fork(self) -> None:
        self._lock = threading.Lock()  # a thread of the parent may have held it


def _held(maps: list[tuple[mmap.mmap, int]]) -> int:
    """The bytes ``maps`` held when kept (no container is made: called under the lock)."""
    total = 0
    for k in range(len(maps)):
        total += maps[k][1]
    return total


def _smallest(maps: list[tuple[mmap.mmap, int]], size: int, most: int) -> int:
    """The position of the smallest map of ``size`` to ``most`` bytes in ``maps``, or -1."""
    best, best_len = -1, 0
    for k in range(len(maps)):
        n = len(maps[k][0])
        if size <= n <= most and (best < 0 or n < best_len):
            best, best_len = k, n
    return best


#: the kept maps (module docstring)
SPARES = _Spares()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=SPARES._after_fork)


def new_map(size: int, flags: int) -> mmap.mmap | None:
    """A fresh anonymous map of ``size`` bytes, or None when the system refuses one even
    after the kept maps (address space too) are given back."""
    for attempt in range(2):
        try:
            return mmap.mmap(-1, size, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except (OSError, ValueError, OverflowError):
            if attempt or not len(SPARES):
                return None
            SPARES.clear()
    return None


def close(buffer: mmap.mmap) -> None:
    """Unmap ``buffer`` now, or when the last view of it goes (a view still exported)."""
    try:
        buffer.close()
    except BufferError:
        pass


class _Lease:
    """The base of an array :func:`empty` made on a map: NumPy reaches the memory through
    ``__array_interface__`` (no export of the map), and when the last array using it is
    gone, the map goes back to :data:`SPARES`."""

    def __init__(self, buffer: mmap.mmap, nbytes: int) -> None:
        self._map = buffer
        pointer = ctypes.c_char.from_buffer(buffer)
        address = ctypes.addressof(pointer)
        del pointer  # (an export of the map: it could not be closed while one lived)
        self.__array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                    "data": (address, False), "version": 3}

    def __del__(self) -> None:
        try:
            SPARES.put(self._map, len(self._map))
        except Exception:  # interpreter shutdown: the map just goes
            pass


def empty(shape: Any, dtype: Any, order: str = "C") -> np.ndarray:
    """``np.empty(shape, dtype, order=order)``; one of :data:`MIN_OUTPUT` bytes or more lies on
    a map of its own, a kept one when there is one of a fitting size (module docstring).

    The caller writes every byte before handing the array out: bytes of a kept map that are
    not written may read as zeros or as old contents, and may change from one read to the
    next. The array does not own its memory (``owndata`` is False, ``resize`` refuses)."""
    dt = dtype if type(dtype) is np.dtype else np.dtype(dtype)
    nbytes = dt.itemsize * (math.prod(shape) if type(shape) is tuple or type(shape) is list
                            else int(shape))
    if nbytes < MIN_OUTPUT or nbytes <= 0 or dt.hasobject or dt.subdtype is not None \
            or _MADV_FREE is None or not _OUTPUT_FLAGS:
        return np.empty(shape, dt, order=order)  # (the common case: a few hundred ns here)
    shape = tuple(int(n) for n in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    spare = SPARES.take(nbytes, 2 * nbytes)
    buffer = spare[0] if spare is not None else new_map(nbytes, _OUTPUT_FLAGS)
    if buffer is None:
        return np.empty(shape, dt, order=order)  # NumPy's MemoryError, if it comes to that
    if spare is None and _HUGEPAGE is not None:
        try:
            buffer.madvise(_HUGEPAGE)  # as NumPy asks for its large arrays
        except OSError:
            pass
    flat = np.asarray(_Lease(buffer, nbytes))
    return flat.view(dt).reshape(shape, order="F" if order == "F" else "C")
