"""Stacking DICOM images into a volume: slice order, spacing checks, LPS geometry, resampling.

Images are ordered by their position along the slice normal (``ImageOrientationPatient``
row × column), never by file name or ``InstanceNumber``. The direction cosines are made
orthonormal as ITK (GDCM) makes them (:func:`frame_axes`: files store them with a few
decimals). The LPS geometry: ``space_origin`` is the first image's ``ImagePositionPatient``;
axis 0 (columns) steps ``row direction × PixelSpacing[1]``, axis 1 (rows) ``column direction ×
PixelSpacing[0]``, axis 2 (slices) the normal × the distance from the first to the last
position over the number of gaps (ITK's slice axis), or, when the last position lies off that
line by more than the spacing tolerance (a gantry tilt), the step from the first to the last
position itself (a direction off the normal, which ``space_directions`` hold exactly).

Spacing: every gap along the normal must equal the mean gap within 1e-3 mm (or 0.1 % of it),
and every position must lie on the line through the first and last; otherwise the reader
refuses, naming the gap and its images, unless ``resample=True`` asks for a regular grid
(:class:`Resampling`: linear between the two nearest images, float values).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import UnsupportedError, where

__all__ = ["Resampling", "Stack", "frame_axes", "stack_geometry"]

_ABS_TOL = 1e-3  # mm
_REL_TOL = 1e-3
_IOP_TOL = 1e-4


@dataclass(frozen=True)
class Resampling:
    """Output slice k = ``(1 - weight[k]) * image[lower[k]] + weight[k] * image[lower[k]+1]``
    (indices into the sorted images)."""

    lower: np.ndarray
    weight: np.ndarray


@dataclass(frozen=True)
class Stack:
    """The sorted images (``order``: input indices) and the volume's LPS geometry
    (``directions`` columns per axis: columns, rows, slices)."""

    order: list[int]
    origin: np.ndarray
    directions: np.ndarray
    resampling: Resampling | None = None

    @property
    def depth(self) -> int:
        """Slices of the volume (the resampled grid's, when resampled)."""
        return len(self.order) if self.resampling is None else len(self.resampling.lower)


def orientation(iops: Sequence[Any], names: Sequence[str], source: Any) -> np.ndarray:
    """The shared ``ImageOrientationPatient`` (6 values) of the images; an image that differs
    is an ``UnsupportedError`` naming it."""
    if any(v is None for v in iops):
        bad = names[[i for i, v in enumerate(iops) if v is None][0]]
        raise UnsupportedError(f"{where(bad, 'ImageOrientationPatient')}missing: the image "
                               "has no orientation in patient space, so it cannot be placed "
                               "in a volume")
    first = np.asarray(iops[0], dtype=np.float64)
    if first.shape != (6,):
        raise UnsupportedError(f"{where(names[0], 'ImageOrientationPatient')}expected 6 "
                               f"values, found {list(first)}")
    for v, n in zip(iops, names, strict=True):
        if np.max(np.abs(np.asarray(v, dtype=np.float64) - first)) > _IOP_TOL:
            raise UnsupportedError(f"{where(n, 'ImageOrientationPatient')}{list(v)} differs "
                                   f"from {list(first)} ({names[0]}): the images do not form "
                                   "one volume")
    return first


def frame_axes(iop: np.ndarray, source: Any = None) -> tuple[np.ndarray, np.ndarray,
                                                              np.ndarray]:
    """Unit row, column and normal directions of ``ImageOrientationPatient``, orthonormal as
    ITK (GDCM) makes them: the column direction normalised, the normal = row × column
    normalised, the row = column × normal (so 6-decimal cosines give the same geometry as
    ITK's to 1e-6 mm). Directions that are not nearly orthogonal unit vectors are an
    ``UnsupportedError``."""
    row, col = np.asarray(iop[:3], dtype=np.float64), np.asarray(iop[3:], dtype=np.float64)
    normal = np.cross(row, col)
    nn, nc = float(np.linalg.norm(normal)), float(np.linalg.norm(col))
    if not np.isfinite(normal).all() or nn < 0.5 or not 0.5 < nc < 1.5:
        raise UnsupportedError(f"{where(source, 'ImageOrientationPatient')}row and column "
                               f"directions {list(iop)} are not orthogonal unit vectors")
    col = col / nc
    normal = normal / nn
    return np.cross(col, normal), col, normal


def stack_geometry(iop: np.ndarray, pixel_spacing: Sequence[float], positions: Sequence[Any],
                   names: Sequence[str], *, resample: bool, source: Any,
                   depth_step: float | None = None) -> Stack:
    """Sort the images at ``positions`` (``ImagePositionPatient`` each) and derive the
    geometry (see the module docstring). ``depth_step`` is the slice step of a single image
    (``SpacingBetweenSlices`` or ``SliceThickness``; 1 when unknown)."""
    row, col, normal = frame_axes(iop, source)
    if any(p is None for p in positions):
        bad = names[[i for i, p in enumerate(positions) if p is None][0]]
        raise UnsupportedError(f"{where(bad, 'ImagePositionPatient')}missing: the image "
                               "cannot be placed in a volume")
    pos = np.asarray(positions, dtype=np.float64).reshape(len(positions), 3)
    dist = pos @ normal
    order = [int(i) for i in np.argsort(dist, kind="stable")]
    ps = [float(v) for v in pixel_spacing]
    dirs = np.empty((3, 3))
    dirs[:, 0] = row * ps[1]
    dirs[:, 1] = col * ps[0]
    if len(order) == 1:
        dirs[:, 2] = normal * (depth_step or 1.0)
        return Stack(order, pos[order[0]].copy(), dirs)
    d = dist[order]
    gaps = np.diff(d)
    dup = int(np.argmin(gaps))
    if gaps[dup] <= _ABS_TOL:
        raise UnsupportedError(
            f"{where(source)}{names[order[dup]]} and {names[order[dup + 1]]} are at the same "
            f"position along the slice normal ({d[dup]:.4f} mm): several images per position "
            "(echoes, phases, repeated acquisitions) do not form one volume")
    step = (pos[order[-1]] - pos[order[0]]) / (len(order) - 1)
    mean = float(np.mean(gaps))
    tol = max(_ABS_TOL, _REL_TOL * mean)
    off_line = np.linalg.norm(pos[order] - (pos[order[0]] + np.outer(np.arange(len(order)),
                                                                        step)), axis=1)
    regular = bool(np.all(np.abs(gaps - mean) <= tol))
    if regular and np.all(off_line <= tol):
        # ITK's slice axis (the normal, at the mean distance) unless the last image lies off
        # it by more than the tolerance: then a gantry tilt, kept exactly
        along = normal * float(np.linalg.norm(step))
        tilted = np.linalg.norm((along - step) * (len(order) - 1)) > tol
        dirs[:, 2] = step if tilted else along
        return Stack(order, pos[order[0]].copy(), dirs)
    if not resample:
        k = int(np.argmax(np.abs(gaps - mean)))
        raise UnsupportedError(
            f"{where(source)}irregular slice spacing: {names[order[k]]} and "
            f"{names[order[k + 1]]} are {gaps[k]:.4f} mm apart along the slice normal, the mean "
            f"gap is {mean:.4f} mm (a missing or extra image?); pass resample=True "
            "(--resample) to resample onto a regular grid")
    return _resampled(order, pos, d, normal, dirs, source)


def _resampled(order: list[int], pos: np.ndarray, d: np.ndarray, normal: np.ndarray,
               dirs: np.ndarray, source: Any) -> Stack:
    """A regular grid from the first to the last image, at the median gap (the spacing most
    images have), with linear weights between neighbouring images."""
    if not np.allclose(pos[order] - np.outer(d - d[0], normal), pos[order[0]], atol=1e-2):
        raise UnsupportedError(f"{where(source)}the image positions do not lie on one line "
                               "along the slice normal: cannot resample them onto a grid")
    gap = float(np.median(np.diff(d)))
    n = int(round((d[-1] - d[0]) / gap)) + 1
    step = (d[-1] - d[0]) / (n - 1)
    targets = d[0] + step * np.arange(n)
    lower = np.clip(np.searchsorted(d, targets, side="right") - 1, 0, len(d) - 2)
    weight = np.clip((targets - d[lower]) / (d[lower + 1] - d[lower]), 0.0, 1.0)
    dirs[:, 2] = normal * step
    return Stack(order, pos[order[0]].copy(), dirs, Resampling(lower, weight))
