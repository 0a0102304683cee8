"""Interoperability with pynrrd (a reference NRRD implementation) in both directions, and the
round trip NRRD -> JNRRD -> NRRD."""

from __future__ import annotations

import math

import numpy as np
import pytest

import jnrrd

nrrd = pytest.importorskip("nrrd")

_DIMS = {
    2: {"shape": (5, 4), "space dimension": 2,
        "space directions": [[0.5, 0.0], [0.0, 0.75]], "space origin": [1.0, 2.0]},
    3: {"shape": (4, 3, 5), "space": "left-posterior-superior",
        "space directions": [[1.0, 0.0, 0.0], [0.0, 1.25, 0.0], [0.0, 0.1, 2.0]],
        "space origin": [-10.0, 0.5, 3.0]},
    4: {"shape": (3, 2, 4, 2), "space": "right-anterior-superior",
        "space directions": [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0],
                             [math.nan] * 3],
        "space origin": [0.0, 0.0, 0.0]},
}


def _volume(ndim: int, dtype: str) -> np.ndarray:
    shape = _DIMS[ndim]["shape"]
    a = (np.arange(math.prod(shape)) * 7 % 251 - 100).reshape(shape)
    if np.dtype(dtype).kind == "u":
        a = np.abs(a)
    return a.astype(dtype)


def _pynrrd_header(ndim: int) -> dict:
    spec = _DIMS[ndim]
    h = {k: v for k, v in spec.items() if k != "shape"}
    h["space directions"] = np.array(h["space directions"])
    h["space origin"] = np.array(h["space origin"])
    h["kinds"] = ["domain"] * min(ndim, 3) + ["list"] * (ndim - 3)
    h["labels"] = [f"axis {i}" for i in range(ndim)]
    h["units"] = ["mm"] * ndim
    h["study id"] = "A-17"
    return h


def _directions_as_jnrrd(d: np.ndarray) -> list:
    return [None if np.isnan(row).all() else row.tolist() for row in np.asarray(d, float)]


# -- pynrrd writes, jnrrd reads --------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("ndim", [2, 3, 4])
@pytest.mark.parametrize("encoding", ["raw", "gzip", "bzip2", "ascii"])
@pytest.mark.parametrize(
    ("dtype", "detached"),
    [
        pytest.param("<i2", False, id="int16-le-attached"),
        pytest.param(">f4", True, id="float32-be-detached"),
        pytest.param(">u4", False, id="uint32-be-attached"),
        pytest.param("<f8", True, id="float64-le-detached"),
    ],
)
def test_pynrrd_files_read_identically(tmp_path, ndim, encoding, dtype, detached):
    a = _volume(ndim, dtype)
    path = tmp_path / ("v.nhdr" if detached else "v.nrrd")
    nrrd.write(str(path), a, _pynrrd_header(ndim), detached_header=detached)
    ref, ref_h = nrrd.read(str(path))
    data, h = jnrrd.read(path)
    assert data.shape == ref.shape == a.shape
    assert data.dtype == ref.dtype.newbyteorder("=")
    np.testing.assert_array_equal(data, ref)
    assert h["sizes"] == list(ref_h["sizes"])
    assert h["space_directions"] == _directions_as_jnrrd(ref_h["space directions"])
    assert h["space_origin"] == ref_h["space origin"].tolist()
    assert h["kinds"] == ref_h["kinds"] and h["labels"] == ref_h["labels"]
    assert h["units"] == ref_h["units"]
    assert h["nrrd:key_values"] == {"study id": "A-17"}
    if ndim == 2:
        assert h["space_dimension"] == 2
    else:
        assert h["space"] == ref_h["space"].replace("-", "_")
    if detached:
        assert h["data_file"] == ref_h["data file"]
    with jnrrd.open(path) as vol:  # lazy slicing agrees too
        np.testing.assert_array_equal(vol[1:, ..., -1], ref[1:, ..., -1])


