"""Local-disk byte handling of a write: positional writes, in-kernel copies, and the
write-back flusher that overlaps the final ``fsync`` with the encoding still to do.

Nothing here knows about files' contents; :mod:`jnrrd.storage.writes` uses these for staged
objects.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import threading
from typing import IO

from .._libc import linux_function
from .._threads import start_daemon

__all__ = ["WriteBack", "copy_range", "pwrite_all"]


def pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    """Write all of ``data`` at ``offset`` of ``fd`` (positional, thread-safe)."""
    done = 0
    while done < len(data):
        done += os.pwrite(fd, data[done:], offset + done)


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


_SYNC_FILE_RANGE = linux_function(
    "sync_file_range", [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint])
_SYNC_FILE_RANGE_WRITE = 2
#: start writing level-0 data back to disk every this many bytes, while encoding goes on
_SYNC_EVERY = (16 if _SYNC_FILE_RANGE is not None else 64) << 20


def _memory_bytes() -> int:
    """The machine's physical memory (0 when the system does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


#: once a durable write has written this much, what it has already sent to disk leaves the
#: page cache: a file near the size of memory would otherwise push everything else out, and
#: the kernel would spend its time reclaiming pages under the writer
DROP_AFTER = max(1 << 30, _memory_bytes() // 8)
_FADVISE = getattr(os, "posix_fadvise", None)


class Flusher:
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
        """Start writing back what was written to ``f`` so far (never waits)."""
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
        """Wait for the background ``fdatasync``, if one runs."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None


class WriteBack:
    """Counts the bytes written to one file and kicks its :class:`Flusher` every
    ``_SYNC_EVERY`` bytes (only for durable writes: otherwise nothing is ever synced)."""

    def __init__(self, durable: bool) -> None:
        self.durable = durable
        self._unsynced = self._total = 0
        self._flusher = Flusher()
        #: the bytes written at the last three kicks (the file grows about in that order), and
        #: where the page cache was dropped up to
        self._kicked: list[int] = []
        self._dropped = 0

    def wrote(self, f: IO[bytes], nbytes: int) -> None:
        """Note ``nbytes`` more written to ``f``; start writing them back now and then, and
        past :data:`DROP_AFTER` bytes drop what is on disk from the page cache."""
        self._unsynced += nbytes
        self._total += nbytes
        if self._unsynced >= _SYNC_EVERY and self.durable:
            self._unsynced = 0
            self._flusher.kick(f)
            if self._total > DROP_AFTER and _FADVISE is not None:
                self._drop(f.fileno())

    def _drop(self, fd: int) -> None:
        """``POSIX_FADV_DONTNEED`` up to what had been written two kicks ago: written back
        by now (a page still dirty is left alone by the kernel and goes the usual way)."""
        self._kicked = [*self._kicked[-2:], self._total]
        end = self._kicked[0]
        if len(self._kicked) == 3 and end > self._dropped:
            try:
                _FADVISE(fd, self._dropped, end - self._dropped, os.POSIX_FADV_DONTNEED)
            except OSError:  # advice only: never fails a write
                return
            self._dropped = end

    def join(self) -> None:
        """Wait for a write-back running on a background thread."""
        self._flusher.join()
