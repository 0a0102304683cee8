"""Reading classic NRRD: field spellings, values, data placement, and bad input.

The files are written byte by byte here, so these tests pin what the NRRD text means
independently of the writer.
"""

from __future__ import annotations

import bz2
import gzip
import io
import math

import numpy as np
import pytest

import jnrrd
from jnrrd.errors import (
    DataError,
    HeaderError,
    JnrrdWarning,
    SecurityError,
    UnsupportedError,
    VersionError,
)
from jnrrd.nrrd import NRRD_URI
from jnrrd.nrrd.fields import TYPES

# every test here runs through libdeflate's gzip path and through zlib alone
pytestmark = pytest.mark.usefixtures("gzip_engine")

# a[x, y] = x + 4y, sizes [4, 3]: the linear (axis 0 fastest) bytes are 0..11
A43 = np.arange(12, dtype=np.uint8).reshape(4, 3, order="F")
BASE = ["type: uint8", "dimension: 2", "sizes: 4 3"]


def _file(tmp_path, lines, data=b"", name="x.nrrd", magic="NRRD0005", blank=True):
    p = tmp_path / name
    text = "\n".join([magic, *lines]) + "\n" + ("\n" if blank else "")
    p.write_bytes(text.encode("utf-8") + data)
    return p


def _read(tmp_path, lines, data=b"", **kw):
    return jnrrd.read(_file(tmp_path, lines, data), **kw)


# -- magic and basic layout ------------------------------------------------------------------
@pytest.mark.parametrize("magic", [f"NRRD000{i}" for i in range(1, 6)])
def test_every_magic_reads(tmp_path, magic):
    data, h = jnrrd.read(_file(tmp_path, [*BASE, "encoding: raw"], bytes(range(12)),
                               magic=magic))
    np.testing.assert_array_equal(data, A43)
    assert h["sizes"] == [4, 3] and h["type"] == "uint8" and h["encoding"] == "raw"


def test_value_layout_is_axis0_fastest(tmp_path):
    data, _ = _read(tmp_path, [*BASE, "encoding: raw"], bytes(range(12)))
    assert data.shape == (4, 3)
    assert data[1, 0] == 1 and data[0, 1] == 4 and data[3, 2] == 11
    c, _ = jnrrd.read(tmp_path / "x.nrrd", index_order="C")
    assert c.shape == (3, 4) and c.flags.c_contiguous and c[2, 3] == 11


def test_crlf_lines_and_trailing_bytes(tmp_path):
    p = tmp_path / "x.nrrd"
    p.write_bytes(b"NRRD0004\r\ntype: uint8\r\ndimension: 2\r\nsizes: 4 3\r\nencoding: raw\r\n"
                  b"\r\n" + bytes(range(12)) + b"trailing")
    data, _ = jnrrd.read(p)
    np.testing.assert_array_equal(data, A43)


def test_read_from_stream_and_read_header(tmp_path):
    p = _file(tmp_path, [*BASE, "encoding: raw"], bytes(range(12)))
    with open(p, "rb") as f:
        data, h = jnrrd.read(io.BytesIO(f.read()))
    np.testing.assert_array_equal(data, A43)
    assert jnrrd.read_header(p) == h
    with jnrrd.open(p) as vol:
        assert vol.shape == (4, 3)
        np.testing.assert_array_equal(vol[1:3, 2], A43[1:3, 2])


