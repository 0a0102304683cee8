"""The untiled data section: attached or detached, skips, encodings
(docs/format.md#encodings-and-endianness, #where-the-data-is).

Reading never allocates before the file is known to hold enough bytes (raw), decompresses in
bounded pieces straight into the output (compressed), and serves ``open()`` on raw data through
a memory map. Detached data files are keys of the header directory's store. (Writing the data
section is :mod:`jnrrd.writing.stream`.)
"""

from __future__ import annotations

import io
import math
import os
import threading
import warnings
from typing import IO, Any

import numpy as np

from .._threads import zstd_frame_map
from ..codecs.compress_stream import GrowingBuffer, decompress_stream_into, zstd_claim_backed
from ..codecs.encodings import (
    COMPRESSED,
    bfloat16_words,
    parse_ascii,
    parse_hex,
)
from ..dtypes import storage_dtype, to_user, user_dtype
from ..errors import DataError, HeaderError, JnrrdWarning, UnsupportedError, where
from ..policy import Policy
from ..storage.local import LocalStore, is_url, open_resolved
from ..tiling.grid import AxisSel
from .prefault import populating
from .spare_maps import empty

__all__ = ["UntiledData", "data_paths", "read_untiled"]



def data_paths(core: Any, store: LocalStore | None, policy: Policy, source: Any = None
               ) -> list[str] | None:
    """Detached data files, in order, resolved as keys of ``store`` (the header's directory;
    ``None`` when the header came from a stream without a path). ``None`` for attached data."""
    names: list[str]
    if core.data_file is not None:
        names, field = [core.data_file], "data_file"
    elif core.data_files is not None:
        names, field = list(core.data_files), "data_files"
    elif core.data_file_pattern is not None:
        names = core.data_file_pattern.file_names(max_files=policy.max_files, source=source)
        field = "data_file_pattern"
    else:
        return None
    if len(names) > policy.max_files:
        raise UnsupportedError(f"{where(source, field)}{len(names)} files exceed the "
                               f"max_files cap ({policy.max_files})")
    if not names:
        raise HeaderError(f"{where(source, field)}names no data file")
    if store is None:
        raise UnsupportedError(f"{where(source, field)}detached data needs the header's path; "
                               "open the file by path, not through a file object")
    paths = [store.path(n, field=field) for n in names]
    if getattr(store, "remote", False):  # URLs, opened through the policy's opener
        paths = [store.url(p) for p in paths]
    return paths


def _open_data(path: str, core: Any, policy: Policy, source: Any) -> IO[bytes]:
    """Open one detached data file; a missing one is a ``DataError`` naming the field (as a
    missing external tile is, docs/format.md#sparse-tiles)."""
    field = ("data_file" if core.data_file is not None
             else "data_files" if core.data_files is not None else "data_file_pattern")
    try:
        return open_resolved(path, policy, what=f"{where(source, field)}data file ")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
        raise DataError(f"{where(source, field)}data file {path!r} cannot be read: "
                        f"{exc.strerror or exc}") from None


def _skip_lines(f: IO[bytes], n: int, what: str) -> None:
    """Skip ``n`` LF-terminated lines (CRLF counts as one), reading in bounded pieces."""
    while n > 0:
        line = f.readline(1 << 20)
        if not line:
            raise DataError(f"{what}line_skip: the file ended after fewer lines than it skips")
        if line.endswith(b"\n"):
            n -= 1


def _remaining(f: IO[bytes]) -> int | None:
    try:
        return os.fstat(f.fileno()).st_size - f.tell()
    except (AttributeError, OSError, io.UnsupportedOperation):
        try:
            pos = f.tell()
            end = f.seek(0, io.SEEK_END)
            f.seek(pos)
            return end - pos
        except (OSError, io.UnsupportedOperation):
            return None


