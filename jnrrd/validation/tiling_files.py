"""Tiling checks of external storage (docs/format.md#external-storage): the pattern names every
stored tile distinctly, ``tile:files`` entries are well formed, and every stored tile's file exists
under the path policy (or is recorded sparse)."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator
from typing import Any

from .._threads import ordered_map
from ..errors import JnrrdError
from ..policy import Policy
from ..storage.local import resolve_path
from ..tiling.locate import check_pattern, expand_pattern
from .core import _int
from .tiling_base import TilingChecks, checked_ints, describe_tile, strip_field

__all__ = ["FileChecks"]


class FileChecks(TilingChecks):
    """Checks of ``pattern``, ``files`` and ``base_dir``, and of the tile files themselves."""

    def _external(self) -> None:
        r = self.r
        for name in ("offset_table", "size_table"):
            if self.get(name) is not None:
                r.warning(self.key(name), "does not apply to external storage: ignored", None,
                          "absent")
        if self.levels is None:
            return
        files = self._files()
        pattern = self.get("pattern")
        if isinstance(pattern, str) and files is not None:
            try:
                check_pattern(pattern, self.levels[0].grid.axes, self.levels, files,
                              field="", prefix="")
            except JnrrdError as exc:
                r.error(self.key("pattern"), strip_field(str(exc), ""), pattern,
                        "a pattern naming every stored tile distinctly")
                return
        if files is not None:
            self._tile_files(pattern if isinstance(pattern, str) else None, files)

    def _files(self) -> dict[tuple[int, tuple[int, ...]], Any] | None:
        v = self.get("files")
        if v is None:
            return {}
        if not isinstance(v, list):
            return None
        assert self.levels is not None
        out: dict[tuple[int, tuple[int, ...]], Any] = {}
        ok = True
        for j, e in enumerate(v):
            if not isinstance(e, dict):
                ok = False
                continue
            idx, lv = checked_ints(e.get("indices")), _int(e.get("level", 0))
            if idx is None or lv is None:
                ok = False
                continue
            if not 0 <= lv < len(self.levels):
                r_lv = f"a level in 0..{len(self.levels) - 1}"
                self.r.error(self.key("files", j, "level"), f"level {lv} does not exist", lv,
                             r_lv)
                ok = False
                continue
            grid = self.levels[lv].grid
            if len(idx) != len(grid.grid):
                self.r.error(self.key("files", j, "indices"), f"expected {len(grid.grid)} "
                             "tile coordinates (one per tiled axis)", idx, len(grid.grid))
                ok = False
                continue
            if any(t >= g for t, g in zip(idx, grid.grid, strict=True)):
                self.r.error(self.key("files", j, "indices"), f"outside the level-{lv} tile "
                             f"grid {list(grid.grid)}", idx, [g - 1 for g in grid.grid])
                ok = False
                continue
            if (lv, tuple(idx)) in out:
                self.r.error(self.key("files", j), f"a second entry for level {lv} tile {idx}",
                             e, "one entry per tile")
                ok = False
                continue
            out[(lv, tuple(idx))] = e.get("file")
        return out if ok else None

    def _tile_files(self, pattern: str | None, files: dict[tuple[int, tuple[int, ...]], Any]
                    ) -> None:
        """Every stored tile has a file that exists (or is recorded sparse)."""
        store = self.info.store
        if store is None or self.levels is None:
            return
        if getattr(store, "remote", False):
            self._remote_tile_files(store, pattern, files)
            return
        header_dir = store.root
        r = self.r
        root = header_dir
        policy = self.policy
        base = self.get("base_dir")
        try:
            if isinstance(base, str):
                root = resolve_path(header_dir, base, policy, field=self.key("base_dir"))
                policy = Policy.from_kwargs(policy, allowed_roots=(*policy.allowed_roots, root))
        except JnrrdError as exc:
            r.error(self.key("base_dir"), str(exc), base, "a directory allowed by the policy")
            return
        for index, name, field in self._named(pattern, files):
            try:
                path = resolve_path(root, name, policy, field=field)
            except JnrrdError as exc:
                r.error(field, f"{describe_tile(self.levels, index)}: {exc}", name,
                        "a path allowed by the policy")
                continue
            if not os.path.isfile(path):
                r.error(field, f"{describe_tile(self.levels, index)}: tile file {name!r} "
                        "is missing", name, "an existing file")

    def _named(self, pattern: str | None, files: dict[tuple[int, tuple[int, ...]], Any]
               ) -> Iterator[tuple[int, Any, str]]:
        """``(global tile index, file name, field)`` of every stored tile that names a file
        (a tile with no name at all is reported here)."""
        assert self.levels is not None
        for lv in self.levels:
            if not lv.stored:
                continue
            for local, coords in enumerate(lv.grid.all_coords()):
                index = lv.first + local
                if (lv.index, coords) in files:
                    name, field = files[(lv.index, coords)], self.key("files")
                    if name is None:
                        continue  # recorded as sparse (docs/format.md#sparse-tiles)
                elif pattern is not None:
                    name = expand_pattern(pattern, coords, lv.index, local)
                    field = self.key("pattern")
                else:
                    self.r.error(self.key("files"), f"{describe_tile(self.levels, index)} has "
                                 "no file entry (reads fail unless missing='fill')", None,
                                 "an entry per stored tile")
                    continue
                yield index, name, field

    def _remote_tile_files(self, store: Any, pattern: str | None,
                           files: dict[tuple[int, tuple[int, ...]], Any]) -> None:
        """The tile files next to a remote header: one listing of their common prefix
        where the filesystem lists (S3, GCS, ...), then a request for each name the listing
        did not show (several in flight)."""
        r, base = self.r, self.get("base_dir")
        assert self.levels is not None
        try:
            if isinstance(base, str):
                store = store.child(base, field=self.key("base_dir"))
        except JnrrdError as exc:
            r.error(self.key("base_dir"), str(exc), base, "a directory allowed by the policy")
            return
        wanted: list[tuple[int, Any, str, str]] = []
        for index, name, field in self._named(pattern, files):
            try:
                path = store.path(name, field=field)
            except JnrrdError as exc:
                r.error(field, f"{describe_tile(self.levels, index)}: {strip_field(str(exc), '')}",
                        name, "a path allowed by the policy")
                continue
            wanted.append((index, name, field, path))
        listed = _listed(store, [w[3] for w in wanted]) if len(wanted) > 1 else set()
        unsure = [w for w in wanted if w[3] not in listed]
        cap = self.policy.max_files
        if len(unsure) > cap:  # a small header must not make us send millions of requests
            r.note(self.key("pattern" if pattern is not None else "files"),
                   f"{len(unsure)} tile files could not be listed; only the first {cap} "
                   "(max_files) were asked for", len(unsure), f"<= {cap}")
            unsure = unsure[:cap]
        workers = max(1, min(len(unsure), store.policy.request_concurrency, 16))

        def present(w: tuple[int, Any, str, str]) -> bool:
            return bool(store.exists(w[1], field=w[2]))

        for w, ok in zip(unsure, ordered_map(present, unsure, workers=workers,
                                              name="jnrrd-validate"), strict=True):
            if not ok:
                r.error(w[2], f"{describe_tile(self.levels, w[0])}: tile file {w[1]!r} is "
                        "missing", w[1], "an existing file")


def _listed(store: Any, paths: list[str]) -> set[str]:
    """The paths (as :meth:`RemoteStore.path` gives them) found by listing the common
    directory of ``paths`` once; empty where the filesystem cannot list (HTTP)."""
    fs = store.fs
    if store.fetcher.http:
        return set()
    stripped = {fs._strip_protocol(p): p for p in paths}
    try:
        common = posixpath.commonpath(list(stripped))
        if common in stripped:
            common = posixpath.dirname(common)
        if "/" not in common.strip("/"):
            return set()  # never list a whole bucket
        found = fs.find(common)
    except Exception:  # no listing (permissions, ...): ask for each object
        return set()
    return {stripped[f] for f in map(fs._strip_protocol, found) if f in stripped}
