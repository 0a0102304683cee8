"""The external layout of an editable volume: one file (or object) per tile
(docs/editing.md, "Layouts").

The tiles live under the dataset's own tile directory, ``tile:base_dir`` =
``<stem>.<token>.tiles`` beside the header (what ``jnrrd.write`` makes). A new version of a
tile is a new file under ``<base_dir>/edit-<token>/`` (one fresh token per commit), named by
a ``tile:files`` entry; no file a committed header names is ever overwritten. A commit makes
the new files durable, replaces the header atomically, and only then removes the files it no
longer names; a reader that opened an earlier commit reads its own tiles or, once one of
them is gone, gets a ``DataError``. Files are removed only inside the dataset's own tile
directory: a dataset laid out otherwise is first copied into one (its first commit costs a
copy of every tile; ``jnrrd.compact`` does the same). Directories of commits that never
completed (a writer killed before its header) are removed when the volume is next opened
for writing.
"""

from __future__ import annotations

import contextlib
import os
import re
from typing import Any

from ..errors import DataError, HeaderError, where
from ..header import Header
from ..policy import Policy
from ..storage import TOKEN_RE, fresh_token, stem
from ..tiling.levels import Level
from ..tiling.locate import check_pattern, expand_pattern
from ..writing.plan import default_pattern
from .headers import check_rendered, render_external
from .layout import Counters, put_whole
from .tables import BY_PATTERN, Tables

__all__ = ["External", "owned_dir"]

_EDIT_DIR = re.compile(rf"edit-{TOKEN_RE}")


def owned_dir(key: str, base_dir: str | None) -> bool:
    """Whether ``base_dir`` is a tile directory this library made for the header ``key``
    (``<stem>.<token>.tiles`` beside it): only there are files ever removed."""
    return isinstance(base_dir, str) and re.fullmatch(
        rf"{re.escape(stem(key))}\.{TOKEN_RE}\.tiles", base_dir) is not None


