"""Tile sources: the stored bytes of one tile (or ``None`` for a sparse tile), never decoded.

One read path for every tile: a source names the object and byte range of a tile
(:meth:`TileSource.span`: where :mod:`jnrrd.tiling.locate` says it lives, no I/O), and
:meth:`~jnrrd.storage.objects.HeldObjects.get_ranges` of its store fetches the bytes, one
call per object for a batch (a remote store merges the ranges and has them in flight).
Internal tiles are ranges of the ``.jnrrd`` object whose header was parsed, held open by the
store (memory-mapped raw tiles when it is a local file: zero-copy and safe from many threads);
external tiles are whole objects of the header's directory, their keys confined under the path
policy before anything is opened.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DataError, UnsupportedError, where
from ..storage import LocalStore, StreamReader, StreamStore, is_url

if TYPE_CHECKING:
    from ..storage import RemoteStore

from ..tiling.levels import Level
from ..tiling.locate import (
    derive_sizes,
    external_key,
    internal_range,
    match_tile,
    pattern_dir,
    pattern_regex,
)
from .untiled import UntiledData
from .untiled_parts import data_names

__all__ = ["Arrivals", "ExternalSource", "InternalSource", "TileSource", "held_object",
           "untiled_data"]

#: ``(key, field, start, stop)`` of a tile's stored bytes (``stop`` ``None``: the whole object)
Span = tuple[str, str, int, "int | None"]


def held_object(store: Any, key: str | None, file: Any, *, map_reads: bool, owned: bool
                ) -> tuple[Any, str]:
    """``(store, key)`` of the opened header object ``file``, held by the store from now on:
    a remote stream's object is held already; a local file is held with a
    :class:`~jnrrd.storage.fileobj.StreamReader` over ``file`` (closed with it when
    ``owned``); a stream without a path becomes a :class:`~jnrrd.storage.objects.StreamStore`
    of its own."""
    if getattr(file, "store", None) is not None and getattr(file, "key", None) is not None:
        file.store.hold(file.key)
        if owned:
            file.close()  # the store's hold keeps the object's reader
        return file.store, file.key
    reader = StreamReader(file, map_reads=map_reads, owned=owned)
    if store is None or key is None:
        return StreamStore(reader, policy=getattr(store, "policy", None)), ""
    store.hold(key, reader)
    return store, key


def untiled_data(core: Any, src: Any, data_start: int | None, paths: list[str] | None,
                 policy: Any) -> UntiledData:
    """The data section of an untiled file opened as ``src`` (an
    :class:`~jnrrd.storage.resolve.Opened`): a local file opened by path is held by its
    directory's store (``src`` no longer owns it) and its section and detached files are read
    through the store; a URL's stream reads through its store already; a caller's stream is
    read as it is (a pipe cannot be read by ranges)."""
    f, owned = src.stream, src.owned
    if owned and isinstance(src.store, LocalStore) and src.key is not None:
        store, key = held_object(src.store, src.key, f, map_reads=True, owned=True)
        src.owned = False
        try:
            found = data_names(core, policy, src.name) if paths is not None else None
            return UntiledData(core, path=src.path, f=None, data_start=data_start,
                               paths=paths, policy=policy, source=src.name, store=store,
                               key=key, keys=None if found is None else found[0],
                               field="data_file" if found is None else found[1])
        except BaseException:
            store.release(key)  # a section that fails its checks must not leak the file
            raise
    return UntiledData(core, path=src.path if owned else None, f=None if owned else f,
                       data_start=data_start, paths=paths, policy=policy, source=src.name,
                       held=f if owned else None)


class TileSource:
    """The read path every tile takes: :meth:`span` (per kind of source) → the store's
    ``get_ranges``. ``remote``: the tiles come over the network (the engine fetches a batch's
    tiles at once, :meth:`prefetch`)."""

    store: Any
    remote: bool = False
    internal: bool = False

    def span(self, level: Level, coords: tuple[int, ...], local: int) -> Span | None:
        """Where the tile's stored bytes are (``None``: sparse)."""
        raise TypeError(f"{type(self).__name__} has no tiles")  # pragma: no cover

    def failed(self, level: Level, coords: tuple[int, ...], span: Span, exc: Exception
               ) -> bytes | None:
        """What a read that raised ``exc`` means (an error naming the tile, or padding)."""
        raise exc  # pragma: no cover

    def read(self, level: Level, coords: tuple[int, ...], limit: int
             ) -> memoryview | bytes | None:
        """The stored bytes of the tile at ``coords`` (at most ``limit`` bytes of a whole
        object; ``None``: sparse or, with missing='fill', absent)."""
        span = self.span(level, coords, level.grid.index(coords))
        if span is None:
            return None
        key, field, a, b = span
        try:
            return self.store.get_ranges(key, [(a, b)], field=field, limit=limit)[0]
        except (OSError, DataError) as exc:
            return self.failed(level, coords, span, exc)

    def prefetch(self, level: Level, coords: list[tuple[int, ...]], limit: int) -> list[Any]:
        """Start fetching the tiles ``coords``: one pending buffer per tile (``None`` when
        sparse), one ``get_ranges`` call per object, all in flight."""
        spans = [self.span(level, c, level.grid.index(c)) for c in coords]
        by_key: dict[tuple[str, str], list[int]] = {}
        for i, s in enumerate(spans):
            if s is not None:
                by_key.setdefault((s[0], s[1]), []).append(i)
        out: list[Any] = [None] * len(spans)
        for (key, field), members in by_key.items():
            ranges = [(spans[i][2], spans[i][3]) for i in members]  # type: ignore[index]
            try:
                started = self.store.get_ranges(key, ranges, field=field, limit=limit,
                                                wait=False)
            except (OSError, DataError) as exc:
                started = [_Failed(exc)] * len(members)
            for i, pending in zip(members, started, strict=True):
                out[i] = (spans[i], pending)
        return out

    def take(self, level: Level, coords: tuple[int, ...], pending: Any
             ) -> memoryview | bytes | None:
        """The bytes of a tile started by :meth:`prefetch` (waits for them)."""
        if pending is None:
            return None
        span, started = pending
        try:
            return started.result()
        except (OSError, DataError) as exc:
            return self.failed(level, coords, span, exc)



