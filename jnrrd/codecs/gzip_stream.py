"""One gzip member compressed on every core: parallel DEFLATE stitched into ONE stream.

A gzip data section (NRRD's ``encoding: gzip``, 3D Slicer's default) is one RFC 1952 member,
which every NRRD reader (teem, ITK/SimpleITK, pynrrd, jnrrd) decodes with one inflate call.
It is written here by several threads at once, pigz's technique:

- the data is cut into blocks of :data:`BLOCK_BYTES`; each block is deflated on its own
  (zlib, raw DEFLATE) with the previous block's last 32 KiB as its dictionary, so matches
  reach back across block boundaries as in one sequential stream, and ends with a sync
  flush: a non-final empty stored block that leaves the stream byte-aligned, so the blocks'
  outputs concatenate into one valid DEFLATE stream;
- the last part of the data (the *tail*) goes through libdeflate (``deflate`` package) in
  one call when it is installed: libdeflate is about 2.5x faster than zlib but writes only
  complete streams (its last block is final, its end not byte-aligned), which is exactly
  what the end of the member needs. Its size balances the threads (:func:`tail_bytes`);
- one gzip header (mtime 0, OS unknown: the same bytes on every platform), and one trailer:
  the CRC-32 of all the data, combined from the blocks' own CRCs (:func:`crc32_combine`),
  and the size modulo 2**32.

Both zlib and libdeflate release the GIL while compressing, so threads run in parallel. This
module starts no threads: the caller lends them (``run_all``, ``ordered``), as
:mod:`jnrrd.writing.stream` does from :mod:`jnrrd._threads`.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

from . import gzip_fast

__all__ = ["BLOCK_BYTES", "DEFAULT_LEVEL", "TAIL_BYTES", "crc32_combine", "gzip_buffer",
           "gzip_pieces", "libdeflate_level", "tail_bytes"]

#: the compression level of a gzip data section when none is given (zlib's scale): level 1
#: is as small as SimpleITK's default (ITK's zlib-ng at its level 2) and several times faster
#: than zlib's level 6 (docs/nrrd.md, "gzip writing")
DEFAULT_LEVEL = 1
#: data per zlib block (one task; 32 KiB of it primes the next block's dictionary)
BLOCK_BYTES = 4 << 20
#: the most data a streamed write holds for its libdeflate tail
TAIL_BYTES = 64 << 20
WINDOW = 32 << 10
#: libdeflate's speed over zlib's at a zlib level (level 1: libdeflate 1 against zlib 1)
_SPEEDUP = {1: 2.5}
_OTHER_SPEEDUP = 1.3
#: ID1 ID2, CM deflate, no flags, mtime 0, XFL 0, OS 255 (unknown)
HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"


def libdeflate_level(level: int) -> int:
    """libdeflate's level for zlib ``level`` 1-9: 1 stays 1 (libdeflate's fastest mode is
    already smaller than zlib's level 1), others are two higher, as for gzip tiles
    (:data:`jnrrd.codecs.gzip_fast.LEVEL_OFFSET`), so the output is never larger than zlib's."""
    return 1 if level == 1 else min(level + gzip_fast.LEVEL_OFFSET, 12)


def tail_bytes(total: int, level: int, threads: int, most: int | None = None) -> int:
    """How many bytes at the end of ``total`` go to libdeflate in one call, so that it ends
    with the ``threads - 1`` threads deflating the blocks before it (0 without libdeflate or
    at level 0; everything on one thread or for small data); at most ``most``."""
    if not gzip_fast.available or level == 0 or total == 0:
        return 0
    if threads <= 1 or total <= 2 * BLOCK_BYTES:
        tail = total
    else:
        r = _SPEEDUP.get(level, _OTHER_SPEEDUP)
        tail = int(total * r / (r + threads - 1))
    return tail if most is None else min(tail, most)


# --------------------------------------------------------------------------------------------
# CRC-32 of a concatenation from the parts' CRCs (GF(2) polynomial arithmetic, as zlib's
# crc32_combine, which Python's zlib does not expose)

_POLY = 0xEDB88320  # x^32 + ... reflected


def _mult(a: int, b: int) -> int:
    """a * b modulo the CRC polynomial (reflected bit order)."""
    m, p = 1 << 31, 0
    while m:
        if a & m:
            p ^= b
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1
        m >>= 1
    return p


def _x_pow_2k() -> list[int]:
    out, p = [], 1 << 30  # x^1
    for _ in range(32):
        out.append(p)
        p = _mult(p, p)
    return out


_X2K = _x_pow_2k()  # x^(2^k) mod P


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """The CRC-32 of ``A + B`` from ``crc1 = crc32(A)``, ``crc2 = crc32(B)``, ``len(B)``."""
    p, k, n = 1 << 31, 3, len2  # x^(8 * len2): the bits of B shift A's remainder
    while n:
        if n & 1:
            p = _mult(_X2K[k & 31], p)
        n >>= 1
        k += 1
    return _mult(p, crc1) ^ crc2


# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Job:
    data: Any  # a bytes-like object
    zdict: Any  # the 32 KiB before it (zlib blocks), b"" at the start
    final: bool
    tail: bool


def _run(job: _Job, level: int) -> tuple[Any, int, int]:
    """(compressed bytes, CRC-32, length) of one job."""
    crc = zlib.crc32(job.data)
    if job.tail:
        out = gzip_fast.deflate_raw(job.data, libdeflate_level(level))
        if out is not None:
            return out, crc, len(job.data)
    args = (level, zlib.DEFLATED, -15, 8, zlib.Z_DEFAULT_STRATEGY)
    c = zlib.compressobj(*args, zdict=job.zdict) if len(job.zdict) else zlib.compressobj(*args)
    flush = zlib.Z_FINISH if job.final else zlib.Z_SYNC_FLUSH
    return c.compress(job.data) + c.flush(flush), crc, len(job.data)


def _jobs(pieces: Iterable[Any], total: int, tail: int) -> Iterator[_Job]:
    """Cut the data (``pieces`` in order, ``total`` bytes) into zlib blocks and the tail;
    a block inside one piece is a view of it, one across pieces a joined copy."""
    split = total - tail
    held: list[memoryview] = []
    nheld = pos = 0
    prev: Any = b""

    def take(n: int) -> Any:
        nonlocal nheld
        first = held[0]
        if len(first) >= n:
            out: Any = first[:n]
            if len(first) == n:
                held.pop(0)
            else:
                held[0] = first[n:]
        else:
            parts, need = [], n
            while need:
                v = held.pop(0)
                if len(v) > need:
                    held.insert(0, v[need:])
                    v = v[:need]
                parts.append(v)
                need -= len(v)
            out = b"".join(parts)
        nheld -= n
        return out

    for piece in chain(pieces, [b""]):
        view = memoryview(piece).cast("B") if len(piece) else memoryview(b"")
        if len(view):
            held.append(view)
            nheld += len(view)
        if pos + nheld > total:
            raise ValueError(f"gzip data longer than the {total} bytes announced")
        while pos < total:
            is_tail = pos >= split
            n = total - pos if is_tail else min(BLOCK_BYTES, split - pos)
            if nheld < n:
                break
            data = take(n)
            pos += n
            yield _Job(data, b"" if is_tail else prev[-WINDOW:], pos == total, is_tail)
            prev = data
    if pos < total:
        raise ValueError(f"gzip data shorter ({pos + nheld} bytes) than the {total} announced")


def _member(results: Iterable[tuple[Any, int, int]], total: int) -> Iterator[Any]:
    """The header, the jobs' outputs in order, the trailer (combined CRC, size mod 2^32)."""
    yield HEADER
    crc = 0
    if total == 0:
        yield b"\x03\x00"  # one empty final block (fixed Huffman: the end-of-block code)
    for out, c, n in results:
        crc = crc32_combine(crc, c, n)
        yield out
    yield struct.pack("<II", crc, total & 0xFFFFFFFF)


def gzip_buffer(data: Any, level: int, *, threads: int,
                run_all: Callable[[Sequence[Callable[[], None]]], None]) -> list[Any]:
    """One gzip member of the bytes-like ``data`` held in memory (read in place, no copy),
    as a list of byte strings to write in order. ``run_all(tasks)`` runs closures on
    ``threads`` threads (the libdeflate tail is the first task, so it starts at once)."""
    view = memoryview(data).cast("B")
    total = len(view)
    jobs = list(_jobs([view], total, tail_bytes(total, level, threads)))
    results: list[Any] = [None] * len(jobs)

    def task(i: int) -> Callable[[], None]:
        def run() -> None:
            results[i] = _run(jobs[i], level)
        return run

    order = sorted(range(len(jobs)), key=lambda i: not jobs[i].tail)
    run_all([task(i) for i in order])
    return list(_member(results, total))


def gzip_pieces(pieces: Iterable[Any], total: int, level: int, *, threads: int,
                ordered: Callable[[Callable[[Any], Any], Iterable[Any]], Iterable[Any]]
                ) -> Iterator[Any]:
    """One gzip member of ``total`` bytes arriving as ``pieces`` (read lazily, in order),
    yielded as it is compressed; ``ordered(fn, jobs)`` maps ``fn`` over the jobs on threads,
    in order, taking only a few jobs ahead (memory stays bounded: a few blocks and at most
    :data:`TAIL_BYTES` of tail, whatever ``total``)."""
    tail = tail_bytes(total, level, threads, TAIL_BYTES)
    jobs = _jobs(pieces, total, tail)
    yield from _member(ordered(lambda job: _run(job, level), jobs), total)
