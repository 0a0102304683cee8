"""The layout of a tiled write, decided before any byte is written (pure, no I/O).

:class:`TilePlan` holds everything the tiled writer decided (geometry, codecs, storage,
options); :func:`header_space`, :func:`internal_layout` and :func:`fixed_point` place an
internal file's tiles after its header with the offsets of docs/format.md#tile-offsets. Every writer
(NumPy or Dask) lays a file out with these, so the same data gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import UnsupportedError
from ..tiling.grid import TileGrid
from ..tiling.levels import Level, level_shape, raw_stored_sizes

__all__ = ["TilePlan", "fixed_point", "header_space", "internal_layout"]


@dataclass
class TilePlan:
    """Everything the tiled writer decided: geometry, codecs, storage and options."""

    prefix: str
    type_name: str
    endian: str
    shape: tuple[int, ...]  # level 0, file axis order
    axes: tuple[int, ...]
    tile: tuple[int, ...]
    overlap: tuple[int, ...]
    edge: str
    padding_value: Any
    storage: str
    fmt: str
    scales: list[tuple[int, ...]]
    level_tiles: list[tuple[int, ...]]
    stored: list[int]
    codecs: list[dict[str, Any]]
    method: str = "average"
    pattern: str | None = None
    decision: Any = None
    sparse: bool = False
    tile_stats: bool = False
    checksum: str | None = None
    quality: bool = False
    align: int = 0
    progress: Callable[[int, int], None] | None = None
    levels: list[Level] = field(default_factory=list)

    def __post_init__(self) -> None:
        first = 0
        for i, (s, t) in enumerate(zip(self.scales, self.level_tiles, strict=True)):
            grid = TileGrid(level_shape(self.shape, s), self.axes, t, self.overlap, self.edge)
            is_stored = i in self.stored
            self.levels.append(Level(i, s, grid, is_stored, first if is_stored else -1))
            if is_stored:
                first += grid.ntiles

    @property
    def nstored(self) -> int:
        return sum(lv.grid.ntiles for lv in self.levels if lv.stored)


#: widest JSON numbers a tile statistic or quality figure can take (for the header bound)
_WIDE_FLOAT = -2.2250738585072014e-308


def header_space(plan: TilePlan, build: Callable[..., bytes], itemsize: int, exact: bool
                 ) -> int:
    """Where the first tile of an internal file starts (bytes reserved for the header).

    ``exact``: every tile's size follows from the geometry (raw tiles, no statistics), so this
    is the fixed point of docs/format.md#tile-offsets and tiles follow the header with no gap.
    Otherwise it is the length of the header rendered with the widest values the tables can hold
    (each tile at most its raw size + 1/32 + 4 KiB), so the real header always fits. Deterministic
    in the plan alone: every writer (NumPy or Dask) lays a file out the same way.
    """
    n = plan.nstored
    raw = raw_stored_sizes(plan.levels, itemsize)
    check = {"crc32": "crc32:00000000", "crc32c": "crc32c:00000000"}.get(plan.checksum or "")
    meta: list[dict[str, Any]] = [{"checksum": check} if check else {} for _ in range(n)]
    if exact:
        header, offsets = fixed_point(plan, raw.tolist(), meta, build, None)
        return offsets[0] if offsets else len(header)
    bound = (raw + raw // 32 + 4096).tolist()
    total = int(sum(bound))
    if plan.tile_stats:
        meta = [{"min": _WIDE_FLOAT, "max": _WIDE_FLOAT, **m} for m in meta]
    quality = ([{"rmse": _WIDE_FLOAT, "psnr": _WIDE_FLOAT}] * len(plan.levels)
               if plan.quality else None)
    start = 0
    for _ in range(16):
        need = len(build(plan, bound, [start + total] * n, meta, None, quality))
        if plan.align:
            need = -(-need // plan.align) * plan.align
        if need <= start:
            return start
        start = need
    raise UnsupportedError("could not bound the header size")


def internal_layout(plan: TilePlan, tables: Any, build: Callable[..., bytes],
                    quality: list[Any] | None, start: int) -> tuple[bytes, list[int], bool]:
    """``(header, offsets, fits)`` for tiles laid out from ``start`` in global order; when the
    header does not fit before ``start`` (a tile outgrew its bound), the exact fixed point of
    docs/format.md#tile-offsets instead, with ``fits`` False (the caller must move the tiles)."""
    offsets, at = [], start
    for s in tables.sizes:
        offsets.append(-1 if s is None else at)
        at += s or 0
    header = build(plan, tables.sizes, offsets, tables.meta, None, quality)
    if len(header) <= start:
        return header, offsets, True
    header, offsets = fixed_point(plan, tables.sizes, tables.meta, build, quality)
    return header, offsets, False


def fixed_point(plan: TilePlan, sizes: list[int | None], meta: list[Any],
                build: Callable[..., bytes], quality: list[Any] | None
                ) -> tuple[bytes, list[int]]:
    """Offsets depend on the header length, which depends on the offsets' digits: iterate
    from a guess until the header fits before the first tile (docs/format.md#tile-offsets)."""
    start = 0
    for _ in range(16):
        offsets: list[int] = []
        pos = start
        for s in sizes:
            if s is None:
                offsets.append(-1)
            else:
                offsets.append(pos)
                pos += s
        header = build(plan, sizes, offsets, meta, None, quality)
        need = len(header)
        if plan.align:
            need = -(-need // plan.align) * plan.align
        if need == start:
            return header, [o for o in offsets if o >= 0] or [start]
        if need < start and not plan.align:
            # Shorter than assumed: shrink and retry (converges: lengths are monotone).
            start = need
            continue
        start = max(need, start)
    raise UnsupportedError("header offsets did not reach a fixed point")
