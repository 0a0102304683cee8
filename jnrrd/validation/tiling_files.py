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
from ..storage import resolve_path
from ..tiling.locate import check_pattern, expand_pattern
from .core import _int
from .report import MAX_PER_FIELD
from .tiling_base import TilingChecks, checked_ints, describe_tile, strip_field

__all__ = ["MAX_BAD_TILES", "FileChecks"]

#: bad tiles reported before a tile check stops (the report lists this many per field)
MAX_BAD_TILES = MAX_PER_FIELD


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
        bad = checked = 0
        for index, name, field in self._named(pattern, files):
            checked += 1
            if name is None:
                bad += 1
            else:
                try:
                    path = resolve_path(root, name, policy, field=field)
                except JnrrdError as exc:
                    r.error(field, f"{describe_tile(self.levels, index)}: {exc}", name,
                            "a path allowed by the policy")
                    bad += 1
                else:
                    if not os.path.isfile(path):
                        r.error(field, f"{describe_tile(self.levels, index)}: tile file "
                                f"{name!r} is missing", name, "an existing file")
                        bad += 1
            if bad >= MAX_BAD_TILES:
                self._stopped(field, bad, checked)
                return

    def _stopped(self, field: str, bad: int, checked: int) -> None:
        """The note that ends a tile check after :data:`MAX_BAD_TILES` bad tiles: a header
        of a few hundred bytes may claim 10^7 tiles, and checking each would cost what
        the claim costs, not what the files hold."""
        assert self.nstored is not None
        self.r.note("", f"stopped after {bad} bad tiles: {self.nstored - checked} of the "
                    f"{self.nstored} stored tiles were not checked", self.nstored - checked,
                    None)

    def _named(self, pattern: str | None, files: dict[tuple[int, tuple[int, ...]], Any]
               ) -> Iterator[tuple[int, Any, str]]:
        """``(global tile index, file name, field)`` of every stored tile that names a file
        (a tile with no name at all is reported here, and given with the name None)."""
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
                    name, field = None, self.key("files")
                yield index, name, field

    def _remote_tile_files(self, store: Any, pattern: str | None,
                           files: dict[tuple[int, tuple[int, ...]], Any]) -> None:
        """The tile files next to a remote header, :attr:`Policy.max_files` names at a time:
        a listing of their common prefix where the filesystem lists (S3, GCS, ...; one per
        directory), then a request for each name no listing showed (several in flight, at
        most ``max_files`` in all). Stops after :data:`MAX_BAD_TILES` bad tiles."""
        r, base = self.r, self.get("base_dir")
        assert self.levels is not None
        try:
            if isinstance(base, str):
                store = store.child(base, field=self.key("base_dir"))
        except JnrrdError as exc:
            r.error(self.key("base_dir"), str(exc), base, "a directory allowed by the policy")
            return
        check = _RemotePresence(self, store)
        chunk: list[tuple[int, Any, str, str]] = []
        checked = 0
        field = self.key("pattern" if pattern is not None else "files")
        for index, name, field in self._named(pattern, files):
            checked += 1
            if name is None:
                check.bad += 1
            else:
                try:
                    chunk.append((index, name, field, store.path(name, field=field)))
                except JnrrdError as exc:
                    r.error(field, f"{describe_tile(self.levels, index)}: "
                            f"{strip_field(str(exc), '')}", name, "a path allowed by the policy")
                    check.bad += 1
            if len(chunk) >= self.policy.max_files:
                check(chunk)
                chunk = []
            if check.bad >= MAX_BAD_TILES:
                self._stopped(field, check.bad, checked)
                return
        check(chunk)
        if check.bad >= MAX_BAD_TILES and checked < (self.nstored or 0):
            self._stopped(field, check.bad, checked)


class _RemotePresence:
    """Whether remote tile files exist, a chunk of names at a time (listings cached by
    directory, requests for the rest capped at ``max_files`` in all); counts bad tiles."""

    def __init__(self, checks: FileChecks, store: Any) -> None:
        self.checks, self.store = checks, store
        self.bad = 0
        self.asked = 0
        self.listed: dict[str, set[str]] = {}
        self.capped = False

    def __call__(self, chunk: list[tuple[int, Any, str, str]]) -> None:
        if not chunk:
            return
        checks, store = self.checks, self.store
        found = _listed(store, [w[3] for w in chunk], self.listed) if len(chunk) > 1 else set()
        unsure = [w for w in chunk if w[3] not in found]
        cap = checks.policy.max_files
        if self.asked + len(unsure) > cap:  # a small header must not make us send millions
            if not self.capped:             # of requests
                checks.r.note(chunk[0][2], f"{len(unsure)} tile files could not be listed; "
                              f"only the first {cap} (max_files) were asked for",
                              len(unsure), f"<= {cap}")
            self.capped = True
            unsure = unsure[:max(0, cap - self.asked)]
        workers = max(1, min(len(unsure), store.policy.io.request_concurrency, 16))

        def present(w: tuple[int, Any, str, str]) -> bool:
            return bool(store.exists(w[1], field=w[2]))

        for start in range(0, len(unsure), 4 * workers):  # a few windows in flight at most
            window = unsure[start:start + 4 * workers]
            self.asked += len(window)
            for w, ok in zip(window, ordered_map(present, window, workers=workers,
                                                 name="jnrrd-validate"), strict=True):
                if not ok:
                    assert checks.levels is not None
                    checks.r.error(w[2], f"{describe_tile(checks.levels, w[0])}: tile file "
                                   f"{w[1]!r} is missing", w[1], "an existing file")
                    self.bad += 1
            if self.bad >= MAX_BAD_TILES:
                return


def _listed(store: Any, paths: list[str], cache: dict[str, set[str]]) -> set[str]:
    """The paths (as :meth:`RemoteStore.path` gives them) found by listing the common
    directory of ``paths`` (once per directory: ``cache`` maps a listed directory to what it
    held); empty where the filesystem cannot list (HTTP)."""
    fs = store.fs
    if store.fetcher.http:
        return set()
    stripped = {store.strip(p): p for p in paths}
    try:
        common = posixpath.commonpath(list(stripped))
        if common in stripped:
            common = posixpath.dirname(common)
        if "/" not in common.strip("/"):
            return set()  # never list a whole bucket
        done = next((d for d in cache if common == d or common.startswith(d + "/")), None)
        if done is None:
            done = common
            cache[done] = set(map(store.strip, fs.find(common)))
    except Exception:  # no listing (permissions, ...): ask for each object
        return set()
    return {p for f, p in stripped.items() if f in cache[done]}