# -- field spellings and values --------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    ("line", "field", "value"),
    [
        pytest.param("centers: cell node", "centers", ["cell", "node"], id="centers"),
        pytest.param("centerings: cell ???", "centers", ["cell", None], id="centerings-unknown"),
        pytest.param("centers: none Node", "centers", [None, "node"], id="centers-none"),
        pytest.param("kinds: domain RGB-color", "kinds", ["domain", "rgb_color"],
                     id="kinds-teem-spelling"),
        pytest.param("kinds: ??? 2D-Symmetric-Matrix", "kinds", [None, "2d_symmetric_matrix"],
                     id="kinds-unknown"),
        pytest.param("kinds: none space", "kinds", [None, "space"], id="kinds-none"),
        pytest.param("spacings: 1.5 nan", "spacings", [1.5, None], id="spacings-nan"),
        pytest.param("thicknesses: NaN 2", "thicknesses", [None, 2.0], id="thicknesses"),
        pytest.param("axis mins: 0 -1e3", "axis_mins", [0.0, -1000.0], id="axis-mins"),
        pytest.param("axismins: 0 1", "axis_mins", [0.0, 1.0], id="axismins"),
        pytest.param("axis maxs: 4 3", "axis_maxs", [4.0, 3.0], id="axis-maxs"),
        pytest.param("axismaxs: 4 3", "axis_maxs", [4.0, 3.0], id="axismaxs"),
        pytest.param('labels: "x" "the \\"y\\" axis"', "labels", ["x", 'the "y" axis'],
                     id="labels-escaped-quote"),
        pytest.param('units: "mm"  ""', "units", ["mm", None], id="units-empty-is-null"),
        pytest.param("content: a b  c", "content", "a b  c", id="content"),
        pytest.param("sample units: HU", "sample_units", "HU", id="sample-units"),
        pytest.param("sampleunits: HU", "sample_units", "HU", id="sampleunits"),
        pytest.param("min: 0", "min", 0.0, id="min"),
        pytest.param("max: 11", "max", 11.0, id="max"),
        pytest.param("old min: -5.5", "old_min", -5.5, id="old-min"),
        pytest.param("oldmax: 7", "old_max", 7.0, id="oldmax"),
        pytest.param("space: RAS", "space", "right_anterior_superior", id="space-abbrev"),
        pytest.param("space: left-posterior-superior", "space", "left_posterior_superior",
                     id="space-long"),
        pytest.param("space: 3D-right-handed", "space", "3D_right_handed", id="space-3d"),
        pytest.param("space dimension: 2", "space_dimension", 2, id="space-dimension"),
        pytest.param("Type: uint8", "type", "uint8", id="field-name-case"),
    ],
)
def test_field_values(tmp_path, line, field, value):
    lines = [ln for ln in BASE if not (line.startswith("Type") and ln.startswith("type"))]
    _, h = _read(tmp_path, [*lines, line, "encoding: raw"], bytes(range(12)))
    assert h[field] == value


def test_space_fields(tmp_path):
    lines = [*BASE, "space: LPS", "space directions: (1,0,0) none",
             "space origin: ( 1.5, -2 ,3)", "space units: \"mm\" \"mm\" \"mm\"",
             "measurement frame: (1,0,0) (0,1,0) (0,0,1)", "encoding: raw"]
    _, h = _read(tmp_path, lines, bytes(range(12)))
    assert h["space"] == "left_posterior_superior"
    assert h["space_directions"] == [[1.0, 0.0, 0.0], None]
    assert h["space_origin"] == [1.5, -2.0, 3.0]
    assert h["space_units"] == ["mm", "mm", "mm"]
    assert h["measurement_frame"] == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]


def test_space_direction_nan_component_is_null(tmp_path):
    lines = [*BASE, "space dimension: 2", "space directions: (1,nan) (0,1)", "encoding: raw"]
    _, h = _read(tmp_path, lines, bytes(range(12)))
    assert h["space_directions"] == [[1.0, None], [0.0, 1.0]]


def test_number_field_ignored_and_comments_kept(tmp_path):
    lines = ["# first comment", *BASE, "number: 12", "#  ## second", "encoding: raw"]
    _, h = _read(tmp_path, lines, bytes(range(12)))
    assert "number" not in h
    assert h["nrrd:comments"] == ["first comment", "second"]
    assert h["extensions"] == {"nrrd": NRRD_URI}


def test_key_value_pairs(tmp_path):
    lines = [*BASE, "encoding: raw", "my key:=some value ", "path:=C:\\\\dir\\nnext",
             "colon: inside:=x", "my key:=last wins"]
    _, h = _read(tmp_path, lines, bytes(range(12)))
    assert h["nrrd:key_values"] == {"my key": "last wins", "path": "C:\\dir\nnext",
                                    "colon: inside": "x"}
    assert h["extensions"] == {"nrrd": NRRD_URI}


def test_no_extension_without_key_values_or_comments(tmp_path):
    _, h = _read(tmp_path, [*BASE, "encoding: raw"], bytes(range(12)))
    assert "extensions" not in h and not any(k.startswith("nrrd:") for k in h)


