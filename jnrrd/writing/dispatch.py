"""``jnrrd.write``: header fields and keyword shortcuts → an untiled or tiled file."""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Unpack

import numpy as np

from .._config import config
from ..dtypes import type_name_for
from ..errors import HeaderError, UnsupportedError, check_index_order
from ..header import TILE_URI, TILE_URI_PREFIX, Header
from ..storage import durability, is_remote, local_path, local_target, reported_as, write_guard
from .checks import (
    check_arguments,
    check_codec_chain,
    check_final_header,
    check_tile_names,
    probe_header,
)
from .formats import file_format_of, jnrrd_spelled, write_nrrd_target
from .layout import TilePlan
from .options import WriteOptions
from .plan import BuildHeader, plan_tiled
from .source import FileOrder, tile_dtype
from .tiled import write_tiled
from .untiled import write_untiled

__all__ = ["tiled_plan", "write"]

_COMPUTED = ("offset_table", "size_table", "level_offsets", "metadata", "compression_levels",
             "level_quality", "base_dir", "files")
#: options that only mean something for tiled files: asking for one asks for tiles
_TILE_OPTIONS = ("decision", "sparse", "tile_stats", "checksum", "quality", "align", "overlap",
                 "edge", "padding_value", "storage", "pattern", "tile_format")
_OPTIONS = ("decision", "sparse", "tile_stats", "checksum", "quality", "progress", "align",
            "compression_level", "overlap", "edge", "padding_value", "storage", "pattern",
            "tile_format")


def write(target: Any, data: Any, header: Mapping[str, Any] | None = None, *,
          index_order: str = "F", encoding: str | None = None, tile: Any = None,
          compression: str | None = None, codecs: Sequence[Any] | None = None,
          levels: Any = None, downsample: str | None = None, detached: bool = False,
          durable: bool = True, format: str | None = None,
          storage_options: dict[str, Any] | None = None, threads: int | None = None,
          **options: Unpack[WriteOptions]) -> None:
    """Write ``data`` to ``target``: JNRRD or classic NRRD, by ``format`` or by suffix.

    ``format="jnrrd"``/``"nrrd"`` names the file format; without it the suffix decides
    (any case): ``.jnrrd`` JNRRD, ``.nrrd``/``.nhdr`` classic NRRD, anything else is an
    ``UnsupportedError`` and nothing is written. A file object is written as JNRRD unless
    ``format="nrrd"``. A header from ``nrrd.read`` (pynrrd's NRRD field spellings) is mapped
    to JNRRD fields as the NRRD reader maps them (docs/nrrd.md).

    Everything the format can say can be asked through ``header`` fields; the keywords are
    shortcuts (docs/api.md#writing): ``tile=(64, 64, 64)`` or ``{axis: size}``,
    ``compression="zstd"``, ``codecs=[...]``, ``levels=4`` or a list of scales,
    ``downsample="average"``, ``detached=True``. Further options: ``decision``, ``sparse``,
    ``tile_stats``, ``checksum``, ``quality``, ``progress``, ``align`` (e.g. 4096),
    ``compression_level``, ``overlap``, ``edge`` ("pad"/"variable"), ``padding_value``,
    ``storage`` ("internal"/"external"), ``pattern``, ``tile_format``
    ("contiguous"/"chunked"; ``format="contiguous"|"chunked"`` is its deprecated spelling).
    The write is atomic: a crash leaves the previous file (or dataset) intact. With
    ``durable=False`` the new files are not ``fsync``ed before they replace the old ones: still
    atomic against a crashing process, but a power loss right after the write may lose both
    versions (the trade-off of scratch data; zarr and tensorstore never ``fsync``).

    ``target`` may be an fsspec URL (``s3://``, ``gs://``, ``memory://``, ...; not
    ``http(s)://``, which is read-only) with ``storage_options`` passed to fsspec: tiles and
    data files are uploaded first, the header last, and the previous dataset's objects are
    deleted after that (docs/remote.md, "Writing"). ``threads``: tiles encoded at once
    (``None``: the ``jnrrd.config`` setting, else the CPUs the process may use).
    """
    if not isinstance(durable, (bool, np.bool_)):
        raise TypeError(f"write(): durable must be True or False, not {durable!r:.80}")
    if isinstance(target, str):
        target = local_path(target)
    remote = is_remote(target)
    if storage_options and not remote:
        raise TypeError("storage_options= is for URLs (s3://, memory://, ...); "
                        f"{target!r:.200} is not one")
    if remote:
        from ..storage import check_writable

        check_writable(target)
    opts: dict[str, Any] = dict(options)
    file_format = file_format_of(target, format, opts)
    guard = contextlib.nullcontext() if remote else write_guard(target)
    io = config(threads=threads) if threads is not None else contextlib.nullcontext()
    with io, local_target(target), durability(durable), reported_as(target), guard:
        _write(target, data, header, index_order=index_order, encoding=encoding, tile=tile,
               compression=compression, codecs=codecs, levels=levels, downsample=downsample,
               detached=detached, file_format=file_format,
               storage_options=storage_options if remote else None, **opts)


