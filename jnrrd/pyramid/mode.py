"""Exact block modes (docs/pyramids.md#methods: most frequent level-0 value, ties to the smallest).

Only *mixed* blocks (minimum != maximum) need counting; the others are their minimum. The
members of the mixed blocks are gathered with one ``take`` per block position from the flat
level-0 array, in memory order and in batches, so the cost follows the number of mixed blocks,
not the volume:

- up to 8 members of an integer type: counting the block's minimum and maximum decides the
  (common) two-valued blocks; the others get pairwise equality counts;
- otherwise: each block's members sorted in a row, the longest run wins (the first such run,
  i.e. the smallest value, on a tie).

:func:`block_mode_tally` also returns each block's minimum, maximum and how often they occur.
Given those statistics of a finer level (``children``), a coarser mixed block is counted child
by child: a uniform or two-valued child adds its counts without touching level 0, and only the
members of the other children are gathered. Small value ranges are counted in a per-block
histogram, others by sorting rebuilt rows. Every count is a count of level-0 voxels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import product

import numpy as np

from .blocks import block_max, block_min

__all__ = ["block_mode", "block_mode_tally"]

#: level-0 members handled per batch of mixed blocks
_BATCH = 1 << 18
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


def _gather(flat: np.ndarray, base: np.ndarray, offsets: Sequence[int],
            out: np.ndarray) -> None:
    """``out[:, c] = flat[base + offsets[c]]`` (``out`` is ``(len(base), len(offsets))``)."""
    idx = np.empty_like(base)
    direct = out[:, 0].flags.c_contiguous if len(offsets) else False
    col = None if direct else np.empty(base.shape, flat.dtype)
    for c, off in enumerate(offsets):
        np.add(base, off, out=idx)
        # indices are in range by construction: mode="clip" skips the buffered bounds check
        if direct:
            np.take(flat, idx, out=out[:, c], mode="clip")
        else:
            np.take(flat, idx, out=col, mode="clip")
            out[:, c] = col


def _tally_rows(rows: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, ...]:
    """How often each row holds its minimum ``lo`` and its maximum ``hi``."""
    return (np.count_nonzero(rows == lo[:, None], axis=1),
            np.count_nonzero(rows == hi[:, None], axis=1))


def _mixed_modes(x: np.ndarray, block: tuple[int, ...], where: tuple[np.ndarray, ...],
                 lo: np.ndarray, hi: np.ndarray, tally: bool) -> tuple[np.ndarray, ...]:
    """Modes of the blocks at level indices ``where`` (minima ``lo``, maxima ``hi``), counted
    from all their members; with ``tally``, also how often each holds ``lo`` and ``hi``."""
    flat, strides = _flat(x)
    base = _bases(where, strides * np.array(block, np.intp))
    offsets = _offsets(block, strides)
    n, m = len(base), len(offsets)
    if m <= _PAIRWISE and x.dtype.kind in "iub":
        cols = np.empty((m, n), x.dtype)
        _gather(flat, base, offsets, cols.T)
        # Most mixed blocks hold two values: the more frequent of lo and hi (lo on a tie).
        nlo, nhi = np.zeros(n, np.uint8), np.zeros(n, np.uint8)
        eq = np.empty(n, bool)
        for c in cols:
            nlo += np.equal(c, lo, out=eq)
            nhi += np.equal(c, hi, out=eq)
        modes = np.where(nlo >= nhi, lo, hi)
        more = np.flatnonzero(nlo + nhi < m)  # three values or more: count pairwise
        if more.size:
            modes[more] = _mode_pairwise(cols[:, more])
        return (modes, nlo, nhi) if tally else (modes,)
    rows = np.empty((n, m), x.dtype)
    _gather(flat, base, offsets, rows)
    rows.sort(axis=1)
    return (_mode_sorted(rows), *(_tally_rows(rows, lo, hi) if tally else ()))


#: widest value range (max - min + 1) of a mixed block counted by histogram
_HISTOGRAM = 64


class _Children:
    """The children of the blocks at ``where``, as ``(n, children)`` arrays: minimum ``lo``,
    maximum ``hi``, how often each holds them (``nlo``/``nhi``), and the kind of child:
    ``uniform``, ``two``-valued (every member is ``lo`` or ``hi``), or neither, whose level-0
    members :meth:`members` gathers."""

    def __init__(self, x: np.ndarray, block: tuple[int, ...], where: tuple[np.ndarray, ...],
                 rel: tuple[int, ...], stats: Sequence[np.ndarray]) -> None:
        sub = tuple(b // r for b, r in zip(block, rel, strict=True))
        self.size = math.prod(sub)
        self.flat, strides = _flat(x)
        flats = [np.ascontiguousarray(a) for a in stats]
        cstrides = _flat(flats[0])[1]
        grid = list(product(*(range(k) for k in rel)))
        cidx = _bases(where, cstrides * np.array(rel, np.intp))[:, None] + np.array(
            [int(np.dot(r, cstrides)) for r in grid], np.intp)
        self.lo, self.hi, *counts = (a.reshape(-1).take(cidx, mode="clip") for a in flats)
        self.uniform = self.lo == self.hi
        if counts:
            self.nlo, self.nhi = counts
            self.two = ~self.uniform & (self.nlo + self.nhi == self.size)
        else:
            self.nlo = self.nhi = np.zeros(cidx.shape, np.int64)
            self.two = np.zeros(cidx.shape, bool)
        self.base = _bases(where, strides * np.array(block, np.intp))
        self.shift = np.array([int(np.dot(np.multiply(r, sub), strides)) for r in grid], np.intp)
        self.offsets = _offsets(sub, strides)

    def members(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(block row, child, level-0 members) of every child neither uniform nor two-valued."""
        pick = np.flatnonzero(~(self.uniform | self.two))
        blk, child = np.divmod(pick, self.uniform.shape[1])
        part = np.empty((blk.size, len(self.offsets)), self.flat.dtype)
        if blk.size:
            _gather(self.flat, self.base[blk] + self.shift[child], self.offsets, part)
        return blk, child, part