@pytest.mark.slow
@pytest.mark.parametrize("spelling", sorted(TYPES))
def test_every_type_spelling(tmp_path, spelling):
    jtype = TYPES[spelling]
    if jtype == "block":
        lines = ["type: block", "block size: 3", "dimension: 1", "sizes: 2", "encoding: raw"]
        data, h = _read(tmp_path, lines, b"abcdef")
        assert data.dtype == np.dtype("V3") and bytes(data[1]) == b"def"
        return
    dt = np.dtype(jnrrd.dtypes.TYPES[jtype])
    values = np.array([0, 1, 2, 100], dtype=dt)
    lines = [f"type: {spelling}", "dimension: 1", "sizes: 4", "endian: big", "encoding: raw"]
    data, h = _read(tmp_path, lines, values.astype(dt.newbyteorder(">")).tobytes())
    assert h["type"] == jtype
    assert data.dtype == dt
    np.testing.assert_array_equal(data, values)


def test_type_spelling_whitespace_and_case(tmp_path):
    lines = ["type: Unsigned   Short", "dimension: 1", "sizes: 2", "endian: little",
             "encoding: raw"]
    data, h = _read(tmp_path, lines, b"\x01\x00\x02\x01")
    assert h["type"] == "uint16" and data.tolist() == [1, 258]


# -- encodings -------------------------------------------------------------------------------
_I16 = np.array([[-3, 0, 7], [300, -32768, 32767]], dtype=np.int16).T  # sizes [3, 2]


def _payload(encoding: str, endian: str = "little") -> bytes:
    raw = _I16.astype("<i2" if endian == "little" else ">i2").tobytes(order="F")
    if encoding in ("gz", "gzip"):
        return gzip.compress(raw)
    if encoding in ("bz2", "bzip2"):
        return bz2.compress(raw)
    if encoding == "hex":
        return raw.hex().upper().encode() + b"\n"
    if encoding in ("txt", "text", "ascii"):
        return " ".join(str(v) for v in _I16.ravel(order="F")).encode() + b"\n"
    return raw


@pytest.mark.slow
@pytest.mark.parametrize("encoding", ["raw", "txt", "text", "ascii", "hex", "gz", "gzip",
                                      "bz2", "bzip2"])
@pytest.mark.parametrize("endian", ["little", "big"])
def test_every_encoding(tmp_path, encoding, endian):
    lines = ["type: short", "dimension: 2", "sizes: 3 2", f"endian: {endian}",
             f"encoding: {encoding}"]
    data, h = _read(tmp_path, lines, _payload(encoding, endian))
    np.testing.assert_array_equal(data, _I16)
    assert h["encoding"] in ("raw", "ascii", "hex", "gzip", "bzip2")


def test_ascii_float_nan_inf(tmp_path):
    lines = ["type: float", "dimension: 1", "sizes: 4", "encoding: ascii"]
    data, _ = _read(tmp_path, lines, b"1.5 nan -inf\ninf\n")
    assert data[0] == 1.5 and math.isnan(data[1]) and data[2] == -np.inf and data[3] == np.inf


# -- skips -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("skips", "encoding", "payload"),
    [
        pytest.param(["line skip: 2"], "raw", b"junk\nmore junk\n" + bytes(range(12)),
                     id="line-skip"),
        pytest.param(["lineskip: 1", "byteskip: 3"], "raw", b"x\nabc" + bytes(range(12)),
                     id="line-then-byte-skip"),
        pytest.param(["byte skip: -1"], "raw", b"any header junk" + bytes(range(12)),
                     id="byte-skip-minus-one"),
        pytest.param(["byte skip: 5"], "gzip", gzip.compress(b"01234" + bytes(range(12))),
                     id="byte-skip-in-decompressed-stream"),
        pytest.param(["line skip: 1"], "gzip", b"text line\n" + gzip.compress(bytes(range(12))),
                     id="line-skip-before-decompressing"),
    ],
)
def test_skips(tmp_path, skips, encoding, payload):
    data, h = _read(tmp_path, [*BASE, *skips, f"encoding: {encoding}"], payload)
    np.testing.assert_array_equal(data, A43)


