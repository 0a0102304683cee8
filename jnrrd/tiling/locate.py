"""Where tile bytes live: internal tables, external patterns and file lists (digest 2.7, 2.8).

Sources hand out the stored bytes of one tile (or ``None`` for a sparse tile) and never
decode anything. Internal files are memory-mapped when they are real files, so tile reads
are zero-copy and safe from many threads; external tiles are resolved under the path policy
before anything is opened.
"""

from __future__ import annotations

import io
import mmap
import os
import posixpath
import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import DataError, HeaderError, UnsupportedError, where
from ..policy import Policy
from ..storage.fileobj import read_at_most, size_of
from ..storage.local import is_url, open_resolved, resolve_path
from .levels import Level

__all__ = ["ExternalSource", "InternalSource", "check_pattern", "core_itemsize", "derived_offsets",
           "expand_pattern", "is_raw_chain", "past_the_end", "raw_tile_sizes"]

_PLACEHOLDER = re.compile(r"\{([a-z]+)\}")
#: positional placeholders: coordinate along tile:dimensions[0..4] (digest 2.8)
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


class InternalSource:
    """Tiles inside the ``.jnrrd`` file, located by ``offset_table``/``size_table``."""

    def __init__(
        self,
        file: Any,
        *,
        offsets: np.ndarray,
        sizes: np.ndarray | None,
        data_start: int,
        fixed_size: int | None,
        self_delimiting: bool,
        fmt: str,
        prefix: str,
        source: Any = None,
        map_reads: bool = True,
        owned: bool = False,
    ) -> None:
        self._source = source
        self._lock = threading.Lock()
        self._owned: Any = None
        self._mm: mmap.mmap | None = None
        self._buf: memoryview | None = None
        self._fd: int | None = None
        # Raw tiles are served zero-copy from a memory map; compressed tiles are read with
        # pread, so the file's pages do not pile up in the resident set of a full read.
        self._map_reads = map_reads
        self._file = file
        if isinstance(file, (str, os.PathLike)):
            self._owned = open(file, "rb")
            self._file = self._owned
        elif owned:
            self._owned = file  # handed over by the opener: closed by close()
        try:
            self.file_size = size_of(self._file)
            self._map()
            self.offsets = offsets
            self.sizes = self._derive_sizes(offsets, sizes, data_start, fixed_size,
                                            self_delimiting, fmt, prefix)
        except BaseException:
            self.close()  # a table that fails its checks must not leak the opened file
            raise

    def _map(self) -> None:
        f = self._file
        if isinstance(f, io.BytesIO):
            self._buf = f.getbuffer()
            return
        try:
            fileno = f.fileno()
        except (AttributeError, OSError, io.UnsupportedOperation):
            return
        if not self._map_reads and hasattr(os, "pread"):
            self._fd = fileno
            return
        if self.file_size:
            try:
                self._mm = mmap.mmap(fileno, 0, access=mmap.ACCESS_READ)
                self._buf = memoryview(self._mm)
            except (OSError, ValueError):
                self._mm = None

    def _derive_sizes(self, offsets: np.ndarray, sizes: np.ndarray | None, data_start: int,
                      fixed_size: int | None, self_delimiting: bool, fmt: str, prefix: str
                      ) -> np.ndarray:
        pre = where(self._source)
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
                # The readable range runs to the next larger distinct offset or EOF (2.7).
                uniq = np.unique(np.append(offsets[present], self.file_size))
                nxt = uniq[np.minimum(np.searchsorted(uniq, offsets, side="right"),
                                      len(uniq) - 1)]
                sizes = np.where(present, nxt - offsets, -1).astype(np.int64)
            else:
                raise HeaderError(
                    f"{pre}{prefix}:size_table: required for chunked storage whose codec chain "
                    "does not end in a self-delimiting compressor"
                )
        past = past_the_end(offsets, sizes, self.file_size)
        if past.any():
            bad = int(np.flatnonzero(past)[0])
            start, end = int(offsets[bad]), int(offsets[bad]) + int(sizes[bad])
            raise DataError(
                f"{pre}{prefix}:offset_table[{bad}]: tile bytes {start}..{end} run past the "
                f"end of the file ({self.file_size} bytes)"
            )
        return sizes

    def read(self, index: int) -> memoryview | bytes | None:
        """The stored bytes of global tile ``index`` (``None`` when sparse)."""
        off = int(self.offsets[index])
        if off < 0:
            return None
        size = int(self.sizes[index])
        if self._buf is not None:
            return self._buf[off : off + size]
        if self._fd is not None:
            data = os.pread(self._fd, size, off)  # thread-safe: no shared file position
            if len(data) != size:
                raise DataError(f"{where(self._source)}tile {index}: file ended early")
            return data
        with self._lock:
            self._file.seek(off)
            data = self._file.read(size)
        if len(data) != size:
            raise DataError(f"{where(self._source)}tile {index}: file ended early")
        return data

    def close(self) -> None:
        self._buf = None
        self._fd = None
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:  # a caller still holds a view; the map closes when it goes
                pass
            self._mm = None
        if self._owned is not None:
            self._owned.close()
            self._owned = None


