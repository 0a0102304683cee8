"""Writing classic NRRD0005: exact header text, encodings, detached data, atomicity, errors."""

from __future__ import annotations

import bz2
import gzip
import os

import numpy as np
import pytest

import jnrrd
from jnrrd.errors import HeaderError, JnrrdWarning, UnsupportedError
from jnrrd.nrrd import NRRD_URI, write_nrrd

A43 = np.arange(12, dtype=np.uint8).reshape(4, 3, order="F")  # a[x, y] = x + 4y


def test_golden_header_and_bytes(tmp_path):
    """Hand-written expected bytes pin the output format."""
    p = tmp_path / "g.nrrd"
    header = {
        "content": "golden",
        "space": "RAS",
        "space_directions": [[0.5, 0, 0], None],
        "space_origin": [1, -2.25, 3],
        "kinds": ["space", "rgb_color"],
        "centers": ["cell", None],
        "labels": ['a "q"', None],
        "units": ["mm", "mm"],
        "spacings": [None, 1.5],
        "old_min": -1,
        "measurement_frame": [[1, 0, 0], [0, 1, 0], [0, 0, 1]],
        "extensions": {"nrrd": NRRD_URI},
        "nrrd:key_values": {"k": "v\\x\ny"},
        "nrrd:comments": ["made by hand"],
    }
    jnrrd.write(p, A43, header)
    expected = (
        b"NRRD0005\n"
        b"# made by hand\n"
        b"type: uint8\n"
        b"dimension: 2\n"
        b"space: right-anterior-superior\n"
        b"sizes: 4 3\n"
        b"space directions: (0.5,0,0) none\n"
        b"kinds: space RGB-color\n"
        b"centerings: cell ???\n"
        b"encoding: raw\n"
        b"content: golden\n"
        b"old min: -1\n"
        b"spacings: nan 1.5\n"
        b'labels: "a \\"q\\"" ""\n'
        b'units: "mm" "mm"\n'
        b"space origin: (1,-2.25,3)\n"
        b"measurement frame: (1,0,0) (0,1,0) (0,0,1)\n"
        b"k:=v\\\\x\\ny\n"
        b"\n" + bytes(range(12))
    )
    assert p.read_bytes() == expected


def test_golden_detached_big_endian(tmp_path):
    p = tmp_path / "g.nhdr"
    jnrrd.write(p, np.array([1, 258], dtype=np.uint16), {"endian": "big"})
    names = sorted(os.listdir(tmp_path))
    assert len(names) == 2 and names[1] == "g.nhdr"
    assert names[0].startswith("g.") and names[0].endswith(".raw")
    assert p.read_bytes() == (b"NRRD0005\ntype: uint16\ndimension: 1\nsizes: 2\nendian: big\n"
                              b"encoding: raw\ndata file: " + names[0].encode() + b"\n")
    assert (tmp_path / names[0]).read_bytes() == b"\x00\x01\x01\x02"


@pytest.mark.parametrize(
    ("encoding", "decode"),
    [
        pytest.param("raw", lambda b: b, id="raw"),
        pytest.param("gzip", gzip.decompress, id="gzip"),
        pytest.param("gz", gzip.decompress, id="gz"),
        pytest.param("bzip2", bz2.decompress, id="bzip2"),
        pytest.param("bz2", bz2.decompress, id="bz2"),
        pytest.param("hex", lambda b: bytes.fromhex(b.decode()), id="hex"),
    ],
)
def test_binary_encodings(tmp_path, encoding, decode):
    a = np.array([[-3, 0, 7], [300, -32768, 32767]], dtype=np.int16).T
    p = tmp_path / "e.nrrd"
    jnrrd.write(p, a, encoding=encoding)
    head, _, body = p.read_bytes().partition(b"\n\n")
    canonical = {"gz": "gzip", "bz2": "bzip2"}.get(encoding, encoding)
    assert f"encoding: {canonical}".encode() in head and b"endian: little" in head
    assert decode(body) == a.astype("<i2").tobytes(order="F")
    data, h = jnrrd.read(p)
    np.testing.assert_array_equal(data, a)
    assert h["encoding"] == canonical


