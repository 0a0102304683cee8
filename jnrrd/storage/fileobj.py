"""An opened binary stream as a reader of one object (a caller's file object or a file this
library opened).

Byte ranges come zero-copy from a memory map when the stream has a usable descriptor (safe
from many threads), by ``pread`` when the caller asks not to map (compressed tiles: the
file's pages do not pile up in the resident set of a full read), from the buffer of a
``BytesIO``, and otherwise by ``seek`` + ``read`` under one lock.
"""

from __future__ import annotations

import io
import mmap
import os
import threading
from collections.abc import Sequence
from typing import IO, Any

from .._platform import pread, pread_into
from ..errors import DataError
from .objects import Ready, ready

__all__ = ["StreamReader", "read_at_most", "size_of", "stream_dir"]


class StreamReader:
    """Byte ranges of one opened stream; closes it on :meth:`close` only when ``owned``."""

    def __init__(self, file: Any, *, map_reads: bool = True, owned: bool = False) -> None:
        self._lock = threading.Lock()
        self._owned: Any = None
        self._mm: mmap.mmap | None = None
        self._buf: memoryview | None = None
        self._fd: int | None = None
        self._map_reads = map_reads
        self._file = file
        if isinstance(file, (str, os.PathLike)):
            self._owned = open(file, "rb")
            self._file = self._owned
        elif owned:
            self._owned = file  # handed over by the opener: closed by close()
        try:
            self.file_size = size_of(self._file)
            self._map()
        except BaseException:
            self.close()
            raise

    def _map(self) -> None:
        f = self._file
        if isinstance(f, io.BytesIO):
            self._buf = f.getbuffer()
            return
        try:
            fileno = f.fileno()
        except (AttributeError, OSError, io.UnsupportedOperation):
            return
        self._fd = fileno  # reads into a caller's buffer (read_into), and compressed tiles
        if not self._map_reads:
            return
        if self.file_size:
            try:
                self._mm = mmap.mmap(fileno, 0, access=mmap.ACCESS_READ)
                self._buf = memoryview(self._mm)
            except (OSError, ValueError):
                self._mm = None

    def get_range(self, start: int, stop: int) -> memoryview | bytes:
        """Bytes ``start:stop``; ``DataError("file ended early")`` when the stream is shorter."""
        if self._buf is not None:
            return self._buf[start:stop]
        size = stop - start
        if self._fd is not None and self._mm is None:
            data = pread(self._fd, size, start)  # thread-safe: no shared file position
            if len(data) != size:
                raise DataError("file ended early")
            return data
        with self._lock:
            self._file.seek(start)
            data = self._file.read(size)
        if len(data) != size:
            raise DataError("file ended early")
        return data

    def get_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[memoryview | bytes]:
        """The bytes ``start:stop`` for each ``(start, stop)``, in order."""
        return [self.get_range(a, b) for a, b in ranges]

    def fileno(self) -> int:
        """The stream's descriptor (``io.UnsupportedOperation`` when it has none)."""
        if self._fd is None:
            raise io.UnsupportedOperation("the stream has no descriptor")
        return self._fd

    def fetch_many(self, ranges: Sequence[tuple[int, int]]) -> list[Ready]:
        """:meth:`get_range` of each range as an available answer (its error kept for
        ``result()``): the shape of a remote reader's pending ranges."""
        get = self.get_range
        return [ready(get, a, b) for a, b in ranges]

    def read_into(self, start: int, buf: Any) -> None:
        """Fill ``buf`` with the bytes from ``start`` (``preadv`` when the stream has a
        descriptor: no intermediate copy, no mapped pages left resident);
        ``DataError("file ended early")`` when the stream is shorter."""
        view = memoryview(buf).cast("B")
        n, got = len(view), 0
        if start + n > self.file_size:
            raise DataError("file ended early")
        if self._fd is not None:
            if pread_into(self._fd, view, start) < n:
                raise DataError("file ended early")
            return
        if self._buf is not None:
            view[:] = self._buf[start : start + n]
            return
        with self._lock:  # a stream without a descriptor: seek + read
            self._file.seek(start)
            while got < n:
                k = self._file.readinto(view[got:])
                if not k:
                    raise DataError("file ended early")
                got += k

    def close(self) -> None:
        """Drop the map and close the stream when it is owned."""
        self._buf = None
        self._fd = None
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:  # a caller still holds a view; the map closes when it goes
                pass
            self._mm = None
        if self._owned is not None:
            try:
                self._owned.close()
            except BufferError:  # a BytesIO whose buffer a caller still holds a view of
                pass
            self._owned = None


def read_at_most(f: Any, limit: int) -> bytes:
    """Up to ``limit`` bytes of ``f`` with memory proportional to what the file holds.

    ``read(limit)`` on a file object reserves ``limit`` bytes before reading (CPython's
    ``FileIO.read``), so a 100-byte tile file would cost the whole ``max_tile_bytes`` cap
    (docs/security.md#caps). Regular files are read up to their size (+1 to notice a
    file that grew); other streams in 1 MiB pieces.
    """
    try:
        size = os.fstat(f.fileno()).st_size
    except (AttributeError, OSError, io.UnsupportedOperation):
        size = None
    if size is not None:
        return f.read(min(limit, size + 1))
    parts = []
    got = 0
    while got < limit:
        chunk = f.read(min(1 << 20, limit - got))
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def size_of(f: Any) -> int:
    """The size of an opened stream (``fstat``, else by seeking to its end and back)."""
    try:
        return os.fstat(f.fileno()).st_size
    except (AttributeError, OSError, io.UnsupportedOperation):
        pos = f.tell()
        end = f.seek(0, io.SEEK_END)
        f.seek(pos)
        return end


def stream_dir(f: IO[bytes]) -> str | None:
    """The directory of a stream whose ``name`` is an existing path (where its external tiles
    and detached data live), else ``None``."""
    nm = getattr(f, "name", None)
    if isinstance(nm, (str, os.PathLike)) and os.path.exists(nm):
        return os.path.dirname(os.path.abspath(nm))
    return None
