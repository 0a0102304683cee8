"""The xarray backend: ``engine="jnrrd"``, lazy tile-by-tile indexing, dims, coords, attrs.

The documented behaviour is in ``docs/dask.md`` ("xarray").
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import jnrrd
from jnrrd.integrations import dask as dask_io

xr = pytest.importorskip("xarray")

from jnrrd.integrations.xarray import JnrrdBackendEntrypoint, decode_attrs  # noqa: E402


@pytest.fixture(autouse=True)
def _clear():
    yield
    dask_io.clear_cache()


@pytest.fixture
def decodes(monkeypatch):
    """Tile coordinates decoded (per level) while the test runs."""
    from jnrrd.engine.tiles import TileDecoder

    calls: list[tuple[int, tuple[int, ...]]] = []
    original = TileDecoder.decode

    def counting(self, level, coords, *args, **kwargs):
        calls.append((level.index, tuple(coords)))
        return original(self, level, coords, *args, **kwargs)

    monkeypatch.setattr(TileDecoder, "decode", counting)
    return calls


def _a(shape=(40, 32, 24)):
    return np.arange(np.prod(shape), dtype=np.int32).reshape(shape) % 1000


SPACE = {"space": "right_anterior_superior", "space_origin": [10.0, 20.0, 30.0],
         "space_directions": [[0.5, 0, 0], [0, 0.25, 0], [0, 0, 2.0]],
         "space_units": ["mm", "mm", "mm"]}


def test_engine_is_registered_and_guesses(tmp_path):
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, _a(), tile=8)
    other = tmp_path / "v.bin"
    other.write_bytes(p.read_bytes())
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"NRRD0004\n")
    assert "jnrrd" in xr.backends.list_engines()
    ep = JnrrdBackendEntrypoint()
    assert ep.guess_can_open(str(p)) and ep.guess_can_open(other)
    assert not ep.guess_can_open(junk) and not ep.guess_can_open(tmp_path / "missing")
    with xr.open_dataarray(other) as arr:  # found by the magic line, no engine named
        assert arr.shape == (40, 32, 24)


def test_open_dataarray_reads_only_touched_tiles(tmp_path, decodes):
    a = _a()
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, a, tile=8, compression="zstd")
    with xr.open_dataarray(p, engine="jnrrd") as arr:
        assert decodes == []  # opening reads no tile
        sub = arr[9:15, 0:8, 3]
        assert decodes == []  # indexing stays lazy until values are asked for
        np.testing.assert_array_equal(sub.values, a[9:15, 0:8, 3])
        assert sorted(decodes) == [(0, (1, 0, 0))]
        decodes.clear()
        np.testing.assert_array_equal(arr.isel(x=[1, 20], z=slice(None, None, 12)).values,
                                      a[[1, 20]][:, :, ::12])
        # Rows 1 and 20 (tiles 0 and 2, never tile 1 between them: outer indexing goes to
        # LevelView.oindex) of axis 0, all 4 tiles of axis 1, tiles 0 and 1 of axis 2; each once.
        assert sorted(decodes) == sorted({(0, (t0, t1, t2)) for t0 in (0, 2) for t1 in range(4)
                                          for t2 in (0, 1)})
        decodes.clear()
        np.testing.assert_array_equal(arr.isel(x=[20, 1, 20], y=[30, 2]).values,
                                      a[np.ix_([20, 1, 20], [30, 2], range(a.shape[2]))])
        assert {c[:2] for _, c in decodes} == {(0, 0), (0, 3), (2, 0), (2, 3)}
        decodes.clear()
        np.testing.assert_array_equal(arr[::-5, 31, -1].values, a[::-5, 31, -1])
        assert {c for _, c in decodes} == {(t, 3, 2) for t in range(5)}


def test_dims_from_labels_and_fallback(tmp_path):
    p, q, r = tmp_path / "l.jnrrd", tmp_path / "n.jnrrd", tmp_path / "d.jnrrd"
    jnrrd.write(p, _a(), {"labels": ["x", "y", "z"]}, tile=8)
    jnrrd.write(q, _a(), tile=8)
    jnrrd.write(r, _a(), {"labels": ["x", "x", None]}, tile=8)
    with xr.open_dataarray(p, engine="jnrrd") as arr:
        assert arr.dims == ("x", "y", "z") and arr.name == "data"
    with xr.open_dataarray(p, engine="jnrrd", index_order="C") as arr:
        assert arr.dims == ("z", "y", "x") and arr.shape == (24, 32, 40)
        np.testing.assert_array_equal(arr.values, _a().T)
    with xr.open_dataarray(q, engine="jnrrd") as arr:  # unlabeled: named as OME-NGFF names
        assert arr.dims == ("x", "y", "z")
    with xr.open_dataarray(r, engine="jnrrd") as arr:  # a repeated name: a positional one
        assert arr.dims == ("x", "axis1", "z")


@pytest.mark.parametrize(("level", "scale"), [(0, 1), (1, 2), (2, 4)])
def test_coordinates_from_space_fields_per_level(tmp_path, level, scale):
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, _a(), {**SPACE, "labels": ["i", "j", "k"]}, tile=8, levels=3)
    with xr.open_dataarray(p, engine="jnrrd", level=level) as arr:
        n = (40 // scale, 32 // scale, 24 // scale)
        assert arr.shape == n
        # Cell-centred: level voxel i covers level-0 voxels [i·s, (i+1)·s), centre shifted.
        for dim, o, step, m in zip("ijk", (10.0, 20.0, 30.0), (0.5, 0.25, 2.0), n, strict=True):
            want = o + step * ((scale - 1) / 2 + scale * np.arange(m))
            np.testing.assert_allclose(arr[dim].values, want, rtol=0, atol=1e-12)
            assert arr[dim].attrs["units"] == "mm"
        assert arr.attrs["jnrrd_level"] == level
        assert arr.attrs["jnrrd_scale"] == [scale] * 3
        with jnrrd.open(p) as vol:
            np.testing.assert_array_equal(arr.values, vol.levels[level][...])
            assert decode_attrs(arr.attrs)["affine"] == vol.levels[level].affine.tolist()


def test_coordinates_follow_the_space_axis_not_the_array_axis(tmp_path):
    p = tmp_path / "v.jnrrd"
    h = {**SPACE, "space_directions": [[0, 0, 3.0], [1.0, 0, 0], [0, -2.0, 0]],
         "space_units": ["mm", "cm", "m"]}
    jnrrd.write(p, _a(), h, tile=8)
    with xr.open_dataarray(p, engine="jnrrd") as arr:
        np.testing.assert_allclose(arr["x"].values, 30.0 + 3.0 * np.arange(40))
        np.testing.assert_allclose(arr["z"].values, 20.0 - 2.0 * np.arange(24))
        assert arr["x"].attrs["units"] == "m"
        assert arr["y"].attrs["units"] == "mm"


def test_oblique_volume_has_no_coordinates_but_an_affine(tmp_path):
    p = tmp_path / "v.jnrrd"
    h = {**SPACE, "space_directions": [[0.5, 0.5, 0], [0, 0.25, 0], [0, 0, 2.0]]}
    jnrrd.write(p, _a(), h, tile=8)
    with xr.open_dataarray(p, engine="jnrrd") as arr:
        assert dict(arr.coords) == {}
        assert decode_attrs(arr.attrs)["affine"][0] == [0.5, 0.0, 0.0, 10.0]


def test_coordinates_from_spacings(tmp_path):
    p = tmp_path / "v.jnrrd"
    h = {"spacings": [0.5, float("nan"), 3.0], "units": ["mm", None, "s"],
         "centers": ["cell", None, "node"]}
    jnrrd.write(p, _a(), h, tile=8, levels=2)
    with xr.open_dataarray(p, engine="jnrrd", level=1) as arr:
        assert set(arr.coords) == {"x", "z"}
        np.testing.assert_allclose(arr["x"].values, 0.25 + 1.0 * np.arange(20))
        np.testing.assert_allclose(arr["z"].values, 6.0 * np.arange(12))  # node: no shift
        assert arr["x"].attrs["units"] == "mm" and arr["z"].attrs["units"] == "s"


def test_attrs_hold_the_header_without_tile_tables(tmp_path):
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, _a(), {"content": "phantom", "meta:creator": {"name": "lab"}}, tile=8,
                levels=2, checksum="crc32")
    with xr.open_dataset(p, engine="jnrrd") as ds:
        assert ds.attrs["content"] == "phantom"
        assert ds.attrs["meta:creator"] == '{"name": "lab"}'  # netCDF has no mappings
        assert decode_attrs(ds.attrs)["meta:creator"] == {"name": "lab"}
        assert ds.attrs["tile:sizes"] == [8, 8, 8]
        for k in ("tile:offset_table", "tile:size_table", "tile:metadata", "tile:level_offsets"):
            assert k not in ds.attrs
        assert list(ds.data_vars) == ["data"]


def test_chunks_are_the_tiles(tmp_path):
    pytest.importorskip("dask")
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, _a(), tile=(16, 8, 24))
    with xr.open_dataarray(p, engine="jnrrd", chunks={}) as arr:
        assert arr.chunks == ((16, 16, 8), (8, 8, 8, 8), (24,))
        np.testing.assert_array_equal(arr.values, _a())


def test_untiled_file(tmp_path):
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, _a(), {"spacings": [1.0, 2.0, 3.0]})
    with xr.open_dataarray(p, engine="jnrrd") as arr:
        np.testing.assert_array_equal(arr[3:5].values, _a()[3:5])
        np.testing.assert_allclose(arr["y"].values, 2.0 * np.arange(32))


def test_file_object_and_pickling(tmp_path):
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, _a(), tile=8)
    with xr.open_dataarray(p, engine="jnrrd") as arr:
        again = pickle.loads(pickle.dumps(arr))
        np.testing.assert_array_equal(again[1:3].values, _a()[1:3])
    with open(p, "rb") as f:
        ds = xr.open_dataset(f, engine="jnrrd")
        np.testing.assert_array_equal(ds["data"][0, 0].values, _a()[0, 0])
        ds.close()


def test_options_and_errors(tmp_path):
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, _a(), tile=8)
    with xr.open_dataset(p, engine="jnrrd", drop_variables="data") as ds:
        assert list(ds.data_vars) == []
    with pytest.raises(IndexError, match="level 1 does not exist"):
        xr.open_dataset(p, engine="jnrrd", level=1)
    with xr.open_dataarray(p, engine="jnrrd", policy={"max_bytes": 100}) as arr:
        assert arr[0, 0, :5].values.tolist() == _a()[0, 0, :5].tolist()
        with pytest.raises(jnrrd.UnsupportedError, match="max_bytes"):
            arr.values  # noqa: B018
    bad = tmp_path / "bad.jnrrd"
    bad.write_bytes(b'{"jnrrd": "0004"}\n{"type": "uint8"}\n\n')
    with pytest.raises(jnrrd.JnrrdError, match="bad.jnrrd"):
        xr.open_dataset(bad, engine="jnrrd")


@pytest.mark.parametrize("name", ["v.nrrd", "v.NRRD", "v.nhdr", "v.Nhdr", "v.JNRRD"])
def test_classic_nrrd_and_any_case_are_recognised(tmp_path, name):
    """Issue 14: ``xr.open_dataset("scan.nrrd")`` needs no ``engine=``."""
    p = tmp_path / name
    jnrrd.write(p, _a(), SPACE, format="jnrrd" if name.lower().endswith(".jnrrd") else "nrrd")
    assert JnrrdBackendEntrypoint().guess_can_open(str(p))
    with xr.open_dataarray(p) as arr:
        np.testing.assert_array_equal(arr.values, _a())
        np.testing.assert_allclose(arr["x"].values, 10.0 + 0.5 * np.arange(40))


def test_attrs_are_netcdf_ready_and_decode_back(tmp_path):
    p = tmp_path / "v.jnrrd"
    h = {**SPACE, "kinds": ["space", "space", "space"], "labels": ["x", None, "z"],
         "thicknesses": [0.5, float("nan"), 2.0], "meta:flag": True, "meta:none": None,
         "extensions": {"meta": "https://example.org/meta"}}
    jnrrd.write(p, _a(), h, tile=8, levels=2)
    with xr.open_dataset(p, engine="jnrrd", level=1) as ds, jnrrd.open(p) as vol:
        json_named = set(__import__("json").loads(ds.attrs["jnrrd_json_attrs"]))
        assert {"space_directions", "kinds", "labels", "extensions", "affine", "meta:flag",
                "meta:none"} <= json_named
        assert "sizes" not in json_named and "jnrrd_scale" not in json_named
        for v in ds.attrs.values():
            assert isinstance(v, (str, int, float, list)) and not isinstance(v, bool)
            if isinstance(v, list):
                assert v and all(isinstance(x, (int, float)) for x in v), v
        back = decode_attrs(ds.attrs)
        assert "jnrrd_json_attrs" not in back
        assert back["space_directions"] == [[0.5, 0, 0], [0, 0.25, 0], [0, 0, 2.0]]
        assert back["labels"] == ["x", None, "z"] and back["meta:none"] is None
        assert back["meta:flag"] is True
        assert back["affine"] == vol.levels[1].affine.tolist()
        assert back["thicknesses"] == vol.header["thicknesses"] == [0.5, None, 2.0]
        assert back["sizes"] == [40, 32, 24] and back["jnrrd_scale"] == [2, 2, 2]


@pytest.mark.parametrize("engine", ["h5netcdf", "scipy"])
def test_to_netcdf_round_trips(tmp_path, engine):
    """``ds.to_netcdf`` works on a dataset opened with ``engine="jnrrd"``; netCDF-3 (scipy)
    cannot hold uint16 > 32767, so that case uses int16 data."""
    dtype = np.uint16 if engine == "h5netcdf" else np.int16
    a = (_a() * 60).astype(dtype)
    src = tmp_path / "v.nrrd"  # NRRD: key/values and a measurement frame come along
    jnrrd.write(src, a, {**SPACE, "measurement_frame": [[1, 0, 0], [0, 1, 0], [0, 0, 1]],
                         "nrrd:key_values": {"modality": "CT"},
                         "extensions": {"nrrd": "https://jnrrd.org/extensions/nrrd/v1.0.0"}})
    out = tmp_path / "v.nc"
    with xr.open_dataset(src) as ds:
        ds.to_netcdf(out, engine=engine)
        expected = decode_attrs(ds.attrs)
    with xr.open_dataset(out, engine=engine) as back:
        np.testing.assert_array_equal(back["data"].values, a)
        assert back["data"].dtype == dtype
        got = decode_attrs(back.attrs)
        assert got == expected
        assert got["nrrd:key_values"] == {"modality": "CT"}
        np.testing.assert_allclose(back["y"].values, 20.0 + 0.25 * np.arange(32))


def test_netcdf_chunks_never_exceed_the_array(tmp_path):
    p = tmp_path / "small.jnrrd"
    jnrrd.write(p, _a((5, 6, 7)), tile=(8, 8, 4))
    with xr.open_dataset(p) as ds:
        assert ds["data"].encoding["chunksizes"] == (5, 6, 4)
        ds.to_netcdf(tmp_path / "small.nc", engine="h5netcdf")
    with xr.open_dataset(tmp_path / "small.nc", engine="h5netcdf") as back:
        np.testing.assert_array_equal(back["data"].values, _a((5, 6, 7)))


@pytest.mark.slow
def test_open_nrrd_and_save_netcdf_as_a_user_would(tmp_path):
    """A fresh interpreter: no engine named on open nor on save (the default netCDF engine)."""
    import subprocess
    import sys

    a = (_a() * 60).astype(np.uint16)
    jnrrd.write(tmp_path / "scan.nrrd", a, SPACE)
    code = ("import xarray as xr, numpy as np\n"
            "ds = xr.open_dataset('scan.nrrd')\n"
            "ds.to_netcdf('scan.nc')\n"
            "back = xr.open_dataset('scan.nc')\n"
            "assert back['data'].dtype == np.uint16, back['data'].dtype\n"
            "assert (back['data'].values == ds['data'].values).all()\n"
            "print('saved', back['data'].shape)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, text=True,
                          capture_output=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "saved (40, 32, 24)\n"
