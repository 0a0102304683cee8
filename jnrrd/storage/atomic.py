"""Atomic replacement, durability and the removal of a write's leftovers
(docs/format.md#writer-layout-and-atomicity "Writer layout and atomicity").

A single file is written to a temporary file in the target directory, ``fsync``ed and
``os.replace``d (:func:`replace`; the staged files themselves are
:class:`jnrrd.storage.writes.StagedFile`). Multi-file datasets never overwrite a file the
current header references: new data/tile files get fresh names, the header is replaced last,
and the old files are removed only after that. Temporary names carry a recognisable marker
(:mod:`jnrrd.storage.names`) so the next write to the same target can remove leftovers of an
interrupted one.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import shutil
from collections.abc import Iterable, Iterator

from .. import _platform
from .._threads import start_daemon
from .leftovers import is_live
from .names import MARK, tmp_marker

__all__ = [
    "durability",
    "durable",
    "fsync_dir",
    "remove_leftovers",
    "replace",
    "reported_as",
]

_DURABLE: contextvars.ContextVar[bool] = contextvars.ContextVar("jnrrd_durable", default=True)


def durable() -> bool:
    """Whether writes in this context ``fsync`` (``jnrrd.write(..., durable=False)``: no)."""
    return _DURABLE.get()


@contextlib.contextmanager
def durability(on: bool) -> Iterator[None]:
    """Writes inside the block ``fsync`` (``on``) or only replace atomically (not ``on``).

    Background threads do not inherit this: whatever syncs from one reads :func:`durable`
    when its writer is set up, in the calling thread.
    """
    token = _DURABLE.set(bool(on))
    try:
        yield
    finally:
        _DURABLE.reset(token)


def fsync_dir(path: str) -> None:
    """Flush a directory entry change to disk when writes are :func:`durable`
    (:func:`jnrrd._platform.fsync_dir`: nothing where directories cannot be opened)."""
    if durable():
        _platform.fsync_dir(path)


def replace(tmp: str, target: str) -> None:
    """``os.replace(tmp, target)`` and flush the directory entry.

    Freeing a large old file's blocks can take a good part of a second (ext4 with ``discard``
    frees them synchronously on unlink); on POSIX systems a descriptor held across the replace
    keeps the old inode alive, and closing it on a background thread moves that cost off the
    caller. Windows cannot replace a file that is open, so there nothing holds it
    (:data:`jnrrd._platform.REPLACE_WHILE_OPEN`).
    """
    old = None
    if _platform.REPLACE_WHILE_OPEN:
        try:
            old = os.open(target, os.O_RDONLY)
        except OSError:
            pass
    try:
        os.replace(tmp, target)
    except BaseException:
        if old is not None:
            os.close(old)
        raise
    fsync_dir(os.path.dirname(os.path.abspath(target)))
    if old is not None:
        start_daemon(os.close, old, name="jnrrd-release")


@contextlib.contextmanager
def reported_as(target: object) -> Iterator[None]:
    """Re-raise an ``OSError`` about one of the temporary files of a write as the same error
    about ``target`` (a path; anything else is left alone): temporary names are an
    implementation detail the caller cannot act on."""
    try:
        yield
    except OSError as e:
        names = (str(e.filename or ""), str(e.filename2 or ""))
        if (isinstance(target, (str, os.PathLike)) and e.errno is not None
                and any(MARK in n for n in names)):
            raise type(e)(e.errno, e.strerror, os.fspath(target)) from None
        raise


def remove_leftovers(target: str, keep: Iterable[str] = (), patterns: Iterable[str] = ()
                     ) -> list[str]:
    """Remove temporary files of ``target`` and stale siblings matching ``patterns``.

    ``patterns`` are regular expressions over names in the target's directory (fresh data
    files and tile directories of earlier writes); the temporary files of such names
    (``.<name>.jnrrd-tmp-*``, left by a write interrupted while writing a data file) go too.
    Anything in ``keep`` (absolute paths the current header references) survives. Returns what
    was removed.
    """
    target = os.path.abspath(target)
    d = os.path.dirname(target)
    marker = os.path.basename(tmp_marker(target))
    keep_set = {os.path.abspath(k) for k in keep}
    regexes = [re.compile(p) for p in patterns]
    removed: list[str] = []
    try:
        names = os.listdir(d)
    except OSError:
        return removed
    for name in names:
        path = os.path.join(d, name)
        if path in keep_set:
            continue
        if name.startswith(marker) and name.endswith(".pending"):
            if is_live(path):
                continue  # the journal of a running write (jnrrd.storage.leftovers)
        if name.startswith(marker) or any(r.fullmatch(name) or _tmp_of(r, name)
                                          for r in regexes):
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
                removed.append(path)
            except OSError:
                pass
    return removed


def _tmp_of(regex: re.Pattern[str], name: str) -> bool:
    """True for ``.<base><marker><token>`` where ``base`` matches ``regex``."""
    if not name.startswith(".") or MARK not in name:
        return False
    base = name[1:].rpartition(MARK)[0]
    return bool(regex.fullmatch(base))
