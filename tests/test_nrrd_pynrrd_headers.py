"""Header dicts from pynrrd's ``nrrd.read`` given to ``jnrrd.write`` keep their geometry and
key/value pairs: they are mapped to JNRRD fields exactly as the NRRD reader maps the file."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import jnrrd
from jnrrd.errors import HeaderError
from jnrrd.nrrd.mapping import from_nrrd_fields, is_nrrd_spelled

nrrd = pytest.importorskip("nrrd")

TARGETS = ["out.jnrrd", "out.nrrd", "out.nhdr"]
# what differs between the reader's view of the pynrrd file and of the written file by design
_STORAGE = ("jnrrd", "nrrd:comments", "encoding", "endian", "data_file")


def _pynrrd_roundtrip(path, data, header, **kw):
    """Write with pynrrd, read back with pynrrd: the header dict as users get it."""
    nrrd.write(str(path), data, header, **kw)
    return nrrd.read(str(path))


def _comparable(h):
    out = {k: v for k, v in dict(h).items() if k not in _STORAGE}
    if isinstance(out.get("extensions"), dict) and not out.get("nrrd:key_values"):
        out.pop("extensions")
    return out


def _expected_affine(header):
    """The index->world matrix the NRRD geometry says (spatial axes only)."""
    dirs = np.asarray(header["space directions"], dtype=float)
    cols = [row for row in dirs if not np.all(np.isnan(row))]
    origin = np.asarray(header.get("space origin", np.zeros(dirs.shape[1])), dtype=float)
    m = np.zeros((len(origin) + 1, len(cols) + 1))
    for j, c in enumerate(cols):
        m[:-1, j] = c
    m[:-1, -1] = origin
    m[-1, -1] = 1.0
    return m


def _check(tmp_path, src, data, header, target):
    """jnrrd.write(target, data, header) reads back as the reader reads the pynrrd file."""
    out = tmp_path / target
    jnrrd.write(out, data, header)
    want = jnrrd.read_header(src)
    back, got = jnrrd.read(out)
    np.testing.assert_array_equal(back, data)
    assert _comparable(got) == _comparable(want)
    if "space directions" in header:
        with jnrrd.open(out) as vol:
            np.testing.assert_array_equal(vol.levels[0].affine, _expected_affine(header))
    return got


DWI = {
    "space": "left-posterior-superior",
    "space directions": np.array([[1.5, 0, 0], [0, 1.5, 0], [0, 0, 2.0], [np.nan] * 3]),
    "space origin": np.array([-90.25, 120.5, -60.0]),
    "measurement frame": np.array([[1.0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]]),
    "space units": ["mm", "mm", "mm"],
    "kinds": ["space", "space", "space", "list"],
    "thicknesses": np.array([np.nan, np.nan, 2.5, np.nan]),
    "labels": ["x", "y", "z", "gradients"],
    "modality": "DWMRI",
    "DWMRI_b-value": "1000",
    "DWMRI_gradient_0000": "0 0 0",
    "DWMRI_gradient_0001": "1 0 0",
    "DWMRI_gradient_0002": "0 0.707107 0.707107",
}
RGB = {
    "space": "right-anterior-superior",
    "space directions": np.array([[np.nan] * 3, [0.5, 0, 0], [0, 0.5, 0], [0, 0, 0.8]]),
    "space origin": np.array([0.0, 0.0, 1e-7]),
    "kinds": ["RGB-color", "domain", "domain", "domain"],
    "centerings": ["???", "cell", "cell", "cell"],
    "content": "a colour volume",
    "sample units": "intensity",
}
SEGMENTATION = {
    "space": "left-posterior-superior",
    "space directions": np.array([[np.nan] * 3, [0.1, 0.2, 0.0], [-0.2, 0.1, 0.0],
                                  [0.0, 0.0, 3.3]]),
    "space origin": np.array([1.0, 2.0, 3.0]),
    "kinds": ["list", "domain", "domain", "domain"],
    "Segment0_ID": "Segment_1",
    "Segment0_Name": "tumour",
    "Segment0_Color": "0.5 0.6 0.7",
    "Segment0_Extent": "0 3 0 4 0 5",
    "Segmentation_MasterRepresentation": "Binary labelmap",
}
PLAIN = {  # no space: spacings, axis mins/maxs, units, old min/max
    "spacings": np.array([0.25, np.nan, 4.0]),
    "axis mins": np.array([0.0, np.nan, -2.0]),
    "axis maxs": np.array([1.0, np.nan, 10.0]),
    "units": ["cm", "", "s"],
    "kinds": ["domain", "vector", "time"],
    "old min": -1.5,
    "old max": 3.25,
}
CASES = {
    "dwi": (DWI, (4, 5, 3, 3), np.int16),
    "rgb": (RGB, (3, 4, 5, 2), np.uint8),
    "segmentation": (SEGMENTATION, (2, 4, 5, 6), np.uint8),
    "plain": (PLAIN, (4, 2, 3), np.float32),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_pynrrd_header_keeps_geometry_and_key_values(tmp_path, case, target):
    fields, shape, dtype = CASES[case]
    data = np.arange(math.prod(shape)).reshape(shape).astype(dtype)
    src = tmp_path / "src.nrrd"
    data_read, header = _pynrrd_roundtrip(src, data, fields)
    assert is_nrrd_spelled(header)
    got = _check(tmp_path, src, data_read, header, target)
    kv = {k: v for k, v in fields.items() if not nrrd_field(k)}
    assert got.get("nrrd:key_values", {}) == kv


def nrrd_field(key):
    from jnrrd.nrrd.fields import FIELD_NAMES

    return " ".join(key.split()).lower() in FIELD_NAMES


def test_pynrrd_header_geometry_regression_space_directions_kept(tmp_path):
    """Before the mapping, 'space directions' was kept as an unknown field (JNRRD) or dropped
    with a warning (NRRD) and the written file had no geometry."""
    data = np.zeros((2, 3, 4), np.uint8)
    src = tmp_path / "src.nrrd"
    _, header = _pynrrd_roundtrip(src, data, {
        "space": "RAS", "space directions": np.diag([0.5, 0.75, 2.0]),
        "space origin": np.array([1.0, 2.0, 3.0])})
    for target in ("a.jnrrd", "a.nrrd"):
        jnrrd.write(tmp_path / target, data, header)
        h = jnrrd.read_header(tmp_path / target)
        assert h["space_directions"] == [[0.5, 0, 0], [0, 0.75, 0], [0, 0, 2.0]]
        assert "space directions" not in h
        with jnrrd.open(tmp_path / target) as vol:
            np.testing.assert_array_equal(
                vol.levels[0].affine,
                [[0.5, 0, 0, 1], [0, 0.75, 0, 2], [0, 0, 2, 3], [0, 0, 0, 1]])


def test_pynrrd_key_value_escapes_read_as_the_reader_reads_them(tmp_path):
    data = np.zeros(3, np.uint8)
    src = tmp_path / "src.nrrd"
    _, header = _pynrrd_roundtrip(src, data, {"note": r"two\nlines", "path": r"C:\\data"})
    for target in TARGETS:
        got = _check(tmp_path, src, data, header, target)
        assert got["nrrd:key_values"] == {"note": "two\nlines", "path": "C:\\data"}


def test_pynrrd_detached_header_data_placement_is_not_carried(tmp_path):
    """'data file' (and the skips) say where the source's data was, not the new file's."""
    data = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    src = tmp_path / "src.nhdr"
    nrrd.write(str(src), data, {"space": "LPS", "space directions": np.eye(3)},
               detached_header=True)
    data_read, header = nrrd.read(str(src))
    assert "data file" in header
    header["line skip"], header["byte skip"] = 0, 0
    for target in TARGETS:
        got = _check(tmp_path, src, data_read, header, target)
        assert got.get("data_file") != header["data file"]


def test_jnrrd_headers_are_not_taken_for_nrrd_spellings(tmp_path):
    data = np.zeros((2, 3), np.int16)
    jnrrd.write(tmp_path / "a.nrrd", data, {"space_directions": [[1, 0], [0, 2]],
                                            "space_dimension": 2})
    header = jnrrd.read_header(tmp_path / "a.nrrd")
    assert not is_nrrd_spelled(header)
    jnrrd.write(tmp_path / "b.jnrrd", data, {"sizes": [2, 3], "kinds": ["domain", "domain"]})
    assert not is_nrrd_spelled(jnrrd.read_header(tmp_path / "b.jnrrd"))
    assert is_nrrd_spelled({"sizes": np.array([2, 3])})
    assert is_nrrd_spelled({"study id": "x"})


@pytest.mark.parametrize("header, key", [
    ({"space": "RAS", "space directions": np.eye(3)[:2]}, "space directions"),
    ({"space": "RAS", "space origin": np.array([[1.0, 2.0, 3.0]])}, "space origin"),
    ({"space": "RAS", "measurement frame": np.eye(2)}, "measurement frame"),
    ({"space": "moon", "space directions": np.eye(3)}, "space"),
    ({"space directions": np.eye(3), "spacings": np.array([1.0, 2.0])}, "spacings"),
    ({"space directions": np.eye(3), "kinds": ["domain", "space"]}, "kinds"),
    ({"space directions": np.eye(3), "labels": [1, 2, 3]}, "labels"),
    ({"space directions": np.eye(3), "old min": "low"}, "old min"),
    ({"space directions": np.eye(3), "content": 5}, "content"),
    ({"space directions": np.eye(3), "vector field": np.ones(3)}, "vector field"),
    ({"space directions": np.eye(3), "space_directions": [[1, 0, 0]] * 3},
     "space_directions"),
    ({"space directions": np.eye(3), "spacedirections": "(1,0,0) (0,1,0) (0,0,1)"},
     "spacedirections"),
])
def test_bad_pynrrd_values_are_header_errors_naming_the_key(tmp_path, header, key):
    data = np.zeros((2, 3, 4), np.uint8)
    for target in ("a.jnrrd", "a.nrrd"):
        with pytest.raises(HeaderError, match=key):
            jnrrd.write(tmp_path / target, data, {"space dimension": 3, **header}
                        if "space" not in header else header)
    assert os.listdir(tmp_path) == []


def test_mapping_is_the_reader_mapping_on_text_values():
    """Values given as NRRD text go through the same translation as header lines."""
    h = from_nrrd_fields({"space": "LPS", "space directions": "(1,0,0) none (0,0,2)",
                          "kinds": "space list space", "spacings": "nan 3 nan",
                          "number": "24", "byte skip": "-1", "data file": "x.raw"},
                         (2, 3, 4))
    assert h["space"] == "left_posterior_superior"
    assert h["space_directions"] == [[1, 0, 0], None, [0, 0, 2]]
    assert h["kinds"] == ["space", "list", "space"]
    assert h["spacings"] == [None, 3.0, None]
    assert not any(k in h for k in ("byte_skip", "data_file", "number", "type", "encoding"))


# -- random pynrrd headers ------------------------------------------------------------------
_SPACES = {"right-anterior-superior": 3, "left-posterior-superior": 3,
           "scanner-xyz": 3, "3D-right-handed": 3, "right-anterior-superior-time": 4}
_finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False, width=64)
_text = st.text(st.characters(min_codepoint=32, max_codepoint=126,
                              blacklist_characters='"\\'), max_size=8)
_key = st.from_regex(r"[A-Za-z][A-Za-z0-9_ -]{0,10}[A-Za-z0-9]", fullmatch=True)


@st.composite
def pynrrd_headers(draw):
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim)))
    h: dict = {}
    spatial = draw(st.booleans())
    if spatial:
        if draw(st.booleans()):
            h["space"] = draw(st.sampled_from(sorted(_SPACES)))
            sd = _SPACES[h["space"]]
        else:
            sd = draw(st.integers(1, 4))
            h["space dimension"] = sd
        domain = draw(st.lists(st.booleans(), min_size=ndim, max_size=ndim))
        rows = [np.array(draw(st.lists(_finite, min_size=sd, max_size=sd))) if d
                else np.full(sd, np.nan) for d in domain]
        h["space directions"] = np.array(rows)
        if draw(st.booleans()):
            h["space origin"] = np.array(draw(st.lists(_finite, min_size=sd, max_size=sd)))
        if draw(st.booleans()):
            h["measurement frame"] = np.array(draw(st.lists(
                st.lists(_finite, min_size=sd, max_size=sd), min_size=sd, max_size=sd)))
        if draw(st.booleans()):
            h["space units"] = draw(st.lists(_text, min_size=sd, max_size=sd))
        h["kinds"] = ["domain" if d else draw(st.sampled_from(["list", "vector", "point"]))
                      for d in domain]
    else:
        per_axis = st.lists(st.one_of(_finite, st.just(np.nan)), min_size=ndim,
                            max_size=ndim).map(np.array)
        for key in ("spacings", "axis mins", "axis maxs"):
            if draw(st.booleans()):
                h[key] = draw(per_axis)
        if draw(st.booleans()):
            h["kinds"] = draw(st.lists(st.sampled_from(["domain", "list", "time", "???"]),
                                       min_size=ndim, max_size=ndim))
    if draw(st.booleans()):
        h["thicknesses"] = np.array(draw(st.lists(st.one_of(
            st.floats(0.01, 100), st.just(np.nan)), min_size=ndim, max_size=ndim)))
    for key in ("labels", "units"):
        if draw(st.booleans()):
            h[key] = draw(st.lists(_text, min_size=ndim, max_size=ndim))
    if draw(st.booleans()):
        h["centerings"] = draw(st.lists(st.sampled_from(["cell", "node", "???"]),
                                        min_size=ndim, max_size=ndim))
    for key in ("old min", "old max"):
        if draw(st.booleans()):
            h[key] = draw(_finite)
    if draw(st.booleans()):
        h["sample units"] = draw(_text.filter(lambda s: s.strip() == s and s))
    from jnrrd.nrrd.fields import FIELD_NAMES

    kvs = draw(st.dictionaries(_key.filter(lambda k: " ".join(k.split()).lower()
                                           not in FIELD_NAMES and "  " not in k),
                               _text.map(str.strip), max_size=3))  # pynrrd strips values
    h.update(kvs)
    dtype = draw(st.sampled_from([np.uint8, np.int16, np.float32, np.float64]))
    return h, shape, dtype


@pytest.mark.slow
@given(case=pynrrd_headers(), target=st.sampled_from(["h.jnrrd", "h.nrrd"]))
def test_random_pynrrd_headers_map_as_the_reader_maps_them(tmp_path_factory, case, target):
    fields, shape, dtype = case
    tmp = tmp_path_factory.mktemp("pyh")
    data = np.arange(math.prod(shape)).reshape(shape).astype(dtype)
    src = tmp / "src.nrrd"
    data_read, header = _pynrrd_roundtrip(src, data, fields, compression_level=1)
    _check(tmp, src, data_read, header, target)
