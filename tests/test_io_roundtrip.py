"""Round trips of untiled volumes (docs/api.md#volumes, docs/format.md#axis-order): the issue's
golden case, ``read(write(x)) == x`` over dtypes, shapes, encodings, index orders and placement, and
lazy ``open()`` slicing equal to NumPy's for every basic index form."""

from __future__ import annotations

import io
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import jnrrd

ENCODINGS = ["raw", "ascii", "hex", "gzip", "bzip2", "zstd", "lz4"]
DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16",
          "float32", "float64", "complex64", "complex128"]


def test_issue_golden_case(tmp_path: Path) -> None:
    p = tmp_path / "g.jnrrd"
    a = np.array([[0, 3], [1, 4], [2, 5]], dtype=np.uint8)
    jnrrd.write(p, a)
    assert p.read_bytes() == (b'{"jnrrd": "0004"}\n{"type": "uint8"}\n{"dimension": 2}\n'
                              b'{"sizes": [3, 2]}\n{"encoding": "raw"}\n\n'
                              b"\x00\x01\x02\x03\x04\x05")
    data, h = jnrrd.read(p)
    assert h["sizes"] == [3, 2]
    np.testing.assert_array_equal(data, a)
    c, _ = jnrrd.read(p, index_order="C")
    assert c.shape == (2, 3) and c.flags.c_contiguous
    np.testing.assert_array_equal(c, a.T)


def test_index_order_c_writes_the_same_bytes(tmp_path: Path) -> None:
    a = np.array([[0, 3], [1, 4], [2, 5]], dtype=np.uint8)
    jnrrd.write(tmp_path / "f.jnrrd", a)
    jnrrd.write(tmp_path / "c.jnrrd", np.ascontiguousarray(a.T), index_order="C")
    assert (tmp_path / "f.jnrrd").read_bytes() == (tmp_path / "c.jnrrd").read_bytes()


def test_write_to_a_file_object() -> None:
    buf = io.BytesIO()
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    jnrrd.write(buf, x, encoding="zstd")
    buf.seek(0)
    data, h = jnrrd.read(buf)
    np.testing.assert_array_equal(data, x)
    assert not buf.closed
    buf.seek(0)
    with jnrrd.open(buf) as vol:
        np.testing.assert_array_equal(vol[::2, -1], x[::2, -1])


@pytest.mark.parametrize("x", [
    pytest.param(np.arange(6, dtype=np.uint8).reshape(2, 3)[:, ::-1], id="negative-strides"),
    pytest.param(np.arange(24, dtype=np.float32).reshape(4, 6)[::2, 1::2], id="strided-view"),
    pytest.param(np.memmap, id="memmap"),
    pytest.param([[1, 2], [3, 4]], id="nested-list"),
])
def test_input_forms(tmp_path: Path, x) -> None:
    if x is np.memmap:
        x = np.memmap(tmp_path / "m.bin", dtype=np.int16, mode="w+", shape=(3, 5))
        x[:] = np.arange(15).reshape(3, 5)
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, x)
    np.testing.assert_array_equal(jnrrd.read(p)[0], np.asarray(x))


# -- hypothesis ---------------------------------------------------------------------------------
def _arrays(dtype: str) -> st.SearchStrategy[np.ndarray]:
    shapes = hnp.array_shapes(min_dims=1, max_dims=5, min_side=1, max_side=4)
    if dtype == "bfloat16":
        return hnp.arrays(np.float32, shapes,
                          elements=st.floats(-1e6, 1e6, width=32)).map(
            lambda a: a.astype(ml_dtypes.bfloat16))
    return hnp.arrays(np.dtype(dtype), shapes)


@st.composite
def cases(draw):
    dtype = draw(st.sampled_from([*DTYPES, "bfloat16"]))
    x = draw(_arrays(dtype))
    return (x, draw(st.sampled_from(ENCODINGS)), draw(st.sampled_from(["F", "C"])),
            draw(st.booleans()), draw(st.sampled_from(["little", "big"])))


def _same(a: np.ndarray, b: np.ndarray) -> None:
    assert a.shape == b.shape and a.dtype == b.dtype
    if a.dtype.kind in "fc" or a.dtype.name == "bfloat16":
        # bit-exact except NaN payloads (text and NumPy casts keep NaN, not its payload)
        fa = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
        fb = b.astype(fa.dtype)
        np.testing.assert_array_equal(fa, fb)
        real = ~np.isnan(fa.real)
        assert (np.signbit(fa.real[real]) == np.signbit(fb.real[real])).all()  # -0.0 kept
    else:
        np.testing.assert_array_equal(a, b)


