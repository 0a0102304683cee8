"""Where tile bytes live, without any I/O: internal tables, external patterns and file lists
(docs/format.md#offset-table, #pattern-placeholders).

A tile is a byte range of the ``.jnrrd`` file (internal storage: ``offset_table`` /
``size_table``, or sizes derived from the geometry and the file size), a file of its own named
by ``tile:files`` or ``tile:pattern`` (external storage), or sparse. The sources in
:mod:`jnrrd.engine.sources` ask these functions and fetch the bytes from a store.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import DataError, HeaderError, where
from ..storage import is_url
from .levels import Level, raw_stored_sizes

__all__ = ["check_pattern", "core_itemsize", "derive_sizes", "derived_offsets",
           "expand_pattern", "external_key", "internal_range", "match_tile",
           "past_the_end", "pattern_dir", "pattern_regex", "raw_tile_sizes", "sizes_to_next"]

_PLACEHOLDER = re.compile(r"\{([a-z]+)\}")
#: positional placeholders: coordinate along tile:dimensions[0..4]
#: (docs/format.md#pattern-placeholders)
_POSITIONS = {"x": 0, "y": 1, "z": 2, "c": 3, "t": 4}


def check_pattern(
    pattern: str,
    axes: Sequence[int],
    levels: Sequence[Level],
    files: Mapping[tuple[int, tuple[int, ...]], Any] | None,
    *,
    field: str = "tile:pattern",
    prefix: str = "",
) -> None:
    """Placeholders whitelisted, no stray braces, and distinct tiles get distinct names."""
    names = _PLACEHOLDER.findall(pattern)
    rest = _PLACEHOLDER.sub("", pattern)
    if "{" in rest or "}" in rest:
        raise HeaderError(f"{prefix}{field}: stray '{{' or '}}' in {pattern!r}")
    for n in names:
        if n in _POSITIONS:
            if _POSITIONS[n] >= len(axes):
                raise HeaderError(
                    f"{prefix}{field}: {{{n}}} names tiled position {_POSITIONS[n]}, but only "
                    f"{len(axes)} axes are tiled"
                )
        elif n not in ("i", "l"):
            raise HeaderError(
                f"{prefix}{field}: unknown placeholder {{{n}}}; expected {{x}} {{y}} {{z}} "
                "{c} {t} {i} {l}"
            )
    stored = [lv for lv in levels if lv.stored]
    nstored = sum(lv.grid.ntiles for lv in stored)
    if files is not None and len(files) >= nstored and all(
        (lv.index, c) in files for lv in stored for c in lv.grid.all_coords()
    ):
        return  # every stored tile has its own files entry: the pattern names nothing
    used = set(names)
    if "i" not in used:
        for k in range(len(axes)):
            name = "xyzct"[k] if k < 5 else None
            if any(lv.grid.grid[k] > 1 for lv in stored) and (name is None or name not in used):
                raise HeaderError(
                    f"{prefix}{field}: {pattern!r} does not tell tiles apart along tiled "
                    f"position {k}; add {{{name or 'i'}}} or {{i}}"
                )
    if len(stored) > 1 and "l" not in used:
        raise HeaderError(
            f"{prefix}{field}: {pattern!r} is used by {len(stored)} stored levels; add {{l}}"
        )


def expand_pattern(pattern: str, coords: Sequence[int], level: int, local_index: int) -> str:
    """Substitute placeholders by plain decimal integers (never ``str.format``)."""

    def sub(m: re.Match[str]) -> str:
        n = m.group(1)
        if n == "i":
            return str(local_index)
        if n == "l":
            return str(level)
        return str(coords[_POSITIONS[n]])

    return _PLACEHOLDER.sub(sub, pattern)


def internal_range(offsets: np.ndarray, sizes: np.ndarray, index: int) -> tuple[int, int] | None:
    """The byte range ``(start, stop)`` of global tile ``index`` in the file (None: sparse)."""
    off = int(offsets[index])
    if off < 0:
        return None
    return off, off + int(sizes[index])


def external_key(level: Level, coords: tuple[int, ...], local: int, *, pattern: str | None,
                 files: Mapping[tuple[int, tuple[int, ...]], str | None], prefix: str,
                 missing: str = "error", source: Any = None) -> tuple[str, str] | None:
    """The key of an external tile's file and the field that names it: its ``tile:files``
    entry, else ``tile:pattern`` expanded. ``None`` when the header records the tile as
    sparse, or (with ``missing="fill"``) names no file for it; else no name is a
    ``DataError``."""
    entry = (level.index, tuple(coords))
    if entry in files:
        name = files[entry]
        if name is None:
            return None
        return name, f"{prefix}:files"
    if pattern is not None:
        return expand_pattern(pattern, coords, level.index, local), f"{prefix}:pattern"
    if missing == "fill":
        return None
    raise DataError(
        f"{where(source, prefix + ':files')}no file is listed for level "
        f"{level.index} tile {list(coords)}"
    )


def derive_sizes(offsets: np.ndarray, sizes: np.ndarray | None, *, data_start: int,
                 file_size: int, fixed_size: int | None, self_delimiting: bool, fmt: str,
                 prefix: str, source: Any = None) -> np.ndarray:
    """The stored size of every internal tile (-1 where sparse), checked against the file:
    ``size_table`` when present, else derived (docs/format.md#size-table); offsets into the header
    are a ``HeaderError``, tiles running past the end of the file a ``DataError``."""
    pre = where(source)
    present = offsets != -1
    if present.any() and offsets[present].min() < data_start:
        bad = int(np.flatnonzero(present & (offsets < data_start))[0])
        raise HeaderError(
            f"{pre}{prefix}:offset_table[{bad}]: offset {int(offsets[bad])} points into "
            f"the header (data starts at {data_start})"
        )
    if sizes is None:
        if fixed_size is not None:
            sizes = np.where(present, fixed_size, -1).astype(np.int64)
        elif self_delimiting or fmt == "contiguous":
            sizes = sizes_to_next(offsets, present, file_size)
        else:
            raise HeaderError(
                f"{pre}{prefix}:size_table: required for chunked storage whose codec chain "
                "does not end in a self-delimiting compressor"
            )
    past = past_the_end(offsets, sizes, file_size)
    if past.any():
        bad = int(np.flatnonzero(past)[0])
        start, end = int(offsets[bad]), int(offsets[bad]) + int(sizes[bad])
        raise DataError(
            f"{pre}{prefix}:offset_table[{bad}]: tile bytes {start}..{end} run past the "
            f"end of the file ({file_size} bytes)"
        )
    return sizes


def sizes_to_next(offsets: np.ndarray, present: np.ndarray, end: int) -> np.ndarray:
    """Each ``present`` tile's readable range when the file has no ``size_table``: up to the
    next larger distinct offset, or ``end`` (docs/format.md#size-table); -1 elsewhere."""
    uniq = np.unique(np.append(offsets[present], end))
    nxt = uniq[np.minimum(np.searchsorted(uniq, offsets, side="right"), len(uniq) - 1)]
    return np.where(present, nxt - offsets, -1).astype(np.int64)


def pattern_dir(pattern: str) -> str:
    """The directory part of ``pattern`` before its first placeholder (where its files are
    listed)."""
    return _PLACEHOLDER.split(pattern)[0].rpartition("/")[0]


def past_the_end(offsets: np.ndarray, sizes: np.ndarray, file_size: int) -> np.ndarray:
    """Mask of the stored tiles (offset ≥ 0) whose bytes run past ``file_size``.

    Compared as ``size > file_size - offset``: both sides stay inside int64 for any offset
    and size the table checks admit (0..2**63-1), where ``offset + size`` would wrap to a
    negative end and pass (docs/security.md#path-policy).
    """
    present = offsets >= 0
    room = np.int64(file_size) - np.where(present, offsets, 0)
    return present & (sizes > room)


def core_itemsize(core: Any) -> int:
    """Bytes per stored element of a header's core fields."""
    from ..dtypes import storage_dtype

    return storage_dtype(core.type_name, core.endian or "little", core.block_size).itemsize


def raw_tile_sizes(tiling: Any, itemsize: int, offsets: np.ndarray) -> np.ndarray:
    """Stored bytes of every raw tile from the geometry (-1 where ``offsets`` is -1)."""
    sizes = raw_stored_sizes(tiling.levels, itemsize)
    return np.where(offsets == -1, -1, sizes).astype(np.int64)


def derived_offsets(tiling: Any, itemsize: int, data_start: int | None, name: Any, *,
                    raw: bool) -> np.ndarray:
    """Contiguous raw files without an offset_table: tiles back to back after the header.
    ``raw``: the caller's answer to whether the codec chain is the ``bytes`` codec alone
    (``jnrrd.codecs.is_raw_chain``; tiling never imports codecs)."""
    import warnings

    from ..errors import JnrrdWarning

    if tiling.format != "contiguous" or not raw:
        raise HeaderError(f"{where(name, tiling.prefix + ':offset_table')}required for "
                          "internal storage (only contiguous raw tiles can do without it)")
    warnings.warn(f"{where(name)}{tiling.prefix}:offset_table is missing: tiles assumed back "
                  "to back after the header", JnrrdWarning, stacklevel=4)
    sizes = raw_tile_sizes(tiling, itemsize, np.zeros(tiling.nstored, np.int64))
    start = data_start or 0
    return (start + np.concatenate([[0], np.cumsum(sizes)[:-1]])).astype(np.int64) \
        if sizes.size else np.zeros(0, np.int64)


def pattern_regex(pattern: str) -> re.Pattern[str] | None:
    """A regex matching exactly the names ``pattern`` expands to (placeholders as decimal
    integers without leading zeros), or None for a pattern that is not a plain relative path
    (its names would not equal the listed relative paths)."""
    if (not pattern or "\\" in pattern or pattern.startswith(("/", "..")) or is_url(pattern)
            or posixpath.normpath(pattern) != pattern):
        return None
    parts = _PLACEHOLDER.split(pattern)
    out, seen = [], set()
    for k, part in enumerate(parts):
        if k % 2 == 0:
            out.append(re.escape(part))
        elif part in seen:
            out.append(f"(?P={part})")
        else:
            seen.add(part)
            out.append(f"(?P<{part}>0|[1-9][0-9]{{0,18}})")
    return re.compile("".join(out))


def match_tile(regex: re.Pattern[str], rel: str, pattern: str, grid: Any, level: int
                ) -> tuple[int, ...] | None:
    """The coordinates of the tile of ``level`` whose file is ``rel``, or None."""
    m = regex.fullmatch(rel)
    if m is None:
        return None
    found = m.groupdict()
    if "l" in found and int(found["l"]) != level:
        return None
    if "i" in found:
        local = int(found["i"])
        if local >= grid.ntiles:
            return None
        coords = grid.coords(local)
    else:
        coords = tuple(int(found.get("xyzct"[k], 0)) if k < 5 else 0
                       for k in range(len(grid.grid)))
        if any(c >= g for c, g in zip(coords, grid.grid, strict=True)):
            return None
    if expand_pattern(pattern, coords, level, grid.index(coords)) != rel:
        return None
    return coords
