"""Changed tiles encoded ahead of the commit (docs/editing.md, "Memory").

While a writer goes on writing, a changed level-0 tile that has not been written to for a
few writes is encoded on the helper thread (:func:`jnrrd._threads.background`), one at a
time, so that the commit finds part of its encoding done. Every change of a tile bumps its
version; an encoding made of an older version (the tile was written again meanwhile, or
replaced by a resize) is never used. Tiles still being filled (the frame being appended,
a region painted stroke by stroke) are not encoded ahead: they would be encoded again.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import numpy as np

from .._threads import background
from ..tiling.levels import Level

__all__ = ["Ahead"]

Key = tuple[int, tuple[int, ...]]
#: writes that must pass without touching a tile before it is encoded ahead
QUIET = 3


class Ahead:
    """Encodings of changed tiles made ahead of the commit, each tagged with the version of
    the tile it encodes. ``encode(level, coords, tile)`` is the volume's tile encoder."""

    def __init__(self, encode: Callable[[Level, tuple[int, ...], np.ndarray], Any]) -> None:
        self._encode = encode
        self._version: dict[Key, int] = {}
        #: changed tiles not encoded at their version, by their last write (oldest first)
        self._waiting: OrderedDict[Key, int] = OrderedDict()
        self._done: dict[Key, tuple[int, Future[Any]]] = {}
        self._running: Future[Any] | None = None
        self._clock = 0

    def touched(self, key: Key) -> None:
        """``key``'s tile is about to change (its older encodings become useless)."""
        self._version[key] = self._version.get(key, 0) + 1
        self._waiting[key] = self._clock
        self._waiting.move_to_end(key)

    def tick(self, level: Level, dirty: dict[Key, np.ndarray]) -> None:
        """One write has ended: start encoding the quietest waiting tile, when the helper
        is free and that tile has not been written for :data:`QUIET` writes."""
        self._clock += 1
        if self._running is not None and not self._running.done():
            return
        while self._waiting:
            key, last = next(iter(self._waiting.items()))
            if self._clock - last < QUIET:
                return
            del self._waiting[key]
            tile = dirty.get(key)
            if tile is None:
                continue
            coords = key[1]
            self._running = background(functools.partial(self._encode, level, coords, tile))
            self._done[key] = (self._version[key], self._running)
            return

    def take(self, key: Key) -> Any:
        """The encoding of ``key``'s tile as it is now (waiting for it if it is being made),
        or None; either way ``key`` is forgotten."""
        held = self._done.pop(key, None)
        version = self._version.pop(key, None)
        self._waiting.pop(key, None)
        if held is None or held[0] != version:
            return None
        return held[1].result()

    def forget(self, key: Key) -> None:
        """``key``'s tile was dropped or replaced."""
        self._done.pop(key, None)
        self._version.pop(key, None)
        self._waiting.pop(key, None)

    def clear(self) -> None:
        """Forget everything (a commit or an abort)."""
        self._done.clear()
        self._version.clear()
        self._waiting.clear()
