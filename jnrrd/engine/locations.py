"""Where each stored tile of a level lives, as plain data (:meth:`LevelView.tile_locations`).

A public, read-only view of what :mod:`jnrrd.tiling.locate` and the tile sources know: for
every tile of a stored level, the file holding its bytes and the byte range in it, or
``None`` for a sparse tile. It is what a Zarr/kerchunk view (:func:`jnrrd.kerchunk_refs`)
points at; nothing is read or decoded (external tile files are only looked up with ``stat``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from ..errors import UnsupportedError, where
from ..tiling.grid import TileGrid
from ..tiling.levels import Level
from .sources import ExternalSource, InternalSource

__all__ = ["TileLocation", "checked_coords", "tile_locations"]


@dataclass(frozen=True)
class TileLocation:
    """The stored bytes of one tile: ``size`` bytes at ``offset`` of ``path``.

    ``path`` is ``None`` for an internal tile (the bytes are in the opened ``.jnrrd`` file
    itself, ``Volume.name``), else the real path of the external tile file (resolved under
    the path policy); an external tile is its whole file (``offset`` 0).
    """

    path: str | None
    offset: int
    size: int

    @property
    def internal(self) -> bool:
        """True when the tile is a byte range of the ``.jnrrd`` file itself."""
        return self.path is None


def tile_locations(source: InternalSource | ExternalSource | None, level: Level, *,
                   name: Any = None, reverse: bool = False
                   ) -> Iterator[tuple[tuple[int, ...], TileLocation | None]]:
    """``(coords, location)`` for every tile of ``level`` in linear-index order; ``location``
    is ``None`` for a sparse tile. ``coords`` are in header order, reversed when
    ``reverse``. :class:`~jnrrd.errors.UnsupportedError` for an untiled volume or a virtual
    level (its tiles are computed on read, not stored)."""
    if source is None:
        raise UnsupportedError(f"{where(name)}the volume is not tiled: it has no tiles")
    if not level.stored:
        raise UnsupportedError(f"{where(name)}level {level.index} is virtual (computed from "
                               "level 0 on read): it has no stored tiles")
    grid = level.grid
    if isinstance(source, ExternalSource) and source.remote:
        yield from _remote_locations(source, level, reverse)
        return
    for local, coords in enumerate(grid.all_coords()):
        if isinstance(source, InternalSource):
            g = level.first + local
            off = int(source.offsets[g])
            loc = None if off < 0 else TileLocation(None, off, int(source.sizes[g]))
        else:
            found = source.locate(level, coords, local)
            loc = None if found is None else TileLocation(found[0], 0, found[1])
        yield (coords[::-1] if reverse else coords), loc


#: remote tile objects looked up at once (one metadata request each, up to 16 in flight)
_BATCH = 256


def _remote_locations(source: ExternalSource, level: Level, reverse: bool
                      ) -> Iterator[tuple[tuple[int, ...], TileLocation | None]]:
    """:func:`tile_locations` of remote tile objects: their sizes asked concurrently, a batch
    at a time (a round trip per tile, one after another, would cost minutes)."""
    from .._threads import ordered_map

    def locate(item: tuple[int, tuple[int, ...]]) -> TileLocation | None:
        found = source.locate(level, item[1], item[0])
        return None if found is None else TileLocation(found[0], 0, found[1])

    items = enumerate(level.grid.all_coords())
    while batch := list(islice(items, _BATCH)):
        for (_, coords), loc in zip(batch, ordered_map(locate, batch, workers=16,
                                                       name="jnrrd-locate"), strict=True):
            yield (coords[::-1] if reverse else coords), loc


def checked_coords(coords: Sequence[int], grid: TileGrid | None, *, reverse: bool,
                   name: Any = None) -> tuple[int, ...]:
    """Tile-grid ``coords`` in the caller's axis order (reversed when ``reverse``) → header
    order, checked against ``grid`` (``None``: an untiled volume, which has no tiles):
    ``IndexError`` outside the grid, :class:`~jnrrd.errors.UnsupportedError` untiled."""
    if grid is None:
        raise UnsupportedError(
            f"{where(name, 'read_tile')}the volume is not tiled (no tile:enabled tiling), so "
            "it has no tiles to read; slice it instead (vol[...])")
    out = tuple(int(c) for c in coords)
    if reverse:
        out = out[::-1]
    if len(out) != len(grid.grid) or any(
        not 0 <= c < g for c, g in zip(out, grid.grid, strict=True)
    ):
        raise IndexError(f"tile coordinates {list(out)} are outside the grid "
                         f"{list(grid.grid)}")
    return out
