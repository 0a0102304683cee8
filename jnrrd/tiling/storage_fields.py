"""The tile storage fields (docs/format.md#tiling, #tile-codecs, #internal-storage,
#external-storage): ``offset_table``/``size_table`` of internal storage, and
``pattern``/``files``/``base_dir`` of external storage, checked against the stored tile count and
the level grids."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import HeaderError, UnsupportedError
from ..policy import Policy
from .levels import Level
from .locate import check_pattern
from .values import int_list, is_int

__all__ = ["external_fields", "internal_tables"]


def internal_tables(header: Mapping[str, Any], p: str, pre: str, nstored: int, fmt: str
            ) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``offset_table`` and ``size_table`` as int64 arrays (-1 for null), checked."""

    def table(name: str, minimum: int) -> np.ndarray | None:
        v = header.get(p + name)
        if v is None:
            return None
        if not isinstance(v, list):
            raise HeaderError(f"{pre}{p}{name}: expected a list, found {type(v).__name__}")
        if len(v) != nstored:
            raise HeaderError(
                f"{pre}{p}{name}: expected {nstored} entries (one per stored tile), "
                f"found {len(v)}"
            )
        fast = _homogeneous(v)
        if fast is not None and fast.ndim == 1 and fast.dtype.kind in "iu" and (
            fast.dtype.kind == "i" or not fast.size or fast.max() < 2**63
        ):
            # The common case, without a per-entry Python pass (10⁶-tile headers): every
            # entry is an integer (JSON true/false would read as 1/0 here and then fail the
            # range checks below or against the file; validate() names them).
            arr = fast.astype(np.int64, copy=False)
            low = arr < minimum
        elif set(map(type, v)) <= {int, type(None)}:
            ints = np.array([minimum if x is None else x for x in v], dtype=np.int64)
            low = ints < minimum
            # -1 marks a null (sparse) entry internally: only after every literal was checked
            arr = np.where(np.array([x is None for x in v]), -1, ints)
        else:
            bad = next(x for x in v if type(x) not in (int, type(None)))
            raise HeaderError(f"{pre}{p}{name}: entries must be integers or null, found {bad!r}")
        if low.any():
            i = int(np.flatnonzero(low)[0])
            raise HeaderError(f"{pre}{p}{name}[{i}]: expected an integer ≥ {minimum} or null, "
                              f"found {v[i]!r}")
        return arr

    try:
        offsets = table("offset_table", 0)
        sizes = table("size_table", 1)
    except OverflowError:
        raise HeaderError(f"{pre}{p}offset_table: an entry does not fit 64 bits") from None
    if offsets is None and fmt == "chunked" and nstored:
        raise HeaderError(f"{pre}{p}offset_table: required for chunked internal storage")
    if offsets is not None and sizes is not None and ((offsets == -1) != (sizes == -1)).any():
        raise HeaderError(f"{pre}{p}size_table: null entries must match {p}offset_table's")
    return offsets, sizes


def _homogeneous(v: list[Any]) -> np.ndarray | None:
    """``np.array(v)`` when the entries form one rectangular array, else ``None``.

    NumPy raises ``ValueError`` on ragged nesting (``[[1, 2], [3]]``); such a table is left to
    the per-entry check, which names the first entry that is not an integer or null.
    """
    if not v:
        return np.zeros(0, np.int64)
    try:
        return np.array(v)
    except (ValueError, TypeError, OverflowError):
        return None


def external_fields(header: Mapping[str, Any], p: str, pre: str, axes: tuple[int, ...],
              levels: tuple[Level, ...], policy: Policy
              ) -> tuple[str | None, dict[tuple[int, tuple[int, ...]], str | None] | None,
                         str | None]:
    """``pattern``, ``files`` (by (level, tile index)) and ``base_dir``, checked."""
    pattern = header.get(p + "pattern")
    files_v = header.get(p + "files")
    base_dir = header.get(p + "base_dir")
    if base_dir is not None and not isinstance(base_dir, str):
        raise HeaderError(f"{pre}{p}base_dir: expected a string, found {base_dir!r}")
    if pattern is None and files_v is None:
        raise HeaderError(f"{pre}{p}pattern: external storage needs {p}pattern or {p}files")
    files: dict[tuple[int, tuple[int, ...]], str | None] | None = None
    if files_v is not None:
        if not isinstance(files_v, list):
            raise HeaderError(f"{pre}{p}files: expected a list of objects")
        if len(files_v) > policy.max_files:
            raise UnsupportedError(
                f"{pre}{p}files: {len(files_v)} entries exceed the max_files cap "
                f"({policy.max_files})"
            )
        files = {}
        for j, e in enumerate(files_v):
            key = f"{p}files[{j}]"
            if not isinstance(e, dict) or "indices" not in e or "file" not in e:
                raise HeaderError(f"{pre}{key}: expected an object with 'indices' and 'file'")
            idx = int_list(e["indices"], key + ".indices", pre, length=len(axes))
            lv = e.get("level", 0)
            if not is_int(lv) or not 0 <= lv < len(levels):
                raise HeaderError(f"{pre}{key}.level: expected a level in 0..{len(levels) - 1}")
            lv = int(lv)
            if any(t >= g for t, g in zip(idx, levels[lv].grid.grid, strict=True)):
                raise HeaderError(f"{pre}{key}.indices: {list(idx)} is outside the level-{lv} "
                                  f"tile grid {list(levels[lv].grid.grid)}")
            f = e["file"]
            if f is not None and not isinstance(f, str):
                raise HeaderError(f"{pre}{key}.file: expected a string or null, found {f!r}")
            if (lv, idx) in files:
                raise HeaderError(f"{pre}{key}: duplicate entry for level {lv} tile {list(idx)}")
            files[(lv, idx)] = f
    if pattern is not None:
        if not isinstance(pattern, str):
            raise HeaderError(f"{pre}{p}pattern: expected a string, found {pattern!r}")
        check_pattern(pattern, axes, levels, files, field=p + "pattern", prefix=pre)
    # Without a pattern, a stored tile with no files entry is a DataError when it is read
    # (docs/format.md#tile-files), or reads as padding with missing="fill".
    return pattern, files, base_dir
