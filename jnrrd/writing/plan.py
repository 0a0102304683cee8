"""The tiled layout ``write`` asks for: tile geometry, levels, codecs and the final header.

:func:`plan_tiled` turns header fields and ``write`` keywords into a
:class:`~jnrrd.writing.layout.TilePlan` and a function that renders the final header once the tile
tables are known. Axis kinds decide which axes an integer tile covers and which axes levels
scale (docs/format.md#domain-axes, :mod:`jnrrd.tiling.kinds`); every layout is checked against the
readers' default caps before anything is allocated.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..clinical.labels import default_downsample, warn_if_averaged
from ..codecs.levels import check_level
from ..errors import HeaderError, UnsupportedError
from ..header import TILE_URI, Header, render_header
from ..tiling.codec_fields import CANONICAL_COMPRESSION, SHORTHAND, compression_chain
from ..tiling.kinds import (
    axis_kinds,
    cap_level_tiles,
    cap_tile,
    check_level_scales,
    check_tile_caps,
    domain_axes,
    is_domain,
    max_levels,
)
from ..tiling.levels import expand_scale, level_shape, levels_from_argument
from ..tiling.spec import level_tile_sizes, overlap_of, tile_geometry, typed_padding
from ..tiling.values import int_list
from .checks import check_layout_request
from .layout import TilePlan
from .source import FileOrder
from .untiled import _ENC_ALIASES, _endian

__all__ = ["BuildHeader", "default_pattern", "plan_tiled"]


def _caller_axes(value: Any, ndim: int, index_order: str, what: str) -> list[Any]:
    """A per-axis argument in the caller's axis order → header order."""
    vals = list(value)
    if len(vals) != ndim:
        raise ValueError(f"{what} needs {ndim} entries (one per axis), got {len(vals)}")
    return vals[::-1] if index_order == "C" else vals


def _default_tile(ndim: int) -> int:
    return 64 if ndim >= 3 else 256 if ndim == 2 else 65536


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
    kinds = axis_kinds(out, len(src.shape))
    axes, sizes, auto = _tile_geometry(src.shape, out, p, tile, index_order, kinds)
    edge = options.get("edge") or out.get(p + "edge_handling", "pad")
    overlap = _overlap(options, out, p, len(src.shape), axes, index_order)
    if auto:
        sizes = cap_tile(sizes, axes, src.shape, overlap)
    pad_v = options.get("padding_value", out.get(p + "padding_value", 0))
    from ..dtypes import user_dtype

    typed_padding(pad_v, user_dtype(type_name, src.dtype.itemsize, "uint16")
                  if type_name != "block" else src.dtype, p + "padding_value", "", type_name)
    scales = _scales(levels, out, p, src.shape, axes, kinds, index_order)
    level_tiles = _level_tiles(out, p, src.shape, axes, sizes, overlap, scales, auto, levels)
    stored = out.get(p + "levels_stored")
    stored = (list(range(len(scales))) if stored is None
              else list(int_list(stored, p + "levels_stored", "")))
    method = downsample or out.get(p + "downsample_method") or default_downsample(out, src.dtype)
    if len(scales) > 1:
        warn_if_averaged(out, src.dtype, method)
    chain_dtype = np.dtype("u2") if type_name == "bfloat16" else src.dtype
    chain, endian, comp, explicit = _chain(out, p, type_name, chain_dtype, encoding,
                                           compression, codecs, options)
    storage = options.get("storage") or out.get(p + "storage", "internal")
    pattern = options.get("pattern")
    pattern = out.get(p + "pattern") if pattern is None else pattern
    check_layout_request(p, scales, storage, options, out)
    if storage == "external" and pattern is None:
        pattern = default_pattern(len(axes), len(scales))
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
    check_tile_caps([lv.grid for lv in plan.levels], max(chain_dtype.itemsize, 1), "tile")
    _core_fields(out, p, prefix, type_name, src.dtype, chain_dtype, endian)
    return plan, functools.partial(_build_header, out, p, comp, explicit)


