"""Array indices beyond the basic ones: orthogonal indexing (``vol.oindex``) and NumPy's
advanced indexing with ONE array index (``vol[[1, 5, 9], :, 3]``).

Both read an *orthogonal block* first: per axis, the sorted distinct indices the key touches.
A block whose every axis is an arithmetic progression goes through the basic read
(``Volume._read``); any other is read tile by tile here, decoding each touched tile once and
gathering its needed voxels, so tiles between the indices are never read. The block is then
indexed in memory with positions into it: ``np.ix_``-like for ``oindex``, and for ``[]`` the
key itself, remapped, so that NumPy places the axes exactly as it would on the whole array.

Several array indices in ``[]`` (NumPy pairs them point by point) are refused with an
``IndexError`` pointing at ``oindex``: their orthogonal block can be far larger than the
result (``n`` points over 3 axes touch up to ``n**3`` voxels), and Dask refuses them too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from itertools import product
from typing import Any, SupportsIndex, overload

import numpy as np

from .._threads import run_each
from ..errors import JnrrdError, SelectionError, no_such_level, where
from ..tiling.grid import (
    AxisSel,
    expand_key,
    is_bool_scalar,
    out_of_bounds,
    plain_key,
    plain_selection,
    selection_with_booleans,
)

__all__ = ["Levels", "OIndex", "finish_basic", "has_array_index", "no_such_level",
           "numpy_getitem", "orthogonal_getitem", "planes_read", "read_into"]

_ARRAYLIKE = (list, tuple, range, np.ndarray)
_ALL = slice(None)
#: raw blocks up to this size are gathered in the calling thread
_INLINE_RAW_BYTES = 8 << 20


class OIndex:
    """``view.oindex[key]``: orthogonal (outer) indexing, zarr's ``oindex`` semantics.

    Per axis: an int (the axis is dropped), a slice (any step, negative too), a 1-D list or
    array of ints (any order, repeats and negative values allowed) or a 1-D boolean mask as
    long as the axis; ``...`` fills the rest. Each axis is indexed on its own: the result is
    ``np.asarray(view)[np.ix_(...)]`` (ints dropping their axis), read tile by tile.
    """

    __slots__ = ("_view",)

    def __init__(self, view: Any) -> None:
        self._view = view

    def __getitem__(self, key: Any) -> np.ndarray:
        return orthogonal_getitem(self._view, key)

    def __repr__(self) -> str:
        return f"<oindex of {self._view!r}>"


class Levels(tuple[Any, ...]):
    """``vol.levels``: the level views, level 0 first (a tuple); a level that does not exist
    is a :class:`~jnrrd.errors.SelectionError` (also an ``IndexError``) naming the file."""

    __slots__ = ()

    @overload
    def __getitem__(self, k: SupportsIndex) -> Any: ...

    @overload
    def __getitem__(self, k: slice) -> tuple[Any, ...]: ...

    def __getitem__(self, k: SupportsIndex | slice) -> Any:
        try:
            return super().__getitem__(k)
        except IndexError:
            name = super().__getitem__(0).volume.name
            raise no_such_level(name, k, len(self)) from None


# -- keys ---------------------------------------------------------------------------------------
def _array(k: Any, source: Any = None) -> np.ndarray | None:
    """``k`` as an index array (ndim >= 1), or None when it is not one."""
    if not isinstance(k, _ARRAYLIKE):
        return None
    a = np.asarray(k)
    if a.ndim == 0:
        return None
    if a.size == 0 and a.dtype.kind not in "biu":
        a = a.astype(np.intp)  # [] is float64 to NumPy's asarray, an empty index here
    if a.dtype.kind not in "biu":
        raise SelectionError(f"{where(source)}arrays used as indices must be of integer (or "
                             f"boolean) type, got {a.dtype}")
    return a


def finish_basic(out: np.ndarray, sel: tuple[AxisSel, ...], c_order: bool) -> np.ndarray:
    """A basic selection's array (read in ascending header order) as the caller asked for
    it: reversed axes flipped, the caller's axis order, integer-indexed axes dropped."""
    flip = drop = False
    for s in sel:
        if s.reverse:
            flip = True
        if s.drop:
            drop = True
    if flip:
        out = out[tuple(slice(None, None, -1) if s.reverse else slice(None) for s in sel)]
    if drop:  # (in header order: the dropped axes are single)
        out = out[tuple([0 if s.drop else _ALL for s in sel])]
    return out.T if c_order else out


