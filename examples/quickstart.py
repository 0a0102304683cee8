"""Quickstart: write a tiled, zstd-compressed 3-level pyramid and read a region back lazily.

    python examples/quickstart.py [--out DIR]

The volume is written to ``quickstart.jnrrd`` in the current directory (or in ``--out DIR``)
and left there: the script ends by printing the ``jnrrd info`` command that describes it.
"""

from __future__ import annotations

import os
import shlex
import time

import numpy as np
from _runner import run  # examples/_runner.py: the shared --out handling

import jnrrd


def synthetic_volume(n: int = 128) -> np.ndarray:
    """A smooth CT-like uint16 volume: a few soft spheres on a gradient, plus mild noise."""
    rng = np.random.default_rng(0)
    x, y, z = np.meshgrid(*(np.linspace(-1, 1, n, dtype=np.float32),) * 3, indexing="ij")
    vol = 200 + 300 * (z + 1)
    for cx, cy, cz, r, v in [(0.3, 0.2, 0.0, 0.35, 1800), (-0.4, -0.3, 0.2, 0.25, 1200),
                             (0.0, 0.5, -0.5, 0.2, 2500)]:
        vol += v * (((x - cx) ** 2 + (y - cy) ** 2 + (z - cz) ** 2) < r * r)
    vol += rng.normal(0, 4, vol.shape).astype(np.float32)
    return np.clip(vol, 0, 65535).astype(np.uint16)


def main(out_dir: str) -> None:
    data = synthetic_volume()
    path = os.path.join(out_dir, "quickstart.jnrrd")
    header = {"space": "right_anterior_superior", "space_origin": [-64.0, -64.0, -64.0],
              "space_directions": [[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]]}

    t0 = time.perf_counter()
    jnrrd.write(path, data, header, tile=(32, 32, 32), compression="zstd", levels=3)
    t_write = time.perf_counter() - t0
    size = os.path.getsize(path)
    print(f"wrote {path}")
    print(f"  volume {data.shape} {data.dtype}: {data.nbytes:,} bytes in memory")
    print(f"  file {size:,} bytes (ratio {data.nbytes / size:.2f}x) in {t_write * 1000:.0f} ms")

    t0 = time.perf_counter()
    with jnrrd.open(path) as vol:  # lazy: only the header is read here
        region = vol[40:72, 40:72, 60:70]  # reads only the tiles this slice touches
        t_region = time.perf_counter() - t0
        assert np.array_equal(region, data[40:72, 40:72, 60:70])
        print(f"read region {region.shape} lazily in {t_region * 1000:.1f} ms "
              f"(tiles {vol.chunks})")
        for lv in vol.levels:
            print(f"  level {lv.index}: shape {lv.shape} scale {lv.scale} "
                  f"stored {lv.stored_bytes:,} bytes (ratio {lv.nbytes / lv.stored_bytes:.2f}x)")
        coarse = vol.levels[2][...]
        print(f"level 2 mean {coarse.mean():.1f} vs level 0 mean {data.mean():.1f}")
        print(f"level 2 affine (index -> world):\n{vol.levels[2].affine}")

    t0 = time.perf_counter()
    full, hdr = jnrrd.read(path)
    t_read = time.perf_counter() - t0
    assert np.array_equal(full, data)
    print(f"read everything back in {t_read * 1000:.0f} ms: identical "
          f"({hdr['tile:levels']} levels, tiles {hdr['tile:sizes']})")
    shown = os.path.relpath(path) if not os.path.relpath(path).startswith("..") else path
    print(f"\nthe file stays: describe it with\n  jnrrd info {shlex.quote(shown)}")


if __name__ == "__main__":
    run(lambda out, args: main(out), __doc__, default_out=".")
