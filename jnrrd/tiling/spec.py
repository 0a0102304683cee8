"""Header → tiling description: every ``tile:*`` field checked and resolved (digest §2).

:func:`parse_tiling` returns a frozen :class:`Tiling` (or ``None`` for untiled files). It
checks each field's type and consistency, resolves the per-tile codec chain (CONVENTIONS
§1.2: ``tile:codecs``, else the ``tile:compression`` shorthand, else the core encoding), and
builds one :class:`~jnrrd.tiling.levels.Level` per resolution level. Where tile bytes live is
checked by :mod:`jnrrd.tiling.locate`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import HeaderError, JnrrdWarning, UnsupportedError, where
from ..policy import Policy
from .grid import TileGrid
from .levels import Level, expand_scale, level_shape

__all__ = ["TILE_URI", "Tiling", "check_codec_objects", "codec_names", "compression_chain",
           "level_tile_sizes", "overlap_of", "parse_tiling", "shorthand_names", "tile_geometry",
           "typed_padding"]

TILE_URI = "https://jnrrd.org/extensions/tile/"

#: tile:compression shorthand -> bytes->bytes codec name (CONVENTIONS §1.2)
SHORTHAND = {"raw": None, "gzip": "gzip", "gz": "gzip", "bzip2": "bz2", "bz2": "bz2",
             "zstd": "zstd", "lz4": "lz4"}
CANONICAL_COMPRESSION = {"gz": "gzip", "bz2": "bzip2"}
#: codec name -> tile:compression value, for comparing the two fields by codec name
CODEC_TO_COMPRESSION = {"gzip": "gzip", "bz2": "bzip2", "zstd": "zstd", "lz4": "lz4"}
METHODS = ("average", "gaussian", "lanczos", "max", "min", "mode")


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
        return tuple(lv for lv in self.levels if lv.stored)

    def field(self, name: str) -> str:
        """The full header key of a tiling field (``"tile:sizes"`` for prefix ``tile``)."""
        return f"{self.prefix}:{name}"


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) or (
        isinstance(v, float) and v.is_integer()
    )


def _int_list(v: Any, key: str, pre: str, *, minimum: int = 0, length: int | None = None
              ) -> tuple[int, ...]:
    if not isinstance(v, list) or not all(_is_int(x) and x >= minimum for x in v):
        raise HeaderError(f"{pre}{key}: expected a list of integers ≥ {minimum}, found {v!r:.200}")
    if length is not None and len(v) != length:
        raise HeaderError(f"{pre}{key}: expected {length} entries, found {len(v)}")
    return tuple(int(x) for x in v)


def typed_padding(value: Any, dtype: np.dtype, key: str, pre: str,
                  type_name: str | None = None) -> Any:
    """Check ``tile:padding_value`` against the dtype (digest 2.2) and return a Python scalar.

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
        if not _is_int(value):
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


def compression_chain(name: str | None, endian: str, dtype: np.dtype,
                      level: int | None = None) -> list[dict[str, Any]]:
    """The chain a ``tile:compression`` value stands for (CONVENTIONS §1.2)."""
    chain: list[dict[str, Any]] = [bytes_codec(endian, dtype)]
    codec = SHORTHAND.get(name or "raw")
    if codec is not None:
        entry: dict[str, Any] = {"name": codec}
        if codec in ("gzip", "zstd"):
            entry["configuration"] = {"level": 6 if codec == "gzip" and level is None
                                      else 3 if level is None else level}
        elif level is not None and codec in ("bz2", "lz4"):
            entry["configuration"] = {"level": level}
        chain.append(entry)
    return chain


def shorthand_names(comp: str) -> list[str]:
    """The codec names ``tile:compression`` stands for, by the CONVENTIONS §1.2 table."""
    codec = SHORTHAND[comp]
    return ["bytes"] if codec is None else ["bytes", codec]


def codec_names(codecs: Sequence[Any]) -> list[Any]:
    """The ``name`` of each entry of a ``tile:codecs`` list (a non-object entry as itself)."""
    return [c.get("name") if isinstance(c, Mapping) else c for c in codecs]


