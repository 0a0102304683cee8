"""Convert a classic NRRD file to a tiled JNRRD pyramid, and back to NRRD.

    python examples/nrrd_to_pyramid.py [INPUT.nrrd] [--out DIR]

Without INPUT, a small NRRD volume is generated first (with jnrrd itself). The same
conversion on the command line: ``jnrrd convert IN.nrrd OUT.jnrrd --tile 32 --levels 3``.
"""

from __future__ import annotations

import os

import numpy as np
from _runner import run  # examples/_runner.py: the shared --out handling

import jnrrd


def make_nrrd(path: str) -> None:
    """A 96 x 80 x 64 int16 volume with LPS geometry, written as gzip-encoded classic NRRD."""
    x, y, z = np.meshgrid(np.arange(96), np.arange(80), np.arange(64), indexing="ij")
    data = (1000 * np.sin(x / 9.0) * np.cos(y / 7.0) + 8 * z).astype(np.int16)
    jnrrd.write(path, data, {"space": "left_posterior_superior",
                             "space_origin": [10.0, 20.0, 30.0],
                             "space_directions": [[0.8, 0, 0], [0, 0.8, 0], [0, 0, 1.5]],
                             "labels": ["x", "y", "z"]}, encoding="gzip")


def main(source: str | None, out_dir: str) -> None:
    if source is None:
        source = os.path.join(out_dir, "input.nrrd")
        make_nrrd(source)
        print(f"generated {source} ({os.path.getsize(source):,} bytes)")
    pyramid = os.path.join(out_dir, "pyramid.jnrrd")
    with jnrrd.open(source) as vol:  # classic NRRD through the same API
        header = dict(vol.header)
        print(f"read {source}: {vol.shape} {vol.dtype}, space {header.get('space')}")
        # Keep the geometry and labels; the writer computes type, sizes and layout fields.
        keep = {k: header[k] for k in ("space", "space_origin", "space_directions", "labels",
                                       "units", "kinds", "content") if k in header}
        jnrrd.write(pyramid, vol, keep, tile=32, compression="zstd", levels=3)
    with jnrrd.open(pyramid) as pyr:
        print(f"wrote {pyramid}: {os.path.getsize(pyramid):,} bytes")
        for lv in pyr.levels:
            origin = ", ".join(f"{v:g}" for v in lv.space_origin)
            print(f"  level {lv.index}: shape {lv.shape}, spacing "
                  f"{[float(np.linalg.norm(d)) for d in lv.space_directions]}, "
                  f"origin ({origin}), {lv.stored_bytes:,} bytes")
        level0 = pyr[...]
    back = os.path.join(out_dir, "roundtrip.nrrd")
    data, header = jnrrd.read(pyramid)
    plain = {k: v for k, v in header.items() if ":" not in k and k != "extensions"}
    jnrrd.write(back, data, plain)
    original, _ = jnrrd.read(source)
    again, h2 = jnrrd.read(back)
    assert np.array_equal(level0, original) and np.array_equal(again, original)
    assert h2["space_directions"] == keep["space_directions"]
    print(f"wrote {back}: identical data and geometry after NRRD -> JNRRD -> NRRD")


if __name__ == "__main__":
    run(lambda out, args: main(args.input, out), __doc__,
        lambda p: p.add_argument("input", nargs="?",
                                 help="a .nrrd or .nhdr file (default: generate one)"))
