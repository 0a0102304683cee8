"""One generated volume, four ways in: a Zarr view, OME-Zarr, a lazy array, a preview picture.

    python examples/ecosystem.py [--out DIR]

Writes a 3-level zstd pyramid, then:
1. ``jnrrd.kerchunk_refs`` → a Zarr v3 view of the unchanged file, read with zarr-python;
2. ``jnrrd.convert`` → OME-Zarr (NGFF 0.5) and back, data and pyramid kept;
3. ``vol.oindex`` and ``pickle`` on the lazy volume;
4. ``Volume.preview`` → a PNG of three orthogonal mid-slices.
Steps 1 and 2 need ``pip install "jnrrd[zarr]"``; without it they say so and are skipped.
(napari: ``pip install "jnrrd[napari]"``, then ``napari ct.jnrrd`` opens the pyramid.)
"""

from __future__ import annotations

import json
import os
import pickle

import numpy as np
from _runner import run  # examples/_runner.py: the shared --out handling

import jnrrd
from jnrrd.preview import write_png


def make_volume(path: str) -> np.ndarray:
    """A CT-like 96×80×64 uint16 ball with noise, written tiled with a pyramid."""
    x, y, z = np.meshgrid(np.arange(96), np.arange(80), np.arange(64), indexing="ij")
    r = np.sqrt((x - 48.0) ** 2 + (y - 40.0) ** 2 + ((z - 32.0) * 1.5) ** 2)
    rng = np.random.default_rng(0)
    data = (np.where(r < 30, 1200, 100) + rng.normal(0, 20, r.shape)).astype(np.uint16)
    header = {"space": "RAS", "space_origin": [0.0, 0.0, 0.0],
              "space_directions": [[0.5, 0, 0], [0, 0.5, 0], [0, 0, 0.75]]}
    jnrrd.write(path, data, header, tile=32, compression="zstd", levels=3)
    return data


def zarr_view(path: str, out_dir: str) -> None:
    try:
        import fsspec
        import zarr
    except ImportError:
        print('zarr view: skipped (pip install "jnrrd[zarr]")')
        return
    refs = jnrrd.kerchunk_refs(path)
    with open(os.path.join(out_dir, "ct.refs.json"), "w") as f:
        json.dump(refs, f)
    fs = fsspec.filesystem("reference", fo=refs, asynchronous=True)
    group = zarr.open_group(zarr.storage.FsspecStore(fs, read_only=True), mode="r")
    for k in range(3):
        mine, _ = jnrrd.read(path, level=k, index_order="C")
        same = np.array_equal(group[str(k)][...], mine)
        print(f"zarr view level {k}: shape {group[str(k)].shape}, "
              f"{'identical' if same else 'DIFFERENT'} to jnrrd.read(level={k})")
    scales = [d["coordinateTransformations"][0]["scale"]
              for d in group.attrs["ome"]["multiscales"][0]["datasets"]]
    print(f"zarr view: {len(refs['refs'])} references, NGFF scales {scales}")


def ome_zarr(path: str, data: np.ndarray, out_dir: str) -> None:
    try:
        import zarr  # noqa: F401
    except ImportError:
        print('OME-Zarr: skipped (pip install "jnrrd[zarr]")')
        return
    omz = os.path.join(out_dir, "ct.ome.zarr")
    back = os.path.join(out_dir, "back.jnrrd")
    jnrrd.convert(path, omz)
    jnrrd.convert(omz, back)
    with jnrrd.open(back) as vol:
        same = np.array_equal(vol[...], data)
        print(f"OME-Zarr round trip: {len(vol.levels)} levels, data "
              f"{'identical' if same else 'DIFFERENT'}, spacing "
              f"{[float(np.linalg.norm(d)) for d in vol.space_directions]}")


def lazy_array(path: str, data: np.ndarray) -> None:
    with jnrrd.open(path) as vol:
        rows = [3, 40, 90]
        mask = np.zeros(80, bool)
        mask[::10] = True
        sub = vol.oindex[rows, mask, 10:20]
        same = np.array_equal(sub, data[np.ix_(rows, mask, np.arange(10, 20))])
        print(f"oindex {sub.shape}: {'identical' if same else 'DIFFERENT'} to NumPy")
        again = pickle.loads(pickle.dumps(vol.levels[1]))
        with again.volume:
            same = np.array_equal(again[...], vol.levels[1][...])
            print(f"pickled level 1 re-opened: shape {again.shape}, "
                  f"{'identical' if same else 'DIFFERENT'}")


def picture(path: str, out_dir: str) -> None:
    png = os.path.join(out_dir, "ct.png")
    with jnrrd.open(path) as vol:
        rgb = vol.preview(size=128)
    write_png(png, rgb)
    print(f"preview {rgb.shape[1]}x{rgb.shape[0]} written to {os.path.basename(png)} "
          f"({os.path.getsize(png)} bytes)")


def main(out_dir: str, _args: object = None) -> int:
    path = os.path.join(out_dir, "ct.jnrrd")
    data = make_volume(path)
    print(f"wrote {os.path.basename(path)}: {data.shape} {data.dtype}, 3 levels")
    zarr_view(path, out_dir)
    ome_zarr(path, data, out_dir)
    lazy_array(path, data)
    picture(path, out_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(run(main, __doc__))
