"""Every element type end to end (docs/format.md#types): integers, floats, bfloat16 in each policy
mode, complex, block, NRRD aliases, and types the format cannot hold."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import jnrrd
from jnrrd.errors import HeaderError, JnrrdWarning, UnsupportedError

ENCODINGS = ["raw", "ascii", "hex", "gzip", "bzip2", "zstd", "lz4"]
BINARY = ["raw", "hex", "gzip"]


def header(type_name: str, n: int, encoding: str, *extra: str) -> bytes:
    lines = ['{"jnrrd": "0004"}', f'{{"type": "{type_name}"}}', '{"dimension": 1}',
             f'{{"sizes": [{n}]}}', f'{{"encoding": "{encoding}"}}', *extra]
    return ("\n".join(lines) + "\n\n").encode()


def _sample(dtype: np.dtype) -> np.ndarray:
    """Values that exercise the type's extremes (min, max, sign, fractions)."""
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return np.array([info.min, info.max, 0, 1, info.max // 3], dtype=dt)
    if dt.kind == "f":
        info = np.finfo(dt)
        return np.array([info.min, info.max, -0.0, 1 / 3, info.tiny, np.inf, -np.inf, np.nan],
                        dtype=dt)
    return np.array([1 + 2j, -0.5 - 1e-3j, complex(np.inf, np.nan), 0j], dtype=dt)


DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]


@pytest.mark.slow
@pytest.mark.parametrize("endian", ["little", "big"])
@pytest.mark.parametrize("enc", ENCODINGS)
@pytest.mark.parametrize("name", DTYPES)
def test_every_dtype_round_trips(tmp_path: Path, name: str, enc: str, endian: str) -> None:
    x = _sample(np.dtype(name))
    p = tmp_path / "t.jnrrd"
    jnrrd.write(p, x, header={"endian": endian}, encoding=enc)
    data, h = jnrrd.read(p)
    assert h["type"] == name
    assert data.dtype == np.dtype(name) and data.dtype.isnative
    np.testing.assert_array_equal(data, x)  # NaN equals NaN here
    if enc != "ascii" and x.itemsize > 1:
        assert h["endian"] == endian
    else:
        assert "endian" not in h


@pytest.mark.parametrize("name", ["int16", "uint32", "float32", "float64", "complex64"])
def test_raw_bytes_follow_the_endian_field(tmp_path: Path, name: str) -> None:
    x = _sample(np.dtype(name))
    for endian, code in (("little", "<"), ("big", ">")):
        p = tmp_path / f"{endian}.jnrrd"
        jnrrd.write(p, x, header={"endian": endian})
        raw = p.read_bytes()
        assert raw.endswith(x.astype(np.dtype(name).newbyteorder(code)).tobytes())


@pytest.mark.parametrize("name", DTYPES[:8])
def test_big_endian_input_array(tmp_path: Path, name: str) -> None:
    x = _sample(np.dtype(name)).astype(np.dtype(name).newbyteorder(">"))
    p = tmp_path / "t.jnrrd"
    jnrrd.write(p, x)  # written little (the default), values preserved
    np.testing.assert_array_equal(jnrrd.read(p)[0], x)


# -- bfloat16 -----------------------------------------------------------------------------------
BF16_LE = bytes.fromhex("803F20C0")  # [1.0, -2.5] (docs/format.md#types)


@pytest.mark.parametrize("endian, payload", [
    pytest.param("little", BF16_LE, id="little"),
    pytest.param("big", bytes.fromhex("3F80C020"), id="big"),
])
@pytest.mark.parametrize("mode, dtype, values", [
    pytest.param("ml_dtypes", np.dtype(ml_dtypes.bfloat16), [1.0, -2.5], id="ml_dtypes"),
    pytest.param("float32", np.dtype("float32"), [1.0, -2.5], id="float32"),
    pytest.param("uint16", np.dtype("uint16"), [0x3F80, 0xC020], id="uint16"),
    pytest.param(None, np.dtype(ml_dtypes.bfloat16), [1.0, -2.5], id="default"),
])
def test_bfloat16_read_modes(tmp_path: Path, endian: str, payload: bytes, mode, dtype,
                             values) -> None:
    p = tmp_path / "b.jnrrd"
    p.write_bytes(header("bfloat16", 2, "raw", f'{{"endian": "{endian}"}}') + payload)
    kw = {} if mode is None else {"bfloat16": mode}
    data, _ = jnrrd.read(p, **kw)
    assert data.dtype == dtype and data.dtype.isnative
    assert data.astype(np.float64).tolist() == values
    with jnrrd.open(p, **kw) as vol:
        assert vol.dtype == dtype
        assert vol[::-1].astype(np.float64).tolist() == values[::-1]


def test_bfloat16_from_float32_rounds_to_nearest_even(tmp_path: Path) -> None:
    # 1 + 2^-8 is halfway between 1.0 (0x3F80) and the next bfloat16 (0x3F81): ties go to
    # the even word; 1 + 3·2^-8 ties between 0x3F81 and 0x3F82 and goes up; one float32 ulp
    # above the first tie rounds up.
    f = np.array([1.0, -2.5, 1.00390625, 1.01171875, 1.0039064, np.nan, -np.nan],
                 dtype=np.float32)
    p = tmp_path / "b.jnrrd"
    jnrrd.write(p, f, header={"type": "bfloat16"})
    words = np.frombuffer(p.read_bytes()[-14:], "<u2").tolist()
    assert words == [0x3F80, 0xC020, 0x3F80, 0x3F82, 0x3F81, 0x7FC0, 0xFFC0]
    data, h = jnrrd.read(p, bfloat16="float32")
    assert h["type"] == "bfloat16"
    assert data[:4].tolist() == [1.0, -2.5, 1.0, 1.015625]


@pytest.mark.parametrize("enc", ENCODINGS)
@pytest.mark.parametrize("endian", ["little", "big"])
def test_bfloat16_round_trip(tmp_path: Path, enc: str, endian: str) -> None:
    x = np.array([1.0, -2.5, 3.140625, -0.0, np.inf, 1e-20, 3e38], dtype=ml_dtypes.bfloat16)
    p = tmp_path / "b.jnrrd"
    jnrrd.write(p, x, header={"endian": endian}, encoding=enc)
    data, _ = jnrrd.read(p)
    assert data.dtype == x.dtype
    assert data.view(np.uint16).tolist() == x.view(np.uint16).tolist()


def test_bfloat16_ascii_holds_values_not_words(tmp_path: Path) -> None:
    p = tmp_path / "b.jnrrd"
    jnrrd.write(p, np.array([1.0, -2.5], dtype=ml_dtypes.bfloat16), encoding="ascii")
    assert p.read_bytes().endswith(b"\n\n1.0 -2.5\n")


@pytest.mark.parametrize("text, words", [
    pytest.param(b"1.0 -2.5", [0x3F80, 0xC020], id="exact"),
    pytest.param(b"1.00390625 nan", [0x3F80, 0x7FC0], id="ties-to-even-and-nan"),
    pytest.param(b"-inf 1", [0xFF80, 0x3F80], id="inf-and-integer-token"),
])
def test_bfloat16_ascii_read(tmp_path: Path, text: bytes, words: list[int]) -> None:
    p = tmp_path / "b.jnrrd"
    p.write_bytes(header("bfloat16", 2, "ascii") + text)
    assert jnrrd.read(p, bfloat16="uint16")[0].tolist() == words


# -- float text -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype, text", [
    pytest.param("float32", b"0.33333334 -2.5 1e+38 inf nan", id="float32-shortest"),
    pytest.param("float16", b"0.3333 -2.5 6.55e+04 inf nan", id="float16-shortest"),
    pytest.param("float64", b"0.3333333333333333 -2.5 1e+38 inf nan", id="float64"),
])
def test_float_ascii_is_shortest_round_trip(tmp_path: Path, dtype: str, text: bytes) -> None:
    x = np.array([1 / 3, -2.5, 1e38 if dtype != "float16" else 65504, np.inf, np.nan],
                 dtype=dtype)
    p = tmp_path / "f.jnrrd"
    jnrrd.write(p, x, encoding="ascii")
    assert p.read_bytes().endswith(b"\n\n" + text + b"\n")
    np.testing.assert_array_equal(jnrrd.read(p)[0], x)


