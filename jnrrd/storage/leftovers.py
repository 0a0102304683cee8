"""Leftovers of interrupted writes, found by the names this library gives them.

Every write to a path marks itself with a *journal*, ``.<name>.jnrrd-tmp-<token>.pending``
beside the target, locked (``flock``, shared) while the write runs and removed when it ends; a
killed writer leaves it behind as evidence. The journal lists the fresh data files and tile
directories the write made and the previous files it was about to remove
(:mod:`jnrrd.storage.ownership`). :func:`cleanup` (and every write, for its own directory)
removes:

- temporary files and directories (``.<name>.jnrrd-tmp-<token>`` with an optional ``.levelN``,
  ``.tiles`` or ``.pending`` suffix): only this library makes such names;
- for a target whose journal is left over: the names that journal claims. A name merely
  shaped like a fresh name (``scan.1a2b3c4d.raw``) is never touched without that claim.

Nothing younger than ``older_than`` seconds (newest modification time, a directory's entries
included), nothing a running write holds (its journal is locked), and nothing whose name any
header in the directory mentions is removed. Symbolic links are removed as links, never
followed: nothing outside the directory is listed, read or removed.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import shutil
import stat
import time
from collections.abc import Iterator
from typing import Any

from .._platform import FILE_LOCKS, lock_shared, lock_taken
from .names import fresh_token, tmp_marker
from .ownership import (
    FINAL,
    claims,
    header_strings,
    journal_records,
    open_plain,
    read_head,
)

__all__ = ["STALE_AFTER", "cleanup", "is_live", "sweep", "write_guard", "write_journal"]

#: default age (seconds) after which a leftover counts as stale
STALE_AFTER = 600.0

_TEMP = re.compile(
    r"\.(?P<base>.+)\.jnrrd-tmp-[0-9a-f]{8}(?P<kind>\.level[0-9]+|\.tiles|\.pending)?")
#: names that may be headers (any case): a symbolic link by such a name is never followed,
#: so what it points at is unknown and every candidate in the directory is kept
_HEADER_SUFFIXES = (".jnrrd", ".nrrd", ".nhdr")


@contextlib.contextmanager
def write_journal(target: str) -> Iterator[None]:
    """Mark a write to ``target`` as running for as long as the block runs (see module doc);
    inside the block :func:`jnrrd.storage.ownership.claim` records names in the journal."""
    path = tmp_marker(target) + fresh_token() + ".pending"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0),
                     0o644)
    except (OSError, ValueError):
        yield  # no journal (e.g. a missing directory): the write reports its own error
        return
    try:
        lock_shared(fd)
        with journal_records(target, fd):
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
    held: only evidence of a dead writer lets its files go. A name that is not a regular file
    (a link, a FIFO: no writer makes those) is no journal, and not live."""
    if not FILE_LOCKS:
        return False
    if not os.path.lexists(journal):
        return False
    f = open_plain(journal)
    if f is None:
        try:
            st = os.lstat(journal)
        except OSError:
            return False
        return stat.S_ISREG(st.st_mode)  # a regular file we may not open: held
    with f:
        return lock_taken(f.fileno())  # closing releases a lock we took


def cleanup(directory: str | os.PathLike[str], *,
            older_than: float | datetime.timedelta = STALE_AFTER,
            dry_run: bool = False) -> list[str]:
    """Remove what interrupted writes left in ``directory``; return the paths removed.

    Only names this library creates with its unique tokens are considered (module doc):
    temporary files, and the data files and tile directories the journal of an interrupted
    write claims. A path is removed only when it is older than ``older_than`` (seconds or a
    ``timedelta``; default 10 minutes), no running write holds it and no header in the
    directory mentions it. Symbolic links are removed as links, never followed.
    ``dry_run=True`` removes nothing and returns what would go.
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
        path = os.path.abspath(target)
        _Sweep(os.path.dirname(path), time.time() - STALE_AFTER, False,
               os.path.basename(path)).run()


class _Sweep:
    """One pass over a directory. ``target``: the name a write is about to write; the
    journals of that same target whose writers are provably dead (unlocked, on a system with
    locks) give up their claims at once, not only after ``cutoff``."""

    def __init__(self, directory: str, cutoff: float, dry_run: bool,
                 target: str | None = None) -> None:
        self.d, self.cutoff, self.dry_run, self.target = directory, cutoff, dry_run, target
        self.removed: list[str] = []
        self.held: set[str] = set()  # running writes' targets and claimed names

    def run(self) -> list[str]:
        names = os.listdir(self.d)
        temps = [(n, m) for n in names if (m := _TEMP.fullmatch(n))]
        if not temps:
            return []
        dead = []
        for n, m in temps:
            if m.group("kind") != ".pending":
                continue
            if is_live(self._path(n)):
                # read after the listing: whatever it made was claimed before it was made
                self.held.add(m.group("base"))
                self.held.update(claims(self._path(n)))
            else:
                dead.append((n, m.group("base")))
        for n, m in temps:
            if m.group("kind") != ".pending" and m.group("base") not in self.held:
                self._remove(n, self.cutoff)
        if dead:
            present = set(names)
            mentioned = _Mentions(self.d, names)
            for journal, target in dead:
                now = target == self.target and FILE_LOCKS  # its writer is dead
                cutoff = time.time() if now else self.cutoff
                own = {n for n in claims(self._path(journal))
                       if n != target and n not in self.held and not mentioned(n)}
                kept = [n for n in own if n in present and not self._remove(n, cutoff)]
                for n, m in temps:  # temporary files of a data file it was writing
                    if m.group("base") in own and m.group("kind") is None:
                        self._remove(n, cutoff)
                if not kept and (os.path.lexists(self._path(journal))):
                    self._remove(journal, cutoff)
        return sorted(self.removed)

    def _path(self, name: str) -> str:
        return os.path.join(self.d, name)

    def _remove(self, name: str, cutoff: float) -> bool:
        """Remove ``name`` unless it changed after ``cutoff``; False when it is too fresh (or
        cannot be removed)."""
        path = self._path(name)
        if path in self.removed:
            return True
        if _newer_than(path, cutoff):
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
    """Whether ``path`` (or, for a directory, anything inside it) changed after ``cutoff``
    (links are not followed: ``os.walk`` lists only what is inside ``path``)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if st.st_mtime > cutoff:
        return True
    if not stat.S_ISDIR(st.st_mode):
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
    """Whether any header in the directory mentions a name (JNRRD strings, NRRD lines),
    compared ignoring case (a case-insensitive disk resolves any spelling)."""

    def __init__(self, directory: str, names: list[str]) -> None:
        self.texts: list[str] = []
        self.everything = False  # a pattern reference or an unreadable header: keep all
        for n in names:
            if _TEMP.fullmatch(n) or FINAL.fullmatch(n):
                continue
            path = os.path.join(directory, n)
            if os.path.islink(path):
                # never followed: a link named like a header may name anything here
                self.everything |= n.lower().endswith(_HEADER_SUFFIXES)
                continue
            f = open_plain(path)
            if f is None:
                continue
            try:
                with f:
                    head = read_head(f)
                if head is None:
                    raise ValueError("header longer than the search cap")
                text = header_strings(head)
            except (OSError, ValueError, RecursionError):
                self.everything = True
                continue
            if text is not None:
                self.texts.extend(t.casefold() for t in text)

    def __call__(self, name: str) -> bool:
        folded = name.casefold()
        return self.everything or any(folded in t for t in self.texts)
