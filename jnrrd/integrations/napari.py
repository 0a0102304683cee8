"""A napari reader: each ``*.jnrrd``, ``*.nrrd`` or ``*.nhdr`` file opens as one layer.

The package ships the npe2 manifest ``jnrrd/napari.yaml`` (plugin ``jnrrd``, entry point group
``napari.manifest``). napari calls :func:`get_reader`; the reader it returns gives LayerData
tuples ``(data, kwargs, layer_type)``, which needs no napari import (nothing here imports it).

- **data**: the levels of ``jnrrd.open(path, index_order="C")`` (napari's axis order, slowest
  axis first) as :class:`LevelArray` objects, lazy: napari slices them and only the touched
  tiles are read. A pyramid is a ``multiscale`` list, level 0 first (virtual levels included).
- **geometry** of level 0 (napari derives the coarser levels from their shapes): ``scale`` and
  ``translate`` when the index→world matrix is diagonal, else ``affine``. World axes are the
  header's space coordinates reversed, to match the C axis order; non-spatial axes take their
  ``spacings`` (else 1). ``units`` when every axis has a known length or time unit,
  ``axis_labels`` when ``labels`` names every axis.
- **rgb**: an axis of kind ``RGB-color`` (3) or ``RGBA-color`` (4) is moved last, ``rgb=True``.
- **channels**: the first other non-domain axis (``vector``, ``list``, ``3-vector``, ...; kinds
  as in docs/format.md#domain-axes) with 2 to :data:`MAX_CHANNELS` entries becomes ``channel_axis``:
  napari splits it into one layer per channel, lazily. A longer one stays a slider axis.
- **labels**: a label map (:func:`jnrrd.clinical.labels.is_label_map`: ``label:map``, 3D
  Slicer segment fields, a ``mode`` pyramid, a ``content`` naming labels or a segmentation)
  or an integer ``*.seg.nrrd`` file opens as a ``labels`` layer (no rgb or channel split).
- **contrast_limits** for images (not uint8): the tile statistics' range, else the range of
  the coarsest stored level (sampled when large), per channel.
- **metadata**: ``header`` (the file's header), ``source``, ``levels`` (shape and scale of each
  level, C order).
"""

from __future__ import annotations

import math
import operator
import os
import re
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeGuard

import numpy as np

from ..api import open as open_volume
from ..clinical.labels import is_label_map, label_flag
from ..engine.volume import LevelView, Volume
from ..errors import ArgumentError, JnrrdWarning, SelectionError, where
from ..tiling.grid import expand_key

__all__ = ["MAX_CHANNELS", "SUFFIXES", "LayerData", "LevelArray", "get_reader", "layer_data",
           "read"]

#: file suffixes the reader takes (any case; a URL's query string is ignored)
SUFFIXES = (".jnrrd", ".nrrd", ".nhdr")
#: the longest non-domain axis split into channel layers
MAX_CHANNELS = 16
LayerData = tuple[Any, dict[str, Any], str]

_RGB_KINDS = {"rgb_color": 3, "rgba_color": 4}  # kinds compared in lower case, "-" as "_"
_DOMAIN_KINDS = frozenset({"domain", "space", "time", "none", "???"})
# spellings met in NRRD headers → unit names napari (pint) knows
_UNITS = {
    "m": "m", "meter": "m", "meters": "m", "metre": "m", "cm": "cm", "mm": "mm",
    "millimeter": "mm", "millimeters": "mm", "millimetre": "mm", "um": "um", "µm": "um",
    "μm": "um", "micron": "um", "microns": "um", "micrometer": "um", "micrometers": "um",
    "nm": "nm", "nanometer": "nm", "nanometers": "nm", "s": "s", "sec": "s", "second": "s",
    "seconds": "s", "ms": "ms", "millisecond": "ms", "milliseconds": "ms", "min": "minute",
    "minute": "minute", "minutes": "minute", "h": "hour", "hour": "hour", "hours": "hour",
}


