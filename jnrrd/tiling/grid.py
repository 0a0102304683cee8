"""The tile grid of one level: counts, core and stored extents, and selection mapping.

docs/format.md#tiling and docs/format.md#tile-geometry. Everything is rank-generic: ``shape`` covers
all axes (header order, axis 0 fastest); ``axes`` lists the tiled axes (``tile:dimensions``,
strictly increasing) and ``tile``/``overlap`` are positional over them. The linear tile index has
the first tiled axis fastest: ``idx = Σ_k t_k · Π_{j<k} G_j``.

Stored extent of tile coordinate t along a tiled axis (stride T, halo O, length N):
``variable``: ``[max(0, tT − O), min(N, (t+1)T + O))``; ``pad``: ``[tT − O, (t+1)T + O)``,
always ``T + 2O`` long, positions outside ``[0, N)`` holding the padding value.
Untiled axes are whole inside every tile.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import product
from typing import Any, NamedTuple

import numpy as np

from ..errors import SelectionError, UnsupportedError, where

_new_tuple = tuple.__new__
#: selections whose tile range along an axis is at most this long precompute its pieces
_CACHED_AXIS_TILES = 1 << 16

__all__ = ["AxisSel", "Piece", "TileGrid", "normalize_selection", "out_of_bounds", "plain_key",
           "plain_selection", "selection_with_booleans"]


class AxisSel(NamedTuple):
    """The indices one axis of a basic selection picks, as an ascending progression.

    ``reverse`` says the caller asked for them in descending order (a negative step);
    ``drop`` says the axis was indexed by an integer and disappears from the result. (A named
    tuple: every read builds one per axis, so construction cost counts.)
    """

    start: int
    step: int
    count: int  # type: ignore[assignment]  # shadows tuple.count, which no caller uses
    reverse: bool = False
    drop: bool = False

    @property
    def last(self) -> int:
        return self.start + (self.count - 1) * self.step


def expand_key(key: object, ndim: int, source: object = None) -> tuple[Any, ...]:
    """``key`` as one entry per axis: ``...`` expanded, missing trailing axes as full slices.

    :class:`~jnrrd.errors.SelectionError` (also an ``IndexError``) for two ellipses or too
    many indices, :class:`~jnrrd.errors.UnsupportedError` for ``np.newaxis``; ``source``
    names the file in the message.
    """
    if not isinstance(key, tuple):
        key = (key,)
    n_ell = 0
    for k in key:  # one pass: every read comes here
        if k is None:
            raise UnsupportedError(f"{where(source)}np.newaxis is not supported when "
                                   "slicing a jnrrd volume; index the array read instead")
        n_ell += k is Ellipsis
    if n_ell > 1:
        raise SelectionError(f"{where(source)}an index can only have a single ellipsis "
                             f"('...'), found {n_ell}")
    used = len(key) - n_ell
    if used > ndim:
        raise SelectionError(f"{where(source)}too many indices: the volume has {ndim} axes, "
                             f"but {used} were indexed")
    if n_ell:
        i = next(j for j, k in enumerate(key) if k is Ellipsis)
        key = key[:i] + (slice(None),) * (ndim - used) + key[i + 1 :]
    return key + (slice(None),) * (ndim - len(key))


def out_of_bounds(source: object, axis: int, index: object, n: int) -> SelectionError:
    """The error for ``index`` outside an axis of length ``n`` (NumPy's rule: -n..n-1)."""
    return SelectionError(f"{where(source, f'axis {axis}')}index {index} is out of bounds "
                          f"for size {n} (valid: -{n}..{n - 1})")


def normalize_selection(key: object, shape: tuple[int, ...], source: object = None
                        ) -> tuple[AxisSel, ...]:
    """Turn a basic NumPy index (ints, slices of any step, ``...``) into one AxisSel per axis.

    Out-of-range or unsupported keys raise :class:`~jnrrd.errors.SelectionError` (also an
    ``IndexError``, as NumPy raises) naming ``source``, the axis and the valid range.
    """
    return _axis_sels(expand_key(key, len(shape), source), shape, source)


def plain_selection(key: object, shape: tuple[int, ...], source: object = None
                    ) -> tuple[AxisSel, ...]:
    """:func:`normalize_selection` of a key :func:`plain_key` accepts (ints and slices)."""
    if type(key) is not tuple or len(key) != len(shape):
        key = expand_key(key, len(shape), source)
    return _axis_sels(key, shape, source)  # type: ignore[arg-type]


def _axis_sels(key: tuple[Any, ...], shape: tuple[int, ...], source: object = None
               ) -> tuple[AxisSel, ...]:
    """One AxisSel per entry of an expanded key (see :func:`normalize_selection`)."""
    out = []
    for axis in range(len(shape)):  # (as long as the key: the callers expanded it)
        k, n = key[axis], shape[axis]
        if type(k) is slice:  # (slice cannot be subclassed)
            if k.start is None and k.stop is None and k.step is None:
                out.append(_whole_axis(n))  # the most common entry
                continue
            try:
                start, stop, step = k.indices(n)
            except (ValueError, TypeError) as e:  # a zero step; a bound that is no integer
                raise SelectionError(f"{where(source, f'axis {axis}')}slice {_shown(k)}: "
                                     f"{e} (expected integer bounds and a nonzero step)"
                                     ) from None
            count = len(range(start, stop, step))
            if step > 0 or count == 0:
                out.append(AxisSel(start if count else 0, abs(step), count))
            else:
                last = start + (count - 1) * step
                out.append(AxisSel(last, -step, count, reverse=True))
            continue
        i = k if type(k) is int else _as_index(k, source, axis)
        if not -n <= i < n:
            raise out_of_bounds(source, axis, i, n)
        out.append(_new_tuple(AxisSel, (i % n, 1, 1, False, True)))  # dropped (no __new__)
    return tuple(out)


@lru_cache(maxsize=256)
def _whole_axis(n: int) -> AxisSel:
    """The selection of a whole axis of length ``n`` (immutable: one per length)."""
    return AxisSel(0, 1, n)


def _shown(k: slice) -> str:
    """A slice as the caller wrote it (``::0``)."""
    return ":".join("" if v is None else repr(v) for v in (k.start, k.stop, k.step))


def _as_index(k: object, source: object = None, axis: int = 0) -> int:
    """An integer index that is not a plain ``int`` (NumPy integers, ``__index__``)."""
    if is_bool_scalar(k):
        raise SelectionError(f"{where(source, f'axis {axis}')}a boolean scalar index adds an "
                             f"axis; it is not the integer {int(bool(k))}")
    try:
        return k.__index__()  # type: ignore[attr-defined]
    except AttributeError:
        raise SelectionError(
            f"{where(source, f'axis {axis}')}only integers, slices, '...', lists and integer "
            f"or boolean arrays are valid indices, got {type(k).__name__} {k!r:.40}"
        ) from None


def plain_key(key: object) -> bool:
    """Whether a ``[]`` key is only ints and slices (no ``...``, booleans, arrays, newaxis):
    the common case, which needs none of the other checks."""
    if type(key) is tuple:
        return all(type(k) is int or type(k) is slice for k in key)
    return type(key) is int or type(key) is slice


def is_bool_scalar(k: object) -> bool:
    """A Python/NumPy boolean scalar (or 0-d boolean array): NumPy reads it as a new axis."""
    return isinstance(k, (bool, np.bool_)) or (
        isinstance(k, np.ndarray) and k.ndim == 0 and k.dtype == np.bool_)


def selection_with_booleans(key: object, shape: tuple[int, ...], source: object = None
                            ) -> tuple[tuple[AxisSel, ...], tuple[object, ...] | None]:
    """:func:`normalize_selection` for keys that may hold boolean scalars (NumPy semantics:
    ``a[True]`` adds a leading axis of length 1, ``a[False]`` one of length 0).

    Returns the selection to read and, when the key holds boolean scalars, the key NumPy then
    applies to the array read: integer-indexed axes are read as length-1 axes and indexed by
    0 there, so NumPy places the boolean axes exactly as it does on the whole array.
    """
    parts = key if isinstance(key, tuple) else (key,)
    if not any(is_bool_scalar(k) for k in parts):
        return normalize_selection(key, shape, source), None
    sel = normalize_selection(tuple(k for k in parts if not is_bool_scalar(k)), shape, source)
    rest = tuple(bool(k) if is_bool_scalar(k) else k if k is Ellipsis
                 else slice(None) if isinstance(k, slice) else 0 for k in parts)
    return tuple(s._replace(drop=False) for s in sel), rest


class Piece(NamedTuple):
    """One tile's contribution to a selection: where in the stored tile, where in the output
    (a named tuple: a read builds one per touched tile, so construction cost counts)."""

    coords: tuple[int, ...]
    src: tuple[slice, ...]
    dst: tuple[slice, ...]


@dataclass(frozen=True)
class TileGrid:
    """The tile grid of one level (all axes in header order)."""

    shape: tuple[int, ...]
    axes: tuple[int, ...]
    tile: tuple[int, ...]
    overlap: tuple[int, ...]
    edge: str = "pad"
    grid: tuple[int, ...] = field(init=False)
    ntiles: int = field(init=False)

    def __post_init__(self) -> None:
        grid = tuple(
            math.ceil(self.shape[a] / t) for a, t in zip(self.axes, self.tile, strict=True)
        )
        object.__setattr__(self, "grid", grid)
        object.__setattr__(self, "ntiles", math.prod(grid))

    # -- indices ----------------------------------------------------------------------------
    def index(self, coords: tuple[int, ...]) -> int:
        """Level-local linear index of tile ``coords`` (first tiled axis fastest)."""
        idx, mult = 0, 1
        for t, g in zip(coords, self.grid, strict=True):
            idx += t * mult
            mult *= g
        return idx

    def coords(self, index: int) -> tuple[int, ...]:
        """Inverse of :meth:`index`."""
        out = []
        for g in self.grid:
            index, t = divmod(index, g)
            out.append(t)
        return tuple(out)

    def all_coords(self) -> Iterator[tuple[int, ...]]:
        """Every tile coordinate in linear-index order."""
        for rev in product(*(range(g) for g in reversed(self.grid))):
            yield tuple(reversed(rev))

    # -- extents ----------------------------------------------------------------------------
    def core(self, coords: tuple[int, ...]) -> tuple[slice, ...]:
        """The tile's core region in level voxels, over all axes."""
        region = [slice(0, n) for n in self.shape]
        for k, a in enumerate(self.axes):
            t, size = coords[k], self.tile[k]
            region[a] = slice(t * size, min((t + 1) * size, self.shape[a]))
        return tuple(region)

    def stored_bounds(self, coords: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
        """``(start, stop)`` of the stored extent per axis; may leave ``[0, N)`` under pad."""
        bounds = [(0, n) for n in self.shape]
        for k, a in enumerate(self.axes):
            t, size, o, n = coords[k], self.tile[k], self.overlap[k], self.shape[a]
            lo, hi = t * size - o, (t + 1) * size + o
            if self.edge == "variable":
                lo, hi = max(0, lo), min(n, hi)
            bounds[a] = (lo, hi)
        return tuple(bounds)

    def stored_shape(self, coords: tuple[int, ...]) -> tuple[int, ...]:
        """Shape of the stored (encoded) tile array over all axes."""
        return tuple(hi - lo for lo, hi in self.stored_bounds(coords))

    def stored_voxels(self) -> np.ndarray:
        """Voxel count of every stored tile, in linear-index order (vectorised)."""
        counts = np.ones((1,), dtype=np.int64)
        untiled = 1
        for a, n in enumerate(self.shape):
            if a not in self.axes:
                untiled *= n
        for k, a in enumerate(self.axes):
            t = np.arange(self.grid[k], dtype=np.int64)
            size, o, n = self.tile[k], self.overlap[k], self.shape[a]
            lo, hi = t * size - o, (t + 1) * size + o
            if self.edge == "variable":
                lo, hi = np.maximum(lo, 0), np.minimum(hi, n)
            # first tiled axis fastest: it is the last factor of a C-order outer product
            counts = np.multiply.outer(hi - lo, counts)
        return counts.reshape(-1) * untiled

    def max_stored_shape(self) -> tuple[int, ...]:
        """The largest stored tile shape (that of an interior, or the only, tile)."""
        shape = list(self.shape)
        for k, a in enumerate(self.axes):
            full = self.tile[k] + 2 * self.overlap[k]
            shape[a] = full if self.edge == "pad" else min(full, self.shape[a])
        return tuple(shape)

    def stored_from_core(self, coords: tuple[int, ...]) -> tuple[slice, ...]:
        """Where the core region sits inside the stored tile."""
        core = self.core(coords)
        bounds = self.stored_bounds(coords)
        return tuple(
            slice(c.start - lo, c.stop - lo) for c, (lo, _) in zip(core, bounds, strict=True)
        )

    def valid_in_stored(self, coords: tuple[int, ...]) -> tuple[slice, ...]:
        """Where the in-volume voxels (core plus halo inside [0, N)) sit in the stored tile."""
        out = []
        for (lo, hi), n in zip(self.stored_bounds(coords), self.shape, strict=True):
            out.append(slice(max(lo, 0) - lo, min(hi, n) - lo))
        return tuple(out)

    def valid_region(self, coords: tuple[int, ...]) -> tuple[slice, ...]:
        """The volume region covered by the in-volume part of the stored tile."""
        return tuple(
            slice(max(lo, 0), min(hi, n))
            for (lo, hi), n in zip(self.stored_bounds(coords), self.shape, strict=True)
        )

    # -- selections -------------------------------------------------------------------------
    def pieces(self, sel: tuple[AxisSel, ...]) -> Iterator[Piece]:
        """The tiles a selection touches and, for each, the stored-tile and output slices.

        Output slices index an array of shape ``[s.count for s in sel]`` in ascending order
        (the caller flips reversed axes and drops integer axes afterwards).
        """
        if any(s.count == 0 for s in sel):
            return
        ranges: list[range | _Stepped] = []
        cached = []
        for k, a in enumerate(self.axes):
            s, size = sel[a], self.tile[k]
            # a step longer than a tile skips tiles: only the ones it lands on are walked
            # (10^7 one-voxel tiles under a 256-sample preview: 256 tiles, not 10^7)
            r = (_Stepped(s.start, s.step, s.count, size) if s.step > size
                 else range(s.start // size, s.last // size + 1))
            ranges.append(r)
            # options of an axis with few tiles are computed once; a huge tile axis is walked
            # lazily (memory stays O(ndim) whatever the tile count)
            cached.append([self._axis_piece(k, sel, t) for t in r]
                          if len(r) <= _CACHED_AXIS_TILES else None)
        if self.axes == tuple(range(len(sel))) and all(c is not None for c in cached):
            yield from _product_pieces(ranges, cached)
            return
        # Untiled axes: the whole axis is inside every tile, stored from 0.
        fixed_src = [slice(s.start, s.last + 1, s.step) for s in sel]
        fixed_dst = [slice(0, s.count) for s in sel]
        lengths = [len(r) for r in ranges]
        for n in range(math.prod(lengths)):
            src, dst, coords = list(fixed_src), list(fixed_dst), []
            for k, a in enumerate(self.axes):  # first tiled axis fastest
                n, j = divmod(n, lengths[k])
                c = cached[k]
                opt = c[j] if c is not None else self._axis_piece(k, sel, ranges[k][j])
                if opt is None:
                    break
                coords.append(ranges[k][j])
                src[a], dst[a] = opt
            else:
                yield Piece(tuple(coords), tuple(src), tuple(dst))

    def _axis_piece(self, k: int, sel: tuple[AxisSel, ...], t: int
                    ) -> tuple[slice, slice] | None:
        """(stored-tile slice, output slice) of tile ``t`` on tiled position ``k``, or None
        when the selection's step skips that tile."""
        a = self.axes[k]
        s, size, o, n = sel[a], self.tile[k], self.overlap[k], self.shape[a]
        lo_core, hi_core = t * size, min((t + 1) * size, n)
        i0 = max(0, -(-(lo_core - s.start) // s.step))
        i1 = min(s.count, -(-(hi_core - s.start) // s.step))
        if i0 >= i1:
            return None
        stored_lo = t * size - o
        if self.edge == "variable":
            stored_lo = max(0, stored_lo)
        first = s.start + i0 * s.step - stored_lo
        return slice(first, first + (i1 - i0 - 1) * s.step + 1, s.step), slice(i0, i1)

    def tiles_in_region(self, region: tuple[slice, ...]) -> Iterator[tuple[int, ...]]:
        """Tile coordinates whose core intersects a step-1 region (linear-index order)."""
        ranges = []
        for k, a in enumerate(self.axes):
            r, size = region[a], self.tile[k]
            if r.stop <= r.start:
                return
            ranges.append(range(r.start // size, (r.stop - 1) // size + 1))
        for rev in product(*reversed(ranges)):
            yield tuple(reversed(rev))


class _Stepped:
    """The tiles (stride ``size``) a progression ``start + i·step``, ``i < count``, lands on
    when ``step > size``: one tile per index, ascending (a lazy sequence, like ``range``)."""

    __slots__ = ("count", "size", "start", "step")

    def __init__(self, start: int, step: int, count: int, size: int) -> None:
        self.start, self.step, self.count, self.size = start, step, count, size

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, j: int) -> int:
        if not 0 <= j < self.count:
            raise IndexError(j)
        return (self.start + j * self.step) // self.size

    def __iter__(self) -> Iterator[int]:
        return ((self.start + j * self.step) // self.size for j in range(self.count))


def _product_pieces(ranges: list[range | _Stepped], options: list[Any]) -> Iterator[Piece]:
    """:meth:`TileGrid.pieces` when every axis is tiled in header order and its options are
    listed: the same pieces in the same order (first axis fastest), built by ``product`` and
    ``zip`` (a viewer's slice is dozens of pieces read again and again: their Python cost
    counts)."""
    per_axis = [[(t, o[0], o[1]) for t, o in zip(r, opts, strict=True) if o is not None]
                for r, opts in zip(ranges, options, strict=True)]
    for combo in product(*reversed(per_axis)):
        coords, src, dst = zip(*combo[::-1], strict=True)
        yield Piece(coords, src, dst)
