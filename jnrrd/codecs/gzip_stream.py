"""One gzip member compressed on every core: parallel DEFLATE stitched into ONE stream.

A gzip data section (NRRD's ``encoding: gzip``, 3D Slicer's default) is one RFC 1952 member,
which every NRRD reader (teem, ITK/SimpleITK, pynrrd, jnrrd) decodes with one inflate call.
It is written here by several threads at once, pigz's technique:

- the data is cut into blocks of :data:`BLOCK_BYTES`; each block is deflated on its own with
  the previous block's last 32 KiB as its dictionary, so matches reach back across block
  boundaries as in one sequential stream, and ends with a sync flush: a non-final empty
  stored block that leaves the stream byte-aligned, so the blocks' outputs concatenate into
  one valid DEFLATE stream. The blocks go through zlib-ng (``zlib-ng`` package, the
  compressor ITK and SimpleITK use) where it is installed, else through zlib: both offer
  preset dictionaries and sync flushes (:func:`block_engine`);
- the last part of the data (the *tail*) goes through libdeflate (``deflate`` package) in
  one call at level 1, where libdeflate is about 1.5x faster than zlib-ng's level 2 and 2x
  faster than zlib's level 1 at the same size; it writes only complete streams (its last
  block is final, its end not byte-aligned), which is exactly what the end of the member
  needs. The caller reads the tail first and its job starts first, so it runs beside the
  blocks; its size balances the threads (:func:`tail_bytes`);
- one gzip header (mtime 0, OS unknown: the same bytes on every platform), and one trailer:
  the CRC-32 of all the data, combined from the blocks' own CRCs (:func:`crc32_combine`),
  and the size modulo 2**32.

zlib, zlib-ng and libdeflate release the GIL while compressing, so threads run in parallel.
This module starts no threads: the caller lends a pool's ``submit`` (one job per block, the
tail's job first), as :mod:`jnrrd.writing.stream` does from :mod:`jnrrd._threads`.
"""

from __future__ import annotations

import functools
import struct
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from itertools import chain
from types import ModuleType
from typing import Any

from . import gzip_fast

_zlib_ng: ModuleType | None
try:  # a core dependency, but zlib stands in where it could not be installed
    from zlib_ng import zlib_ng as _zlib_ng
except ImportError:  # pragma: no cover - exercised by monkeypatching ``zlib_ng_available``
    _zlib_ng = None

__all__ = ["BLOCK_BYTES", "DEFAULT_LEVEL", "TAIL_BYTES", "block_engine", "crc32_combine",
           "gzip_buffer", "gzip_pieces", "libdeflate_level", "tail_bytes"]

#: the compression level of a gzip data section when none is given (zlib's scale): level 1
#: is as small as SimpleITK's default (ITK's zlib-ng at its level 2, which is what level 1
#: runs here) and several times faster than zlib's level 6 (docs/nrrd.md, "gzip writing")
DEFAULT_LEVEL = 1
#: data per block (one task; 32 KiB of it primes the next block's dictionary)
BLOCK_BYTES = 4 << 20
#: the most data a streamed write holds for its libdeflate tail
TAIL_BYTES = 64 << 20
WINDOW = 32 << 10
#: False when the ``zlib-ng`` package is not installed (tests set it to force zlib)
zlib_ng_available = _zlib_ng is not None
#: libdeflate's speed at level 1 over the blocks' engine at zlib level 1, rounded down (an
#: underestimate only lets the tail's thread join the blocks at the end; docs/nrrd.md)
_SPEEDUP = {"zlib-ng": 1.4, "zlib": 1.8}
#: ... at the other levels with zlib (libdeflate two levels higher); zlib-ng's levels 2-9
#: are as fast as libdeflate's two levels higher or faster, so they get no tail
_OTHER_SPEEDUP = 1.3
#: ID1 ID2, CM deflate, no flags, mtime 0, XFL 0, OS 255 (unknown)
HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"


def block_engine(level: int) -> tuple[str, int]:
    """The engine that deflates the blocks at zlib ``level`` and its own level: zlib-ng
    (level 1 runs as zlib-ng's 2, its fast mode, as small as zlib's 1: zlib-ng's 1 is a
    quick mode about 40 % larger) or, without it, zlib."""
    if zlib_ng_available and level > 0:
        return "zlib-ng", 2 if level == 1 else level
    return "zlib", level