def _tile_geometry(shape: tuple[int, ...], out: Header, p: str, tile: Any, index_order: str,
                   kinds: tuple[str | None, ...]) -> tuple[tuple[int, ...], tuple[int, ...], bool]:
    """``(tiled axes, tile sizes, auto)``; ``auto`` marks an integer (or the default) tile:
    it tiles the domain axes only (docs/format.md#domain-axes) and is capped at the axis lengths
    later.

    A sequence may hold ``None`` for an axis left untiled; a dict maps axis -> size.
    """
    ndim = len(shape)
    if tile is None and (out.get(p + "dimensions") is not None
                         or out.get(p + "sizes") is not None):
        axes, sizes = tile_geometry(out.get(p + "dimensions"), out.get(p + "sizes"), ndim, p)
        auto = False
    elif tile is None or isinstance(tile, (int, np.integer)) and not isinstance(tile, bool):
        n = _default_tile(ndim) if tile is None else int(tile)
        # With no domain axis at all, every axis is tiled (there is nothing else to tile).
        axes = domain_axes(kinds) or tuple(range(ndim))
        sizes, auto = (n,) * len(axes), True
    else:
        per: list[Any] = [None] * ndim
        if isinstance(tile, Mapping):
            for axis, size in tile.items():
                a = int(axis) % ndim
                per[ndim - 1 - a if index_order == "C" else a] = size
        else:
            per = _caller_axes(tile, ndim, index_order, "tile")
        axes = tuple(a for a in range(ndim) if per[a] is not None)
        sizes, auto = tuple(int(per[a]) for a in axes), False
    if not axes:
        raise ValueError("tile: at least one axis must be tiled (None leaves an axis untiled)")
    if any(s < 1 for s in sizes):
        raise ValueError(f"tile sizes must be ≥ 1, got {sizes}")
    return axes, sizes, auto


def _overlap(options: Mapping[str, Any], out: Header, p: str, ndim: int,
             axes: tuple[int, ...], index_order: str) -> tuple[int, ...]:
    ov = options.get("overlap")
    if ov is None:
        return overlap_of(out.get(p + "overlap"), ndim, axes, p)
    if isinstance(ov, (int, np.integer)):
        return (int(ov),) * len(axes)
    ov = [int(v) for v in ov]
    if len(ov) == ndim:
        ov = _caller_axes(ov, ndim, index_order, "overlap")
    elif len(ov) != len(axes):
        raise HeaderError(f"write(): overlap needs {len(axes)} (tiled axes) or {ndim} "
                          f"(all axes) entries, got {len(ov)}")
    return tuple(ov[a] for a in axes) if len(ov) == ndim else tuple(ov)


def _scales(levels: Any, out: Header, p: str, shape: tuple[int, ...], axes: tuple[int, ...],
            kinds: tuple[str | None, ...], index_order: str) -> list[tuple[int, ...]]:
    """Per-level scales over all axes; only tiled domain axes are ever scaled."""
    ndim = len(shape)
    scaled = tuple(a for a in axes if is_domain(kinds[a]))
    field = "levels"
    if levels is not None:
        if isinstance(levels, (int, np.integer)) and not isinstance(levels, bool):
            top = max_levels(shape, scaled)
            if levels > top:  # checked before the scales are listed (levels may be huge)
                check_level_scales(levels_from_argument(top + 1, ndim, axes, scaled), shape,
                                   kinds, scaled, field)
        if isinstance(levels, (list, tuple)) and index_order == "C":
            levels = [lv[::-1] if isinstance(lv, (list, tuple)) and len(lv) == ndim else lv
                      for lv in levels]
        scales = levels_from_argument(levels, ndim, axes, scaled)
    elif out.get(p + "level_scales") is not None:
        field = p + "level_scales"
        given = out[p + "level_scales"]
        if not isinstance(given, (list, tuple)):
            raise HeaderError(f"{p}level_scales: expected a list, found {given!r:.200}")
        scales = [expand_scale(s, ndim, axes, field=field) for s in given]
    else:
        scales = [(1,) * ndim]
    n_given = out.get(p + "levels")
    if levels is None and n_given is not None and n_given != len(scales):
        raise HeaderError(f"{p}level_scales: expected {n_given!r} entries ({p}levels), "
                          f"found {len(scales)}")
    check_level_scales(scales, shape, kinds, scaled, field)
    return scales


def _level_tiles(out: Header, p: str, shape: tuple[int, ...], axes: tuple[int, ...],
                 sizes: tuple[int, ...], overlap: tuple[int, ...],
                 scales: list[tuple[int, ...]], auto: bool, levels: Any
                 ) -> list[tuple[int, ...]]:
    """Tile sizes per level: the header's (unless ``levels`` asks for new levels), else the
    level-0 tile (capped at every level's shape when it is an integer tile, so small levels
    are not padded to a large tile)."""
    lts = out.get(p + "level_tile_sizes")
    if lts is not None and levels is None:
        return list(level_tile_sizes(lts, len(scales), sizes, p))
    if auto:
        return cap_level_tiles(sizes, axes, [level_shape(shape, s) for s in scales], overlap)
    return [sizes] * len(scales)


