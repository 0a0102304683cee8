"""Regression tests: what the writer stores reads back bit for bit (issue 19 §4).

Sparse tiles are detected by bit pattern, never by numeric equality: a tile of ``-0.0`` or of
NaNs with a payload is not "all padding" when the padding value is ``0.0`` or the canonical
NaN.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import jnrrd

NAN_PAYLOAD = np.array([0x7FC00001], dtype=np.uint32).view(np.float32)[0]


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(np.uint8)


def _write_read(path, a, **kw):
    jnrrd.write(path, a, tile=(4, 4), sparse=True, **kw)
    return jnrrd.read(path)[0], jnrrd.read_header(path)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_sparse_negative_zero_tile_is_stored(tmp_path, dtype):
    a = np.zeros((8, 4), dtype)
    a[4:, :] = -0.0  # tile (1, 0) is all -0.0; tile (0, 0) all +0.0 (sparse)
    back, header = _write_read(tmp_path / "z.jnrrd", a)
    assert header["tile:offset_table"][0] is None
    assert header["tile:offset_table"][1] is not None
    np.testing.assert_array_equal(_bits(back), _bits(a))
    assert np.signbit(back[4:, :]).all()


def test_sparse_nan_payload_tile_is_stored(tmp_path):
    a = np.full((8, 4), np.nan, np.float32)
    a[4:, :] = NAN_PAYLOAD  # tile (1, 0): NaNs with a payload; tile (0, 0): canonical NaN
    back, header = _write_read(tmp_path / "n.jnrrd", a, padding_value=float("nan"))
    assert header["tile:offset_table"][0] is None
    assert header["tile:offset_table"][1] is not None
    np.testing.assert_array_equal(_bits(back), _bits(a))


def test_sparse_negative_nan_tile_is_stored(tmp_path):
    a = np.full((8, 4), np.nan, np.float64)
    a[4:, :] = -np.nan
    back, header = _write_read(tmp_path / "n.jnrrd", a, padding_value=None)
    assert header["tile:offset_table"][1] is not None
    np.testing.assert_array_equal(_bits(back), _bits(a))


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("value", [complex(-0.0, 0.0), complex(0.0, -0.0)])
def test_sparse_complex_signed_zero_tile_is_stored(tmp_path, dtype, value):
    a = np.zeros((8, 4), dtype)
    a[4:, :] = value
    back, header = _write_read(tmp_path / "c.jnrrd", a)
    assert header["tile:offset_table"][0] is None
    assert header["tile:offset_table"][1] is not None
    np.testing.assert_array_equal(_bits(back), _bits(a))


def test_sparse_negative_zero_padding_value_is_kept(tmp_path):
    a = np.zeros((8, 4), np.float32)
    a[4:, :] = -0.0  # tile (1, 0) is the padding value bit for bit; tile (0, 0) is not
    back, header = _write_read(tmp_path / "p.jnrrd", a, padding_value=-0.0)
    assert np.signbit(header["tile:padding_value"])
    assert header["tile:offset_table"][0] is not None
    assert header["tile:offset_table"][1] is None
    np.testing.assert_array_equal(_bits(back), _bits(a))


def test_sparse_external_and_dask_compare_bits(tmp_path):
    da = pytest.importorskip("dask.array")
    a = np.zeros((8, 8), np.float32)
    a[4:, :4] = -0.0
    a[:4, 4:] = NAN_PAYLOAD
    for i, src in enumerate((a, da.from_array(a, chunks=3))):
        for storage in ("internal", "external"):
            path = tmp_path / f"e{i}{storage}.jnrrd"
            jnrrd.write(path, src, tile=(4, 4), sparse=True, storage=storage)
            np.testing.assert_array_equal(_bits(jnrrd.read(path)[0]), _bits(a))


def test_sparse_bfloat16_nan_payload_is_stored(tmp_path):
    ml = pytest.importorskip("ml_dtypes")
    words = np.full((8, 4), 0x7FC0, np.uint16)
    words[4:, :] = 0x7FC1
    a = words.view(ml.bfloat16)
    jnrrd.write(tmp_path / "b.jnrrd", a, tile=(4, 4), sparse=True, padding_value=None)
    header = jnrrd.read_header(tmp_path / "b.jnrrd")
    assert header["tile:offset_table"][0] is None
    assert header["tile:offset_table"][1] is not None
    back = jnrrd.read(tmp_path / "b.jnrrd")[0]
    np.testing.assert_array_equal(_bits(back), _bits(a))


def test_bfloat16_fractional_padding_value_reads_back(tmp_path):
    ml = pytest.importorskip("ml_dtypes")
    a = np.full((8, 4), 0.5, ml.bfloat16)
    a[4:, :] = 1.5
    jnrrd.write(tmp_path / "b.jnrrd", a, tile=(4, 4), sparse=True, padding_value=0.5)
    header = jnrrd.read_header(tmp_path / "b.jnrrd")
    assert header["tile:padding_value"] == 0.5
    assert header["tile:offset_table"][0] is None
    back = jnrrd.read(tmp_path / "b.jnrrd")[0]
    np.testing.assert_array_equal(_bits(back), _bits(a))



SPECIAL_F32 = [0x00000000, 0x80000000, 0x7FC00000, 0xFFC00000, 0x7FC00001, 0x7F800001,
               0x3F800000]


@given(words=st.lists(st.sampled_from(SPECIAL_F32), min_size=64, max_size=64),
       tile_words=st.lists(st.sampled_from(SPECIAL_F32), min_size=4, max_size=4),
       padding=st.sampled_from([0.0, -0.0, None, 1.0]))
def test_sparse_write_reads_back_bit_exact(words, tile_words, padding):
    a = np.array(words, dtype=np.uint32).reshape(8, 8).view(np.float32)
    for k, w in enumerate(tile_words):  # whole tiles of one special value: sparse candidates
        a[4 * (k % 2):4 * (k % 2) + 4, 4 * (k // 2):4 * (k // 2) + 4] = (
            np.uint32(w).reshape(1).view(np.float32)[0])
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "h.jnrrd"
        jnrrd.write(path, a, tile=(4, 4), sparse=True, padding_value=padding)
        np.testing.assert_array_equal(_bits(jnrrd.read(path)[0]), _bits(a))
