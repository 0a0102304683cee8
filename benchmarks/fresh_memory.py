"""What fresh output memory costs, and what populating it ahead of the decoder saves.

A whole untiled read decodes on one thread into one fresh array; every page of it is first
touched by the decoder. On a virtual machine whose host takes freed guest memory back (free
page reporting), touching memory freed a moment ago and memory freed seconds ago cost very
different amounts. This script shows both effects on the machine it runs on:

1. ``touch``: map 256 MiB of fresh memory and write it, right after the previous map was
   freed (``pause 0``) or after a pause (``pause 3``), on transparent huge pages (what NumPy
   asks for its large arrays) and on 4 KiB pages.
2. ``read``: ``jnrrd.read`` of the 512³ uint16 volume stored untiled (gzip, raw, zstd), after
   the same pauses, with the output populated ahead of the decoder
   (``jnrrd.engine.prefault``, the default) and without (``prefault.supported = False``).

Usage: ``python benchmarks/fresh_memory.py [--repeat 5] [--pause 3]`` (about 2 minutes).
Medians of ``--repeat`` runs, the two settings interleaved.
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
from jnrrd.engine import prefault


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
    print(f"\njnrrd.read of the untiled 512³ uint16 volume (median of {repeat}, ms)")
    print(f"{'encoding':9s} {'populated':>10s} {'pause 0':>9s} {f'pause {pause:g}':>9s}")
    for encoding in ("gzip", "raw", "zstd"):
        path = workdir / f"fresh-{encoding}.jnrrd"
        jnrrd.write(path, data.T, encoding=encoding)
        jnrrd.read(path)
        rows: dict[bool, list[float]] = {True: [], False: []}
        for p in (0.0, pause):
            for on in (True, False):  # interleaved: one of each per repetition
                prefault.supported = on
                rows[on].append(_median_ms(lambda path=path: jnrrd.read(path)[0], p, repeat))
        prefault.supported = True
        for on in (True, False):
            print(f"{encoding:9s} {'yes' if on else 'no':>10s} {rows[on][0]:9.0f} "
                  f"{rows[on][1]:9.0f}")
        path.unlink()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--pause", type=float, default=3.0,
                    help="seconds between runs in the second column")
    args = ap.parse_args()
    if not prefault.supported:
        print("this system cannot populate memory ahead (MADV_POPULATE_WRITE): the 'yes' "
              "and 'no' rows are the same path")
    touch_table(args.pause, args.repeat)
    with tempfile.TemporaryDirectory(prefix="fresh-") as tmp:
        read_table(Path(tmp), args.pause, args.repeat)


if __name__ == "__main__":
    main()