def test_pynrrd_c_order_read_with_index_order_c(tmp_path):
    a = _volume(3, "<i2")
    nrrd.write(str(tmp_path / "c.nrrd"), np.ascontiguousarray(a.T), index_order="C")
    ref, _ = nrrd.read(str(tmp_path / "c.nrrd"), index_order="C")
    data, h = jnrrd.read(tmp_path / "c.nrrd", index_order="C")
    assert h["sizes"] == list(a.shape)
    np.testing.assert_array_equal(data, ref)
    np.testing.assert_array_equal(data, a.T)


# -- jnrrd writes, pynrrd reads --------------------------------------------------------------
_JNRRD_HEADER = {
    "content": "phantom",
    "space": "left_anterior_superior",
    "space_directions": [[1.0, 0.0, 0.0], [0.0, 0.5, 0.25], [0.0, 0.0, 2.0], None],
    "space_origin": [1.5, -2.0, 0.0],
    "space_units": ["mm", "mm", "mm"],
    "measurement_frame": [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]],
    "kinds": ["space", "space", "space", "3_vector"],
    "centers": ["cell", "cell", "node", None],
    "labels": ["x", "y", "z", "component"],
    "units": ["mm", "mm", "mm", ""],
    "thicknesses": [None, None, 2.5, None],
    "axis_mins": [None, None, None, 0.0],
    "axis_maxs": [None, None, None, 2.0],
    "old_min": -1024.0,
    "old_max": 3071.0,
    "sample_units": "HU",
    "extensions": {"nrrd": "https://jnrrd.org/extensions/nrrd/v1.0.0"},
    "nrrd:key_values": {"patient": "anonymous", "modality": "CT"},
}


@pytest.mark.parametrize(
    ("encoding", "suffix", "endian"),
    [
        pytest.param("raw", ".nrrd", "little", id="raw"),
        pytest.param("gzip", ".nrrd", "big", id="gzip-big-endian"),
        pytest.param("bzip2", ".nrrd", "little", id="bzip2"),
        pytest.param("ascii", ".nrrd", "little", id="ascii"),
        pytest.param("raw", ".nhdr", "big", id="detached-raw"),
        pytest.param("gzip", ".nhdr", "little", id="detached-gzip"),
    ],
)
def test_jnrrd_files_read_identically_by_pynrrd(tmp_path, encoding, suffix, endian):
    a = (np.arange(4 * 3 * 2 * 3, dtype=np.float32) * 0.5 - 7).reshape(4, 3, 2, 3)
    path = tmp_path / f"j{suffix}"
    jnrrd.write(path, a, {**_JNRRD_HEADER, "endian": endian}, encoding=encoding)
    ref, h = nrrd.read(str(path))
    assert ref.dtype.newbyteorder("=") == np.float32 and ref.shape == a.shape
    assert (ref.dtype.byteorder == ">") == (endian == "big" and encoding != "ascii")
    np.testing.assert_array_equal(ref, a)
    assert h["type"] == "float" and h["encoding"] == encoding
    assert h["content"] == "phantom" and h["space"] == "left-anterior-superior"
    assert _directions_as_jnrrd(h["space directions"]) == _JNRRD_HEADER["space_directions"]
    assert h["space origin"].tolist() == _JNRRD_HEADER["space_origin"]
    assert h["space units"] == ["mm", "mm", "mm"]
    np.testing.assert_array_equal(h["measurement frame"],
                                  np.array(_JNRRD_HEADER["measurement_frame"]))
    assert h["kinds"] == ["space", "space", "space", "3-vector"]
    assert h["centerings"] == ["cell", "cell", "node", "???"]
    assert h["labels"] == ["x", "y", "z", "component"] and h["units"] == ["mm"] * 3 + [""]
    np.testing.assert_array_equal(h["thicknesses"], [np.nan, np.nan, 2.5, np.nan])
    np.testing.assert_array_equal(h["axis mins"], [np.nan, np.nan, np.nan, 0.0])
    np.testing.assert_array_equal(h["axis maxs"], [np.nan, np.nan, np.nan, 2.0])
    assert h["old min"] == -1024.0 and h["old max"] == 3071.0
    assert h["sample units"] == "HU"
    assert h["patient"] == "anonymous" and h["modality"] == "CT"
    if encoding != "ascii":
        assert h["endian"] == endian