def _chain(out: Header, p: str, type_name: str, chain_dtype: np.dtype, encoding: str | None,
           compression: str | None, codecs: Sequence[Any] | None, options: Mapping[str, Any]
           ) -> tuple[list[Any], str, str | None, bool]:
    """``(codec chain, endian, compression name, explicit)``; ``explicit`` when the chain came
    from ``codecs`` (argument or header) rather than a compression name."""
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
    header_codecs = out.get(p + "codecs")
    if header_codecs is not None and (not isinstance(header_codecs, (list, tuple))
                                      or not header_codecs):
        raise HeaderError(f"{p}codecs: expected a non-empty list of codec objects, found "
                          f"{header_codecs!r:.80}")
    given = codecs if codecs is not None else header_codecs
    if given is None:
        check_level(SHORTHAND.get(comp or "raw") or "raw", options.get("compression_level"))
        chain = compression_chain(comp, endian, chain_dtype, options.get("compression_level"))
        return chain, endian, comp, False
    chain = [c.to_json() if hasattr(c, "to_json") else c for c in given]
    # The header's endian describes the stored bytes: take it from the bytes codec
    # (docs/format.md#compression-shorthand: they must agree).
    for c in chain:
        cfg = c.get("configuration") if isinstance(c, Mapping) else None
        if isinstance(c, Mapping) and c.get("name") == "bytes" and isinstance(cfg, Mapping):
            if cfg.get("endian") in ("little", "big"):
                if "endian" in out and out["endian"] != cfg["endian"]:
                    raise HeaderError(f"endian: {out['endian']!r} disagrees with the bytes "
                                      f"codec's endian {cfg['endian']!r}")
                endian = cfg["endian"]
    return chain, endian, comp, True


def default_pattern(ntiled: int, nlevels: int) -> str:
    """External tile names: ``{z}_{y}_{x}.tile`` (``{i}`` past 5 tiled axes), ``{l}/`` first
    for pyramids."""
    names = "xyzct"
    parts = [f"{{{names[k]}}}" if k < 5 else "" for k in range(ntiled)][::-1]
    body = "{i}" if ntiled > 5 else "_".join(q for q in parts if q)
    return ("{l}/" if nlevels > 1 else "") + body + ".tile"


def _core_fields(out: Header, p: str, prefix: str, type_name: str, dtype: np.dtype,
                 chain_dtype: np.dtype, endian: str) -> None:
    """The core fields of a tiled file; old tiling fields go (``build`` writes new ones)."""
    for k in [k for k in out if k.startswith(p)]:
        out.pop(k)
    out.pop("data_file", None)
    out["encoding"] = "raw"
    if type_name == "block":
        out["block_size"] = dtype.itemsize
    if type_name != "block" and chain_dtype.itemsize > 1:
        out["endian"] = endian
    ext = dict(out.get("extensions") or {})
    ext[prefix] = ext.get(prefix, TILE_URI)
    out["extensions"] = ext


def _build_header(out: Header, p: str, comp: str | None, explicit: bool, plan: TilePlan,
                  tile_sizes: list[int | None], offsets: list[int], meta: list[Any],
                  base_dir: str | None, quality: list[Any] | None) -> bytes:
    """The final header for the written tables: the chain as ``tile:codecs`` when it was
    ``explicit``, else as the ``tile:compression`` shorthand ``comp``."""
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
    if not explicit:
        h[p + "compression"] = CANONICAL_COMPRESSION.get(comp, comp) if comp else "raw"
    else:
        # both asked for: they must agree (docs/format.md#compression-shorthand)
        if comp is not None:
            h[p + "compression"] = CANONICAL_COMPRESSION.get(comp, comp)
        h[p + "codecs"] = plan.codecs
    if len(plan.scales) > 1:
        _level_fields(h, p, plan, offsets, quality)
    if any(meta):
        h[p + "metadata"] = meta
    return render_header(h)


def _level_fields(h: Header, p: str, plan: TilePlan, offsets: list[int],
                  quality: list[Any] | None) -> None:
    h[p + "levels"] = len(plan.scales)
    h[p + "level_scales"] = [_scale_json(s, plan.axes) for s in plan.scales]
    if any(t != plan.tile for t in plan.level_tiles):
        h[p + "level_tile_sizes"] = [list(t) for t in plan.level_tiles]
    if len(plan.stored) != len(plan.scales):
        h[p + "levels_stored"] = plan.stored
        h[p + "levels_virtual"] = [i for i in range(len(plan.scales)) if i not in plan.stored]
    h[p + "downsample_method"] = plan.method
    if plan.storage == "internal" and offsets:
        firsts = []
        for lv in plan.levels:
            if lv.stored:
                live = [o for o in offsets[lv.first: lv.first + lv.grid.ntiles] if o >= 0]
                firsts.append(live[0] if live else None)
        if all(f is not None for f in firsts):
            h[p + "level_offsets"] = firsts
    if quality is not None:
        h[p + "level_quality"] = quality


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
        from ..progress import Bar

        return Bar()
    if callable(p):
        return p
    raise TypeError("progress must be a callable(done, total) or True")