def read_into(view: Any, key: Any, out: Any) -> np.ndarray:
    """``view[key]`` written into the caller's array ``out`` (``LevelView.read(key, out=)``).

    A basic key (ints, slices, ``...``) is read straight into ``out``: the engine fills a view
    of ``out`` in header order with the integer-indexed axes put back as length-1 axes and the
    reversed ones flipped (:func:`finish_basic` undone), so nothing else is allocated. Other
    keys are read, then copied. ``out`` must be a writeable ``numpy.ndarray`` of exactly the
    result's shape and dtype (any memory layout): else ``TypeError`` or ``JnrrdError``."""
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray, got {type(out).__name__}")
    vol, level = view.volume, view.level
    sel: tuple[AxisSel, ...] | None = None
    if plain_key(key):
        shape = level.shape
        sel = plain_selection(key, shape[::-1] if view.c_order else shape, vol.name)
    elif not has_array_index(key):
        sel, rest = selection_with_booleans(key, view.shape, vol.name)
        sel = sel if rest is None else None
    if sel is None:  # boolean scalars or an array index: NumPy's indexing, then a copy
        data = view[key]
        _check_out(vol, out, data.shape, data.dtype)
        np.copyto(out, data)
        return out
    shape = tuple(s.count for s in sel if not s.drop)  # (``sel``: in the caller's axis order)
    _check_out(vol, out, shape, view.dtype)
    header_order = sel[::-1] if view.c_order else sel
    target = out.T if view.c_order else out
    dropped = tuple(k for k, s in enumerate(header_order) if s.drop)
    if dropped:
        target = np.expand_dims(target, dropped)
    if any(s.reverse for s in header_order):
        target = target[tuple(slice(None, None, -1) if s.reverse else _ALL
                              for s in header_order)]
    whole = all(s.start == 0 and s.step == 1 and s.count == n and not s.reverse
                for s, n in zip(header_order, level.shape, strict=True))
    if whole and not vol.tiled:  # the whole section decoded (or read) straight into ``out``
        vol._check_open()
        vol._untiled.full(target)
    else:
        vol._read(level, header_order, target)
    return out


def _check_out(vol: Any, out: np.ndarray, shape: tuple[int, ...], dtype: np.dtype) -> None:
    if out.shape != shape or out.dtype != dtype or not out.flags.writeable:
        have = "read-only" if not out.flags.writeable else f"shape {out.shape} {out.dtype}"
        raise JnrrdError(f"{where(vol.name, 'out')}expected a writeable array of shape "
                         f"{shape} and dtype {dtype}, got {have}")


def has_array_index(key: Any) -> bool:
    """Whether a ``[]`` key holds a list, tuple or array index (NumPy's advanced indexing)."""
    parts = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, _ARRAYLIKE) and np.ndim(k) > 0 for k in parts)


def _expand(parts: tuple[Any, ...], ndim: int, width: Callable[[Any], int],
            source: Any = None) -> list[Any]:
    """The key with ``...`` replaced by full slices (``width``: axes an item consumes)."""
    n_ell = sum(1 for k in parts if k is Ellipsis)
    used = sum(width(k) for k in parts if k is not Ellipsis)
    # the errors, and messages, of a basic index (one place: tiling.grid.expand_key)
    if n_ell > 1 or any(k is None for k in parts):
        expand_key(parts, ndim, source)  # raises: np.newaxis, or two ellipses
    if used > ndim:
        expand_key((0,) * used, ndim, source)  # raises: too many indices
    fill: list[Any] = [slice(None)] * (ndim - used)
    out: list[Any] = []
    for k in parts:
        out += fill if k is Ellipsis else [k]
    return out if n_ell else out + fill


def _int(k: Any, n: int, axis: int, source: Any = None) -> int:
    try:
        i = k.__index__()
    except AttributeError:
        raise SelectionError(f"{where(source, f'axis {axis}')}only integers, slices, '...', "
                             "lists, integer and boolean arrays are valid indices, got "
                             f"{type(k).__name__} {k!r:.40}") from None
    if not -n <= i < n:
        raise out_of_bounds(source, axis, i, n)
    return i % n


def _slice(k: slice, n: int, axis: int, source: Any = None) -> tuple[np.ndarray, slice]:
    """(sorted indices, position key into them) of a slice."""
    try:
        r = range(*k.indices(n))
    except (ValueError, TypeError) as e:  # a zero step; a bound that is no integer
        raise SelectionError(f"{where(source, f'axis {axis}')}slice {k}: {e} (expected "
                             "integer bounds and a nonzero step)") from None
    if r.step > 0 or len(r) == 0:
        return np.arange(r.start, r.stop, r.step, dtype=np.intp), slice(None)
    return np.arange(r.start, r.stop, r.step, dtype=np.intp)[::-1], slice(None, None, -1)


def _ints(a: np.ndarray, n: int, axis: int, source: Any = None
          ) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct indices, positions of ``a``'s entries in them) of an int array."""
    a = a.astype(np.intp, copy=False)
    if a.size and (a.min() < -n or a.max() >= n):
        raise out_of_bounds(source, axis, a[(a < -n) | (a >= n)][0], n)
    a = np.where(a < 0, a + n, a)
    uniq, inv = np.unique(a, return_inverse=True)
    return uniq, inv.reshape(a.shape)


