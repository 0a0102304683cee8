"""Kind-aware tiling and pyramids (docs/format.md#domain-axes): non-domain axes (vector, colour,
list, ...) are not tiled by an integer tile and never downsampled, with every method, stored or
virtual."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import jnrrd
from jnrrd.cli import main as cli_main
from jnrrd.errors import HeaderError
from jnrrd.pyramid import downsample
from jnrrd.tiling.kinds import axis_kinds, domain_axes

METHODS = ["average", "gaussian", "lanczos", "max", "min", "mode"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rgb(seed: int = 0, shape=(3, 64, 64), dtype=np.uint8) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 200, shape).astype(dtype)


def close(a: np.ndarray, b: np.ndarray, method: str) -> None:
    if method in ("gaussian", "lanczos") and a.dtype.kind in "iu":
        assert np.abs(a.astype(np.int64) - b.astype(np.int64)).max(initial=0) <= 1
    else:
        np.testing.assert_array_equal(a, b)


def per_channel(x: np.ndarray, axis: int, scale: tuple[int, ...], method: str) -> np.ndarray:
    """Each slice along the non-domain ``axis`` downsampled on its own, then stacked."""
    sub = tuple(s for a, s in enumerate(scale) if a != axis)
    return np.stack([downsample(np.take(x, c, axis=axis), sub, method)
                     for c in range(x.shape[axis])], axis=axis)


def test_kind_names_domain_and_non_domain():
    kinds = axis_kinds({"kinds": ["RGB-color", "space", None, "???", "none", "domain", "time",
                                  "list", "3D-matrix"]}, 9)
    assert domain_axes(kinds) == (1, 2, 3, 4, 5, 6)
    assert axis_kinds({}, 2) == (None, None) and domain_axes((None, None)) == (0, 1)


@pytest.mark.parametrize("method", METHODS)
def test_rgb_levels_keep_every_channel(tmp_path, method):
    x = rgb()
    path = tmp_path / "rgb.jnrrd"
    jnrrd.write(path, x, {"kinds": ["RGB-color", "space", "space"]}, levels=2, downsample=method)
    h = jnrrd.read_header(path)
    assert h["tile:dimensions"] == [1, 2] and h["tile:sizes"] == [64, 64]
    assert axis_kinds(h, 3) == ("rgb_color", "space", "space")  # still claims colour, truly
    level1, _ = jnrrd.read(path, level=1)
    assert level1.shape == (3, 32, 32)
    close(level1, per_channel(x, 0, (1, 2, 2), method), method)
    with jnrrd.open(path) as vol:
        assert vol.levels[1].scale == (1, 2, 2) and vol.levels[1].shape == (3, 32, 32)


@pytest.mark.parametrize("method", METHODS)
def test_virtual_levels_keep_every_channel(tmp_path, method):
    x = rgb(1, (40, 36, 4), np.int16)  # channels last (file axis 2)
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, x, {"kinds": ["space", "space", "RGBA-color"], "tile:levels_stored": [0]},
                levels=3, downsample=method, compression="zstd")
    h = jnrrd.read_header(path)
    assert h["tile:levels_virtual"] == [1, 2]
    for k in (1, 2):
        data, _ = jnrrd.read(path, level=k)
        assert data.shape == (40 >> k, 36 >> k, 4)
        close(data, per_channel(x, 2, (2**k, 2**k, 1), method), method)


def test_dwi_gradient_axis_is_kept(tmp_path):
    x = rgb(2, (7, 20, 18, 10), np.int16)
    path = tmp_path / "dwi.jnrrd"
    jnrrd.write(path, x, {"kinds": ["list", "space", "space", "space"]}, compression="zstd",
                levels=3)
    h = jnrrd.read_header(path)
    assert h["tile:dimensions"] == [1, 2, 3] and h["tile:sizes"] == [20, 18, 10]
    with jnrrd.open(path) as vol:
        assert [lv.shape for lv in vol.levels] == [(7, 20, 18, 10), (7, 10, 9, 5), (7, 5, 4, 2)]
        np.testing.assert_array_equal(vol.levels[2][...], per_channel(x, 0, (1, 4, 4, 4),
                                                                       "average"))


def test_segmentation_layers_keep_labels(tmp_path):
    labels = np.random.default_rng(3).integers(0, 4, (2, 16, 16, 16)).astype(np.uint8)
    path = tmp_path / "seg.jnrrd"
    jnrrd.write(path, labels, {"kinds": ["list", "domain", "domain", "domain"]}, tile=8,
                levels=2, downsample="mode")
    data, _ = jnrrd.read(path, level=1)
    assert data.shape == (2, 8, 8, 8)
    np.testing.assert_array_equal(data, per_channel(labels, 0, (1, 2, 2, 2), "mode"))


def test_c_order_channels_last(tmp_path):
    x = rgb(4, (64, 48, 3))  # (y, x, c) as the caller sees it; file axes (c, x, y)
    path = tmp_path / "c.jnrrd"
    jnrrd.write(path, x, {"kinds": ["RGB-color", "space", "space"]}, index_order="C",
                levels=2)
    data, _ = jnrrd.read(path, level=1, index_order="C")
    assert data.shape == (32, 24, 3)
    np.testing.assert_array_equal(data, per_channel(x, 2, (2, 2, 1), "average"))


def test_explicit_tile_on_a_non_domain_axis_is_honoured_but_not_scaled(tmp_path):
    x = rgb(5, (3, 32, 32))
    path = tmp_path / "e.jnrrd"
    jnrrd.write(path, x, {"kinds": ["RGB-color", "space", "space"]}, tile=(3, 16, 16), levels=3)
    h = jnrrd.read_header(path)
    assert h["tile:dimensions"] == [0, 1, 2] and h["tile:sizes"] == [3, 16, 16]
    assert h["tile:level_scales"] == [1, [1, 2, 2], [1, 4, 4]]
    data, _ = jnrrd.read(path, level=2)
    np.testing.assert_array_equal(data, per_channel(x, 0, (1, 4, 4), "average"))


def test_tuple_tile_with_none_leaves_the_axis_untiled(tmp_path):
    x = rgb(6, (3, 40, 40))
    path = tmp_path / "n.jnrrd"
    jnrrd.write(path, x, tile=(None, 16, 16), levels=2)
    h = jnrrd.read_header(path)
    assert h["tile:dimensions"] == [1, 2] and h["tile:sizes"] == [16, 16]
    assert jnrrd.read(path, level=1)[0].shape == (3, 20, 20)
    with pytest.raises(HeaderError, match="at least one axis"):
        jnrrd.write(tmp_path / "none.jnrrd", x, tile=(None, None, None))


@pytest.mark.parametrize("levels", [[1, [2, 2, 2]], [[1, 1, 1], [2, 1, 1]]])
def test_a_scale_on_a_non_domain_axis_is_an_error(tmp_path, levels):
    path = tmp_path / "bad.jnrrd"
    with pytest.raises(HeaderError, match=r"axis 0 \(kind 'rgb_color'\)"):
        jnrrd.write(path, rgb(), {"kinds": ["RGB-color", "space", "space"]}, tile=(3, 16, 16),
                    levels=levels)
    assert not path.exists()


def test_header_level_scales_on_a_non_domain_axis_are_an_error(tmp_path):
    header = {"kinds": ["vector", "space", "space"], "tile:enabled": True,
              "tile:dimensions": [0, 1, 2], "tile:sizes": [3, 16, 16],
              "tile:level_scales": [1, 2]}
    with pytest.raises(HeaderError, match=r"tile:level_scales: level 1 scales axis 0 \(kind "
                                          r"'vector'\)"):
        jnrrd.write(tmp_path / "h.jnrrd", rgb(), header)


def test_levels_without_a_domain_axis_are_an_error(tmp_path):
    x = rgb(7, (3, 5))
    with pytest.raises(HeaderError, match="at most 1 level"):
        jnrrd.write(tmp_path / "v.jnrrd", x, {"kinds": ["RGB-color", "list"]}, levels=2)
    jnrrd.write(tmp_path / "v.jnrrd", x, {"kinds": ["RGB-color", "list"]}, tile=2)
    h = jnrrd.read_header(tmp_path / "v.jnrrd")
    assert h["tile:dimensions"] == [0, 1] and h["tile:sizes"] == [2, 2]  # nothing else to tile


def test_cli_tile_none_leaves_an_axis_untiled(tmp_path, capsys):
    x = rgb(8, (3, 30, 20))
    jnrrd.write(tmp_path / "in.nrrd", x, {"kinds": ["RGB-color", "space", "space"]})
    src, out = str(tmp_path / "in.nrrd"), str(tmp_path / "out.jnrrd")
    # as a user types it: a subprocess
    proc = subprocess.run([sys.executable, "-m", "jnrrd", "convert", "in.nrrd", "out.jnrrd",
                           "--tile", "none,16,8", "--levels", "2", "-q"], cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_array_equal(jnrrd.read(out)[0], x)
    assert cli_main(["info", out, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    h = info["header"]
    assert h["tile:dimensions"] == [1, 2] and h["tile:sizes"] == [16, 8]
    assert [lv["shape"] for lv in info["levels"]] == [[3, 30, 20], [3, 15, 10]]
    # one number: the domain axes only (the colour axis is not tiled)
    assert cli_main(["convert", src, out, "--tile", "16", "--levels", "2", "-q"]) == 0
    h = jnrrd.read_header(out)
    assert h["tile:dimensions"] == [1, 2] and h["tile:sizes"] == [16, 16]
    assert cli_main(["convert", src, str(tmp_path / "o.jnrrd"), "--tile", "none,none,none"]) == 2
    assert "at least one axis" in capsys.readouterr().err


DOMAIN = ["space", "domain", "time", None, "???"]
NON_DOMAIN = ["list", "vector", "point", "covariant-vector"]  # kinds of any size


@st.composite
def kinded_volumes(draw):
    ndim = draw(st.integers(2, 4))
    shape = tuple(draw(st.lists(st.integers(1, 12), min_size=ndim, max_size=ndim)))
    kinds = [draw(st.sampled_from(DOMAIN + NON_DOMAIN)) for _ in range(ndim)]
    seed = draw(st.integers(0, 2**16))
    return shape, kinds, seed


@pytest.mark.slow
@given(kinded_volumes(), st.sampled_from(METHODS), st.integers(1, 8), st.integers(1, 6))
def test_random_kinds_levels_keep_non_domain_axes(tmp_path_factory, vol, method, levels, tile):
    shape, kinds, seed = vol
    x = np.random.default_rng(seed).integers(0, 9, shape).astype(np.uint8)
    header = {"kinds": kinds}
    dom = tuple(a for a, k in enumerate(kinds) if k in DOMAIN)
    scaled = dom or ()
    top = 1 + max((shape[a].bit_length() - 1 for a in scaled), default=0)
    path = tmp_path_factory.mktemp("k") / "k.jnrrd"
    if levels > top:
        with pytest.raises(HeaderError, match=f"at most {top} level"):
            jnrrd.write(path, x, header, tile=tile, levels=levels, downsample=method)
        assert not path.exists()
        return
    jnrrd.write(path, x, header, tile=tile, levels=levels, downsample=method)
    h = jnrrd.read_header(path)
    assert h["tile:dimensions"] == list(dom or range(len(shape)))
    assert h["tile:sizes"] == [min(tile, shape[a]) for a in (dom or range(len(shape)))]
    for k in range(levels):
        scale = tuple(2**k if a in dom else 1 for a in range(len(shape)))
        data, _ = jnrrd.read(path, level=k)
        assert data.shape == tuple(n if a not in dom else max(1, n // 2**k)
                                   for a, n in enumerate(shape))
        expected = downsample(x, scale, method)
        close(data, expected, method)
        non = [a for a in range(len(shape)) if a not in dom]
        if non and k:
            # one slice along a non-domain axis, downsampled alone, is that slice of the level
            a = non[0]
            sub = tuple(s for b, s in enumerate(scale) if b != a)
            close(np.take(data, shape[a] - 1, axis=a),
                  downsample(np.take(x, shape[a] - 1, axis=a), sub, method), method)


def test_a_foreign_file_scaling_a_colour_axis_reads_as_written_and_validate_warns(tmp_path):
    x = rgb(9, (3, 32, 32))
    path = tmp_path / "old.jnrrd"
    # as an older writer laid it out: the colour axis tiled and halved, tiles in files
    jnrrd.write(path, x, tile=(3, 16, 16), levels=[1, [2, 2, 2]], storage="external")
    lines = path.read_bytes().split(b"\n")
    lines.insert(1, json.dumps({"kinds": ["RGB-color", "space", "space"]}).encode())
    path.write_bytes(b"\n".join(lines))
    problems = jnrrd.validate(path)
    assert [(p.severity, p.field) for p in problems] == [("warning",
                                                          "/tile:level_scales/1")]
    assert "axis 0, a non-domain axis (kind 'rgb_color')" in problems[0].message
    assert jnrrd.read(path, level=1)[0].shape == (1, 16, 16)  # the header's scales decide


@pytest.mark.parametrize("method", ["average", "mode"])
def test_dask_sources_keep_every_channel(tmp_path, method):
    import dask.array as da

    x = rgb(10, (3, 40, 30))
    path = tmp_path / "d.jnrrd"
    jnrrd.write(path, da.from_array(x, chunks=(3, 20, 15)),
                {"kinds": ["RGB-color", "space", "space"]}, levels=3, downsample=method)
    h = jnrrd.read_header(path)
    assert h["tile:dimensions"] == [1, 2] and h["tile:sizes"] == [40, 30]
    for k in (1, 2):
        np.testing.assert_array_equal(jnrrd.read(path, level=k)[0],
                                      per_channel(x, 0, (1, 2**k, 2**k), method))
