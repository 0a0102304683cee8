"""A minimal terminal progress bar (quiet when stderr is not a terminal)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Bar"]


class Bar:
    """``Bar()(done, total)`` draws ``[#####     ] 50% 12/24 tiles`` on a terminal."""

    def __init__(self, stream: TextIO | None = None, label: str = "tiles",
                 force: bool = False) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.label = label
        self.enabled = force or bool(getattr(self.stream, "isatty", lambda: False)())
        self._last = 0.0

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if done < total and now - self._last < 0.1:
            return
        self._last = now
        frac = done / total if total else 1.0
        width = 30
        fill = int(frac * width)
        self.stream.write(f"\r[{'#' * fill}{' ' * (width - fill)}] {frac:4.0%} "
                          f"{done}/{total} {self.label}")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()