@pytest.mark.parametrize("encoding", ["ascii", "txt", "text"])
def test_ascii_has_no_endian(tmp_path, encoding):
    a = np.array([1.5, -0.25, np.inf, 1e-30], dtype=np.float32)
    p = tmp_path / "t.nrrd"
    jnrrd.write(p, a, encoding=encoding)
    head, _, body = p.read_bytes().partition(b"\n\n")
    assert b"endian" not in head and b"encoding: ascii" in head and b"type: float" in head
    np.testing.assert_array_equal(jnrrd.read(p)[0], a)


@pytest.mark.parametrize(
    ("dtype", "nrrd_type"),
    [
        pytest.param("i1", "int8", id="int8"), pytest.param("u1", "uint8", id="uint8"),
        pytest.param("i2", "int16", id="int16"), pytest.param("u2", "uint16", id="uint16"),
        pytest.param("i4", "int32", id="int32"), pytest.param("u4", "uint32", id="uint32"),
        pytest.param("i8", "int64", id="int64"), pytest.param("u8", "uint64", id="uint64"),
        pytest.param("f4", "float", id="float32"), pytest.param("f8", "double", id="float64"),
    ],
)
def test_types(tmp_path, dtype, nrrd_type):
    a = np.arange(6, dtype=dtype).reshape(2, 3)
    p = tmp_path / "t.nrrd"
    jnrrd.write(p, a)
    head = p.read_bytes().partition(b"\n\n")[0]
    assert f"type: {nrrd_type}\n".encode() in head
    assert (b"endian: little" in head) == (np.dtype(dtype).itemsize > 1)
    data, _ = jnrrd.read(p)
    assert data.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(data, a)


def test_block_type(tmp_path):
    a = np.array([b"abc", b"def"], dtype="V3")
    p = tmp_path / "b.nrrd"
    jnrrd.write(p, a)
    head = p.read_bytes().partition(b"\n\n")[0]
    assert b"type: block\nblock size: 3\n" in head and b"endian" not in head
    data, h = jnrrd.read(p)
    assert h["block_size"] == 3 and bytes(data[1]) == b"def"


@pytest.mark.parametrize(
    ("data", "header", "kwargs", "error", "fragment"),
    [
        pytest.param(np.zeros(2, np.float16), None, {}, UnsupportedError, "float16",
                     id="float16"),
        pytest.param(np.zeros(2, np.complex64), None, {}, UnsupportedError, "complex64",
                     id="complex"),
        pytest.param(np.zeros(2, bool), None, {}, UnsupportedError, "bool", id="bool"),
        pytest.param(np.zeros(2, np.uint8), {"type": "bfloat16"}, {}, UnsupportedError,
                     "bfloat16", id="bfloat16-type"),
        pytest.param(np.zeros(2, np.uint8), None, {"encoding": "zstd"}, UnsupportedError,
                     "zstd", id="zstd"),
        pytest.param(np.zeros(2, np.uint8), {"encoding": "lz4"}, {}, UnsupportedError,
                     "lz4", id="lz4-in-header"),
        pytest.param(np.zeros(2, np.uint8), None, {"encoding": "rle"}, HeaderError,
                     "encoding", id="unknown-encoding"),
        pytest.param(np.zeros(2, np.uint16), {"endian": "middle"}, {}, HeaderError, "endian",
                     id="bad-endian"),
        pytest.param(np.zeros((2, 2), np.uint8), {"spacings": [1.0]}, {}, HeaderError,
                     "spacings", id="per-axis-count"),
        pytest.param(np.zeros(2, np.uint8), {"content": "two\nlines"}, {}, HeaderError,
                     "content", id="newline-in-content"),
        pytest.param(np.zeros(2, np.uint8), {"labels": ["a\nb"]}, {}, HeaderError, "labels",
                     id="newline-in-label"),
        pytest.param(np.zeros(2, np.uint8), {"nrrd:key_values": {"a:=b": "c"}}, {},
                     HeaderError, "key_values", id="key-with-separator"),
        pytest.param(np.zeros(2, np.uint8), {"nrrd:key_values": {"#k": "c"}}, {},
                     HeaderError, "key_values", id="key-like-comment"),
        pytest.param(np.zeros(2, np.uint8), {"nrrd:key_values": {"k": 3}}, {}, HeaderError,
                     "key_values.k", id="non-string-value"),
        pytest.param(np.zeros(2, np.uint8), {"nrrd:key_values": ["k", "v"]}, {}, HeaderError,
                     "key_values", id="key-values-not-object"),
        pytest.param(np.zeros(2, np.uint8), {"nrrd:comments": "text"}, {}, HeaderError,
                     "comments", id="comments-not-list"),
        pytest.param(np.zeros(2, np.uint8), {"old_max": "big"}, {}, HeaderError, "old_max",
                     id="old-max-not-number"),
        pytest.param(np.zeros((), np.uint8), None, {}, UnsupportedError, "0-dimensional",
                     id="zero-dimensional"),
    ],
)
def test_write_errors(tmp_path, data, header, kwargs, error, fragment):
    p = tmp_path / "bad.nrrd"
    with pytest.raises(error, match=fragment):
        jnrrd.write(p, data, header, **kwargs)
    assert os.listdir(tmp_path) == []  # nothing half-written


