"""Reading into a caller's array: ``jnrrd.read(..., out=arr)`` and ``vol.read(key, out=arr)``
(docs/api.md, "Reading into your own array"): the same values as without ``out``, written
into ``arr`` (which is returned), nothing else of the result's size allocated, and a clear
error for an array of the wrong shape, dtype or kind."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import jnrrd

SHAPE = (40, 30, 20)


@pytest.fixture(scope="module")
def data() -> np.ndarray:
    rng = np.random.default_rng(30)
    return rng.integers(0, 60000, size=SHAPE, dtype=np.uint16)


WRITES = {
    "raw": {},
    "gzip": {"encoding": "gzip"},
    "zstd": {"encoding": "zstd"},
    "big-endian": {"header": {"endian": "big"}},
    "detached": {"detached": True},
    "tiled": {"tile": 16},
    "tiled-zstd": {"tile": 16, "compression": "zstd", "levels": 2},
    "external": {"tile": 16, "storage": "external"},
}


@pytest.fixture(scope="module", params=sorted(WRITES))
def path(request, tmp_path_factory, data):
    p = tmp_path_factory.mktemp("into") / "v.jnrrd"
    jnrrd.write(p, data, **WRITES[request.param])
    return p


@pytest.mark.slow
@pytest.mark.parametrize("index_order", ["F", "C"])
@pytest.mark.parametrize("layout", ["F", "C", "strided"])
def test_read_into_equals_read(path, data, index_order, layout):
    expected = data if index_order == "F" else data.T
    shape = expected.shape
    if layout == "strided":
        out = np.zeros(shape + (2,), np.uint16)[..., 0]
    else:
        out = np.zeros(shape, np.uint16, order=layout)
    got, header = jnrrd.read(path, index_order=index_order, out=out)
    assert got is out
    np.testing.assert_array_equal(out, expected)
    assert header["sizes"] == list(SHAPE)


BASIC_KEYS = [
    ..., (slice(3, 17), slice(None, None, -2), 5), (7,), (slice(None), 4, slice(2, 19, 3)),
    (slice(None, None, -1),) * 3, (19, 29, 19), (slice(5, 5),),
]


@pytest.mark.parametrize("index_order", ["F", "C"])
def test_vol_read_into_basic_keys(path, data, index_order):
    expected_all = data if index_order == "F" else data.T
    with jnrrd.open(path, index_order=index_order) as vol:
        for key in BASIC_KEYS:
            expected = expected_all[key]
            out = np.full(expected.shape, 7, np.uint16)
            assert vol.read(key, out=out) is out
            np.testing.assert_array_equal(out, expected, err_msg=str(key))
            np.testing.assert_array_equal(vol.read(key), expected)  # no out: vol[key]


def test_vol_read_into_other_keys_and_levels(tmp_path, data):
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, data, tile=16, compression="zstd", levels=2)
    with jnrrd.open(p, cache_bytes=8 << 20) as vol:
        for key in [([1, 5, 9], slice(None), 3), (True, 4), (slice(None), np.arange(30) % 3 == 0)]:
            expected = data[key]
            out = np.empty(expected.shape, np.uint16)
            np.testing.assert_array_equal(vol.read(key, out=out), expected)
        level1 = jnrrd.read(p, level=1)[0]
        out = np.empty(level1.shape, np.uint16)
        assert jnrrd.read(p, level=1, out=out)[0] is out
        np.testing.assert_array_equal(out, level1)
        region = np.empty((5, 7), np.uint16)
        vol.levels[1].read((slice(2, 7), slice(0, 7), 3), out=region)
        np.testing.assert_array_equal(region, level1[2:7, 0:7, 3])
        vol[...]  # every tile cached: the next read copies out of the cache
        out = np.empty(SHAPE, np.uint16, order="C")
        np.testing.assert_array_equal(vol.read(out=out), data)


def test_a_virtual_level_into_out(tmp_path, data):
    p = tmp_path / "virtual.jnrrd"
    jnrrd.write(p, data, tile=16, levels=2, header={"tile:levels_stored": [0]})
    with jnrrd.open(p) as vol:
        expected = vol.levels[1][...]
        out = np.empty(expected.shape, expected.dtype)
        np.testing.assert_array_equal(vol.levels[1].read(out=out), expected)


@pytest.mark.parametrize("kind", ["zstd", "gzip", "tiled-zstd"])
def test_nothing_of_the_results_size_is_allocated(tmp_path, kind):
    """The data decode straight into ``out``: the largest allocation during the read stays
    far below the result's size (NumPy reports its allocations to tracemalloc)."""
    big = (np.arange(128 * 128 * 256) % 65521).astype(np.uint16).reshape(128, 128, 256)
    p = tmp_path / "big.jnrrd"
    jnrrd.write(p, big, **WRITES[kind])
    out = np.empty(big.shape, np.uint16, order="F")
    tracemalloc.start()
    try:
        jnrrd.read(p, out=out)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(out, big)
    assert peak < big.nbytes // 4, peak  # (8 MiB; working memory: input pieces, a tile)


@pytest.mark.slow
@pytest.mark.parametrize("out,error,match", [
    (np.empty((40, 30), np.uint16), jnrrd.JnrrdError, r"out: expected .*shape \(40, 30, 20\)"),
    (np.empty(SHAPE, np.int32), jnrrd.JnrrdError, "dtype uint16"),
    (np.empty(SHAPE[::-1], np.uint16), jnrrd.JnrrdError, "expected"),
    ([[1]], TypeError, "numpy.ndarray"),
])
def test_a_wrong_out_is_refused(path, out, error, match):
    with pytest.raises(error, match=match):
        jnrrd.read(path, out=out)
    with jnrrd.open(path) as vol, pytest.raises(error, match=match):
        vol.read(..., out=out)


def test_a_read_only_out_is_refused(path):
    out = np.empty(SHAPE, np.uint16)
    out.flags.writeable = False
    with pytest.raises(jnrrd.JnrrdError, match="read-only"):
        jnrrd.read(path, out=out)


def test_a_closed_volume_refuses(path):
    vol = jnrrd.open(path)
    vol.close()
    with pytest.raises(jnrrd.JnrrdError, match="closed"):
        vol.read(out=np.empty(SHAPE, np.uint16))


def test_bfloat16_into_out(tmp_path):
    words = np.arange(24, dtype=np.uint16).reshape(2, 3, 4) + 0x3F80
    p = tmp_path / "bf.jnrrd"
    jnrrd.write(p, words, header={"type": "bfloat16"})
    expected = jnrrd.read(p)[0]
    out = np.empty(expected.shape, expected.dtype)
    np.testing.assert_array_equal(jnrrd.read(p, out=out)[0], expected)