def _write(target: Any, data: Any, header: Mapping[str, Any] | None, *, index_order: str,
           encoding: str | None, tile: Any, compression: str | None,
           codecs: Sequence[Any] | None, levels: Any, downsample: str | None, detached: bool,
           file_format: str, storage_options: dict[str, Any] | None, **options: Any) -> None:
    unknown = set(options) - set(_OPTIONS)
    if unknown:
        raise TypeError(f"write() got unexpected keyword argument(s): {sorted(unknown)}")
    check_index_order(index_order, target)
    if not hasattr(data, "shape") or not hasattr(data, "dtype"):
        data = np.asarray(data)
    check_arguments(header, len(data.shape), encoding=encoding,
                    tile=tile, compression=compression, codecs=codecs, downsample=downsample,
                    detached=detached, options=options, target=target)
    header = jnrrd_spelled(header, data, index_order, target)
    if file_format == "nrrd":
        write_nrrd_target(target, data, header, index_order=index_order, encoding=encoding,
                          detached=detached, storage_options=storage_options,
                          tiling={"tile": tile, "compression": compression, "codecs": codecs,
                                  "levels": levels, "downsample": downsample, **options})
        return
    if not hasattr(data, "shape") or not hasattr(data, "dtype"):
        data = np.asarray(data)
    if any(not isinstance(n, (int, np.integer)) for n in data.shape):
        # e.g. a Dask array after boolean indexing: its chunk sizes are unknown (NaN)
        raise UnsupportedError(f"the array's shape {tuple(data.shape)} is not known; compute "
                               "it first (for Dask: x.compute_chunk_sizes())")
    src, out, type_name = _file_header(data, header, index_order)
    prefix = out.prefix_for(TILE_URI) or "tile"
    tile_keys = [k for k in out if k.startswith(prefix + ":")]
    enabled = out.get(prefix + ":enabled")
    # tile fields in the header ask for tiles (unless tiling is switched off): never dropped
    asked = enabled is None and any(k[len(prefix) + 1:] not in _COMPUTED for k in tile_keys)
    tiled = (tile is not None or compression is not None or codecs is not None
             or levels is not None or enabled is True or asked
             or any(options.get(k) not in (None, False) for k in _TILE_OPTIONS))
    if tiled:
        if detached:
            raise UnsupportedError("detached=True is for untiled data; tiles are internal "
                                   "or external (storage='external')")
        if not isinstance(target, (str, os.PathLike)):
            raise UnsupportedError("tiled writes need a target path (they are written "
                                   "atomically)")
        plan, build = _checked_plan(os.fspath(target), src, out, prefix, type_name,
                                    encoding=encoding, tile=tile, compression=compression,
                                    codecs=codecs, levels=levels, downsample=downsample,
                                    index_order=index_order, options=options)
        if _is_dask(data):
            from ..integrations.dask_write import write_dask

            write_dask(os.fspath(target), data, plan, build, index_order=index_order,
                       storage_options=storage_options)
        else:
            write_tiled(os.fspath(target), src, plan, build, storage_options)
        return
    for k in tile_keys:
        out.pop(k)
    _drop_declaration(out, prefix)
    write_untiled(target, src, out, type_name, encoding, detached, options, storage_options)