def bytes_codec(endian: str, dtype: np.dtype) -> dict[str, Any]:
    if dtype.itemsize > 1 and dtype.kind != "V":
        return {"name": "bytes", "configuration": {"endian": endian}}
    return {"name": "bytes", "configuration": {}}


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

    enabled = get("enabled")
    if enabled is None:
        if any(k.startswith(p) for k in header):
            raise HeaderError(f"{pre}{p}enabled: required when tiling fields are present")
        return None
    if not isinstance(enabled, bool):
        raise HeaderError(f"{pre}{p}enabled: expected true or false, found {enabled!r}")
    if not enabled:
        warnings.warn(f"{pre}{p}enabled is false: tiling fields ignored", JnrrdWarning,
                      stacklevel=3)
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
    from ..dtypes import user_dtype

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
    codecs, lenient = _codecs(header, p, pre, core, dtype)
    method = get("downsample_method", "average")
    if method not in METHODS:
        raise HeaderError(f"{pre}{p}downsample_method: expected one of {METHODS}, found {method!r}")

    offsets = sizes = None
    pattern = files = base_dir = None
    if storage == "internal":
        offsets, sizes = _tables(header, p, pre, nstored, fmt)
    else:
        for name in ("offset_table", "size_table"):
            if get(name) is not None:
                warnings.warn(f"{pre}{p}{name} does not apply to external storage: ignored",
                              JnrrdWarning, stacklevel=3)
        pattern, files, base_dir = _external(header, p, pre, axes, levels, policy)
    metadata = get("metadata")
    if metadata is not None:
        if not isinstance(metadata, list) or len(metadata) != nstored:
            raise HeaderError(
                f"{pre}{p}metadata: expected a list of {nstored} objects (one per stored tile), "
                f"found {type(metadata).__name__} of length "
                f"{len(metadata) if isinstance(metadata, list) else '-'}"
            )
        metadata = tuple(metadata)
    return Tiling(
        prefix=prefix, axes=axes, tile=tile, overlap=overlap, edge=edge,
        padding_value=padding, storage=storage, format=fmt, levels=levels,
        codecs=tuple(codecs), gzip_lenient=lenient, offset_table=offsets, size_table=sizes,
        pattern=pattern, files=files, base_dir=base_dir, metadata=metadata,
        downsample_method=method, nstored=nstored,
    )