def test_index_order_c(tmp_path):
    c = np.ascontiguousarray(A43.T)  # shape (3, 4), c[y, x]
    p = tmp_path / "c.nrrd"
    jnrrd.write(p, c, {"labels": ["x", "y"]}, index_order="C")
    assert p.read_bytes().endswith(bytes(range(12)))
    data, h = jnrrd.read(p)
    assert h["sizes"] == [4, 3] and h["labels"] == ["x", "y"]
    np.testing.assert_array_equal(data, A43)


def test_header_type_converts_data(tmp_path):
    p = tmp_path / "t.nrrd"
    jnrrd.write(p, np.array([1.0, 2.0, 300.0]), {"type": "ushort"})
    data, h = jnrrd.read(p)
    assert h["type"] == "uint16" and data.dtype == np.uint16 and data.tolist() == [1, 2, 300]


def test_source_placement_fields_are_not_copied(tmp_path):
    header = {"data_file": "elsewhere.raw", "line_skip": 3, "byte_skip": -1,
              "encoding": "raw"}
    p = tmp_path / "p.nrrd"
    jnrrd.write(p, A43, header)
    head = p.read_bytes().partition(b"\n\n")[0]
    assert b"skip" not in head and b"data file" not in head
    np.testing.assert_array_equal(jnrrd.read(p)[0], A43)


def test_numpy_values_and_nan_direction_rows(tmp_path):
    header = {"space": "LPS",
              "space_directions": np.array([[1.0, 0, 0], [np.nan, np.nan, np.nan]]),
              "space_origin": np.array([0.0, 1.0, 2.0]), "spacings": [np.float32(np.nan),
                                                                    np.float64(np.nan)]}
    p = tmp_path / "n.nrrd"
    jnrrd.write(p, A43, header)
    _, h = jnrrd.read(p)
    assert h["space_directions"] == [[1.0, 0.0, 0.0], None]
    assert h["space_origin"] == [0.0, 1.0, 2.0] and h["spacings"] == [None, None]


def test_unmappable_fields_warn_tile_fields_silent(tmp_path):
    p = tmp_path / "u.nrrd"
    # a list cannot be a NRRD key/value string (a plain string or number would become one)
    header = {"meta:creator": {"name": "x"}, "mystery": [1],
              "extensions": {"meta": "urn:x"}}
    with pytest.warns(JnrrdWarning, match="meta:creator") as rec:
        jnrrd.write(p, A43, header)
    assert "mystery" in str(rec[0].message)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jnrrd.write(p, A43, {"tile:sizes": [2, 2], "tile:dimensions": [0, 1]})
    assert b"tile" not in p.read_bytes().partition(b"\n\n")[0]


def test_key_values_under_a_renamed_prefix(tmp_path):
    p = tmp_path / "k.nrrd"
    jnrrd.write(p, A43, {"extensions": {"n2": NRRD_URI}, "n2:key_values": {"a": "b"}})
    _, h = jnrrd.read(p)
    assert h["nrrd:key_values"] == {"a": "b"}