def past_the_end(offsets: np.ndarray, sizes: np.ndarray, file_size: int) -> np.ndarray:
    """Mask of the stored tiles (offset ≥ 0) whose bytes run past ``file_size``.

    Compared as ``size > file_size - offset``: both sides stay inside int64 for any offset
    and size the table checks admit (0..2**63-1), where ``offset + size`` would wrap to a
    negative end and pass (digest §5, "Integer overflow").
    """
    present = offsets >= 0
    room = np.int64(file_size) - np.where(present, offsets, 0)
    return present & (sizes > room)


def is_raw_chain(tiling: Any) -> bool:
    """True when the tile chain is the ``bytes`` codec alone (tiles are stored raw)."""
    return len(tiling.codecs) == 1 and tiling.codecs[0].get("name") == "bytes"


def core_itemsize(core: Any) -> int:
    """Bytes per stored element of a header's core fields."""
    from ..dtypes import storage_dtype

    return storage_dtype(core.type_name, core.endian or "little", core.block_size).itemsize


def raw_tile_sizes(tiling: Any, itemsize: int, offsets: np.ndarray) -> np.ndarray:
    """Stored bytes of every raw tile from the geometry (-1 where ``offsets`` is -1)."""
    parts = [lv.grid.stored_voxels() * itemsize for lv in tiling.levels if lv.stored]
    sizes = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    return np.where(offsets == -1, -1, sizes).astype(np.int64)


def derived_offsets(tiling: Any, itemsize: int, data_start: int | None, name: Any
                    ) -> np.ndarray:
    """Contiguous raw files without an offset_table: tiles back to back after the header."""
    import warnings

    from ..errors import JnrrdWarning

    if tiling.format != "contiguous" or not is_raw_chain(tiling):
        raise HeaderError(f"{where(name, tiling.prefix + ':offset_table')}required for "
                          "internal storage (only contiguous raw tiles can do without it)")
    warnings.warn(f"{where(name)}{tiling.prefix}:offset_table is missing: tiles assumed back "
                  "to back after the header", JnrrdWarning, stacklevel=4)
    sizes = raw_tile_sizes(tiling, itemsize, np.zeros(tiling.nstored, np.int64))
    start = data_start or 0
    return (start + np.concatenate([[0], np.cumsum(sizes)[:-1]])).astype(np.int64) \
        if sizes.size else np.zeros(0, np.int64)