def _mixed_modes_children(x: np.ndarray, block: tuple[int, ...], where: tuple[np.ndarray, ...],
                          rel: tuple[int, ...], stats: Sequence[np.ndarray],
                          lo: np.ndarray, hi: np.ndarray, tally: bool
                          ) -> tuple[np.ndarray, ...]:
    """Like :func:`_mixed_modes`, from the children's statistics where they suffice.

    ``stats`` are the finer level's ``(lo, hi[, nlo, nhi])``. A uniform child counts as its
    value, a two-valued one as its minimum and maximum with their counts; only the others are
    read from level 0. Small-range integer blocks are counted in a ``(block, value - minimum)``
    histogram; others are rebuilt as rows and sorted.
    """
    n = len(where[0])
    kids = _Children(x, block, where, rel, stats)
    blk, child, part = kids.members()
    small = x.dtype.kind in "iub" and x.dtype.itemsize <= 4
    if small:
        lo64 = lo.astype(np.int64)
        width = int((hi.astype(np.int64) - lo64).max()) + 1
        small = width <= _HISTOGRAM
    if small:
        row = np.arange(n, dtype=np.int64) * width - lo64  # key = row + value
        size = n * width
        w_lo = np.where(kids.uniform, kids.size, np.where(kids.two, kids.nlo, 0))
        counts = np.bincount((row[:, None] + kids.lo).reshape(-1),
                             weights=w_lo.reshape(-1).astype(np.float64), minlength=size)
        w_hi = np.where(kids.two, kids.nhi, 0)
        counts += np.bincount((row[:, None] + kids.hi).reshape(-1),
                              weights=w_hi.reshape(-1).astype(np.float64), minlength=size)
        keys = part.astype(np.int64)
        keys += row[blk, None]
        counts += np.bincount(keys.reshape(-1), minlength=size)
        hist = counts.reshape(n, width)
        # argmax takes the first of equal counts: the smallest value
        modes = (lo64 + hist.argmax(axis=1)).astype(x.dtype)
        if not tally:
            return (modes,)
        top = hist[np.arange(n), hi.astype(np.int64) - lo64]
        return modes, hist[:, 0], top
    # rows: a child's members as nlo copies of its minimum, then its maximum (uniform: all lo)
    nlo = np.where(kids.uniform, kids.size, kids.nlo)
    rows = np.where(np.arange(kids.size) < nlo[:, :, None], kids.lo[:, :, None],
                    kids.hi[:, :, None])
    rows[blk, child] = part
    rows = rows.reshape(n, -1)
    rows.sort(axis=1)
    return (_mode_sorted(rows), *(_tally_rows(rows, lo, hi) if tally else ()))


def _at(a: np.ndarray, order: list[int], pick: np.ndarray, where: tuple[np.ndarray, ...]
        ) -> np.ndarray:
    """``a.transpose(order)`` at flat C-order positions ``pick`` (multi-index ``where``)."""
    t = a.transpose(order)
    return t.reshape(-1).take(pick) if t.flags.c_contiguous else t[where]


