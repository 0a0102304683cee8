"""Response bodies read with memory bounded by the request, whatever the server sends.

A server may answer a ranged request with the right status and ``Content-Range`` and then an
endless body (no length, a huge ``Content-Length``, chunked, or a trickle). A body is
therefore never read "to its end": :func:`read_exact` reads exactly the bytes the request
asked for, a bounded piece at a time, and then looks (without waiting) for one byte more; a
body that holds more is an error, and the caller drops the connection instead of draining it.
:func:`read_at_most` reads a body of unknown length up to a limit + 1 byte. Memory is the
request's size plus one piece (:data:`PIECE`).

Backend-neutral: each backend passes its own ``read(n)`` coroutine (aiohttp's
``content.read``, a botocore streaming body's ``read``) and says how it drops a connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .validators import Validator

__all__ = ["PIECE", "Answer", "Bytes", "LongBody", "Retry", "ShortBody", "read_at_most",
           "read_exact"]

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


async def read_exact(read: Read, size: int, sink: Sink | None = None, *,
                     more: Callable[[], bool] | None = None) -> Bytes:
    """Exactly ``size`` body bytes; ``read(n)`` gives the body's next bytes (at most ``n``, or
    one piece as it arrived: a piece past ``size`` is ``LongBody``, so a backend may hand
    out its buffered pieces without joining them); ``more()``, asked after the last one,
    says whether the body already holds another byte. ``ShortBody`` / ``LongBody``
    otherwise. Each byte is copied once: with a ``sink`` (told as the bytes arrive, and
    handing out views of them) into a buffer allocated at once; without, the pieces are kept
    and joined at the end, so a server that promises much and sends little costs only what
    it sent."""
    # uninitialised memory (NumPy's, on huge pages when large): a zero-filled bytearray of a
    # long request costs a page fault per 4 KiB before the first byte lands
    buf = np.empty(size, np.uint8).data if sink is not None else None
    pieces: list[Any] = []
    got = 0
    while got < size:
        chunk = await read(min(size - got, PIECE))
        n = len(chunk)
        if not n:
            raise ShortBody(f"the body ended early ({got} of {size} bytes)")
        if n > size - got:
            raise LongBody(f"the body holds more than the {size} bytes asked for")
        if buf is not None:
            buf[got : got + n] = chunk
            got += n
            sink.received(buf, got)  # type: ignore[union-attr]
        else:
            pieces.append(chunk)
            got += n
    if more is not None and more():
        raise LongBody(f"the body holds more than the {size} bytes asked for")
    return buf if buf is not None else bytearray().join(pieces)


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
