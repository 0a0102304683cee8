"""External tiles that are TIFF files: a static TIFF header added by the ``pad`` codec.

    python examples/tiff_tiles.py [--out DIR]

Every stored tile of a ``pad``-edged grid has the same shape, so one 110-byte TIFF header
(little-endian, one uncompressed 16-bit strip) fits them all. The ``pad`` codec prepends it;
``bytes`` writes the tile with axis 0 (x) fastest, which is exactly a TIFF row. Each tile file
then opens in any TIFF reader (``tifffile`` here, if installed), and jnrrd reads the set as
one volume. Needs: ``pip install tifffile`` for the cross-check (skipped without it).
"""

from __future__ import annotations

import base64
import os
import struct

import numpy as np
from _runner import run  # examples/_runner.py: the shared --out handling

import jnrrd

TILE = 128


def tiff_header(width: int, height: int) -> bytes:
    """A minimal baseline TIFF header (8 + 2 + 8 * 12 + 4 = 110 bytes) for one 16-bit strip
    of ``width`` x ``height`` samples that starts right after it."""
    entries = [(256, 3, width), (257, 3, height), (258, 3, 16), (259, 3, 1), (262, 3, 1),
               (273, 4, 110), (278, 3, height), (279, 4, width * height * 2)]
    ifd = struct.pack("<H", len(entries))
    ifd += b"".join(struct.pack("<HHII", tag, typ, 1, value) for tag, typ, value in entries)
    head = b"II*\x00" + struct.pack("<I", 8) + ifd + struct.pack("<I", 0)
    assert len(head) == 110
    return head


def main(out_dir: str) -> None:
    width, height = 300, 200  # an image that does not divide into tiles evenly
    xx, yy = np.meshgrid(np.arange(width), np.arange(height), indexing="ij")
    image = ((xx * 7 + yy * 13) % 4096).astype(np.uint16)  # image[x, y]: axis 0 is x
    codecs = [
        {"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "pad", "configuration": {
            "location": "start", "nbytes": 110,
            "padding": base64.b64encode(tiff_header(TILE, TILE)).decode("ascii")}},
    ]
    path = os.path.join(out_dir, "mosaic.jnrrd")
    jnrrd.write(path, image, {"tile:storage": "external", "tile:pattern": "{y}_{x}.tif"},
                tile=(TILE, TILE), codecs=codecs)
    header = jnrrd.read_header(path)
    tile_dir = os.path.join(out_dir, header["tile:base_dir"])
    files = sorted(os.listdir(tile_dir))
    print(f"wrote {path} and {len(files)} TIFF tiles in {header['tile:base_dir']}/: "
          f"{', '.join(files)}")
    back, _ = jnrrd.read(path)
    assert np.array_equal(back, image)
    print(f"jnrrd reads the mosaic back: {back.shape}, identical")
    try:
        import tifffile
    except ImportError:
        print("tifffile is not installed: skipped opening the tiles with a TIFF reader")
        return
    for name in files:
        ty, tx = (int(v) for v in name[: -len(".tif")].split("_"))
        page = tifffile.imread(os.path.join(tile_dir, name))  # [row, column] = [y, x]
        core = image[tx * TILE:(tx + 1) * TILE, ty * TILE:(ty + 1) * TILE]
        assert page.shape == (TILE, TILE)
        # edge tiles carry padding (0) beyond the image; the core matches
        assert np.array_equal(page.T[: core.shape[0], : core.shape[1]], core)
    print(f"tifffile opened all {len(files)} tiles; each matches its region of the image")


if __name__ == "__main__":
    run(lambda out, args: main(out), __doc__)