def get_reader(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
               ) -> Callable[[Any], list[LayerData]] | None:
    """napari's reader hook: :func:`read` when every path is a JNRRD/NRRD file name (or a URL
    ending in one of :data:`SUFFIXES`), else ``None``."""
    paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
    if not paths or not all(_ours(p) for p in paths):
        return None
    return read


def _ours(p: Any) -> bool:
    if not isinstance(p, (str, os.PathLike)):
        return False
    s = os.fspath(p)
    if not isinstance(s, str):
        return False
    if "://" in s:
        return s.split("?", 1)[0].split("#", 1)[0].lower().endswith(SUFFIXES)
    return s.lower().endswith(SUFFIXES) and not os.path.isdir(s)


def read(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[LayerData]:
    """One LayerData tuple per file (paths and URLs go to :func:`jnrrd.open` unchanged)."""
    paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
    out = []
    for p in paths:
        source = os.fspath(p)
        vol = open_volume(source, index_order="C")
        try:
            out.append(layer_data(vol, source=source))
        except BaseException:
            vol.close()
            raise
    return out


def layer_data(vol: Volume, *, source: str | None = None, name: str | None = None
               ) -> LayerData:
    """The napari LayerData tuple of a volume opened with ``index_order="C"`` (see the module
    docstring for what goes where). ``source`` names the file (layer name, labels hint)."""
    if vol.index_order != "C":
        raise ArgumentError(f"{where(vol.name, 'index_order')}layer_data needs a volume "
                            "opened with index_order='C' (napari's axis order)")
    n = vol.ndim
    kinds = _kinds(vol)[::-1]  # caller (C-order) axes
    layer_type = "labels" if _is_labels(vol, source) else "image"
    rgb = chan = None
    if layer_type == "image":
        rgb = next((a for a, k in enumerate(kinds)
                    if k in _RGB_KINDS and vol.shape[a] == _RGB_KINDS[k]), None)
        # the first non-domain axis in header order is the last in C order
        chan = next((a for a in reversed(range(n)) if a != rgb and _nondomain(kinds[a])
                     and 1 < vol.shape[a] <= MAX_CHANNELS), None)
    order = [a for a in range(n) if a != rgb] + ([rgb] if rgb is not None else [])
    split = order.index(chan) if chan is not None else None
    owner = _Owner(vol)
    arrays = [LevelArray(lv, order, split_axis=split, owner=owner) for lv in vol.levels]
    dims = [a for a in order if a not in (rgb, chan)]  # the layer's axes (caller axes)
    kwargs: dict[str, Any] = {
        "name": name or _name(source),
        "metadata": {"header": vol.header, "source": source,
                     "levels": [{"shape": lv.shape, "scale": lv.scale} for lv in vol.levels]},
        **_geometry(vol, dims),
    }
    if len(arrays) > 1:
        kwargs["multiscale"] = True
    if layer_type == "image":
        kwargs["rgb"] = rgb is not None  # never let napari guess from a last axis of 3 or 4
        limits = _contrast_limits(vol, arrays, split)
        if limits is not None:
            kwargs["contrast_limits"] = limits
    if split is not None:
        kwargs["channel_axis"] = split
    return (arrays if len(arrays) > 1 else arrays[0], kwargs, layer_type)


def _contrast_limits(vol: Volume, arrays: list[LevelArray], split: int | None
                     ) -> tuple[float, float] | list[tuple[float, float]] | None:
    """The data range (per channel with a channel axis): from the tile statistics when every
    level-0 tile has them, else from the coarsest stored level (a sample of at most
    :data:`_SAMPLE` voxels). napari computes it itself only for NumPy data; for lazy arrays it
    takes the first slice it draws, often an empty edge plane. ``None`` for uint8 (napari
    uses 0-255) and for types without an order."""
    dtype = np.dtype(vol.dtype)
    if dtype.kind not in "iuf" or dtype == np.uint8:
        return None
    if split is None and (stats := _tile_stats(vol)) is not None:
        return stats
    k = max(i for i, lv in enumerate(vol.levels) if lv.stored or i == 0)
    sample = _sample(arrays[k], split)
    if split is None:
        return _range(sample)
    return [_range(np.take(sample, c, axis=split)) for c in range(sample.shape[split])]


_SAMPLE = 10_000_000



def _finite_number(v: object) -> TypeGuard[float]:
    """``v`` is a finite int or float (not a bool): a usable tile statistic."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

def _tile_stats(vol: Volume) -> tuple[float, float] | None:
    tiling = vol.tiling
    if tiling is None or not tiling.metadata:
        return None
    entries = tiling.metadata[: vol.levels[0].level.grid.ntiles]
    lo, hi = math.inf, -math.inf
    for e in entries:
        if not isinstance(e, dict):
            return None
        a, b = e.get("min"), e.get("max")
        if not (_finite_number(a) and _finite_number(b)):
            return None
        lo, hi = min(lo, a), max(hi, b)
    if len(entries) != vol.levels[0].level.grid.ntiles or lo > hi:
        return None
    return _pair(float(lo), float(hi))


def _sample(arr: LevelArray, split: int | None) -> np.ndarray:
    """All of ``arr`` when small, else its first, middle and last planes (central patches)."""
    if arr.size <= _SAMPLE:
        return np.asarray(arr)
    ax = 1 if split == 0 else 0
    n = arr.shape[ax]
    rest = [i for i in range(arr.ndim) if i not in (ax, split)]
    side = max(1, int((_SAMPLE / 3 / max(1, arr.shape[split] if split is not None else 1))
                      ** (1 / max(1, len(rest)))))
    key: list[Any] = [slice(None)] * arr.ndim
    for i in rest:
        c = arr.shape[i] // 2
        key[i] = slice(max(0, c - side // 2), max(0, c - side // 2) + side)
    planes = []
    for p in sorted({0, n // 2, n - 1}):
        key[ax] = slice(p, p + 1)
        planes.append(arr[tuple(key)])
    return np.concatenate(planes, axis=ax)


def _range(a: np.ndarray) -> tuple[float, float]:
    if a.dtype.kind == "f":
        a = a[np.isfinite(a)]
    if a.size == 0:
        return (0.0, 1.0)
    return _pair(float(a.min()), float(a.max()))


def _pair(lo: float, hi: float) -> tuple[float, float]:
    # napari's rule for a constant image: widen to include 0 and 1
    return (min(lo, 0.0), max(hi, 1.0)) if lo == hi else (lo, hi)


def _nondomain(kind: str | None) -> bool:
    """True for a non-domain kind (vector, list, RGB-color, ...; docs/format.md#domain-axes)."""
    return kind is not None and kind not in _DOMAIN_KINDS


def _kinds(vol: Volume) -> list[str | None]:
    kinds = vol.core.kinds or (None,) * vol.ndim
    return [k.lower().replace("-", "_") if isinstance(k, str) else None for k in kinds]


def _is_labels(vol: Volume, source: str | None) -> bool:
    """A label map (:func:`jnrrd.clinical.labels.is_label_map`), or an integer ``*.seg.nrrd``
    file that does not say otherwise."""
    if is_label_map(vol.header, vol.dtype):
        return True
    if label_flag(vol.header) is False or np.dtype(vol.dtype).kind not in "iu":
        return False
    return source is not None and source.split("?", 1)[0].lower().endswith(".seg.nrrd")


def _name(source: str | None) -> str:
    if source is None:
        return "jnrrd"
    base = re.split(r"[/\\]", source.split("?", 1)[0].rstrip("/"))[-1]
    for suffix in SUFFIXES:
        if base.lower().endswith(suffix):
            return base[: -len(suffix)] or base
    return base


def _unit(u: Any) -> str | None:
    return _UNITS.get(u.strip().lower()) if isinstance(u, str) else None


def _geometry(vol: Volume, dims: list[int]) -> dict[str, Any]:
    """``scale``/``translate`` (or ``affine``), ``units``, ``axis_labels`` for the layer axes
    ``dims`` (C-order axes of the volume, in the layer's order) from level 0."""
    n = vol.ndim
    core = vol.core
    hdims = [n - 1 - a for a in dims]  # header axis of each layer axis
    spacings = core.spacings or (None,) * n
    axis_units = core.units or (None,) * n
    scale = [_step(spacings[h]) for h in hdims]
    translate = [0.0] * len(hdims)
    units = [_unit(axis_units[h]) for h in hdims]
    out: dict[str, Any] = {}
    origin, dirs = vol.levels[0].header_geometry()
    spatial = [i for i, h in enumerate(hdims) if dirs is not None and dirs[h] is not None]
    if spatial:
        assert origin is not None and dirs is not None
        sd = len(origin)
        # rows: the space coordinates reversed (C order); columns: the spatial layer axes
        cols = np.array([dirs[hdims[i]] for i in spatial], dtype=np.float64).T[::-1]
        o = np.asarray(origin, dtype=np.float64)[::-1]
        space_units = list(core.space_units or (None,) * sd)[::-1]
        rows = _rows(cols)
        if rows is None:
            warnings.warn(
                f"{vol.name}: {len(spatial)} spatial axes in a {sd}-D space that no axis-aligned "
                "choice of world axes expresses; napari gets the direction lengths as scale and "
                "the origin projected on each direction as translate", JnrrdWarning,
                stacklevel=3)
            norms = np.linalg.norm(cols, axis=0)
            for j, i in enumerate(spatial):
                scale[i] = float(norms[j]) or 1.0
                translate[i] = float(o @ cols[:, j]) / (float(norms[j]) or 1.0)
            common = {_unit(u) for u in space_units}
            for i in spatial:
                units[i] = next(iter(common)) if len(common) == 1 else None
        else:
            m, o, space_units = cols[rows], o[rows], [space_units[r] for r in rows]
            for j, i in enumerate(spatial):
                units[i] = _unit(space_units[j])
            if _diagonal(m):
                for j, i in enumerate(spatial):
                    scale[i], translate[i] = float(m[j, j]), float(o[j])
            else:
                out["affine"] = _affine(scale, spatial, m, o)
    if "affine" not in out:
        out["scale"], out["translate"] = tuple(scale), tuple(translate)
    if units and all(u is not None for u in units):
        out["units"] = tuple(units)
    labels = core.labels
    if labels is not None:
        names = [labels[h] for h in hdims]
        if all(isinstance(v, str) and v for v in names) and len(set(names)) == len(names):
            out["axis_labels"] = tuple(names)
    return out


def _step(v: Any) -> float:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v:
        return float(v)
    return 1.0


def _rows(cols: np.ndarray) -> list[int] | None:
    """The world rows of the spatial axes: all of them when there are as many axes as space
    coordinates; for fewer axes, the one coordinate each axis moves along (an axis-aligned
    image in a larger space, e.g. a 2-D slice in 3-D), else ``None``."""
    sd, k = cols.shape
    if sd == k:
        return list(range(sd))
    tol = 1e-9 * (float(np.abs(cols).max()) or 1.0)
    rows = []
    for j in range(k):
        nz = np.flatnonzero(np.abs(cols[:, j]) > tol)
        if len(nz) != 1:
            return None
        rows.append(int(nz[0]))
    return rows if len(set(rows)) == k else None


def _diagonal(m: np.ndarray) -> bool:
    tol = 1e-9 * (float(np.abs(m).max()) or 1.0)
    off = m - np.diag(np.diag(m))
    return bool(np.all(np.abs(off) <= tol) and np.all(np.abs(np.diag(m)) > tol))


def _affine(scale: list[float], spatial: list[int], m: np.ndarray, o: np.ndarray
            ) -> np.ndarray:
    """The layer's homogeneous matrix: the direction block on the spatial axes (world axis
    ``spatial[j]`` is space coordinate ``j``), ``scale`` on the others."""
    d = len(scale)
    a = np.eye(d + 1)
    for i in range(d):
        a[i, i] = scale[i]
    for j, i in enumerate(spatial):
        for jj, ii in enumerate(spatial):
            a[i, ii] = m[j, jj]
        a[i, d] = o[j]
    return a


class _Owner:
    """Shared by a layer's level arrays (and their channels): when the last of them is gone,
    the volume's file is closed (napari has no close hook for reader data)."""

    def __init__(self, vol: Volume) -> None:
        weakref.finalize(self, vol.close)


def _is_int(k: Any) -> bool:
    return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))


