"""OME-Zarr interchange (issue 17 part 2): jnrrd.convert to and from NGFF 0.5 on Zarr v3,
checked with zarr-python on both sides (an OME-Zarr written by hand here, as another tool
would, is read by jnrrd; what jnrrd writes is read back by zarr-python)."""

from __future__ import annotations

import json
import sys
import tracemalloc
import warnings

import numpy as np
import pytest

import jnrrd
from jnrrd.cli import main
from jnrrd.errors import FormatError, MissingDependencyError

zarr = pytest.importorskip("zarr")


def _ome(group):
    return group.attrs.asdict()["ome"]


def _level_tr(ome, k):
    ts = ome["multiscales"][0]["datasets"][k]["coordinateTransformations"]
    return ts[0]["scale"], ts[1]["translation"]


@pytest.fixture
def ct(tmp_path):
    """A 3-D uint16 pyramid with diagonal geometry and units (header order x, y, z)."""
    rng = np.random.default_rng(1)
    data = rng.integers(0, 4000, (40, 36, 20), dtype=np.uint16)
    path = tmp_path / "ct.jnrrd"
    jnrrd.write(path, data, {"space": "RAS", "space_directions": [[0.5, 0, 0], [0, 0.5, 0],
                                                                 [0, 0, 2.0]],
                             "space_origin": [10.0, -4.0, 3.0], "space_units": ["mm"] * 3,
                             "labels": ["x", "y", "z"]},
                tile=16, compression="zstd", levels=3)
    return path, data


def test_3d_uint16_pyramid_round_trip_read_by_zarr_python(ct, tmp_path):
    src, data = ct
    out = tmp_path / "ct.ome.zarr"
    jnrrd.convert(src, out)
    g = zarr.open_group(out, mode="r")
    ome = _ome(g)
    assert ome["version"] == "0.5"
    ms = ome["multiscales"][0]
    assert ms["axes"] == [{"name": n, "type": "space", "unit": "millimeter"}
                          for n in ("z", "y", "x")]
    assert [d["path"] for d in ms["datasets"]] == ["0", "1", "2"]
    with jnrrd.open(src) as vol:
        for k, lv in enumerate(vol.levels):
            arr = g[str(k)]
            assert arr.shape == lv.shape[::-1]
            assert arr.chunks == lv.chunks[::-1]
            assert [c.to_dict()["name"] for c in arr.compressors] == ["zstd"]
            np.testing.assert_array_equal(arr[...], jnrrd.read(src, level=k)[0].T)
            scale, trans = _level_tr(ome, k)
            s = 2 ** k
            assert scale == [2.0 * s, 0.5 * s, 0.5 * s]
            # cell-centred level origin: origin + (s - 1)/2 · direction
            # (docs/format.md#per-level-geometry)
            assert trans == pytest.approx([3.0 + (s - 1), -4.0 + 0.25 * (s - 1),
                                           10.0 + 0.25 * (s - 1)])
    assert g.attrs["jnrrd"]["space_directions"] == [[0.5, 0, 0], [0, 0.5, 0], [0, 0, 2.0]]
    assert "tile:offset_table" not in g.attrs["jnrrd"]

    back = tmp_path / "back.jnrrd"
    jnrrd.convert(out, back)
    h0, h1 = jnrrd.read_header(src), jnrrd.read_header(back)
    for key in ("space", "space_directions", "space_origin", "space_units", "labels",
                "tile:sizes", "tile:compression", "tile:level_scales",
                "tile:downsample_method"):
        assert h1.get(key) == h0.get(key), key
    with jnrrd.open(src) as a, jnrrd.open(back) as b:
        assert len(b.levels) == 3
        for la, lb in zip(a.levels, b.levels):
            np.testing.assert_array_equal(lb[...], la[...])
            np.testing.assert_allclose(lb.affine, la.affine)


def test_2d_float32_gzip_round_trip(tmp_path):
    data = np.linspace(-1, 1, 70 * 50, dtype=np.float32).reshape(70, 50)
    data[3, 4] = np.nan
    src = tmp_path / "img.jnrrd"
    jnrrd.write(src, data, {"spacings": [0.25, 0.5]}, tile=32, compression="gzip")
    out = tmp_path / "img.zarr"
    jnrrd.convert(src, out)
    arr = zarr.open_group(out, mode="r")["0"]
    assert arr.dtype == np.float32 and arr.shape == (50, 70) and arr.chunks == (32, 32)
    assert [c.to_dict()["name"] for c in arr.compressors] == ["gzip"]
    np.testing.assert_array_equal(arr[...], data.T)
    assert _level_tr(_ome(zarr.open_group(out, mode="r")), 0)[0] == [0.5, 0.25]
    back = tmp_path / "back.jnrrd"
    jnrrd.convert(out, back)
    got, h = jnrrd.read(back)
    np.testing.assert_array_equal(got, data)
    assert h["spacings"] == [0.25, 0.5] and h["tile:compression"] == "gzip"


