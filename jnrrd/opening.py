"""``jnrrd.open``: a volume to read (:func:`jnrrd.api.open`) or, with ``mode="r+"``, to read
and write (:func:`jnrrd.editing.entry.open_rw`; docs/editing.md). It sits above both, which
import each other's layers only downward."""

from __future__ import annotations

from typing import Any

from ._config import settings_for
from .api import _open as open_read
from .engine.volume import Volume
from .policy import IOSettings, Policy

__all__ = ["open"]

#: the keywords of ``mode="r+"`` that are not reader settings (docs/editing.md)
_EDITING = ("stale_after", "durable", "dirty_bytes")


def open(source: Any, *, mode: str = "r", index_order: str = "F", missing: str = "error",
         cache_bytes: int | None = None, threads: int | None = None,
         storage_options: dict[str, Any] | None = None, policy: Policy | None = None,
         io: IOSettings | None = None, **policy_options: Any) -> Volume:
    """Open a JNRRD file lazily: slicing the returned :class:`~jnrrd.Volume` reads only what
    it needs (:func:`jnrrd.api.open`: ``source``, ``missing``, ``cache_bytes``, ``threads``,
    ``policy``, ``io`` and the policy keywords ``**policy_options``; docs/api.md).

    ``mode="r+"`` opens a tiled file (a path or a writable URL) for writing as well: the
    volume takes ``vol[...] = array``, ``append``, ``resize``, ``commit`` and ``abort``, one
    writer at a time (``LockError``); ``**policy_options`` may then also hold ``stale_after``,
    ``durable`` and ``dirty_bytes`` (docs/editing.md).
    """
    options = dict(policy_options)
    if mode not in ("r", "r+"):
        raise ValueError(f"mode must be 'r' (read) or 'r+' (read and write), got {mode!r}")
    editing = {k: options.pop(k) for k in _EDITING if k in options} if mode == "r+" else {}
    # (resolved here, so that a deprecation warning points at the caller's line)
    pol = settings_for("jnrrd.open()", policy=policy, io=io, options=options,
                       cache_bytes=cache_bytes if mode == "r" else None, threads=threads)
    if mode == "r":
        return open_read(source, index_order, missing, storage_options, pol)
    if missing != "error" or cache_bytes is not None:
        raise TypeError("missing= and cache_bytes= apply to mode 'r' only")
    from .editing.entry import open_rw

    return open_rw(source, index_order=index_order, storage_options=storage_options,
                   policy=pol, **editing)