def test_detached_nrrd_and_overwrite_removes_old_data(tmp_path):
    p = tmp_path / "d.nrrd"
    jnrrd.write(p, A43, detached=True, encoding="gzip")
    first = sorted(n for n in os.listdir(tmp_path) if n != "d.nrrd")
    assert len(first) == 1 and first[0].endswith(".raw.gz")
    _, h = jnrrd.read(p)
    assert h["data_file"] == first[0]
    jnrrd.write(p, A43 + 1, detached=True)
    second = sorted(n for n in os.listdir(tmp_path) if n != "d.nrrd")
    assert len(second) == 1 and second[0] != first[0] and second[0].endswith(".raw")
    np.testing.assert_array_equal(jnrrd.read(p)[0], A43 + 1)
    jnrrd.write(p, A43)  # attached again: the detached data file goes
    assert os.listdir(tmp_path) == ["d.nrrd"]


class _Failing:
    """An array-like whose slab reads fail (a crash in the middle of a write)."""

    shape = (4, 3)
    dtype = np.dtype(np.uint8)

    def __getitem__(self, key):
        raise OSError("disk on fire")


@pytest.mark.parametrize("name", ["a.nrrd", "a.nhdr"])
def test_failed_write_leaves_old_file(tmp_path, name):
    p = tmp_path / name
    jnrrd.write(p, A43)
    before = {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path)}
    with pytest.raises(OSError, match="disk on fire"):
        write_nrrd(str(p), _Failing(), None)
    after = {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path)}
    assert after == before
    np.testing.assert_array_equal(jnrrd.read(p)[0], A43)


def test_leftover_data_of_interrupted_write_is_removed(tmp_path):
    # the data file the previous header names goes with the next write; a look-alike that
    # no header of this target names is not provably its own and stays
    # (docs/security.md, "Cleanup owns only what it can prove")
    p = tmp_path / "x.nhdr"
    jnrrd.write(p, A43)
    (old,) = [n for n in os.listdir(tmp_path) if n != "x.nhdr"]
    (tmp_path / "x.0123abcd.raw").write_bytes(b"looks like ours, is named by no header")
    (tmp_path / "x.raw").write_bytes(b"user file, not ours")
    jnrrd.write(p, A43)
    names = sorted(os.listdir(tmp_path))
    assert old not in names and "x.0123abcd.raw" in names and "x.raw" in names
    assert len(names) == 4


@pytest.mark.parametrize("suffix", [".nrrd", ".nhdr", ".jnrrd"])
@pytest.mark.parametrize(("in_header", "argument"), [("raw", "gzip"), ("gzip", "raw"),
                                                     ("bzip2", "hex")])
def test_encoding_argument_wins_over_the_headers(tmp_path, suffix, in_header, argument):
    # A header read from one file describes how that file was stored; the argument is the
    # caller's choice for the new one (only storage changes, never a value).
    data = np.arange(60, dtype=np.int16).reshape(3, 4, 5)
    p = tmp_path / f"v{suffix}"
    jnrrd.write(p, data, {"encoding": in_header, "spacings": [1.0, 2.0, 3.0]},
                encoding=argument)
    back, header = jnrrd.read(p)
    assert header["encoding"] == argument
    assert header["spacings"] == [1.0, 2.0, 3.0]
    np.testing.assert_array_equal(back, data)


def test_a_tiled_files_header_writes_gzip_nrrd(tmp_path):
    data = np.arange(8 * 8 * 8, dtype=np.int16).reshape(8, 8, 8)
    jnrrd.write(tmp_path / "t.jnrrd", data, tile=4, compression="zstd", levels=2)
    back, header = jnrrd.read(tmp_path / "t.jnrrd")
    jnrrd.write(tmp_path / "t.nrrd", back, header, encoding="gzip")
    again, h2 = jnrrd.read(tmp_path / "t.nrrd")
    assert h2["encoding"] == "gzip"
    np.testing.assert_array_equal(again, data)
