"""``jnrrd.write`` for untiled data: one stream, a file written atomically, or detached."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import IO, Any

import numpy as np

from ..codecs.levels import check_level
from ..errors import HeaderError, UnsupportedError, where
from ..header import Header, render_header
from ..storage import Staged, fresh_token, stem, target_store
from .checks import check_final_header
from .source import FileOrder
from .stream import encode_chunks

__all__ = ["write_untiled"]

_EXT = {"raw": "raw", "gzip": "raw.gz", "bzip2": "raw.bz2", "zstd": "raw.zst", "lz4": "raw.lz4",
        "ascii": "txt", "hex": "hex"}
_ENC_ALIASES = {"gz": "gzip", "bz2": "bzip2", "txt": "ascii", "text": "ascii"}

def _endian(out: Header, type_name: str) -> str:
    e = out.get("endian", "little")
    if e not in ("little", "big"):
        raise HeaderError(f"endian: expected 'little' or 'big', found {e!r}")
    return e


def write_untiled(target: Any, src: FileOrder, out: Header, type_name: str,
                  encoding: str | None, detached: bool, options: Mapping[str, Any],
                  storage_options: dict[str, Any] | None = None) -> None:
    """Untiled data after the header (or in a fresh detached data file), atomically, to a
    stream, a path or a URL; the final header passes the reader's checks before anything is
    written."""
    enc_h = out.get("encoding")
    enc = _ENC_ALIASES.get(encoding, encoding) if encoding is not None else None
    # An explicit argument wins over the header's encoding (how its source was stored).
    enc = enc or (_ENC_ALIASES.get(enc_h, enc_h) if isinstance(enc_h, str) else enc_h) or "raw"
    if enc not in _EXT:
        raise HeaderError(f"encoding: expected one of {', '.join(_EXT)}, found {enc!r}")
    if type_name == "block":
        if enc == "ascii":
            raise UnsupportedError("type 'block' cannot be written as ascii")
        out["block_size"] = src.dtype.itemsize
        out.pop("endian", None)
    endian = _endian(out, type_name)
    out["encoding"] = enc
    multibyte = type_name != "block" and np.dtype(
        "u2" if type_name == "bfloat16" else src.dtype).itemsize > 1
    if multibyte and enc != "ascii":
        out["endian"] = endian
    else:
        out.pop("endian", None)
    for k in ("data_file", "data_files", "data_file_pattern", "line_skip", "byte_skip"):
        out.pop(k, None)
    named = target if isinstance(target, (str, os.PathLike)) else None
    level = check_level(enc, options.get("compression_level"), what=where(named))
    chunks = encode_chunks(src, type_name=type_name, endian=endian, encoding=enc,
                           index_order="F", level=level)
    if not isinstance(target, (str, os.PathLike)):
        if detached:
            raise UnsupportedError("detached=True needs a target path")
        head = render_header(out)
        check_final_header(head, getattr(target, "name", None))
        _write_stream(target, head, chunks)
        return
    path = os.fspath(target)
    store, key = target_store(path, storage_options=storage_options)
    previous = store.owned(key)  # what the header this write replaces references
    if not detached:
        head = render_header(out)
        check_final_header(head, path)
        with store.stage(key) as staged:
            _write_stream(staged, head, chunks)
        store.tidy(key, owned=previous)
        return
    # Detached: a fresh data file, then the header, then the old files go
    # (docs/format.md#atomic-writes).
    name = f"{stem(key)}.{fresh_token()}.data.{_EXT[enc].replace('.', '')}"
    out["data_file"] = name
    head = render_header(out)
    check_final_header(head, path)
    with store.stage(name) as staged:
        for c in chunks:
            staged.write(c)
    try:
        with store.stage(key) as staged:
            staged.write(head)
    except BaseException:
        store.delete(name)
        raise
    store.tidy(key, keep=[name], owned=previous)


def _write_stream(f: IO[bytes] | Staged, head: bytes, chunks: Any) -> None:
    f.write(head)
    for c in chunks:
        f.write(c)