class Arrivals:
    """The tiles of a prefetched batch (:meth:`TileSource.prefetch`'s items) in the order
    their bytes arrive, so that the threads decoding them never wait on a tile whose request
    lags while another's bytes are there.

    :meth:`next` hands out each index once: a tile whose bytes are there (or whose request
    failed), waiting for one; after :data:`QUIET` seconds without any, the first tile not
    handed out yet, whose ``take`` then waits for it within its request's own time bound.
    Every request ends within its own timeouts, so the fallback only guards against a pending
    buffer that never reports (no hang); it is long enough that a slow link, whose tiles
    arrive seconds apart, still has them decoded in arrival order."""

    #: seconds without an arrival after which :meth:`next` hands out a tile still on its way
    QUIET = 5.0

    def __init__(self, pending: Sequence[Any]) -> None:
        self._queue: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._taken = [False] * len(pending)
        self._first = 0  # no index below this is left
        self._lock = threading.Lock()
        for i, p in enumerate(pending):
            hook = None if p is None else getattr(p[1], "when_ready", None)
            if hook is None:
                self._queue.put(i)
            else:
                hook(lambda i=i: self._queue.put(i))

    def next(self) -> int:
        """The index of the next tile to decode (each index once; at most as many calls as
        there are tiles)."""
        while True:
            try:
                i = self._queue.get(timeout=self.QUIET)
            except queue.Empty:
                i = None
            with self._lock:
                if i is None:  # nothing arrived for a while: take the first left
                    while self._taken[self._first]:
                        self._first += 1
                    i = self._first
                if not self._taken[i]:
                    self._taken[i] = True
                    return i