def tiled_plan(target: str, data: Any, header: Mapping[str, Any] | None, *,
               index_order: str = "F", tile: Any = None, compression: str | None = None,
               codecs: Sequence[Any] | None = None, levels: Any = None,
               downsample: str | None = None, **options: Any) -> tuple[TilePlan, BuildHeader]:
    """The tiled layout :func:`write` would give ``data`` (any array-like: only its shape
    and dtype are used) at ``target``, with all of its checks, writing nothing
    (``jnrrd.create`` lays an empty volume out with it)."""
    unknown = set(options) - set(_OPTIONS)
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {sorted(unknown)}")
    check_arguments(header, len(data.shape), encoding=None, tile=tile, compression=compression,
                    codecs=codecs, downsample=downsample, detached=False, options=options,
                    target=target)
    header = jnrrd_spelled(header, data, index_order, target)
    src, out, type_name = _file_header(data, header, index_order)
    prefix = out.prefix_for(TILE_URI) or "tile"
    return _checked_plan(target, src, out, prefix, type_name, encoding=None, tile=tile,
                         compression=compression, codecs=codecs, levels=levels,
                         downsample=downsample, index_order=index_order, options=options)


def _file_header(data: Any, header: Mapping[str, Any] | None, index_order: str
                 ) -> tuple[FileOrder, Header, str]:
    """``data`` in file order, the header's core fields for it, and its type name."""
    src = FileOrder(data, index_order)
    out = Header(header or {})
    out.pop("jnrrd", None)
    type_name = _type_name(out, src.dtype)
    out["type"] = type_name
    out["dimension"] = len(src.shape)
    out["sizes"] = list(src.shape)
    if not src.shape:
        raise UnsupportedError("cannot write a 0-dimensional array; reshape it to (1,)")
    if 0 in src.shape or len(src.shape) > 16:
        # docs/format.md#core-fields: sizes ≥ 1, dimension 1..16 (the reader refuses anything else)
        raise UnsupportedError(f"cannot write shape {tuple(data.shape)}: JNRRD needs 1 to 16 "
                               "axes, each of size ≥ 1")
    if "space" in out:
        out["space"] = _long_space(out)
    return src, out, type_name


def _checked_plan(path: str, src: FileOrder, out: Header, prefix: str, type_name: str, *,
                  encoding: str | None, tile: Any, compression: str | None,
                  codecs: Sequence[Any] | None, levels: Any, downsample: str | None,
                  index_order: str, options: Mapping[str, Any]
                  ) -> tuple[TilePlan, BuildHeader]:
    """The tiled plan and header builder, checked as the reader would check the file."""
    plan, build = plan_tiled(src, out, prefix, type_name, encoding=encoding, tile=tile,
                             compression=compression, codecs=codecs, levels=levels,
                             downsample=downsample, index_order=index_order, options=options)
    check_final_header(probe_header(plan, build, path), path)
    if plan.storage == "external":
        assert plan.pattern is not None  # an external plan always names its tiles
        check_tile_names(plan.pattern, plan, path)
    if type_name != "block":
        check_codec_chain(plan, np.dtype("u2") if type_name == "bfloat16"
                          else tile_dtype(plan, src))
    return plan, build


def _drop_declaration(out: Header, prefix: str) -> None:
    """An untiled write drops the tiling fields; their extension's declaration goes too (a
    declared tiling extension requires its fields, so the file would not validate)."""
    ext = out.get("extensions")
    if isinstance(ext, dict) and isinstance(ext.get(prefix), str) and ext[prefix].startswith(
            TILE_URI_PREFIX):
        rest = {p: u for p, u in ext.items() if p != prefix}
        if rest:
            out["extensions"] = rest
        else:
            out.pop("extensions")


def _type_name(out: Header, dtype: np.dtype) -> str:
    given = out.get("type")
    if given is None:
        return type_name_for(dtype)
    from ..dtypes import canonical_type

    name = canonical_type(given)
    if name == "block" and dtype.kind != "V":
        raise UnsupportedError("type 'block' needs a void (np.dtype('V<n>')) array")
    return name


def _long_space(out: Header) -> Any:
    """``space`` in its long underscore form (docs/format.md#core-fields: the writer normalises
    it)."""
    from ..header.fields import core_fields

    probe = Header({k: out[k] for k in ("type", "dimension", "sizes", "space",
                                        "space_dimension") if k in out})
    probe["encoding"] = "raw"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return core_fields(probe).space or out["space"]
    except HeaderError:
        return out["space"]  # left as given; the reader names the problem


def _is_dask(data: Any) -> bool:
    """A Dask array, recognised without importing dask (importing jnrrd never imports it)."""
    return type(data).__module__.startswith("dask.") and hasattr(data, "chunks")
