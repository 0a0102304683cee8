"""``jnrrd.write``: header fields and keyword shortcuts → an untiled or tiled file."""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .atomic import durability, reported_as
from .dtypes import type_name_for
from .errors import HeaderError, UnsupportedError
from .header import TILE_URI, Header, render_header
from .tiling.levels import expand_scale, levels_from_argument
from .tiling.spec import (
    SHORTHAND,
    _int_list,
    compression_chain,
    level_tile_sizes,
    overlap_of,
    tile_geometry,
    typed_padding,
)
from .write_checks import (
    check_arguments,
    check_codec_chain,
    check_final_header,
    check_tile_names,
    probe_header,
)
from .write_untiled import _ENC_ALIASES, _endian, write_untiled
from .writer import FileOrder, TilePlan, _tile_dtype, write_tiled

__all__ = ["write"]

_COMPUTED = ("offset_table", "size_table", "level_offsets", "metadata", "compression_levels",
             "level_quality", "base_dir", "files")
#: options that only mean something for tiled files: asking for one asks for tiles
_TILE_OPTIONS = ("decision", "sparse", "tile_stats", "checksum", "quality", "align", "overlap",
                 "edge", "padding_value", "storage", "pattern", "tile_format")
_OPTIONS = ("decision", "sparse", "tile_stats", "checksum", "quality", "progress", "align",
            "compression_level", "overlap", "edge", "padding_value", "storage", "pattern",
            "tile_format")
#: file suffix (compared in lower case) -> file format (CONVENTIONS §7)
SUFFIXES = {".jnrrd": "jnrrd", ".nrrd": "nrrd", ".nhdr": "nrrd"}
FILE_FORMATS = ("jnrrd", "nrrd")
_TILE_FORMATS = ("contiguous", "chunked")


def write(target: Any, data: Any, header: Mapping[str, Any] | None = None, *,
          index_order: str = "F", encoding: str | None = None, tile: Any = None,
          compression: str | None = None, codecs: Sequence[Any] | None = None,
          levels: Any = None, downsample: str | None = None, detached: bool = False,
          durable: bool = True, format: str | None = None, **options: Any) -> None:
    """Write ``data`` to ``target``: JNRRD or classic NRRD, by ``format`` or by suffix.

    ``format="jnrrd"``/``"nrrd"`` names the file format; without it the suffix decides
    (any case): ``.jnrrd`` JNRRD, ``.nrrd``/``.nhdr`` classic NRRD, anything else is an
    ``UnsupportedError`` and nothing is written. A file object is written as JNRRD unless
    ``format="nrrd"``. A header from ``nrrd.read`` (pynrrd's NRRD field spellings) is mapped
    to JNRRD fields as the NRRD reader maps them (docs/nrrd.md).

    Everything the format can say can be asked through ``header`` fields; the keywords are
    shortcuts (CONVENTIONS §3): ``tile=(64, 64, 64)`` or ``{axis: size}``,
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
    """
    file_format = _file_format(target, format, options)
    with durability(durable), reported_as(target):
        _write(target, data, header, index_order=index_order, encoding=encoding, tile=tile,
               compression=compression, codecs=codecs, levels=levels, downsample=downsample,
               detached=detached, file_format=file_format, **options)


def _file_format(target: Any, format: str | None, options: dict[str, Any]) -> str:
    """The file format to write (``"jnrrd"``/``"nrrd"``), from ``format`` or the suffix.

    ``format="contiguous"|"chunked"`` (the tile layout's former keyword) moves to
    ``options["tile_format"]`` with a ``DeprecationWarning``.
    """
    if format in _TILE_FORMATS:
        warnings.warn("write(format='contiguous'|'chunked') is deprecated: the tile layout "
                      "is tile_format=...; format= names the file format ('jnrrd'/'nrrd')",
                      DeprecationWarning, stacklevel=3)
        given = options.get("tile_format")
        if given is not None and given != format:
            raise ValueError(f"format={format!r} (deprecated tile layout) disagrees with "
                             f"tile_format={given!r}")
        options["tile_format"] = format
        format = None
    if format is not None and format not in FILE_FORMATS:
        raise ValueError(f"format must be 'jnrrd' or 'nrrd' (the file format), got {format!r}")
    if not isinstance(target, (str, os.PathLike)):
        return format or "jnrrd"
    path = os.fspath(target)
    suffix = os.path.splitext(path)[1].lower()
    by_suffix = SUFFIXES.get(suffix)
    known = ", ".join(SUFFIXES)
    if format is None:
        if by_suffix is None:
            raise UnsupportedError(f"{path}: cannot tell the file format from the suffix "
                                   f"{suffix or '(none)'!r}; expected one of {known} (any "
                                   "case), or pass format='jnrrd' or format='nrrd'")
        return by_suffix
    if by_suffix is not None and by_suffix != format:
        raise UnsupportedError(f"{path}: format={format!r} disagrees with the suffix "
                               f"{suffix!r}, which means {by_suffix}")
    return format