@pytest.mark.parametrize("text, expected", [
    pytest.param(b"NaN -INF +inf 1e3", [np.nan, -np.inf, np.inf, 1000.0], id="nrrd-tokens"),
    pytest.param(b"-nan  infinity 2 3", [np.nan, np.inf, 2.0, 3.0], id="spelled-out"),
])
def test_float_ascii_special_tokens(tmp_path: Path, text: bytes, expected) -> None:
    p = tmp_path / "f.jnrrd"
    p.write_bytes(header("float64", 4, "ascii") + text)
    np.testing.assert_array_equal(jnrrd.read(p)[0], expected)


# -- complex --------------------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    pytest.param(b"1 2\n3 -4\n", id="pairs"),
    pytest.param(b"(1+2j) (3-4j)", id="python-literals"),
    pytest.param(b"1+2j 3-4j", id="literals-without-parentheses"),
])
@pytest.mark.parametrize("name", ["complex64", "complex128"])
def test_complex_ascii_read(tmp_path: Path, name: str, text: bytes) -> None:
    p = tmp_path / "c.jnrrd"
    p.write_bytes(header(name, 2, "ascii") + text)
    data, _ = jnrrd.read(p)
    assert data.dtype == np.dtype(name)
    assert data.tolist() == [1 + 2j, 3 - 4j]


