"""OME-NGFF 0.5 ``multiscales`` metadata for a JNRRD volume (axes, per-level transforms, units).

Shared by the Zarr view (:func:`jnrrd.kerchunk_refs`) and the OME-Zarr writer. Everything is in
the Zarr (C) axis order of docs/format.md#zarr-axis-order: NGFF ``axes`` are the header axes
**reversed**.

- **Names** come from ``labels``; an unlabeled axis is named by its type: the space axes
  ``x``, ``y``, ``z`` in header order (header axis 0 is the fastest, so C order reads ``z, y,
  x`` as NGFF expects), ``t`` for time, ``c`` for a channel; an axis whose name would repeat
  an earlier one (or an untyped axis) is ``axis<d>`` (``d`` = its header axis index).
- **Types**: ``time`` for the ``time`` kind; ``channel`` for a non-domain kind (vector,
  RGB-color, list, ...); ``space`` for an axis with a ``space_directions`` vector, for the
  ``space`` kind, and for the domain axes of a file without space fields, at most 3 (NGFF
  allows 2 or 3): a further domain axis is a ``channel`` when there is no other, else has no
  type.
- **Order**: the Zarr view (:func:`jnrrd.kerchunk_refs`) keeps the header axes reversed
  (a view cannot move bytes); an OME-Zarr export orders its arrays as NGFF requires, time,
  channel, other, then the space axes (:func:`export_order`), so a vector or RGB axis that
  NRRD puts first (fastest) becomes the channel axis before ``z, y, x``.
- **Units**: a spatial axis takes the ``space_units`` entry of the world axis its direction
  points along (the common unit for oblique directions); other axes take ``units[d]``. Common
  NRRD spellings become UDUNITS names (``mm`` → ``millimeter``), others are kept as written.
- **Per-level scale and translation** come from the level geometry
  (docs/format.md#per-level-geometry, the level's ``header_geometry()``): for a spatial axis, scale
  = the length of its level direction, translation = the level origin projected on that direction
  (for an axis-aligned positive direction, the origin's component on that world axis); a non-spatial
  axis (and every axis of a file without space fields) uses ``spacings[d]`` (1 when unknown) times
  the level scale, and its translation is the cell-centre shift ``(s − 1)/2 · spacing`` (0 for
  node-centred axes).

A diagonal scale + translation is exact only when every spatial direction points along a
distinct world axis with a positive component in the axis order; otherwise the geometry is
*oblique* (:func:`is_oblique`): the scales are still the voxel sizes, but the world frame
(rotation, axis flips or permutation) is lost, and callers keep the full affine elsewhere
(:func:`oblique_affines`), or write RFC-5's ``affine`` transform (``multiscales(...,
affine=True)``, for readers that implement RFC-5).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError, where
from ..tiling.kinds import axis_kinds, is_domain

__all__ = ["NGFF_VERSION", "UNITS", "affine_transform", "axes", "axis_names", "axis_types",
           "export_order",
           "is_oblique", "level_transform", "multiscales", "ngff_unit", "nrrd_unit",
           "oblique_affines"]

NGFF_VERSION = "0.5"

#: NRRD / common unit spellings → UDUNITS-2 names that OME-NGFF lists
UNITS: dict[str, str] = {
    "m": "meter", "cm": "centimeter", "mm": "millimeter", "um": "micrometer",
    "µm": "micrometer", "μm": "micrometer", "micron": "micrometer", "nm": "nanometer",
    "pm": "picometer", "km": "kilometer", "a": "angstrom", "å": "angstrom",
    "s": "second", "sec": "second", "ms": "millisecond", "us": "microsecond",
    "µs": "microsecond", "ns": "nanosecond", "min": "minute", "h": "hour", "hr": "hour",
    "in": "inch", "ft": "foot",
}
_BACK = {"meter": "m", "centimeter": "cm", "millimeter": "mm", "micrometer": "um",
         "nanometer": "nm", "picometer": "pm", "kilometer": "km", "angstrom": "A",
         "second": "s", "millisecond": "ms", "microsecond": "us", "nanosecond": "ns",
         "minute": "min", "hour": "h", "inch": "in", "foot": "ft"}


def ngff_unit(unit: str | None) -> str | None:
    """The OME-NGFF (UDUNITS-2) name of a NRRD unit string; unknown spellings are kept."""
    if unit is None or not str(unit).strip():
        return None
    u = str(unit).strip()
    return UNITS.get(u.lower(), UNITS.get(u, u))


def nrrd_unit(unit: str | None) -> str | None:
    """The short NRRD spelling of an OME-NGFF unit name (``millimeter`` → ``mm``); unknown
    names are kept."""
    if unit is None:
        return None
    return _BACK.get(unit, unit)


def axis_names(vol: Any) -> list[str]:
    """Unique axis names in **header** order: the ``labels`` entry, else by type (``x``,
    ``y``, ``z``, ``t``, ``c``), else ``axis<d>``."""
    core = vol.core
    labels = core.labels or (None,) * len(core.sizes)
    types = axis_types(vol)
    spatial = iter("xyz")
    defaults = [next(spatial, None) if t == "space" else {"time": "t", "channel": "c"}.get(
        t or "") for t in types]
    names: list[str] = []
    for d, lab in enumerate(labels):
        name = lab.strip() if isinstance(lab, str) else ""
        name = name or defaults[d] or f"axis{d}"
        if name in names:
            name = f"axis{d}"
        while name in names:
            name = f"_{name}"
        names.append(name)
    return names


def axis_types(vol: Any) -> list[str | None]:
    """The NGFF type of each axis in **header** order (see the module docstring)."""
    core = vol.core
    n = len(core.sizes)
    kinds = axis_kinds({"kinds": list(core.kinds) if core.kinds else None}, n)
    _, dirs = _spatial(vol)
    types = [_axis_type(kinds[d], dirs is not None and dirs[d] is not None, dirs is not None)
             for d in range(n)]
    spaces = [d for d in range(n) if types[d] == "space"]
    if len(spaces) > 3:
        keep = [d for d in spaces if dirs is not None and dirs[d] is not None][:3]
        keep += [d for d in spaces if d not in keep][:3 - len(keep)]
        for d in spaces:
            if d not in keep:
                types[d] = "channel" if "channel" not in types else None
    return types


def export_order(vol: Any) -> list[int]:
    """The header axis of each array axis of an OME-Zarr export (C order): time, channel,
    untyped, then the space axes in reversed header order."""
    types = axis_types(vol)
    n = len(types)
    rank = {"time": 0, "channel": 1, None: 2}
    first = sorted((d for d in range(n) if types[d] != "space"),
                   key=lambda d: (rank.get(types[d], 2), -d))
    return first + [d for d in reversed(range(n)) if types[d] == "space"]


def _spatial(vol: Any) -> tuple[Any, list[Any] | None]:
    """Level-0 ``(origin, directions)`` in header order (``(None, None)`` without space)."""
    return vol.levels[0].header_geometry()


def _world_axis(v: np.ndarray) -> int | None:
    """The world axis an axis-aligned positive direction points along, else None."""
    nz = np.flatnonzero(v)
    if len(nz) == 1 and v[nz[0]] > 0:
        return int(nz[0])
    return None


def is_oblique(vol: Any) -> bool:
    """True when a diagonal scale + translation cannot express the level-0 geometry: some
    spatial direction is not a positive multiple of a distinct world axis taken in axis
    order (a rotation, flip or permutation of the world frame)."""
    _, dirs = _spatial(vol)
    if dirs is None:
        return False
    seen = [_world_axis(v) for v in dirs if v is not None]
    axes_seen = [j for j in seen if j is not None]
    return len(axes_seen) != len(seen) or axes_seen != sorted(set(axes_seen))


def _axis_type(kind: str | None, spatial: bool, has_space: bool) -> str | None:
    if kind == "time":
        return "time"
    if not is_domain(kind):
        return "channel"
    if spatial or kind == "space" or not has_space:
        return "space"
    return None


def axes(vol: Any, order: Sequence[int] | None = None) -> list[dict[str, str]]:
    """The NGFF ``axes`` list in Zarr order: ``order`` (header axis of each Zarr axis), by
    default the header axes reversed."""
    core = vol.core
    n = len(core.sizes)
    _, dirs = _spatial(vol)
    units = core.units or (None,) * n
    types = axis_types(vol)
    out: list[dict[str, str]] = []
    for d, name in enumerate(axis_names(vol)):
        spatial = dirs is not None and dirs[d] is not None
        entry = {"name": name}
        if types[d] is not None:
            entry["type"] = str(types[d])
        unit = _space_unit(core, dirs[d]) if dirs is not None and spatial else ngff_unit(
            units[d])
        if unit is not None:
            entry["unit"] = unit
        out.append(entry)
    return [out[d] for d in _order(order, n)]


def _order(order: Sequence[int] | None, n: int) -> list[int]:
    return list(reversed(range(n))) if order is None else [int(d) for d in order]


def _space_unit(core: Any, v: np.ndarray) -> str | None:
    su = core.space_units
    if not su:
        return None
    j = _world_axis(v)
    if j is None:  # oblique: only a unit shared by every world axis applies
        return ngff_unit(su[0]) if len(set(su)) == 1 else None
    return ngff_unit(su[j]) if j < len(su) else None


def level_transform(vol: Any, level: int, order: Sequence[int] | None = None
                    ) -> tuple[list[float], list[float]]:
    """``(scale, translation)`` of level ``level`` in Zarr order (``order``, default the
    header axes reversed; see the module docstring)."""
    lv = vol.levels[level]
    core = vol.core
    n = len(core.sizes)
    origin, dirs = lv.header_geometry()
    s = lv.level.scale  # header order
    spacings = core.spacings or (None,) * n
    centers = core.centers or (None,) * n
    scale: list[float] = []
    trans: list[float] = []
    for d in range(n):
        if dirs is not None and dirs[d] is not None:
            v = np.asarray(dirs[d], dtype=np.float64)
            norm = float(np.linalg.norm(v))
            scale.append(norm)
            trans.append(float(np.dot(origin, v) / norm) if norm else 0.0)
            continue
        step = spacings[d]
        step = 1.0 if step is None or not math.isfinite(step) else abs(float(step))
        scale.append(step * s[d])
        trans.append(0.0 if centers[d] == "node" else (s[d] - 1) / 2.0 * step)
    idx = _order(order, n)
    return [scale[d] for d in idx], [trans[d] for d in idx]


def affine_transform(vol: Any, level: int, order: Sequence[int] | None = None
                     ) -> list[list[float]]:
    """Level ``level``'s index→world matrix as an RFC-5 ``affine`` (n rows of n + 1 values,
    Zarr order for both the array axes and the output axes): output space axis ``x``, ``y``,
    ``z`` is world coordinate 0, 1, 2 (the k-th space axis of the header), so oblique
    directions are exact; other axes keep their scale and translation."""
    lv = vol.levels[level]
    n = lv.ndim
    idx = _order(order, n)
    origin, dirs = lv.header_geometry()
    scale, trans = level_transform(vol, level, idx)
    types = axis_types(vol)
    spatial = [d for d in range(n) if dirs is not None and dirs[d] is not None]
    world = {d: j for j, d in enumerate(spatial)}
    m = np.zeros((n, n + 1))
    for i, d in enumerate(idx):
        if d in world and types[d] == "space":
            w = world[d]
            for j, e in enumerate(idx):
                if e in world:
                    m[i, j] = float(dirs[e][w])
            m[i, n] = float(origin[w])
        else:
            m[i, i], m[i, n] = scale[i], trans[i]
    return m.tolist()


def multiscales(vol: Any, *, paths: Sequence[str] | None = None,
                levels: Sequence[int] | None = None, name: str | None = None,
                order: Sequence[int] | None = None, affine: bool = False) -> dict[str, Any]:
    """The value of the Zarr group attribute ``"ome"``: ``{"version": "0.5", "multiscales":
    [...]}`` with one dataset per level in ``levels`` (default: all), at ``paths`` (default:
    ``"0"``, ``"1"``, ... in that order); ``order`` as for :func:`axes`. ``affine=True``
    writes each level's RFC-5 ``affine`` (:func:`affine_transform`) instead of its scale and
    translation: exact for oblique volumes, but only for readers that implement RFC-5 (OME-NGFF
    0.5 readers and validators reject it)."""
    levels = list(range(len(vol.levels))) if levels is None else list(levels)
    paths = [str(i) for i in range(len(levels))] if paths is None else list(paths)
    if len(paths) != len(levels):
        raise ArgumentError(f"{where(vol.name)}paths: {len(paths)} paths for {len(levels)} "
                            "levels: expected one path per level")
    datasets = []
    for k, path in zip(levels, paths, strict=True):
        if affine:
            datasets.append({"path": path, "coordinateTransformations": [
                {"type": "affine", "affine": affine_transform(vol, k, order)}]})
            continue
        scale, trans = level_transform(vol, k, order)
        datasets.append({"path": path, "coordinateTransformations": [
            {"type": "scale", "scale": scale},
            {"type": "translation", "translation": trans},
        ]})
    ms: dict[str, Any] = {"axes": axes(vol, order), "datasets": datasets}
    if name:
        ms["name"] = name
    return {"version": NGFF_VERSION, "multiscales": [ms]}


def oblique_affines(vol: Any, levels: Sequence[int] | None = None) -> list[list[list[float]]]:
    """Each level's homogeneous index→world ``affine`` (C order, docs/api.md#volumes) as nested
    lists: what an oblique volume keeps in attributes beside the diagonal NGFF transforms."""
    levels = range(len(vol.levels)) if levels is None else levels
    out = []
    for k in levels:
        a = np.asarray(vol.levels[k].affine, dtype=np.float64)
        if getattr(vol, "index_order", "F") != "C":  # columns in C order
            a = np.concatenate([a[:, :-1][:, ::-1], a[:, -1:]], axis=1)
        out.append(a.tolist())
    return out
