"""The untiled data section written as a stream of encoded slabs
(docs/format.md#encodings-and-endianness, #where-the-data-is).

The volume is read one slab along its slowest file axis at a time, so memory stays bounded by a
slab whatever the array-like behind it; zstd data is cut into frames that readers decode in
parallel.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from .._threads import private_pool, thread_count
from ..codecs import gzip_stream
from ..codecs.compress import zstd_compress
from ..codecs.encodings import COMPRESSED, format_ascii, format_hex
from ..dtypes import from_user, storage_dtype, to_user

__all__ = ["encode_chunks", "file_order_slabs"]

_SLAB_BYTES = 64 << 20
#: untiled zstd data is written as frames of this many bytes (decoded in parallel on read)
_ZSTD_FRAME_BYTES = 16 << 20


def file_order_slabs(data: Any, index_order: str, slab_bytes: int = _SLAB_BYTES, *,
                     rows: tuple[int, int] | None = None) -> Iterator[np.ndarray]:
    """Yield the volume as consecutive slabs along the slowest file axis, in file axis order
    (axis 0 fastest), reading an array-like one slab at a time; ``rows``: only the slowest
    axis's indices ``lo:hi`` (default all)."""
    shape = tuple(data.shape)
    if not shape:
        yield np.asarray(data).reshape(1)
        return
    itemsize = np.dtype(data.dtype).itemsize
    slow = shape[-1] if index_order == "F" else shape[0]
    lo, hi = rows if rows is not None else (0, slow)
    if index_order == "F":
        per = max(1, slab_bytes // max(1, itemsize * math.prod(shape[:-1])))
        for k in range(lo, hi, per):
            yield np.asarray(data[(..., slice(k, min(k + per, hi)))])
    else:
        per = max(1, slab_bytes // max(1, itemsize * math.prod(shape[1:])))
        for k in range(lo, hi, per):
            yield np.asarray(data[k : min(k + per, hi)]).T


#: the largest in-memory volume compressed in place (its libdeflate tail, more than half of
#: it, is held to the end); larger ones are streamed slab by slab
_GZIP_WHOLE_BYTES = 2 << 30


def _in_place(data: Any, st: np.dtype, type_name: str) -> memoryview | None:
    """The bytes of a NumPy array in memory whose bytes already are the file's (dtype and
    file order), read without a copy; None otherwise."""
    arr = getattr(data, "data", None)
    if (type(arr) is not np.ndarray or not arr.size or arr.nbytes > _GZIP_WHOLE_BYTES
            or type_name in ("bfloat16", "block")):
        return None
    view = arr.T if getattr(data, "c", False) else arr  # file order: axis 0 fastest
    if view.dtype != st or not view.flags.f_contiguous:
        return None
    return view.T.data.cast("B")


def _file_bytes(slab: np.ndarray, st: np.dtype, type_name: str) -> Any:
    """A slab (file axis order) as the file's bytes: its own memory when it already holds
    them (a fresh F-contiguous slab of the stored type), else a converted copy."""
    values = np.asarray(from_user(slab, type_name), dtype=st)
    if values.flags.f_contiguous and values.size:
        return values.T.data.cast("B")
    return values.tobytes(order="F")


def _gzip(data: Any, st: np.dtype, type_name: str, index_order: str, total: int,
          level: int | None) -> Iterator[Any]:
    """The data section as ONE gzip member deflated on every core (:mod:`..codecs.gzip_stream`):
    in place for an array in memory, else slab by slab with bounded memory; the libdeflate
    tail (the last rows) is read first, so its thread starts at once."""
    threads = thread_count()  # the ``threads`` setting in force (write(threads=...))
    lvl = gzip_stream.DEFAULT_LEVEL if level is None else level
    whole = _in_place(data, st, type_name)
    with private_pool(threads, "jnrrd-gzip") as submit:
        if whole is not None:
            yield from gzip_stream.gzip_buffer(whole, lvl, threads=threads, submit=submit)
            return
        shape = tuple(data.shape)
        nrows = (shape[-1] if index_order == "F" else shape[0]) if shape else 1
        row = total // max(nrows, 1)
        want = gzip_stream.tail_bytes(total, lvl, threads, gzip_stream.TAIL_BYTES)
        split = nrows - (want // row if row else 0)
        tail: Any = b""
        if split < nrows:
            parts = [_file_bytes(s, st, type_name) for s in file_order_slabs(
                data, index_order, _SLAB_BYTES, rows=(split, nrows))]
            tail = parts[0] if len(parts) == 1 else b"".join(parts)
        # slabs of two blocks: the first blocks start while the rest is read
        slab = min(_SLAB_BYTES, 2 * gzip_stream.BLOCK_BYTES)
        body = (_file_bytes(s, st, type_name) for s in file_order_slabs(
            data, index_order, slab, rows=(0, split)))
        yield from gzip_stream.gzip_pieces(body, total, lvl, threads=threads, submit=submit,
                                           tail=tail)


def encode_chunks(data: Any, *, type_name: str, endian: str, encoding: str,
                  index_order: str = "F", level: int | None = None) -> Iterator[bytes]:
    """The encoded data section of an untiled volume, one slab at a time."""
    from ..codecs.encodings import stream_compressor

    st = storage_dtype(type_name, endian, None if type_name != "block" else data.dtype.itemsize)
    comp = (stream_compressor(encoding, level)
            if encoding in COMPRESSED and encoding not in ("zstd", "gzip") else None)
    per_line = int(data.shape[0 if index_order == "F" else -1]) if data.shape else 1
    total = math.prod(data.shape) * st.itemsize
    if encoding == "gzip":
        yield from _gzip(data, st, type_name, index_order, total, level)
        return
    # the slab size is read at call time (not bound as a default) so tests can shrink it
    for slab in file_order_slabs(data, index_order, _SLAB_BYTES):
        values = from_user(slab, type_name)
        if encoding == "ascii":
            if type_name == "bfloat16":
                # ascii holds values, not words: float32 represents every bfloat16 exactly
                values = to_user(values, "bfloat16", "float32")
            yield format_ascii(np.ravel(values, order="F"), per_line=min(per_line, 1 << 16))
            continue
        raw = np.asarray(values, dtype=st).tobytes(order="F")
        if encoding == "hex":
            yield format_hex(raw)
        elif encoding == "zstd":
            # one frame (with its content size) per 16 MiB: readers decode frames in parallel
            for k in range(0, len(raw), _ZSTD_FRAME_BYTES):
                yield zstd_compress(raw[k : k + _ZSTD_FRAME_BYTES],
                                    level=3 if level is None else level, checksum=False)
        elif comp is not None:
            out = comp.compress(raw)
            if out:
                yield out
        else:
            yield raw
    if comp is not None:
        yield comp.flush()