class _Part:
    """One data stream: the attached section or one detached file, positioned at its data."""

    def __init__(self, core: Any, f: IO[bytes], nbytes: int, what: str) -> None:
        self.f, self.nbytes, self.what = f, nbytes, what
        self.type_name = core.type_name
        self.encoding = core.encoding
        skip = core.byte_skip
        if skip != -1 or self.encoding in COMPRESSED:
            # with raw byte_skip -1 the data ends the file: line_skip is moot
            # (docs/format.md#line-and-byte-skips); NRRD's compressed -1 skips the lines in the
            # file, then takes the end of the stream
            _skip_lines(f, core.line_skip, what)
        if self.encoding in ("raw", "ascii", "hex"):
            if skip == -1:
                remaining = _remaining(f)
                if remaining is None or remaining < nbytes:
                    raise DataError(f"{what}byte_skip -1: the data needs {nbytes} bytes, the "
                                    f"file holds {remaining}")
                # The data is the last nbytes of the file (NRRD byte skip -1, raw only).
                f.seek(-nbytes if nbytes else 0, io.SEEK_END)
            elif skip:
                _skip_bytes(f, skip, what)
            self.skip = 0
        else:
            self.skip = skip


def _skip_bytes(f: IO[bytes], n: int, what: str) -> None:
    rem = _remaining(f)
    if rem is not None and n > rem:  # compared in Python: n may be near 2**63
        raise DataError(f"{what}byte_skip: {n} bytes to skip, the file holds {max(rem, 0)} "
                        "after the header")
    try:
        if f.seekable():
            f.seek(n, io.SEEK_CUR)
            return
    except (AttributeError, OSError):
        pass
    while n > 0:
        chunk = f.read(min(n, 1 << 20))
        if not chunk:
            raise DataError(f"{what}byte_skip: the file ended inside the skipped bytes")
        n -= len(chunk)


def read_untiled(core: Any, f: IO[bytes] | None, paths: list[str] | None, policy: Policy,
                 *, source: Any = None) -> np.ndarray:
    """Read the whole data section; returns the user-dtype array of shape ``sizes`` (F order)."""
    st = storage_dtype(core.type_name, core.endian or "little", core.block_size)
    n = math.prod(core.sizes)
    policy.check_bytes(n * st.itemsize, "the data", source)
    nparts = 1 if paths is None else len(paths)
    if n % nparts:
        raise HeaderError(f"{where(source, 'data_files')}{nparts} files cannot split "
                          f"{n} samples evenly")
    per = n // nparts
    # Raw data: prove every part holds enough bytes before allocating anything.
    opened: list[IO[bytes]] = []
    try:
        parts = []
        for j in range(nparts):
            if paths is None:
                assert f is not None
                fh = f
                what = where(source)
            else:
                fh = _open_data(paths[j], core, policy, source)
                opened.append(fh)
                what = where(paths[j])
            part = _Part(core, fh, per * st.itemsize, what)
            _check_room(core.encoding, fh, per, st.itemsize, what)
            parts.append(part)
        grown = [_grow(part, per * st.itemsize) if not _eager(part, per * st.itemsize)
                 else None for part in parts]
        flat = empty(n, st)
        with populating(flat):  # the other core takes the fresh output's page faults
            for j, part in enumerate(parts):
                if grown[j] is not None:
                    grown[j].move_into(memoryview(flat[j * per : (j + 1) * per]).cast("B"))
                else:
                    _fill(part, flat[j * per : (j + 1) * per], st, policy)
    finally:
        for fh in opened:
            fh.close()
    if core.type_name != "bfloat16" and not st.isnative and st.kind != "V":
        # Swap in place: no second copy of a large big-endian volume.
        flat = flat.byteswap(inplace=True).view(st.newbyteorder("="))
    arr = to_user(flat, core.type_name, policy.bfloat16)
    return arr.reshape(tuple(core.sizes), order="F")


#: generous upper bounds of how many output bytes one input byte can become: deflate 1032:1;
#: a zstd RLE block is 4 bytes for 128 KiB; an LZ4 byte copies at most 255 more; bzip2's
#: run-length stages reach millions to one
_MAX_RATIO = {"gzip": 1100, "zstd": 40_000, "lz4": 300, "bzip2": 50_000_000}


