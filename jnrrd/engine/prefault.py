"""Fresh output memory mapped in ahead of the one thread that fills it.

A whole-file read of an untiled data section decodes (one libdeflate call, a zlib stream, a
raw ``readinto``) on one thread into one large fresh array, and every page of that array is
first touched by the decoder: a page fault per page, often a much dearer one than the decode
of its bytes suggests. In a virtual machine that hands freed memory back to its host (free
page reporting: Firecracker, Cloud Hypervisor, QEMU's balloon), touching memory the guest
freed a second ago costs a host fault too: a fresh 256 MiB array took 27 ms to touch when
its memory had just been freed and 270–550 ms once the host had taken it back, so the same
read of a 256 MiB gzip volume took 0.54 s or 1.0 s by chance (docs/performance.md).

:func:`populating` lets the other core take those faults: while the block runs, a helper
thread asks the kernel to map the array's pages in, 4 MiB at a time from the start, ahead of
the decoder (``madvise(MADV_POPULATE_WRITE)``, Linux 5.14 and newer: page tables filled as if
written, contents unchanged, so it is safe beside the writer). Elsewhere, for small arrays,
or when the kernel refuses, it does nothing. The faults move to the other core, no work is
added; where the other core is busy too (a zstd read decodes frames on both) they only change
places, a few per cent either way.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from .._libc import linux_function
from .._threads import background

__all__ = ["MIN_BYTES", "populate", "populating"]

#: arrays smaller than this are filled without a helper (a thread start costs more)
MIN_BYTES = 32 << 20
_CHUNK = 4 << 20
_PAGE = mmap.PAGESIZE
_MADV_POPULATE_WRITE = 23  # <linux/mman.h>, Linux 5.14

_madvise = linux_function("madvise", [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int])
#: False once the kernel refused ``MADV_POPULATE_WRITE`` (too old): not asked again
supported = _madvise is not None


def populate(arr: np.ndarray, stop: threading.Event | None = None) -> int:
    """Map in the whole pages of ``arr``'s buffer, from its start, until done or ``stop``
    is set; the bytes asked for (0 where the kernel cannot)."""
    global supported
    fn = _madvise
    start = (arr.ctypes.data + _PAGE - 1) & ~(_PAGE - 1)
    end = (arr.ctypes.data + arr.nbytes) & ~(_PAGE - 1)
    pos = start
    while fn is not None and supported and pos < end and not (stop and stop.is_set()):
        n = min(_CHUNK, end - pos)
        if fn(pos, n, _MADV_POPULATE_WRITE) != 0:
            if ctypes.get_errno() == errno.EINVAL:
                supported = False  # a kernel without it: not asked again
            break  # anything else (no memory to spare): the writer takes its own faults
        pos += n
    return pos - start


@contextmanager
def populating(arr: np.ndarray) -> Iterator[None]:
    """Within the block, a helper thread maps in ``arr``'s pages ahead of the block's own
    writes (``arr`` must be freshly allocated and contiguous); on leaving, the helper stops
    and is waited for."""
    if not supported or arr.nbytes < MIN_BYTES or not arr.flags.c_contiguous \
            and not arr.flags.f_contiguous:
        yield
        return
    stop = threading.Event()
    future: Any = background(lambda: populate(arr, stop))
    try:
        yield
    finally:
        stop.set()
        if not future.cancel():
            future.result()