@given(case=cases())
def test_read_write_round_trip(tmp_path_factory, case) -> None:
    x, encoding, order, detached, endian = case
    d = tmp_path_factory.mktemp("rt")
    p = d / "v.jnrrd"
    jnrrd.write(p, x, header={"endian": endian}, encoding=encoding, index_order=order,
                detached=detached)
    data, h = jnrrd.read(p, index_order=order)
    expected_sizes = list(x.shape) if order == "F" else list(x.shape[::-1])
    assert h["sizes"] == expected_sizes
    assert ("data_file" in h) == detached
    _same(data, x)
    assert data.flags.f_contiguous if order == "F" else data.flags.c_contiguous


def _index(shape: tuple[int, ...]) -> st.SearchStrategy[tuple]:
    """Basic selections: ints (negative too), slices with any step, an Ellipsis."""
    def one(n: int) -> st.SearchStrategy:
        return st.one_of(
            st.integers(-n, n - 1),
            st.builds(slice, st.none() | st.integers(-n - 2, n + 2),
                      st.none() | st.integers(-n - 2, n + 2),
                      st.none() | st.integers(-4, 4).filter(bool)),
        )
    parts = st.tuples(*(one(n) for n in shape))

    def maybe_ellipsis(t: tuple, cut: int) -> tuple:
        if cut >= len(t):
            return t
        return (*t[:cut], Ellipsis)
    return st.builds(maybe_ellipsis, parts, st.integers(0, len(shape) + 1))


@given(data=st.data())
def test_open_slicing_equals_numpy(tmp_path_factory, data) -> None:
    x = data.draw(hnp.arrays(np.dtype(data.draw(st.sampled_from(["uint8", ">i4", "float64"]))),
                             hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=6)))
    order = data.draw(st.sampled_from(["F", "C"]))
    encoding = data.draw(st.sampled_from(["raw", "raw", "gzip"]))
    endian = data.draw(st.sampled_from(["little", "big"]))
    p = tmp_path_factory.mktemp("sl") / "v.jnrrd"
    jnrrd.write(p, x, header={"endian": endian}, encoding=encoding, index_order=order)
    key = data.draw(_index(x.shape))
    with jnrrd.open(p, index_order=order) as vol:
        assert vol.shape == x.shape
        got = vol[key]
    want = x[key]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("key", [
    pytest.param((slice(None, None, -1),) * 3, id="all-reversed"),
    pytest.param((-1, slice(None, None, -2), Ellipsis), id="int-negative-step-ellipsis"),
    pytest.param((Ellipsis, 0), id="ellipsis-first"),
    pytest.param((slice(5, 1, -1), slice(1, 3), slice(-1, None)), id="mixed"),
    pytest.param((1, 2, 3), id="all-ints"),
    pytest.param((slice(3, 3),), id="empty-slice"),
    pytest.param((slice(-100, 100, 7),), id="clipped-bounds"),
])
@pytest.mark.parametrize("order", ["F", "C"])
def test_open_slicing_named_cases(tmp_path: Path, key, order: str) -> None:
    x = np.arange(6 * 5 * 4, dtype=np.int16).reshape(6, 5, 4)
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, x, index_order=order)
    with jnrrd.open(p, index_order=order) as vol:
        np.testing.assert_array_equal(vol[key], x[key])
        np.testing.assert_array_equal(np.asarray(vol), x)


@pytest.mark.parametrize("key", [
    pytest.param((0, 0, 0, 0), id="too-many-indices"),
    pytest.param((6,), id="int-out-of-range"),
    pytest.param((slice(None, None, 0),), id="zero-step"),
])
def test_open_bad_selections(tmp_path: Path, key) -> None:
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, np.zeros((6, 5, 4), np.uint8))
    with jnrrd.open(p) as vol, pytest.raises((IndexError, ValueError)):
        vol[key]


def test_open_is_a_memory_map_for_raw(tmp_path: Path) -> None:
    p = tmp_path / "v.jnrrd"
    x = np.arange(60, dtype=np.uint16).reshape(3, 4, 5)
    jnrrd.write(p, x)
    with jnrrd.open(p) as vol:
        # the store's buffer of the held file: a view of its memory map, no copy
        import mmap

        base = vol._untiled._map.base
        assert isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap)
        np.testing.assert_array_equal(vol[1:, ::2], x[1:, ::2])
