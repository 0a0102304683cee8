"""Dask: read a JNRRD volume as a Dask array (chunks = tiles) and write one back, tiled.

    python examples/dask_volume.py [--out DIR]

Needs ``pip install "jnrrd[dask]"``; without Dask the example says so and exits cleanly.
"""

from __future__ import annotations

import os
import sys

import numpy as np
from _runner import run  # examples/_runner.py: the shared --out handling

import jnrrd


def main(out_dir: str) -> int:
    try:
        import dask
        import dask.array  # the array extra, not just the core package
    except ImportError:
        print('dask is not installed: pip install "jnrrd[dask]" to run this example')
        return 0
    path = os.path.join(out_dir, "source.jnrrd")
    x, y, z = np.meshgrid(np.arange(96), np.arange(64), np.arange(48), indexing="ij")
    data = ((x * y + z * 5) % 251).astype(np.uint8)
    jnrrd.write(path, data, tile=32, compression="zstd", levels=2)

    with jnrrd.open(path) as vol:
        arr = vol.to_dask()  # lazy: one task per tile
        print(f"dask array {arr.shape} {arr.dtype}, chunks {arr.chunksize}, "
              f"{arr.npartitions} tasks")
        with dask.config.set(scheduler="threads"):
            mean = float(arr.mean().compute())
            smoothed = (arr.astype(np.float32) * 0.5 + 10).astype(np.uint8)
            out = os.path.join(out_dir, "smoothed.jnrrd")
            # A Dask array is written tile by tile on the active scheduler, atomically.
            jnrrd.write(out, smoothed, tile=32, compression="zstd", levels=2)
        coarse = vol.levels[1].to_dask()
        print(f"level 1 as dask: {coarse.shape}, chunks {coarse.chunksize}")
    assert abs(mean - float(data.mean())) < 1e-9
    back, header = jnrrd.read(out)
    expected = (data.astype(np.float32) * 0.5 + 10).astype(np.uint8)
    assert np.array_equal(back, expected)
    print(f"mean via dask {mean:.3f} (numpy {data.mean():.3f})")
    print(f"wrote {out}: {header['tile:levels']} levels, {os.path.getsize(out):,} bytes, "
          f"identical to the NumPy computation")
    return 0


if __name__ == "__main__":
    sys.exit(run(lambda out, args: main(out), __doc__))