def tile_geometry(dims: Any, sizes: Any, ndim: int, p: str, pre: str = ""
                  ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``tile:dimensions`` and ``tile:sizes`` checked (HeaderError naming the field)."""
    axes = _int_list(dims, p + "dimensions", pre)
    if not axes or any(a >= ndim for a in axes) or any(
        b <= a for a, b in zip(axes, axes[1:], strict=False)
    ):
        raise HeaderError(
            f"{pre}{p}dimensions: expected strictly increasing axis numbers in [0, {ndim}), "
            f"found {list(axes)}"
        )
    return axes, _int_list(sizes, p + "sizes", pre, minimum=1, length=len(axes))


def level_tile_sizes(lts: Any, n: int, tile: tuple[int, ...], p: str, pre: str = ""
                     ) -> list[tuple[int, ...]]:
    """``tile:level_tile_sizes`` for ``n`` levels checked (entry 0 must be ``tile``)."""
    if not isinstance(lts, list) or len(lts) != n:
        raise HeaderError(f"{pre}{p}level_tile_sizes: expected {n} lists, found {lts!r:.200}")
    tiles = [_int_list(t, p + "level_tile_sizes", pre, minimum=1, length=len(tile))
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
    vals = _int_list(v, p + "overlap", pre)
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
    if n is not None and (not _is_int(n) or n < 1):
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
        raise HeaderError(f"{pre}{p}level_scales: level 0 must have scale 1, found {scales_v[0]!r}")
    lts = header.get(p + "level_tile_sizes")
    if lts is not None:
        tiles = level_tile_sizes(lts, n, tile, p, pre)
    else:
        tiles = [tile] * n
    stored_v, virtual_v = header.get(p + "levels_stored"), header.get(p + "levels_virtual")
    stored_set = set(range(n))
    if stored_v is not None:
        stored_set = set(_int_list(stored_v, p + "levels_stored", pre))
        if len(stored_set) != len(stored_v) or any(i >= n for i in stored_set):
            raise HeaderError(f"{pre}{p}levels_stored: expected distinct levels < {n}, "
                              f"found {stored_v!r}")
    if virtual_v is not None:
        virtual = set(_int_list(virtual_v, p + "levels_virtual", pre))
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


def _codecs(header: Mapping[str, Any], p: str, pre: str, core: Any, dtype: np.dtype
            ) -> tuple[list[dict[str, Any]], bool]:
    codecs = header.get(p + "codecs")
    comp = header.get(p + "compression")
    if comp is not None and (not isinstance(comp, str) or comp not in SHORTHAND):
        raise HeaderError(
            f"{pre}{p}compression: expected one of raw, gzip, bzip2, zstd, lz4, found {comp!r}"
        )
    endian = core.endian or "little"
    if codecs is not None:
        if not isinstance(codecs, list) or not codecs:
            raise HeaderError(f"{pre}{p}codecs: expected a non-empty list of codec objects")
        check_codec_objects(codecs, f"{pre}{p}codecs")
        if core.encoding not in (None, "raw"):
            raise HeaderError(f"{pre}encoding: must be 'raw' with {p}codecs, "
                              f"found {core.encoding!r}")
        names = codec_names(codecs)
        for c in codecs:
            if isinstance(c, dict) and c.get("name") == "bytes":
                cfg = c.get("configuration") or {}
                bendian = cfg.get("endian") if isinstance(cfg, dict) else None
                if (bendian is not None and "endian" in header and dtype.itemsize > 1
                        and bendian != header["endian"]):
                    raise HeaderError(
                        f"{pre}endian: {header['endian']!r} disagrees with the bytes codec's "
                        f"endian {bendian!r} in {p}codecs"
                    )
        if comp is not None and names != shorthand_names(comp):
            # CONVENTIONS §1.2: with both fields, the chain must be the shorthand's chain
            raise HeaderError(
                f"{pre}{p}compression: {comp!r} stands for the chain {shorthand_names(comp)}, "
                f"which disagrees with {p}codecs {names!r:.200}"
            )
        return [dict(c) for c in codecs], False
    if comp is None and core.encoding in SHORTHAND and core.encoding != "raw":
        warnings.warn(f"{pre}encoding: {core.encoding!r} used as the tile codec "
                      f"(write {p}compression instead)", JnrrdWarning, stacklevel=4)
        comp = core.encoding
    elif comp is not None and core.encoding not in (None, "raw") and (
        SHORTHAND.get(core.encoding) != SHORTHAND[comp]
    ):
        raise HeaderError(
            f"{pre}encoding: {core.encoding!r} disagrees with {p}compression {comp!r}"
        )
    return compression_chain(comp, endian, dtype), True


def check_codec_objects(codecs: list[Any], field: str) -> None:
    """Every entry of a codec list, and of the lists nested in a configuration's ``codecs``
    (``conditional``), is an object with a ``name`` string and an object ``configuration``
    when it has one; else ``HeaderError`` naming the entry (``field`` is its prefix)."""
    stack = [(codecs, field)]
    while stack:
        entries, at = stack.pop()
        for j, c in enumerate(entries):
            if not isinstance(c, dict) or not isinstance(c.get("name"), str):
                raise HeaderError(f"{at}[{j}]: expected a codec object with a 'name' string "
                                  f"(Zarr v3), found {c!r:.80}")
            if "configuration" not in c:
                continue
            conf = c["configuration"]
            if not isinstance(conf, dict):
                raise HeaderError(f"{at}[{j}].configuration: expected an object, found "
                                  f"{conf!r:.80}")
            if isinstance(conf.get("codecs"), list):
                stack.append((conf["codecs"], f"{at}[{j}].configuration.codecs"))


def _tables(header: Mapping[str, Any], p: str, pre: str, nstored: int, fmt: str
            ) -> tuple[np.ndarray | None, np.ndarray | None]:
    def table(name: str, minimum: int) -> np.ndarray | None:
        v = header.get(p + name)
        if v is None:
            return None
        if not isinstance(v, list):
            raise HeaderError(f"{pre}{p}{name}: expected a list, found {type(v).__name__}")
        if len(v) != nstored:
            raise HeaderError(
                f"{pre}{p}{name}: expected {nstored} entries (one per stored tile), "
                f"found {len(v)}"
            )
        fast = _homogeneous(v)
        if fast is not None and fast.ndim == 1 and fast.dtype.kind in "iu" and (
            fast.dtype.kind == "i" or not fast.size or fast.max() < 2**63
        ):
            # The common case, without a per-entry Python pass (10⁶-tile headers): every
            # entry is an integer (JSON true/false would read as 1/0 here and then fail the
            # range checks below or against the file; validate() names them).
            arr = fast.astype(np.int64, copy=False)
            low = arr < minimum
        elif set(map(type, v)) <= {int, type(None)}:
            ints = np.array([minimum if x is None else x for x in v], dtype=np.int64)
            low = ints < minimum
            # -1 marks a null (sparse) entry internally: only after every literal was checked
            arr = np.where(np.array([x is None for x in v]), -1, ints)
        else:
            bad = next(x for x in v if type(x) not in (int, type(None)))
            raise HeaderError(f"{pre}{p}{name}: entries must be integers or null, found {bad!r}")
        if low.any():
            i = int(np.flatnonzero(low)[0])
            raise HeaderError(f"{pre}{p}{name}[{i}]: expected an integer ≥ {minimum} or null, "
                              f"found {v[i]!r}")
        return arr

    try:
        offsets = table("offset_table", 0)
        sizes = table("size_table", 1)
    except OverflowError:
        raise HeaderError(f"{pre}{p}offset_table: an entry does not fit 64 bits") from None
    if offsets is None and fmt == "chunked" and nstored:
        raise HeaderError(f"{pre}{p}offset_table: required for chunked internal storage")
    if offsets is not None and sizes is not None and ((offsets == -1) != (sizes == -1)).any():
        raise HeaderError(f"{pre}{p}size_table: null entries must match {p}offset_table's")
    return offsets, sizes


def _homogeneous(v: list[Any]) -> np.ndarray | None:
    """``np.array(v)`` when the entries form one rectangular array, else ``None``.

    NumPy raises ``ValueError`` on ragged nesting (``[[1, 2], [3]]``); such a table is left to
    the per-entry check, which names the first entry that is not an integer or null.
    """
    if not v:
        return np.zeros(0, np.int64)
    try:
        return np.array(v)
    except (ValueError, TypeError, OverflowError):
        return None


def _external(header: Mapping[str, Any], p: str, pre: str, axes: tuple[int, ...],
              levels: tuple[Level, ...], policy: Policy
              ) -> tuple[str | None, dict[tuple[int, tuple[int, ...]], str | None] | None,
                         str | None]:
    from .locate import check_pattern

    pattern = header.get(p + "pattern")
    files_v = header.get(p + "files")
    base_dir = header.get(p + "base_dir")
    if base_dir is not None and not isinstance(base_dir, str):
        raise HeaderError(f"{pre}{p}base_dir: expected a string, found {base_dir!r}")
    if pattern is None and files_v is None:
        raise HeaderError(f"{pre}{p}pattern: external storage needs {p}pattern or {p}files")
    files: dict[tuple[int, tuple[int, ...]], str | None] | None = None
    if files_v is not None:
        if not isinstance(files_v, list):
            raise HeaderError(f"{pre}{p}files: expected a list of objects")
        if len(files_v) > policy.max_files:
            raise UnsupportedError(
                f"{pre}{p}files: {len(files_v)} entries exceed the max_files cap "
                f"({policy.max_files})"
            )
        files = {}
        for j, e in enumerate(files_v):
            key = f"{p}files[{j}]"
            if not isinstance(e, dict) or "indices" not in e or "file" not in e:
                raise HeaderError(f"{pre}{key}: expected an object with 'indices' and 'file'")
            idx = _int_list(e["indices"], key + ".indices", pre, length=len(axes))
            lv = e.get("level", 0)
            if not _is_int(lv) or not 0 <= lv < len(levels):
                raise HeaderError(f"{pre}{key}.level: expected a level in 0..{len(levels) - 1}")
            lv = int(lv)
            if any(t >= g for t, g in zip(idx, levels[lv].grid.grid, strict=True)):
                raise HeaderError(f"{pre}{key}.indices: {list(idx)} is outside the level-{lv} "
                                  f"tile grid {list(levels[lv].grid.grid)}")
            f = e["file"]
            if f is not None and not isinstance(f, str):
                raise HeaderError(f"{pre}{key}.file: expected a string or null, found {f!r}")
            if (lv, idx) in files:
                raise HeaderError(f"{pre}{key}: duplicate entry for level {lv} tile {list(idx)}")
            files[(lv, idx)] = f
    if pattern is not None:
        if not isinstance(pattern, str):
            raise HeaderError(f"{pre}{p}pattern: expected a string, found {pattern!r}")
        check_pattern(pattern, axes, levels, files, field=p + "pattern", prefix=pre)
    # Without a pattern, a stored tile with no files entry is a DataError when it is read
    # (digest 2.8), or reads as padding with missing="fill".
    return pattern, files, base_dir
