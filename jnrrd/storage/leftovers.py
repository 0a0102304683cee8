"""Leftovers of interrupted writes, found by the names this library gives them.

Every write to a path marks itself with a *journal*, ``.<name>.jnrrd-tmp-<token>.pending``
beside the target, locked (``flock``, shared) while the write runs and removed when it ends; a
killed writer leaves it behind as evidence. :func:`cleanup` (and every write, for its own
directory) removes:

- temporary files and directories (``.<name>.jnrrd-tmp-<token>`` with an optional ``.levelN``,
  ``.tiles`` or ``.pending`` suffix): only this library makes such names;
- for a target whose journal is left over: the unreferenced fresh data files and tile
  directories that write made (``<stem>.<token>.tiles``, ``<stem>.<token>.data[.<ext>]``,
  ``<stem>.<token>.raw[.gz|.bz2]``/``.txt``/``.hex``, modified after the journal was
  created). Without that evidence such a name may be a user's own file (e.g.
  ``scan.20231105.raw``) and is never touched here; the old files of a dataset whose write
  was killed after its header was replaced go with the next write to that target.

Nothing younger than ``older_than`` seconds (newest modification time, a directory's entries
included), nothing a running write holds (its journal is locked), and nothing whose name any
header in the directory mentions is removed.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from typing import Any

from .._platform import FILE_LOCKS, lock_shared, lock_taken
from .names import TOKEN_RE, fresh_token, tmp_marker

__all__ = ["STALE_AFTER", "cleanup", "is_live", "sweep", "write_guard", "write_journal"]

#: default age (seconds) after which a leftover counts as stale
STALE_AFTER = 600.0

_TEMP = re.compile(
    r"\.(?P<base>.+)\.jnrrd-tmp-[0-9a-f]{8}(?P<kind>\.level[0-9]+|\.tiles|\.pending)?")
_FINAL = re.compile(
    rf"(?P<stem>.+)\.{TOKEN_RE}\.(?:tiles|data(?:\.[a-z0-9]+)?|raw(?:\.gz|\.bz2)?|txt|hex)")
#: timestamp granularity allowed for "made by the write that journal belongs to" (FAT: 2 s)
_SLACK = 2.0
_HEADER_CAP = 64 << 20  # a header longer than this is not searched: its directory is kept


@contextlib.contextmanager
def write_journal(target: str) -> Iterator[None]:
    """Mark a write to ``target`` as running for as long as the block runs (see module doc)."""
    path = tmp_marker(target) + fresh_token() + ".pending"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError:
        yield  # no journal (e.g. a missing directory): the write reports its own error
        return
    try:
        lock_shared(fd)
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.close(fd)


@contextlib.contextmanager
def write_guard(target: Any) -> Iterator[None]:
    """Around a write to a path: hold its journal, and first sweep stale leftovers of
    interrupted writes from its directory (file objects: nothing)."""
    if not isinstance(target, (str, os.PathLike)):
        yield
        return
    path = os.fspath(target)
    with write_journal(path):
        sweep(path)
        yield


def is_live(journal: str) -> bool:
    """Whether a running write holds ``journal`` (its lock cannot be taken). A journal that
    cannot be opened (another user's) or locked (a file system without locks) counts as
    held: only evidence of a dead writer lets its files go."""
    if not FILE_LOCKS:
        return False
    try:
        fd = os.open(journal, os.O_RDONLY)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    try:
        return lock_taken(fd)
    finally:
        os.close(fd)  # closing releases a lock we took


def stems(target_name: str) -> set[str]:
    """The stems fresh data files and tile directories of ``target_name`` are named from."""
    out = {target_name}
    for ext in (".jnrrd", ".nrrd", ".nhdr"):
        if target_name.lower().endswith(ext):
            out.add(target_name[: -len(ext)])
    return out


def cleanup(directory: str | os.PathLike[str], *,
            older_than: float | datetime.timedelta = STALE_AFTER,
            dry_run: bool = False) -> list[str]:
    """Remove what interrupted writes left in ``directory``; return the paths removed.

    Only names this library creates with its unique tokens are considered (module doc):
    temporary files, and the unreferenced data files and tile directories of a target whose
    write was interrupted. A path is removed only when it is older than ``older_than``
    (seconds or a ``timedelta``; default 10 minutes), no running write holds it and no header
    in the directory mentions it. ``dry_run=True`` removes nothing and returns what would go.
    """
    if isinstance(older_than, datetime.timedelta):
        older_than = older_than.total_seconds()
    if isinstance(older_than, bool) or not isinstance(older_than, (int, float)):
        raise TypeError(f"older_than must be a number of seconds or a timedelta, "
                        f"not {type(older_than).__name__}")
    if not older_than >= 0:
        raise ValueError(f"older_than must be >= 0 seconds, got {older_than!r}")
    d = os.path.abspath(os.fspath(directory))
    if not os.path.isdir(d):
        raise ValueError(f"cleanup: {d!r} is not a directory")
    return _Sweep(d, time.time() - float(older_than), dry_run).run()


def sweep(target: str) -> None:
    """Best-effort :func:`cleanup` of the directory a write to ``target`` is about to use."""
    with contextlib.suppress(OSError, ValueError, RecursionError):
        _Sweep(os.path.dirname(os.path.abspath(target)), time.time() - STALE_AFTER,
               False).run()


class _Sweep:
    def __init__(self, directory: str, cutoff: float, dry_run: bool) -> None:
        self.d, self.cutoff, self.dry_run = directory, cutoff, dry_run
        self.removed: list[str] = []
        self.live: set[str] = set()  # targets a running write holds
        self.live_stems: set[str] = set()

    def run(self) -> list[str]:
        names = os.listdir(self.d)
        temps = [(n, m) for n in names if (m := _TEMP.fullmatch(n))]
        if not temps:
            return []
        journals = [(n, m.group("base")) for n, m in temps if m.group("kind") == ".pending"]
        live = self.live = {base for n, base in journals if is_live(self._path(n))}
        for t in live:
            self.live_stems |= stems(t)
        for n, m in temps:
            if m.group("kind") != ".pending" and not self._held(m.group("base")):
                self._remove(n)
        crashed = [(n, base) for n, base in journals if base not in live]
        if crashed:
            finals = [(n, m.group("stem")) for n in names if (m := _FINAL.fullmatch(n))]
            mentioned = _Mentions(self.d, names)
            for journal, target in crashed:
                own, since = stems(target), _mtime(self._path(journal)) - _SLACK
                left = [n for n, stem in finals if stem in own and not self._held(n)
                        and _mtime(self._path(n)) >= since and not mentioned(n)]
                kept = [n for n in left if not self._remove(n)]
                if not kept and (os.path.lexists(self._path(journal))):
                    self._remove(journal)
        return sorted(self.removed)

    def _path(self, name: str) -> str:
        return os.path.join(self.d, name)

    def _held(self, base: str) -> bool:
        """A running write owns files named from ``base`` (its target, or a fresh name of it)."""
        if base in self.live:
            return True
        m = _FINAL.fullmatch(base)
        return m is not None and m.group("stem") in self.live_stems

    def _remove(self, name: str) -> bool:
        """Remove ``name`` when stale; False when it is too fresh (or cannot be removed)."""
        path = self._path(name)
        if _newer_than(path, self.cutoff):
            return False
        if not self.dry_run:
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
            except FileNotFoundError:
                return True  # someone else removed it
            except OSError:
                return False
        self.removed.append(path)
        return True


def _mtime(path: str) -> float:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return float("inf")


def _newer_than(path: str, cutoff: float) -> bool:
    """Whether ``path`` (or, for a directory, anything inside it) changed after ``cutoff``."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if st.st_mtime > cutoff:
        return True
    if not os.path.isdir(path) or os.path.islink(path):
        return False
    for root, dirs, files in os.walk(path):
        for n in (*dirs, *files):
            try:
                s = os.lstat(os.path.join(root, n))
            except OSError:
                continue
            if s.st_mtime > cutoff:
                return True
    return False


class _Mentions:
    """Whether any header in the directory mentions a name (JNRRD strings, NRRD lines)."""

    def __init__(self, directory: str, names: list[str]) -> None:
        self.texts: list[str] = []
        self.everything = False  # a pattern reference or an unreadable header: keep all
        for n in names:
            if _TEMP.fullmatch(n) or _FINAL.fullmatch(n):
                continue
            path = os.path.join(directory, n)
            try:
                if not os.path.isfile(path):
                    continue
                text = _header_text(path)
            except (OSError, ValueError, RecursionError):
                self.everything = True
                continue
            if text is None:
                continue
            self.texts.extend(text)

    def __call__(self, name: str) -> bool:
        return self.everything or any(name in t for t in self.texts)


def _header_text(path: str) -> list[str] | None:
    """The strings of a JNRRD header / the lines of an NRRD header; None for other files.

    ``ValueError`` when a header cannot be searched completely (too long, not decodable) or
    names its data by a pattern (whose names a substring search would miss)."""
    with open(path, "rb") as f:
        head = f.read(16)
        if head.startswith(b"NRRD"):
            nrrd = True
        elif head.lstrip(b"\xef\xbb\xbf").lstrip().startswith(b"{") and b"jnrrd" in head:
            nrrd = False
        else:
            return None
        f.seek(0)
        raw = f.read(_HEADER_CAP + 1)
    end = raw.find(b"\n\n")
    if end < 0:
        end = raw.find(b"\r\n\r\n")
    if end < 0:
        if len(raw) > _HEADER_CAP:
            raise ValueError(f"{path}: header longer than {_HEADER_CAP} bytes")
        end = len(raw)
    lines = raw[:end].decode("utf-8", "surrogateescape").splitlines()
    if nrrd:
        for line in lines:
            key, sep, value = line.partition(":")
            if sep and key.strip().lower() in ("data file", "datafile") and "%" in value:
                raise ValueError(f"{path}: data files named by a pattern")
        return lines
    out: list[str] = []
    for line in lines[1:]:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        obj = json.loads(line)
        if isinstance(obj, dict) and "data_file_pattern" in obj:
            raise ValueError(f"{path}: data files named by a pattern")
        _strings(obj, out)
    return out


def _strings(obj: Any, out: list[str]) -> None:
    stack = [obj]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            out.append(x)
        elif isinstance(x, dict):
            stack.extend(x.keys())
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
