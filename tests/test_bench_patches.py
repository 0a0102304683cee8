"""benchmarks/patches.py: the decoder's floor decodes what a patch needs of each tile."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import zstandard

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import patches  # noqa: E402

import jnrrd  # noqa: E402


def test_tile_jobs_are_each_patch_tiles_up_to_its_last_plane(tmp_path: Path) -> None:
    path = tmp_path / "v.jnrrd"
    # file axes (x, y, z) are NumPy's (z, y, x) with index_order="C"; tiles 8 × 4 × 4 (x, y, z)
    arr = np.arange(16 * 12 * 24, dtype=np.uint16).reshape(24, 12, 16)  # (z, y, x)
    jnrrd.write(path, arr, tile=(4, 4, 8), compression="zstd", index_order="C")
    regions = [(slice(3, 11), slice(2, 3), slice(5, 10)),  # x: 2 tiles, y: 1, z: 2
               (slice(8, 16), slice(4, 8), slice(20, 24))]  # one whole tile
    jobs = patches._tile_jobs(path, regions)
    assert [len(j) for j in jobs] == [4, 1]
    with open(path, "rb") as f:
        read = patches._stored_bytes(f)
        for region, one in zip(regions, jobs, strict=True):
            xs, ys, zs = (range(s.start // t, (s.stop - 1) // t + 1)
                          for s, t in zip(region, (8, 4, 4), strict=True))
            expect = [(tx, ty, tz) for tz in zs for ty in ys for tx in xs]
            for (tx, ty, tz), (offset, size, need) in zip(expect, one, strict=True):
                tile = arr[tz * 4:tz * 4 + 4, ty * 4:ty * 4 + 4, tx * 8:tx * 8 + 8]
                planes = min(4, region[2].stop - tz * 4)
                assert need == planes * 8 * 4 * 2
                whole = zstandard.ZstdDecompressor().decompress(read(offset, size))
                assert whole == np.ascontiguousarray(tile).tobytes()
    run = patches._zstd_alone(path, regions)
    assert run() == [4, 1]


def test_stored_bytes_without_pread_seeks_under_a_lock(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "b.bin"
    path.write_bytes(bytes(range(256)))
    with open(path, "rb") as f:
        with_pread = patches._stored_bytes(f)
        monkeypatch.delattr(patches.os, "pread", raising=False)
        without = patches._stored_bytes(f)
        assert with_pread(10, 5) == without(10, 5) == bytes(range(10, 15))
        assert without(250, 10) == bytes(range(250, 256))
