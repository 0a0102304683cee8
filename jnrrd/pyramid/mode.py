"""Exact block modes (CONVENTIONS §3: most frequent level-0 value, ties to the smallest).

Only *mixed* blocks (minimum != maximum) need counting; the others are their minimum. The
members of the mixed blocks are gathered with one ``take`` per block position from the flat
level-0 array, so the cost follows the number of mixed blocks, not the volume:

- up to 8 members of an integer type: pairwise equality counts, one comparison per member pair
  over all mixed blocks at once;
- otherwise: each block's members sorted in a row, the longest run wins (the first such run,
  i.e. the smallest value, on a tie).

When a finer level's block minima/maxima are known (``children``), a mixed block is assembled
child by child: a uniform child contributes its value ``prod(child block)`` times without
touching level 0, and only the members of mixed children are gathered.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import product

import numpy as np

__all__ = ["block_mode"]

#: largest block counted pairwise (m * (m - 1) / 2 comparisons per mixed block)
_PAIRWISE = 8


def _flat(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A C-contiguous ``x`` as a flat view and its element strides."""
    strides = np.array([st // x.itemsize if n > 1 else 0
                        for st, n in zip(x.strides, x.shape, strict=True)], np.intp)
    return x.reshape(-1), strides


def _bases(where: tuple[np.ndarray, ...], steps: np.ndarray) -> np.ndarray:
    """Flat offsets ``sum(i_d * steps_d)`` of the level voxels at indices ``where``."""
    base = where[0] * steps[0]
    for w, st in zip(where[1:], steps[1:], strict=True):
        base += w * st
    return base


def _offsets(block: Sequence[int], strides: np.ndarray) -> list[int]:
    """Flat offsets of the members of a block starting at index 0, in C order of the block."""
    return [int(np.dot(o, strides)) for o in product(*(range(b) for b in block))]


def _mode_sorted(rows: np.ndarray) -> np.ndarray:
    """Mode of each sorted row (ties to the smallest value), without a loop over rows."""
    k, m = rows.shape
    flat = rows.reshape(-1)
    new = np.ones(flat.shape, dtype=bool)
    # A run starts at each row start and wherever the value changes (NaN != NaN: own runs).
    np.not_equal(flat[1:], flat[:-1], out=new[1:])
    new[::m] = True
    starts = np.flatnonzero(new)
    lengths = np.diff(starts, append=flat.size)
    row_first = np.flatnonzero(starts % m == 0)
    best = np.maximum.reduceat(lengths, row_first)
    run_row = np.repeat(np.arange(k), np.diff(row_first, append=starts.size))
    cand = np.flatnonzero(lengths == best[run_row])
    # Runs are in ascending value order within a row: the first candidate is the smallest.
    first = cand[np.r_[True, run_row[cand[1:]] != run_row[cand[:-1]]]]
    return flat[starts[first]]


def _mode_pairwise(cols: np.ndarray) -> np.ndarray:
    """Mode of each column of an integer ``(m, n)`` array by pairwise equality counts."""
    m = cols.shape[0]
    counts = np.ones(cols.shape, dtype=np.uint8)
    eq = np.empty(cols.shape[1], dtype=bool)
    for i in range(m):
        for j in range(i + 1, m):
            np.equal(cols[i], cols[j], out=eq)
            counts[i] += eq
            counts[j] += eq
    best = counts.max(axis=0)
    big = np.iinfo(cols.dtype).max
    return np.where(counts == best, cols, big).min(axis=0)


def _mode_rows(rows: np.ndarray) -> np.ndarray:
    """Mode of each row of a ``(n, m)`` array."""
    if rows.shape[1] <= _PAIRWISE and rows.dtype.kind in "iub":
        return _mode_pairwise(np.ascontiguousarray(rows.T))
    return _mode_sorted(np.sort(rows, axis=1))


def _gather(flat: np.ndarray, base: np.ndarray, offsets: Sequence[int],
            out: np.ndarray) -> None:
    """``out[:, c] = flat[base + offsets[c]]`` (``out`` is ``(len(base), len(offsets))``)."""
    idx = np.empty_like(base)
    col = np.empty(base.shape, flat.dtype)
    for c, off in enumerate(offsets):
        np.add(base, off, out=idx)
        np.take(flat, idx, out=col, mode="clip")  # in range by construction; no buffering
        out[:, c] = col


def _mixed_modes(x: np.ndarray, block: tuple[int, ...], where: tuple[np.ndarray, ...]
                 ) -> np.ndarray:
    """Modes of the blocks at level indices ``where``, counted from all their members."""
    flat, strides = _flat(x)
    base = _bases(where, strides * np.array(block, np.intp))
    offsets = _offsets(block, strides)
    n, m = len(base), len(offsets)
    if m <= _PAIRWISE and x.dtype.kind in "iub":
        cols = np.empty((m, n), x.dtype)
        _gather(flat, base, offsets, cols.T)
        return _mode_pairwise(cols)
    rows = np.empty((n, m), x.dtype)
    _gather(flat, base, offsets, rows)
    return _mode_sorted(np.sort(rows, axis=1))


#: widest value range (max - min + 1) of a mixed block counted by histogram
_HISTOGRAM = 64