def test_rgb_channel_axis_round_trip(tmp_path):
    rng = np.random.default_rng(2)
    data = rng.integers(0, 255, (3, 40, 30), dtype=np.uint8)
    src = tmp_path / "rgb.jnrrd"
    jnrrd.write(src, data, {"kinds": ["RGB-color", "space", "space"], "space_dimension": 2,
                            "space_directions": [None, [0.1, 0], [0, 0.1]],
                            "space_units": ["um", "um"]}, tile=(3, 16, 16), levels=2)
    out = tmp_path / "rgb.ome.zarr"
    jnrrd.convert(src, out)  # interleaved RGB: the channel axis goes first, as NGFF requires
    g = zarr.open_group(out, mode="r")
    axes = _ome(g)["multiscales"][0]["axes"]
    assert [a.get("type") for a in axes] == ["channel", "space", "space"]
    assert [a["name"] for a in axes] == ["c", "y", "x"]
    assert axes[1]["unit"] == "micrometer"
    assert g["0"].shape == (3, 30, 40) and g["1"].shape == (3, 15, 20)
    assert g.attrs["jnrrd_axes"] == [0, 2, 1]
    np.testing.assert_array_equal(g["1"][...], jnrrd.read(src, level=1)[0].transpose(0, 2, 1))
    back = tmp_path / "back.jnrrd"
    jnrrd.convert(out, back)
    got, h = jnrrd.read(back)
    np.testing.assert_array_equal(got, data)
    assert h["kinds"] == ["RGB-color", "space", "space"]
    np.testing.assert_array_equal(jnrrd.read(back, level=1)[0], jnrrd.read(src, level=1)[0])


def test_oblique_geometry_warns_and_is_restored_from_the_attribute(tmp_path):
    c, s = np.cos(0.3), np.sin(0.3)
    dirs = [[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.5]]
    data = np.arange(20 * 16 * 8, dtype=np.int16).reshape(20, 16, 8)
    src = tmp_path / "obl.jnrrd"
    jnrrd.write(src, data, {"space": "LPS", "space_directions": dirs,
                            "space_origin": [1.0, 2.0, 3.0],
                            "measurement_frame": [[0, 1, 0], [1, 0, 0], [0, 0, 1]]}, tile=8)
    out = tmp_path / "obl.ome.zarr"
    with pytest.warns(jnrrd.JnrrdWarning) as rec:
        jnrrd.convert(src, out)
    text = " ".join(str(w.message) for w in rec)
    assert "space_directions" in text and "measurement_frame" in text
    g = zarr.open_group(out, mode="r")
    assert _level_tr(_ome(g), 0)[0] == pytest.approx([1.5, 1.0, 1.0])  # the voxel sizes
    back = tmp_path / "back.jnrrd"
    jnrrd.convert(out, back)
    got, h = jnrrd.read(back)
    np.testing.assert_array_equal(got, data)
    np.testing.assert_allclose(np.array(h["space_directions"], dtype=float), dirs)
    assert h["measurement_frame"] == [[0, 1, 0], [1, 0, 0], [0, 0, 1]]
    assert h["space"] == "left_posterior_superior"


