"""A remote object as a seekable binary stream: what the header parsers and the untiled
data reader read from.

The header is read line by line, but never a request per line: the object's first block is
fetched when it is opened (:data:`~jnrrd.storage.remote.FIRST_BLOCK`), and a line or read
past what is held grows it geometrically (each request at least four times what is held), so
a 20 MB header of a 10⁶-tile file takes four requests. A large read (the data section of an
untiled file) is cut into pieces fetched concurrently straight into the caller's buffer.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from ..errors import UnsupportedError
from .objects import HeldStream
from .remote import RemoteReader, RemoteStore

__all__ = ["RemoteStream", "opener_of"]

#: reads larger than this go straight to ranged requests instead of growing the head
_DIRECT = 4 << 20
#: the head grows to at most this size (past it, reads are ranged requests)
_MAX_HEAD = 1 << 30
#: how much each growth multiplies what is held
_GROWTH = 4


class RemoteStream(HeldStream):
    """Read-only, seekable view of the object ``key`` of ``store``, held by the store while
    the stream is open (``reader``: its already opened :class:`RemoteReader`); every byte
    beyond the first block comes through the store's ``get_ranges``."""

    reader: RemoteReader

    def __init__(self, store: RemoteStore, key: str, reader: RemoteReader | None = None,
                 *, field: str = "data_file") -> None:
        super().__init__(store, key, reader, field=field)
        self.name = self.reader.url

    # -- io.RawIOBase -----------------------------------------------------------------------
    def fileno(self) -> int:
        raise io.UnsupportedOperation(f"{self.name} is a remote object, not a file")

    def peek(self, n: int = 1) -> bytes:
        """Up to ``n`` bytes at the position, without moving it."""
        self._hold(self._pos + max(n, 1))
        return bytes(self.reader.head[self._pos : self._pos + max(n, 1)])

    def readline(self, limit: int | None = -1) -> bytes:
        size = self.reader.file_size
        stop = size if limit is None or limit < 0 else min(size, self._pos + limit)
        while True:
            head = self.reader.head
            end = head.find(b"\n", self._pos, min(stop, len(head)))
            if end >= 0:
                stop = end + 1
                break
            if len(head) >= stop:
                break
            self._hold(stop, grow=True)
        return self._take(stop)

    def read(self, n: int | None = -1) -> bytes:
        size = self.reader.file_size
        stop = size if n is None or n < 0 else min(size, self._pos + n)
        if stop <= self._pos:
            return b""
        if stop <= len(self.reader.head) or stop - self._pos <= _DIRECT:
            self._hold(stop)
            return self._take(stop)
        buf = bytearray(stop - self._pos)
        self.readinto(buf)
        return bytes(buf)

    def readinto(self, b: Any) -> int:
        out = memoryview(b).cast("B")
        stop = min(self.reader.file_size, self._pos + len(out))
        if stop <= self._pos:
            return 0
        head = self.reader.head
        if stop <= len(head) or stop - self._pos <= _DIRECT:
            self._hold(stop)
            n = stop - self._pos
            out[:n] = self.reader.head[self._pos : stop]
            self._pos = stop
            return n
        start, got = self._pos, 0
        if start < len(head):  # the part already held
            got = len(head) - start
            out[:got] = head[start:]
        piece = max(_DIRECT, -(-(stop - start - got) // 16))
        ranges = [(a, min(a + piece, stop)) for a in range(start + got, stop, piece)]
        parts = self.store.get_ranges(self.key, ranges, wait=False)
        for (a, b2), part in zip(ranges, parts, strict=True):
            out[a - start : b2 - start] = part.result()
        self._pos = stop
        return stop - start

    # -- the head ---------------------------------------------------------------------------
    def _hold(self, stop: int, *, grow: bool = False) -> None:
        """Make the head hold bytes up to ``stop`` (at least ``_GROWTH`` times more when it
        grows at all, up to ``_MAX_HEAD``)."""
        reader = self.reader
        held = len(reader.head)
        if stop <= held:
            return
        step = max(held * _GROWTH, held + (64 << 10))
        # a line searched for ends somewhere before ``stop``: grow towards it in steps
        want = min(reader.file_size,
                   min(stop, step) if grow else max(stop, min(_MAX_HEAD, step)))
        if want > held:
            more = self.store.get_ranges(self.key, [(held, want)])[0]
            reader.head = bytes(reader.head) + bytes(more)

    def _take(self, stop: int) -> bytes:
        data = bytes(self.reader.head[self._pos : stop])
        self._pos += len(data)
        return data


def opener_of(store: RemoteStore) -> Callable[[str, str], RemoteStream]:
    """A policy ``opener`` for the URLs :meth:`RemoteStore.path` names (detached data): each
    held by ``store`` under its path while its stream is open."""

    def open_url(url: str, mode: str = "rb") -> RemoteStream:
        if mode != "rb":
            raise UnsupportedError(f"{url}: remote data files are read-only here")
        return RemoteStream(store, url, RemoteReader(store.fetcher, url, store.url(url)))

    return open_url
