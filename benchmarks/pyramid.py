"""Pyramid levels 1-3 (scales 2, 4, 8) of a 512³ uint16 volume: jnrrd against NumPy baselines.

Contenders, timed in the same process, interleaved A B C A B C … (median of ``--repeat``):

- ``numpy``: the plain NumPy baseline. ``average``: sum the 8 strided sub-arrays
  ``a[i::2, j::2, k::2]`` as uint32, then divide (each level from the previous level's sums);
  ``mode``: for each of the 8 members of a 2×2×2 block, count equal members by pairwise
  comparisons and pick the most frequent, ties to the smallest (each level from the previous
  level — cheaper than, and not equal to, the exact mode over level-0 blocks);
- ``builder``: :class:`jnrrd.pyramid.PyramidBuilder` fed slabs of ``--slab`` rows along the
  last axis (the streaming write path);
- ``downsample``: :func:`jnrrd.pyramid.downsample` once per level from the whole level 0.

The volumes come from ``_volume.py`` (a smooth random field with Poisson noise; labels
``1 + floor(16 f) + 16·block_index`` over 128³ blocks), handed over as F-contiguous views
(axis 0 fastest, like the file). Run: ``python benchmarks/pyramid.py [--size 512]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _volume

from jnrrd.pyramid import PyramidBuilder, downsample

SCALES = [(2, 2, 2), (4, 4, 4), (8, 8, 8)]


def _corners(a: np.ndarray) -> list[np.ndarray]:
    crop = a[tuple(slice(0, (n // 2) * 2) for n in a.shape)]
    return [crop[i::2, j::2, k::2] for i in (0, 1) for j in (0, 1) for k in (0, 1)]


def average_baseline(a: np.ndarray, levels: int = 4) -> list[np.ndarray]:
    """Levels 1..levels-1: strided pairwise uint32 sums carried between levels, then divided."""
    out = []
    sums = a
    for level in range(1, levels):
        parts = _corners(sums)
        acc = parts[0].astype(np.uint32)
        for p in parts[1:]:
            acc += p
        sums = acc
        out.append((sums // (8**level)).astype(a.dtype))
    return out


def mode_baseline(a: np.ndarray, levels: int = 4) -> list[np.ndarray]:
    """Levels 1..levels-1: pairwise-equality mode of each 2×2×2 block of the previous level."""
    out = []
    cur = a
    for _ in range(1, levels):
        v = [np.ascontiguousarray(p) for p in _corners(cur)]
        counts = [np.zeros(v[0].shape, np.uint8) for _ in v]
        for i in range(8):
            for j in range(8):
                counts[i] += v[i] == v[j]
        best, val = counts[0], v[0].copy()
        for c, x in zip(counts[1:], v[1:], strict=True):
            take = (c > best) | ((c == best) & (x < val))
            best = np.where(take, c, best)
            val = np.where(take, x, val)
        cur = val
        out.append(val)
    return out


def build(a: np.ndarray, method: str, slab: int) -> list[np.ndarray]:
    """All levels through the streaming builder."""
    b = PyramidBuilder(a.shape, a.dtype, SCALES, method)
    # F order, like the pieces (axis 0 fastest): assembling them is a plain copy
    levels = [np.empty(tuple(n // s[0] for n in a.shape), a.dtype, order="F") for s in SCALES]
    for z in range(0, a.shape[-1], slab):
        for level, region, arr in b.feed(a[..., z:z + slab]):
            levels[level][region] = arr
    for level, region, arr in b.finish():
        levels[level][region] = arr
    return levels


def direct(a: np.ndarray, method: str) -> list[np.ndarray]:
    """All levels by ``downsample`` from level 0."""
    return [downsample(a, s, method) for s in SCALES]


def main() -> None:
    """Time the contenders and print medians and speed ratios against the baseline."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--slab", type=int, default=64)
    args = parser.parse_args()
    cases = {
        "average": (_volume.ct_volume(args.size).T, average_baseline, 0.8),
        "mode": (_volume.label_volume(args.size).T, mode_baseline, 2.0),
    }
    for method, (a, baseline, target) in cases.items():
        contenders = {
            "numpy": lambda a=a, f=baseline: f(a),
            "builder": lambda a=a, m=method: build(a, m, args.slab),
            "downsample": lambda a=a, m=method: direct(a, m),
        }
        ref = contenders["builder"]()
        assert all(np.array_equal(x, y) for x, y in zip(ref, contenders["downsample"](),
                                                        strict=True))
        times: dict[str, list[float]] = {k: [] for k in contenders}
        for _ in range(args.repeat):
            for name, fn in contenders.items():
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
        base = statistics.median(times["numpy"])
        print(f"{method}: {a.shape} {a.dtype}, levels 1-3, median of {args.repeat} "
              f"(target: builder >= {target}x numpy speed)")
        for name, ts in times.items():
            med = statistics.median(ts)
            print(f"  {name:<11} {med:8.3f} s   speed vs numpy {base / med:5.2f}x")


if __name__ == "__main__":
    main()
