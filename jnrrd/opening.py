"""``jnrrd.open``: a volume to read (:func:`jnrrd.api.open`) or, with ``mode="r+"``, to read
and write (:func:`jnrrd.editing.entry.open_rw`; docs/editing.md). It sits above both, which
import each other's layers only downward."""

from __future__ import annotations

from typing import Any

from .api import open as open_read
from .engine.volume import Volume

__all__ = ["open"]


def open(source: Any, *, mode: str = "r", index_order: str = "F", missing: str = "error",
         cache_bytes: int | None = None, storage_options: dict[str, Any] | None = None,
         **options: Any) -> Volume:
    """Open a JNRRD file lazily: slicing the returned :class:`~jnrrd.Volume` reads only what
    it needs.

    ``source`` is a path, an fsspec URL (``s3://``, ``https://``, ...; ``storage_options``
    go to fsspec unchanged) or a binary file object (left open). ``missing="fill"`` reads
    absent external tile files as padding. ``cache_bytes``: the budget of the volume's cache
    of decoded tiles, shared by all its levels (0: off; ``None``: the default for the storage
    kind, 0 for a local file, 256 MiB for a URL; docs/api.md). ``**options``: the reader's
    policy keywords.

    ``mode="r+"`` opens a tiled file (a path or a writable URL) for writing as well: the
    volume takes ``vol[...] = array``, ``append``, ``resize``, ``commit`` and ``abort``, one
    writer at a time (``LockError``); ``**options`` may then also hold ``stale_after``,
    ``durable`` and ``dirty_bytes`` (docs/editing.md).
    """
    if mode == "r":
        return open_read(source, index_order=index_order, missing=missing,
                         cache_bytes=cache_bytes, storage_options=storage_options, **options)
    if mode != "r+":
        raise ValueError(f"mode must be 'r' (read) or 'r+' (read and write), got {mode!r}")
    if missing != "error" or cache_bytes is not None:
        raise TypeError("missing= and cache_bytes= apply to mode 'r' only")
    from .editing.entry import open_rw

    return open_rw(source, index_order=index_order, storage_options=storage_options,
                   **options)
