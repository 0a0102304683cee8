"""What a writable volume writes through (:class:`Session`), what its tile encoder reads of a
plan (:class:`EncodePlan`), and the tile source its decoder reads from (:class:`Source`:
each tile wherever its current table entry points, a batch at once on an object store)."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..errors import UnsupportedError, where
from ..policy import Policy
from ..tiling.levels import Level
from .layout import Layout

__all__ = ["DIRTY_BYTES", "EncodePlan", "Session", "Source"]

#: decoded changed tiles kept in memory before the oldest are encoded and staged
DIRTY_BYTES = 256 << 20


@dataclasses.dataclass
class Session:
    """What a writable volume writes through: its layout, its lock, the file's tiling
    prefix, the reader policy, its name, and the budget of changed tiles held decoded."""

    layout: Layout
    lock: Any
    prefix: str
    policy: Policy
    name: Any
    dirty_bytes: int = DIRTY_BYTES
    #: ``(tile statistics, checksum algorithm)`` of new tiles; None: as the file's metadata
    stats: tuple[bool, str | None] | None = None


@dataclasses.dataclass(frozen=True)
class EncodePlan:
    """What :class:`~jnrrd.engine.tiles.TileEncoder` reads of a writer's plan."""

    codecs: list[Any]
    type_name: str
    padding_value: Any
    decision: Any = None
    tile_stats: bool = False
    checksum: str | None = None


class Source:
    """The stored bytes of a tile, wherever its current entry points (the decoder's
    source); on an object store a batch of tiles is fetched at once on the I/O pool."""

    #: (not the engine's memory-mapped internal source: tiles move with every commit)
    internal = False

    def __init__(self, vol: Any, remote: bool) -> None:
        self._vol = vol
        self.remote = remote

    def read(self, level: Level, coords: tuple[int, ...], limit: int) -> Any:
        vol = self._vol
        local = level.grid.index(coords)
        return vol._s.layout.read(level, coords, local, vol._tables.get(level.index, local))

    def prefetch(self, level: Level, coords: list[tuple[int, ...]], limit: int) -> list[Any]:
        """Start reading the tiles ``coords`` at once (not those changed in memory)."""
        vol = self._vol
        items = []
        for c in coords:
            i = level.grid.index(c)
            entry = None if (level.index, c) in vol._dirty else vol._tables.get(level.index, i)
            items.append((c, i, entry))
        return vol._s.layout.prefetch(level, items)

    def take(self, level: Level, coords: tuple[int, ...], pending: Any) -> Any:
        return self._vol._s.layout.take(level, coords, pending)

    @staticmethod
    def rank(pending: Any) -> int:
        """Prefetched tiles are taken in the order asked (the layout fetches each alone)."""
        return 0

    def locate(self, level: Level, coords: tuple[int, ...], local: int) -> Any:
        """(``LevelView.tile_locations``) refused: they change with every commit."""
        raise UnsupportedError(f"{where(self._vol.name)}the tiles of a volume open for "
                               "writing move with every commit: list their locations on the "
                               "file opened for reading")

    def close(self) -> None:
        """The layout's files are closed with the volume."""
