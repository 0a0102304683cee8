"""Single-pass, bounded-memory pyramid building from level-0 slabs (docs/format.md#levels-pyramids,
docs/pyramids.md#methods).

Slabs arrive along the last axis (the slowest in the file). Each level keeps a cursor (its next
output row along the last axis) and computes every row whose inputs have arrived. Level 0 rows
and the per-level intermediate state are buffered only while some level still needs them.

Where the result is provably identical (docs/pyramids.md#methods), a level is computed from the
nearest finer level whose blocks tile its own (``b_L % b_P == 0`` on every axis) instead of from
level 0: ``max``/``min`` from the finer maxima/minima, integer ``average`` from the finer
*unrounded* integer sums, and ``mode`` from exact level-0 counts, where a finer block that is
uniform, or holds only its minimum and maximum, is counted from its statistics (minimum, maximum and
their counts) without reading level 0. Float ``average``, ``gaussian`` and ``lanczos`` are always
computed from level 0 (float sums in another order would differ in the last bit).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._threads import thread_count
from ..errors import DataError, HeaderError, where
from . import blocks
from .methods import METHOD_DEFS, axis_source, check_method, compute_local
from .mode import block_mode_tally
from .quality import QualityAccumulator
from .region import Region

__all__ = ["Piece", "PyramidBuilder"]

#: (level index, region in level voxels, level voxels)
Piece = tuple[int, Region, np.ndarray]

_CASCADE = ("max", "min", "mode")
#: level rows whose level-0 input holds at least this many voxels are computed in two halves
_PARALLEL_VOXELS = 1 << 21


class _Rows:
    """A window ``[start, end)`` of rows along the last axis of a stream of array tuples."""

    def __init__(self) -> None:
        self.start = 0
        self.end = 0
        self.chunks: list[tuple[int, tuple[np.ndarray, ...]]] = []

    def append(self, arrays: tuple[np.ndarray, ...]) -> None:
        n = arrays[0].shape[-1]
        if n:
            self.chunks.append((self.end, arrays))
            self.end += n

    def get(self, lo: int, hi: int) -> tuple[np.ndarray, ...]:
        assert self.start <= lo <= hi <= self.end, (self.start, lo, hi, self.end)
        pieces = []
        for c0, arrays in self.chunks:
            c1 = c0 + arrays[0].shape[-1]
            if c1 <= lo or c0 >= hi:
                continue
            pieces.append(tuple(a[..., max(lo, c0) - c0:min(hi, c1) - c0] for a in arrays))
        if len(pieces) == 1:
            return pieces[0]
        if not pieces:
            return tuple(a[..., :0] for a in self.chunks[0][1])
        return tuple(np.concatenate(parts, axis=-1) for parts in zip(*pieces, strict=True))

    def drop(self, before: int) -> None:
        before = min(max(before, self.start), self.end)
        kept = []
        for c0, arrays in self.chunks:
            n = arrays[0].shape[-1]
            if c0 + n <= before:
                continue
            if c0 < before:
                cut = before - c0
                # Copy the tail when it is a small part of its chunk: a view would keep the
                # whole chunk alive (memory stays bounded by the rows actually needed).
                arrays = tuple(np.array(a[..., cut:], copy=(n - cut) * 2 <= n) for a in arrays)
                c0 = before
            kept.append((c0, arrays))
        self.chunks = kept
        self.start = before

    @property
    def rows(self) -> int:
        return self.end - self.start


@dataclass
class _Level:
    index: int
    scale: tuple[int, ...]
    block: tuple[int, ...]
    shape: tuple[int, ...]
    source: int | None = None  # index of the finer level whose state is used; None: level 0
    rel: tuple[int, ...] = ()  # block relative to the source stream
    state: _Rows | None = None  # kept only when a coarser level cascades from this one
    row: int = 0  # next output row along the last axis
    quality: QualityAccumulator | None = None

    @property
    def done(self) -> bool:
        return self.row >= self.shape[-1]


class PyramidBuilder:
    """Compute pyramid levels in one pass over consecutive level-0 slabs.

    ``scales`` are per-axis integer scales (an all-ones scale gives level 0 itself). Feed slabs
    of any thickness along the last axis, in order; :meth:`feed` and :meth:`finish` return the
    level pieces that became complete as ``(level index, region, array)``. Every level equals
    ``downsample(level0, scale, method)``. Memory stays bounded by the incoming slab plus, per
    level, the level-0 rows of one block row (plus the filter halo) and one block row of state.
    """

    def __init__(self, shape0: Sequence[int], dtype: Any, scales: Sequence[Sequence[int]],
                 method: str = "average", *, quality: bool = False) -> None:
        self.shape0 = blocks.check_shape(shape0)
        self.dtype = blocks.check_dtype(dtype)
        self.method = check_method(method)
        if len(scales) == 0:
            raise HeaderError(f"{where(None, 'tile:level_scales')}expected at least one scale")
        n0 = self.shape0
        self._levels = []
        for i, sc in enumerate(scales):
            s = blocks.check_scale(n0, sc)
            b = blocks.effective_block(n0, s)
            shape = tuple(max(1, n // k) for n, k in zip(n0, s, strict=True))
            self._levels.append(_Level(i, s, b, shape))
        self._order = sorted(self._levels, key=lambda lv: (math.prod(lv.block), lv.index))
        self._cropped = {lv.index: tuple(n * b for n, b in zip(lv.shape, lv.block, strict=True))
                         for lv in self._levels}
        self._plan_cascade()
        if quality:
            for lv in self._levels:
                lv.quality = QualityAccumulator(self.dtype, lv.block)
        self._l0 = _Rows()
        self._received = 0
        self._finished = False
        self.max_buffered_rows = 0

    # -- planning ---------------------------------------------------------------------------

    def _identity(self, lv: _Level) -> bool:
        return all(k == 1 for k in lv.scale)

    def _direct_method(self) -> bool:
        """Methods always computed from level 0 through their kernels (every method that
        does not cascade: float ``average``, ``gaussian``, ``lanczos``, any new one)."""
        return not self._cascades()

    def _cascades(self) -> bool:
        return self.method in _CASCADE or (self.method == "average" and self.dtype.kind in "iu")

    def _plan_cascade(self) -> None:
        done: list[_Level] = []
        for lv in self._order:
            lv.rel = lv.block
            if self._cascades() and not self._identity(lv):
                # The coarsest earlier level whose blocks tile this level's blocks exactly.
                for p in reversed(done):
                    if not self._identity(p) and p.block != lv.block and all(
                            b % c == 0 for b, c in zip(lv.block, p.block, strict=True)):
                        lv.source = p.index
                        lv.rel = tuple(b // c for b, c in zip(lv.block, p.block, strict=True))
                        if p.state is None:
                            p.state = _Rows()
                        break
            done.append(lv)

    # -- public API -------------------------------------------------------------------------

    @property
    def buffered_rows(self) -> int:
        """Level-0 rows held between feeds."""
        return self._l0.rows

    @property
    def buffered_state_rows(self) -> dict[int, int]:
        """Rows of intermediate state held between feeds, per level (in that level's voxels)."""
        return {lv.index: lv.state.rows for lv in self._levels if lv.state is not None}

    def feed(self, slab: Any) -> list[Piece]:
        """Add the next level-0 slab (shape ``shape0[:-1] + (t,)``); return completed pieces."""
        if self._finished:
            raise DataError(f"{where(None, 'slab')}the builder is finished; no more slabs")
        x = np.asarray(slab)
        want = self.shape0[:-1]
        if x.shape[:-1] != want or x.ndim != len(self.shape0):
            raise DataError(f"{where(None, 'slab')}expected shape {want} + (t,), found {x.shape}")
        if x.dtype != self.dtype:
            raise DataError(f"{where(None, 'slab')}expected dtype {self.dtype}, found {x.dtype}")
        if self._received + x.shape[-1] > self.shape0[-1]:
            raise DataError(f"{where(None, 'slab')}slabs exceed the volume depth "
                            f"{self.shape0[-1]} along the last axis")
        out: list[Piece] = []
        r0 = self._received
        self._received += x.shape[-1]
        for lv in self._levels:
            if self._identity(lv) and x.shape[-1]:
                region = (*(slice(0, n) for n in want), slice(r0, self._received))
                out.append((lv.index, region, x))
                if lv.quality is not None:
                    lv.quality.count += x.size
                lv.row = self._received
        self._l0.append((x,))
        for lv in self._order:
            if not self._identity(lv):
                out.extend(self._advance(lv))
        self._drop()
        self.max_buffered_rows = max(self.max_buffered_rows, self._l0.rows)
        return out

    def finish(self) -> list[Piece]:
        """Check that the whole volume arrived and return any remaining pieces."""
        if self._received != self.shape0[-1]:
            raise DataError(f"{where(None, 'slab')}received {self._received} of "
                            f"{self.shape0[-1]} rows along the last axis")
        out: list[Piece] = []
        if not self._finished:
            for lv in self._order:
                if not self._identity(lv):
                    out.extend(self._advance(lv))
            self._drop()
            self._finished = True
        return out

    def quality(self) -> list[dict[str, float | None]]:
        """Per level (in ``scales`` order): ``{"rmse", "psnr"}`` (docs/format.md#level-quality)."""
        accumulators = [lv.quality for lv in self._levels if lv.quality is not None]
        if len(accumulators) < len(self._levels):
            raise HeaderError(f"{where(None, 'quality')}the builder was made with quality=False")
        if not all(lv.done for lv in self._levels):
            raise DataError(f"{where(None, 'quality')}the pyramid is not complete yet")
        return [acc.result() for acc in accumulators]

    # -- work -------------------------------------------------------------------------------

    def _ready(self, lv: _Level) -> int:
        """The last-axis row (exclusive) up to which ``lv`` can be computed now."""
        n = lv.shape[-1]
        if lv.source is not None:
            src = self._levels[lv.source]
            return min(n, src.row // lv.rel[-1])
        if self._received >= self.shape0[-1]:
            return n
        if METHOD_DEFS[self.method].reach is not None:
            lo, hi = lv.row, n
            s, b, n0 = lv.scale[-1], lv.block[-1], self._cropped[lv.index][-1]
            while lo < hi:  # the largest j with rows [row, j) computable: hi is monotone in j
                mid = (lo + hi + 1) // 2
                if axis_source(self.method, n0, s, b, lv.row, mid)[1] <= self._received:
                    lo = mid
                else:
                    hi = mid - 1
            return lo
        return min(n, self._received // lv.block[-1])

    def _advance(self, lv: _Level) -> list[Piece]:
        j0, j1 = lv.row, self._ready(lv)
        if j1 <= j0:
            return []
        b = lv.block
        region = (*(slice(0, n) for n in lv.shape[:-1]), slice(j0, j1))
        work = math.prod(self.shape0[:-1]) * (j1 - j0) * b[-1]
        if j1 - j0 >= 2 and work >= _PARALLEL_VOXELS and thread_count() > 1:
            # Two halves of the rows at once (NumPy releases the GIL in the kernels).
            from .._threads import fork_join

            jm = (j0 + j1) // 2
            halves: Sequence[tuple[tuple[np.ndarray, ...] | None, np.ndarray]] = fork_join(
                lambda: self._rows(lv, j0, jm), lambda: self._rows(lv, jm, j1))
            bounds = [(j0, jm), (jm, j1)]
        else:
            halves, bounds = [self._rows(lv, j0, j1)], [(j0, j1)]
        out: list[Piece] = []
        # the halves stay separate pieces (and state chunks): no copy to join them
        for (state, data), (ja, jb) in zip(halves, bounds, strict=True):
            if lv.state is not None:
                assert state is not None  # a level others cascade from computes its state
                lv.state.append(state)
            if lv.quality is not None:
                lv.quality.add(self._l0.get(ja * b[-1], jb * b[-1])[0], data)
            out.append((lv.index, (*region[:-1], slice(ja, jb)), data))
        lv.row = j1
        return out

    def _rows(self, lv: _Level, j0: int, j1: int
              ) -> tuple[tuple[np.ndarray, ...] | None, np.ndarray]:
        """Rows ``[j0, j1)`` of ``lv``: (cascade state or None, level voxels). No side effects."""
        if self._direct_method():
            return None, self._direct(lv, j0, j1)
        b = lv.block
        x0 = None
        if lv.source is None or self.method == "mode":
            x0 = self._l0.get(j0 * b[-1], j1 * b[-1])[0]
        st = None
        if lv.source is None:
            assert x0 is not None  # level 0's rows were read just above
            state = self._state_from0(x0, lv.rel)
        else:
            src = self._levels[lv.source]
            assert src.state is not None  # a level that others cascade from keeps its state
            k = lv.rel[-1]
            st = src.state.get(j0 * k, j1 * k)
            state = self._state_from(src, st, lv.rel)
        if self.method == "mode":
            assert x0 is not None  # the mode always reads level 0's rows
            # state: (lo, hi, nlo, nhi), what a coarser level's mode needs of its children
            children = None if st is None else (lv.rel, st)
            data, *tally = block_mode_tally(x0, b, state[0], state[1], children=children,
                                            tally=lv.state is not None)
            return (tuple(tally) if lv.state is not None else None), data
        return state, self._finish_state(lv, state, x0)

    def _direct(self, lv: _Level, j0: int, j1: int) -> np.ndarray:
        s, b, cropped = lv.scale, lv.block, self._cropped[lv.index]
        bounds = tuple((0, n) for n in lv.shape[:-1]) + ((j0, j1),)
        src = [axis_source(self.method, c, k, bb, r0, r1)
               for c, k, bb, (r0, r1) in zip(cropped, s, b, bounds, strict=True)]
        lo_last, hi_last = src[-1]
        x = self._l0.get(lo_last, hi_last)[0]
        x = x[tuple(slice(lo, hi) for lo, hi in src[:-1])]
        lo = tuple(lo for lo, _ in src)
        return compute_local(x, s, b, cropped, lo, bounds, self.method, self.dtype)

    def _state_from0(self, x0: np.ndarray, block: tuple[int, ...]) -> tuple[np.ndarray, ...]:
        if self.method == "average":
            return blocks.block_sums(x0, block, self.dtype).parts
        if self.method == "max":
            return (blocks.block_max(x0, block),)
        if self.method == "min":
            return (blocks.block_min(x0, block),)
        return (blocks.block_min(x0, block), blocks.block_max(x0, block))

    def _state_from(self, src: _Level, st: tuple[np.ndarray, ...],
                    rel: tuple[int, ...]) -> tuple[np.ndarray, ...]:
        if self.method == "average":
            sums = blocks.Sums(st, math.prod(src.block), self.dtype)
            return blocks.block_sums(sums, rel).parts
        if self.method == "max":
            return (blocks.block_max(st[0], rel),)
        if self.method == "min":
            return (blocks.block_min(st[0], rel),)
        return (blocks.block_min(st[0], rel), blocks.block_max(st[1], rel))

    def _finish_state(self, lv: _Level, state: tuple[np.ndarray, ...],
                      x0: np.ndarray | None) -> np.ndarray:
        if self.method == "average":
            return blocks.finish_mean(blocks.Sums(state, math.prod(lv.block), self.dtype))
        # max/min: hand out a copy when the array is also kept as cascade state
        return np.array(state[0], copy=True) if lv.state is not None else state[0]

    def _drop(self) -> None:
        need0 = self._l0.end
        need = {lv.index: lv.state.end for lv in self._levels if lv.state is not None}
        for lv in self._levels:
            if lv.done or self._identity(lv):
                continue
            j = lv.row
            if lv.source is not None:
                need[lv.source] = min(need[lv.source], j * lv.rel[-1])
            if self._direct_method():
                c = self._cropped[lv.index][-1]
                lo = axis_source(self.method, c, lv.scale[-1], lv.block[-1], j, j + 1)[0]
                need0 = min(need0, lo)
            if lv.source is None or self.method == "mode" or lv.quality is not None:
                need0 = min(need0, j * lv.block[-1])
        self._l0.drop(need0)
        for lv in self._levels:
            if lv.state is not None:
                lv.state.drop(need[lv.index])
