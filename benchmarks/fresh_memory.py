"""What fresh output memory costs, and what reusing the output explicitly (``out=``) saves.

A whole read fills one large fresh array; every page of it is first touched by the decoder.
On a virtual machine whose host takes freed guest memory back (free page reporting), touching
memory freed a moment ago and memory freed seconds ago cost very different amounts. This
script shows both effects on the machine it runs on (Linux: it maps memory with ``mmap``
flags and advice):

1. ``touch``: map 256 MiB of fresh memory and write it, right after the previous map was
   freed (``pause 0``) or after a pause (``pause 3``), on transparent huge pages (what NumPy
   asks for its large arrays) and on 4 KiB pages.
2. ``read``: ``jnrrd.read`` of the 512³ uint16 volume stored untiled and in 64³ tiles (gzip,
   raw, zstd), after the same pauses, into a fresh array (the default) and into one array
   the caller reuses (``jnrrd.read(path, out=buffer)``).

Usage: ``python benchmarks/fresh_memory.py [--repeat 5] [--pause 3]`` (about 5 minutes).
Medians of ``--repeat`` runs, the two ways interleaved, their order alternating.
"""

from __future__ import annotations

import argparse
import mmap
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _volume import ct_volume

import jnrrd


def _median_ms(fn: Callable[[], object], pause: float, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        time.sleep(pause)
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
        del out
    return statistics.median(times) * 1e3


def _touch(n: int, huge: bool) -> mmap.mmap:
    """A fresh anonymous map of ``n`` bytes on huge pages (what NumPy asks for its large
    arrays) or on 4 KiB pages, every byte written once."""
    m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    m.madvise(mmap.MADV_HUGEPAGE if huge else mmap.MADV_NOHUGEPAGE)
    np.frombuffer(m, np.uint8).fill(1)
    return m


def touch_table(pause: float, repeat: int) -> None:
    print(f"touch a fresh 256 MiB array (median of {repeat}, ms)")
    print(f"{'huge pages':18s} {'pause 0':>9s} {f'pause {pause:g}':>9s}")
    for huge in (True, False):
        row = [_median_ms(lambda h=huge: _touch(256 << 20, h), p, repeat) for p in (0.0, pause)]
        print(f"{'on' if huge else 'off':18s} {row[0]:9.0f} {row[1]:9.0f}")


def read_table(workdir: Path, pause: float, repeat: int) -> None:
    data = ct_volume(512)
    print(f"\njnrrd.read of the 512³ uint16 volume (median of {repeat}, ms; the output: a "
          "fresh array, or the caller's reused through out=)")
    print(f"{'file':20s} {'output':>10s} {'pause 0':>9s} {f'pause {pause:g}':>9s}")
    buffer = np.empty(data.T.shape, data.dtype, order="F")
    for layout, encoding in [("untiled", e) for e in ("gzip", "raw", "zstd")] + \
            [("tiled 64³", e) for e in ("gzip", "raw", "zstd")]:
        path = workdir / f"fresh-{encoding}.jnrrd"
        if layout == "untiled":
            jnrrd.write(path, data.T, encoding=encoding)
        else:
            jnrrd.write(path, data.T, tile=64, compression=None if encoding == "raw" else encoding)
        jnrrd.read(path)
        times: dict[tuple[str, float], list[float]] = {}
        ways = {"fresh": lambda p=path: jnrrd.read(p)[0],
                "out=": lambda p=path: jnrrd.read(p, out=buffer)[0]}
        names = list(ways)
        for p in (0.0, pause):
            for r in range(repeat):  # interleaved, the order alternating per repetition
                for name in names[r % 2:] + names[:r % 2]:
                    times.setdefault((name, p), []).append(_timed(ways[name], p))
        for name in names:
            print(f"{layout + ' ' + encoding:20s} {name:>10s} "
                  f"{statistics.median(times[name, 0.0]) * 1e3:9.0f} "
                  f"{statistics.median(times[name, pause]) * 1e3:9.0f}")
        path.unlink()


def _timed(read: Callable[[], object], pause: float) -> float:
    time.sleep(pause)
    t0 = time.perf_counter()
    out = read()
    took = time.perf_counter() - t0
    del out
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--pause", type=float, default=3.0,
                    help="seconds between runs in the second column")
    args = ap.parse_args()
    touch_table(args.pause, args.repeat)
    with tempfile.TemporaryDirectory(prefix="fresh-") as tmp:
        read_table(Path(tmp), args.pause, args.repeat)


if __name__ == "__main__":
    main()