def _write(target: Any, data: Any, header: Mapping[str, Any] | None, *, index_order: str,
           encoding: str | None, tile: Any, compression: str | None,
           codecs: Sequence[Any] | None, levels: Any, downsample: str | None, detached: bool,
           file_format: str, **options: Any) -> None:
    unknown = set(options) - set(_OPTIONS)
    if unknown:
        raise TypeError(f"write() got unexpected keyword argument(s): {sorted(unknown)}")
    if index_order not in ("F", "C"):
        raise ValueError(f"index_order must be 'F' or 'C', got {index_order!r}")
    if not hasattr(data, "shape") or not hasattr(data, "dtype"):
        data = np.asarray(data)
    check_arguments(header, len(data.shape), encoding=encoding,
                    tile=tile, compression=compression, codecs=codecs, downsample=downsample,
                    detached=detached, options=options)
    header = _jnrrd_spelled(header, data, index_order, target)
    if file_format == "nrrd":
        _write_nrrd(target, data, header, index_order=index_order, encoding=encoding,
                    detached=detached, tiling={"tile": tile, "compression": compression,
                                               "codecs": codecs, "levels": levels,
                                               "downsample": downsample, **options})
        return
    if not hasattr(data, "shape") or not hasattr(data, "dtype"):
        data = np.asarray(data)
    if any(not isinstance(n, (int, np.integer)) for n in data.shape):
        # e.g. a Dask array after boolean indexing: its chunk sizes are unknown (NaN)
        raise UnsupportedError(f"the array's shape {tuple(data.shape)} is not known; compute "
                               "it first (for Dask: x.compute_chunk_sizes())")
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
        # digest 1.6: every size ≥ 1 and dimension 1..16 (the reader refuses anything else)
        raise UnsupportedError(f"cannot write shape {tuple(data.shape)}: JNRRD needs 1 to 16 "
                               "axes, each of size ≥ 1")
    if "space" in out:
        out["space"] = _long_space(out)
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
        plan, build = plan_tiled(src, out, prefix, type_name, encoding=encoding, tile=tile,
                                 compression=compression, codecs=codecs, levels=levels,
                                 downsample=downsample, index_order=index_order,
                                 options=options)
        path = os.fspath(target)
        check_final_header(probe_header(plan, build, path), path)
        if plan.storage == "external":
            check_tile_names(plan.pattern, plan, path)
        if type_name != "block":
            check_codec_chain(plan, np.dtype("u2") if type_name == "bfloat16"
                              else _tile_dtype(plan, src))
        if _is_dask(data):
            from .dask_io import write_dask

            write_dask(os.fspath(target), data, plan, build, index_order=index_order)
        else:
            write_tiled(os.fspath(target), src, plan, build)
        return
    for k in tile_keys:
        out.pop(k)
    write_untiled(target, src, out, type_name, encoding, detached, options)


def _jnrrd_spelled(header: Mapping[str, Any] | None, data: Any, index_order: str,
                   target: Any) -> Mapping[str, Any] | None:
    """A header in NRRD spellings (pynrrd's ``nrrd.read``) mapped to JNRRD fields as the
    NRRD reader maps them (jnrrd.nrrd.mapping); any other header unchanged."""
    from .nrrd.mapping import from_nrrd_fields, is_nrrd_spelled

    if header is None or not is_nrrd_spelled(header):
        return header
    if any(not isinstance(n, (int, np.integer)) for n in data.shape):
        return header  # an unknown (Dask) shape: refused below with its own message
    shape = tuple(int(n) for n in data.shape)
    return from_nrrd_fields(header, shape if index_order == "F" else shape[::-1],
                            source=os.fspath(target) if isinstance(target, (str, os.PathLike))
                            else None)


