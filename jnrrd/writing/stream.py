"""The untiled data section written as a stream of encoded slabs
(docs/format.md#encodings-and-endianness, #where-the-data-is).

The volume is read one slab along its slowest file axis at a time, so memory stays bounded by a
slab whatever the array-like behind it; zstd data is cut into frames that readers decode in
parallel.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from .._threads import ordered_map, run_parallel, thread_count
from ..codecs import gzip_stream
from ..codecs.compress import zstd_compress
from ..codecs.encodings import COMPRESSED, format_ascii, format_hex
from ..dtypes import from_user, storage_dtype, to_user

__all__ = ["encode_chunks", "file_order_slabs"]

_SLAB_BYTES = 64 << 20
#: untiled zstd data is written as frames of this many bytes (decoded in parallel on read)
_ZSTD_FRAME_BYTES = 16 << 20


def file_order_slabs(data: Any, index_order: str, slab_bytes: int = _SLAB_BYTES
                     ) -> Iterator[np.ndarray]:
    """Yield the volume as consecutive slabs along the slowest file axis, in file axis order
    (axis 0 fastest), reading an array-like one slab at a time."""
    shape = tuple(data.shape)
    if not shape:
        yield np.asarray(data).reshape(1)
        return
    itemsize = np.dtype(data.dtype).itemsize
    if index_order == "F":
        slow = shape[-1]
        per = max(1, slab_bytes // max(1, itemsize * math.prod(shape[:-1])))
        for k in range(0, slow, per):
            yield np.asarray(data[(..., slice(k, min(k + per, slow)))])
    else:
        slow = shape[0]
        per = max(1, slab_bytes // max(1, itemsize * math.prod(shape[1:])))
        for k in range(0, slow, per):
            yield np.asarray(data[k : min(k + per, slow)]).T


#: the largest in-memory volume compressed in place (its compressed output is held whole);
#: larger ones are streamed slab by slab
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


def _gzip(data: Any, st: np.dtype, type_name: str, index_order: str, total: int,
          level: int | None) -> Iterator[Any]:
    """The data section as ONE gzip member deflated on every core (:mod:`..codecs.gzip_stream`):
    in place for an array in memory, else slab by slab with bounded memory."""
    threads = thread_count()  # the ``threads`` setting in force (write(threads=...))
    lvl = gzip_stream.DEFAULT_LEVEL if level is None else level
    whole = _in_place(data, st, type_name)
    if whole is not None:
        yield from gzip_stream.gzip_buffer(whole, lvl, threads=threads, run_all=run_parallel)
        return
    raws = (np.asarray(from_user(slab, type_name), dtype=st).tobytes(order="F")
            for slab in file_order_slabs(data, index_order, _SLAB_BYTES))
    ordered = functools.partial(ordered_map, workers=threads, name="jnrrd-gzip",
                                ahead=2 * threads)
    yield from gzip_stream.gzip_pieces(raws, total, lvl, threads=threads, ordered=ordered)


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
