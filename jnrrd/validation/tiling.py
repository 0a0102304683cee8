"""Cross-field checks of the tiling extension (digest 2.2-2.9, CONVENTIONS §1.2).

The schema has checked each field's shape; here the fields are checked against each other
and against the core header: ``tile:dimensions`` ordering, per-position list lengths,
levels and scales, table lengths against the tile count of every stored level, the codec
chain against ``tile:compression`` and the core ``encoding``/``endian``, pattern
placeholders and injectivity, ``tile:files`` entries. With a file, offsets must lie after
the header and inside the file, and external tile files must exist.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import JnrrdError
from ..header.fields import CoreFields
from ..header.model import TILE_FIELDS
from ..policy import Policy
from ..storage.local import resolve_path
from ..tiling.codec_fields import (
    CODEC_TO_COMPRESSION,
    SHORTHAND,
    codec_names,
    compression_chain,
    shorthand_names,
)
from ..tiling.grid import TileGrid
from ..tiling.kinds import axis_kinds, non_domain_scales
from ..tiling.levels import Level, expand_scale, level_shape
from ..tiling.locate import check_pattern, expand_pattern, past_the_end
from ..tiling.padding import chain_fill
from ..tiling.spec import typed_padding
from .core import _int, dimension_of
from .report import Report, pointer

__all__ = ["FileInfo", "check_tiling", "describe_tile"]

_SELF_DELIMITING = frozenset({"gzip", "bz2", "zstd", "lz4"})


@dataclass(frozen=True)
class FileInfo:
    """What is known about the file a header came from (all ``None`` for a bare mapping)."""

    data_start: int | None = None
    file_size: int | None = None
    header_dir: str | None = None


def _ints(v: Any, minimum: int = 0) -> list[int] | None:
    if not isinstance(v, list):
        return None
    out = [_int(x) for x in v]
    if any(x is None or x < minimum for x in out):
        return None
    return out  # type: ignore[return-value]


def describe_tile(levels: tuple[Level, ...], index: int) -> str:
    """``"tile 5 (level 0, tile [1, 1, 0])"`` for a global stored-tile index."""
    for lv in levels:
        if lv.stored and lv.first <= index < lv.first + lv.grid.ntiles:
            coords = list(lv.grid.coords(index - lv.first))
            return f"tile {index} (level {lv.index}, tile {coords})"
    return f"tile {index}"


class _Checker:
    """One header's tiling checks; ``self.levels`` is set once the geometry is sound."""

    def __init__(self, header: Mapping[str, Any], prefix: str, core: CoreFields | None,
                 policy: Policy, report: Report, info: FileInfo) -> None:
        self.h = header
        self.p = prefix + ":"
        self.core = core
        self.policy = policy
        self.r = report
        self.info = info
        self.levels: tuple[Level, ...] | None = None
        self.nstored: int | None = None

    def get(self, name: str, default: Any = None) -> Any:
        return self.h.get(self.p + name, default)

    def key(self, name: str, *path: Any) -> str:
        return pointer(self.p + name, *path)

    # -- geometry -------------------------------------------------------------------------
    def run(self) -> None:
        r = self.r
        enabled = self.get("enabled")
        if enabled is False:
            r.warning(self.key("enabled"), "tiling is off: every other tiling field is ignored "
                      "and the data is read as untiled (digest 2.1)", False, True)
            return
        if enabled is not True:
            return  # missing or not a boolean: the schema has said so
        for name in self.h:
            if name.startswith(self.p) and name[len(self.p):] not in TILE_FIELDS:
                r.note(name, "not a field of the tiling extension; kept verbatim")
        if self.get("zarr_compatible") is True:
            r.error(self.key("zarr_compatible"), "true is not defined by the tiling "
                    "specification and cannot be read (digest 2.2)", True, "absent or false")
        core = self.core
        if core is not None and core.encoding in ("ascii", "hex"):
            r.error("encoding", f"{core.encoding!r} cannot be used with tiling (digest 2.6)",
                    core.encoding, "raw or a compression")
        ndim = core.dimension if core is not None else dimension_of(self.h)
        if ndim is None:
            return
        axes = self._axes(ndim)
        tile = self._tile(axes)
        overlap = self._overlap(ndim, axes, tile)
        padding = self._padding(core) if core is not None else None
        edge = self.get("edge_handling", "pad")
        geometry_ok = (axes is not None and tile is not None and overlap is not None
                       and edge in ("pad", "variable"))
        self._levels(core, ndim, axes if geometry_ok else None, tile, overlap, edge)
        if core is not None:
            self._codecs(core, padding)
        if self.nstored is not None:
            self._table_lengths()
        storage = self.get("storage")
        if storage == "internal" and core is not None:
            self._internal(core)
        elif storage == "external":
            self._external()
        self._metadata()

    def _axes(self, ndim: int) -> tuple[int, ...] | None:
        axes = _ints(self.get("dimensions"))
        if not axes:
            return None
        ok = True
        for i, a in enumerate(axes):
            if a >= ndim:
                self.r.error(self.key("dimensions", i), f"axis {a} does not exist (dimension "
                             f"is {ndim})", a, f"an axis in 0..{ndim - 1}")
                ok = False
        if any(b <= a for a, b in zip(axes, axes[1:], strict=False)):
            self.r.error(self.key("dimensions"), "axes must be strictly increasing (digest "
                         "2.2: the first tiled axis is the fastest)", axes, sorted(set(axes)))
            ok = False
        return tuple(axes) if ok else None

    def _tile(self, axes: tuple[int, ...] | None) -> tuple[int, ...] | None:
        tile = _ints(self.get("sizes"), 1)
        if tile is None or axes is None:
            return None
        if len(tile) != len(axes):
            self.r.error(self.key("sizes"), f"expected {len(axes)} entries (one per tiled "
                         f"axis in {self.p}dimensions), found {len(tile)}", len(tile), len(axes))
            return None
        return tuple(tile)

    def _overlap(self, ndim: int, axes: tuple[int, ...] | None,
                 tile: tuple[int, ...] | None) -> tuple[int, ...] | None:
        v = self.get("overlap")
        if v is None:
            return (0,) * len(axes) if axes is not None else None
        vals = _ints(v)
        if vals is None or axes is None:
            return None
        if len(vals) == ndim and len(vals) != len(axes):
            bad = [a for a in range(ndim) if a not in axes and vals[a]]
            if bad:
                self.r.error(self.key("overlap"), f"entries for untiled axes {bad} must be 0",
                             vals, [vals[a] if a in axes else 0 for a in range(ndim)])
                return None
            vals = [vals[a] for a in axes]
        elif len(vals) != len(axes):
            self.r.error(self.key("overlap"), f"expected {len(axes)} (tiled axes) or {ndim} "
                         f"(all axes) entries, found {len(vals)}", len(vals), len(axes))
            return None
        if tile is not None:
            for k, (o, t) in enumerate(zip(vals, tile, strict=True)):
                if o and o >= t:
                    self.r.warning(self.key("overlap", k), f"overlap {o} is not smaller than "
                                   f"the tile size {t}", o, f"< {t}")
        return tuple(vals)

    def _padding(self, core: CoreFields) -> Any:
        from ..dtypes import user_dtype

        v = self.get("padding_value", 0)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            return None  # the schema has reported it
        dtype = user_dtype(core.type_name, core.block_size, "uint16")
        try:
            return typed_padding(v, dtype, self.p + "padding_value", "", core.type_name)
        except JnrrdError as exc:
            self.r.error(self.key("padding_value"), _strip(str(exc), self.p + "padding_value"),
                         v, f"a value of type {core.type_name}")
            return None

    def _levels(self, core: CoreFields | None, ndim: int, axes: tuple[int, ...] | None,
                tile: tuple[int, ...] | None, overlap: tuple[int, ...] | None, edge: str) -> None:
        r = self.r
        n_v, scales_v = self.get("levels"), self.get("level_scales")
        n = _int(n_v)
        if n is not None and n < 1:
            return
        if n is None and n_v is not None:
            return
        if isinstance(scales_v, list):
            if n is not None and len(scales_v) != n:
                r.error(self.key("level_scales"), f"expected {n} entries ({self.p}levels), "
                        f"found {len(scales_v)}", len(scales_v), n)
                return
            n = len(scales_v) if scales_v else n
        elif scales_v is not None:
            return
        n = n or 1
        if n > 1 and scales_v is None:
            return  # the schema reports the missing level_scales
        ok = axes is not None and tile is not None
        scales: list[tuple[int, ...]] = []
        for i, s in enumerate(scales_v if isinstance(scales_v, list) else [1]):
            if axes is None:
                break
            try:
                scales.append(expand_scale(s, ndim, axes, field="", prefix=""))
            except JnrrdError as exc:
                r.error(self.key("level_scales", i), f"level {i}: {_strip(str(exc), '')}", s,
                        f"an integer >= 1, or {len(axes)} or {ndim} integers >= 1")
                ok = False
        if scales and any(x != 1 for x in scales[0]):
            r.error(self.key("level_scales", 0), "level 0 is the full-resolution data: its "
                    "scale must be 1", scales_v[0], 1)
            ok = False
        for i, a, k in non_domain_scales(scales, axis_kinds(self.h, ndim)):
            r.warning(self.key("level_scales", i), f"level {i} scales axis {a}, a non-domain "
                      f"axis (kind {axis_kinds(self.h, ndim)[a]!r}), by {k}: its values are "
                      "mixed (CONVENTIONS §7 never downsamples such axes)", k, 1)
        tiles = self._level_tiles(n, tile)
        stored = self._stored_levels(n)
        if not ok or tiles is None or stored is None or overlap is None or core is None:
            return  # without sound core fields the tile counts are unknown
        levels, first, total = [], 0, 0
        itemsize = core.itemsize
        for i in range(n):
            grid = TileGrid(level_shape(core.sizes, scales[i]), axes, tiles[i], overlap, edge)
            total += grid.ntiles
            is_stored = i in stored
            levels.append(Level(i, scales[i], grid, is_stored, first if is_stored else -1))
            if is_stored:
                first += grid.ntiles
            tile_bytes = math.prod(grid.max_stored_shape()) * itemsize
            if tile_bytes > self.policy.max_tile_bytes:
                r.error(self.key("sizes"), f"a level-{i} tile decodes to {tile_bytes} bytes, "
                        f"over the max_tile_bytes cap", tile_bytes,
                        f"<= {self.policy.max_tile_bytes}")
        if total > self.policy.max_tiles:
            r.error(self.key("sizes"), f"{total} tiles exceed the max_tiles cap", total,
                    f"<= {self.policy.max_tiles}")
            return
        self.levels = tuple(levels)
        self.nstored = first

    def _level_tiles(self, n: int, tile: tuple[int, ...] | None
                     ) -> list[tuple[int, ...]] | None:
        lts = self.get("level_tile_sizes")
        if lts is None:
            return [tile] * n if tile is not None else None
        if not isinstance(lts, list):
            return None
        if len(lts) != n:
            self.r.error(self.key("level_tile_sizes"), f"expected {n} entries (one per "
                         f"level), found {len(lts)}", len(lts), n)
            return None
        out = []
        for i, t in enumerate(lts):
            ints = _ints(t, 1)
            if ints is None or tile is None:
                return None
            if len(ints) != len(tile):
                self.r.error(self.key("level_tile_sizes", i), f"expected {len(tile)} entries "
                             "(one per tiled axis)", len(ints), len(tile))
                return None
            out.append(tuple(ints))
        if out[0] != tile:
            self.r.error(self.key("level_tile_sizes", 0), f"entry 0 must equal {self.p}sizes",
                         list(out[0]), list(tile))
            return None
        return out

    def _stored_levels(self, n: int) -> set[int] | None:
        r = self.r
        stored_v, virtual_v = self.get("levels_stored"), self.get("levels_virtual")
        stored, virtual = _ints(stored_v), _ints(virtual_v)
        if (stored_v is not None and stored is None) or (virtual_v is not None
                                                         and virtual is None):
            return None
        ok = True
        for name, vals in (("levels_stored", stored), ("levels_virtual", virtual)):
            for i, lv in enumerate(vals or []):
                if lv >= n:
                    r.error(self.key(name, i), f"level {lv} does not exist ({n} levels)", lv,
                            f"a level in 0..{n - 1}")
                    ok = False
        if not ok:
            return None
        s = set(stored) if stored is not None else set(range(n)) - set(virtual or [])
        if stored is not None and virtual is not None and (
                s & set(virtual) or s | set(virtual) != set(range(n))):
            r.error(self.key("levels_stored"), f"{self.p}levels_stored and "
                    f"{self.p}levels_virtual must be disjoint and cover 0..{n - 1}",
                    {"stored": stored, "virtual": virtual}, list(range(n)))
            return None
        if 0 not in s:
            r.error(self.key("levels_stored"), "level 0 must be stored (digest 2.9)",
                    sorted(s), "a list containing 0")
            return None
        return s

    # -- tables and codecs ----------------------------------------------------------------
    def _table_lengths(self) -> None:
        n = self.nstored
        internal = self.get("storage") == "internal"
        for name, severity in (("offset_table", "error"), ("size_table", "error"),
                               ("metadata", "error"), ("compression_levels", "warning")):
            v = self.get(name)
            if not isinstance(v, list) or (name.endswith("table") and not internal):
                continue
            if len(v) != n:
                self.r.add(severity, self.key(name), f"expected {n} entries (one per stored "
                           f"tile of the stored levels), found {len(v)}", len(v), n)
        offs, sizes = self.get("offset_table"), self.get("size_table")
        if internal and isinstance(offs, list) and isinstance(sizes, list) and len(offs) == len(
                sizes):
            for i, (o, s) in enumerate(zip(offs, sizes, strict=True)):
                if (o is None) != (s is None):
                    self.r.error(self.key("size_table", i), "null entries (sparse tiles) must "
                                 f"match {self.p}offset_table's", s, None if o is None else
                                 "a size")

    def _codecs(self, core: CoreFields, padding: Any) -> None:
        r = self.r
        codecs, comp = self.get("codecs"), self.get("compression")
        from ..dtypes import user_dtype

        dtype = user_dtype(core.type_name, core.block_size, "uint16")
        if comp is not None and (not isinstance(comp, str) or comp not in SHORTHAND):
            return  # the schema has reported it
        if isinstance(codecs, list) and codecs:
            if core.type_name == "block":
                r.error(self.key("codecs"), "codec lists are not supported for type 'block'",
                        None, "absent")
                return
            if core.encoding != "raw":
                r.error("encoding", f"must be 'raw' with {self.p}codecs (CONVENTIONS §1.2)",
                        self.h.get("encoding"), "raw")
            names = codec_names(codecs)
            for j, c in enumerate(codecs):
                cfg = c.get("configuration") if isinstance(c, dict) else None
                bendian = cfg.get("endian") if isinstance(cfg, dict) and c.get(
                    "name") == "bytes" else None
                if (bendian is not None and "endian" in self.h and dtype.itemsize > 1
                        and bendian != self.h["endian"]):
                    r.error("endian", f"disagrees with the bytes codec's endian {bendian!r} "
                            f"in {self.key('codecs', j)}", self.h["endian"], bendian)
            if comp is not None and names != shorthand_names(comp):
                bb = [x for x in names if isinstance(x, str) and x in CODEC_TO_COMPRESSION]
                r.error(self.key("compression"), f"{comp!r} stands for the chain "
                        f"{shorthand_names(comp)}, which disagrees with {self.p}codecs {names} "
                        "(CONVENTIONS §1.2: compared by codec name)",
                        comp, CODEC_TO_COMPRESSION.get(bb[0], bb[0])
                        if len(bb) == 1 and names == ["bytes", bb[0]]
                        else "raw" if names == ["bytes"] else "tile:compression omitted")
            chain = codecs
        elif codecs is not None:
            return  # the schema has reported it
        else:
            if comp is not None and core.encoding not in ("raw", "ascii", "hex") and (
                    SHORTHAND.get(core.encoding) != SHORTHAND[comp]):
                r.error("encoding", f"{core.encoding!r} disagrees with {self.p}compression "
                        f"{comp!r}", core.encoding, ["raw", comp])
            chain = compression_chain(comp or (core.encoding if core.encoding in SHORTHAND
                                                else None), core.endian, dtype)
        self.chain = chain
        if self.levels is None or padding is None and self.get("padding_value", 0) is not None:
            return
        from ..codecs import CodecChain

        lv = self.levels[0]
        shape = lv.grid.stored_shape((0,) * len(lv.grid.axes))
        try:
            CodecChain.from_json(list(chain), dtype=dtype, shape=shape,
                                 fill_value=chain_fill(padding, core.type_name))
        except (JnrrdError, TypeError, ValueError) as exc:
            r.error(self.key("codecs") if codecs is not None else self.key("compression"),
                    f"the codec chain cannot be built: {exc}", json_names(chain),
                    "a valid Zarr v3 codec list")

    def _internal(self, core: CoreFields) -> None:
        r = self.r
        if core.detached:
            r.error("data_file" if core.data_file is not None else "data_files"
                    if core.data_files is not None else "data_file_pattern",
                    "internal tiling with detached data is not supported", None,
                    "attached data")
        chain = getattr(self, "chain", None)
        raw = chain is not None and len(chain) == 1
        last = chain[-1].get("name") if chain and isinstance(chain[-1], dict) else None
        offs, sizes = self.get("offset_table"), self.get("size_table")
        fmt = self.get("format", "contiguous")
        if offs is None and chain is not None:
            if fmt == "contiguous" and raw:
                r.warning(self.key("offset_table"), "missing: tiles are assumed back to back "
                          "after the header", None, "present")
            elif fmt == "contiguous":
                r.error(self.key("offset_table"), "required for internal storage (only "
                        "contiguous raw tiles can do without it)", None, "present")
        if (sizes is None and fmt == "chunked" and chain is not None and not raw
                and last not in _SELF_DELIMITING):
            r.error(self.key("size_table"), "required for chunked storage whose codec chain "
                    "does not end in a self-delimiting compressor (CONVENTIONS §1.2)", None,
                    "present")
        table = _table(offs)
        if table is None or self.nstored is None or len(table) != self.nstored:
            return
        size_t = _table(sizes)
        if size_t is not None and len(size_t) != len(table):
            size_t = None
        if size_t is None and raw and self.levels is not None:
            itemsize = core.itemsize
            parts = [lv.grid.stored_voxels() * itemsize for lv in self.levels if lv.stored]
            size_t = np.concatenate(parts).astype(np.int64) if parts else None
        present = table >= 0
        levels = self.levels or ()
        start, fsize = self.info.data_start, self.info.file_size
        if start is not None:
            for i in np.flatnonzero(present & (table < start)):
                r.error(self.key("offset_table", int(i)), f"{describe_tile(levels, int(i))}: "
                        f"offset {int(table[i])} points into the header (data starts at "
                        f"{start})", int(table[i]), f">= {start}")
        if fsize is not None:
            lengths = size_t if size_t is not None else np.ones_like(table)
            for i in np.flatnonzero(past_the_end(table, lengths, fsize)):
                end = int(table[i]) + int(lengths[i])
                r.error(self.key("offset_table", int(i)), f"{describe_tile(levels, int(i))}: "
                        f"bytes {int(table[i])}..{end} run past the end of the file "
                        f"({fsize} bytes)", int(table[i]), f"tile bytes within {fsize}")
        if fmt == "contiguous" and size_t is not None:
            idx = np.flatnonzero(present & (size_t >= 0))
            gaps = np.flatnonzero(table[idx[1:]] != (table + size_t)[idx[:-1]])
            if gaps.size:
                i = int(idx[gaps[0] + 1])
                r.warning(self.key("offset_table", i), f"format 'contiguous', but "
                          f"{describe_tile(levels, i)} does not start where the previous "
                          "stored tile ends (the offset table is used)", int(table[i]),
                          int((table + size_t)[idx[gaps[0]]]))
        self._level_offsets(table)

    def _level_offsets(self, table: np.ndarray) -> None:
        lo = self.get("level_offsets")
        if not isinstance(lo, list) or self.levels is None:
            return
        stored = [lv for lv in self.levels if lv.stored]
        if len(lo) == len(self.levels):
            pairs = [(lv.index, lo[lv.index], lv) for lv in stored]
        elif len(lo) == len(stored):
            pairs = [(k, lo[k], lv) for k, lv in enumerate(stored)]
        else:
            self.r.warning(self.key("level_offsets"), f"expected {len(stored)} (stored levels) "
                           f"or {len(self.levels)} (all levels) entries, found {len(lo)}",
                           len(lo), len(stored))
            return
        for k, value, lv in pairs:
            firsts = table[lv.first:lv.first + lv.grid.ntiles]
            firsts = firsts[firsts >= 0]
            if value is not None and firsts.size and value != int(firsts[0]):
                self.r.warning(self.key("level_offsets", k), f"level {lv.index} starts at "
                               f"{int(firsts[0])} by the offset table (which wins)", value,
                               int(firsts[0]))

    def _external(self) -> None:
        r = self.r
        for name in ("offset_table", "size_table"):
            if self.get(name) is not None:
                r.warning(self.key(name), "does not apply to external storage: ignored", None,
                          "absent")
        if self.levels is None:
            return
        files = self._files()
        pattern = self.get("pattern")
        if isinstance(pattern, str) and files is not None:
            try:
                check_pattern(pattern, self.levels[0].grid.axes, self.levels, files,
                              field="", prefix="")
            except JnrrdError as exc:
                r.error(self.key("pattern"), _strip(str(exc), ""), pattern,
                        "a pattern naming every stored tile distinctly")
                return
        if files is not None:
            self._tile_files(pattern if isinstance(pattern, str) else None, files)

    def _files(self) -> dict[tuple[int, tuple[int, ...]], Any] | None:
        v = self.get("files")
        if v is None:
            return {}
        if not isinstance(v, list):
            return None
        assert self.levels is not None
        out: dict[tuple[int, tuple[int, ...]], Any] = {}
        ok = True
        for j, e in enumerate(v):
            if not isinstance(e, dict):
                ok = False
                continue
            idx, lv = _ints(e.get("indices")), _int(e.get("level", 0))
            if idx is None or lv is None:
                ok = False
                continue
            if not 0 <= lv < len(self.levels):
                r_lv = f"a level in 0..{len(self.levels) - 1}"
                self.r.error(self.key("files", j, "level"), f"level {lv} does not exist", lv,
                             r_lv)
                ok = False
                continue
            grid = self.levels[lv].grid
            if len(idx) != len(grid.grid):
                self.r.error(self.key("files", j, "indices"), f"expected {len(grid.grid)} "
                             "tile coordinates (one per tiled axis)", idx, len(grid.grid))
                ok = False
                continue
            if any(t >= g for t, g in zip(idx, grid.grid, strict=True)):
                self.r.error(self.key("files", j, "indices"), f"outside the level-{lv} tile "
                             f"grid {list(grid.grid)}", idx, [g - 1 for g in grid.grid])
                ok = False
                continue
            if (lv, tuple(idx)) in out:
                self.r.error(self.key("files", j), f"a second entry for level {lv} tile {idx}",
                             e, "one entry per tile")
                ok = False
                continue
            out[(lv, tuple(idx))] = e.get("file")
        return out if ok else None

    def _tile_files(self, pattern: str | None, files: dict[tuple[int, tuple[int, ...]], Any]
                    ) -> None:
        """Every stored tile has a file that exists (or is recorded sparse)."""
        header_dir = self.info.header_dir
        if header_dir is None or self.levels is None:
            return
        r = self.r
        root = header_dir
        policy = self.policy
        base = self.get("base_dir")
        try:
            if isinstance(base, str):
                root = resolve_path(header_dir, base, policy)
                policy = Policy.from_kwargs(policy, allowed_roots=(*policy.allowed_roots, root))
        except JnrrdError as exc:
            r.error(self.key("base_dir"), str(exc), base, "a directory allowed by the policy")
            return
        for lv in self.levels:
            if not lv.stored:
                continue
            for local, coords in enumerate(lv.grid.all_coords()):
                index = lv.first + local
                if (lv.index, coords) in files:
                    name, field = files[(lv.index, coords)], self.key("files")
                    if name is None:
                        continue  # recorded as sparse (CONVENTIONS §1.2)
                elif pattern is not None:
                    name = expand_pattern(pattern, coords, lv.index, local)
                    field = self.key("pattern")
                else:
                    r.error(self.key("files"), f"{describe_tile(self.levels, index)} has no "
                            "file entry (reads fail unless missing='fill')", None,
                            "an entry per stored tile")
                    continue
                try:
                    path = resolve_path(root, name, policy)
                except JnrrdError as exc:
                    r.error(field, f"{describe_tile(self.levels, index)}: {exc}", name,
                            "a path allowed by the policy")
                    continue
                if not os.path.isfile(path):
                    r.error(field, f"{describe_tile(self.levels, index)}: tile file {name!r} "
                            "is missing", name, "an existing file")

    def _metadata(self) -> None:
        meta = self.get("metadata")
        if not isinstance(meta, list):
            return
        bare = 0
        for i, m in enumerate(meta):
            c = m.get("checksum") if isinstance(m, dict) else None
            if c is None:
                continue
            if isinstance(c, str) and ":" in c:
                algo, _, hexv = c.partition(":")
                if algo in ("crc32", "crc32c"):
                    if len(hexv) != 8 or any(ch not in "0123456789abcdefABCDEF" for ch in hexv):
                        self.r.warning(self.key("metadata", i, "checksum"), f"{algo} checksum "
                                       "is not 8 hex digits: it is not verified", c,
                                       f"{algo}:<8 hex digits>")
                    continue
            bare += 1
        if bare:
            self.r.note(self.key("metadata"), f"{bare} checksum(s) without a 'crc32:' or "
                        "'crc32c:' prefix are kept but never verified (CONVENTIONS §1.2)", bare,
                        None)


def json_names(chain: Any) -> Any:
    """The codec names of a chain, for messages."""
    if not isinstance(chain, list):
        return chain
    return [c.get("name") if isinstance(c, dict) else c for c in chain]


def _table(v: Any) -> np.ndarray | None:
    """An int64 table (-1 for null), or None when the entries are not all ints/nulls."""
    if not isinstance(v, list):
        return None
    if not all(x is None or (type(x) is int and 0 <= x < 2**63) for x in v):
        return None
    return np.array([-1 if x is None else x for x in v], dtype=np.int64)


def _strip(message: str, field: str) -> str:
    """A reader message without its leading ``field: `` (the Problem names the field)."""
    if field and message.startswith(field + ": "):
        return message[len(field) + 2:]
    return message.removeprefix(": ")


def check_tiling(header: Mapping[str, Any], prefix: str, core: CoreFields | None,
                 policy: Policy, report: Report, info: FileInfo) -> tuple[Level, ...] | None:
    """Check the tiling fields of ``prefix``; returns the levels when the geometry is sound."""
    c = _Checker(header, prefix, core, policy, report, info)
    c.run()
    return c.levels