def _children(x: np.ndarray, block: tuple[int, ...], where: tuple[np.ndarray, ...],
              rel: tuple[int, ...], child_lo: np.ndarray, child_hi: np.ndarray):
    """Per child of the blocks at ``where``: its minimum, whether it is uniform, and a function
    gathering the level-0 members of some of those children as ``(k, child members)`` rows."""
    sub = tuple(b // r for b, r in zip(block, rel, strict=True))
    flat, strides = _flat(x)
    clo, cstrides = _flat(np.ascontiguousarray(child_lo))
    chi = np.ascontiguousarray(child_hi).reshape(-1)
    base = _bases(where, strides * np.array(block, np.intp))
    cbase = _bases(where, cstrides * np.array(rel, np.intp))
    offsets = _offsets(sub, strides)
    idx = np.empty_like(cbase)
    for r in product(*(range(k) for k in rel)):
        np.add(cbase, int(np.dot(r, cstrides)), out=idx)
        lo = clo.take(idx, mode="clip")
        uniform = lo == chi.take(idx, mode="clip")
        shift = int(np.dot(np.multiply(r, sub), strides))

        def members(sel: np.ndarray, shift: int = shift) -> np.ndarray:
            part = np.empty((sel.size, len(offsets)), x.dtype)
            _gather(flat, base[sel] + shift, offsets, part)
            return part

        yield lo, uniform, members


def _mixed_modes_children(x: np.ndarray, block: tuple[int, ...], where: tuple[np.ndarray, ...],
                          rel: tuple[int, ...], child_lo: np.ndarray, child_hi: np.ndarray,
                          lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Like :func:`_mixed_modes`, reading level 0 only for the mixed children.

    ``lo``/``hi`` are the minima/maxima of the blocks at ``where``. Small-range integer blocks
    are counted in a ``(block, value - minimum)`` histogram where a uniform child adds its
    member count in one step; others are sorted row by row.
    """
    n = len(where[0])
    msub = math.prod(block) // math.prod(rel)
    small = x.dtype.kind in "iub" and x.dtype.itemsize <= 4
    if small:
        lo64 = lo.astype(np.int64)
        width = int((hi.astype(np.int64) - lo64).max()) + 1
        small = width <= _HISTOGRAM
    if small:
        counts = np.zeros(n * width, np.float64)
        row = np.arange(n, dtype=np.int64) * width - lo64  # key = row + value
        for clo, uniform, members in _children(x, block, where, rel, child_lo, child_hi):
            counts += np.bincount(row + clo, weights=uniform * float(msub), minlength=n * width)
            sel = np.flatnonzero(~uniform)
            if sel.size:
                keys = members(sel).astype(np.int64)
                keys += row[sel, None]
                counts += np.bincount(keys.reshape(-1), minlength=n * width)
        # argmax takes the first of equal counts: the smallest value
        return (lo64 + counts.reshape(n, width).argmax(axis=1)).astype(x.dtype)
    rows = np.empty((n, math.prod(rel), msub), x.dtype)
    for c, (clo, uniform, members) in enumerate(
            _children(x, block, where, rel, child_lo, child_hi)):
        rows[:, c, :] = clo[:, None]
        sel = np.flatnonzero(~uniform)
        if sel.size:
            rows[sel, c, :] = members(sel)
    return _mode_rows(rows.reshape(n, -1))


def block_mode(x: np.ndarray, block: Sequence[int], lo: np.ndarray | None = None,
               hi: np.ndarray | None = None, *,
               children: tuple[Sequence[int], np.ndarray, np.ndarray] | None = None
               ) -> np.ndarray:
    """Most frequent value of each block, ties to the smallest (CONVENTIONS §3).

    ``x`` starts on a block boundary; the result has ``x.shape // block`` voxels. ``lo``/``hi``
    are the block minima/maxima when already known: blocks with ``lo == hi`` are uniform and
    need no counting. ``children = (rel, child_lo, child_hi)`` gives the minima/maxima of a
    finer level whose blocks tile these ones ``rel`` times per axis, so that uniform children
    are counted without reading level 0. The result only holds values of ``x``.
    """
    from .blocks import block_max, block_min

    block = tuple(int(b) for b in block)
    if math.prod(block) == 1:
        return np.array(x[tuple(slice(0, n) for n in x.shape)], copy=True)
    if lo is None or hi is None:
        lo, hi = block_min(x, block), block_max(x, block)
    # NaN blocks compare unequal and are counted (each NaN is its own run: never the mode
    # unless every value is NaN).
    mixed = lo != hi
    out = np.array(lo, copy=True)
    if not mixed.any():
        return out
    # Work with the axes in memory order (largest stride first) so that the mixed blocks are
    # visited, and their members gathered, nearly sequentially.
    if not (x.flags.c_contiguous or x.flags.f_contiguous):
        x = np.ascontiguousarray(x)
    order = sorted(range(x.ndim), key=lambda d: -x.strides[d])
    xp, mp = x.transpose(order), mixed.transpose(order)
    bp = tuple(block[d] for d in order)
    where = np.nonzero(mp)
    if children is not None:
        rel = tuple(int(children[0][d]) for d in order)
        modes = _mixed_modes_children(xp, bp, where, rel, children[1].transpose(order),
                                      children[2].transpose(order),
                                      lo.transpose(order)[where], hi.transpose(order)[where])
    else:
        modes = _mixed_modes(xp, bp, where)
    out.transpose(order)[where] = modes
    return out
