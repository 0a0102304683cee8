"""OME-Zarr (OME-NGFF 0.5 on Zarr v3; 0.4 layouts too) read as a JNRRD header, level arrays and
write defaults, for :func:`jnrrd.convert`.

The group's first ``multiscales`` entry decides: its datasets are the levels (level 0 the
first), its axes (reversed: header axis 0 is the last, fastest Zarr axis,
docs/format.md#zarr-axis-order) give ``labels``, ``kinds`` (``space`` → ``space``, ``time`` →
``time``, ``channel`` → ``list``), the level-0 ``scale``/``translation`` give ``space_directions``
(diagonal) and ``space_origin`` of the ``space`` axes with their units as ``space_units``; other
axes keep their scale in ``spacings`` and unit in ``units``. When the group carries the ``jnrrd``
attribute (written by :mod:`jnrrd.integrations.omezarr`) and it matches the level-0 array
(sizes, type), that header is restored instead, tiling fields included.

A JNRRD pyramid is always computed from level 0 by the file's downsampling method, so the
stored levels become JNRRD levels by their **scale factors** (level scale / level-0 scale per
axis) when those are integers and the level shapes are ``floor(N / factor)``; any other level
is left out with a :class:`~jnrrd.JnrrdWarning`. :meth:`OmeZarrSource.compare_levels` then
checks the written levels against the stored ones and warns where they differ (a tool that
downsampled another way).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..dtypes import type_name_for
from ..errors import FormatError, JnrrdWarning, UnsupportedError
from ..policy import Policy
from ..pyramid.methods import METHODS
from .ngff import nrrd_unit
from .omezarr import HEADER_ATTRIBUTE, regions
from .zarr_read import check_levels, open_group

__all__ = ["FOrderArray", "OmeZarrSource"]

_KIND = {"space": "space", "time": "time", "channel": "list"}
_MAX_AXES = 16  # JNRRD's (docs/format.md#core-fields)
#: NGFF ``multiscales[].type`` values (ome-zarr-py, skimage names) → a jnrrd method
_METHOD = {"mean": "average", "local_mean": "average", "average": "average"}
#: fields of the ``jnrrd`` attribute the writer computes or that located the source's bytes
_DROP = {"jnrrd", "dimension", "sizes", "type", "block_size", "data_file", "data_files",
         "data_file_pattern", "line_skip", "byte_skip"}


class FOrderArray:
    """A Zarr array seen in header axis order (its axes reversed, or ``order``: the header
    axis of each array axis, from a jnrrd export's ``jnrrd_axes`` attribute): ``shape``,
    ``dtype``, ``chunks`` and ``__getitem__`` like the array-likes ``jnrrd.write`` takes."""

    def __init__(self, arr: Any, order: list[int] | None = None) -> None:
        self.array = arr
        n = len(arr.shape)
        self.order = list(reversed(range(n))) if order is None else list(order)
        self.inverse = [self.order.index(d) for d in range(n)]
        self.shape = tuple(int(arr.shape[j]) for j in self.inverse)
        self.dtype = np.dtype(arr.dtype)
        self.ndim = len(self.shape)
        self.chunks = tuple(int(arr.chunks[j]) for j in self.inverse)
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize

    def __getitem__(self, key: Any) -> np.ndarray:
        key = key if isinstance(key, tuple) else (key,)
        if any(k is Ellipsis for k in key):
            i = key.index(Ellipsis)
            key = key[:i] + (slice(None),) * (self.ndim - len(key) + 1) + key[i + 1:]
        key = key + (slice(None),) * (self.ndim - len(key))
        ints = [d for d, k in enumerate(key) if isinstance(k, (int, np.integer))]
        full = tuple(slice(k, k + 1 if k != -1 else None) if d in ints else k
                     for d, k in enumerate(key))
        out = np.transpose(np.asarray(self.array[tuple(full[d] for d in self.order)]),
                           self.inverse)
        return out.reshape([n for d, n in enumerate(out.shape) if d not in ints])

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self[...]
        return a if dtype is None else a.astype(dtype, copy=False)


class OmeZarrSource:
    """An opened OME-Zarr group: ``header`` (JNRRD fields, header order), ``levels``
    (:class:`FOrderArray` per kept level), ``scales`` (their integer factors, header order),
    ``defaults`` (``jnrrd.write`` keywords that reproduce the layout) and ``from_attribute``
    (the header came from the ``jnrrd`` attribute)."""

    def __init__(self, source: Any, *, storage_options: Mapping[str, Any] | None = None,
                 policy: Policy | None = None) -> None:
        pol = policy or Policy()
        group = open_group(source, storage_options=storage_options, policy=pol)
        self.name = group.name
        attrs = group.attrs
        ms = _multiscales(attrs, self.name)
        order = _export_order(attrs, ms)
        names, types, units = _axes(ms, self.name, order)
        datasets = ms.get("datasets")
        if not isinstance(datasets, list) or not datasets:
            raise FormatError(f"{self.name}: multiscales lists no datasets")
        check_levels(len(datasets), pol, self.name)  # before any array is opened
        arrays, transforms = [], []
        for ds in datasets:
            if not isinstance(ds, dict):
                raise FormatError(f"{self.name}: multiscales datasets: {ds!r:.60} is not an "
                                  "object")
            arr = group.array(ds.get("path"))
            arr.check_occupancy()
            if len(arr.shape) != len(names):
                raise FormatError(f"{self.name}/{ds['path']}: {len(arr.shape)} axes, the "
                                  f"multiscales axes list {len(names)}")
            arrays.append(arr)
            transforms.append(_transform(ds, ms, len(names), order, self.name))
        self.paths = [str(ds["path"]) for ds in datasets]
        level0 = FOrderArray(arrays[0], order)
        _check_dtype(level0.dtype, self.name)
        attr = _restorable(attrs.get(HEADER_ATTRIBUTE), level0, self.name)
        self.from_attribute = attr is not None
        self.header = attr if attr is not None else _ngff_header(
            names, types, units, transforms[0])
        self.levels, self.scales = _levels(arrays, transforms, self.paths, self.name, order)
        self.defaults = {} if attr is not None else _defaults(arrays[0], self.scales, ms)

    @property
    def data(self) -> FOrderArray:
        """Level 0 in header axis order."""
        return self.levels[0]

    def compare_levels(self, vol: Any) -> None:
        """Warn for each kept level ``k >= 1`` whose stored data differ from level ``k`` of
        the written volume ``vol`` (read one chunk at a time)."""
        for k in range(1, min(len(self.levels), len(vol.levels))):
            stored, built = self.levels[k], vol.levels[k]
            if stored.shape != tuple(built.shape):
                continue
            for region in regions(stored.shape, stored.chunks):
                a, b = stored[region], built[region]
                if not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
                    warnings.warn(
                        f"{self.name}: level {k} ({self.paths[k]}) differs from jnrrd's "
                        f"'{vol.tiling.downsample_method}' downsampling of level 0; the JNRRD "
                        "file holds jnrrd's level (its pyramids are computed from level 0)",
                        JnrrdWarning, stacklevel=3)
                    break


def _multiscales(attrs: Mapping[str, Any], name: Any) -> dict[str, Any]:
    found = attrs.get("ome")
    ome: Mapping[str, Any] = found if isinstance(found, dict) else attrs  # 0.5, else 0.4
    ms = ome.get("multiscales")
    if not isinstance(ms, list) or not ms or not isinstance(ms[0], dict):
        raise FormatError(f"{name}: no OME-NGFF 'multiscales' attribute: not an OME-Zarr "
                          "image group")
    return ms[0]


def _export_order(attrs: Mapping[str, Any], ms: Mapping[str, Any]) -> list[int] | None:
    """The ``jnrrd_axes`` attribute of a jnrrd export (the header axis of each array axis)
    when it is a permutation of the axes; ``None``: the axes are the header's reversed."""
    order, axes = attrs.get("jnrrd_axes"), ms.get("axes")
    if (isinstance(order, list) and isinstance(axes, list) and all(
            isinstance(d, int) and not isinstance(d, bool) for d in order)
            and sorted(order) == list(range(len(axes)))):
        return order
    return None


def _header_order(values: list[Any], order: list[int] | None) -> list[Any]:
    """Values listed per array axis, in header order."""
    if order is None:
        return values[::-1]
    return [values[order.index(d)] for d in range(len(values))]


def _axes(ms: Mapping[str, Any], name: Any, order: list[int] | None = None
          ) -> tuple[list[str], list[Any], list[Any]]:
    """Axis names, types and units in **header** order (the NGFF axes reversed, or put back
    by ``order``)."""
    axes = ms.get("axes")
    if not isinstance(axes, list) or not axes:
        raise FormatError(f"{name}: multiscales: no 'axes' list")
    if len(axes) > _MAX_AXES:
        raise UnsupportedError(f"{name}: multiscales: {len(axes)} axes; a JNRRD file holds 1 "
                               f"to {_MAX_AXES}")
    out: tuple[list[str], list[Any], list[Any]] = ([], [], [])
    for a in _header_order(list(axes), order):
        a = {"name": a} if isinstance(a, str) else a
        if not isinstance(a, dict) or not all(isinstance(a.get(k), (str, type(None)))
                                              for k in ("name", "type", "unit")):
            raise FormatError(f"{name}: multiscales axes: {a!r:.60} is not an axis object "
                              "(name, type and unit strings)")
        n = str(a.get("name") or "")
        t = a.get("type") or ("space" if n in ("x", "y", "z") else None)
        out[0].append(n)
        out[1].append(t)
        out[2].append(a.get("unit"))
    return out


def _transform(ds: Mapping[str, Any], ms: Mapping[str, Any], n: int,
               order: list[int] | None = None, name: Any = None
               ) -> tuple[np.ndarray, np.ndarray]:
    """``(scale, translation)`` of one dataset in header order: its transformations, then
    the multiscales-wide ones (NGFF order). Every scale must be a finite number > 0 and
    every translation finite (``FormatError`` otherwise), and so must their products."""
    scale, trans = np.ones(n), np.zeros(n)
    ts = [*_list(ds.get("coordinateTransformations"), name),
          *_list(ms.get("coordinateTransformations"), name)]
    with np.errstate(all="ignore"):  # an overflow is reported below, as a FormatError
        for t in ts:
            kind = t.get("type")
            if kind == "scale" and "scale" in t:
                s = _numbers(t["scale"], (n,), f"{name}: scale")
                scale, trans = scale * s, trans * s
            elif kind == "translation" and "translation" in t:
                trans = trans + _numbers(t["translation"], (n,), f"{name}: translation")
            elif kind == "affine" and "affine" in t:  # RFC-5: voxel sizes, origin
                m = _numbers(t["affine"], (n, n + 1), f"{name}: affine")
                scale, trans = np.hypot.reduce(m[:, :n], axis=0), m[:, n]
    if not (np.all(np.isfinite(scale)) and np.all(scale > 0) and np.all(np.isfinite(trans))):
        raise FormatError(f"{name}: coordinateTransformations give scale "
                          f"{scale.tolist()} and translation {trans.tolist()}: scales must be "
                          "finite numbers > 0 and translations finite")
    return (np.asarray(_header_order(list(scale), order)),
            np.asarray(_header_order(list(trans), order)))


def _list(value: Any, name: Any) -> list[dict[str, Any]]:
    """A ``coordinateTransformations`` list (absent: empty) of objects."""
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > 64 or not all(
            isinstance(t, dict) for t in value):
        raise FormatError(f"{name}: coordinateTransformations: {value!r:.60} is not a list "
                          "of transformation objects")
    return value


def _numbers(value: Any, shape: tuple[int, ...], field: str) -> np.ndarray:
    """``value`` as a float64 array of ``shape`` (``FormatError`` for anything else)."""
    try:
        out = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        out = None
    if out is None or out.shape != shape:
        raise FormatError(f"{field}: expected {' x '.join(map(str, shape))} numbers, found "
                          f"{value!r:.60}")
    return out


def _check_dtype(dtype: np.dtype, name: Any) -> None:
    try:
        type_name_for(dtype)
    except UnsupportedError:
        raise UnsupportedError(f"{name}: Zarr data type {dtype} has no JNRRD type") from None


def _restorable(attr: Any, level0: FOrderArray, name: Any) -> dict[str, Any] | None:
    """The ``jnrrd`` attribute as write input when it describes this level-0 array."""
    if not isinstance(attr, dict):
        return None
    sizes = attr.get("sizes")
    same = (isinstance(sizes, list) and tuple(sizes) == level0.shape
            and attr.get("type") == type_name_for(level0.dtype))
    if not same:
        warnings.warn(f"{name}: the '{HEADER_ATTRIBUTE}' attribute describes sizes {sizes} "
                      f"type {attr.get('type')}, the level-0 array is {list(level0.shape)} "
                      f"{level0.dtype}: it is ignored, the header comes from the NGFF "
                      "metadata", JnrrdWarning, stacklevel=4)
        return None
    return {k: v for k, v in attr.items() if k not in _DROP}


def _ngff_header(names: list[str], types: list[Any], units: list[Any],
                 transform: tuple[np.ndarray, np.ndarray]) -> dict[str, Any]:
    """JNRRD fields from the NGFF axes and the level-0 transform (header order)."""
    n = len(names)
    scale, trans = transform
    space = [d for d in range(n) if types[d] == "space"]
    h: dict[str, Any] = {
        "kinds": [_KIND.get(t, "domain") for t in types],
        "labels": [nm if nm != f"axis{d}" else "" for d, nm in enumerate(names)],
    }
    if not any(h["labels"]):
        del h["labels"]
    if space:
        dirs: list[Any] = [None] * n
        for j, d in enumerate(space):
            dirs[d] = [float(scale[d]) if i == j else 0.0 for i in range(len(space))]
        h["space_dimension"] = len(space)
        h["space_directions"] = dirs
        h["space_origin"] = [float(trans[d]) for d in space]
        if any(units[d] for d in space):
            h["space_units"] = [nrrd_unit(units[d]) or "" for d in space]
    others = [d for d in range(n) if d not in space]
    if any(scale[d] != 1 for d in others):
        h["spacings"] = [float(scale[d]) if d in others else None for d in range(n)]
    if any(units[d] for d in others):
        h["units"] = [nrrd_unit(units[d]) or "" if d in others else "" for d in range(n)]
    return h


def _levels(arrays: list[Any], transforms: list[Any], paths: list[str], name: Any,
            order: list[int] | None = None) -> tuple[list[FOrderArray], list[tuple[int, ...]]]:
    """The levels a JNRRD pyramid can hold: integer scale factors, floor shapes."""
    levels = [FOrderArray(arrays[0], order)]
    scales = [(1,) * levels[0].ndim]
    s0 = transforms[0][0]
    for arr, (s, _), path in zip(arrays[1:], transforms[1:], paths[1:], strict=True):
        lv = FOrderArray(arr, order)
        f = s / s0
        ints = tuple(int(round(x)) if 0 < x < 2**53 else 0 for x in f)
        why = None
        if not np.allclose(f, ints, rtol=1e-6) or min(ints) < 1:
            why = f"scale factors {[float(x) for x in f]} are not integers >= 1"
        elif lv.shape != tuple(max(1, n // k) for n, k in zip(levels[0].shape, ints,
                                                              strict=True)):
            why = (f"shape {list(lv.shape)} is not floor(level-0 shape / {list(ints)})")
        elif lv.dtype != levels[0].dtype:
            why = f"data type {lv.dtype} differs from level 0's {levels[0].dtype}"
        elif ints in scales:
            why = f"scale {list(ints)} repeats an earlier level"
        if why is not None:
            warnings.warn(f"{name}: level {path}: {why} (header axis order): a JNRRD pyramid "
                          "cannot hold it; it is left out", JnrrdWarning, stacklevel=4)
            continue
        levels.append(lv)
        scales.append(ints)
    return levels, scales


def _defaults(arr: Any, scales: list[tuple[int, ...]], ms: Mapping[str, Any]
              ) -> dict[str, Any]:
    """``jnrrd.write`` keywords reproducing the OME-Zarr layout: tiles = chunks (the inner
    chunks of a sharded array), its levels, zstd or gzip as stored (else zstd), and sparse
    tiles: a tile holding only the fill value is recorded, not stored, as Zarr leaves such
    chunks out (so converting a store costs what it holds, not the shape it declares)."""
    out: dict[str, Any] = {"tile": tuple(int(c) for c in arr.chunks)[::-1], "sparse": True}
    out["compression"] = "gzip" if arr.compression == "gzip" else "zstd"
    if len(scales) > 1:
        out["levels"] = [list(s) for s in scales]
        method = str(ms.get("type") or "average").lower()
        method = _METHOD.get(method, method)
        out["downsample"] = method if method in METHODS else "average"
    fill = arr.fill_value
    if fill is not None and np.dtype(arr.dtype).kind in "iufc":
        value = fill.item() if hasattr(fill, "item") else fill
        if value != 0 or value != value:
            out["padding_value"] = None if value != value else value
    return out
