"""Partial writes kept until their tile is needed (docs/editing.md, "Memory and time").

A write that covers only part of a tile that is not in memory yet does not read the tile
back at once: the written values (a copy) wait here, in write order, as patches of that
tile. When the tile is needed — read, committed, evicted, resized — it is decoded and the
patches applied in order; a commit does that and the encoding in one task per tile, all
tiles in parallel. A later write that covers the tile whole makes its patches moot.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Patches"]


class Patches:
    """Pending partial writes per level-0 tile (``coords`` -> ``[(slices, values)]``)."""

    def __init__(self) -> None:
        self._pending: dict[tuple[int, ...], list[tuple[tuple[slice, ...], np.ndarray]]] = {}
        self._bytes: dict[tuple[int, ...], int] = {}

    def __contains__(self, coords: object) -> bool:
        return coords in self._pending

    def __len__(self) -> int:
        return len(self._pending)

    def coords(self) -> list[tuple[int, ...]]:
        """The tiles with pending writes, oldest first."""
        return list(self._pending)

    def add(self, coords: tuple[int, ...], where: tuple[slice, ...], values: Any) -> int:
        """Keep a copy of ``values`` for ``tile[where]``; return the bytes it holds."""
        part = np.array(values)  # the caller may change its array after the write
        self._pending.setdefault(coords, []).append((where, part))
        self._bytes[coords] = self._bytes.get(coords, 0) + part.nbytes
        return part.nbytes

    def apply(self, coords: tuple[int, ...], tile: np.ndarray) -> np.ndarray:
        """``tile`` with the pending writes of ``coords`` applied in order (kept pending)."""
        for where, part in self._pending.get(coords, ()):
            tile[where] = part
        return tile

    def drop(self, coords: tuple[int, ...]) -> int:
        """Forget the pending writes of ``coords``; return the bytes they held."""
        self._pending.pop(coords, None)
        return self._bytes.pop(coords, 0)

    def clear(self) -> None:
        self._pending.clear()
        self._bytes.clear()
