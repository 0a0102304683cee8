"""benchmarks/remote_floor.py: the requests its S3 rows make are the ones a read makes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zstandard

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import remote_floor  # noqa: E402

import jnrrd  # noqa: E402


def test_joined_merges_neighbours_only() -> None:
    assert remote_floor.joined([(0, 10), (10, 25), (30, 40), (40, 41)]) == [(0, 25), (30, 41)]
    assert remote_floor.joined([]) == []


def test_region_ranges_are_the_tiles_a_region_touches(tmp_path: Path) -> None:
    path = tmp_path / "v.jnrrd"
    arr = np.arange(128 * 192 * 64, dtype=np.uint16).reshape(128, 192, 64)
    jnrrd.write(path, arr, tile=(64, 64, 64), compression="zstd")
    coords, ranges = remote_floor._tiles(str(path))
    regions = [(slice(10, 42), slice(60, 70), slice(0, 10)),  # two tiles along y
               (slice(64, 96), slice(128, 160), slice(32, 64)),  # one tile
               (slice(63, 65), slice(63, 129), slice(0, 64))]  # 2 × 3 tiles
    got = remote_floor.region_ranges(coords, ranges, regions)
    for region, spans in zip(regions, got, strict=True):
        expected = sorted(r for c, r in zip(coords, ranges, strict=True)
                          if all(s.start < (i + 1) * 64 and i * 64 < s.stop
                                 for i, s in zip(c, region, strict=True)))
        assert spans == expected
    assert [len(s) for s in got] == [2, 1, 6]
    # a range holds its tile's stored bytes: tile (1, 2, 0) decodes to that part of the array
    a, b = ranges[coords.index((1, 2, 0))]
    tile = np.frombuffer(zstandard.ZstdDecompressor().decompress(path.read_bytes()[a:b]),
                         np.uint16).reshape((64, 64, 64), order="F")
    np.testing.assert_array_equal(tile, arr[64:128, 128:192, 0:64])


@pytest.mark.slow
def test_s3_regions_case_runs(tmp_path: Path) -> None:
    # the whole case on a 64³ volume (one tile): moto's S3 in a child process, every row
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(BENCH.parent), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, str(BENCH / "remote_floor.py"), "--case", "s3-regions", "--size",
         "64", "--repeat", "1", "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {line[:14].strip(): line.split()[-1] for line in done.stdout.splitlines()
            if line[:14].strip() in ("obstore alone", "fetch only", "jnrrd")}
    assert set(rows) == {"obstore alone", "fetch only", "jnrrd"}
    # one request per region (each touches the one tile); the store seam and the read add
    # the open's ranged GET
    assert rows["obstore alone"] == "50"
    assert rows["fetch only"] == rows["jnrrd"] == "51"
    assert "server CPU per request" in done.stdout