class ExternalSource:
    """Tiles in files of their own, named by ``tile:pattern`` and/or ``tile:files``."""

    def __init__(
        self,
        header_dir: str | None,
        *,
        pattern: str | None,
        files: Mapping[tuple[int, tuple[int, ...]], str | None] | None,
        base_dir: str | None,
        policy: Policy,
        prefix: str,
        missing: str = "error",
        source: Any = None,
    ) -> None:
        if header_dir is None:
            raise UnsupportedError(
                f"{where(source)}external tiles need the header's path to find them; "
                "open the file by path, not through a file object"
            )
        self._pattern = pattern
        self._files = files or {}
        self._policy = policy
        self._prefix = prefix
        self._missing = missing
        self._source = source
        self.root = header_dir
        if base_dir is not None:
            if is_url(base_dir):
                raise UnsupportedError(f"{where(source, prefix + ':base_dir')}URL base "
                                       "directories are not supported; use tile:files with "
                                       "an opener")
            self.root = resolve_path(header_dir, base_dir, policy, source=source,
                                     field=prefix + ":base_dir")
        # Relative paths under base_dir stay confined to the header directory or base_dir.
        self._roots = policy if base_dir is None else Policy.from_kwargs(
            policy, allowed_roots=(*policy.allowed_roots, self.root)
        )

    def path(self, level: Level, coords: tuple[int, ...], local: int) -> str | None:
        """The resolved file of a tile; ``None`` when the header records it as sparse."""
        key = (level.index, tuple(coords))
        if key in self._files:
            name = self._files[key]
            field = f"{self._prefix}:files"
            if name is None:
                return None
        elif self._pattern is not None:
            name = expand_pattern(self._pattern, coords, level.index, local)
            field = f"{self._prefix}:pattern"
        else:
            return self._no_entry(level, coords)
        return resolve_path(self.root, name, self._roots, source=self._source, field=field)

    def _no_entry(self, level: Level, coords: tuple[int, ...]) -> str | None:
        if self._missing == "fill":
            return None
        raise DataError(
            f"{where(self._source, self._prefix + ':files')}no file is listed for level "
            f"{level.index} tile {list(coords)}"
        )

    def read(self, level: Level, coords: tuple[int, ...], local: int, limit: int
             ) -> bytes | None:
        """The stored bytes of a tile (``None``: sparse or, with missing='fill', absent).

        At most ``limit`` bytes are read: a longer file is read only as far as needed.
        """
        path = self.path(level, coords, local)
        if path is None:
            return None
        try:
            what = f"{where(self._source)}level {level.index} tile {list(coords)}: file "
            with open_resolved(path, self._policy, what=what) as f:
                if not is_url(path):
                    real = os.path.realpath(path)
                    if real != path:  # swapped for a symlink after resolution
                        raise DataError(f"{where(self._source)}tile file {path!r} changed")
                return read_at_most(f, limit)
        except FileNotFoundError:
            if self._missing == "fill":
                return None
            raise DataError(
                f"{where(self._source)}tile file {path!r} (level {level.index}, tile "
                f"{list(coords)}) is missing; pass missing='fill' to read it as padding"
            ) from None
        except IsADirectoryError:
            raise DataError(f"{where(self._source)}tile path {path!r} is a directory") from None

    def stored_bytes(self, level: Level) -> int:
        """The sum of the sizes of the level's tile files that exist.

        A level of at most ``max_files`` tiles resolves and stats each tile's name. A larger
        one (a header may declare 10⁷ tiles in a few bytes) counts its ``tile:files`` entries
        and lists the files actually present under the pattern's directory, matching each
        back to its tile: the cost follows the files on disk, not the declared count.
        """
        grid = level.grid
        if grid.ntiles <= self._policy.max_files:
            total = 0
            for c in grid.all_coords():
                total += _size_or_zero(self.path(level, c, grid.index(c)))
            return total
        total = 0
        for (lv, coords), name in self._files.items():
            if lv == level.index and name is not None:
                total += _size_or_zero(self.path(level, coords, grid.index(coords)))
        if self._pattern is not None:
            total += self._scan(level)
        return total

    def _scan(self, level: Level) -> int:
        pattern = self._pattern
        assert pattern is not None
        regex = _pattern_regex(pattern)
        if regex is None:
            raise UnsupportedError(
                f"{where(self._source, self._prefix + ':pattern')}{pattern!r}: the stored "
                f"bytes of {level.grid.ntiles} tiles (over the max_files cap, "
                f"{self._policy.max_files}) are counted by listing the pattern's directory, "
                "which needs a plain relative pattern; pass max_files=... to count them one "
                "by one")
        grid, total = level.grid, 0
        literal = _PLACEHOLDER.split(pattern)[0]
        start = os.path.join(self.root, literal.rpartition("/")[0])
        for top, _, names in os.walk(start):
            for n in names:
                rel = os.path.relpath(os.path.join(top, n), self.root).replace(os.sep, "/")
                coords = _match_tile(regex, rel, pattern, grid, level.index)
                if coords is not None and (level.index, coords) not in self._files:
                    total += _size_or_zero(self.path(level, coords, grid.index(coords)))
        return total

    def close(self) -> None:
        """Nothing is held open between reads."""


def _size_or_zero(path: str | None) -> int:
    if path is None or is_url(path):
        return 0
    try:
        return os.path.getsize(path) if os.path.isfile(path) else 0
    except OSError:
        return 0


def _pattern_regex(pattern: str) -> re.Pattern[str] | None:
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


def _match_tile(regex: re.Pattern[str], rel: str, pattern: str, grid: Any, level: int
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