def orthogonal_getitem(view: Any, key: Any) -> np.ndarray:
    """``view.oindex[key]`` (see :class:`OIndex`)."""
    name = view.volume.name
    parts = _expand(key if isinstance(key, tuple) else (key,), view.ndim, lambda k: 1, name)
    sets: list[np.ndarray] = []
    picks: list[Any] = []
    for axis, (k, n) in enumerate(zip(parts, view.shape, strict=True)):
        p: Any
        at = where(name, f"axis {axis}")
        if is_bool_scalar(k):
            raise SelectionError(f"{at}oindex takes no boolean scalars (they add an axis); "
                                 "index the result instead")
        a = _array(k, name)
        if isinstance(k, slice):
            s, p = _slice(k, n, axis, name)
        elif a is None:
            s, p = np.array([_int(k, n, axis, name)], dtype=np.intp), 0
        elif a.ndim != 1:
            raise SelectionError(f"{at}oindex takes 1-D index arrays, got {a.ndim}-D")
        elif a.dtype == np.bool_:
            if len(a) != n:
                raise SelectionError(f"{at}boolean index of length {len(a)} does not match "
                                     f"the axis size {n}")
            s, p = np.flatnonzero(a), slice(None)
        else:
            s, p = _ints(a, n, axis, name)
        sets.append(s)
        picks.append(p)
    block = read_block(view, sets)
    block = block[tuple(0 if isinstance(p, int) else slice(None) for p in picks)]
    for axis, p in enumerate(p for p in picks if not isinstance(p, int)):
        if isinstance(p, slice):
            if p != slice(None):
                block = block[(slice(None),) * axis + (p,)]
        elif not np.array_equal(p, np.arange(len(p))):
            block = np.take(block, p, axis=axis)
    return block


def numpy_getitem(view: Any, key: Any) -> np.ndarray:
    """``view[key]`` for a key with one array index (list, tuple, int or boolean array of any
    shape), with NumPy's semantics; ints, slices, ``...`` and boolean scalars around it too."""
    name = view.volume.name
    parts = key if isinstance(key, tuple) else (key,)
    arrays = [a for a in (_array(k, name) for k in parts) if a is not None]
    if len(arrays) > 1:
        raise SelectionError(
            f"{where(name)}{len(arrays)} array indices: jnrrd volumes take one (NumPy would "
            "pair several "
            "point by point, reading their whole outer product); use vol.oindex[...] for "
            "orthogonal indexing (each array indexes its own axis), then index the result")

    def width(k: Any) -> int:
        if is_bool_scalar(k):
            return 0
        a = _array(k, name)
        return a.ndim if a is not None and a.dtype == np.bool_ else 1

    expanded = _expand(parts, view.ndim, width, name)
    sets: list[np.ndarray] = []
    remapped: list[Any] = []
    for k in expanded:
        axis = len(sets)
        p: Any
        if is_bool_scalar(k):
            remapped.append(k)  # consumes no axis: NumPy places it on the block as on the whole
            continue
        a = _array(k, name)
        if isinstance(k, slice):
            s, p = _slice(k, view.shape[axis], axis, name)
            sets.append(s)
            remapped.append(p)
        elif a is None:
            sets.append(np.array([_int(k, view.shape[axis], axis, name)], dtype=np.intp))
            remapped.append(0)  # an int: with an array index NumPy broadcasts it as one
        elif a.dtype == np.bool_:
            shape = view.shape[axis: axis + a.ndim]
            if a.shape != shape:
                raise SelectionError(f"{where(name, f'axis {axis}')}boolean index of shape "
                                     f"{a.shape} does not match the indexed axes {shape}")
            for j, nz in enumerate(np.nonzero(a)):  # NumPy: a mask is its nonzero() arrays
                s, p = _ints(nz, shape[j], axis + j, name)
                sets.append(s)
                remapped.append(p)
        else:
            s, p = _ints(a, view.shape[axis], axis, name)
            sets.append(s)
            remapped.append(p)
    return read_block(view, sets)[tuple(remapped)]


# -- the orthogonal block -------------------------------------------------------------------
def _progression(s: np.ndarray) -> AxisSel | None:
    """Sorted distinct indices as an ascending progression, or None."""
    if len(s) <= 1:
        return AxisSel(int(s[0]) if len(s) else 0, 1, len(s))
    d = np.diff(s)
    if np.all(d == d[0]):
        return AxisSel(int(s[0]), int(d[0]), len(s))
    return None


def _as_slice(loc: np.ndarray) -> slice | None:
    p = _progression(loc)
    return None if p is None else slice(p.start, p.start + p.step * (p.count - 1) + 1, p.step)


