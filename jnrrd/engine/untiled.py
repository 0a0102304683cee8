"""The untiled data section: attached or detached, skips, encodings
(docs/format.md#encodings-and-endianness, #where-the-data-is); its files and their positions are
:mod:`jnrrd.engine.untiled_parts`.

Reading never allocates before the file is known to hold enough bytes (raw), decompresses in
bounded pieces straight into the output (compressed), and serves ``open()`` on raw data through
a memory map. A file opened by path is read through the header directory's store
(:class:`~jnrrd.storage.objects.RangeStream`, ``get_ranges``), its detached data files as keys
of that store. (Writing the data section is :mod:`jnrrd.writing.stream`.)
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import warnings
from typing import IO, Any, cast

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
from ..storage import RangeStream, is_url
from ..tiling.grid import AxisSel
from .untiled_parts import Part, check_room, data_paths, open_data, remaining

__all__ = ["UntiledData", "data_paths", "read_untiled"]


def read_untiled(core: Any, f: IO[bytes] | None, paths: list[str] | None, policy: Policy,
                 *, source: Any = None, out: np.ndarray | None = None,
                 open_part: Any = None) -> np.ndarray:
    """Read the whole data section; returns the user-dtype array of shape ``sizes`` (F order),
    or ``out`` (that shape and dtype, checked by the caller) filled with it: decoded straight
    into it when it is F-contiguous and the stored elements are its own (:func:`_into`).
    ``open_part(j)``: the stream of detached file ``j`` (through the store), instead of
    opening ``paths[j]``."""
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
                fh = (open_part(j) if open_part is not None
                      else open_data(paths[j], core, policy, source))
                opened.append(fh)
                what = where(paths[j])
            part = Part(core, fh, per * st.itemsize, what)
            check_room(core.encoding, fh, per, st.itemsize, what)
            parts.append(part)
        grown = [_grow(part, per * st.itemsize) if not _eager(part, per * st.itemsize)
                 else None for part in parts]
        flat = _into(out, st, core.type_name)
        direct = flat is not None
        if flat is None:
            flat = np.empty(n, st)
        for j, part in enumerate(parts):
            growing = grown[j]
            if growing is not None:
                growing.move_into(flat[j * per : (j + 1) * per].data.cast("B"))
            else:
                _fill(part, flat[j * per : (j + 1) * per], st, policy)
    finally:
        for fh in opened:
            fh.close()
    return _finish(flat, core, policy, out, direct)


def _into(out: np.ndarray | None, st: np.dtype, type_name: str) -> np.ndarray | None:
    """``out``'s memory as the flat array of stored elements to decode into, when it can be:
    F-contiguous, and holding the stored type itself or its other byte order (swapped after);
    else None (the data is decoded into a fresh array and copied into ``out``)."""
    if out is None or type_name == "bfloat16" or not out.flags.f_contiguous:
        return None
    native = st if st.isnative or st.kind == "V" else st.newbyteorder("=")
    if out.dtype != native:
        return None
    return out.reshape(-1, order="F").view(st)


def _finish(flat: np.ndarray, core: Any, policy: Policy, out: np.ndarray | None,
            direct: bool) -> np.ndarray:
    """The stored elements ``flat`` as the user's array of shape ``sizes`` (F order): swapped
    to native order in place, bfloat16 words converted; ``out`` filled when given (``direct``:
    ``flat`` is ``out``'s memory)."""
    st = flat.dtype
    if core.type_name != "bfloat16" and not st.isnative and st.kind != "V":
        # Swap in place: no second copy of a large big-endian volume.
        flat = flat.byteswap(inplace=True).view(st.newbyteorder("="))
    if direct:
        assert out is not None
        return out
    arr = to_user(flat, core.type_name, policy.bfloat16).reshape(tuple(core.sizes), order="F")
    if out is None:
        return arr
    np.copyto(out, arr)
    return out


#: compressed data up to this size is decoded into an output allocated at once
_EAGER_BYTES = 64 << 20
#: ... and so is larger data that is at most this many times its compressed size
_PLAUSIBLE_RATIO = 256


def _eager(part: Part, nbytes: int) -> bool:
    """Whether a part's output may be allocated before decoding it.

    Raw and text data were checked against the file size (:func:`check_room`). A compressed
    stream may still be short: a 300 KB zstd stream can claim 8 GiB. Unless the claim is small
    or plausible for the compressed size, the output grows with the bytes the stream actually
    produces (:class:`~jnrrd.codecs.compress_stream.GrowingBuffer`) and is copied once at the end.
    """
    if part.encoding not in COMPRESSED or nbytes <= _EAGER_BYTES:
        return True
    rem = remaining(part.f)
    if rem is not None and nbytes <= rem * _PLAUSIBLE_RATIO:
        return True
    # zstd frames with content sizes (as this library writes them) whose block headers can
    # produce the claim: highly compressible data keeps the frame-parallel path
    return part.encoding == "zstd" and not part.skip and zstd_claim_backed(part.f, nbytes)


def _grow(part: Part, nbytes: int) -> GrowingBuffer:
    out = GrowingBuffer(nbytes)
    extra = decompress_stream_into(COMPRESSED[part.encoding], part.f, out, skip=part.skip,
                                   allow_zlib=part.encoding == "gzip", what=part.what)
    _warn_longer(part, extra, nbytes)
    return out


def _warn_longer(part: Part, extra: int, nbytes: int) -> None:
    """A compressed stream that holds more than the data, read without a byte skip: read
    from its start (as teem and ITK do), which is right only when the data comes first."""
    if extra and not part.skip:
        more = f"{extra}" if extra <= nbytes else f"more than {nbytes}"
        warnings.warn(f"{part.what}the {part.encoding} data holds {more} decompressed bytes "
                      f"past the {nbytes} that the header's sizes and type need; read from "
                      "its start (no byte skip). If the data sits at the end of the stream, "
                      "set 'byte skip: -1' (or the exact byte skip) in the header",
                      JnrrdWarning, stacklevel=2)


def _fill(part: Part, out: np.ndarray, st: np.dtype, policy: Policy) -> None:
    buf = out.data.cast("B")
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
    rem = remaining(f)
    if rem is not None and rem > policy.max_bytes:
        raise UnsupportedError(f"{what}text data exceeds the max_bytes cap ({policy.max_bytes})")
    if rem is not None:
        return f.read(max(rem, 0))
    parts: list[bytes] = []
    total = 0
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
                 source: Any = None, held: IO[bytes] | None = None, store: Any = None,
                 key: str | None = None, keys: list[str] | None = None,
                 field: str = "data_file") -> None:
        # ``held``: the already-open header file (owned from now on). Attached data is read
        # from it, never by opening the path again: the path may have been replaced since the
        # header was parsed, and header and data must come from the same file.
        # ``store``/``key``: that file held by the store (one hold owned from now on), read
        # through its get_ranges; ``keys``: detached files as keys of ``store`` (``field``).
        self._held = held
        self._store, self._key, self._keys, self._field = store, key, keys, field
        self._lock = threading.Lock()
        self.core, self.policy, self.source = core, policy, source
        self.shape = tuple(core.sizes)
        self._st = storage_dtype(core.type_name, core.endian or "little", core.block_size)
        self._dtype = user_dtype(core.type_name, core.block_size, policy.bfloat16)
        self._f, self._paths, self._data_start = f, paths, data_start
        self._path = path
        self._array: np.ndarray | None = None
        self._map: np.ndarray | None = None
        self.stored_bytes = 0
        n = math.prod(self.shape)
        policy.check_bytes(n * self._st.itemsize, "the data", source)
        if core.encoding == "raw" and (paths is None or len(paths) == 1):
            file_path = path if paths is None else paths[0]
            if self._through_store():
                self._map = self._mapped(n)
            elif file_path is not None and not is_url(file_path):
                self._map = self._memmap(file_path, n)
        if self._map is None and core.encoding == "raw":
            self.stored_bytes = n * self._st.itemsize

    def _through_store(self) -> bool:
        """Whether the data is read through the store (a held file, or detached keys)."""
        return self._store is not None and (self._key is not None if self._paths is None
                                            else self._keys is not None)

    def _part(self, j: int | None, *, mapped: bool = False) -> IO[bytes]:
        """The stream of the attached section (``j`` ``None``, at the data start) or of
        detached file ``j`` through the store (``mapped``: its ranges served from a map)."""
        if j is None:
            assert self._key is not None
            return cast(IO[bytes], RangeStream(self._store, self._key,
                                               start=self._data_start or 0, name=self.source))
        assert self._keys is not None
        key, what = self._keys[j], where(self.source, self._field)
        try:
            reader = (self._store.open_reader(key, map_reads=True, field=self._field)
                      if mapped else None)
            return cast(IO[bytes], RangeStream(self._store, key, field=self._field,
                                               reader=reader,
                                               name=self._store.path(key, field=self._field)))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
            path = self._store.path(key, field=self._field)
            raise DataError(f"{what}data file {path!r} cannot be read: "
                            f"{exc.strerror or exc}") from None
        except DataError as exc:  # not a regular file, cannot be opened
            raise DataError(f"{what}data file {exc}") from None

    def _mapped(self, n: int) -> np.ndarray | None:
        """:meth:`_memmap` through the store: the raw section as the store's buffer (a view
        of the held file's memory map, no copy)."""
        nbytes = n * self._st.itemsize
        with self._part(None if self._paths is None else 0, mapped=True) as stream:
            what = where(stream.name)
            Part(self.core, stream, nbytes, what)
            offset, size = stream.tell(), cast(RangeStream, stream).size
            if size - offset < nbytes:
                raise DataError(f"{what}the data needs {nbytes} bytes, the file holds "
                                f"{size - offset} after the header and skips")
            self.stored_bytes = nbytes
            if n == 0:
                return None
            key = cast(RangeStream, stream).key
            buf = self._store.get_ranges(key, [(offset, offset + nbytes)])[0]
        return np.frombuffer(buf, self._st, n)

    def _memmap(self, file_path: str, n: int) -> np.memmap | None:
        if self._paths is None and self._held is not None:
            fh: Any = contextlib.nullcontext(self._held)
        elif self._paths is None:
            fh = open(file_path, "rb")
        else:
            fh = open_data(file_path, self.core, self.policy, self.source)
        with fh as handle:
            if self._paths is None:
                handle.seek(self._data_start or 0)
            Part(self.core, handle, n * self._st.itemsize, where(file_path))
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

    def full(self, out: np.ndarray | None = None) -> np.ndarray:
        """The whole data section (F order; ``out``, of its shape and dtype, filled when
        given)."""
        store = self._through_store()
        if self._map is not None and self._paths is None and store:
            # The whole section: read() into one array rather than copying out of the map,
            # whose file pages would count in the resident set next to the copy.
            with self._lock, self._part(None) as stream:
                return read_untiled(self.core, stream, None, self.policy,
                                    source=self.source, out=out)
        if self._map is not None and self._paths is None and self._held is not None:
            with self._lock:
                self._held.seek(self._data_start or 0)
                return read_untiled(self.core, self._held, None, self.policy,
                                    source=self.source, out=out)
        if self._map is not None:
            flat = _into(out, self._map.dtype, self.core.type_name)
            direct = flat is not None
            if flat is None:
                flat = np.empty(self._map.shape, self._map.dtype)
            np.copyto(flat, self._map)
            return _finish(flat, self.core, self.policy, out, direct)
        if self._array is not None:
            return self._array if out is None else _copied(out, self._array)
        f = self._f if self._held is None else self._held
        owned: Any = None
        if store and self._paths is None:
            owned = f = self._part(None)
        elif self._paths is None and f is None:
            assert self._path is not None  # (a volume has a path, a stream or detached files)
            owned = f = open(self._path, "rb")
        try:
            if self._paths is None and f is not None and _seekable(f):
                # A pipe cannot seek: parse_header left it at the data already.
                f.seek(self._data_start or 0)
            array = read_untiled(self.core, f, self._paths, self.policy, source=self.source,
                                 out=out, open_part=self._part if store else None)
        finally:
            if owned is not None:
                owned.close()
        if self.stored_bytes == 0:
            self.stored_bytes = array.nbytes
        if out is None:  # decoded once, kept for the volume's later reads (not a caller's out)
            self._array = array
        return array

    def read(self, sel: tuple[AxisSel, ...], out: np.ndarray | None = None) -> np.ndarray:
        """The selection ``sel`` (F order), or ``out`` (its shape and dtype) filled with it."""
        key = tuple(slice(s.start, s.last + 1, s.step) if s.count else slice(0, 0)
                    for s in sel)
        if self._map is not None:
            view = self._map.reshape(self.shape, order="F")[key]
            if out is None:
                out = np.empty(view.shape, self._dtype, order="F")
            if self.core.type_name == "bfloat16":
                out[...] = to_user(np.asarray(view), "bfloat16", self.policy.bfloat16)
            else:
                out[...] = view
            return out
        if out is not None:
            return _copied(out, self.full()[key])
        return np.asarray(self.full()[key], order="F")

    def close(self) -> None:
        self._map = None
        self._array = None
        if self._store is not None and self._key is not None:
            self._store.release(self._key)
            self._key = None
        if self._held is not None:
            self._held.close()
            self._held = None


def _copied(out: np.ndarray, data: np.ndarray) -> np.ndarray:
    np.copyto(out, data)
    return out


def _seekable(f: IO[bytes]) -> bool:
    try:
        return bool(f.seekable())
    except (AttributeError, OSError, ValueError):
        return False
