"""Header → tiling description: every ``tile:*`` field checked and resolved (docs/format.md#tiling).

:func:`parse_tiling` returns a frozen :class:`Tiling` (or ``None`` for untiled files). It
checks each field's type and consistency, resolves the per-tile codec chain
(docs/format.md#codec-chain: ``tile:codecs``, else the ``tile:compression`` shorthand, else the core
encoding), and builds one :class:`~jnrrd.tiling.levels.Level` per resolution level. The codec chain
fields are checked in :mod:`.codec_fields`, the storage fields (tables, external files) in
:mod:`.storage_fields`; where tile bytes live is checked by :mod:`jnrrd.tiling.locate`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import user_dtype
from ..errors import HeaderError, JnrrdWarning, UnsupportedError, where
from ..policy import Policy
from ..pyramid.methods import METHODS
from .codec_fields import resolve_codecs
from .grid import TileGrid
from .levels import Level, expand_scale, level_shape
from .storage_fields import external_fields, internal_tables
from .values import int_list, is_int

__all__ = ["TILE_URI", "Tiling", "level_tile_sizes", "overlap_of", "parse_tiling",
           "tile_geometry", "typed_padding"]

TILE_URI = "https://jnrrd.org/extensions/tile/"

@dataclass(frozen=True)
class Tiling:
    """Everything the reader needs to know about a tiled file's layout."""

    prefix: str
    axes: tuple[int, ...]
    tile: tuple[int, ...]
    overlap: tuple[int, ...]
    edge: str
    padding_value: Any  # JSON value (number or None)
    storage: str
    format: str
    levels: tuple[Level, ...]
    codecs: tuple[dict[str, Any], ...]  # resolved Zarr v3 chain (JSON)
    gzip_lenient: bool  # gzip from the shorthand/encoding also accepts zlib (with a warning)
    offset_table: np.ndarray | None  # int64, -1 for sparse (null) entries
    size_table: np.ndarray | None  # int64, -1 for null / unknown
    pattern: str | None
    files: Mapping[tuple[int, tuple[int, ...]], str | None] | None
    base_dir: str | None
    metadata: tuple[Any, ...] | None
    downsample_method: str
    nstored: int

    @property
    def stored_levels(self) -> tuple[Level, ...]:
        """The levels whose tiles the file stores."""
        return tuple(lv for lv in self.levels if lv.stored)

    def field(self, name: str) -> str:
        """The full header key of a tiling field (``"tile:sizes"`` for prefix ``tile``)."""
        return f"{self.prefix}:{name}"