def _put(a: np.ndarray, order: list[int], pick: np.ndarray, where: tuple[np.ndarray, ...],
         values: np.ndarray) -> None:
    """``a.transpose(order)[pick] = values`` (see :func:`_at`)."""
    t = a.transpose(order)
    if t.flags.c_contiguous:
        t.reshape(-1)[pick] = values
    else:
        t[where] = values


def block_mode(x: np.ndarray, block: Sequence[int], lo: np.ndarray | None = None,
               hi: np.ndarray | None = None, *,
               children: tuple[Sequence[int], Sequence[np.ndarray]] | None = None
               ) -> np.ndarray:
    """Most frequent value of each block, ties to the smallest (docs/pyramids.md#methods).

    ``x`` starts on a block boundary; the result has ``x.shape // block`` voxels. ``lo``/``hi``
    are the block minima/maxima when already known: blocks with ``lo == hi`` are uniform and
    need no counting. ``children = (rel, stats)`` describes a finer level whose blocks tile
    these ones ``rel`` times per axis: ``stats`` are its ``(lo, hi)`` or the
    ``(lo, hi, nlo, nhi)`` of :func:`block_mode_tally`, so that children that are uniform (or
    two-valued) are counted without reading level 0. The result only holds values of ``x``.
    """
    return block_mode_tally(x, block, lo, hi, children=children, tally=False)[0]


def block_mode_tally(x: np.ndarray, block: Sequence[int], lo: np.ndarray | None = None,
                     hi: np.ndarray | None = None, *,
                     children: tuple[Sequence[int], Sequence[np.ndarray]] | None = None,
                     tally: bool = True) -> tuple[np.ndarray, ...]:
    """:func:`block_mode` plus, with ``tally``, ``(lo, hi, nlo, nhi)``: the block minima and
    maxima and how many members equal them (the statistics a coarser level's ``children``
    takes)."""
    block = tuple(int(b) for b in block)
    m = math.prod(block)
    if lo is None or hi is None:
        lo, hi = block_min(x, block), block_max(x, block)
    if m == 1:
        out = np.array(x[tuple(slice(0, n) for n in x.shape)], copy=True)
        ones = (out == lo).astype(np.int32)  # 0 for NaN
        return (out, lo, hi, ones, ones) if tally else (out,)
    # NaN blocks compare unequal and are counted (each NaN is its own run: never the mode
    # unless every value is NaN).
    mixed = lo != hi
    out = np.array(lo, copy=True)
    count = np.int32 if m < 2**31 else np.int64
    # same memory layout as lo: a coarser level reads these along with lo and hi
    nlo = np.full_like(lo, m, dtype=count) if tally else None
    nhi = np.full_like(lo, m, dtype=count) if tally else None
    if mixed.any():
        # Work with the axes in memory order (largest stride first) so that the mixed blocks
        # are visited, and their members gathered, nearly sequentially.
        if not (x.flags.c_contiguous or x.flags.f_contiguous):
            x = np.ascontiguousarray(x)
        order = sorted(range(x.ndim), key=lambda d: -x.strides[d])
        xp = x.transpose(order)
        bp = tuple(block[d] for d in order)
        mp = np.ascontiguousarray(mixed.transpose(order))
        if children is not None:
            rel = tuple(int(children[0][d]) for d in order)
            stats = [a.transpose(order) for a in children[1]]
        picked = np.flatnonzero(mp)  # mixed blocks in memory order
        # In batches: the temporaries stay small enough to be reused instead of page-faulted.
        per_block = math.prod(block) if children is None else 4 * math.prod(children[0])
        step = max(1, _BATCH // per_block)
        for k in range(0, picked.size, step):
            pick = picked[k:k + step]
            where = np.unravel_index(pick, mp.shape)
            lo_m, hi_m = _at(lo, order, pick, where), _at(hi, order, pick, where)
            if children is not None:
                res = _mixed_modes_children(xp, bp, where, rel, stats, lo_m, hi_m, tally)
            else:
                res = _mixed_modes(xp, bp, where, lo_m, hi_m, tally)
            targets = (out,) if nlo is None or nhi is None else (out, nlo, nhi)
            for arr, values in zip(targets, res, strict=False):
                _put(arr, order, pick, where, values)
    if nlo is None or nhi is None:
        return (out,)
    return (out, lo, hi, nlo, nhi)
