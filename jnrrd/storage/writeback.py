"""Local-disk byte handling of a write: positional writes, in-kernel copies, and the
write-back flusher that overlaps the final ``fsync`` with the encoding still to do.

Nothing here knows about files' contents; :mod:`jnrrd.storage.writes` uses these for staged
objects. The system calls behind them, and their fallbacks, are :mod:`jnrrd._platform`'s.
"""

from __future__ import annotations

import threading
from typing import IO

from .. import _platform
from .._threads import start_daemon

__all__ = ["WriteBack", "copy_range", "pwrite_all"]


def pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    """Write all of ``data`` at ``offset`` of ``fd`` (positional, thread-safe)."""
    done = 0
    while done < len(data):
        done += _platform.pwrite(fd, data[done:], offset + done)


def copy_range(src: IO[bytes], dst: IO[bytes], size: int) -> None:
    """Append the first ``size`` bytes of ``src`` at ``dst``'s position (in the kernel where
    the system can, :func:`jnrrd._platform.copy_file_range`; the rest through user space)."""
    src.seek(0)
    dst.flush()
    done = 0
    out_pos = dst.tell()
    while done < size:
        n = _platform.copy_file_range(src.fileno(), dst.fileno(), size - done, done,
                                      out_pos + done)
        if not n:  # None: not here; 0: the source ended early
            break
        done += n
    dst.seek(out_pos + done)
    src.seek(done)
    while done < size:  # through user space, never past ``size``
        chunk = src.read(min(8 << 20, size - done))
        if not chunk:
            break
        dst.write(chunk)
        done += len(chunk)


#: start writing level-0 data back to disk every this many bytes, while encoding goes on
#: (more often where it costs nothing to start: Linux's ``sync_file_range``)
_SYNC_EVERY = (16 if _platform.SYSTEM == "linux" else 64) << 20
#: once a durable write has written this much, what it has already sent to disk leaves the
#: page cache: a file near the size of memory would otherwise push everything else out, and
#: the kernel would spend its time reclaiming pages under the writer
DROP_AFTER = max(1 << 30, (_platform.physical_memory() or 0) // 8)


class Flusher:
    """Overlaps the disk write-back the final ``fsync`` needs with the encoding still to do.

    ``kick`` starts writing back what was written so far: on Linux with
    ``sync_file_range(SYNC_FILE_RANGE_WRITE)``, which returns at once; elsewhere with
    :func:`jnrrd._platform.fdatasync` in a background thread (at most one at a time; a kick
    while one runs is dropped). The closing ``fsync`` then finds little left to flush.
    Correctness never depends on it: ``finish`` still fsyncs.
    """

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None

    def kick(self, f: IO[bytes]) -> None:
        """Start writing back what was written to ``f`` so far (never waits)."""
        if self._thread is not None and self._thread.is_alive():
            return
        f.flush()
        fd = f.fileno()
        if _platform.start_writeback(fd):  # best effort, never waits
            return

        def run() -> None:
            try:
                _platform.fdatasync(fd)
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
            if self._total > DROP_AFTER:
                self._drop(f.fileno())

    def _drop(self, fd: int) -> None:
        """``POSIX_FADV_DONTNEED`` up to what had been written two kicks ago: written back
        by now (a page still dirty is left alone by the kernel and goes the usual way)."""
        self._kicked = [*self._kicked[-2:], self._total]
        end = self._kicked[0]
        if len(self._kicked) == 3 and end > self._dropped:
            _platform.drop_cached(fd, self._dropped, end - self._dropped)  # advice only
            self._dropped = end

    def join(self) -> None:
        """Wait for a write-back running on a background thread."""
        self._flusher.join()