def _write_nrrd(target: Any, data: Any, header: Mapping[str, Any] | None, *,
                index_order: str, encoding: str | None, detached: bool,
                tiling: Mapping[str, Any]) -> None:
    """Classic NRRD: untiled, so asking for anything tiled is an error, not ignored."""
    from .nrrd import write_nrrd

    asked = sorted(k for k, v in tiling.items()
                   if k not in ("progress", "compression_level") and v not in (None, False))
    if asked:
        raise UnsupportedError(f"{_name(target)}NRRD files are untiled: the option(s) "
                               f"{asked} need a JNRRD target (.jnrrd or format='jnrrd')")
    is_path = isinstance(target, (str, os.PathLike))
    detached = detached or (is_path and os.fspath(target).lower().endswith(".nhdr"))
    write_nrrd(os.fspath(target) if is_path else target, data, header,
               index_order=index_order, encoding=encoding, detached=detached,
               level=tiling.get("compression_level"))


def _name(target: Any) -> str:
    return f"{os.fspath(target)}: " if isinstance(target, (str, os.PathLike)) else ""


def _type_name(out: Header, dtype: np.dtype) -> str:
    given = out.get("type")
    if given is None:
        return type_name_for(dtype)
    from .dtypes import canonical_type

    name = canonical_type(given)
    if name == "block" and dtype.kind != "V":
        raise UnsupportedError("type 'block' needs a void (np.dtype('V<n>')) array")
    return name


def _long_space(out: Header) -> Any:
    """``space`` in its long underscore form (digest 1.7: the writer normalises it)."""
    from .header.fields import core_fields

    probe = Header({k: out[k] for k in ("type", "dimension", "sizes", "space",
                                        "space_dimension") if k in out})
    probe["encoding"] = "raw"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return core_fields(probe).space or out["space"]
    except HeaderError:
        return out["space"]  # left as given; the reader names the problem


def _caller_axes(value: Any, ndim: int, index_order: str, what: str) -> list[Any]:
    """A per-axis argument in the caller's axis order → header order."""
    vals = list(value)
    if len(vals) != ndim:
        raise ValueError(f"{what} needs {ndim} entries (one per axis), got {len(vals)}")
    return vals[::-1] if index_order == "C" else vals


def _default_tile(ndim: int) -> int:
    return 64 if ndim >= 3 else 256 if ndim == 2 else 65536


def _is_dask(data: Any) -> bool:
    """A Dask array, recognised without importing dask (importing jnrrd never imports it)."""
    return type(data).__module__.startswith("dask.") and hasattr(data, "chunks")


BuildHeader = Callable[..., bytes]