# -- detached data ---------------------------------------------------------------------------
def _slices(tmp_path, names, parts):
    for name, part in zip(names, parts, strict=True):
        (tmp_path / name).write_bytes(part)


def test_detached_single_file(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x.raw").write_bytes(bytes(range(12)))
    for spelling in ("data file", "datafile"):
        p = _file(tmp_path, [*BASE, "encoding: raw", f"{spelling}: d/x.raw"], name="x.nhdr",
                  blank=False)
        data, h = jnrrd.read(p)
        np.testing.assert_array_equal(data, A43)
        assert h["data_file"] == "d/x.raw"


def test_detached_file_name_with_spaces(tmp_path):
    (tmp_path / "my data.raw").write_bytes(bytes(range(12)))
    p = _file(tmp_path, [*BASE, "encoding: raw", "data file: my data.raw"], name="x.nhdr")
    np.testing.assert_array_equal(jnrrd.read(p)[0], A43)


@pytest.mark.parametrize(
    ("spec", "names", "nparts", "field", "value"),
    [
        pytest.param(["data file: LIST", "s0.raw", "s1.raw", "s2.raw"],
                     ["s0.raw", "s1.raw", "s2.raw"], 3, "data_files",
                     ["s0.raw", "s1.raw", "s2.raw"], id="list-slices"),
        pytest.param(["data file: LIST 2", "all.raw"], ["all.raw"], 1, "data_files",
                     ["all.raw"], id="list-subdim-whole"),
        pytest.param(["data file: LIST", "all.raw"], ["all.raw"], 1, "data_files",
                     ["all.raw"], id="list-one-file"),
        pytest.param(["data file: LIST 1", *[f"r{i}" for i in range(3)]],
                     [f"r{i}" for i in range(3)], 3, "data_files", [f"r{i}" for i in range(3)],
                     id="list-subdim-rows"),
        pytest.param(["data file: s%02d.raw 1 3 1"], ["s01.raw", "s02.raw", "s03.raw"], 3,
                     "data_file_pattern", {"format": "s%02d.raw", "min": 1, "max": 3,
                                           "step": 1}, id="pattern"),
        pytest.param(["data file: s%d.raw 4 0 -2 2"], ["s4.raw", "s2.raw", "s0.raw"], 3,
                     "data_file_pattern", {"format": "s%d.raw", "min": 4, "max": 0,
                                           "step": -2}, id="pattern-down-subdim-slabs"),
        pytest.param(["data file: s%d.raw 0 5 2"], ["s0.raw", "s2.raw", "s4.raw"], 3,
                     "data_file_pattern", {"format": "s%d.raw", "min": 0, "max": 5,
                                           "step": 2}, id="pattern-max-not-reached"),
    ],
)
def test_multi_file_forms(tmp_path, spec, names, nparts, field, value):
    flat = bytes(range(12))
    per = len(flat) // nparts
    _slices(tmp_path, names, [flat[i * per:(i + 1) * per] for i in range(nparts)])
    p = _file(tmp_path, [*BASE, "encoding: raw", *spec], name="x.nhdr", blank=False)
    data, h = jnrrd.read(p)
    np.testing.assert_array_equal(data, A43)
    assert h[field] == value


def test_multi_file_gzip_each_file_its_own_stream(tmp_path):
    flat = bytes(range(12))
    _slices(tmp_path, ["a.gz", "b.gz", "c.gz"],
            [gzip.compress(flat[i * 4:(i + 1) * 4]) for i in range(3)])
    p = _file(tmp_path, [*BASE, "encoding: gzip", "data file: LIST", "a.gz", "b.gz", "c.gz"],
              name="x.nhdr", blank=False)
    np.testing.assert_array_equal(jnrrd.read(p)[0], A43)


def test_skiplist_equal_skips_map_to_byte_skip(tmp_path):
    flat = bytes(range(12))
    _slices(tmp_path, ["a", "b", "c"], [b"HDR" + flat[i * 4:(i + 1) * 4] for i in range(3)])
    p = _file(tmp_path, [*BASE, "encoding: raw", "data file: SKIPLIST", "3 a", "3 b", "3 c"],
              name="x.nhdr")
    data, h = jnrrd.read(p)
    np.testing.assert_array_equal(data, A43)
    assert h["byte_skip"] == 3 and h["data_files"] == ["a", "b", "c"]


def test_line_skip_applies_to_each_file(tmp_path):
    flat = bytes(range(12))
    _slices(tmp_path, ["a", "b", "c"], [b"# x\n" + flat[i * 4:(i + 1) * 4] for i in range(3)])
    p = _file(tmp_path, [*BASE, "encoding: raw", "line skip: 1", "data file: LIST",
                         "a", "b", "c"], name="x.nhdr")
    np.testing.assert_array_equal(jnrrd.read(p)[0], A43)


def test_detached_policy_allows_parent_when_asked(tmp_path):
    (tmp_path / "x.raw").write_bytes(bytes(range(12)))
    sub = tmp_path / "sub"
    sub.mkdir()
    p = _file(sub, [*BASE, "encoding: raw", "data file: ../x.raw"], name="x.nhdr")
    with pytest.raises(SecurityError, match="data_file"):
        jnrrd.read(p)
    np.testing.assert_array_equal(jnrrd.read(p, allow_parent=True)[0], A43)


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(["data file: ../outside.raw"], id="parent"),
        pytest.param(["data file: /etc/passwd"], id="absolute"),
        pytest.param(["data file: https://example.com/x.raw"], id="url"),
        pytest.param(["data file: LIST", "ok.raw", "../outside.raw", "ok.raw"], id="list"),
        pytest.param(["data file: ../s%d.raw 0 2 1"], id="pattern"),
    ],
)
def test_data_file_escaping_directory_is_security_error(tmp_path, spec):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "ok.raw").write_bytes(bytes(4))
    p = _file(sub, [*BASE, "encoding: raw", *spec], name="x.nhdr")
    with pytest.raises(SecurityError) as exc:
        jnrrd.read(p)
    assert str(p) in str(exc.value)


