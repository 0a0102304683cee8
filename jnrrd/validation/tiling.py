"""Cross-field checks of the tiling extension (docs/format.md, docs/format.md#codec-chain).

The schema has checked each field's shape; here the fields are checked against each other
and against the core header: ``tile:dimensions`` ordering, per-position list lengths,
levels and scales, table lengths against the tile count of every stored level, the codec
chain against ``tile:compression`` and the core ``encoding``/``endian``, pattern
placeholders and injectivity, ``tile:files`` entries. With a file, offsets must lie after
the header and inside the file, and external tile files must exist. This module checks the
geometry, levels and codecs; the internal tables are checked in :mod:`.tiling_tables`, the
external files in :mod:`.tiling_files`, on the shared state of :mod:`.tiling_base`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..errors import JnrrdError
from ..header.fields import CoreFields
from ..header.model import TILE_FIELDS
from ..policy import Policy
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
from ..tiling.padding import chain_fill
from ..tiling.spec import typed_padding
from .core import _int, dimension_of
from .report import Report
from .tiling_base import FileInfo, checked_ints, strip_field
from .tiling_files import FileChecks
from .tiling_tables import TableChecks

__all__ = ["check_tiling", "json_names"]


class _Checker(TableChecks, FileChecks):
    """One header's tiling checks; ``self.levels`` is set once the geometry is sound."""

    # -- geometry -------------------------------------------------------------------------
    def run(self) -> None:
        r = self.r
        enabled = self.get("enabled")
        if enabled is False:
            r.warning(self.key("enabled"), "tiling is off: every other tiling field is ignored "
                      "and the data is read as untiled (docs/format.md#activation)", False, True)
            return
        if enabled is not True:
            return  # missing or not a boolean: the schema has said so
        for name in self.h:
            if name.startswith(self.p) and name[len(self.p):] not in TILE_FIELDS:
                r.note(name, "not a field of the tiling extension; kept verbatim")
        if self.get("zarr_compatible") is True:
            r.error(self.key("zarr_compatible"), "true is not defined by the tiling "
                    "specification and cannot be read "
                    "(docs/format.md#activation)", True, "absent or false")
        core = self.core
        if core is not None and core.encoding in ("ascii", "hex"):
            r.error("encoding", f"{core.encoding!r} cannot be used with tiling "
                                "(docs/format.md#core-encoding-on-a-tiled-file)",
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
        axes = checked_ints(self.get("dimensions"))
        if not axes:
            return None
        ok = True
        for i, a in enumerate(axes):
            if a >= ndim:
                self.r.error(self.key("dimensions", i), f"axis {a} does not exist (dimension "
                             f"is {ndim})", a, f"an axis in 0..{ndim - 1}")
                ok = False
        if any(b <= a for a, b in zip(axes, axes[1:], strict=False)):
            self.r.error(self.key("dimensions"), "axes must be strictly increasing "
                                                 "(docs/format.md#tiling-fields: the first tiled "
                                                 "axis is the fastest)", axes, sorted(set(axes)))
            ok = False
        return tuple(axes) if ok else None

    def _tile(self, axes: tuple[int, ...] | None) -> tuple[int, ...] | None:
        tile = checked_ints(self.get("sizes"), 1)
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
        vals = checked_ints(v)
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
            self.r.error(self.key("padding_value"), strip_field(str(exc), self.p + "padding_value"),
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
        if n > self.policy.max_levels:  # before any per-level work, as the reader does
            r.error(self.key("levels"), f"{n} levels exceed the max_levels cap "
                    f"({self.policy.max_levels}); pass max_levels=... to allow them", n,
                    f"<= {self.policy.max_levels}")
            return
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
                r.error(self.key("level_scales", i), f"level {i}: {strip_field(str(exc), '')}", s,
                        f"an integer >= 1, or {len(axes)} or {ndim} integers >= 1")
                ok = False
        if scales and any(x != 1 for x in scales[0]):
            r.error(self.key("level_scales", 0), "level 0 is the full-resolution data: its "
                    "scale must be 1", scales_v[0], 1)
            ok = False
        for i, a, k in non_domain_scales(scales, axis_kinds(self.h, ndim)):
            r.warning(self.key("level_scales", i), f"level {i} scales axis {a}, a non-domain "
                      f"axis (kind {axis_kinds(self.h, ndim)[a]!r}), by {k}: its values are "
                      "mixed (such axes are never downsampled, docs/format.md#domain-axes)", k, 1)
        tiles = self._level_tiles(n, tile)
        stored = self._stored_levels(n)
        if (not ok or tiles is None or stored is None or overlap is None or core is None
                or axes is None):
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
            ints = checked_ints(t, 1)
            if ints is None or tile is None:
                return None
            if len(ints) != len(tile):
                self.r.error(self.key("level_tile_sizes", i), f"expected {len(tile)} entries "
                             "(one per tiled axis)", len(ints), len(tile))
                return None
            out.append(tuple(ints))
        if out[0] != tile:
            self.r.error(self.key("level_tile_sizes", 0), f"entry 0 must equal {self.p}sizes",
                         list(out[0]), None if tile is None else list(tile))
            return None
        return out

    def _stored_levels(self, n: int) -> set[int] | None:
        r = self.r
        stored_v, virtual_v = self.get("levels_stored"), self.get("levels_virtual")
        stored, virtual = checked_ints(stored_v), checked_ints(virtual_v)
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
            r.error(self.key("levels_stored"), "level 0 must be stored "
                                               "(docs/format.md#stored-and-virtual-levels)",
                    sorted(s), "a list containing 0")
            return None
        return s

    # -- codecs ----------------------------------------------------------------------------
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
                r.error("encoding", f"must be 'raw' with {self.p}codecs "
                                    "(docs/format.md#codec-chain)",
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
                        "(docs/format.md#compression-shorthand: compared by codec name)",
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

def json_names(chain: Any) -> Any:
    """The codec names of a chain, for messages."""
    if not isinstance(chain, list):
        return chain
    return [c.get("name") if isinstance(c, dict) else c for c in chain]


def check_tiling(header: Mapping[str, Any], prefix: str, core: CoreFields | None,
                 policy: Policy, report: Report, info: FileInfo) -> tuple[Level, ...] | None:
    """Check the tiling fields of ``prefix``; returns the levels when the geometry is sound."""
    c = _Checker(header, prefix, core, policy, report, info)
    c.run()
    return c.levels