def typed_padding(value: Any, dtype: np.dtype, key: str, pre: str,
                  type_name: str | None = None) -> Any:
    """Check ``tile:padding_value`` against the dtype (docs/format.md#tiling-fields) and return a
    Python scalar.

    ``bfloat16`` (``type_name``, or an ``ml_dtypes`` dtype) is a float type whatever dtype
    carries its words."""
    if type_name == "bfloat16":
        dtype = np.dtype(np.float32)
    kind = dtype.kind
    if value is None:
        if kind in "fc" or dtype.name == "bfloat16":
            return float("nan")
        raise HeaderError(f"{pre}{key}: null (NaN) padding needs a float type, not {dtype}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise HeaderError(f"{pre}{key}: expected a number or null, found {value!r}")
    if kind in "iu":
        if not is_int(value):
            raise HeaderError(f"{pre}{key}: {dtype} padding must be an integer, found {value!r}")
        info = np.iinfo(dtype)
        if not info.min <= int(value) <= info.max:
            raise HeaderError(f"{pre}{key}: {value!r} is out of range for {dtype}")
        return int(value)
    if kind == "V":
        return 0
    try:
        return float(value)
    except OverflowError:  # an integer literal beyond the float64 range
        raise HeaderError(f"{pre}{key}: {value!r:.40} is beyond the float64 range") from None


def parse_tiling(
    header: Mapping[str, Any],
    core: Any,
    *,
    prefix: str | None,
    policy: Policy,
    source: Any = None,
) -> Tiling | None:
    """Check and resolve the tiling fields of ``header`` (``None`` when tiling is off).

    ``core`` is the header's :class:`~jnrrd.header.CoreFields`; ``prefix`` the tiling prefix
    found through its declared URI (``None`` when no ``tile`` fields are present).
    """
    if prefix is None:
        return None
    pre = where(source)
    p = prefix + ":"

    def get(name: str, default: Any = None) -> Any:
        return header.get(p + name, default)

    if not _enabled(header, p, pre):
        return None
    if get("zarr_compatible") is True:
        raise UnsupportedError(f"{pre}{p}zarr_compatible: true is not defined by the spec")
    if core.encoding in ("ascii", "hex"):
        raise UnsupportedError(f"{pre}encoding: {core.encoding!r} cannot be used with tiling")
    if core.type_name == "block" and get("codecs") is not None:
        raise UnsupportedError(f"{pre}{p}codecs: not supported for type 'block'")

    ndim = core.dimension
    shape0 = tuple(core.sizes)
    axes, tile = tile_geometry(get("dimensions"), get("sizes"), ndim, p, pre)
    storage = get("storage")
    if storage not in ("internal", "external"):
        raise HeaderError(f"{pre}{p}storage: expected 'internal' or 'external', found {storage!r}")
    fmt = get("format", "contiguous")
    if fmt not in ("contiguous", "chunked"):
        raise HeaderError(f"{pre}{p}format: expected 'contiguous' or 'chunked', found {fmt!r}")
    edge = get("edge_handling", "pad")
    if edge not in ("pad", "variable"):
        raise HeaderError(f"{pre}{p}edge_handling: expected 'pad' or 'variable', found {edge!r}")
    dtype = user_dtype(core.type_name, core.block_size, "uint16")
    padding = typed_padding(get("padding_value", 0), dtype, p + "padding_value", pre,
                            core.type_name)
    overlap = overlap_of(get("overlap"), ndim, axes, p, pre)
    for k, o in enumerate(overlap):
        if o and o >= tile[k]:
            warnings.warn(f"{pre}{p}overlap: {o} is not smaller than the tile size {tile[k]}",
                          JnrrdWarning, stacklevel=3)

    levels = _levels(header, p, pre, ndim, shape0, axes, tile, overlap, edge, policy,
                     core, dtype)
    nstored = sum(lv.grid.ntiles for lv in levels if lv.stored)
    codecs, lenient = resolve_codecs(header, p, pre, core, dtype)
    method = get("downsample_method", "average")
    if method not in METHODS:
        raise HeaderError(f"{pre}{p}downsample_method: expected one of {METHODS}, found {method!r}")

    offsets = sizes = None
    pattern = files = base_dir = None
    if storage == "internal":
        offsets, sizes = internal_tables(header, p, pre, nstored, fmt)
    else:
        for name in ("offset_table", "size_table"):
            if get(name) is not None:
                warnings.warn(f"{pre}{p}{name} does not apply to external storage: ignored",
                              JnrrdWarning, stacklevel=3)
        pattern, files, base_dir = external_fields(header, p, pre, axes, levels, policy)
    metadata = _metadata(get("metadata"), p, pre, nstored)
    return Tiling(
        prefix=prefix, axes=axes, tile=tile, overlap=overlap, edge=edge,
        padding_value=padding, storage=storage, format=fmt, levels=levels,
        codecs=tuple(codecs), gzip_lenient=lenient, offset_table=offsets, size_table=sizes,
        pattern=pattern, files=files, base_dir=base_dir, metadata=metadata,
        downsample_method=method, nstored=nstored,
    )



def _enabled(header: Mapping[str, Any], p: str, pre: str) -> bool:
    """``tile:enabled``: required with tiling fields; false ignores them (warned)."""
    enabled = header.get(p + "enabled")
    if enabled is None:
        if any(k.startswith(p) for k in header):
            raise HeaderError(f"{pre}{p}enabled: required when tiling fields are present")
        return False
    if not isinstance(enabled, bool):
        raise HeaderError(f"{pre}{p}enabled: expected true or false, found {enabled!r}")
    if not enabled:
        warnings.warn(f"{pre}{p}enabled is false: tiling fields ignored", JnrrdWarning,
                      stacklevel=4)  # the caller of parse_tiling's caller, as before
        return False
    return True


def _metadata(metadata: Any, p: str, pre: str, nstored: int) -> tuple[Any, ...] | None:
    """``tile:metadata``: one entry per stored tile."""
    if metadata is not None:
        if not isinstance(metadata, list) or len(metadata) != nstored:
            raise HeaderError(
                f"{pre}{p}metadata: expected a list of {nstored} objects (one per stored tile), "
                f"found {type(metadata).__name__} of length "
                f"{len(metadata) if isinstance(metadata, list) else '-'}"
            )
        metadata = tuple(metadata)
    return metadata

def tile_geometry(dims: Any, sizes: Any, ndim: int, p: str, pre: str = ""
                  ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``tile:dimensions`` and ``tile:sizes`` checked (HeaderError naming the field)."""
    axes = int_list(dims, p + "dimensions", pre)
    if not axes or any(a >= ndim for a in axes) or any(
        b <= a for a, b in zip(axes, axes[1:], strict=False)
    ):
        raise HeaderError(
            f"{pre}{p}dimensions: expected strictly increasing axis numbers in [0, {ndim}), "
            f"found {list(axes)}"
        )
    return axes, int_list(sizes, p + "sizes", pre, minimum=1, length=len(axes))


def level_tile_sizes(lts: Any, n: int, tile: tuple[int, ...], p: str, pre: str = ""
                     ) -> list[tuple[int, ...]]:
    """``tile:level_tile_sizes`` for ``n`` levels checked (entry 0 must be ``tile``)."""
    if not isinstance(lts, list) or len(lts) != n:
        raise HeaderError(f"{pre}{p}level_tile_sizes: expected {n} lists, found {lts!r:.200}")
    tiles = [int_list(t, p + "level_tile_sizes", pre, minimum=1, length=len(tile))
             for t in lts]
    if tiles[0] != tile:
        raise HeaderError(
            f"{pre}{p}level_tile_sizes: entry 0 must equal {p}sizes {list(tile)}, "
            f"found {list(tiles[0])}"
        )
    return tiles


def overlap_of(v: Any, ndim: int, axes: Sequence[int], p: str, pre: str = "") -> tuple[int, ...]:
    """``tile:overlap`` (tiled axes or all axes) as one entry per tiled axis, checked."""
    if v is None:
        return (0,) * len(axes)
    vals = int_list(v, p + "overlap", pre)
    if len(vals) == len(axes):
        return vals
    if len(vals) == ndim:
        if any(vals[a] for a in range(ndim) if a not in axes):
            raise HeaderError(f"{pre}{p}overlap: entries for untiled axes must be 0, found {vals}")
        return tuple(vals[a] for a in axes)
    raise HeaderError(
        f"{pre}{p}overlap: expected {len(axes)} (tiled axes) or {ndim} (all axes) entries, "
        f"found {len(vals)}"
    )


def _levels(header: Mapping[str, Any], p: str, pre: str, ndim: int, shape0: tuple[int, ...],
            axes: tuple[int, ...], tile: tuple[int, ...], overlap: tuple[int, ...], edge: str,
            policy: Policy, core: Any, dtype: np.dtype) -> tuple[Level, ...]:
    n = header.get(p + "levels")
    scales_v = header.get(p + "level_scales")
    if n is not None and (not is_int(n) or n < 1):
        raise HeaderError(f"{pre}{p}levels: expected an integer ≥ 1, found {n!r}")
    if scales_v is not None and not isinstance(scales_v, list):
        raise HeaderError(f"{pre}{p}level_scales: expected a list, found {scales_v!r}")
    if n is None:
        n = len(scales_v) if scales_v is not None else 1
    n = int(n)
    if n > policy.max_levels:  # before any per-level work (a level costs its bookkeeping)
        raise UnsupportedError(f"{pre}{p}levels: {n} levels exceed the max_levels cap "
                               f"({policy.max_levels}); pass max_levels=... to allow them")
    if n > 1 and scales_v is None:
        raise HeaderError(f"{pre}{p}level_scales: required when {p}levels is {n}")
    if scales_v is not None and len(scales_v) != n:
        raise HeaderError(
            f"{pre}{p}level_scales: expected {n} entries ({p}levels), found {len(scales_v)}"
        )
    scales = [expand_scale(s, ndim, axes, field=p + "level_scales", prefix=pre)
              for s in (scales_v or [1])]
    if any(s != 1 for s in scales[0]):
        first = (scales_v or [1])[0]
        raise HeaderError(f"{pre}{p}level_scales: level 0 must have scale 1, found {first!r}")
    lts = header.get(p + "level_tile_sizes")
    if lts is not None:
        tiles = level_tile_sizes(lts, n, tile, p, pre)
    else:
        tiles = [tile] * n
    stored_v, virtual_v = header.get(p + "levels_stored"), header.get(p + "levels_virtual")
    stored_set = set(range(n))
    if stored_v is not None:
        stored_set = set(int_list(stored_v, p + "levels_stored", pre))
        if len(stored_set) != len(stored_v) or any(i >= n for i in stored_set):
            raise HeaderError(f"{pre}{p}levels_stored: expected distinct levels < {n}, "
                              f"found {stored_v!r}")
    if virtual_v is not None:
        virtual = set(int_list(virtual_v, p + "levels_virtual", pre))
        if len(virtual) != len(virtual_v) or any(i >= n for i in virtual):
            raise HeaderError(f"{pre}{p}levels_virtual: expected distinct levels < {n}, "
                              f"found {virtual_v!r}")
        if stored_v is None:
            stored_set = set(range(n)) - virtual
        elif virtual & stored_set or virtual | stored_set != set(range(n)):
            raise HeaderError(
                f"{pre}{p}levels_stored/{p}levels_virtual: must be disjoint and cover 0..{n - 1}"
            )
    if 0 not in stored_set:
        raise HeaderError(f"{pre}{p}levels_stored: level 0 must be stored")
    levels, first, total = [], 0, 0
    itemsize = dtype.itemsize
    for i in range(n):
        grid = TileGrid(level_shape(shape0, scales[i]), axes, tiles[i], overlap, edge)
        total += grid.ntiles
        if total > policy.max_tiles:
            raise UnsupportedError(
                f"{pre}{p}sizes: {total} tiles exceed the max_tiles cap ({policy.max_tiles})"
            )
        tile_bytes = math.prod(grid.max_stored_shape()) * itemsize
        if tile_bytes > policy.max_tile_bytes:
            raise UnsupportedError(
                f"{pre}{p}sizes: one tile decodes to {tile_bytes} bytes, over the "
                f"max_tile_bytes cap ({policy.max_tile_bytes})"
            )
        is_stored = i in stored_set
        levels.append(Level(i, scales[i], grid, is_stored, first if is_stored else -1))
        if is_stored:
            first += grid.ntiles
    return tuple(levels)