# -- bad input -------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    ("lines", "error", "fragment"),
    [
        pytest.param(["type: uint8", "dimension: 2"], HeaderError, "sizes",
                     id="truncated-header-missing-sizes"),
        pytest.param(["type: uint8", "dimension: 2", "sizes: 4 3"], HeaderError, "encoding",
                     id="missing-encoding"),
        pytest.param(["dimension: 2", "sizes: 4 3", "encoding: raw"], HeaderError, "type",
                     id="missing-type"),
        pytest.param([*BASE, "encoding: raw", "colour: red"], HeaderError, "colour",
                     id="unknown-field"),
        pytest.param([*BASE, "encoding: raw", "no colon here"], HeaderError, "no colon",
                     id="line-without-colon"),
        pytest.param(["type: float16", "dimension: 2", "sizes: 4 3", "encoding: raw"],
                     HeaderError, "type", id="bad-type-float16"),
        pytest.param(["type: uchar8", "dimension: 2", "sizes: 4 3", "encoding: raw"],
                     HeaderError, "type", id="bad-type"),
        pytest.param(["type: uint8", "dimension: x", "sizes: 4 3", "encoding: raw"],
                     HeaderError, "dimension", id="dimension-not-int"),
        pytest.param(["type: uint8", "dimension: 17", "sizes: 4 3", "encoding: raw"],
                     HeaderError, "dimension", id="dimension-too-large"),
        pytest.param(["type: uint8", "dimension: 2", "sizes: 4 3 1", "encoding: raw"],
                     HeaderError, "sizes", id="sizes-count"),
        pytest.param(["type: uint8", "dimension: 2", "sizes: 4 0", "encoding: raw"],
                     HeaderError, "sizes", id="size-zero"),
        pytest.param(["type: uint8", "dimension: 2", "sizes: 4 3.5", "encoding: raw"],
                     HeaderError, "sizes", id="size-not-int"),
        pytest.param([*BASE, "encoding: raw", "spacings: 1"], HeaderError, "spacings",
                     id="spacings-count"),
        pytest.param([*BASE, "encoding: raw", "spacings: 1 abc"], HeaderError, "spacings",
                     id="spacings-not-number"),
        pytest.param([*BASE, "encoding: raw", "kinds: domain"], HeaderError, "kinds",
                     id="kinds-count"),
        pytest.param([*BASE, "encoding: raw", "kinds: domain flavour"], HeaderError, "kinds",
                     id="kinds-unknown-name"),
        pytest.param([*BASE, "encoding: raw", "centers: cell"], HeaderError, "centers",
                     id="centers-count"),
        pytest.param([*BASE, "encoding: raw", "centers: cell middle"], HeaderError, "centers",
                     id="centers-bad"),
        pytest.param([*BASE, "encoding: raw", 'labels: "x"'], HeaderError, "labels",
                     id="labels-count"),
        pytest.param([*BASE, "encoding: raw", 'labels: "x" y'], HeaderError, "labels",
                     id="labels-unquoted"),
        pytest.param([*BASE, "encoding: raw", 'units: "x" "y'], HeaderError, "units",
                     id="units-unterminated"),
        pytest.param([*BASE, "encoding: raw", "space: RAS", "space directions: (1,0,0)"],
                     HeaderError, "space directions", id="directions-count"),
        pytest.param([*BASE, "encoding: raw", "space: RAS",
                      "space directions: (1,0) (0,1)"], HeaderError, "space_directions",
                     id="direction-length"),
        pytest.param([*BASE, "encoding: raw", "space: RAS", "space directions: 1,0,0 none"],
                     HeaderError, "space directions", id="direction-syntax"),
        pytest.param([*BASE, "encoding: raw", "space: RAS", "space origin: (1,2,3) (4,5,6)"],
                     HeaderError, "space origin", id="origin-two-vectors"),
        pytest.param([*BASE, "encoding: raw", "space: RAS", "space origin: none"],
                     HeaderError, "space origin", id="origin-none"),
        pytest.param([*BASE, "encoding: raw", "space: RAS",
                      "measurement frame: (1,0,0) (0,1,0)"], HeaderError, "measurement frame",
                     id="frame-count"),
        pytest.param([*BASE, "encoding: raw", "space: RAS", 'space units: "mm"'], HeaderError,
                     "space units", id="space-units-count"),
        pytest.param([*BASE, "encoding: raw", "space: sideways"], HeaderError, "space",
                     id="space-unknown"),
        pytest.param([*BASE, "encoding: raw", "space: RAS", "space dimension: 2"],
                     HeaderError, "space_dimension", id="space-dimension-disagrees"),
        pytest.param([*BASE, "encoding: zstd"], HeaderError, "encoding", id="encoding-zstd"),
        pytest.param([*BASE, "encoding: raw", "endian: middle"], HeaderError, "endian",
                     id="endian-bad"),
        pytest.param([*BASE, "encoding: hex", "byte skip: -1"], HeaderError, "byte_skip",
                     id="byte-skip-minus-one-hex"),
        pytest.param([*BASE, "encoding: raw", "byte skip: -2"], HeaderError, "byte_skip",
                     id="byte-skip-below-minus-one"),
        pytest.param([*BASE, "encoding: raw", "line skip: -1"], HeaderError, "line_skip",
                     id="line-skip-negative"),
        pytest.param([*BASE, "encoding: raw", "type: uint8"], HeaderError, "repeated",
                     id="duplicate-field"),
        pytest.param([*BASE, "encoding: raw", "data file: s%d.raw 0 2 0"], HeaderError,
                     "data file", id="pattern-step-zero"),
        pytest.param([*BASE, "encoding: raw", "data file: s%d.raw 0 2 -1"], HeaderError,
                     "data file", id="pattern-step-wrong-way"),
        pytest.param([*BASE, "encoding: raw", "data file: s%d.raw 0 x 1"], HeaderError,
                     "data file", id="pattern-not-int"),
        pytest.param([*BASE, "encoding: raw", "data file: s%d.raw 0 1 1"], HeaderError,
                     "data file", id="pattern-wrong-file-count"),
        pytest.param([*BASE, "encoding: raw", "data file: s%d.raw 0 2 1 3"], HeaderError,
                     "subdim", id="pattern-subdim-too-large"),
        pytest.param([*BASE, "encoding: raw", "data file: s%d%d.raw 0 2 1"], HeaderError,
                     "data_file_pattern", id="pattern-two-conversions"),
        pytest.param([*BASE, "encoding: raw", "data file: LIST", "a", "b"], HeaderError,
                     "data file", id="list-wrong-file-count"),
        pytest.param([*BASE, "encoding: raw", "data file: LIST x"], HeaderError, "data file",
                     id="list-subdim-not-int"),
        pytest.param([*BASE, "encoding: raw", "data file: LIST"], HeaderError, "data file",
                     id="list-empty"),
        pytest.param([*BASE, "encoding: raw", "data file: SKIPLIST", "a", "b", "c"],
                     HeaderError, "data file", id="skiplist-line-without-skip"),
        pytest.param([*BASE, "encoding: raw", "byte skip: 2", "data file: SKIPLIST", "1 a",
                      "1 b", "1 c"], HeaderError, "byte skip", id="skiplist-with-byte-skip"),
        pytest.param([*BASE, "encoding: raw", "data file: SKIPLIST", "1 a", "2 b", "1 c"],
                     UnsupportedError, "SKIPLIST", id="skiplist-different-skips"),
    ],
)
def test_bad_headers(tmp_path, lines, error, fragment):
    p = _file(tmp_path, lines, bytes(range(12)))
    with pytest.raises(error) as exc:
        jnrrd.read(p)
    assert str(p) in str(exc.value)
    assert fragment in str(exc.value)