def libdeflate_level(level: int) -> int:
    """libdeflate's level for zlib ``level`` 1-9: 1 stays 1 (libdeflate's fastest mode is
    already as small as zlib's level 1), others are two higher, as for gzip tiles
    (:data:`jnrrd.codecs.gzip_fast.LEVEL_OFFSET`), so the output is never larger than zlib's."""
    return 1 if level == 1 else min(level + gzip_fast.LEVEL_OFFSET, 12)


def tail_bytes(total: int, level: int, threads: int, most: int | None = None) -> int:
    """How many bytes at the end of ``total`` go to libdeflate in one call, so that it ends
    with the ``threads - 1`` threads deflating the blocks before it (0 without libdeflate, at
    level 0, or where the blocks' engine is as fast; everything on one thread or for small
    data); at most ``most``."""
    if not gzip_fast.available or level == 0 or total == 0:
        return 0
    if threads <= 1 or total <= 2 * BLOCK_BYTES:
        tail = total
    else:
        engine = block_engine(level)[0]
        r = _SPEEDUP[engine] if level == 1 else _OTHER_SPEEDUP if engine == "zlib" else 0.0
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
    zdict: Any  # the 32 KiB before it (blocks), b"" at the start
    final: bool
    tail: bool


def _crc32(data: Any) -> int:
    return gzip_fast.crc32(data) if gzip_fast.available else zlib.crc32(data)


def _run(job: _Job, level: int) -> tuple[Any, int, int]:
    """(compressed bytes, CRC-32, length) of one job."""
    crc = _crc32(job.data)
    if job.tail:
        out = gzip_fast.deflate_raw(job.data, libdeflate_level(level))
        if out is not None:
            return out, crc, len(job.data)
    name, lvl = block_engine(level)
    mod: Any = _zlib_ng if name == "zlib-ng" else zlib
    args = (lvl, mod.DEFLATED, -15, 8, mod.Z_DEFAULT_STRATEGY)
    c = mod.compressobj(*args, zdict=job.zdict) if len(job.zdict) else mod.compressobj(*args)
    flush = mod.Z_FINISH if job.final else mod.Z_SYNC_FLUSH
    return c.compress(job.data) + c.flush(flush), crc, len(job.data)


def _blocks(pieces: Iterable[Any], total: int, final: bool) -> Iterator[_Job]:
    """Cut the data (``pieces`` in order, ``total`` bytes) into blocks; a block inside one
    piece is a view of it, one across pieces a joined copy. ``final``: the last block ends
    the stream (no tail follows)."""
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
            n = min(BLOCK_BYTES, total - pos)
            if nheld < n:
                break
            data = take(n)
            pos += n
            yield _Job(data, prev[-WINDOW:], final and pos == total, False)
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


Submit = Callable[[Callable[[], Any]], "Future[Any]"]


def gzip_pieces(pieces: Iterable[Any], total: int, level: int, *, threads: int,
                submit: Submit, tail: Any = b"", ahead: int | None = None) -> Iterator[Any]:
    """One gzip member of ``total`` bytes: ``pieces`` (read lazily, in order), then ``tail``
    (the member's last bytes, read by the caller first: :func:`tail_bytes` says how many),
    yielded as it is compressed. ``submit(fn)`` runs ``fn`` on a pool of ``threads`` threads
    and returns its future; the tail's job is submitted first, then the blocks', at most
    ``ahead`` (default ``2 * threads``) of them not yet yielded: memory stays a few blocks
    and the tail, whatever ``total``."""
    tail = memoryview(tail).cast("B")
    last = submit(functools.partial(_run, _Job(tail, b"", True, True), level)) \
        if len(tail) else None
    jobs = _blocks(pieces, total - len(tail), final=last is None)
    limit = max(1, 2 * threads if ahead is None else ahead)

    def results() -> Iterator[tuple[Any, int, int]]:
        pending: deque[Future[Any]] = deque()
        try:
            for job in jobs:
                pending.append(submit(functools.partial(_run, job, level)))
                if len(pending) >= limit:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
            if last is not None:
                yield last.result()
        finally:
            for f in pending:
                f.cancel()
            if last is not None:
                last.cancel()

    yield from _member(results(), total)


def gzip_buffer(data: Any, level: int, *, threads: int, submit: Submit) -> Iterator[Any]:
    """One gzip member of the bytes-like ``data`` held in memory (read in place, no copy),
    yielded in order as it is compressed (:func:`gzip_pieces`; the tail's output is the only
    one held to the end, and its size balances the threads)."""
    view = memoryview(data).cast("B")
    total = len(view)
    split = total - tail_bytes(total, level, threads)
    return gzip_pieces([view[:split]], total, level, threads=threads, submit=submit,
                       tail=view[split:], ahead=4 * threads)
