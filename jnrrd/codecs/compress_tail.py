"""The last bytes of a whole decompressed stream: classic NRRD's ``byte skip: -1`` with gzip
or bzip2 data (teem and ITK read it so: the data is the end of the decoded stream).

The stream is decoded once, in bounded pieces, into the output used as a ring buffer; at the
end the ring is rotated in place with bounded scratch memory. Memory is the output plus
O(chunk) however long the decoded stream is; its length is capped (``max_total``).
"""

from __future__ import annotations

import zlib
from typing import IO, Any

import numpy as np

from ..errors import DataError, UnsupportedError
from .compress import _check_name, _corrupt, _factory, _gzip_or_zlib

__all__ = ["decompress_tail_into", "rotate_left"]

#: scratch bytes the in-place rotation may use at once
_SCRATCH = 16 << 20


def decompress_tail_into(name: str, fileobj: IO[bytes], out: Any, *, max_total: int,
                         allow_zlib: bool = False, what: str = "",
                         chunk_size: int = 1 << 20) -> None:
    """Fill ``out`` with the last ``len(out)`` bytes of the whole decompressed stream.

    ``name`` is ``"gzip"`` or ``"bz2"``; concatenated members are one stream (as gzip and
    teem read them), zero padding after the last member is ignored. A stream that decodes to
    fewer bytes than ``out`` is a ``DataError``; one that decodes to more than ``max_total``
    bytes an ``UnsupportedError`` naming the cap; a stream cut before its end marker or
    corrupt a ``DataError``.
    """
    _check_name(name, what)
    if name not in ("gzip", "bz2"):
        raise UnsupportedError(f"{what}byte skip -1 is for gzip and bzip2 data, not {name}")
    buf = np.frombuffer(memoryview(out).cast("B"), dtype=np.uint8)
    n = buf.size
    first = fileobj.read(chunk_size)
    if not first:
        raise DataError(f"{what}{name} data is empty")
    make = _factory(name, name == "gzip" and _gzip_or_zlib(first[:2], allow_zlib, what))
    total = 0
    pending_in = first
    try:
        d = make()
        while True:
            chunk = d.feed(pending_in, chunk_size)
            pending_in = b""
            if chunk:
                if total + len(chunk) > max_total:
                    raise UnsupportedError(
                        f"{what}{name} data decompresses to more than the max_bytes cap "
                        f"({max_total}); byte skip -1 decodes the whole stream. Pass "
                        "max_bytes=... to allow it")
                _ring_write(buf, total, chunk)
                total += len(chunk)
            if d.eof:
                rest = d.unused_data or fileobj.read(chunk_size)
                if not rest or not rest.strip(b"\x00"):
                    break
                d = make()
                pending_in = rest
            elif not d.pending:
                pending_in = fileobj.read(chunk_size)
                if not pending_in:
                    raise DataError(f"{what}{name} data is truncated (the stream ends before "
                                    "its end marker)")
    except (OSError, EOFError, RuntimeError, zlib.error) as exc:
        raise _corrupt(name, what, exc) from None
    if total < n:
        raise DataError(f"{what}{name} data is short: decompresses to {total} bytes; byte skip "
                        f"-1 needs at least {n}")
    if n:
        rotate_left(buf, total % n)


def _ring_write(buf: np.ndarray, pos: int, chunk: bytes) -> None:
    """Write ``chunk`` (stream bytes ``pos...``) into the ring ``buf`` (index = pos mod n)."""
    n = buf.size
    if not n:
        return
    data = np.frombuffer(chunk, dtype=np.uint8)
    if data.size > n:
        pos += data.size - n
        data = data[-n:]
    start = pos % n
    first = min(n - start, data.size)
    buf[start:start + first] = data[:first]
    if first < data.size:
        buf[: data.size - first] = data[first:]


def rotate_left(a: np.ndarray, s: int, *, scratch: int | None = None) -> None:
    """Rotate the 1-D array ``a`` left by ``s`` in place (``a[:] = np.roll(a, -s)``), using at
    most ``scratch`` elements of extra memory at a time.

    Block swaps (Gries and Mills) shrink the problem while both parts exceed ``scratch``;
    then the smaller part goes through a scratch copy while the other moves in blocks.
    """
    cap = _SCRATCH if scratch is None else max(1, scratch)
    lo, n = 0, a.size
    s = s % n if n else 0
    while 0 < s < n:
        left, right = s, n - s
        if min(left, right) <= cap:
            part = a[lo:lo + n]
            if left <= right:
                tmp = part[:left].copy()
                _move(part, left, 0, right, cap)
                part[right:] = tmp
            else:
                tmp = part[left:].copy()
                _move(part, 0, right, left, cap)
                part[:right] = tmp
            return
        if left <= right:  # A B1 B2 -> B2 B1 A: A is in place at the end
            _swap(a, lo, lo + n - left, left, cap)
            n -= left
        else:  # A1 A2 B -> B A2 A1: B is in place at the front
            _swap(a, lo, lo + left, right, cap)
            lo += right
            n, s = left, left - right


def _move(a: np.ndarray, src: int, dst: int, count: int, block: int) -> None:
    """memmove within ``a`` in blocks (front to back when moving down, else back to front)."""
    if src > dst:
        for k in range(0, count, block):
            m = min(block, count - k)
            a[dst + k:dst + k + m] = a[src + k:src + k + m]
    elif src < dst:
        for k in range(count, 0, -block):
            m = min(block, k)
            a[dst + k - m:dst + k] = a[src + k - m:src + k]


def _swap(a: np.ndarray, i: int, j: int, count: int, block: int) -> None:
    """Swap the non-overlapping ranges ``a[i:i+count]`` and ``a[j:j+count]`` in blocks."""
    for k in range(0, count, block):
        m = min(block, count - k)
        tmp = a[i + k:i + k + m].copy()
        a[i + k:i + k + m] = a[j + k:j + k + m]
        a[j + k:j + k + m] = tmp
