"""A minimal terminal progress bar (quiet when stderr is not a terminal)."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

import numpy as np

__all__ = ["Bar", "Reporting", "mib_progress"]


class Bar:
    """``Bar()(done, total)`` draws ``[#####     ] 50% 12/24 tiles 0:07 left 0:07`` on a
    terminal: the elapsed time since the first call and, once some work is done, the
    estimated time left (the elapsed time scaled by the fraction still to do)."""

    def __init__(self, stream: TextIO | None = None, label: str = "tiles",
                 force: bool = False, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.label = label
        self.enabled = force or bool(getattr(self.stream, "isatty", lambda: False)())
        self._clock = clock
        self._start: float | None = None
        self._last = 0.0
        self._width = 0

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = self._clock()
        if self._start is None:
            self._start = now
        if done < total and now - self._last < 0.1:
            return
        self._last = now
        frac = min(1.0, done / total) if total else 1.0
        width = 30
        fill = int(frac * width)
        elapsed = now - self._start
        times = f" {_clock_text(elapsed)}"
        if 0 < frac < 1:
            times += f" left {_clock_text(elapsed * (1 - frac) / frac)}"
        line = f"[{'#' * fill}{' ' * (width - fill)}] {frac:4.0%} {done}/{total} {self.label}"
        line += times
        # spaces over what a longer earlier line left (no terminal escape codes: Windows)
        self.stream.write(f"\r{line}{' ' * max(0, self._width - len(line))}")
        self._width = len(line)
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()


def _clock_text(seconds: float) -> str:
    """``m:ss`` (``h:mm:ss`` from an hour on)."""
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def mib_progress(bar: Callable[[int, int], None] | None, total_bytes: int
                 ) -> Callable[[int], None] | None:
    """``report(done_bytes)`` drawing ``bar(done, total)`` in MiB (rounded up, at least 1)."""
    if bar is None:
        return None
    total = max(1, math.ceil(total_bytes / (1 << 20)))

    def report(done_bytes: int) -> None:
        bar(total if done_bytes >= total_bytes else done_bytes >> 20, total)

    return report


class Reporting:
    """An array-like over ``data`` that reports the bytes read through it, for writers (NRRD,
    untiled JNRRD) that read their input one slab at a time and draw no progress themselves."""

    def __init__(self, data: Any, report: Callable[[int], None]) -> None:
        self._data = data
        self._report = report
        self._done = 0
        self.shape = tuple(int(n) for n in data.shape)
        self.dtype = np.dtype(data.dtype)
        self.ndim = len(self.shape)

    def __getitem__(self, key: Any) -> np.ndarray:
        out = np.asarray(self._data[key])
        self._done += out.nbytes
        self._report(self._done)
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self[...] if dtype is None else self[...].astype(dtype, copy=False)
