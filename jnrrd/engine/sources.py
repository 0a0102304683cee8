"""Tile sources: the stored bytes of one tile (or ``None`` for a sparse tile), never decoded.

Where a tile lives comes from :mod:`jnrrd.tiling.locate` (no I/O); the bytes come from the
storage layer. Internal tiles are byte ranges of the opened ``.jnrrd`` file, memory-mapped
when it is a real file (zero-copy and safe from many threads); external tiles are keys of a
:class:`~jnrrd.storage.local.LocalStore`, resolved under the path policy before anything is
opened.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import DataError, UnsupportedError, where
from ..storage.fileobj import StreamReader
from ..storage.local import LocalStore, is_url
from ..tiling.levels import Level
from ..tiling.locate import (
    derive_sizes,
    external_key,
    internal_range,
    match_tile,
    pattern_dir,
    pattern_regex,
)

__all__ = ["ExternalSource", "InternalSource"]


class InternalSource:
    """Tiles inside the ``.jnrrd`` file, located by ``offset_table``/``size_table``."""

    def __init__(
        self,
        file: Any,
        *,
        offsets: np.ndarray,
        sizes: np.ndarray | None,
        data_start: int,
        fixed_size: int | None,
        self_delimiting: bool,
        fmt: str,
        prefix: str,
        source: Any = None,
        map_reads: bool = True,
        owned: bool = False,
    ) -> None:
        self._source = source
        # Raw tiles are served zero-copy from a memory map; compressed tiles are read with
        # pread, so the file's pages do not pile up in the resident set of a full read. A
        # remote object's stream lends its range reader (requests merged and concurrent).
        ranged = getattr(file, "range_reader", None)
        self._reader: Any = (ranged() if ranged is not None
                             else StreamReader(file, map_reads=map_reads, owned=owned))
        self._file = file if ranged is not None and owned else None
        #: whether tiles come over the network (the engine fetches a batch's tiles at once)
        self.remote = ranged is not None
        self._get_range = self._reader.get_range  # bound once: read() is on the hot path
        try:
            self.file_size = self._reader.file_size
            self.offsets = offsets
            self.sizes = derive_sizes(offsets, sizes, data_start=data_start,
                                      file_size=self.file_size, fixed_size=fixed_size,
                                      self_delimiting=self_delimiting, fmt=fmt, prefix=prefix,
                                      source=source)
        except BaseException:
            self.close()  # a table that fails its checks must not leak the opened file
            raise

    def read(self, index: int) -> memoryview | bytes | None:
        """The stored bytes of global tile ``index`` (``None`` when sparse)."""
        span = internal_range(self.offsets, self.sizes, index)
        if span is None:
            return None
        try:
            return self._get_range(span[0], span[1])
        except DataError:
            raise DataError(f"{where(self._source)}tile {index}: file ended early") from None

    def prefetch(self, indices: list[int]) -> list[Any]:
        """Start fetching the stored bytes of global tiles ``indices`` (a remote file): one
        pending slice per tile (``None`` when sparse), the requests merged and in flight."""
        spans = [internal_range(self.offsets, self.sizes, i) for i in indices]
        wanted = [s for s in spans if s is not None]
        fetched = iter(self._reader.fetch_many(wanted))
        return [None if s is None else next(fetched) for s in spans]

    def take(self, index: int, pending: Any) -> memoryview | None:
        """The bytes of a tile started by :meth:`prefetch` (waits for them)."""
        if pending is None:
            return None
        try:
            return pending.result()
        except DataError as exc:
            raise DataError(f"{where(self._source)}tile {index}: {exc}") from None

    def close(self) -> None:
        """Drop the memory map and close the file when it was handed over."""
        self._reader.close()
        if self._file is not None:
            self._file.close()


class ExternalSource:
    """Tiles in files of their own, named by ``tile:pattern`` and/or ``tile:files``: keys of
    ``store`` (the header's directory; ``None`` when the header was read from a stream with
    no path), or of ``tile:base_dir`` under it."""

    def __init__(
        self,
        store: LocalStore | None,
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
        self._store = store
        #: whether tiles come over the network (the engine fetches a batch's tiles at once)
        self.remote = bool(getattr(store, "remote", False))

    def key(self, level: Level, coords: tuple[int, ...], local: int) -> tuple[str, str] | None:
        """(key, field) of a tile's file; ``None`` when the header records it as sparse."""
        return external_key(level, coords, local, pattern=self._pattern, files=self._files,
                            prefix=self._prefix, missing=self._missing, source=self._source)

    def read(self, level: Level, coords: tuple[int, ...], local: int, limit: int
             ) -> bytes | None:
        """The stored bytes of a tile (``None``: sparse or, with missing='fill', absent).

        At most ``limit`` bytes are read: a longer file is read only as far as needed.
        """
        found = self.key(level, coords, local)
        if found is None:
            return None
        what = f"{where(self._source)}level {level.index} tile {list(coords)}: file "
        return self._fetched(level, coords, found, lambda key, field: self._store.get(
            key, limit=limit, field=field, what=what))

    def prefetch(self, level: Level, coords: list[tuple[int, ...]], limit: int) -> list[Any]:
        """Start fetching the tile files of ``coords`` (a remote store): one pending request
        per tile (``None`` when the header records it as sparse)."""
        out: list[Any] = []
        for c in coords:
            found = self.key(level, c, level.grid.index(c))
            out.append(None if found is None else (found, self._store.submit_get(
                found[0], limit=limit, field=found[1])))
        return out

    def take(self, level: Level, coords: tuple[int, ...], pending: Any) -> bytes | None:
        """The bytes of a tile started by :meth:`prefetch` (waits for them)."""
        if pending is None:
            return None
        found, future = pending
        fetcher = self._store.fetcher
        return self._fetched(level, coords, found, lambda key, field: fetcher.wait(
            future, self._store.url(self._store.path(key, field=field)), 0, None).data)

    def _fetched(self, level: Level, coords: tuple[int, ...], found: tuple[str, str],
                 get: Any) -> bytes | None:
        key, field = found
        try:
            return get(key, field)
        except FileNotFoundError:
            if self._missing == "fill":
                return None
            path = self._store.path(key, field=field)
            raise DataError(
                f"{where(self._source)}tile file {path!r} (level {level.index}, tile "
                f"{list(coords)}) is missing; pass missing='fill' to read it as padding"
            ) from None
        except IsADirectoryError:
            path = self._store.path(key, field=field)
            raise DataError(f"{where(self._source)}tile path {path!r} is a directory") from None

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

            workers = max(1, min(16, self._policy.request_concurrency))
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
