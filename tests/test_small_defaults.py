"""Defaults that fit small volumes: integer tiles capped at the axis length, a bounded number of
levels, and layouts checked against the readers' caps before anything is allocated (issue 14
item 4, issue 19 §3 writer side)."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import jnrrd
from jnrrd.cli import main as cli_main
from jnrrd.errors import HeaderError, UnsupportedError

ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20


def header_bytes(path: Path) -> int:
    data = path.read_bytes()
    return data.index(b"\n\n") + 2


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "jnrrd", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


# -- integer tiles are capped at the axis length ----------------------------------------------

def test_int_tile_is_capped_at_each_axis_length(tmp_path):
    x = np.arange(30**3, dtype=np.int16).reshape(30, 30, 30)
    path = tmp_path / "s.jnrrd"
    jnrrd.write(path, x, tile=64, levels=5)
    h = jnrrd.read_header(path)
    assert h["tile:sizes"] == [30, 30, 30]
    assert h["tile:level_tile_sizes"] == [[30] * 3, [15] * 3, [7] * 3, [3] * 3, [1] * 3]
    # raw tiles with no padding: level 0 plus about 1/7 for the pyramid
    assert path.stat().st_size - header_bytes(path) < 1.2 * x.nbytes
    np.testing.assert_array_equal(jnrrd.read(path)[0], x)


def test_default_tile_is_capped_too(tmp_path):
    jnrrd.write(tmp_path / "d.jnrrd", np.ones((30, 20, 10), np.uint8), compression="zstd")
    assert jnrrd.read_header(tmp_path / "d.jnrrd")["tile:sizes"] == [30, 20, 10]
    jnrrd.write(tmp_path / "e.jnrrd", np.ones((300, 7), np.uint8), compression="zstd")
    assert jnrrd.read_header(tmp_path / "e.jnrrd")["tile:sizes"] == [256, 7]


def test_explicit_per_axis_tiles_are_honoured_as_given(tmp_path):
    x = np.ones((30, 30, 30), np.uint8)
    jnrrd.write(tmp_path / "x.jnrrd", x, tile=(64, 64, 64))
    assert jnrrd.read_header(tmp_path / "x.jnrrd")["tile:sizes"] == [64, 64, 64]
    jnrrd.write(tmp_path / "y.jnrrd", x, tile={0: 40}, levels=2)
    h = jnrrd.read_header(tmp_path / "y.jnrrd")
    assert h["tile:sizes"] == [40] and "tile:level_tile_sizes" not in h


def test_capped_tile_stays_above_the_overlap(tmp_path):
    x = np.arange(5 * 40, dtype=np.uint8).reshape(5, 40)
    path = tmp_path / "o.jnrrd"
    jnrrd.write(path, x, tile=16, overlap=6)  # the reader warns when overlap >= tile
    assert jnrrd.read_header(path)["tile:sizes"] == [7, 16]
    np.testing.assert_array_equal(jnrrd.read(path)[0], x)


# -- levels are bounded --------------------------------------------------------------------

def test_levels_beyond_one_voxel_are_an_error_naming_the_maximum(tmp_path):
    x = np.ones((30, 30, 30), np.uint8)
    jnrrd.write(tmp_path / "ok.jnrrd", x, levels=5)
    with jnrrd.open(tmp_path / "ok.jnrrd") as vol:
        assert [lv.scale for lv in vol.levels][-1] == (16, 16, 16)
        assert vol.levels[-1].shape == (1, 1, 1)
    path = tmp_path / "bad.jnrrd"
    with pytest.raises(HeaderError, match=r"at most 5 level\(s\), scales 1 to 16"):
        jnrrd.write(path, x, levels=6)
    assert not path.exists() and os.listdir(tmp_path) == ["ok.jnrrd"]


def test_a_failed_levels_check_keeps_the_old_file(tmp_path):
    path = tmp_path / "keep.jnrrd"
    jnrrd.write(path, np.arange(8, dtype=np.uint8))
    before = path.read_bytes()
    with pytest.raises(HeaderError, match="at most 4 level"):
        jnrrd.write(path, np.zeros(8, np.uint8), levels=5)
    assert path.read_bytes() == before


def test_the_maximum_follows_the_longest_downsampled_axis(tmp_path):
    x = np.ones((32, 3, 2), np.uint8)
    jnrrd.write(tmp_path / "a.jnrrd", x, levels=6)  # 32 → 1 at scale 32
    assert jnrrd.read(tmp_path / "a.jnrrd", level=5)[0].shape == (1, 1, 1)
    with pytest.raises(HeaderError, match="at most 6 level"):
        jnrrd.write(tmp_path / "b.jnrrd", x, levels=7)


def test_huge_levels_fail_at_once(tmp_path):
    t0 = time.perf_counter()
    with pytest.raises(HeaderError, match="at most 3 level"):
        jnrrd.write(tmp_path / "h.jnrrd", np.ones((4, 4), np.uint8), levels=10**9)
    assert time.perf_counter() - t0 < 1


def test_an_explicit_list_may_not_repeat_a_one_voxel_level(tmp_path):
    x = np.ones((8, 8), np.uint8)
    jnrrd.write(tmp_path / "ok.jnrrd", x, levels=[1, 2, 8])
    with pytest.raises(HeaderError, match="level 3 would repeat level 2"):
        jnrrd.write(tmp_path / "bad.jnrrd", x, levels=[1, 2, 8, 16])


def test_cli_too_many_levels_fails_and_writes_nothing(tmp_path):
    jnrrd.write(tmp_path / "in.nrrd", np.ones((30, 30, 30), np.int16), encoding="gzip")
    proc = run_cli("convert", "in.nrrd", "out.jnrrd", "--levels", "6", "-q", cwd=tmp_path)
    assert proc.returncode in (1, 2) and "at most 5 level" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out.jnrrd").exists()


# -- the README's conversion does not blow small files up -----------------------------------

def _readme_convert() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"jnrrd convert (\S+\.nrrd) (\S+\.jnrrd)([^;\n]*)", readme)
    assert m, "README shows a jnrrd convert command"
    return shlex.split(m.group(3))


def _example_nrrds(tmp_path: Path) -> list[Path]:
    """The NRRD the examples generate, plus small and channelled ones made the same way."""
    spec = importlib.util.spec_from_file_location("nrrd_to_pyramid",
                                                  ROOT / "examples" / "nrrd_to_pyramid.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ROOT / "examples"))  # its shared _runner module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "examples"))
    out = [tmp_path / "example.nrrd"]
    module.make_nrrd(str(out[0]))
    rng = np.random.default_rng(0)
    for name, data, header in [
        ("small.nrrd", (np.arange(30**3) % 7).reshape(30, 30, 30).astype(np.int16), {}),
        ("tiny.nrrd", np.arange(3, dtype=np.uint8), {}),
        ("rgb.nrrd", rng.integers(0, 255, (3, 40, 33)).astype(np.uint8),
         {"kinds": ["RGB-color", "space", "space"]}),
        ("dwi.nrrd", rng.integers(0, 900, (7, 12, 10, 9)).astype(np.int16),
         {"kinds": ["list", "space", "space", "space"]}),
    ]:
        jnrrd.write(tmp_path / name, data, header, encoding="gzip")
        out.append(tmp_path / name)
    for real in sorted((ROOT / "tests" / "data").glob("*.nrrd")):  # pynrrd-written files
        out.append(tmp_path / real.name)
        out[-1].write_bytes(real.read_bytes())
    return out


@pytest.mark.parametrize("options", [pytest.param(None, id="readme"),
                                     pytest.param(["--compression", "zstd"], id="zstd"),
                                     pytest.param(["--levels", "2"], id="levels")])
def test_converting_example_nrrds_stays_small(tmp_path, capsys, options):
    opts = _readme_convert() if options is None else options
    for src in _example_nrrds(tmp_path):
        if options == ["--levels", "2"] and src.name != "small.nrrd":
            continue  # raw tiles pad the edge tiles of non-multiple axes; small.nrrd has none
        out = src.with_suffix(".jnrrd")
        code = cli_main(["convert", str(src), str(out), *opts, "-q"])
        if src.name == "tiny.nrrd" and "--levels" in opts:
            assert code == 1 and "at most 2 level" in capsys.readouterr().err
            continue
        assert code == 0, capsys.readouterr().err
        data, _ = jnrrd.read(src)
        np.testing.assert_array_equal(jnrrd.read(out)[0], data)
        stored = out.stat().st_size - header_bytes(out)
        # ~1.5x the raw bytes (plus a codec frame's few bytes per tile: `tiny` is 3 bytes)
        assert stored <= 1.5 * data.nbytes + 64, (src.name, stored, data.nbytes)


def test_readme_states_the_sizes_it_gets(tmp_path):
    src = _example_nrrds(tmp_path)[0]
    assert cli_main(["convert", str(src), str(tmp_path / "scan.jnrrd"), *_readme_convert(),
                     "-q"]) == 0
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"a (\d+) KB gzip NRRD, becomes (\d+) KB", readme)
    assert m, "the README states the example's sizes next to the command"
    assert abs(src.stat().st_size / 1000 - int(m.group(1))) < 0.1 * int(m.group(1))
    size = (tmp_path / "scan.jnrrd").stat().st_size / 1000
    assert abs(size - int(m.group(2))) < 0.1 * int(m.group(2))


# -- tiny arrays never cost gigabytes (issue 19 §3, writer side) ----------------------------

def _peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_one_voxel_7d_zstd_does_not_allocate_the_default_tile(tmp_path):
    """Regression: the default 64⁷ tile was padded in full (4 TiB)."""
    path = tmp_path / "v7.jnrrd"
    peak = _peak(lambda: jnrrd.write(path, np.full((1,) * 7, 9, np.uint8), compression="zstd"))
    assert peak < 16 * MiB and path.stat().st_size < 4096
    assert jnrrd.read_header(path)["tile:sizes"] == [1] * 7
    assert jnrrd.read(path)[0].item() == 9


def test_36_byte_5d_array_stays_small(tmp_path):
    """Regression: a 36-byte 5-D array took 1 GB (the default tile padded)."""
    x = np.arange(36, dtype=np.uint8).reshape(3, 3, 2, 2, 1)
    path = tmp_path / "v5.jnrrd"
    peak = _peak(lambda: jnrrd.write(path, x, compression="zstd"))
    assert peak < 16 * MiB and path.stat().st_size < 4096
    np.testing.assert_array_equal(jnrrd.read(path)[0], x)


def test_5d_uint8_with_tile_64_is_fast(tmp_path):
    """Regression: ``tile=64`` on a small 5-D uint8 array took 30 s."""
    x = np.arange(6 * 5 * 4 * 3 * 2, dtype=np.uint8).reshape(6, 5, 4, 3, 2)
    t0 = time.perf_counter()
    jnrrd.write(tmp_path / "f.jnrrd", x, tile=64)
    assert time.perf_counter() - t0 < 2
    assert jnrrd.read_header(tmp_path / "f.jnrrd")["tile:sizes"] == [6, 5, 4, 3, 2]
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "f.jnrrd")[0], x)


def test_explicit_tile_over_max_tile_bytes_is_refused_before_allocating(tmp_path):
    path = tmp_path / "big.jnrrd"
    x = np.zeros((2,) * 5, np.uint16)
    t0 = time.perf_counter()
    tracemalloc.start()
    try:
        with pytest.raises(UnsupportedError, match=r"tile: one level-0 tile of shape \[64, 64, "
                                                   r"64, 64, 64\] holds 2147483648 bytes, over "
                                                   r"the readers' max_tile_bytes cap"):
            jnrrd.write(path, x, tile=(64,) * 5, compression="zstd")
        assert tracemalloc.get_traced_memory()[1] < 16 * MiB
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - t0 < 2 and not path.exists()


def test_too_many_tiles_are_refused_before_allocating(tmp_path):
    x = np.broadcast_to(np.uint8(0), (400, 300, 100))  # no memory behind it
    path = tmp_path / "many.jnrrd"
    with pytest.raises(UnsupportedError, match=r"12000000 tiles exceed the readers' max_tiles"):
        jnrrd.write(path, x, tile=(1, 1, 1))
    assert not path.exists()


@given(shape=st.lists(st.integers(1, 40), min_size=1, max_size=3)
       | st.lists(st.integers(1, 5), min_size=4, max_size=5),
       tile=st.integers(2, 80), levels=st.integers(1, 8))
def test_random_shapes_cap_tiles_and_bound_levels(tmp_path_factory, shape, tile, levels):
    shape = tuple(shape)
    x = (np.arange(int(np.prod(shape))) % 251).astype(np.uint8).reshape(shape)
    path = tmp_path_factory.mktemp("r") / "r.jnrrd"
    top = 1 + max(n.bit_length() - 1 for n in shape)
    if levels > top:
        with pytest.raises(HeaderError, match=f"at most {top} level"):
            jnrrd.write(path, x, tile=tile, levels=levels)
        assert not path.exists()
        return
    jnrrd.write(path, x, tile=tile, levels=levels)
    h = jnrrd.read_header(path)
    assert h["tile:sizes"] == [min(tile, n) for n in shape]
    with jnrrd.open(path) as vol:
        assert len(vol.levels) == levels
        shapes = [lv.shape for lv in vol.levels]
        assert len(set(shapes)) == levels  # no level repeats another
        for k, lv in enumerate(vol.levels):
            assert lv.shape == tuple(max(1, n >> k) for n in shape)
            assert all(c <= n for c, n in zip(lv.chunks, lv.shape, strict=True))
        np.testing.assert_array_equal(vol[...], x)
