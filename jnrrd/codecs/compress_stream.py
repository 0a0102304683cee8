"""Decoding a compressed data section from a file straight into its output.

:func:`decompress_stream_into` reads the stream ``chunk_size`` bytes at a time and writes the
decoded bytes into a preallocated buffer or a :class:`GrowingBuffer`, which allocates memory
only as decoded bytes arrive (for a claim the compressed size does not make plausible: a
short stream that claims gigabytes then fails having allocated only what it produced).
Multi-frame zstd sections written by this library decode frame-parallel into a preallocated
buffer, on threads the caller lends (``map_frames``: codecs start no threads of their own).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Iterable
from typing import IO, Any

import numpy as np
import zstandard

from .._platform import map_readonly, pread
from ..errors import DataError, UnsupportedError
from . import gzip_fast
from .compress import (
    MemberInput,
    _check_name,
    _corrupt,
    _factory,
    _gzip_or_zlib,
    _zstd_decompressor,
)

__all__ = ["FrameMap", "GrowingBuffer", "decompress_stream_into", "zstd_claim_backed"]

#: ``map_frames(fn, frames)``: runs ``fn`` on every frame, yielding in order (``map`` or a
#: thread pool's map)
FrameMap = Callable[[Callable[[Any], None], Iterable[Any]], Iterable[Any]]


class GrowingBuffer:
    """``size`` output bytes held in blocks allocated in order as they are written.

    Blocks start at 1 MiB and double up to 64 MiB, so the memory held is at most about twice
    what was written (plus 1 MiB), whatever ``size`` claims.
    """

    FIRST, LARGEST = 1 << 20, 64 << 20

    def __init__(self, size: int) -> None:
        self.size = size
        self._blocks: list[np.ndarray] = []
        self._end = 0  # bytes covered by the blocks so far

    def __len__(self) -> int:
        return self.size

    def window(self, at: int) -> memoryview:
        """A writable view from byte ``at`` to the end of its block; ``at`` is the number of
        bytes written so far (output is written in order)."""
        if at >= self._end and self._end < self.size:
            grow = min(self.LARGEST, self.FIRST << len(self._blocks), self.size - self._end)
            self._blocks.append(np.empty(grow, np.uint8))
            self._end += grow
        last = self._blocks[-1] if self._blocks else np.empty(0, np.uint8)
        return last.data[len(last) - (self._end - at):]

    def write(self, at: int, data: Any) -> None:
        data = memoryview(data).cast("B")
        while len(data):
            w = self.window(at)
            n = min(len(w), len(data))
            if not n:
                raise ValueError("write past the end of a GrowingBuffer")
            w[:n] = data[:n]
            data, at = data[n:], at + n

    def move_into(self, out: memoryview) -> None:
        """Copy everything into ``out`` (``size`` bytes), freeing each block as it goes."""
        at = 0
        self._blocks.reverse()
        while self._blocks:
            b = self._blocks.pop()
            out[at : at + len(b)] = b.data
            at += len(b)
        self._end = 0


class _Fixed:
    """A preallocated output with the :class:`GrowingBuffer` interface."""

    def __init__(self, view: memoryview) -> None:
        self.view = view

    def __len__(self) -> int:
        return len(self.view)

    def window(self, at: int) -> memoryview:
        return self.view[at:]

    def write(self, at: int, data: Any) -> None:
        self.view[at : at + len(data)] = data


def decompress_stream_into(
    name: str,
    fileobj: IO[bytes],
    out: Any,
    *,
    skip: int = 0,
    allow_zlib: bool = False,
    what: str = "",
    chunk_size: int = 1 << 20,
    map_frames: FrameMap = map,
) -> int:
    """Fill ``out`` exactly from the compressed stream in ``fileobj``, after skipping ``skip``.

    ``out`` is a writable buffer or a :class:`GrowingBuffer`. Compressed input is read
    ``chunk_size`` bytes at a time, so memory is O(chunk_size) besides ``out``. Whatever
    follows the needed bytes is ignored. A stream that ends early or is corrupt is a
    ``DataError``. ``map_frames(fn, frames)`` decodes the frames of a multi-frame zstd
    section (in order; default: one after the other in this thread; the reader passes a
    two-thread map from :mod:`jnrrd._threads`).

    Returns how many decompressed bytes the gzip/bzip2/lz4 member holding the end of the data
    has past it (counted up to the data's size; 0 when it ends with the data, and for zstd),
    so a caller can warn about data that may sit at the stream's end.
    """
    _check_name(name, what)
    if skip < 0:
        raise UnsupportedError(f"{what}negative byte skip {skip}")
    sink = out if isinstance(out, GrowingBuffer) else _Fixed(memoryview(out).cast("B"))
    need = skip + len(sink)
    if name == "zstd":
        if not skip and isinstance(sink, _Fixed) and _zstd_frames_into(fileobj, sink.view,
                                                                      what, map_frames):
            return 0
        _zstd_stream_into(fileobj, sink, skip, need, what, chunk_size)
        return 0
    if (name == "gzip" and not skip and isinstance(sink, _Fixed)
            and _gzip_file_into(fileobj, sink.view)):
        return 0  # libdeflate decoded the whole member to exactly the data's size
    src = MemberInput(fileobj=fileobj, chunk_size=chunk_size)
    if src.exhausted():
        raise DataError(f"{what}{name} data is empty")
    make = _factory(name, name == "gzip" and _gzip_or_zlib(src.head(2), allow_zlib, what))
    pos, extra = _members_into(make, src, sink, skip, need, name, what, chunk_size)
    if pos < need:
        raise DataError(
            f"{what}{name} data is short: decompresses to {pos} bytes; expected {need}"
            + (f" ({skip} skipped + {len(sink)})" if skip else "")
        )
    return extra


def _members_into(make: Any, src: MemberInput, sink: Any, skip: int, need: int, name: str,
                  what: str, chunk_size: int) -> tuple[int, int]:
    """Decode members from ``src`` into ``sink`` until ``need`` bytes (skipped ones
    included) are produced or the input ends; returns how many were produced and how many
    more the last member holds (:func:`_finish_member`)."""
    pos = extra = 0
    try:
        d = make()
        piece: bytes | memoryview = src.take(None)
        while pos < need:
            chunk = d.feed(piece, min(chunk_size, need - pos))
            piece = b""
            if chunk:
                lo, hi = max(pos, skip), pos + len(chunk)
                if hi > lo:
                    sink.write(lo - skip, memoryview(chunk)[lo - pos :])
                pos = hi
            if pos >= need:
                extra = _finish_member(d, src, need, name, what)
                break
            if d.eof:
                src.unread(d.unused_data)
                if src.zero_tail():
                    break
                d, piece = make(), src.take(src.first_piece())
            elif not d.pending:
                piece = src.take(src.next_piece())
                if not piece:
                    break
    except (OSError, EOFError, RuntimeError, zlib.error) as exc:
        raise _corrupt(name, what, exc) from None
    return pos, extra


def _finish_member(d: Any, src: MemberInput, budget: int, name: str, what: str) -> int:
    """The data is complete: read on to the member's end marker (gzip CRC-32 and length,
    bzip2 stream CRC, lz4 end mark) so a file cut inside it is reported, not silently taken.

    Decompressed bytes past the data are ignored (NRRD §5); past ``budget`` of them the rest of
    the member is not decoded at all, so a long tail costs bounded time. Returns how many such
    bytes were met (at most a little over ``budget``).
    """
    extra = 0
    piece: Any = b""
    while not d.eof:
        if not d.pending:
            piece = src.take(src.next_piece())
            if not piece:
                raise DataError(
                    f"{what}{name} data is truncated (the stream ends before its end marker)"
                )
        extra += len(d.feed(piece, 1 << 16))
        piece = b""
        if extra > budget:
            return extra
    return extra


def _gzip_file_into(fileobj: IO[bytes], out: memoryview) -> bool:
    """libdeflate's one-shot inflate of the gzip member at the file's position into ``out``,
    its compressed bytes read through a memory map of the file (not copied into memory).

    True when that member decoded to exactly ``len(out)`` bytes (what follows it is ignored,
    as on the streaming path); False when this path does not apply or libdeflate refused
    (then the streaming path decodes, or reports the error, as without libdeflate).
    """
    if not gzip_fast.available or not len(out):
        return False
    span = _file_span(fileobj)
    if span is None or span[2] < 18:
        return False
    fd, start, _size = span
    try:
        # MAP_POPULATE where the system has it (Linux): the page tables of the whole map are
        # filled in one call, not one page fault per 4 KiB while libdeflate reads (a quarter
        # less time)
        mm = map_readonly(fd)
    except (OSError, ValueError):
        return False
    try:
        with memoryview(mm) as view, view[start:] as data:
            res = gzip_fast.inflate_into(data, out)
    finally:
        mm.close()
    if res is None or res[1] != len(out):
        return False
    fileobj.seek(start + res[0] if res[0] is not None else start + _size)
    return True


_ZSTD_MAGIC = 0xFD2FB528
#: a data section is decoded frame-parallel when it holds at least this many frames
_PARALLEL_FRAMES = 2
#: the most one compressed zstd block decodes to (RFC 8878 §3.1.1.2.4)
_ZSTD_BLOCK_MAX = 128 << 10


def _zstd_frame_index(fd: int, start: int, size: int, need: int, min_frames: int = 2
                      ) -> list[tuple[int, int, int]] | None:
    """``(offset, compressed length, content size)`` of the zstd frames from ``start`` that
    hold the first ``need`` bytes, found by walking frame and block headers (RFC 8878 §3.1)
    with small ``pread`` calls; ``None`` when the layout does not allow parallel decoding
    (a frame without a content size, skippable frames, fewer than ``min_frames`` frames, a
    content size more than its blocks can produce, anything unexpected)."""
    frames: list[tuple[int, int, int]] = []
    pos, total = start, 0
    while total < need:
        head = pread(fd, 18, pos)
        if len(head) < 6 or int.from_bytes(head[:4], "little") != _ZSTD_MAGIC:
            return None
        try:
            params = zstandard.get_frame_parameters(head)
            hsize = zstandard.frame_header_size(head)
        except zstandard.ZstdError:
            return None
        content = params.content_size
        if content <= 0 or content >= 2**62:  # unknown size: sequential decoding
            return None
        p, most = pos + hsize, 0
        while True:
            b = pread(fd, 3, p)
            if len(b) < 3:
                return None
            word = int.from_bytes(b, "little")
            last, kind, bsize = word & 1, (word >> 1) & 3, word >> 3
            if kind == 3:
                return None  # reserved block type: let the decoder report it
            p += 3 + (1 if kind == 1 else bsize)
            most += _ZSTD_BLOCK_MAX if kind == 2 else bsize  # raw and RLE state their size
            if last:
                break
            if p > start + size:
                return None
        if params.has_checksum:
            p += 4
        if p > start + size or content > most:
            return None
        frames.append((pos, p - pos, content))
        total += content
        pos = p
    return frames if len(frames) >= min_frames else None


def _file_span(fileobj: IO[bytes]) -> tuple[int, int, int] | None:
    """(descriptor, current position, bytes from there to the end) of a real file that
    :func:`jnrrd._platform.pread` can read, else None."""
    try:
        fd = fileobj.fileno()
        start = fileobj.tell()
        return fd, start, os.fstat(fd).st_size - start
    except (AttributeError, OSError, ValueError):
        return None


def zstd_claim_backed(fileobj: IO[bytes], need: int) -> bool:
    """True when the zstd frames from the current position state content sizes adding up
    to ``need`` bytes, and their block headers (walked, not decoded) can produce them."""
    span = _file_span(fileobj)
    return span is not None and _zstd_frame_index(*span, need, min_frames=1) is not None


def _zstd_frames_into(fileobj: IO[bytes], out: memoryview, what: str,
                      map_frames: FrameMap = map) -> bool:
    """Decode a multi-frame zstd data section through ``map_frames`` (two threads when the
    reader lends them), each frame straight into its place in ``out``. False when this path
    does not apply (then decode sequentially)."""
    span = _file_span(fileobj)
    if span is None:
        return False
    fd, start, size = span
    frames = _zstd_frame_index(fd, start, size, len(out))
    if frames is None:
        return False
    places, at = [], 0
    for off, length, content in frames:
        places.append((off, length, at, min(content, len(out) - at)))
        at += content

    def one(place: tuple[int, int, int, int]) -> None:
        off, length, lo, n = place
        data = pread(fd, length, off)
        try:
            reader = _zstd_decompressor().stream_reader(data)
            got = 0
            view = out[lo : lo + n]
            while got < n:
                k = reader.readinto(view[got:])
                if not k:
                    break
                got += k
        except zstandard.ZstdError as exc:
            raise _corrupt("zstd", what, exc) from None
        if got < n:
            raise DataError(f"{what}zstd frame at byte {off} is short: {got} of {n} bytes")

    for _ in map_frames(one, places):
        pass
    fileobj.seek(frames[-1][0] + frames[-1][1])
    return True


def _zstd_stream_into(
    fileobj: IO[bytes], sink: Any, skip: int, need: int, what: str, chunk_size: int
) -> None:
    pos = 0
    try:
        reader = _zstd_decompressor().stream_reader(
            fileobj, read_size=chunk_size, read_across_frames=True, closefd=False
        )
        scratch = bytearray(min(chunk_size, skip)) if skip else None
        while pos < skip:
            assert scratch is not None
            got = reader.readinto(memoryview(scratch)[: min(len(scratch), skip - pos)])
            if not got:
                break
            pos += got
        while pos < need and pos >= skip:
            got = reader.readinto(sink.window(pos - skip))
            if not got:
                break
            pos += got
    except zstandard.ZstdError as exc:
        raise _corrupt("zstd", what, exc) from None
    if pos < need:
        raise DataError(
            f"{what}zstd data is short: decompresses to {pos} bytes; expected {need}"
            + (f" ({skip} skipped + {len(sink)})" if skip else "")
        )
