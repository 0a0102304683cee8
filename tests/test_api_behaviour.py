"""Public API behaviours: options that imply tiling, normalised space, legacy C order."""

from __future__ import annotations

import json

import numpy as np
import pytest

import jnrrd


@pytest.mark.parametrize("option", [
    pytest.param({"storage": "external"}, id="storage"),
    pytest.param({"overlap": 1}, id="overlap"),
    pytest.param({"sparse": True}, id="sparse"),
    pytest.param({"checksum": "crc32"}, id="checksum"),
    pytest.param({"edge": "variable"}, id="edge"),
])
def test_tiling_options_ask_for_tiles(tmp_path, option):
    path = tmp_path / "t.jnrrd"
    a = np.arange(300 * 20, dtype=np.uint16).reshape(300, 20)
    jnrrd.write(path, a, **option)
    h = jnrrd.read_header(path)
    assert h["tile:enabled"] is True and h["tile:sizes"] == [256, 20]  # capped at the axis
    np.testing.assert_array_equal(jnrrd.read(path)[0], a)


@pytest.mark.parametrize("given", ["RAS", "ras", "right-anterior-superior"])
def test_space_is_written_in_its_long_form(tmp_path, given):
    path = tmp_path / "s.jnrrd"
    jnrrd.write(path, np.zeros((2, 2, 2), np.uint8), header={"space": given})
    assert jnrrd.read_header(path)["space"] == "right_anterior_superior"


def _legacy_file(path, a):
    lines = [{"jnrrd": "0004"}, {"type": a.dtype.name}, {"dimension": a.ndim},
             {"sizes": list(a.shape)}, {"endian": "little"}, {"encoding": "raw"}]
    head = b"".join(json.dumps(x).encode() + b"\n" for x in lines) + b"\n"
    path.write_bytes(head + a.astype(a.dtype.newbyteorder("<")).tobytes(order="C"))


def test_legacy_c_order_reads_the_earlier_packages_layout(tmp_path):
    a = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    path = tmp_path / "legacy.jnrrd"
    _legacy_file(path, a)
    data, header = jnrrd.read(path, legacy_c_order=True)
    assert header["sizes"] == [2, 3, 4]
    np.testing.assert_array_equal(data, a)
    with jnrrd.open(path, legacy_c_order=True) as vol:
        assert vol.shape == (2, 3, 4)
        np.testing.assert_array_equal(vol[1, ::-1, 2:], a[1, ::-1, 2:])
    # Without the flag the same bytes are NRRD order (axis 0 fastest): a different array.
    plain, _ = jnrrd.read(path)
    assert plain.shape == (2, 3, 4) and not np.array_equal(plain, a)


def test_legacy_c_order_refuses_tiled_files(tmp_path):
    path = tmp_path / "t.jnrrd"
    jnrrd.write(path, np.zeros((4, 4), np.uint8), tile=2)
    with pytest.raises(jnrrd.UnsupportedError, match="legacy_c_order"):
        jnrrd.open(path, legacy_c_order=True)


def test_dask_array_with_unknown_chunk_sizes_is_refused_clearly(tmp_path):
    da = pytest.importorskip("dask.array")
    x = da.from_array(np.arange(10), chunks=5)
    masked = x[x > 3]  # unknown (NaN) chunk sizes
    with pytest.raises(jnrrd.UnsupportedError, match="compute_chunk_sizes"):
        jnrrd.write(tmp_path / "d.jnrrd", masked)


def test_float64_to_bfloat16_rounds_once(tmp_path):
    """1 + 2^-8 + 2^-30 lies above the midpoint between the bfloat16 neighbours 1 and
    1 + 2^-7: rounding through float32 first would land on the midpoint and round to 1."""
    v = np.array([1 + 2**-8 + 2**-30, 1 + 2**-8, 1 + 3 * 2**-8], dtype=np.float64)
    path = tmp_path / "b.jnrrd"
    jnrrd.write(path, v, header={"type": "bfloat16"})
    got, _ = jnrrd.read(path, bfloat16="float32")
    assert got.tolist() == [1 + 2**-7, 1.0, 1 + 2**-6]