def plan_tiled(src: FileOrder, out: Header, prefix: str, type_name: str, *,
               encoding: str | None, tile: Any, compression: str | None,
               codecs: Sequence[Any] | None, levels: Any, downsample: str | None,
               index_order: str, options: Mapping[str, Any]) -> tuple[TilePlan, BuildHeader]:
    """Decide a tiled layout from header fields and keywords.

    Returns the :class:`TilePlan` and ``build(plan, sizes, offsets, metadata, base_dir,
    quality) -> bytes``, which renders the final header for given tables.
    """
    p = prefix + ":"
    ndim = len(src.shape)
    # -- geometry -------------------------------------------------------------------------
    if tile is not None:
        if isinstance(tile, Mapping):
            per = [None] * ndim
            for axis, size in tile.items():
                a = int(axis) % ndim
                per[ndim - 1 - a if index_order == "C" else a] = int(size)
            axes = tuple(a for a in range(ndim) if per[a] is not None)
            sizes = tuple(per[a] for a in axes)
        elif isinstance(tile, int):
            axes, sizes = tuple(range(ndim)), (tile,) * ndim
        else:
            vals = _caller_axes(tile, ndim, index_order, "tile")
            axes, sizes = tuple(range(ndim)), tuple(int(v) for v in vals)
    elif out.get(p + "dimensions") is not None or out.get(p + "sizes") is not None:
        axes, sizes = tile_geometry(out.get(p + "dimensions"), out.get(p + "sizes"), ndim, p)
    else:
        axes, sizes = tuple(range(ndim)), (_default_tile(ndim),) * ndim
    if not axes or any(s < 1 for s in sizes):
        raise ValueError(f"tile sizes must be ≥ 1, got {sizes}")
    edge = options.get("edge") or out.get(p + "edge_handling", "pad")
    ov = options.get("overlap")
    if ov is None:
        overlap = overlap_of(out.get(p + "overlap"), ndim, axes, p)
    elif isinstance(ov, (int, np.integer)):
        overlap = (int(ov),) * len(axes)
    else:
        ov = [int(v) for v in ov]
        if len(ov) == ndim:
            ov = _caller_axes(ov, ndim, index_order, "overlap")
        elif len(ov) != len(axes):
            raise HeaderError(f"write(): overlap needs {len(axes)} (tiled axes) or {ndim} "
                              f"(all axes) entries, got {len(ov)}")
        overlap = tuple(ov[a] for a in axes) if len(ov) == ndim else tuple(ov)
    pad_v = options.get("padding_value", out.get(p + "padding_value", 0))
    from .dtypes import user_dtype

    typed_padding(pad_v, user_dtype(type_name, src.dtype.itemsize, "uint16")
                  if type_name != "block" else src.dtype, p + "padding_value", "", type_name)
    # -- levels ---------------------------------------------------------------------------
    if levels is not None:
        if isinstance(levels, (list, tuple)) and index_order == "C":
            levels = [lv[::-1] if isinstance(lv, (list, tuple)) and len(lv) == ndim else lv
                      for lv in levels]
        scales = levels_from_argument(levels, ndim, axes)
    elif out.get(p + "level_scales") is not None:
        given = out[p + "level_scales"]
        if not isinstance(given, (list, tuple)):
            raise HeaderError(f"{p}level_scales: expected a list, found {given!r:.200}")
        scales = [expand_scale(s, ndim, axes, field=p + "level_scales") for s in given]
    else:
        scales = [(1,) * ndim]
    n_given = out.get(p + "levels")
    if levels is None and n_given is not None and n_given != len(scales):
        raise HeaderError(f"{p}level_scales: expected {n_given!r} entries ({p}levels), "
                          f"found {len(scales)}")
    lts = out.get(p + "level_tile_sizes")
    level_tiles = ([sizes] * len(scales) if lts is None or levels is not None
                   else level_tile_sizes(lts, len(scales), sizes, p))
    stored = out.get(p + "levels_stored")
    stored = (list(range(len(scales))) if stored is None
              else list(_int_list(stored, p + "levels_stored", "")))
    method = downsample or out.get(p + "downsample_method", "average")
    # -- codecs ---------------------------------------------------------------------------
    endian = _endian(out, type_name)
    enc = _ENC_ALIASES.get(encoding, encoding) if encoding else None
    if compression is None and enc not in (None, "raw"):
        if enc not in SHORTHAND:
            raise UnsupportedError(f"encoding {encoding!r} cannot be used with tiling")
        compression = enc
    comp = compression if compression is not None else out.get(p + "compression")
    if comp is not None and (not isinstance(comp, str) or comp not in SHORTHAND):
        raise HeaderError(f"{p}compression: expected one of raw, gzip, bzip2, zstd, lz4, "
                          f"found {comp!r:.80}")
    chain_dtype = np.dtype("u2") if type_name == "bfloat16" else src.dtype
    header_codecs = out.get(p + "codecs")
    if header_codecs is not None and (not isinstance(header_codecs, (list, tuple))
                                      or not header_codecs):
        raise HeaderError(f"{p}codecs: expected a non-empty list of codec objects, found "
                          f"{header_codecs!r:.80}")
    if codecs is not None or header_codecs is not None:
        chain = [c.to_json() if hasattr(c, "to_json") else c
                 for c in (codecs if codecs is not None else out[p + "codecs"])]
        # The header's endian describes the stored bytes: take it from the bytes codec
        # (CONVENTIONS §1.2: they must agree).
        for c in chain:
            cfg = c.get("configuration") if isinstance(c, Mapping) else None
            if isinstance(c, Mapping) and c.get("name") == "bytes" and isinstance(cfg, Mapping):
                if cfg.get("endian") in ("little", "big"):
                    if "endian" in out and out["endian"] != cfg["endian"]:
                        raise HeaderError(f"endian: {out['endian']!r} disagrees with the bytes "
                                          f"codec's endian {cfg['endian']!r}")
                    endian = cfg["endian"]
    else:
        chain = compression_chain(comp, endian, chain_dtype, options.get("compression_level"))
    storage = options.get("storage") or out.get(p + "storage", "internal")
    pattern = options.get("pattern")
    pattern = out.get(p + "pattern") if pattern is None else pattern
    if storage == "external" and pattern is None:
        names = "xyzct"
        parts = [f"{{{names[k]}}}" if k < 5 else "" for k in range(len(axes))][::-1]
        pattern = ("{l}/" if len(scales) > 1 else "") + "_".join(p_ for p_ in parts if p_)
        if len(axes) > 5:
            pattern = ("{l}/" if len(scales) > 1 else "") + "{i}"
        pattern += ".tile"
    plan = TilePlan(
        prefix=prefix, type_name=type_name, endian=endian, shape=src.shape, axes=axes,
        tile=sizes, overlap=overlap, edge=edge, padding_value=pad_v, storage=storage,
        fmt=options.get("tile_format") or out.get(p + "format", "contiguous"), scales=scales,
        level_tiles=level_tiles, stored=stored, codecs=chain, method=method, pattern=pattern,
        decision=options.get("decision"), sparse=bool(options.get("sparse", False)),
        tile_stats=bool(options.get("tile_stats", False)), checksum=options.get("checksum"),
        quality=bool(options.get("quality", False)), align=int(options.get("align", 0) or 0),
        progress=_progress(options.get("progress")),
    )
    # -- the header -----------------------------------------------------------------------
    for k in [k for k in out if k.startswith(p)]:
        out.pop(k)
    out.pop("data_file", None)
    out["encoding"] = "raw"
    if type_name == "block":
        out["block_size"] = src.dtype.itemsize
    if type_name != "block" and chain_dtype.itemsize > 1:
        out["endian"] = endian
    ext = dict(out.get("extensions") or {})
    ext[prefix] = ext.get(prefix, TILE_URI)
    out["extensions"] = ext

    def build(plan: TilePlan, tile_sizes: list[int | None], offsets: list[int],
              meta: list[Any], base_dir: str | None, quality: list[Any] | None) -> bytes:
        h = Header(out)
        h[p + "enabled"] = True
        h[p + "dimensions"] = list(plan.axes)
        h[p + "sizes"] = list(plan.tile)
        h[p + "storage"] = plan.storage
        if plan.storage == "internal":
            h[p + "format"] = plan.fmt
            h[p + "offset_table"] = [None if o < 0 else o for o in offsets]
            h[p + "size_table"] = tile_sizes
        else:
            h[p + "pattern"] = plan.pattern
            h[p + "base_dir"] = base_dir
            sparse = [(lv, c) for lv in plan.levels if lv.stored for c in lv.grid.all_coords()
                      if tile_sizes[lv.first + lv.grid.index(c)] is None]
            if sparse:
                h[p + "files"] = [{"level": lv.index, "indices": list(c), "file": None}
                                  for lv, c in sparse]
        if plan.edge != "pad":
            h[p + "edge_handling"] = plan.edge
        if plan.padding_value != 0 or math.copysign(1.0, plan.padding_value) < 0:
            h[p + "padding_value"] = plan.padding_value  # -0.0 is kept (sparse tiles)
        if any(plan.overlap):
            h[p + "overlap"] = list(plan.overlap)
        if codecs is None and header_codecs is None:
            h[p + "compression"] = {"gz": "gzip", "bz2": "bzip2"}.get(comp, comp or "raw")
        else:
            if comp is not None:  # both asked for: they must agree (CONVENTIONS §1.2)
                h[p + "compression"] = {"gz": "gzip", "bz2": "bzip2"}.get(comp, comp)
            h[p + "codecs"] = plan.codecs
        if len(plan.scales) > 1:
            h[p + "levels"] = len(plan.scales)
            h[p + "level_scales"] = [_scale_json(s, plan.axes) for s in plan.scales]
            if any(t != plan.tile for t in plan.level_tiles):
                h[p + "level_tile_sizes"] = [list(t) for t in plan.level_tiles]
            if len(plan.stored) != len(plan.scales):
                h[p + "levels_stored"] = plan.stored
                h[p + "levels_virtual"] = [i for i in range(len(plan.scales))
                                           if i not in plan.stored]
            h[p + "downsample_method"] = plan.method
            if plan.storage == "internal" and offsets:
                firsts = []
                for lv in plan.levels:
                    if lv.stored:
                        live = [o for o in offsets[lv.first: lv.first + lv.grid.ntiles]
                                if o >= 0]
                        firsts.append(live[0] if live else None)
                if all(f is not None for f in firsts):
                    h[p + "level_offsets"] = firsts
            if quality is not None:
                h[p + "level_quality"] = quality
        if any(meta):
            h[p + "metadata"] = meta
        return render_header(h)

    return plan, build


def _scale_json(scale: tuple[int, ...], axes: tuple[int, ...]) -> Any:
    vals = {scale[a] for a in axes}
    untiled_one = all(scale[a] == 1 for a in range(len(scale)) if a not in axes)
    if len(vals) == 1 and untiled_one:
        return vals.pop()
    return list(scale)


def _progress(p: Any) -> Callable[[int, int], None] | None:
    if p is None or p is False:
        return None
    if p is True:
        from .progress import Bar

        return Bar()
    if callable(p):
        return p
    raise TypeError("progress must be a callable(done, total) or True")
