"""Cross-field checks of the core header (docs/format.md#core-fields, #attached-and-detached-data)
that a schema cannot say.

Every check looks at raw header values and skips what the schema already rejects (a value
of the wrong type), so each mistake is reported once. Data presence (detached files, the
length of an attached raw data section) is checked when the header came from a file.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

from ..errors import JnrrdError
from ..header.fields import CoreFields
from ..header.geometry_fields import SPACES
from ..policy import Policy
from ..storage import LocalStore
from .report import Report, pointer
from .schema import lenient_view

__all__ = ["PER_AXIS", "check_core", "check_data"]

#: per-axis fields: one entry per axis (docs/format.md#core-fields)
PER_AXIS = ("space_directions", "spacings", "thicknesses", "axis_mins", "axis_maxs", "centers",
            "kinds", "labels", "units")


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None


def dimension_of(header: Mapping[str, Any]) -> int | None:
    """``dimension`` when it is a usable integer, else the length of ``sizes``, else None."""
    d = _int(header.get("dimension"))
    if d is not None and 1 <= d <= 16:
        return d
    sizes = header.get("sizes")
    return len(sizes) if isinstance(sizes, list) and sizes else None


def check_core(header: Mapping[str, Any], report: Report) -> None:
    """Lengths against ``dimension`` and the space dimension; field combinations."""
    view = lenient_view(header)
    dim = _int(view.get("dimension"))
    sizes = view.get("sizes")
    if dim is not None and 1 <= dim <= 16 and isinstance(sizes, list) and len(sizes) != dim:
        report.error("sizes", f"expected {dim} entries (one per axis: dimension is {dim}), "
                     f"found {len(sizes)}", len(sizes), dim)
    ndim = dimension_of(view)
    if ndim is not None:
        for key in PER_AXIS:
            v = view.get(key)
            if isinstance(v, list) and len(v) != ndim:
                report.error(key, f"expected {ndim} entries (one per axis), found {len(v)}",
                             len(v), ndim)
    _check_space(view, report)
    if view.get("type") == "block" and view.get("encoding") in ("ascii", "txt", "text"):
        report.error("encoding", "type 'block' needs a binary encoding (NRRD §5)",
                     header.get("encoding"), "raw, hex or a compressed encoding")
    skip = _int(view.get("byte_skip"))
    enc = view.get("encoding", "raw")
    if skip == -1 and isinstance(enc, str) and enc != "raw":
        report.error("byte_skip", "-1 (data at the end of the file) is valid only with "
                     "encoding 'raw' (docs/format.md#line-and-byte-skips)", -1, "an integer >= 0")


def _check_space(view: Mapping[str, Any], report: Report) -> None:
    space = view.get("space")
    sd: int | None = SPACES.get(space) if isinstance(space, str) else None
    if sd is None and isinstance(space, str) and space.upper() in ("RAS", "LAS", "LPS"):
        sd = 3
    elif sd is None and isinstance(space, str) and space.upper() in ("RAST", "LAST", "LPST"):
        sd = 4
    given = _int(view.get("space_dimension"))
    if given is not None and given >= 1:
        if sd is not None and given != sd:
            report.error("space_dimension", f"space {space!r} is {sd}-dimensional, "
                         f"space_dimension says {given}", given, sd)
        elif sd is None:
            sd = given
    origin = view.get("space_origin")
    directions = view.get("space_directions")
    if sd is None:
        # The reader infers sd from the origin or the first direction (with a warning).
        if isinstance(origin, list) and origin:
            sd = len(origin)
        elif isinstance(directions, list):
            sd = next((len(d) for d in directions if isinstance(d, list) and d), None)
    if isinstance(origin, list) and sd is not None and len(origin) != sd:
        report.error("space_origin", f"expected {sd} entries (the space dimension), found "
                     f"{len(origin)}", len(origin), sd)
    if isinstance(directions, list) and sd is not None:
        for i, d in enumerate(directions):
            if isinstance(d, list) and d and len(d) != sd:
                report.error(pointer("space_directions", i), f"axis {i}: expected a vector of "
                             f"{sd} entries (the space dimension), found {len(d)}", len(d), sd)
    for key in ("measurement_frame", "space_units"):
        v = view.get(key)
        if not isinstance(v, list):
            continue
        if sd is None:
            report.error(key, "needs 'space' or 'space_dimension' to give its length", None,
                         "space or space_dimension")
            continue
        if len(v) != sd:
            report.error(key, f"expected {sd} entries (the space dimension), found {len(v)}",
                         len(v), sd)
        if key == "measurement_frame":
            for i, col in enumerate(v):
                if isinstance(col, list) and len(col) != sd:
                    report.error(pointer(key, i), f"column {i}: expected {sd} entries, found "
                                 f"{len(col)}", len(col), sd)


def check_data(core: CoreFields, store: Any, data_start: int | None,
               file_size: int | None, policy: Policy, report: Report) -> None:
    """Detached files exist and are allowed; raw data is long enough
    (docs/format.md#attached-and-detached-data, docs/security.md#caps).

    ``store`` holds the header's directory: a local or remote store (files next to a URL
    are asked for their size, many at once), ``None`` when the header came from a stream."""
    from ..engine.untiled import data_paths

    field = ("data_file" if core.data_file is not None else
             "data_files" if core.data_files is not None else "data_file_pattern")
    need = core.count * core.itemsize
    if core.detached:
        if store is None:
            report.note(field, "detached data files not checked: the header was not read "
                        "from a path")
            return
        remote = bool(getattr(store, "remote", False))
        try:
            paths = data_paths(core, store if remote else LocalStore(store.root, policy),
                               policy)
        except JnrrdError as exc:
            report.error(field, str(exc), None, "paths allowed by the path policy")
            return
        assert paths is not None
        per_file = need // max(1, len(paths))
        # local files: stat'ed one by one, the size only when it is compared
        sizes: list[int | None] = (_remote_sizes(store, paths) if remote
                                   else [-1 if os.path.isfile(p) else None for p in paths])
        for j, (path, size) in enumerate(zip(paths, sizes, strict=True)):
            where = field if len(paths) == 1 else pointer(field, j)
            if size is None:
                report.error(where, f"data file {path!r} is missing", path, "an existing file")
            elif core.encoding == "raw" and core.line_skip == 0 and core.byte_skip >= 0:
                have = (os.path.getsize(path) if size < 0 else size) - core.byte_skip
                if have < per_file:
                    report.error(where, f"data file {path!r} holds {max(0, have)} data bytes, "
                                 f"the header needs {per_file}", max(0, have), per_file)
        return
    if core.encoding != "raw" or core.line_skip or core.byte_skip < 0 or file_size is None:
        return
    if data_start is None:
        if core.count:
            report.error("", "the header ends at the end of the file: there is no data "
                         "section", 0, need)
        return
    have = file_size - data_start - core.byte_skip
    if have < need:
        report.error("sizes", f"the data section holds {max(0, have)} bytes, the header "
                     f"needs {need} ({math.prod(core.sizes)} elements of {core.itemsize} "
                     "bytes)", max(0, have), need)


def _remote_sizes(store: Any, urls: list[str]) -> list[int | None]:
    """The size of each object (``None``: absent), asked with several requests in flight."""
    from .._threads import ordered_map

    def size(url: str) -> int | None:
        path = store.strip(url) if "://" in url and not store.fetcher.http else url
        try:
            info = store.fetcher.info(path, url=url)
        except FileNotFoundError:
            return None
        if info.get("type") == "directory" or info.get("size") is None:
            return None
        return int(info["size"])

    workers = max(1, min(len(urls), store.policy.io.request_concurrency, 16))
    return list(ordered_map(size, urls, workers=workers, name="jnrrd-validate"))