class External:
    """An external editable dataset (see the module doc) through a write store and the
    reader's store of the header's directory."""

    external = True

    def __init__(self, wstore: Any, key: str, root: Any, *, base_dir: str | None,
                 pattern: str | None, ntiled: int, nlevels: int, policy: Policy,
                 source: Any) -> None:
        self.counters = Counters()
        #: the header of the last commit (parsed back)
        self.header: Header | None = None
        self.wstore, self.key, self.root = wstore, key, root
        self.base_dir, self.pattern = base_dir, pattern
        self.owned = owned_dir(key, base_dir)
        #: tiles come over the network (fetched a batch at once)
        self.remote = hasattr(wstore, "fs")
        #: how new tile files are named inside a commit's directory
        self.names = default_pattern(ntiled, nlevels)
        self.policy, self.source = policy, source
        self.token: str | None = None
        self.garbage: set[str] = set()
        self._store: Any = None

    # -- names ------------------------------------------------------------------------------
    def _tiles(self) -> Any:
        if self._store is None:
            self._store = (self.root.child(self.base_dir, field="tile:base_dir")
                           if self.base_dir else self.root)
        return self._store

    def name(self, level: Level, coords: tuple[int, ...], index: int, entry: Any) -> str:
        """The file name (under the tile directory) of a tile's entry."""
        if entry != BY_PATTERN:
            return str(entry)
        if self.pattern is None:
            raise DataError(f"{where(self.source)}level {level.index} tile {list(coords)} "
                            "has neither a tile:files entry nor a tile:pattern")
        return expand_pattern(self.pattern, coords, level.index, index)

    def _key(self, rel: str) -> str:
        return f"{self.base_dir}/{rel}" if self.base_dir else rel

    def _commit_dir(self) -> str:
        assert self.token is not None
        return f"edit-{self.token}"

    # -- tiles ------------------------------------------------------------------------------
    def read(self, level: Level, coords: tuple[int, ...], index: int, entry: Any
             ) -> bytes | memoryview | None:
        if entry is None:
            return None
        rel = self.name(level, coords, index, entry)
        if self.token is not None and rel.startswith(self._commit_dir() + "/"):
            self.wstore.sync(self._key(self._commit_dir()))  # staged uploads in flight
        try:
            data = self._tiles().get(rel, limit=self.policy.max_tile_bytes + (1 << 20),
                                     field="tile:files")
        except FileNotFoundError:
            raise DataError(f"{where(self.source)}tile file {rel!r} (level {level.index}, "
                            f"tile {list(coords)}) is missing") from None
        self.counters.read(len(data))
        return data

    def stage(self, level: Level, coords: tuple[int, ...], index: int, data: Any) -> Any:
        if self.token is None:
            self.token = fresh_token()
        rel = f"{self._commit_dir()}/{expand_pattern(self.names, coords, level.index, index)}"
        self.wstore.put(self._key(rel), data)
        self.garbage.discard(rel)
        self.counters.wrote(len(memoryview(data).cast("B")))
        return rel

    def retire(self, level: Level, coords: tuple[int, ...], index: int, entry: Any) -> None:
        if entry is None or not self.owned:
            return
        self.garbage.add(self.name(level, coords, index, entry))

    def prefetch(self, level: Level, items: list[tuple[tuple[int, ...], int, Any]]
                 ) -> list[Any]:
        """Every tile file requested at once (an object store; a local store reads each
        in :meth:`take`)."""
        store = self._tiles()
        out: list[Any] = []
        for coords, index, entry in items:
            if entry is None or not self.remote:
                out.append(None if entry is None else ("now", index, entry))
                continue
            rel = self.name(level, coords, index, entry)
            if self.token is not None and rel.startswith(self._commit_dir() + "/"):
                self.wstore.sync(self._key(self._commit_dir()))
            limit = self.policy.max_tile_bytes + (1 << 20)
            out.append(("later", rel, store.submit_get(rel, limit=limit, field="tile:files")))
        return out

    def take(self, level: Level, coords: tuple[int, ...], pending: Any
             ) -> bytes | memoryview | None:
        if pending is None:
            return None
        if pending[0] == "now":
            return self.read(level, coords, pending[1], pending[2])
        _, rel, future = pending
        store = self._tiles()
        try:
            data = store.fetcher.wait(future, store.url(store.path(rel, field="tile:files")),
                                      0, None).data
        except FileNotFoundError:
            raise DataError(f"{where(self.source)}tile file {rel!r} (level {level.index}, "
                            f"tile {list(coords)}) is missing") from None
        self.counters.read(len(data))
        return data

    # -- commits ----------------------------------------------------------------------------
    def publish(self, header: Header, prefix: str, tables: Tables, lock: Any,
                policy: Policy, name: Any) -> Tables:
        if not self.owned:
            return self.rewrite(header, prefix, tables, lock, policy, name)
        if self.token is not None:
            self.wstore.sync(self._key(self._commit_dir()))
        tables = self._named(tables)
        head = render_external(header, prefix, tables, self.pattern, str(self.base_dir))
        self.header = check_rendered(head, policy, name)
        lock.refresh()
        put_whole(self.wstore, self.key, head)
        self.counters.wrote(len(head))
        self._remove(sorted(self.garbage))
        self.garbage.clear()
        self.token = None
        return tables

    def _named(self, tables: Tables) -> Tables:
        """The tables, every pattern-named tile named explicitly when the pattern no longer
        tells the tiles of the (resized) grids apart."""
        if self.pattern is None:
            return tables
        stored = [lv for lv in tables.levels if lv.stored]
        axes = stored[0].grid.axes
        try:
            check_pattern(self.pattern, axes, tables.levels, {})
            return tables
        except HeaderError:
            out = tables.copy()
            for lv in stored:
                names = out.entries[lv.index]
                for i in range(lv.grid.ntiles):
                    if names[i] == BY_PATTERN:
                        names[i] = self.name(lv, lv.grid.coords(i), i, BY_PATTERN)
            return out

    def rewrite(self, header: Header, prefix: str, tables: Tables, lock: Any,
                policy: Policy, name: Any) -> Tables:
        """Copy every tile into a fresh tile directory named by the default pattern, then
        replace the header and remove the dataset's earlier tile directories."""
        new_dir = f"{stem(self.key)}.{fresh_token()}.tiles"
        self.wstore.reserve(new_dir)
        moved = tables.copy()
        try:
            for lv, i, entry in tables.tiles():
                coords = lv.grid.coords(i)
                data = self.read(lv, coords, i, entry)
                rel = expand_pattern(self.names, coords, lv.index, i)
                self.wstore.put(f"{new_dir}/{rel}", data)
                self.counters.wrote(len(data or b""))
                moved.relocate(lv.index, i, BY_PATTERN)
            self.wstore.sync(new_dir)
            head = render_external(header, prefix, moved, self.names, new_dir)
            self.header = check_rendered(head, policy, name)
            lock.refresh()
            previous = self.wstore.owned(self.key)  # what the header being replaced references
            put_whole(self.wstore, self.key, head)
        except BaseException:
            self.wstore.discard(new_dir)
            raise
        self.abort()
        self.wstore.tidy(self.key, keep=[new_dir], owned=previous)
        self.base_dir, self.pattern, self.owned, self._store = new_dir, self.names, True, None
        return moved

    def abort(self) -> None:
        if self.token is not None:
            self.wstore.discard(self._key(self._commit_dir()))
        self.token = None
        self.garbage.clear()

    def close(self) -> None:
        """Nothing is held open."""

    # -- removal ----------------------------------------------------------------------------
    def _remove(self, names: list[str]) -> None:
        """Remove superseded tile files (best effort: a leftover is only dead bytes)."""
        if not names:
            return
        keys = [self._key(n) for n in names]
        fs = getattr(self.wstore, "fs", None)
        if fs is not None:  # an object store: bulk deletes
            with contextlib.suppress(Exception):
                fs.rm([self.wstore.fs_path(k) for k in keys])
            return
        dirs = set()
        for k in keys:
            with contextlib.suppress(OSError):
                os.unlink(self.wstore.path(k))
            dirs.add(os.path.dirname(self.wstore.path(k)))
        top = os.path.abspath(self.wstore.path(str(self.base_dir)))
        for d in sorted(dirs, key=len, reverse=True):
            while os.path.abspath(d) != top and d.startswith(top):
                try:
                    os.rmdir(d)  # only when empty
                except OSError:
                    break
                d = os.path.dirname(d)

    def sweep(self, tables: Tables) -> list[str]:
        """Remove the commit directories no header names (writers killed before their
        header was replaced); return them."""
        if not self.owned:
            return []
        used = {str(n).split("/", 1)[0] for t in tables.entries.values() for n in t
                if isinstance(n, str) and n.startswith("edit-")}
        try:
            fs = getattr(self.wstore, "fs", None)
            if fs is not None:
                base = self.wstore.fs_path(str(self.base_dir))
                fs.invalidate_cache(base)
                names = [e.rstrip("/").rsplit("/", 1)[-1] for e in fs.ls(base, detail=False)]
            else:
                names = os.listdir(self.wstore.path(str(self.base_dir)))
        except OSError:
            return []
        gone = [n for n in names if _EDIT_DIR.fullmatch(n) and n not in used]
        for n in gone:
            self.wstore.discard(self._key(n))
        return gone
