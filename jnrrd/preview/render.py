"""Read a preview's views from one level and turn them into an RGB picture.

Slices read only the tiles under the middle plane, with a step along each in-plane axis that
keeps at most about twice the pixel count (the level chosen by :mod:`.plan` is rarely more
than twice the picture). Maximum projections stream the level in slabs along the last shown
axis (about a tile, or 32 MiB), keeping only the three running projections.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .colour import to_rgb
from .plan import Plan, make_plan

__all__ = ["GAP", "render_preview"]

#: black pixels between two views
GAP = 4
#: bytes of one maximum-projection slab, unless one tile is thicker
_SLAB_BYTES = 32 << 20
#: a slab may grow to the tile thickness up to this size (decoding each tile once)
_SLAB_TILE_BYTES = 256 << 20


def render_preview(vol: Any, size: int = 256, *, mip: bool = False, level: int | None = None,
                   labels: bool | None = None) -> np.ndarray:
    """The preview picture of the open volume ``vol`` (``H x W x 3`` ``uint8``); the
    arguments are those of :meth:`jnrrd.Volume.preview`."""
    shapes = [lv.level.shape for lv in vol.levels]
    stored = [bool(lv.stored) for lv in vol.levels]
    plan = make_plan(vol.header, vol.core, shapes, stored, size, level, vol.name)
    view = vol.levels[plan.level]
    reader = _Reader(view, vol.index_order == "C", plan)
    if mip and len(plan.shown) == 3:
        views = _projections(reader)
    else:  # (a maximum projection of a 2-D picture is the picture)
        views = _slices(reader)
    method = vol.tiling.downsample_method if vol.tiling is not None else None
    pictures = to_rgb(views, coloured=plan.colour is not None, labels=labels,
                      mode_pyramid=method == "mode")
    return _side_by_side(pictures)


class _Reader:
    """Reads parts of one level in header axis order: shown axes first (in the order asked),
    then the colour axis; every other axis cut at its middle (domain) or first entry."""

    def __init__(self, view: Any, c_order: bool, plan: Plan) -> None:
        self.view, self.c_order, self.plan = view, c_order, plan
        self.shape = tuple(view.level.shape)
        kinds = _kinds(view.header, len(self.shape))
        self.fixed = {a: (self.shape[a] // 2 if k else 0) for a, k in enumerate(kinds)
                      if a not in plan.shown and a != plan.colour}
        self.itemsize = view.dtype.itemsize * (3 if plan.colour is not None else 1)

    def read(self, sel: dict[int, slice | int], order: Sequence[int]) -> np.ndarray:
        """``sel`` maps shown axes to a slice or an index; the result's axes are ``order``
        (the shown axes that got a slice), then colour."""
        key: list[slice | int] = []
        for a in range(len(self.shape)):
            if a in sel:
                key.append(sel[a])
            elif a == self.plan.colour:
                key.append(slice(0, 3))
            else:
                key.append(self.fixed[a])
        if self.c_order:
            got = np.asarray(self.view[tuple(key[::-1])]).T
        else:
            got = np.asarray(self.view[tuple(key)])
        kept = [a for a in range(len(self.shape)) if isinstance(key[a], slice)]
        want = [*order, *([self.plan.colour] if self.plan.colour is not None else [])]
        return _scalar(np.transpose(got, [kept.index(a) for a in want]))


def _kinds(header: Any, ndim: int) -> list[bool]:
    """Per axis: True for a domain axis."""
    from ..tiling.kinds import axis_kinds, is_domain

    return [is_domain(k) for k in axis_kinds(header, ndim)]


def _scalar(a: np.ndarray) -> np.ndarray:
    """Values a picture can show: complex as magnitude, booleans as 0/1."""
    if a.dtype.kind == "c":
        return np.abs(a)
    if a.dtype.kind == "b":
        return a.astype(np.uint8)
    return a


def _nearest(n: int, pixels: int) -> np.ndarray:
    """For each of ``pixels`` pixels across an axis of ``n`` voxels, the voxel under its
    centre (nearest-neighbour resampling)."""
    return np.minimum(((np.arange(pixels) + 0.5) * (n / pixels)).astype(np.int64), n - 1)


def _picks(n: int, pixels: int) -> tuple[slice, np.ndarray]:
    """A strided slice over an axis of ``n`` voxels (at least ``pixels`` samples) and, for
    each pixel, the index of the sample nearest to the voxel under its centre."""
    step = max(1, n // pixels)
    count = len(range(0, n, step))
    return slice(0, n, step), np.minimum((2 * _nearest(n, pixels) + step) // (2 * step),
                                         count - 1)


def _resample(a: np.ndarray, pixels: Sequence[int]) -> np.ndarray:
    """Nearest-neighbour resampling of the first two axes of ``a`` to ``pixels``."""
    return a[_nearest(a.shape[0], pixels[0])][:, _nearest(a.shape[1], pixels[1])]


def _views(shown: Sequence[int]) -> list[tuple[int | None, int, int]]:
    """``(cut axis, column axis, row axis)`` of each view: for three axes the planes through
    the middle of the third, second and first shown axis; for two, one view."""
    if len(shown) == 2:
        return [(None, shown[0], shown[1])]
    x, y, z = shown
    return [(z, x, y), (y, x, z), (x, y, z)]


def _slices(r: _Reader) -> list[np.ndarray]:
    out = []
    pix = dict(zip(r.plan.shown, r.plan.pixels, strict=True))
    for cut, col, row in _views(r.plan.shown):
        rs, ri = _picks(r.shape[row], pix[row])
        cs, ci = _picks(r.shape[col], pix[col])
        sel: dict[int, slice | int] = {row: rs, col: cs}
        if cut is not None:
            sel[cut] = r.shape[cut] // 2
        out.append(r.read(sel, (row, col))[ri][:, ci])
    return out


def _slab(r: _Reader, axis: int, plane_voxels: int) -> int:
    """Slab thickness along ``axis`` for maximum projections."""
    plane = max(1, plane_voxels * r.itemsize)
    grid = r.view.level.grid
    if axis in grid.axes:
        tile = min(grid.tile[list(grid.axes).index(axis)], r.shape[axis])
        if tile * plane <= _SLAB_TILE_BYTES:
            return max(tile, _SLAB_BYTES // plane // tile * tile)
    return max(1, _SLAB_BYTES // plane)


def _projections(r: _Reader) -> list[np.ndarray]:
    """The maximum projections along each shown axis (NaN ignored unless a ray is all NaN),
    in the order of :func:`_views`."""
    x, y, z = r.plan.shown
    nx, ny, nz = r.shape[x], r.shape[y], r.shape[z]
    along_z = along_y = along_x = None
    step = _slab(r, z, nx * ny)
    for z0 in range(0, nz, step):
        z1 = min(nz, z0 + step)
        slab = r.read({x: slice(0, nx), y: slice(0, ny), z: slice(z0, z1)}, (y, x, z))
        mz = np.fmax.reduce(slab, axis=2)
        along_z = mz if along_z is None else np.fmax(along_z, mz)
        part_y, part_x = np.fmax.reduce(slab, axis=0), np.fmax.reduce(slab, axis=1)
        if along_y is None or along_x is None:
            along_y = np.empty((nx, nz, *slab.shape[3:]), dtype=part_y.dtype)
            along_x = np.empty((ny, nz, *slab.shape[3:]), dtype=part_x.dtype)
        along_y[:, z0:z1] = part_y
        along_x[:, z0:z1] = part_x
    assert along_z is not None and along_y is not None and along_x is not None
    pix = dict(zip(r.plan.shown, r.plan.pixels, strict=True))
    # rows, columns as in _views: (y, x), (z, x), (z, y)
    return [_resample(along_z, (pix[y], pix[x])),
            _resample(np.swapaxes(along_y, 0, 1), (pix[z], pix[x])),
            _resample(np.swapaxes(along_x, 0, 1), (pix[z], pix[y]))]


def _side_by_side(pictures: Sequence[np.ndarray]) -> np.ndarray:
    """The views left to right, top-aligned, ``GAP`` black pixels apart."""
    height = max(p.shape[0] for p in pictures)
    width = sum(p.shape[1] for p in pictures) + GAP * (len(pictures) - 1)
    out = np.zeros((height, width, 3), dtype=np.uint8)
    x = 0
    for p in pictures:
        out[: p.shape[0], x : x + p.shape[1]] = p
        x += p.shape[1] + GAP
    return out

