"""Pickling volumes: a volume travels as how to open its file again, never as its bytes.

``pickle.dumps(vol)`` stores the volume's re-opener (``Volume.reopen``, an ``api.Reopen``:
path, index order, ``missing``, policy, and the file's version token taken when it was
opened) and the level; ``pickle.loads`` opens the file again through it and compares the
version token of the file it opened with the stored one, raising ``DataError`` when they
differ (the file was rewritten or replaced since). ``copy.copy``/``copy.deepcopy`` go the same
way: an independent volume (its own handle and cache) over the same, unchanged file.

A volume read from a caller's file object has no re-opener: pickling it is a ``TypeError``
saying what to do instead. A closed volume refuses too (``ValueError``, like a closed file):
a round trip would silently bring back a volume its owner closed.
"""

from __future__ import annotations

from typing import Any

from ..errors import DataError, where

__all__ = ["reduce_view", "restore"]


def reduce_view(view: Any) -> tuple[Any, tuple[Any, int]]:
    """``LevelView.__reduce__``: ``(restore, (reopen, level))``."""
    vol = view._vol
    if vol.closed:
        raise ValueError(f"{where(vol.name)}cannot pickle a closed jnrrd volume; open the file "
                         "again (jnrrd.open) and pickle that one")
    if vol.reopen is None:
        raise TypeError(
            f"{where(vol.name)}cannot pickle a jnrrd volume read from a file object: only "
            "volumes opened by path can be re-opened elsewhere. Open the file by path "
            "(jnrrd.open(path)), or pickle the array you read (vol[...]) instead")
    return restore, (vol.reopen, view.index)


def restore(reopen: Any, level: int = 0) -> Any:
    """Open the file again through ``reopen`` and return level ``level`` of it; ``DataError``
    when the file is no longer the one that was pickled."""
    version = getattr(reopen, "version", None)
    try:
        vol = reopen()
    except FileNotFoundError:
        raise DataError(f"{where(reopen.path)}the file no longer exists (it was pickled "
                        "while open)") from None
    now = getattr(vol.reopen, "version", None)
    if version is not None and now != version:
        vol.close()
        raise DataError(f"{where(reopen.path)}the file changed since the volume was opened "
                        "and pickled (a rewrite replaces it); open it again and pickle that")
    return vol if level == 0 else vol.levels[level]
