"""What fresh output memory costs, and what keeping maps and populating ahead save.

A whole read fills one large fresh array; every page of it is first touched by the decoder.
On a virtual machine whose host takes freed guest memory back (free page reporting), touching
memory freed a moment ago and memory freed seconds ago cost very different amounts. This
script shows both effects on the machine it runs on:

1. ``touch``: map 256 MiB of fresh memory and write it, right after the previous map was
   freed (``pause 0``) or after a pause (``pause 3``), on transparent huge pages (what NumPy
   asks for its large arrays) and on 4 KiB pages.
2. ``read``: ``jnrrd.read`` of the 512³ uint16 volume stored untiled and in 64³ tiles (gzip,
   raw, zstd), after the same pauses, with the output on a kept map (``jnrrd.engine.
   spare_maps``, the default), on fresh memory populated ahead of the decoder
   (``jnrrd.engine.prefault``: untiled reads only) and on fresh memory.

Usage: ``python benchmarks/fresh_memory.py [--repeat 5] [--pause 3]`` (about 7 minutes).
Medians of ``--repeat`` runs, the settings interleaved, their order rotating.
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
from jnrrd.engine import prefault, spare_maps

MIN_OUTPUT = spare_maps.MIN_OUTPUT


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


#: how a read's output memory is had: (a kept map when there is one, populated ahead)
SETTINGS = {"kept map": (True, True), "fresh, populated": (False, True),
            "fresh": (False, False)}


def _use(kept: bool, populated: bool, supported: bool) -> None:
    spare_maps.MIN_OUTPUT = MIN_OUTPUT if kept else 1 << 62
    prefault.supported = populated and supported


def read_table(workdir: Path, pause: float, repeat: int) -> None:
    data = ct_volume(512)
    supported = prefault.supported
    print(f"\njnrrd.read of the 512³ uint16 volume (median of {repeat}, ms; the output's memory:"
          " a kept map, fresh and populated ahead, fresh)")
    print(f"{'file':20s} {'output':>17s} {'pause 0':>9s} {f'pause {pause:g}':>9s}")
    for layout, encoding in [("untiled", e) for e in ("gzip", "raw", "zstd")] + \
            [("tiled 64³", e) for e in ("gzip", "raw", "zstd")]:
        path = workdir / f"fresh-{encoding}.jnrrd"
        if layout == "untiled":
            jnrrd.write(path, data.T, encoding=encoding)
        else:
            jnrrd.write(path, data.T, tile=64, compression=None if encoding == "raw" else encoding)
        jnrrd.read(path)
        times: dict[tuple[str, float], list[float]] = {}
        names = list(SETTINGS)
        for p in (0.0, pause):
            for r in range(repeat):  # interleaved, the order rotating per repetition
                for name in names[r % 3:] + names[:r % 3]:
                    _use(*SETTINGS[name], supported)
                    times.setdefault((name, p), []).append(_timed(path, p))
        _use(True, True, supported)
        for name in names:
            print(f"{layout + ' ' + encoding:20s} {name:>17s} "
                  f"{statistics.median(times[name, 0.0]) * 1e3:9.0f} "
                  f"{statistics.median(times[name, pause]) * 1e3:9.0f}")
        path.unlink()


def _timed(path: Path, pause: float) -> float:
    time.sleep(pause)
    t0 = time.perf_counter()
    out = jnrrd.read(path)[0]
    took = time.perf_counter() - t0
    del out
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--pause", type=float, default=3.0,
                    help="seconds between runs in the second column")
    args = ap.parse_args()
    if not prefault.supported:
        print("this system cannot populate memory ahead (MADV_POPULATE_WRITE): the two "
              "'fresh' rows are the same path")
    touch_table(args.pause, args.repeat)
    with tempfile.TemporaryDirectory(prefix="fresh-") as tmp:
        read_table(Path(tmp), args.pause, args.repeat)


if __name__ == "__main__":
    main()
