"""An xarray backend: ``xr.open_dataset(path, engine="jnrrd")`` and ``xr.open_dataarray``.

The dataset holds one variable, ``data``: one pyramid level (``level=``) of the volume,
lazily indexed (xarray's ``LazilyIndexedArray`` over a :class:`JnrrdArray`), so a selection
reads only the tiles it touches. Dimensions are named as in the OME-NGFF metadata: ``labels``,
else ``x``, ``y``, ``z`` for the space axes (``t`` time, ``c`` a channel, ``axis<d>`` otherwise),
in the order of ``index_order`` (``"F"``: header order). Coordinates are given for axes whose
world position along one axis is known (see ``docs/dask.md``); attributes are the header's
fields (without the per-tile tables) plus ``jnrrd_level``, ``jnrrd_scale`` and ``affine``,
in netCDF-ready form: values netCDF cannot hold (mappings, nested lists, lists of text,
``None``, booleans) are JSON text, named in the ``jnrrd_json_attrs`` attribute, so
``ds.to_netcdf(...)`` works; :func:`decode_attrs` turns them back into Python values.

The array reopens the file by path through the per-process cache of :mod:`jnrrd.integrations.dask`,
so it pickles (``chunks=`` with ``dask.distributed``); the preferred chunks are the tiles.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import xarray as xr
from xarray.backends import BackendArray, BackendEntrypoint
from xarray.core import indexing

from ..errors import HeaderError, no_such_level, where
from ..storage import is_remote
from .dask import FileRef, InProcess, adopt

__all__ = ["JSON_ATTRS", "JnrrdArray", "JnrrdBackendEntrypoint", "decode_attrs",
           "netcdf_attrs"]

VARIABLE = "data"
# Per-tile tables: long, and meaningless once the data is an array.
_TABLES = ("offset_table", "size_table", "level_offsets", "metadata", "files")
_MAGIC = re.compile(rb"^\s*\{\s*\"jnrrd\"\s*:")
#: suffixes recognised without ``engine=`` (any case)
SUFFIXES = (".jnrrd", ".nrrd", ".nhdr")
#: the attribute naming (as a JSON list) the attributes that hold JSON text
JSON_ATTRS = "jnrrd_json_attrs"


class JnrrdArray(BackendArray):
    """One level of a JNRRD volume for xarray: outer indexing (ints, slices, integer arrays
    per axis, through ``LevelView.oindex``), read tile by tile."""

    def __init__(self, ref: FileRef | InProcess, level: int, shape: tuple[int, ...],
                 dtype: np.dtype) -> None:
        self.ref = ref
        self.level = level
        self.shape = shape
        self.dtype = dtype

    def __getitem__(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER, self._raw_indexing_method)

    def _raw_indexing_method(self, key: tuple[Any, ...]) -> np.ndarray:
        # Ints, slices (any step) and 1-D integer arrays, each on its own axis: the Volume
        # reads only the tiles they touch (``isel(x=[5, 1, 3])`` never reads the whole axis).
        with self.ref.borrow() as vol:
            view = vol.levels[self.level]
            if any(isinstance(k, np.ndarray) for k in key):
                return view.oindex[key]
            return np.asarray(view[key])


class JnrrdBackendEntrypoint(BackendEntrypoint):
    """``engine="jnrrd"``: options ``level``, ``index_order``, ``missing``, ``policy``,
    ``storage_options`` (for a URL, passed to fsspec unchanged)."""

    description = "Open JNRRD volumes (one pyramid level, lazily, tile by tile)"
    url = "https://jnrrd.org"
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "level", "index_order",
                               "missing", "policy", "storage_options")

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        """A ``.jnrrd``, ``.nrrd`` or ``.nhdr`` path or URL (any case), or a local file whose
        first line opens with ``{"jnrrd":`` (classic NRRD is recognised by its suffixes only;
        a URL by its suffix only: guessing never sends a request)."""
        if not isinstance(filename_or_obj, (str, os.PathLike)):
            return False
        path = os.fspath(filename_or_obj)
        if isinstance(path, bytes):
            return False
        if path.lower().endswith(SUFFIXES):
            return True
        if is_remote(path):
            return False
        try:
            with open(path, "rb") as f:
                head = f.read(64)
        except OSError:
            return False
        return bool(_MAGIC.match(head))

    def open_dataset(self, filename_or_obj: Any, *,
                     drop_variables: str | Iterable[str] | None = None, level: int = 0,
                     index_order: str = "F", missing: str = "error",
                     policy: Mapping[str, Any] | None = None,
                     storage_options: Mapping[str, Any] | None = None) -> xr.Dataset:
        """The dataset with the one variable ``data`` (level ``level`` of the volume)."""
        from ..api import open as jopen

        options: dict[str, Any] = (
            {"storage_options": dict(storage_options)} if storage_options else {})
        vol = jopen(filename_or_obj, index_order=index_order, missing=missing,
                    **options, **dict(policy or {}))
        try:
            if not 0 <= level < len(vol.levels):
                raise no_such_level(vol.name, level, len(vol.levels))
            lv = vol.levels[level]
            dims = _dims(vol, filename_or_obj)
            coords = _coords(vol, lv, dims, filename_or_obj)
            attrs = _attrs(vol, lv)
            chunks = dict(zip(dims, lv.chunks, strict=True))
            shape, dtype = tuple(lv.shape), np.dtype(lv.dtype)
        except BaseException:
            vol.close()
            raise
        ref = FileRef.of(vol)
        if ref is None:  # a file object: this process only, closed with the dataset
            handle: FileRef | InProcess = InProcess(vol)
            close = vol.close
        else:
            adopt(ref, vol)
            handle, close = ref, None
        data = indexing.LazilyIndexedArray(JnrrdArray(handle, level, shape, dtype))
        drop = {drop_variables} if isinstance(drop_variables, str) else set(drop_variables or ())
        variables = {}
        if VARIABLE not in drop:
            var = xr.Variable(dims, data, attrs=attrs)
            # netCDF-4 chunks may not exceed the array (a tile larger than the volume is
            # padding on disk, not data): the tile, cut to the shape
            var.encoding = {"preferred_chunks": chunks,
                            "chunksizes": tuple(min(c, n) for c, n in
                                                zip(lv.chunks, shape, strict=True)),
                            "dtype": dtype}
            variables[VARIABLE] = var
        ds = xr.Dataset(variables, coords={k: v for k, v in coords.items() if k not in drop},
                        attrs=attrs)
        if close is not None:
            ds.set_close(close)
        return ds


def _dims(vol: Any, source: Any) -> tuple[str, ...]:
    """The axis names of the OME-NGFF metadata (header order): ``labels``, else by type
    (``x``, ``y``, ``z`` for the space axes, ``t``, ``c``), else ``axis<d>``."""
    from .ngff import axis_names

    names = axis_names(vol)
    if len(set(names)) != len(names):  # axis_names makes them unique; guard the invariant
        raise HeaderError(f"{where(source, 'labels')}expected {len(names)} distinct names")
    return tuple(names[::-1] if vol.index_order == "C" else names)


def _coords(vol: Any, lv: Any, dims: tuple[str, ...], source: Any) -> dict[str, xr.Variable]:
    """Coordinates of axes whose world position along one axis is known (header order)."""
    from ..pyramid.quality import level_geometry

    core = vol.core
    ndim = len(core.sizes)
    scale = lv.level.scale
    shape = lv.level.shape
    names = dims[::-1] if vol.index_order == "C" else dims
    out: dict[str, xr.Variable] = {}
    origin, dirs = lv.header_geometry()
    aligned = dirs is not None and _axis_aligned(dirs)
    for d in range(ndim):
        start = step = None
        units = None
        if dirs is not None and dirs[d] is not None:
            if not aligned:
                continue  # oblique: the affine attribute says where voxels are
            c = int(np.flatnonzero(dirs[d])[0])
            start, step = float(origin[c]), float(dirs[d][c])
            units = core.space_units[c] if core.space_units else None
        elif core.spacings is not None and (spacing := core.spacings[d]) is not None:
            # An axis with a spacing but no space direction (e.g. time): origin 0 at level 0.
            cen = None if core.centers is None else [core.centers[d]]
            o, ds = level_geometry((scale[d],), (0.0,), [(float(spacing),)], cen)
            # an origin and a direction given come back (None only for missing inputs)
            assert o is not None and ds[0] is not None
            start, step = o[0], ds[0][0]
            units = core.units[d] if core.units else None
        if start is None:
            continue
        values = start + step * np.arange(shape[d], dtype=np.float64)
        attrs = {"units": units} if units else {}
        out[names[d]] = xr.Variable((names[d],), values, attrs=attrs)
    return out


def _axis_aligned(dirs: list[Any]) -> bool:
    """Every spatial axis along one world axis, no two along the same one."""
    seen = set()
    for v in dirs:
        if v is None:
            continue
        nz = np.flatnonzero(v)
        if len(nz) != 1 or int(nz[0]) in seen:
            return False
        seen.add(int(nz[0]))
    return True


def _attrs(vol: Any, lv: Any) -> dict[str, Any]:
    prefix = vol.tiling.prefix if vol.tiling is not None else None
    drop = {f"{prefix}:{t}" for t in _TABLES} if prefix else set()
    attrs = {k: v for k, v in vol.header.items() if k not in drop}
    attrs["jnrrd_level"] = lv.index
    attrs["jnrrd_scale"] = list(lv.scale)
    attrs["affine"] = lv.affine.tolist()
    return netcdf_attrs(attrs)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(
        v, (bool, np.bool_))


def _netcdf_ready(v: Any) -> bool:
    """A value every netCDF engine stores as an attribute: text, a number, or a non-empty
    flat list of numbers (netCDF has no booleans, nulls, mappings or nested lists)."""
    if isinstance(v, str) or _number(v):
        return True
    return isinstance(v, (list, tuple)) and bool(v) and all(_number(x) for x in v) and (
        all(isinstance(x, (int, np.integer)) for x in v)
        or all(isinstance(x, (float, np.floating)) for x in v))


def _plain_json(v: Any) -> Any:
    """NumPy values as Python ones, NaN and infinities as ``null`` (strict JSON)."""
    if isinstance(v, Mapping):
        return {str(k): _plain_json(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, np.ndarray)):
        return [_plain_json(x) for x in v]
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def netcdf_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """``attrs`` with every value netCDF cannot hold as JSON text (NaN as ``null``); their
    names go, as a JSON list, into the ``jnrrd_json_attrs`` attribute."""
    out: dict[str, Any] = {}
    encoded: list[str] = []
    for k, v in attrs.items():
        if _netcdf_ready(v):
            out[k] = list(v) if isinstance(v, tuple) else v
        else:
            out[k] = json.dumps(_plain_json(v), ensure_ascii=False, allow_nan=False)
            encoded.append(str(k))
    if encoded:
        out[JSON_ATTRS] = json.dumps(encoded, ensure_ascii=False)
    return out


def decode_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes of a dataset opened with ``engine="jnrrd"`` (or read back from the
    netCDF file it was saved to) as Python values: the JSON text of the attributes named in
    ``jnrrd_json_attrs`` parsed, that attribute dropped, arrays as lists."""
    names = attrs.get(JSON_ATTRS)
    listed = set(json.loads(names)) if isinstance(names, str) else set()
    out: dict[str, Any] = {}
    for k, v in attrs.items():
        if k == JSON_ATTRS:
            continue
        if k in listed and isinstance(v, str):
            out[k] = json.loads(v)
        elif isinstance(v, np.ndarray):
            out[k] = v.tolist()
        elif isinstance(v, np.generic):
            out[k] = v.item()
        else:
            out[k] = v
    return out