@pytest.mark.parametrize("magic", ["NRRD0006", "NRRD0000", "NRRD000x", "NRRD00051"])
def test_bad_magic_is_version_error(tmp_path, magic):
    p = _file(tmp_path, [*BASE, "encoding: raw"], bytes(range(12)), magic=magic)
    with pytest.raises(VersionError, match="NRRD0001 to NRRD0005"):
        jnrrd.read(p)


def test_duplicate_allowed_when_asked(tmp_path):
    p = _file(tmp_path, [*BASE, "encoding: hex", "encoding: raw"], bytes(range(12)))
    with pytest.warns(JnrrdWarning, match="last value wins"):
        data, h = jnrrd.read(p, allow_duplicates=True)
    assert h["encoding"] == "raw"
    np.testing.assert_array_equal(data, A43)


@pytest.mark.parametrize(
    ("payload", "blank", "fragment"),
    [
        pytest.param(b"", False, "no data section", id="header-ends-at-eof"),
        pytest.param(bytes(range(11)), True, "12 bytes", id="data-short"),
        pytest.param(gzip.compress(bytes(range(11))), True, None, id="gzip-short"),
        pytest.param(b"\x1f\x8b\x08garbage", True, None, id="gzip-corrupt"),
    ],
)
def test_bad_data(tmp_path, payload, blank, fragment):
    enc = "gzip" if payload.startswith(b"\x1f\x8b") else "raw"
    p = _file(tmp_path, [*BASE, f"encoding: {enc}"], payload, blank=blank)
    with pytest.raises(DataError, match=fragment) as exc:
        jnrrd.read(p)
    assert str(p) in str(exc.value)