class LevelArray:
    """One level for napari: a :class:`~jnrrd.LevelView` seen with its axes permuted (an RGB
    axis moved last) and, after a channel split, one index fixed on the channel axis.

    Slicing reads only the tiles it touches and returns a NumPy array, except that
    ``a[:, ..., i, ...]`` with an integer on ``split_axis`` alone (how napari splits
    ``channel_axis``) returns the lazy channel ``i``.
    """

    def __init__(self, view: LevelView, order: Sequence[int] | None = None, *,
                 split_axis: int | None = None, fixed: dict[int, int] | None = None,
                 owner: object = None) -> None:
        self._view = view
        self._owner = owner  # kept alive with this array: it closes the volume (_Owner)
        self._order = tuple(range(view.ndim)) if order is None else tuple(order)
        if sorted(self._order) != list(range(view.ndim)):
            raise ValueError(f"order must be a permutation of {view.ndim} axes: {order}")
        self._fixed = dict(fixed or {})
        self._free = [a for a in self._order if a not in self._fixed]
        self.split_axis = split_axis
        self.shape = tuple(view.shape[a] for a in self._free)
        self.dtype = np.dtype(view.dtype)

    @property
    def view(self) -> LevelView:
        """The level view read from (the volume's axes, C order)."""
        return self._view

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return (f"<jnrrd napari level {self._view.index} shape={self.shape} "
                f"dtype={self.dtype}>")

    def __getitem__(self, key: Any) -> Any:
        key = expand_key(key, self.ndim)
        s = self.split_axis
        if s is not None and _is_int(key[s]) and all(
                k == slice(None) for i, k in enumerate(key) if i != s):
            i = operator.index(key[s])
            n = self.shape[s]
            if not -n <= i < n:
                raise SelectionError(f"{where(self._view.volume.name, f'axis {s}')}index {i} "
                                     f"is out of bounds for size {n} (valid: {-n}..{n - 1})")
            return LevelArray(self._view, self._order, owner=self._owner,
                              fixed={**self._fixed, self._free[s]: i % n})
        vkey: list[Any] = [slice(None)] * self._view.ndim
        for a, i in self._fixed.items():
            vkey[a] = i
        kept, post = [], []
        for a, k in zip(self._free, key, strict=True):
            if _is_int(k):
                vkey[a] = int(k)
            elif isinstance(k, slice):
                vkey[a] = k
                kept.append(a)
                post.append(slice(None))
            else:  # arrays, lists, masks: read the axis, let NumPy index it
                kept.append(a)
                post.append(k)
        res = np.asarray(self._view[tuple(vkey)])
        in_view = sorted(kept)
        res = np.transpose(res, [in_view.index(a) for a in kept])
        if any(not isinstance(p, slice) for p in post):
            res = res[tuple(post)]
        return res

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self[...]
        return a if dtype is None else a.astype(dtype, copy=False)