def _check_room(encoding: str, f: IO[bytes], count: int, itemsize: int, what: str) -> None:
    """Refuse a part too short for its data before anything is allocated (docs/security.md#caps).

    raw needs ``count·itemsize`` bytes; hex two digits per byte; ascii at least one character
    and one separator per value. A compressed stream cannot expand beyond its format's largest
    ratio (:data:`_MAX_RATIO`), so a few bytes claiming gigabytes fail here too; within that
    bound the decoders stop at the expected size.
    """
    if encoding == "raw":
        need, unit = count * itemsize, "bytes"
    elif encoding == "hex":
        need, unit = 2 * count * itemsize, "hex digits"
    elif encoding == "ascii":
        need, unit = 2 * count - 1, "characters (one value and a separator each)"
    elif encoding in _MAX_RATIO:
        need = -(-count * itemsize // _MAX_RATIO[encoding])
        unit = f"bytes of {encoding} data (its largest expansion is {_MAX_RATIO[encoding]}:1)"
    else:
        return
    rem = _remaining(f)
    if rem is not None and rem < need:
        raise DataError(f"{what}the data needs at least {need} {unit}, the file holds {rem} "
                        "bytes after the header and skips")


#: compressed data up to this size is decoded into an output allocated at once
_EAGER_BYTES = 64 << 20
#: ... and so is larger data that is at most this many times its compressed size
_PLAUSIBLE_RATIO = 256


def _eager(part: _Part, nbytes: int) -> bool:
    """Whether a part's output may be allocated before decoding it.

    Raw and text data were checked against the file size (:func:`_check_room`). A compressed
    stream may still be short: a 300 KB zstd stream can claim 8 GiB. Unless the claim is small
    or plausible for the compressed size, the output grows with the bytes the stream actually
    produces (:class:`~jnrrd.codecs.compress_stream.GrowingBuffer`) and is copied once at the end.
    """
    if part.encoding not in COMPRESSED or nbytes <= _EAGER_BYTES:
        return True
    rem = _remaining(part.f)
    if rem is not None and nbytes <= rem * _PLAUSIBLE_RATIO:
        return True
    # zstd frames with content sizes (as this library writes them) whose block headers can
    # produce the claim: highly compressible data keeps the frame-parallel path
    return part.encoding == "zstd" and not part.skip and zstd_claim_backed(part.f, nbytes)


def _grow(part: _Part, nbytes: int) -> GrowingBuffer:
    out = GrowingBuffer(nbytes)
    extra = decompress_stream_into(COMPRESSED[part.encoding], part.f, out, skip=part.skip,
                                   allow_zlib=part.encoding == "gzip", what=part.what)
    _warn_longer(part, extra, nbytes)
    return out


def _warn_longer(part: _Part, extra: int, nbytes: int) -> None:
    """A compressed stream that holds more than the data, read without a byte skip: read
    from its start (as teem and ITK do), which is right only when the data comes first."""
    if extra and not part.skip:
        more = f"{extra}" if extra <= nbytes else f"more than {nbytes}"
        warnings.warn(f"{part.what}the {part.encoding} data holds {more} decompressed bytes "
                      f"past the {nbytes} that the header's sizes and type need; read from "
                      "its start (no byte skip). If the data sits at the end of the stream, "
                      "set 'byte skip: -1' (or the exact byte skip) in the header",
                      JnrrdWarning, stacklevel=2)


def _fill(part: _Part, out: np.ndarray, st: np.dtype, policy: Policy) -> None:
    buf = memoryview(out).cast("B")
    enc, what = part.encoding, part.what
    if enc == "raw":
        got = _readinto_all(part.f, buf)
        if got < len(buf):
            raise DataError(f"{what}the data needs {len(buf)} bytes, the file holds {got}")
    elif enc in COMPRESSED and part.skip == -1:
        from ..codecs.compress_tail import decompress_tail_into

        decompress_tail_into(COMPRESSED[enc], part.f, buf, max_total=policy.max_bytes,
                             allow_zlib=enc == "gzip", what=what)
    elif enc in COMPRESSED:
        extra = decompress_stream_into(COMPRESSED[enc], part.f, buf, skip=part.skip,
                                       allow_zlib=enc == "gzip", what=what,
                                       map_frames=zstd_frame_map)
        _warn_longer(part, extra, len(buf))
    elif enc == "hex":
        text = _read_text(part.f, policy, what)
        buf[:] = parse_hex(text, len(buf), what=what)
    elif enc == "ascii":
        if st.kind == "V":
            raise DataError(f"{what}type 'block' cannot be stored as ascii")
        text = _read_text(part.f, policy, what)
        if part.type_name == "bfloat16":
            # The text holds values; the stored elements are their bfloat16 words
            # (docs/format.md#encodings: parsed as float64, then rounded).
            out[...] = bfloat16_words(parse_ascii(text, out.size, np.dtype("f8"), what=what))
        else:
            out[...] = parse_ascii(text, out.size, np.dtype(st).newbyteorder("="), what=what)
    else:  # the header's field checks only let known encodings through
        raise UnsupportedError(f"{what}encoding {enc!r} is not supported")


def _read_text(f: IO[bytes], policy: Policy, what: str) -> bytes:
    """The rest of the stream, capped at ``max_bytes``.

    Never ``f.read(max_bytes + 1)``: CPython reserves the whole requested size before reading,
    16 GiB by default. Read exactly what is left when the size is known, else in pieces.
    """
    rem = _remaining(f)
    if rem is not None and rem > policy.max_bytes:
        raise UnsupportedError(f"{what}text data exceeds the max_bytes cap ({policy.max_bytes})")
    if rem is not None:
        return f.read(max(rem, 0))
    parts, total = [], 0
    while True:
        chunk = f.read(1 << 20)
        if not chunk:
            return b"".join(parts)
        total += len(chunk)
        if total > policy.max_bytes:
            raise UnsupportedError(f"{what}text data exceeds the max_bytes cap "
                                   f"({policy.max_bytes})")
        parts.append(chunk)


def _readinto_all(f: IO[bytes], buf: memoryview) -> int:
    got = 0
    while got < len(buf):
        k = f.readinto(buf[got:]) if hasattr(f, "readinto") else None
        if k is None:
            chunk = f.read(len(buf) - got)
            k = len(chunk)
            buf[got : got + k] = chunk
        if not k:
            break
        got += k
    return got


class UntiledData:
    """Lazy access to an untiled data section: a memory map for raw single-part data,
    otherwise the whole section decoded on first use."""

    def __init__(self, core: Any, *, path: str | None, f: IO[bytes] | None,
                 data_start: int | None, paths: list[str] | None, policy: Policy,
                 source: Any = None, held: IO[bytes] | None = None) -> None:
        # ``held``: the already-open header file (owned from now on). Attached data is read
        # from it, never by opening the path again: the path may have been replaced since the
        # header was parsed, and header and data must come from the same file.
        self._held = held
        self._lock = threading.Lock()
        self.core, self.policy, self.source = core, policy, source
        self.shape = tuple(core.sizes)
        self._st = storage_dtype(core.type_name, core.endian or "little", core.block_size)
        self._dtype = user_dtype(core.type_name, core.block_size, policy.bfloat16)
        self._f, self._paths, self._data_start = f, paths, data_start
        self._path = path
        self._array: np.ndarray | None = None
        self._map: np.memmap | None = None
        self.stored_bytes = 0
        n = math.prod(self.shape)
        policy.check_bytes(n * self._st.itemsize, "the data", source)
        if core.encoding == "raw" and (paths is None or len(paths) == 1):
            file_path = path if paths is None else paths[0]
            if file_path is not None and not is_url(file_path):
                self._map = self._memmap(file_path, n)
        if self._map is None and core.encoding == "raw":
            self.stored_bytes = n * self._st.itemsize

    def _memmap(self, file_path: str, n: int) -> np.memmap | None:
        if self._paths is None and self._held is not None:
            fh: Any = _Borrowed(self._held)
        elif self._paths is None:
            fh = open(file_path, "rb")
        else:
            fh = _open_data(file_path, self.core, self.policy, self.source)
        with fh as handle:
            if self._paths is None:
                handle.seek(self._data_start or 0)
            _Part(self.core, handle, n * self._st.itemsize, where(file_path))
            offset = handle.tell()
            size = os.fstat(handle.fileno()).st_size
            if size - offset < n * self._st.itemsize:
                raise DataError(f"{where(file_path)}the data needs {n * self._st.itemsize} "
                                f"bytes, the file holds {size - offset} after the header and "
                                "skips")
            self.stored_bytes = n * self._st.itemsize
            if n == 0:
                return None
            # Mapped from the descriptor that was checked, never the path again (a file
            # replaced in between would be another inode, or gone); mmap duplicates the
            # descriptor, so the map outlives the handle.
            return np.memmap(handle, dtype=self._st, mode="r", offset=offset, shape=(n,))

    def full(self) -> np.ndarray:
        if self._map is not None and self._paths is None and self._held is not None:
            # The whole section: read() into one array rather than copying out of the map,
            # whose file pages would count in the resident set next to the copy.
            with self._lock:
                self._held.seek(self._data_start or 0)
                return read_untiled(self.core, self._held, None, self.policy,
                                    source=self.source)
        if self._map is not None:
            flat = empty(self._map.shape, self._map.dtype)
            with populating(flat):
                np.copyto(flat, self._map)
            if self.core.type_name != "bfloat16" and not flat.dtype.isnative \
                    and flat.dtype.kind != "V":
                # Swap in place: reading a big-endian file costs one array, not two.
                flat = flat.byteswap(inplace=True).view(flat.dtype.newbyteorder("="))
            return to_user(flat, self.core.type_name,
                           self.policy.bfloat16).reshape(self.shape, order="F")
        if self._array is None:
            f = self._f if self._held is None else self._held
            owned = None
            if self._paths is None and f is None:
                owned = f = open(self._path, "rb")
            try:
                if self._paths is None and _seekable(f):
                    # A pipe cannot seek: parse_header left it at the data already.
                    f.seek(self._data_start or 0)
                self._array = read_untiled(self.core, f, self._paths, self.policy,
                                           source=self.source)
            finally:
                if owned is not None:
                    owned.close()
            if self.stored_bytes == 0:
                self.stored_bytes = self._array.nbytes
        return self._array

    def read(self, sel: tuple[AxisSel, ...]) -> np.ndarray:
        key = tuple(slice(s.start, s.last + 1, s.step) if s.count else slice(0, 0)
                    for s in sel)
        if self._map is not None:
            view = self._map.reshape(self.shape, order="F")[key]
            out = empty(view.shape, self._dtype, order="F")
            with populating(out):
                if self.core.type_name == "bfloat16":
                    out[...] = to_user(np.asarray(view), "bfloat16", self.policy.bfloat16)
                else:
                    out[...] = view
            return out
        return np.asarray(self.full()[key], order="F")

    def close(self) -> None:
        self._map = None
        self._array = None
        if self._held is not None:
            self._held.close()
            self._held = None


class _Borrowed:
    """A context manager over a file that must stay open (no close on exit)."""

    def __init__(self, f: IO[bytes]) -> None:
        self.f = f

    def __enter__(self) -> IO[bytes]:
        return self.f

    def __exit__(self, *exc: object) -> None:
        return None


def _seekable(f: IO[bytes]) -> bool:
    try:
        return bool(f.seekable())
    except (AttributeError, OSError, ValueError):
        return False
