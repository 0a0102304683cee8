"""Tiling checks of internal storage (docs/format.md#tiling, #tile-codecs, #internal-storage,
#tile-statistics-and-checksums): table lengths against the stored tile count, null entries, offsets
inside the file and after the header, contiguity, level offsets, and the per-tile ``metadata``
checksums."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..codecs import chain_is_self_delimiting, is_raw_chain
from ..header.fields import CoreFields
from ..tiling.levels import raw_stored_sizes
from ..tiling.locate import past_the_end
from .report import MAX_PER_FIELD, Severity
from .tiling_base import TilingChecks, describe_tile

__all__ = ["TableChecks"]

class TableChecks(TilingChecks):
    """Checks of ``offset_table``, ``size_table``, ``level_offsets`` and ``metadata``."""

    def _table_lengths(self) -> None:
        n = self.nstored
        internal = self.get("storage") == "internal"
        checks: tuple[tuple[str, Severity], ...] = (
            ("offset_table", "error"), ("size_table", "error"), ("metadata", "error"),
            ("compression_levels", "warning"))
        for name, severity in checks:
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

    def _internal(self, core: CoreFields) -> None:
        r = self.r
        if core.detached:
            r.error("data_file" if core.data_file is not None else "data_files"
                    if core.data_files is not None else "data_file_pattern",
                    "internal tiling with detached data is not supported", None,
                    "attached data")
        chain = getattr(self, "chain", None)
        raw = chain is not None and is_raw_chain(chain)
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
                and not chain_is_self_delimiting(chain)):
            r.error(self.key("size_table"), "required for chunked storage whose codec chain "
                    "does not end in a self-delimiting compressor "
                    "(docs/format.md#size-table)", None,
                    "present")
        if (offs is None and fmt == "contiguous" and raw and self.levels is not None
                and self.info.data_start is not None and self.info.file_size is not None):
            need = int(raw_stored_sizes(self.levels, core.itemsize).sum())
            have = self.info.file_size - self.info.data_start
            if need > have:
                r.error(self.key("offset_table"), f"without it the tiles lie back to back "
                        f"after the header and need {need} bytes; the file holds {have} "
                        "after its header", have, f">= {need}")
        table = _table(offs)
        if table is None or self.nstored is None or len(table) != self.nstored:
            return
        size_t = _table(sizes)
        if size_t is not None and len(size_t) != len(table):
            size_t = None
        if (size_t is None and raw and self.levels is not None
                and any(lv.stored for lv in self.levels)):
            size_t = raw_stored_sizes(self.levels, core.itemsize)
        present = table >= 0
        levels = self.levels or ()
        start, fsize = self.info.data_start, self.info.file_size
        if start is not None:
            bad = np.flatnonzero(present & (table < start))
            for i in bad[:MAX_PER_FIELD]:
                r.error(self.key("offset_table", int(i)), f"{describe_tile(levels, int(i))}: "
                        f"offset {int(table[i])} points into the header (data starts at "
                        f"{start})", int(table[i]), f">= {start}")
            self._more(bad)
        if fsize is not None:
            lengths = size_t if size_t is not None else np.ones_like(table)
            bad = np.flatnonzero(past_the_end(table, lengths, fsize))
            for i in bad[:MAX_PER_FIELD]:
                end = int(table[i]) + int(lengths[i])
                r.error(self.key("offset_table", int(i)), f"{describe_tile(levels, int(i))}: "
                        f"bytes {int(table[i])}..{end} run past the end of the file "
                        f"({fsize} bytes)", int(table[i]), f"tile bytes within {fsize}")
            self._more(bad)
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

    def _more(self, bad: np.ndarray) -> None:
        """Count the bad tiles past the first :data:`MAX_PER_FIELD` of ``bad`` as unlisted
        (each one reported alone would cost what a 10^7-entry table claims)."""
        self.r.unlisted("error", self.key("offset_table"), len(bad) - MAX_PER_FIELD)

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
                        "'crc32c:' prefix are kept but never verified "
                        "(docs/format.md#tile-statistics-and-checksums)", bare,
                        None)


def _table(v: Any) -> np.ndarray | None:
    """An int64 table (-1 for null), or None when the entries are not all ints/nulls."""
    if not isinstance(v, list):
        return None
    if not all(x is None or (type(x) is int and 0 <= x < 2**63) for x in v):
        return None
    return np.array([-1 if x is None else x for x in v], dtype=np.int64)
