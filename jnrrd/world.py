"""Queries in world (physical) coordinates: ``vol.query(lower, upper, spacing=None,
space=None)`` → :class:`WorldRegion` (docs/clinical.md#world-queries).

- **The box** ``[lower, upper]`` is axis-aligned in world coordinates: the file's own space
  (``space_origin``/``space_directions``; without space fields, the spacing-based frame of
  ``Volume.affine``), or, with ``space="LPS"``/``"RAS"``/``"LAS"`` (or the long names), that
  space, turned into the file's (which must then be an anatomical space: LPS, RAS or LAS).
- **The level** is the coarsest whose voxel spacing is ≤ ``spacing`` along every spatial axis
  (the longest direction decides); the finest (level 0) when ``spacing`` is None or no level
  is that fine.
- **The index box** is the smallest one holding every voxel whose cell (±½ voxel around its
  centre) meets the world box: the 2^d corners of the box are mapped to continuous indices
  (oblique directions included), and each axis takes ``floor(min + ½) .. ceil(max − ½)``,
  clipped to the level (an oblique volume's index box holds voxels outside the world box too:
  there is no mask). Axes without a direction (vectors, time) are taken whole. Only the
  tiles under that box are read (from a URL too). :func:`world_bounds` gives the box of a
  level's voxel centres.
- **The result**: ``data`` in the volume's index order (empty along an axis the box misses),
  ``affine`` mapping ``data``'s spatial indices to world coordinates **in the query's space**,
  ``level``, and ``index`` (the slices of the level that were read).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import ArgumentError, UnsupportedError, where

__all__ = ["WorldQueries", "WorldRegion", "query", "world_bounds"]

#: anatomical spaces → sign of each axis relative to LPS
_SIGNS = {"left_posterior_superior": (1, 1, 1), "right_anterior_superior": (-1, -1, 1),
          "left_anterior_superior": (1, -1, 1)}
_NAMES = {"lps": "left_posterior_superior", "ras": "right_anterior_superior",
          "las": "left_anterior_superior"}
_EPS = 1e-9


@dataclass(frozen=True)
class WorldRegion:
    """What :meth:`jnrrd.Volume.query` returns: the voxels ``data`` of level ``level`` and
    the homogeneous ``affine`` mapping their spatial indices to world coordinates (the
    query's space); ``index`` holds the slices of the level that ``data`` covers."""

    data: np.ndarray
    affine: np.ndarray
    level: int
    index: tuple[slice, ...] = field(default=())


class WorldQueries:
    """The world-query method of :class:`jnrrd.Volume` (a base class, so that the volume
    module only names it)."""

    def query(self, lower: Any, upper: Any, spacing: float | None = None,
              space: Any = None) -> WorldRegion:
        """The voxels under the world box ``[lower, upper]`` from the coarsest level whose
        voxel spacing is ≤ ``spacing`` (level 0 when None), as a :class:`WorldRegion`
        ``(data, affine, level)``; ``space="LPS"``/``"RAS"`` gives the box (and the affine)
        in that space. Rules: docs/clinical.md#world-queries."""
        return query(self, lower, upper, spacing=spacing, space=space)

    def world_bounds(self, space: Any = None, level: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``(lower, upper)``: the world box holding the centres of every voxel of level
        ``level`` (oblique volumes: the box around their corners), in the file's space or
        ``space`` (``"LPS"``, ``"RAS"``, ``"LAS"``); ``(lower + upper) / 2`` is the volume's
        centre, and ``vol.query(lower, upper)`` gives all of it."""
        return world_bounds(self, space=space, level=level)


def _space_name(space: Any) -> str | None:
    if space is None:
        return None
    key = str(space).strip().lower().replace("-", "_")
    key = _NAMES.get(key, key)
    return key[:-5] if key.endswith("_time") else key


def _flip(vol: Any, space: Any, sd: int) -> np.ndarray:
    """Signs taking the query's space to the file's (and back: its own inverse)."""
    asked = _space_name(space)
    if asked is None:
        return np.ones(sd)
    own = _space_name(vol.core.space)
    if asked not in _SIGNS or own not in _SIGNS:
        raise UnsupportedError(f"{where(vol.name, 'space')}space={space!r}: converting needs "
                               "LPS, RAS or LAS on both sides; the file's space is "
                               f"{vol.core.space!r}")
    signs = np.ones(sd)
    signs[:3] = np.multiply(_SIGNS[asked], _SIGNS[own])
    return signs


def _level_spacing(lv: Any) -> float:
    a = np.asarray(lv.affine, dtype=np.float64)
    return float(np.max(np.linalg.norm(a[:-1, :-1], axis=0))) if a.shape[1] > 1 else 0.0


def _choose_level(vol: Any, spacing: float | None) -> int:
    if spacing is None:
        return 0
    try:
        s = float(spacing)
        shown = str(s)  # plain numbers, not NumPy reprs
    except ValueError:  # float("abc"); a wrong type stays the TypeError float() raises
        s, shown = float("nan"), f"{spacing!r:.80}"
    if not np.isfinite(s) or s <= 0:
        raise ArgumentError(f"{where(vol.name, 'spacing')}expected a positive number of world "
                            f"units (or None: level 0), got {shown}")
    best = 0
    for k, lv in enumerate(vol.levels):
        if _level_spacing(lv) <= s * (1 + _EPS):
            best = k
    return best


def _corner(vol: Any, name: str, value: Any, sd: int) -> np.ndarray:
    """``value`` (the argument ``name``) as ``sd`` finite world coordinates; else an
    :class:`ArgumentError` naming the file and the argument."""
    try:
        out = np.asarray(value, dtype=np.float64).ravel()
        shown = f"{[float(v) for v in out[:10]]}"[:80]  # plain numbers, not NumPy reprs
    except ValueError:  # strings, ragged lists
        out, shown = None, f"{value!r:.80}"
    if out is None or out.shape != (sd,) or not np.isfinite(out).all():
        raise ArgumentError(f"{where(vol.name, name)}expected {sd} finite world coordinates "
                            f"(one per space axis), got {shown}")
    return out


def _spatial_axes(lv: Any) -> list[int]:
    """The caller-order axes that the affine's columns belong to."""
    origin, dirs = lv.header_geometry()
    n = lv.ndim
    if dirs is None:
        axes = list(range(n))
    else:
        axes = [a for a in range(n) if dirs[a] is not None]
    c_order = getattr(lv, "c_order", False)
    return sorted(n - 1 - a for a in axes) if c_order else axes


def query(vol: Any, lower: Any, upper: Any, spacing: float | None = None,
          space: Any = None) -> WorldRegion:
    """The voxels of ``vol`` under the world box ``[lower, upper]`` (see the module
    docstring)."""
    level = _choose_level(vol, spacing)
    lv = vol.levels[level]
    aff = np.asarray(lv.affine, dtype=np.float64)
    sd, k = aff.shape[0] - 1, aff.shape[1] - 1
    lo, hi = _corner(vol, "lower", lower, sd), _corner(vol, "upper", upper, sd)
    signs = _flip(vol, space, sd)
    corners = np.array([[(hi if c else lo)[i] for i, c in enumerate(bits)]
                        for bits in itertools.product((0, 1), repeat=sd)]) * signs
    lin, org = aff[:sd, :k], aff[:sd, k]
    idx = np.linalg.lstsq(lin, (corners - org).T, rcond=None)[0].T  # (corners, k)
    axes = _spatial_axes(lv)
    sel: list[slice] = [slice(0, n) for n in lv.shape]
    start = np.zeros(k)
    for j, a in enumerate(axes):
        first = int(np.floor(idx[:, j].min() + 0.5 + _EPS))
        last = int(np.ceil(idx[:, j].max() - 0.5 - _EPS))
        first, last = min(max(first, 0), lv.shape[a]), min(last, lv.shape[a] - 1)
        sel[a] = slice(first, max(first, last + 1))  # empty, inside the level, when missed
        start[j] = first
    index = tuple(sel)
    data = lv[index] if all(s.stop > s.start for s in index) else np.empty(
        tuple(s.stop - s.start for s in index), dtype=lv.dtype)
    out = aff.copy()
    out[:sd, k] = org + lin @ start
    out[:sd, :] *= signs[:, None]
    return WorldRegion(np.asarray(data), out, level, index)


def world_bounds(vol: Any, space: Any = None, level: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The world box of the voxel centres of ``vol.levels[level]`` (see
    :meth:`WorldQueries.world_bounds`)."""
    lv = vol.levels[level]
    aff = np.asarray(lv.affine, dtype=np.float64)
    sd, k = aff.shape[0] - 1, aff.shape[1] - 1
    ends = [(0, lv.shape[a] - 1) for a in _spatial_axes(lv)]
    corners = np.array(list(itertools.product(*ends)), dtype=np.float64).reshape(-1, k)
    world = (corners @ aff[:sd, :k].T + aff[:sd, k]) * _flip(vol, space, sd)
    return world.min(axis=0), world.max(axis=0)
