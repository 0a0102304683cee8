"""Response bodies read with memory bounded by the request, whatever the server sends.

A server may answer a ranged request with the right status and ``Content-Range`` and then an
endless body (no length, a huge ``Content-Length``, chunked, or a trickle). A body is
therefore never read "to its end": :func:`read_exact` reads exactly the bytes the request
asked for, a bounded piece at a time, and then looks (without waiting) for one byte more; a
body that holds more is an error, and the caller drops the connection instead of draining it.
:func:`read_at_most` reads a body of unknown length up to a limit + 1 byte. Memory is the
request's size plus one piece (:data:`PIECE`).

Backend-neutral: each backend passes its own ``read(n)``, a coroutine (aiohttp's
``content.read``, a botocore streaming body's ``read``) or a blocking call (obstore's
stream, :func:`read_exact_blocking`), and says how it drops a connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .validators import Validator

__all__ = ["PIECE", "Answer", "Bytes", "Exact", "LongBody", "Retry", "ShortBody", "read_at_most",
           "read_exact", "read_exact_blocking"]

#: the most bytes asked of a body at a time
PIECE = 256 << 10

Read = Callable[[int], Awaitable[bytes]]
#: a body's bytes: whole (``bytes``/``bytearray``) or a view of the buffer they arrived in
Bytes = bytes | bytearray | memoryview


@dataclass
class Answer:
    """What a request returned: the bytes, the object's total size when the answer said it,
    and the object's version as the answer gave it (``None``: a backend that says nothing)."""

    data: Bytes
    total: int | None = None
    validator: Validator | None = None


class Retry(Exception):
    """A failure worth another try (a 5xx answer, a dropped connection, a body cut short)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ShortBody(Exception):
    """The body ended before the bytes it promised."""


class LongBody(Exception):
    """The body holds more bytes than the request asked for (or than its limit)."""


class Sink(Protocol):
    """Told how far a body has arrived (:class:`jnrrd.storage.remote_fetch.Parts`)."""

    def received(self, buf: memoryview, got: int) -> None: ...


class Exact:
    """The body of one request as it arrives: exactly ``size`` bytes (:func:`read_exact`,
    :func:`read_exact_blocking`). Each byte is copied once: with a ``sink`` (told as the
    bytes arrive, and handing out views of them) into a buffer allocated at once; without,
    the pieces are kept and joined at the end, so a server that promises much and sends
    little costs only what it sent."""

    __slots__ = ("buf", "got", "pieces", "sink", "size")

    def __init__(self, size: int, sink: Sink | None) -> None:
        self.size, self.sink, self.got = size, sink, 0
        # uninitialised memory (NumPy's, on huge pages when large): a zero-filled bytearray
        # of a long request costs a page fault per 4 KiB before the first byte lands
        self.buf = np.empty(size, np.uint8).data if sink is not None else None
        self.pieces: list[Any] = []

    def want(self) -> int:
        """Bytes still to come, at most one piece: what to ask the body for next."""
        return min(self.size - self.got, PIECE)

    def add(self, chunk: Any) -> None:
        """The body's next bytes (``ShortBody`` when there are none, ``LongBody`` past
        ``size``)."""
        n = len(chunk)
        if not n:
            raise ShortBody(f"the body ended early ({self.got} of {self.size} bytes)")
        if n > self.size - self.got:
            raise LongBody(f"the body holds more than the {self.size} bytes asked for")
        if self.buf is not None:
            self.buf[self.got : self.got + n] = chunk
            self.got += n
            self.sink.received(self.buf, self.got)  # type: ignore[union-attr]
        else:
            self.pieces.append(chunk)
            self.got += n

    def result(self, more: Callable[[], bool] | None) -> Bytes:
        """The bytes, once all are there; ``LongBody`` when ``more()`` says the body holds
        another byte."""
        if more is not None and more():
            raise LongBody(f"the body holds more than the {self.size} bytes asked for")
        return self.buf if self.buf is not None else bytearray().join(self.pieces)


async def read_exact(read: Read, size: int, sink: Sink | None = None, *,
                     more: Callable[[], bool] | None = None) -> Bytes:
    """Exactly ``size`` body bytes; ``read(n)`` gives the body's next bytes (at most ``n``, or
    one piece as it arrived: a piece past ``size`` is ``LongBody``, so a backend may hand
    out its buffered pieces without joining them); ``more()``, asked after the last one,
    says whether the body already holds another byte. ``ShortBody`` / ``LongBody``
    otherwise; the bytes are copied once (:class:`Exact`)."""
    body = Exact(size, sink)
    while body.got < size:
        body.add(await read(body.want()))
    return body.result(more)


def read_exact_blocking(read: Callable[[int], Any], size: int, sink: Sink | None = None, *,
                        more: Callable[[], bool] | None = None) -> Bytes:
    """:func:`read_exact` with a blocking ``read(n)`` (a client that waits in its own
    threads, outside the GIL)."""
    body = Exact(size, sink)
    while body.got < size:
        body.add(read(body.want()))
    return body.result(more)


async def read_at_most(read: Read, limit: int) -> bytearray:
    """The whole body when it holds at most ``limit`` bytes (``LongBody`` as soon as it
    holds one more; never more than ``limit`` + 1 byte read)."""
    buf = bytearray()
    while len(buf) <= limit:
        chunk = await read(min(limit + 1 - len(buf), PIECE))
        if not chunk:
            return buf
        buf += chunk
    raise LongBody(f"the body holds more than {limit} bytes")