def _gather(x: np.ndarray, locs: list[np.ndarray]) -> np.ndarray:
    """``x[np.ix_(*locs)]`` with slices where the indices are progressions."""
    basic, takes = [], []
    for axis, loc in enumerate(locs):
        sl = _as_slice(loc)
        if sl is None:
            basic.append(slice(int(loc[0]), int(loc[-1]) + 1))
            takes.append((axis, loc - loc[0]))
        else:
            basic.append(sl)
    x = x[tuple(basic)]
    for axis, loc in takes:
        x = np.take(x, loc, axis=axis)
    return x


def read_block(view: Any, sets: list[np.ndarray]) -> np.ndarray:
    """The voxels at the outer product of ``sets`` (sorted distinct indices per axis, in the
    caller's axis order), reading only the tiles they touch."""
    vol, level = view._vol, view._level
    hsets = sets[::-1] if view.c_order else sets
    sels = [_progression(s) for s in hsets]
    if all(s is not None for s in sels):
        out = vol._read(level, tuple(sels))
    elif not vol.tiled:
        out = _untiled_block(vol, hsets)
    else:
        out = _tiled_block(vol, level, hsets)
    return out.T if view.c_order else out


def _untiled_block(vol: Any, sets: list[np.ndarray]) -> np.ndarray:
    """Untiled data has no tiles: read the bounding progression of each axis, then gather."""
    sels = []
    for s in sets:
        step = math.gcd(*(int(d) for d in np.diff(s))) if len(s) > 1 else 1
        sels.append(AxisSel(int(s[0]) if len(s) else 0, step or 1, 0 if not len(s) else
                            (int(s[-1]) - int(s[0])) // (step or 1) + 1))
    box = vol._read(vol._levels[0], tuple(sels))
    if box.size == 0:
        return np.empty([len(s) for s in sets], dtype=vol.dtype, order="F")
    return _gather(box, [(s - sel.start) // sel.step for s, sel in zip(sets, sels, strict=True)])


def _runs(s: np.ndarray, size: int) -> list[tuple[int, int, int]]:
    """(tile, first, stop) positions of sorted indices ``s`` grouped by tile of ``size``."""
    t = s // size
    cut = (np.flatnonzero(np.diff(t)) + 1).tolist()
    return [(int(t[i0]), i0, i1) for i0, i1 in zip([0, *cut], [*cut, len(s)], strict=True)]


def _tiled_block(vol: Any, level: Any, sets: list[np.ndarray]) -> np.ndarray:
    counts = [len(s) for s in sets]
    vol._policy.check_bytes(math.prod(counts) * vol.dtype.itemsize, "the selection", vol.name)
    out = np.empty(counts, vol.dtype, order="F")
    if out.size == 0:
        return out
    grid = level.grid
    per_axis = [_runs(sets[a], grid.tile[k]) for k, a in enumerate(grid.axes)]
    fill = vol._fill_value()
    dec = vol._decoder

    def task(combo: tuple[tuple[int, int, int], ...]) -> Callable[[], None]:
        coords = tuple(c[0] for c in combo)
        dst: list[slice] = [slice(None)] * len(sets)
        for (_, i0, i1), a in zip(combo, grid.axes, strict=True):
            dst[a] = slice(i0, i1)
        locs = [s[d] for s, d in zip(sets, dst, strict=True)]

        def run() -> None:
            if level.stored:
                los = [lo for lo, _ in grid.stored_bounds(coords)]
                tile = vol._decoded(level, coords, int(locs[-1][-1] - los[-1]) + 1)
            else:
                los = [r.start for r in grid.core(coords)]
                tile = vol._virtual_core(level, coords)
            if tile is None:
                out[tuple(dst)] = fill
            else:
                out[tuple(dst)] = _gather(tile, [c - lo for c, lo in zip(locs, los,
                                                                          strict=True)])
        return run

    # virtual levels compute tiles from level 0 (itself a parallel read): one at a time
    inline = not level.stored or (dec.raw and out.nbytes <= _INLINE_RAW_BYTES)
    combos: Iterator[Any] = product(*per_axis)
    if inline:
        for c in combos:
            task(c)()
    else:  # each thread takes the next tile as it comes free (no task list per tile)
        run_each(combos, lambda c: task(c)(), threads=vol._policy.io.threads)
    return out


def planes_read(last: Any) -> int | None:
    """How many leading indices of a tile's last axis the selection ``last`` reads."""
    if isinstance(last, slice):
        start, stop, step = last.start, last.stop, last.step
        if (step is None or step > 0) and stop is not None and stop >= 0 and (
                start is None or start >= 0):
            return stop
        if step is not None and step < 0 and start is not None and start >= 0:
            return start + 1
        return None
    if isinstance(last, (int, np.integer)) and last >= 0:
        return int(last) + 1
    return None