@pytest.mark.parametrize("endian, payload", [
    pytest.param("little", np.array([1, 2, 3, -4], "<f4").tobytes(), id="little"),
    pytest.param("big", np.array([1, 2, 3, -4], ">f4").tobytes(), id="big"),
])
def test_complex_is_interleaved_per_component(tmp_path: Path, endian: str, payload: bytes
                                              ) -> None:
    p = tmp_path / "c.jnrrd"
    p.write_bytes(header("complex64", 2, "raw", f'{{"endian": "{endian}"}}') + payload)
    assert jnrrd.read(p)[0].tolist() == [1 + 2j, 3 - 4j]


def test_complex_ascii_write_is_pairs(tmp_path: Path) -> None:
    p = tmp_path / "c.jnrrd"
    jnrrd.write(p, np.array([1 + 2j, 3 - 4j], np.complex128), encoding="ascii")
    assert p.read_bytes().endswith(b"\n\n1.0 2.0\n3.0 -4.0\n")


# -- block ----------------------------------------------------------------------------------
@pytest.mark.parametrize("enc", ["raw", "hex", "gzip", "zstd"])
def test_block_round_trip(tmp_path: Path, enc: str) -> None:
    x = np.frombuffer(b"abcdefghijkl", dtype="V3").reshape(2, 2, order="F")
    p = tmp_path / "k.jnrrd"
    jnrrd.write(p, x, encoding=enc, header={"endian": "big"})
    data, h = jnrrd.read(p)
    assert h["type"] == "block" and h["block_size"] == 3 and "endian" not in h
    assert data.dtype == np.dtype("V3")
    assert data.tobytes(order="F") == b"abcdefghijkl"
    with jnrrd.open(p) as vol:
        assert vol[1, :].tobytes() == b"defjkl"


def test_block_read_golden(tmp_path: Path) -> None:
    p = tmp_path / "k.jnrrd"
    # endian is ignored for block (docs/format.md#types)
    p.write_bytes(header("block", 2, "raw", '{"block_size": 3}', '{"endian": "big"}')
                  + b"abcdef")
    data, _ = jnrrd.read(p)
    assert [bytes(v) for v in data] == [b"abc", b"def"]


@pytest.mark.slow
@pytest.mark.parametrize("extra, error, match", [
    pytest.param((), HeaderError, "block_size", id="missing-block-size"),
    pytest.param(('{"block_size": 0}',), HeaderError, "block_size", id="zero-block-size"),
])
def test_block_header_errors(tmp_path: Path, extra, error, match) -> None:
    p = tmp_path / "k.jnrrd"
    p.write_bytes(header("block", 2, "raw", *extra) + b"abcdef")
    with pytest.raises(error, match=match):
        jnrrd.read(p)


def test_block_as_ascii_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "k.jnrrd"
    p.write_bytes(header("block", 2, "ascii", '{"block_size": 3}') + b"1 2")
    with pytest.raises(HeaderError, match="encoding"):
        jnrrd.read(p)
    with pytest.raises(UnsupportedError, match="ascii"):
        jnrrd.write(tmp_path / "w.jnrrd", np.zeros(2, "V3"), encoding="ascii")


# -- aliases and unsupported types ------------------------------------------------------------
@pytest.mark.parametrize("alias, canonical", [
    pytest.param("float", "float32", id="float"),
    pytest.param("double", "float64", id="double"),
    pytest.param("unsigned short", "uint16", id="unsigned-short"),
    pytest.param("uchar", "uint8", id="uchar"),
    pytest.param("signed long long int", "int64", id="signed-long-long-int"),
    pytest.param("int", "int32", id="int"),
])
def test_nrrd_type_aliases_warn(tmp_path: Path, alias: str, canonical: str) -> None:
    dt = np.dtype(canonical)
    x = np.array([1, 2], dtype=dt)
    p = tmp_path / "a.jnrrd"
    p.write_bytes(header(alias, 2, "raw", '{"endian": "big"}')
                  + x.astype(dt.newbyteorder(">")).tobytes())
    with pytest.warns(JnrrdWarning, match="NRRD type name"):
        data, _ = jnrrd.read(p)
    assert data.dtype == dt
    assert data.tolist() == [1, 2]


@pytest.mark.parametrize("x", [
    pytest.param(np.zeros(3, bool), id="bool"),
    pytest.param(np.array(["a", "b"]), id="str"),
    pytest.param(np.zeros(2, dtype=[("a", "u1"), ("b", "f4")]), id="structured"),
    pytest.param(np.zeros(2, dtype="M8[s]"), id="datetime"),
])
def test_types_without_a_jnrrd_name(tmp_path: Path, x: np.ndarray) -> None:
    with pytest.raises(UnsupportedError):
        jnrrd.write(tmp_path / "u.jnrrd", x)
    assert not (tmp_path / "u.jnrrd").exists()


def test_unknown_type_name_on_read(tmp_path: Path) -> None:
    p = tmp_path / "u.jnrrd"
    p.write_bytes(header("float128", 2, "raw") + bytes(32))
    with pytest.raises(HeaderError, match="u.jnrrd: type: unknown type 'float128'"):
        jnrrd.read(p)