def test_missing_endian_warns_and_assumes_little(tmp_path):
    p = _file(tmp_path, ["type: short", "dimension: 1", "sizes: 2", "encoding: raw"],
              b"\x01\x00\x02\x00")
    with pytest.warns(JnrrdWarning, match="endian"):
        data, _ = jnrrd.read(p)
    assert data.tolist() == [1, 2]


def test_header_caps(tmp_path):
    p = _file(tmp_path, [*BASE, "encoding: raw", "content: " + "x" * 500], bytes(range(12)))
    with pytest.raises(HeaderError, match="max_line_bytes"):
        jnrrd.read(p, max_line_bytes=100)
    with pytest.raises(HeaderError, match="max_header_bytes"):
        jnrrd.read(p, max_header_bytes=200)


def test_allocation_cap_checked_before_reading(tmp_path):
    p = _file(tmp_path, ["type: double", "dimension: 3", "sizes: 4096 4096 4096",
                         "endian: little", "encoding: raw"], b"")
    with pytest.raises(UnsupportedError, match="max_bytes"):
        jnrrd.read(p)


def test_detached_from_anonymous_stream_is_unsupported(tmp_path):
    data = b"NRRD0005\ntype: uint8\ndimension: 1\nsizes: 1\nencoding: raw\ndata file: a.raw\n"
    with pytest.raises(UnsupportedError, match="header's path"):
        jnrrd.read(io.BytesIO(data))
