"""Raw tiles read a row at a time: consecutive whole tiles along the first (fastest) axis whose
stored bytes follow one another in the file are copied into the output by one NumPy assignment.

A tile of a full read fills only a short stretch of each output row (64 elements of a 512-wide
volume with 64³ tiles), so copying tile by tile writes each row in pieces, a tile's worth of
rows apart; copying a run of neighbours writes whole stretches of rows in order, which the
memory system handles far better (a 512³ uint16 read: about a third less time). Only plain
stored bytes qualify: raw tiles of a native, non-bfloat16 type without checksums, inside one
local object held by the store (:class:`~jnrrd.engine.sources.InternalSource`; a remote read
fetches its tiles in batches instead).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..errors import DataError
from ..tiling.grid import Piece
from ..tiling.levels import Level

__all__ = ["MAX_RUN", "RawRuns", "raw_runs_apply"]

#: the most tiles one run holds (the threads share a row's work beyond that)
MAX_RUN = 16


def raw_runs_apply(dec: Any) -> bool:
    """Whether ``dec``'s tiles are plain stored bytes that runs may copy directly."""
    return bool(dec.raw and dec.source.internal and not dec.remote and dec.checksums is None
                and dec.type_name != "bfloat16" and dec.stored_dtype.isnative
                and dec.stored_dtype == dec.dtype)


class RawRuns:
    """Groups the pieces of one read into runs and copies each run into ``out``."""

    def __init__(self, dec: Any, level: Level, out: np.ndarray,
                 copy: Callable[[Piece], None]) -> None:
        self.dec, self.level, self.out, self.copy = dec, level, out, copy
        self.shape = level.grid.stored_shape((0,) * len(level.grid.shape))
        #: a whole tile's stored length (an entry that lists more bytes is read on its own)
        self.tile_bytes = int(np.prod(self.shape)) * dec.stored_dtype.itemsize

    def runs(self, pieces: Iterator[Piece]) -> Iterator[list[Any]]:
        """The pieces in order, as runs ``[(piece, span), ...]``: whole tiles stored one after
        the other, or a single piece (copied the usual way; its span may be None)."""
        run: list[Any] = []
        for p in pieces:
            span = self._span(p)
            if run and (span is None or not self._follows(run[-1], p, span)
                        or len(run) >= MAX_RUN):
                yield run
                run = []
            if span is None:
                yield [(p, None)]
            else:
                run.append((p, span))
        if run:
            yield run

    def _span(self, p: Piece) -> Any:
        """The stored span of a piece that takes its tile whole along the first axis (with
        unit steps elsewhere), else None."""
        n0 = self.shape[0]
        s0 = p.src[0]
        if not (s0.start in (0, None) and s0.stop == n0 and s0.step in (1, None)):
            return None
        if any(s.step not in (1, None) for s in p.src) or any(
                s.step not in (1, None) for s in p.dst):
            return None
        grid = self.level.grid
        if grid.stored_shape(p.coords) != self.shape:
            return None
        span = self.dec.source.span(self.level, p.coords, grid.index(p.coords))
        return span if span is not None and span[3] - span[2] == self.tile_bytes else None

    @staticmethod
    def _follows(last: tuple[Piece, Any], p: Piece, span: Any) -> bool:
        q, qspan = last
        return (p.coords[0] == q.coords[0] + 1 and p.coords[1:] == q.coords[1:]
                and p.src[1:] == q.src[1:] and p.dst[1:] == q.dst[1:]
                and p.dst[0].start == q.dst[0].stop
                and span[:2] == qspan[:2] and span[2] == qspan[3])

    def copy_run(self, run: list[Any]) -> None:
        """Copy a run (one piece: the usual per-tile copy)."""
        if len(run) == 1:
            self.copy(run[0][0])
            return
        first, last = run[0], run[-1]
        key, field, a, _ = first[1]
        b = last[1][3]
        try:
            data = self.dec.source.store.get_ranges(key, [(a, b)], field=field,
                                                    limit=b - a)[0]
        except (OSError, DataError):
            for p, _ in run:  # each tile read again on its own: its error names it
                self.copy(p)
            return
        self._place(run, data)

    def _place(self, run: list[Any], data: Any) -> None:
        k, shape = len(run), self.shape
        if len(data) < k * self.tile_bytes:
            for p, _ in run:
                self.copy(p)
            return
        count = k * self.tile_bytes // self.dec.stored_dtype.itemsize
        tiles = np.frombuffer(data, self.dec.stored_dtype, count).reshape((*shape, k),
                                                                          order="F")
        p0 = run[0][0]
        src = np.moveaxis(tiles[(slice(None), *p0.src[1:], slice(None))], -1, 1)
        d0 = p0.dst[0].start
        slab = self.out[(slice(d0, d0 + k * shape[0]), *p0.dst[1:])]
        s0 = slab.strides[0]
        dst = as_strided(slab, shape=(shape[0], k, *slab.shape[1:]),
                         strides=(s0, s0 * shape[0], *slab.strides[1:]))
        dst[...] = src