class _Failed:
    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def result(self) -> Any:
        raise self.exc

    def when_ready(self, fn: Callable[[], object]) -> None:
        fn()


class InternalSource(TileSource):
    """Tiles inside the ``.jnrrd`` object ``key`` of ``store`` (held open by it: see
    :func:`held_object`), located by ``offset_table``/``size_table``."""

    internal = True

    def __init__(
        self,
        store: Any,
        key: str,
        *,
        offsets: np.ndarray,
        sizes: np.ndarray | None,
        data_start: int,
        fixed_size: int | None,
        self_delimiting: bool,
        fmt: str,
        prefix: str,
        source: Any = None,
    ) -> None:
        self._source = source
        self.store, self.key = store, key
        #: whether tiles come over the network (the engine fetches a batch's tiles at once)
        self.remote = bool(getattr(store, "remote", False))
        try:
            self.file_size = store.held(key).file_size
            self.offsets = offsets
            self.sizes = derive_sizes(offsets, sizes, data_start=data_start,
                                      file_size=self.file_size, fixed_size=fixed_size,
                                      self_delimiting=self_delimiting, fmt=fmt, prefix=prefix,
                                      source=source)
        except BaseException:
            self.close()  # a table that fails its checks must not leak the opened file
            raise

    def span(self, level: Level, coords: tuple[int, ...], local: int) -> Span | None:
        found = internal_range(self.offsets, self.sizes, level.first + local)
        return None if found is None else (self.key, "data_file", found[0], found[1])

    def failed(self, level: Level, coords: tuple[int, ...], span: Span, exc: Exception
               ) -> bytes | None:
        index = level.first + level.grid.index(coords)
        if isinstance(exc, DataError):
            text = str(exc)
            if text == "file ended early":
                raise DataError(f"{where(self._source)}tile {index}: file ended early"
                                ) from None
            raise DataError(f"{where(self._source)}tile {index}: {text}") from None
        raise exc

    def close(self) -> None:
        """Release the object (the store closes it with its last holder)."""
        self.store.release(self.key)


