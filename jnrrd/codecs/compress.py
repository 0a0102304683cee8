"""Bounded compression primitives shared by the tile codecs and the core data encodings.

Four stream formats are supported (``NAMES``): ``gzip`` (RFC 1952), ``bz2`` (a bzip2 stream),
``zstd`` (a Zstandard frame) and ``lz4`` (the LZ4 *frame* format). Writers emit one member /
stream / frame; readers accept concatenations of them, frames without a content size, and cap
their output at the expected size (docs/codecs.md#bounded-decoding).

Every decoder here is bounded: it never produces more than ``expected + 1`` bytes, whatever a
frame header claims, so a decompression bomb costs at most the caller's expected size.
"""

from __future__ import annotations

import bz2
import threading
import warnings
import zlib
from collections.abc import Callable
from typing import IO, Any

import lz4.frame
import zstandard

from ..errors import DataError, JnrrdWarning, UnsupportedError
from . import gzip_fast

__all__ = [
    "NAMES",
    "PREFIX_NAMES",
    "compress",
    "decompress",
    "decompress_at_most",
    "zstd_compress",
]

NAMES = ("gzip", "bz2", "zstd", "lz4")
#: the names :func:`decompress_prefix` stops early for (the others decode whole, then cut)
PREFIX_NAMES = ("zstd", "lz4")

_DEFAULT_LEVEL = {"gzip": 6, "bz2": 9, "zstd": 3, "lz4": 0}
_LEVEL_RANGE = {"gzip": (0, 9), "bz2": (1, 9), "zstd": (-131072, 22), "lz4": (-65536, 16)}

_GZIP_MAGIC = b"\x1f\x8b"

# zstandard (de)compressor objects are not safe to share between threads running at the same
# time; one per thread keeps their (expensive to build) contexts reusable without locks.
_local = threading.local()


def _zstd_decompressor() -> zstandard.ZstdDecompressor:
    d = getattr(_local, "zstd_d", None)
    if d is None:
        d = _local.zstd_d = zstandard.ZstdDecompressor()
    return d


def _zstd_compressor(level: int, checksum: bool = False) -> zstandard.ZstdCompressor:
    cache = getattr(_local, "zstd_c", None)
    if cache is None:
        cache = _local.zstd_c = {}
    c = cache.get((level, checksum))
    if c is None:
        c = cache[(level, checksum)] = zstandard.ZstdCompressor(
            level=level, write_content_size=True, write_checksum=checksum
        )
    return c


def _check_name(name: str, what: str) -> None:
    if name not in NAMES:
        raise UnsupportedError(
            f"{what}unknown compression {name!r}; expected one of {', '.join(NAMES)}"
        )


