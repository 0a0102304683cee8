"""Dead bytes: what a tiled file holds that no tile of its header uses (superseded tile
versions of edits, tiles of aborted or interrupted commits), shown by ``jnrrd info`` and
removed by ``jnrrd.compact`` (docs/editing.md, "Compacting")."""

from __future__ import annotations

import os
from typing import Any

from .consistent import ROOM

__all__ = ["COMPACT_FRACTION", "COMPACT_MIN_BYTES", "dead_bytes", "dead_line", "external_bytes",
           "format_bytes",
           "worth_compacting"]

#: ``jnrrd info`` suggests ``jnrrd compact`` when dead bytes are at least this share of the
#: file and at least :data:`COMPACT_MIN_BYTES`
COMPACT_FRACTION = 0.2
COMPACT_MIN_BYTES = 1 << 20


def dead_bytes(vol: Any) -> int | None:
    """The bytes of a tiled volume's storage that its header does not use: for an internal
    file, the file less its header (room) and its tiles; for an external dataset on a local
    disk, the files under its tile directory less its tiles. None when it cannot be told
    cheaply (untiled files, objects on a remote store, tiles beside the header)."""
    tiling = vol.tiling
    if tiling is None:
        return None
    if tiling.storage == "internal":
        facts = _internal(vol)
        if facts is None:
            return None
        offsets, sizes, file_size = facts
        live = offsets >= 0
        room = vol.header.get(f"{tiling.prefix}:{ROOM}")
        if isinstance(room, int) and not isinstance(room, bool):
            start = room
        else:
            start = int(offsets[live].min()) if live.any() else file_size
        return max(0, file_size - start - int(sizes[live].sum()))
    root = _tile_dir(vol)
    if root is None:
        return None
    total = 0
    for d, _, files in os.walk(root):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(d, f))
            except OSError:
                pass
    used = sum(lv.stored_bytes for lv in vol.levels if lv.stored)
    return max(0, total - used)


def dead_line(path: str, vol: Any) -> str | None:
    """``jnrrd info``'s line on dead bytes (None when they cannot be told): how many, and
    the ``jnrrd compact`` command when it would pay."""
    dead = dead_bytes(vol)
    if dead is None:
        return None
    stored = sum(int(lv.stored_bytes) for lv in vol.levels if lv.stored)
    share = dead / max(1, stored + dead)
    line = f"dead bytes:  {format_bytes(dead)} ({share:.0%} of the tile storage)"
    if worth_compacting(dead, stored):
        import shlex

        line += f"; reclaim them with: jnrrd compact {shlex.quote(path)}"
    return line


def format_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def worth_compacting(dead: int | None, stored: int) -> bool:
    """Whether ``jnrrd compact`` would pay (see :data:`COMPACT_FRACTION`)."""
    return dead is not None and dead >= COMPACT_MIN_BYTES and dead >= COMPACT_FRACTION * max(
        1, stored + dead)


def _internal(vol: Any) -> tuple[Any, Any, int] | None:
    tables = getattr(vol, "_tables", None)
    if tables is not None:  # a volume open for writing: its layout's file
        f = getattr(vol._s.layout, "file", None)
        if f is None:
            return None
        import numpy as np

        rows = list(tables.entries.values())
        allrows = np.concatenate(rows) if rows else np.zeros((0, 2), np.int64)
        return allrows[:, 0], allrows[:, 1], os.fstat(f.fileno()).st_size
    src = vol._source
    if getattr(src, "remote", False) or not hasattr(src, "file_size"):
        return None
    return src.offsets, src.sizes, int(src.file_size)


def _tile_dir(vol: Any) -> str | None:
    layout = getattr(getattr(vol, "_s", None), "layout", None)
    store = layout._tiles() if layout is not None else getattr(vol._source, "_store", None)
    root = getattr(store, "root", None)
    if not isinstance(root, str) or getattr(store, "remote", False) or not vol.tiling.base_dir:
        return None
    return root if os.path.isdir(root) else None


def external_bytes(vol: Any, level: Any) -> int:
    """The stored bytes of a writable volume's external level: its tile files' sizes."""
    layout: Any = vol._s.layout
    total = 0
    for i in range(level.grid.ntiles):
        entry = vol._tables.get(level.index, i)
        if entry is not None:
            name = layout.name(level, level.grid.coords(i), i, entry)
            try:
                total += layout._tiles().size(name, field="tile:files")
            except OSError:
                pass
    return total