def _hand_written(path, data, *, levels=3, method=None, extra_level=None, prefix="",
                  zarr_format=3):
    """An OME-Zarr (c, z, y, x) written with zarr-python alone, as another tool would
    (``zarr_format=2``: the NGFF 0.4 layout, ``multiscales`` at the top of the attributes)."""
    g = zarr.open_group(path, mode="w", zarr_format=zarr_format)
    datasets = []
    for k in range(levels):
        f = 2 ** k
        c, z, y, x = data.shape
        lv = data[:, :, :y // f * f, :x // f * f].reshape(c, z, y // f, f, x // f, f)
        lv = method(lv) if method else np.rint(lv.mean(axis=(3, 5))).astype(data.dtype)
        names = {"dimension_names": "czyx"} if zarr_format == 3 else {}
        g.create_array(f"{prefix}{k}", data=lv, chunks=(1, 8, 16, 16), **names)
        datasets.append({"path": f"{prefix}{k}", "coordinateTransformations": [
            {"type": "scale", "scale": [1.0, 2.0, 0.5 * f, 0.5 * f]},
            {"type": "translation", "translation": [0.0, 10.0, 0.25 * (f - 1),
                                                    0.25 * (f - 1)]}]})
    if extra_level is not None:
        g.create_array("odd", data=data[:, :, ::3, ::3], chunks=(1, 8, 16, 16))
        datasets.append({"path": "odd", "coordinateTransformations": [
            {"type": "scale", "scale": [1.0, 2.0, 0.75, 0.75]}]})
    ms = [{
        "name": "cells",
        "axes": [{"name": "c", "type": "channel"},
                 {"name": "z", "type": "space", "unit": "micrometer"},
                 {"name": "y", "type": "space", "unit": "micrometer"},
                 {"name": "x", "type": "space", "unit": "micrometer"}],
        "datasets": datasets}]
    if zarr_format == 3:
        g.attrs["ome"] = {"version": "0.5", "multiscales": ms}
    else:
        g.attrs["multiscales"] = [{**ms[0], "version": "0.4"}]
    return g


@pytest.fixture
def cells():
    rng = np.random.default_rng(3)
    return rng.integers(0, 1000, (2, 12, 64, 48), dtype=np.uint16)


def test_hand_written_ome_zarr_is_read_by_convert(tmp_path, cells):
    src = tmp_path / "cells.ome.zarr"
    g = _hand_written(src, cells)
    out = tmp_path / "cells.jnrrd"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the stored levels are jnrrd's average: no warning
        jnrrd.convert(src, out)
    got, h = jnrrd.read(out)
    np.testing.assert_array_equal(got, cells.T)
    assert h["sizes"] == [48, 64, 12, 2]
    assert h["labels"] == ["x", "y", "z", "c"]
    assert h["kinds"] == ["space", "space", "space", "list"]
    assert h["space_directions"] == [[0.5, 0, 0], [0, 0.5, 0], [0, 0, 2.0], None]
    assert h["space_origin"] == [0.0, 0.0, 10.0]
    assert h["space_units"] == ["um", "um", "um"]
    assert h["tile:sizes"] == [16, 16, 8, 1]
    assert h["tile:level_scales"] == [1, [2, 2, 1, 1], [4, 4, 1, 1]]
    for k in range(3):
        np.testing.assert_array_equal(jnrrd.read(out, level=k)[0], g[str(k)][...].T)
    with jnrrd.open(out) as vol:  # the level geometry lands where NGFF put it
        assert vol.levels[1].space_origin.tolist() == [0.25, 0.25, 10.0]


def test_hand_written_levels_another_tool_built_differently(tmp_path, cells):
    src = tmp_path / "cells.zarr"
    _hand_written(src, cells, method=lambda b: b[:, :, :, 0, :, 0], extra_level=True,
                  prefix="s")
    out = tmp_path / "cells.jnrrd"
    with pytest.warns(jnrrd.JnrrdWarning) as rec:
        jnrrd.convert(src, out)
    text = [str(w.message) for w in rec]
    assert any("level odd" in t and "not integers" in t for t in text)
    assert any("level 1 (s1) differs" in t for t in text)
    got, h = jnrrd.read(out)
    np.testing.assert_array_equal(got, cells.T)
    assert h["tile:levels"] == 3  # the stride-3 level is left out


def test_ngff_04_on_zarr_v2_is_read(tmp_path, cells):
    src = tmp_path / "old.ome.zarr"
    _hand_written(src, cells, levels=2, zarr_format=2)
    out = tmp_path / "old.jnrrd"
    jnrrd.convert(src, out)
    got, h = jnrrd.read(out)
    np.testing.assert_array_equal(got, cells.T)
    assert h["tile:level_scales"] == [1, [2, 2, 1, 1]]
    assert h["space_units"] == ["um", "um", "um"]


def test_read_after_convert_to_npy_and_nrrd(tmp_path, cells):
    src = tmp_path / "cells.ome.zarr"
    _hand_written(src, cells, levels=1)
    jnrrd.convert(src, tmp_path / "c.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "c.npy"), cells.T)
    jnrrd.convert(src, tmp_path / "c.npy", index_order="C")
    np.testing.assert_array_equal(np.load(tmp_path / "c.npy"), cells)
    jnrrd.convert(src, tmp_path / "c.nrrd")
    got, h = jnrrd.read(tmp_path / "c.nrrd")
    np.testing.assert_array_equal(got, cells.T)
    assert h["space_origin"] == [0.0, 0.0, 10.0]


def test_sharded_write_is_read_by_zarr_python(ct, tmp_path):
    src, data = ct
    out = tmp_path / "sharded.ome.zarr"
    jnrrd.convert(src, out, shards=2, compression="gzip")
    g = zarr.open_group(out, mode="r")
    meta = json.loads((out / "0" / "zarr.json").read_text())
    assert meta["codecs"][0]["name"] == "sharding_indexed"
    assert g["0"].shards == (32, 32, 32) and g["0"].chunks == (16, 16, 16)
    for k in range(3):
        np.testing.assert_array_equal(g[str(k)][...], jnrrd.read(src, level=k)[0].T)
    back = tmp_path / "back.jnrrd"
    jnrrd.convert(out, back)
    np.testing.assert_array_equal(jnrrd.read(back)[0], data)


def test_existing_target_is_replaced_only_when_complete(ct, tmp_path):
    src, data = ct
    out = tmp_path / "x.ome.zarr"
    jnrrd.convert(src, out)
    jnrrd.convert(src, out, chunks=(8, 8, 8))
    assert zarr.open_group(out, mode="r")["0"].chunks == (8, 8, 8)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ct.jnrrd", "x.ome.zarr"]
    (tmp_path / "file.zarr").write_text("not a group")
    with pytest.raises(FileExistsError):
        jnrrd.convert(src, tmp_path / "file.zarr")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ct.jnrrd", "file.zarr",
                                                         "x.ome.zarr"]


def test_format_override_and_refusals(ct, tmp_path):
    src, data = ct
    jnrrd.convert(src, tmp_path / "vol.dir", format="ome-zarr")
    back = tmp_path / "b.jnrrd"
    jnrrd.convert(tmp_path / "vol.dir", back)  # a directory holding zarr.json
    np.testing.assert_array_equal(jnrrd.read(back)[0], data)
    with pytest.raises(TypeError, match="levels"):
        jnrrd.convert(src, tmp_path / "y.zarr", levels=2)
    plain = zarr.open_group(tmp_path / "plain.zarr", mode="w")
    plain.create_array("0", data=np.zeros((4, 4), np.uint8))
    with pytest.raises(FormatError, match="multiscales"):
        jnrrd.convert(tmp_path / "plain.zarr", tmp_path / "p.jnrrd")
    with pytest.raises(FileNotFoundError):
        jnrrd.convert(tmp_path / "missing.ome.zarr", tmp_path / "m.jnrrd")
    with pytest.raises(jnrrd.UnsupportedError, match="JNRRD or NRRD source"):
        jnrrd.convert(tmp_path / "vol.dir", tmp_path / "again.zarr")


def test_fsspec_url_target_and_source(ct, tmp_path):
    src, data = ct
    url = f"memory://jnrrd-test/{tmp_path.name}/ct.ome.zarr"
    jnrrd.convert(src, url, storage_options={})
    g = zarr.open_group(url, mode="r")
    np.testing.assert_array_equal(g["2"][...], jnrrd.read(src, level=2)[0].T)
    back = tmp_path / "back.jnrrd"
    jnrrd.convert(url, back)
    np.testing.assert_array_equal(jnrrd.read(back, level=2)[0], jnrrd.read(src, level=2)[0])


def test_untiled_nrrd_source_gets_default_chunks(tmp_path):
    data = np.arange(100 * 90 * 3, dtype=np.int32).reshape(100, 90, 3)
    src = tmp_path / "plain.nrrd"
    jnrrd.write(src, data, {"spacings": [1.0, 1.0, 4.0]})
    out = tmp_path / "plain.ome.zarr"
    jnrrd.convert(src, out)
    arr = zarr.open_group(out, mode="r")["0"]
    assert arr.chunks == (3, 64, 64)
    np.testing.assert_array_equal(arr[...], data.T)
    back = tmp_path / "back.nrrd"
    jnrrd.convert(out, back)  # the header attribute: untiled, as the source was
    got, h = jnrrd.read(back)
    np.testing.assert_array_equal(got, data)
    assert h["spacings"] == [1.0, 1.0, 4.0]


def test_missing_zarr_names_the_extra(ct, tmp_path, monkeypatch):
    src, _ = ct
    monkeypatch.setitem(sys.modules, "zarr", None)
    with pytest.raises(MissingDependencyError, match=r"jnrrd\[zarr\]"):
        jnrrd.convert(src, tmp_path / "x.ome.zarr")
    assert not (tmp_path / "x.ome.zarr").exists()


def test_cli_convert_both_ways(ct, tmp_path, capsys):
    src, data = ct
    out = tmp_path / "cli.ome.zarr"
    assert main(["convert", "--quiet", str(src), str(out), "--shards", "2"]) == 0
    assert zarr.open_group(out, mode="r")["0"].shards == (32, 32, 32)
    back = tmp_path / "cli.jnrrd"
    assert main(["convert", "--quiet", str(out), str(back)]) == 0
    np.testing.assert_array_equal(jnrrd.read(back)[0], data)
    assert main(["convert", "--quiet", str(src), str(tmp_path / "z.zarr"), "--levels",
                 "2"]) == 2
    assert "OME-Zarr output takes" in capsys.readouterr().err
    assert main(["convert", "--quiet", str(src), str(tmp_path / "d"), "--format",
                 "ome-zarr", "--tile", "8", "--compression", "gzip"]) == 0
    arr = zarr.open_group(tmp_path / "d", mode="r")["0"]
    assert arr.chunks == (8, 8, 8)
    assert [c.to_dict()["name"] for c in arr.compressors] == ["gzip"]
    assert main(["convert", "--quiet", str(src), str(tmp_path / "e.zarr"), "--tile",
                 "none,8,8"]) == 0
    assert zarr.open_group(tmp_path / "e.zarr", mode="r")["0"].chunks == (8, 8, 40)


@pytest.mark.slow
def test_memory_stays_bounded_by_a_few_tiles(tmp_path):
    # 64 MiB of uint32 whose 64^3 tiles (1 MiB) form one slab per tile row: the converter
    # must stream tile by tile (chunk by chunk) both ways, never hold the volume
    shape = (64, 64, 4096)
    npy = tmp_path / "big.npy"
    a = np.lib.format.open_memmap(npy, mode="w+", dtype=np.uint32, shape=shape,
                                  fortran_order=True)
    ramp = np.arange(64 * 64 * 64, dtype=np.uint32).reshape(64, 64, 64)
    for i in range(0, shape[2], 64):
        a[:, :, i:i + 64] = ramp * 7 + i
    a.flush()
    del a
    src = tmp_path / "big.jnrrd"
    jnrrd.convert(npy, src, tile=64, compression="zstd", levels=2)
    tile = 64 ** 3 * 4
    zarr.open_group(tmp_path / "warm.zarr", mode="w")  # zarr's one-time set-up is not ours
    peaks = []
    for a_, b_ in ((src, tmp_path / "big.ome.zarr"), (tmp_path / "big.ome.zarr",
                                                      tmp_path / "back.jnrrd")):
        tracemalloc.start()
        try:
            jnrrd.convert(a_, b_)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    assert max(peaks) < 12 * tile, [p / tile for p in peaks]  # the volume is 64 tiles
    with jnrrd.open(src) as x, jnrrd.open(tmp_path / "back.jnrrd") as y:
        for s in (slice(0, 64), slice(4032, 4096)):
            np.testing.assert_array_equal(y[:, :, s], x[:, :, s])


def test_storage_options_go_only_to_the_url_side(ct, tmp_path):
    src, data = ct
    url = f"memory://jnrrd-test/{tmp_path.name}/so.ome.zarr"
    jnrrd.convert(src, url, storage_options={"skip_instance_cache": True})  # local source
    back = tmp_path / "so.jnrrd"
    jnrrd.convert(url, back, storage_options={"skip_instance_cache": True})  # local target
    np.testing.assert_array_equal(jnrrd.read(back)[0], data)


def test_a_crashed_write_leaves_what_jnrrd_cleanup_removes(ct, tmp_path, monkeypatch):
    # a killed process never runs the except clause: its staging group stays behind, under a
    # name the leftovers sweep knows (docs/format.md#atomic-writes, docs/reliability.md)
    import os
    import shutil

    from jnrrd.storage.leftovers import cleanup

    src, _ = ct
    out = tmp_path / "x.ome.zarr"
    jnrrd.convert(src, out)
    monkeypatch.setattr(shutil, "rmtree", lambda *a, **k: None)  # the crash: no clean-up
    monkeypatch.setattr(os, "rename", _fail_rename)
    with pytest.raises(OSError, match="simulated"):
        jnrrd.convert(src, out, chunks=(8, 8, 8))
    monkeypatch.undo()
    left = sorted(p.name for p in tmp_path.iterdir() if p.name not in ("ct.jnrrd",
                                                                       "x.ome.zarr"))
    assert left, "the simulated crash left nothing to clean"
    removed = cleanup(tmp_path, older_than=0)
    assert sorted(os.path.basename(p) for p in removed) == left
    assert zarr.open_group(out, mode="r")["0"].chunks == (16, 16, 16)


def _fail_rename(src, dst):
    raise OSError("simulated crash before the rename")