def compress(name: str, data: bytes | memoryview, *, level: int | None = None) -> bytes:
    """Compress ``data`` as one gzip member (mtime 0), bz2 stream, zstd frame or lz4 frame."""
    _check_name(name, "")
    if level is None:
        level = _DEFAULT_LEVEL[name]
    lo, hi = _LEVEL_RANGE[name]
    if isinstance(level, bool) or not isinstance(level, int) or not lo <= level <= hi:
        raise UnsupportedError(f"{name} level {level!r} is not an integer in [{lo}, {hi}]")
    if name == "gzip":
        fast = gzip_fast.gzip_compress(data, level)  # libdeflate, when installed
        if fast is not None:
            return fast
        # zlib's gzip wrapper writes mtime 0 and no file name: deterministic output.
        c = zlib.compressobj(level, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if name == "zstd":
        return _zstd_compressor(level).compress(data)
    if name == "bz2":
        return bz2.compress(data, level)
    return lz4.frame.compress(data, compression_level=level, store_size=True)


def zstd_compress(data: bytes | memoryview, *, level: int, checksum: bool) -> bytes:
    """One zstd frame with content size (and a content checksum when asked)."""
    return _zstd_compressor(level, checksum).compress(data)


# --------------------------------------------------------------------------------------------
# Incremental decoders with a common shape: feed(data, max_length) -> bytes, plus eof,
# unused_data and whether more output is pending without more input.


class _Obj:
    """bz2 / lz4 decompressor objects (same max_length/needs_input protocol)."""

    def __init__(self, d: Any) -> None:
        self._d = d

    def feed(self, data: Any, max_length: int) -> bytes:
        return self._d.decompress(data, max_length=max_length)

    @property
    def eof(self) -> bool:
        return self._d.eof

    @property
    def unused_data(self) -> bytes:
        return self._d.unused_data

    @property
    def pending(self) -> bool:
        return not self._d.needs_input


class _Zlib(_Obj):
    """One gzip member (wbits 31) or zlib stream (wbits 15), bounded by max_length."""

    def __init__(self, wbits: int) -> None:
        super().__init__(zlib.decompressobj(wbits))

    def feed(self, data: Any, max_length: int) -> bytes:
        d = self._d
        tail = d.unconsumed_tail
        if tail:
            data = tail + data if len(data) else tail  # no copy of the tail when nothing is new
        return d.decompress(data, max_length)

    @property
    def pending(self) -> bool:
        return bool(self._d.unconsumed_tail)


def _factory(name: str, zlib_stream: bool) -> Callable[[], Any]:
    if name in ("gzip", "zlib"):
        wbits = 15 if zlib_stream else 31
        return lambda: _Zlib(wbits)
    if name == "bz2":
        return lambda: _Obj(bz2.BZ2Decompressor())
    return lambda: _Obj(lz4.frame.LZ4FrameDecompressor())


def _is_zlib(head: bytes) -> bool:
    # RFC 1950 header: CM 8, CINFO <= 7, FCHECK makes the 16-bit value a multiple of 31.
    return (
        len(head) >= 2
        and head[0] & 0x0F == 8
        and head[0] >> 4 <= 7
        and (head[0] << 8 | head[1]) % 31 == 0
    )


def _gzip_or_zlib(head: bytes, allow_zlib: bool, what: str) -> bool:
    """True when the stream is zlib rather than gzip (warns; DataError when not allowed)."""
    if head[:2] == _GZIP_MAGIC or not allow_zlib or not _is_zlib(head):
        return False
    warnings.warn(
        f"{what}gzip data is a zlib stream, not RFC 1952 gzip; accepted", JnrrdWarning,
        stacklevel=3,
    )
    return True


def _corrupt(name: str, what: str, exc: BaseException | str) -> DataError:
    return DataError(f"{what}corrupt {name} data: {exc}")


def _oversized(what: str, name: str, expected: int) -> DataError:
    return DataError(
        f"{what}{name} data decompresses to more than {expected} bytes; expected exactly"
        f" {expected}"
    )


def decompress(
    name: str,
    data: bytes | memoryview,
    expected: int,
    *,
    exact: bool = True,
    allow_zlib: bool = False,
    what: str = "",
    out: Any = None,
) -> Any:
    """Decompress ``data`` to ``expected`` bytes, never producing more than ``expected + 1``.

    ``exact=True``: the output must be exactly ``expected`` bytes (else ``DataError``).
    ``exact=False``: the first ``expected`` bytes are returned and the rest ignored; fewer is a
    ``DataError``. ``allow_zlib`` lets ``gzip`` accept a zlib stream, with a ``JnrrdWarning``.
    ``what`` prefixes messages (e.g. ``"vol.jnrrd: tile 17: "``). ``out``: a writable buffer
    of ``expected`` bytes gzip may decode into (libdeflate's path returns it; the result is
    new bytes otherwise).
    """
    _check_name(name, what)
    if expected < 0:
        raise UnsupportedError(f"{what}negative expected size {expected}")
    limit = expected + 1 if exact else expected
    buf, out = out, None
    if name == "zstd":
        out = _zstd_oneshot(data, limit, what)
        if out is None:
            out = _zstd_stream(data, limit, what)
    else:
        if name == "lz4":
            out = _lz4_oneshot(data, limit)
        elif name == "gzip":
            out = _gzip_oneshot(data, expected, exact, buf)
        if out is None:
            out = _drain(name, data, limit, allow_zlib, what)
    if len(out) < expected:
        raise DataError(
            f"{what}{name} data is short: decompresses to {len(out)} bytes; expected {expected}"
        )
    if len(out) > expected:
        if exact:
            raise _oversized(what, name, expected)
        out = out[:expected]
    return out


def _zstd_oneshot(data: Any, limit: int, what: str) -> bytes | None:
    """The fast path: one frame whose header states a content size within the limit.

    An empty first frame takes the streaming path: zstandard's one-shot decoder returns
    ``b""`` for it without looking at the frames that follow."""
    try:
        size = zstandard.frame_content_size(data)
    except zstandard.ZstdError as exc:
        raise _corrupt("zstd", what, exc) from None
    if size <= 0 or size > limit:
        return None
    try:
        return _zstd_decompressor().decompress(data, allow_extra_data=False)
    except zstandard.ZstdError:
        # More frames follow, or the frame is corrupt: the streaming path tells which.
        return None


def _gzip_oneshot(data: Any, expected: int, exact: bool, buf: Any = None) -> Any:
    """The fast path (libdeflate): one gzip member decoding to exactly ``expected`` bytes,
    followed (``exact``) by nothing or zero bytes only. Anything else (a second member,
    trailing bytes, a longer or shorter member, corrupt data) takes the streaming path, which
    accepts or reports it exactly as without libdeflate."""
    if not gzip_fast.available or not expected:
        return None
    out = bytearray(expected) if buf is None else buf
    res = gzip_fast.inflate_into(memoryview(data).cast("B"), memoryview(out).cast("B"))
    if res is None or res[1] != expected:
        return None
    used = res[0]
    view = memoryview(data).cast("B")
    if exact and used is not None and used < len(view):
        rest = view[used:]
        if rest[0] or rest.tobytes().strip(b"\x00"):
            return None  # more members or trailing bytes: the streaming path decides
    return out


def _lz4_oneshot(data: Any, limit: int) -> bytes | None:
    """The fast path: one frame whose header states a content size within the limit."""
    try:
        size = lz4.frame.get_frame_info(data)["content_size"]
        if not 0 < size <= limit:
            return None
        out, used = lz4.frame.decompress(data, return_bytes_read=True)
    except (RuntimeError, ValueError):
        return None  # corrupt or unusual: the incremental path reports it
    return out if used == len(data) and len(out) == size else None


def _zstd_stream(data: Any, limit: int, what: str) -> bytes:
    # Read in bounded pieces: ``limit`` may be a generous cap that real data never reaches.
    parts: list[bytes] = []
    n = 0
    try:
        reader = _zstd_decompressor().stream_reader(data, read_across_frames=True)
        while n < limit:
            chunk = reader.read(min(limit - n, 1 << 22))
            if not chunk:
                break
            parts.append(chunk)
            n += len(chunk)
    except zstandard.ZstdError as exc:
        raise _corrupt("zstd", what, exc) from None
    return parts[0] if len(parts) == 1 else b"".join(parts)


def zstd_into(data: bytes | memoryview, out: memoryview, *, exact: bool, what: str = ""
              ) -> None:
    """Decompress zstd ``data`` straight into ``out`` (a writable byte view).

    ``exact``: the data must decompress to exactly ``len(out)`` bytes; otherwise decoding
    stops once ``out`` is full (a prefix read). Short (or, exact, long) data is a
    ``DataError``; nothing past ``len(out) + 1`` bytes is ever produced.
    """
    need = len(out)
    n = 0
    try:
        reader = _zstd_decompressor().stream_reader(data, read_across_frames=True)
        while n < need:
            got = reader.readinto(out[n:])
            if not got:
                break
            n += got
        extra = exact and n == need and reader.read(1)
    except zstandard.ZstdError as exc:
        raise _corrupt("zstd", what, exc) from None
    if n < need:
        raise DataError(f"{what}zstd data is short: decompresses to {n} bytes; expected "
                        f"{'' if exact else 'at least '}{need}")
    if extra:
        raise _oversized(what, "zstd", need)


def decompress_prefix(name: str, data: bytes | memoryview, need: int, *, what: str = "",
                      out: Any = None) -> Any:
    """The first ``need`` bytes ``data`` decompresses to, decoding no further than that.

    For a tile whose selection ends early along its slowest axis. ``name`` is ``zstd`` or
    ``lz4`` (others decode fully and are cut); fewer than ``need`` bytes is a ``DataError``.
    ``out``: a writable buffer of ``need`` bytes zstd decodes into (and returns).
    """
    if name == "zstd":
        if out is None:
            out = bytearray(need)
        zstd_into(data, memoryview(out), exact=False, what=what)
        n = need
    elif name == "lz4":
        try:
            d = lz4.frame.LZ4FrameDecompressor()
            out = d.decompress(data, max_length=need)
        except RuntimeError as exc:
            raise _corrupt("lz4", what, exc) from None
        n = len(out)
    else:
        return decompress(name, data, need, exact=False, what=what)
    if n < need:
        raise DataError(f"{what}{name} data is short: decompresses to {n} bytes; expected at "
                        f"least {need}")
    return out


def decompress_at_most(
    name: str, data: bytes | memoryview, limit: int, *, what: str = ""
) -> bytes:
    """Decompress a stream of unknown size, ``DataError`` if it exceeds ``limit`` bytes.

    ``name`` is one of ``NAMES`` or ``"zlib"`` (an RFC 1950 stream, e.g. numcodecs.zlib).
    """
    if name == "zstd":
        out = _zstd_oneshot(data, limit + 1, what)
        if out is None:
            out = _zstd_stream(data, limit + 1, what)
    elif name == "zlib":
        out = _drain("gzip", data, limit + 1, False, what, zlib_stream=True)
    else:
        _check_name(name, what)
        out = _lz4_oneshot(data, limit + 1) if name == "lz4" else None
        if out is None:
            out = _drain(name, data, limit + 1, False, what)
    if len(out) > limit:
        raise DataError(f"{what}{name} data decompresses to more than {limit} bytes")
    return out


def _drain(
    name: str, data: Any, limit: int, allow_zlib: bool, what: str, *, zlib_stream: bool = False
) -> bytes:
    """Decode concatenated members/streams/frames, stopping at ``limit`` output bytes."""
    src = MemberInput(data)
    if src.exhausted():
        raise DataError(f"{what}{name} data is empty")
    zlib_stream = zlib_stream or (name == "gzip" and _gzip_or_zlib(src.head(2), allow_zlib, what))
    if zlib_stream:
        name = "zlib"
    make = _factory(name, zlib_stream)
    parts: list[bytes] = []
    n = 0
    try:
        d, piece = make(), src.take(None)  # the first member sees all of the input
        while True:
            chunk = d.feed(piece, limit - n)
            if chunk:
                parts.append(chunk)
                n += len(chunk)
            if n >= limit:
                break
            if d.eof:
                src.unread(d.unused_data)
                # Trailing zero bytes after the last member are tolerated (as gzip does).
                if src.zero_tail():
                    break
                d, piece = make(), src.take(src.first_piece())
                continue
            if d.pending:  # limit reached mid-member (cannot happen below limit)
                break
            piece = src.take(src.next_piece())
            if not piece:
                raise DataError(
                    f"{what}{name} data is truncated (the stream ends before its end marker)"
                )
    except (OSError, EOFError, RuntimeError, zlib.error) as exc:
        raise _corrupt(name, what, exc) from None
    if not parts:
        return b""
    return parts[0] if len(parts) == 1 else b"".join(parts)


class MemberInput:
    """Compressed input handed to a decoder in pieces, from a buffer or a file.

    A decoder that reaches the end of a member copies the input it did not use
    (``unused_data``): fed everything left each time, a flood of tiny members costs time
    quadratic in the input. So the first member of a buffer sees all of it (one call for the
    usual single member), and every later member starts with a small piece that doubles while
    the member goes on: the copy at a member's end is at most about the member's own size, and
    member iteration is linear. A file is read ``chunk_size`` bytes at a time.
    """

    FIRST = 64

    def __init__(self, data: Any = None, fileobj: IO[bytes] | None = None,
                 chunk_size: int = 1 << 20) -> None:
        view = memoryview(data if data is not None else b"")
        self._view = view.cast("B") if view.format != "B" or view.ndim != 1 else view
        self._pos = 0
        self._f = fileobj
        self._chunk = chunk_size
        self._size = chunk_size

    def _refill(self) -> bool:
        if self._pos < len(self._view):
            return True
        if self._f is None:
            return False
        more = self._f.read(self._chunk)
        self._view, self._pos = memoryview(more), 0
        return bool(more)

    def exhausted(self) -> bool:
        return not self._refill()

    def head(self, n: int) -> bytes:
        self._refill()
        return bytes(self._view[self._pos : self._pos + n])

    def first_piece(self) -> int:
        self._size = self.FIRST
        return self._size

    def next_piece(self) -> int:
        self._size = min(self._size * 2, max(self._chunk, self.FIRST))
        return self._size

    def take(self, size: int | None) -> memoryview:
        """The next ``size`` bytes at most (all of the current buffer when ``None``)."""
        if not self._refill():
            return memoryview(b"")
        end = len(self._view) if size is None else self._pos + size
        piece = self._view[self._pos : end]
        self._pos += len(piece)
        return piece

    def unread(self, rest: bytes) -> None:
        """Give back the input a decoder did not use (a suffix of what it was fed)."""
        if not rest:
            return
        if len(rest) <= self._pos:
            self._pos -= len(rest)
        else:  # it reaches back into an earlier file chunk (at most once per chunk)
            self._view = memoryview(bytes(rest) + self._view[self._pos :].tobytes())
            self._pos = 0

    def zero_tail(self) -> bool:
        """True at the end of the input, or when only zero bytes follow in the current
        buffer (padding after the last member, tolerated)."""
        if not self._refill():
            return True
        if self._view[self._pos] != 0:
            return False
        return not self._view[self._pos :].tobytes().strip(b"\x00")
