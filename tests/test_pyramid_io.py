"""Pyramids through the file format: writing, reading, virtual levels, geometry."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest

import jnrrd
from jnrrd.pyramid import downsample

METHODS = ["average", "max", "min", "mode", "gaussian", "lanczos"]


def header_of(path):
    out = {}
    with open(path, "rb") as f:
        for line in f:
            if not line.strip():
                break
            out.update(json.loads(line))
    return out


def volume(shape=(37, 30, 21), dtype=np.uint16, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.normal(size=shape).astype(dtype)
    return rng.integers(0, 50, size=shape).astype(dtype)


def close(a, b, method):
    if method in ("gaussian", "lanczos"):
        if a.dtype.kind in "iu":
            assert np.abs(a.astype(np.int64) - b.astype(np.int64)).max(initial=0) <= 1
        else:
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    else:
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("storage", ["internal", "external"])
def test_every_level_equals_the_method_applied_to_level_0(tmp_path, method, storage):
    x = volume()
    path = str(tmp_path / "p.jnrrd")
    jnrrd.write(path, x, tile=(8, 8, 8), levels=3, downsample=method, storage=storage,
                compression="zstd")
    h = header_of(path)
    assert h["tile:levels"] == 3 and h["tile:level_scales"] == [1, 2, 4]
    assert h["tile:downsample_method"] == method
    if storage == "external":
        assert "{l}" in h["tile:pattern"]
    for k in range(3):
        data, header = jnrrd.read(path, level=k)
        assert header["sizes"] == list(x.shape)
        close(data, downsample(x, (2**k,) * 3, method), method)


@pytest.mark.parametrize("levels", [4, [1, 2, 4], [[1, 1, 1], [2, 2, 1], [4, 4, 2]]])
def test_level_arguments(tmp_path, levels):
    x = volume((40, 36, 20))
    path = str(tmp_path / "l.jnrrd")
    jnrrd.write(path, x, tile=(8, 8, 4), levels=levels)
    with jnrrd.open(path) as vol:
        scales = [lv.scale for lv in vol.levels]
        if levels == 4:
            assert scales == [(1, 1, 1), (2, 2, 2), (4, 4, 4), (8, 8, 8)]
        elif levels == [1, 2, 4]:
            assert scales == [(1, 1, 1), (2, 2, 2), (4, 4, 4)]
        else:
            assert scales == [(1, 1, 1), (2, 2, 1), (4, 4, 2)]
        for lv in vol.levels:
            assert lv.shape == tuple(max(1, n // s) for n, s in zip(x.shape, lv.scale))
            np.testing.assert_array_equal(lv[...], downsample(x, lv.scale, "average"))


def test_integer_scale_applies_to_tiled_axes_only(tmp_path):
    x = volume((16, 16, 3))
    path = str(tmp_path / "c.jnrrd")
    jnrrd.write(path, x, tile={0: 8, 1: 8}, levels=2)
    with jnrrd.open(path) as vol:
        assert vol.levels[1].scale == (2, 2, 1)
        assert vol.levels[1].shape == (8, 8, 3)


def test_index_order_c_levels(tmp_path):
    x = volume((20, 16, 12))  # caller axes (z, y, x) under C order
    path = str(tmp_path / "c.jnrrd")
    jnrrd.write(path, x, tile=(4, 8, 8), levels=[[1, 1, 1], [1, 2, 2]], index_order="C")
    with jnrrd.open(path, index_order="C") as vol:
        assert vol.levels[1].scale == (1, 2, 2)
        np.testing.assert_array_equal(vol.levels[1][...], downsample(x, (1, 2, 2), "average"))
    assert header_of(path)["tile:level_scales"][1] == [2, 2, 1]  # header order


@pytest.mark.parametrize("method", ["average", "max", "mode", "gaussian"])
def test_virtual_levels_equal_what_writing_them_stores(tmp_path, method):
    x = volume((33, 27, 19))
    stored = str(tmp_path / "all.jnrrd")
    virtual = str(tmp_path / "virt.jnrrd")
    jnrrd.write(stored, x, tile=(8, 8, 8), levels=4, downsample=method)
    jnrrd.write(virtual, x, tile=(8, 8, 8), levels=4, downsample=method,
                header={"tile:levels_stored": [0, 2]})
    h = header_of(virtual)
    assert h["tile:levels_stored"] == [0, 2] and h["tile:levels_virtual"] == [1, 3]
    assert len(h["tile:offset_table"]) == 5 * 4 * 3 + 1  # level 2 is (8, 6, 4): one tile
    with jnrrd.open(stored) as a, jnrrd.open(virtual) as b:
        assert not b.levels[1].stored and b.levels[2].stored
        for k in range(4):
            np.testing.assert_array_equal(b.levels[k][...], a.levels[k][...])
            np.testing.assert_array_equal(b.levels[k][2:7, ::2, 1], a.levels[k][2:7, ::2, 1])
        np.testing.assert_array_equal(b.levels[1].read_tile((1, 0, 0)),
                                      a.levels[1].read_tile((1, 0, 0)))
        assert b.levels[1].stored_bytes == 0


def test_level_quality(tmp_path):
    x = volume((32, 32, 16))
    path = str(tmp_path / "q.jnrrd")
    jnrrd.write(path, x, tile=(16, 16, 16), levels=3, quality=True)
    q = header_of(path)["tile:level_quality"]
    assert q[0] == {"rmse": 0.0, "psnr": None}
    for k in (1, 2):
        lv = downsample(x, (2**k,) * 3, "average").astype(float)
        up = np.repeat(np.repeat(np.repeat(lv, 2**k, 0), 2**k, 1), 2**k, 2)
        rmse = float(np.sqrt(np.mean((up - x.astype(float)) ** 2)))
        assert q[k]["rmse"] == pytest.approx(rmse, rel=1e-9)
        assert q[k]["psnr"] == pytest.approx(20 * np.log10(65535 / rmse), rel=1e-9)


def test_level_geometry_for_rotated_directions(tmp_path):
    c, s = np.cos(0.3), np.sin(0.3)
    dirs = [[0.5 * c, 0.5 * s, 0.0], [-0.7 * s, 0.7 * c, 0.0], [0.0, 0.1, 1.5]]
    x = volume((16, 16, 8))
    path = str(tmp_path / "g.jnrrd")
    jnrrd.write(path, x, tile=(8, 8, 8), levels=[[1, 1, 1], [2, 2, 1], [4, 4, 2]],
                header={"space": "RAS", "space_directions": dirs, "space_origin": [1, 2, 3]})
    with jnrrd.open(path) as vol:
        a0 = vol.affine
        for lv in vol.levels[1:]:
            a = lv.affine
            s_ = np.array(lv.scale)
            for idx in [(0, 0, 0), (1, 2, 0), (3, 1, 1)]:
                i = np.array(idx, float)
                world = a @ np.append(i, 1.0)
                # centre of the level-0 block this voxel summarises (cell-centred)
                centre0 = i * s_ + (s_ - 1) / 2
                np.testing.assert_allclose(world, a0 @ np.append(centre0, 1.0), atol=1e-12)
            np.testing.assert_allclose(lv.space_directions[0], np.array(dirs[0]) * lv.scale[0])


def test_read_level_out_of_range(tmp_path):
    path = str(tmp_path / "r.jnrrd")
    jnrrd.write(path, volume((8, 8, 8)), tile=4, levels=2)
    with pytest.raises(IndexError):
        jnrrd.read(path, level=2)


@pytest.mark.slow
def test_pyramid_of_a_1gib_memmap_under_300mb(tmp_path):
    shape = (1024, 1024, 512)
    src = np.lib.format.open_memmap(str(tmp_path / "src.npy"), mode="w+", dtype=np.uint16,
                                    shape=shape, fortran_order=True)
    ramp = np.arange(1024, dtype=np.uint16)
    for k in range(0, 512, 32):
        src[:, :, k : k + 32] = (ramp[:, None, None] + np.uint16(k))
    src.flush()
    path = str(tmp_path / "pyr.jnrrd")
    tracemalloc.start()
    try:
        jnrrd.write(path, src, tile=(128, 128, 64), levels=4, compression="lz4")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    print(f"peak traced memory: {peak / 2**20:.0f} MiB")
    assert peak < 300 * 2**20
    with jnrrd.open(path) as vol:
        lv3 = vol.levels[3]
        assert lv3.shape == (128, 128, 64)
        want = downsample(np.asarray(src[:64, :64, :64]), (8, 8, 8), "average")
        np.testing.assert_array_equal(lv3[:8, :8, :8], want)


@pytest.mark.parametrize("levels", [1, 3])
def test_raw_tiles_written_in_place_give_the_same_file_as_in_order(tmp_path, monkeypatch,
                                                                   levels):
    from jnrrd.writing import sinks

    a = np.random.default_rng(8).integers(0, 5, size=(40, 36, 50), dtype=np.uint16)
    placed = tmp_path / "placed.jnrrd"
    jnrrd.write(placed, a, tile=(16, 16, 16), levels=levels, downsample="mode")
    monkeypatch.setattr(sinks.DirectSink, "tile_offsets", lambda self, level: None)
    ordered = tmp_path / "ordered.jnrrd"
    jnrrd.write(ordered, a, tile=(16, 16, 16), levels=levels, downsample="mode")
    assert placed.read_bytes() == ordered.read_bytes()
    with jnrrd.open(placed) as vol:
        np.testing.assert_array_equal(vol[...], a)


def test_tiles_above_the_buffer_cap_are_written_from_fresh_memory(tmp_path, monkeypatch):
    from jnrrd.writing import tiled as writer

    # 40 x 36 x 50 in 16³ tiles: the edge tiles are padded, so fresh buffers must be filled
    a = np.random.default_rng(9).integers(0, 5, size=(40, 36, 50), dtype=np.uint16)
    kept = tmp_path / "kept.jnrrd"
    jnrrd.write(kept, a, tile=(16, 16, 16), levels=2)
    monkeypatch.setattr(writer, "_BUFFER_BYTES", 0)
    fresh = tmp_path / "fresh.jnrrd"
    jnrrd.write(fresh, a, tile=(16, 16, 16), levels=2)
    assert fresh.read_bytes() == kept.read_bytes()