class ExternalSource(TileSource):
    """Tiles in files of their own, named by ``tile:pattern`` and/or ``tile:files``: keys of
    ``store`` (the header's directory; ``None`` when the header was read from a stream with
    no path), or of ``tile:base_dir`` under it."""

    def __init__(
        self,
        store: LocalStore | RemoteStore | None,
        *,
        pattern: str | None,
        files: Mapping[tuple[int, tuple[int, ...]], str | None] | None,
        base_dir: str | None,
        prefix: str,
        missing: str = "error",
        source: Any = None,
    ) -> None:
        if store is None:
            raise UnsupportedError(
                f"{where(source)}external tiles need the header's path to find them; "
                "open the file by path, not through a file object"
            )
        self._pattern = pattern
        self._files = files or {}
        self._policy = store.policy
        self._prefix = prefix
        self._missing = missing
        self._source = source
        if base_dir is not None:
            if is_url(base_dir):
                raise UnsupportedError(f"{where(source, prefix + ':base_dir')}URL base "
                                       "directories are not supported; use tile:files with "
                                       "an opener")
            # Relative paths under base_dir stay confined to base_dir (or allowed_roots).
            store = store.child(base_dir, field=prefix + ":base_dir")
        self._store = self.store = store
        #: whether tiles come over the network (the engine fetches a batch's tiles at once)
        self.remote = bool(getattr(store, "remote", False))

    def key(self, level: Level, coords: tuple[int, ...], local: int) -> tuple[str, str] | None:
        """(key, field) of a tile's file; ``None`` when the header records it as sparse."""
        return external_key(level, coords, local, pattern=self._pattern, files=self._files,
                            prefix=self._prefix, missing=self._missing, source=self._source)

    def span(self, level: Level, coords: tuple[int, ...], local: int) -> Span | None:
        found = self.key(level, coords, local)
        return None if found is None else (found[0], found[1], 0, None)

    def failed(self, level: Level, coords: tuple[int, ...], span: Span, exc: Exception
               ) -> bytes | None:
        key, field = span[0], span[1]
        if isinstance(exc, FileNotFoundError):
            if self._missing == "fill":
                return None
            path = self._store.path(key, field=field)
            raise DataError(
                f"{where(self._source)}tile file {path!r} (level {level.index}, tile "
                f"{list(coords)}) is missing; pass missing='fill' to read it as padding"
            ) from None
        if isinstance(exc, IsADirectoryError):
            path = self._store.path(key, field=field)
            raise DataError(f"{where(self._source)}tile path {path!r} is a directory") from None
        if isinstance(exc, DataError) and not str(exc).startswith(where(self._source) or "\0"):
            raise DataError(f"{where(self._source)}level {level.index} tile {list(coords)}: "
                            f"file {exc}") from None
        raise exc

    def locate(self, level: Level, coords: tuple[int, ...], local: int
               ) -> tuple[str, int] | None:
        """``(real path, size)`` of a tile's file, without reading it; ``None`` when the
        header records the tile as sparse (or, with ``missing="fill"``, the file is absent).
        A missing file otherwise is a ``DataError``, as on read."""
        found = self.key(level, coords, local)
        if found is None:
            return None
        key, field = found
        path = self._store.path(key, field=field)
        try:
            return path, self._store.size(key, field=field)
        except FileNotFoundError:
            if self._missing == "fill":
                return None
            raise DataError(
                f"{where(self._source)}tile file {path!r} (level {level.index}, tile "
                f"{list(coords)}) is missing; pass missing='fill' to treat it as padding"
            ) from None

    def stored_bytes(self, level: Level) -> int:
        """The sum of the sizes of the level's tile files that exist.

        A level of at most ``max_files`` tiles resolves and stats each tile's name. A larger
        one (a header may declare 10⁷ tiles in a few bytes) counts its ``tile:files`` entries
        and lists the files actually present under the pattern's directory, matching each
        back to its tile: the cost follows the files on disk, not the declared count.
        """
        grid = level.grid
        if grid.ntiles <= self._policy.max_files:
            keys = (self.key(level, c, grid.index(c)) for c in grid.all_coords())
            if not self.remote:
                return sum(map(self._size_or_zero, keys))
            # a remote store: one metadata request per tile, many in flight
            from .._threads import ordered_map

            workers = max(1, min(16, self._policy.io.request_concurrency))
            return sum(ordered_map(self._size_or_zero, list(keys), workers=workers,
                                   name="jnrrd-sizes"))
        total = 0
        for (lv, coords), name in self._files.items():
            if lv == level.index and name is not None:
                total += self._size_or_zero(self.key(level, coords, grid.index(coords)))
        if self._pattern is not None:
            total += self._scan(level)
        return total

    def _scan(self, level: Level) -> int:
        pattern = self._pattern
        assert pattern is not None
        regex = pattern_regex(pattern)
        if regex is None:
            raise UnsupportedError(
                f"{where(self._source, self._prefix + ':pattern')}{pattern!r}: the stored "
                f"bytes of {level.grid.ntiles} tiles (over the max_files cap, "
                f"{self._policy.max_files}) are counted by listing the pattern's directory, "
                "which needs a plain relative pattern; pass max_files=... to count them one "
                "by one")
        grid, total = level.grid, 0
        for rel in self._store.walk(pattern_dir(pattern)):
            coords = match_tile(regex, rel, pattern, grid, level.index)
            if coords is not None and (level.index, coords) not in self._files:
                total += self._size_or_zero(self.key(level, coords, grid.index(coords)))
        return total

    def _size_or_zero(self, found: tuple[str, str] | None) -> int:
        if found is None:
            return 0
        try:
            return self._store.size(found[0], field=found[1])
        except OSError:
            return 0

    def close(self) -> None:
        """Nothing is held open between reads."""