@pytest.mark.parametrize("dtype", ["i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f4", "f8"])
def test_every_type_read_by_pynrrd(tmp_path, dtype):
    a = np.arange(24).reshape(2, 3, 4).astype(dtype)
    jnrrd.write(tmp_path / "t.nrrd", a, {"spacings": [1.0, 2.0, 0.5]})
    ref, h = nrrd.read(str(tmp_path / "t.nrrd"))
    assert ref.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(ref, a)
    np.testing.assert_array_equal(h["spacings"], [1.0, 2.0, 0.5])


# -- NRRD -> JNRRD -> NRRD ---------------------------------------------------------------------
_PLACEMENT = ("data_file", "data_files", "data_file_pattern", "line_skip", "byte_skip")


@pytest.mark.parametrize(
    ("encoding", "detached"),
    [pytest.param("gzip", False, id="gzip"), pytest.param("raw", True, id="detached-raw")],
)
def test_round_trip_keeps_data_and_mapped_fields(tmp_path, encoding, detached):
    a = _volume(4, "<i2")
    src = tmp_path / ("src.nhdr" if detached else "src.nrrd")
    header = _pynrrd_header(4)
    header.update({"encoding": encoding, "centerings": ["cell", "node", "cell", "???"],
                   "content": "round trip", "sample units": "a.u.", "old min": -100.0})
    nrrd.write(str(src), a, header, detached_header=detached)
    first, h1 = jnrrd.read(src)
    jnrrd.write(tmp_path / "mid.jnrrd", first, h1)
    second, h2 = jnrrd.read(tmp_path / "mid.jnrrd")
    np.testing.assert_array_equal(second, a)
    out = tmp_path / ("out.nhdr" if detached else "out.nrrd")
    jnrrd.write(out, second, h2)
    third, h3 = jnrrd.read(out)
    np.testing.assert_array_equal(third, a)

    def mapped(h):
        return {k: v for k, v in h.items() if k not in (*_PLACEMENT, "jnrrd")}

    assert mapped(h3) == mapped(h1)
    for field in ("space", "space_directions", "space_origin", "kinds", "centers", "labels",
                  "units", "content", "sample_units", "old_min", "encoding", "endian"):
        assert field in h3, field
    assert h3["nrrd:key_values"] == {"study id": "A-17"}
    ref, rh = nrrd.read(str(out))
    np.testing.assert_array_equal(ref, a)
    assert rh["study id"] == "A-17" and rh["centerings"] == ["cell", "node", "cell", "???"]
    assert _directions_as_jnrrd(rh["space directions"]) == h1["space_directions"]


def test_round_trip_per_axis_fields_without_space(tmp_path):
    a = np.arange(20, dtype=np.uint8).reshape(5, 4)
    header = {"spacings": np.array([0.5, np.nan]), "thicknesses": np.array([np.nan, 3.0]),
              "axis mins": np.array([0.0, -1.0]), "axis maxs": np.array([2.5, 1.0]),
              "kinds": ["domain", "list"], "centerings": ["node", "???"],
              "labels": ["", "t"], "min": 0.0, "max": 19.0, "encoding": "bzip2"}
    nrrd.write(str(tmp_path / "src.nrrd"), a, header)
    first, h1 = jnrrd.read(tmp_path / "src.nrrd")
    assert h1["spacings"] == [0.5, None] and h1["thicknesses"] == [None, 3.0]
    assert h1["axis_mins"] == [0.0, -1.0] and h1["axis_maxs"] == [2.5, 1.0]
    assert h1["labels"] == [None, "t"] and h1["centers"] == ["node", None]
    assert h1["min"] == 0.0 and h1["max"] == 19.0 and h1["encoding"] == "bzip2"
    jnrrd.write(tmp_path / "mid.jnrrd", first, h1)
    second, h2 = jnrrd.read(tmp_path / "mid.jnrrd")
    jnrrd.write(tmp_path / "out.nrrd", second, h2)
    third, h3 = jnrrd.read(tmp_path / "out.nrrd")
    np.testing.assert_array_equal(third, a)
    h2.pop("jnrrd")
    assert h3 == h1 == h2
