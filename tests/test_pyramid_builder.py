"""The streaming PyramidBuilder against whole-volume downsampling (docs/format.md#levels-pyramids,
docs/pyramids.md#methods)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from jnrrd.errors import DataError, HeaderError
from jnrrd.pyramid import METHODS, PyramidBuilder, downsample, level_quality, level_shape
from jnrrd.pyramid.filters import gaussian_radius, lanczos_taps


def _run(builder, a, cuts):
    """Feed ``a`` in slabs ending at ``cuts``; collect pieces per level."""
    pieces = []
    start = 0
    for stop in [*cuts, a.shape[-1]]:
        pieces += builder.feed(a[..., start:stop])
        start = stop
    pieces += builder.finish()
    return pieces


def _assemble(pieces, shapes, dtype):
    out = [np.zeros(s, dtype=dtype) for s in shapes]
    seen = [np.zeros(s, dtype=bool) for s in shapes]
    for level, region, arr in pieces:
        assert arr.shape == tuple(sl.stop - sl.start for sl in region)
        assert not seen[level][region].any(), "a voxel was produced twice"
        out[level][region] = arr
        seen[level][region] = True
    assert all(s.all() for s in seen), "some voxels were never produced"
    return out


def _row_bound(method, scale, block):
    """Level-0 rows one level-voxel row needs (the block, or the filter's reach)."""
    if method == "gaussian":
        return block + 2 * gaussian_radius(scale)
    if method == "lanczos":
        offsets, _ = lanczos_taps(scale)
        return int(offsets[-1] - offsets[0]) + 1
    return block


@st.composite
def builds(draw):
    nd = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 12)) for _ in range(nd - 1)) + (draw(st.integers(1, 40)),)
    nlev = draw(st.integers(1, 4))
    scales = [tuple(draw(st.sampled_from([1, 2, 3, 4, 8])) for _ in range(nd))
              for _ in range(nlev)]
    if draw(st.booleans()):
        scales.insert(0, (1,) * nd)
    method = draw(st.sampled_from(METHODS))
    dtype = np.dtype(draw(st.sampled_from(["uint8", "int16", "uint64", "float32"])))
    cuts = sorted(draw(st.lists(st.integers(0, shape[-1]), max_size=8)))
    return shape, scales, method, dtype, cuts, draw(st.integers(0, 2**32 - 1))


@given(builds())
def test_builder_equals_downsample(case):
    shape, scales, method, dtype, cuts, seed = case
    rng = np.random.default_rng(seed)
    a = (rng.random(shape) * 100).astype(dtype)
    if method == "mode":
        a = (a // 30).astype(dtype)
    b = PyramidBuilder(shape, dtype, scales, method, quality=True)
    got = _assemble(_run(b, a, cuts), [level_shape(shape, s) for s in scales], dtype)
    for level, s in enumerate(scales):
        np.testing.assert_array_equal(got[level], downsample(a, s, method), err_msg=str(s))
    for q, s, lv in zip(b.quality(), scales, got, strict=True):
        ref = level_quality(a, lv, s)
        if ref["psnr"] is None:
            assert q["psnr"] is None
        else:
            assert q["psnr"] == pytest.approx(ref["psnr"], rel=1e-9)
        assert q["rmse"] == pytest.approx(ref["rmse"], rel=1e-9, abs=1e-12)
    assert b.buffered_rows == 0 and all(v == 0 for v in b.buffered_state_rows.values())


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
@settings(max_examples=10)
@given(seed=st.integers(0, 2**32 - 1))
def test_builder_memory_is_bounded_independent_of_depth(method, seed):
    rng = np.random.default_rng(seed)
    shape = (6, 5, 400)
    scales = [(1, 1, 1), (2, 2, 2), (4, 4, 4), (8, 8, 8)]
    a = rng.integers(0, 50, size=shape, dtype=np.uint16)
    b = PyramidBuilder(shape, a.dtype, scales, method, quality=True)
    bound = max(_row_bound(method, 8, 8), _row_bound(method, 4, 4), _row_bound(method, 2, 2))
    start = 0
    pieces = []
    while start < shape[-1]:
        stop = min(shape[-1], start + int(rng.integers(0, 12)))
        pieces += b.feed(a[..., start:stop])
        # between feeds only the rows of one unfinished block row (plus the filter reach)
        assert b.buffered_rows <= bound
        assert all(rows <= 4 for rows in b.buffered_state_rows.values())
        start = stop
    pieces += b.finish()
    assert b.max_buffered_rows <= bound
    got = _assemble(pieces, [level_shape(shape, s) for s in scales], a.dtype)
    np.testing.assert_array_equal(got[3], downsample(a, (8, 8, 8), method))


def test_builder_cascades_from_finer_levels():
    b = PyramidBuilder((16, 16, 16), np.uint16, [(1, 1, 1), (2, 2, 2), (4, 4, 4), (8, 8, 2)],
                       "average")
    sources = {lv.index: lv.source for lv in b._levels}
    assert sources == {0: None, 1: None, 2: 1, 3: 1}
    # float averages are always summed from level 0 (a different order would change bits)
    b = PyramidBuilder((16, 16, 16), np.float32, [(2, 2, 2), (4, 4, 4)], "average")
    assert [lv.source for lv in b._levels] == [None, None]


def test_builder_levels_and_quality_in_scales_order():
    a = np.arange(4 * 6, dtype=np.uint8).reshape(4, 6)
    b = PyramidBuilder(a.shape, a.dtype, [(2, 2), (1, 1)], "max", quality=True)
    pieces = b.feed(a) + b.finish()
    assert {p[0] for p in pieces} == {0, 1}
    q = b.quality()
    assert q[1] == {"rmse": 0.0, "psnr": None}
    assert q[0]["rmse"] > 0


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        pytest.param(lambda b: b.feed(np.zeros((4, 5, 2), np.uint8)), DataError, "shape",
                     id="wrong-shape"),
        pytest.param(lambda b: b.feed(np.zeros((4, 4, 2), np.int8)), DataError, "dtype",
                     id="wrong-dtype"),
        pytest.param(lambda b: b.feed(np.zeros((4, 4, 9), np.uint8)), DataError, "depth",
                     id="too-deep"),
        pytest.param(lambda b: b.finish(), DataError, "received 0 of 8", id="finish-early"),
        pytest.param(lambda b: b.quality(), HeaderError, "quality=False", id="no-quality"),
    ],
)
def test_builder_errors(call, error, match):
    b = PyramidBuilder((4, 4, 8), np.uint8, [(2, 2, 2)], "average")
    with pytest.raises(error, match=match):
        call(b)


def test_builder_rejects_bad_arguments_and_use_after_finish():
    with pytest.raises(HeaderError, match="tile:downsample_method"):
        PyramidBuilder((4, 4), np.uint8, [(2, 2)], "median")
    with pytest.raises(HeaderError, match="tile:level_scales"):
        PyramidBuilder((4, 4), np.uint8, [(2, 2, 2)])
    with pytest.raises(HeaderError, match="at least one"):
        PyramidBuilder((4, 4), np.uint8, [])
    b = PyramidBuilder((4, 4), np.uint8, [(2, 2)], "average", quality=True)
    b.feed(np.zeros((4, 2), np.uint8))
    with pytest.raises(DataError, match="not complete"):
        b.quality()
    b.feed(np.zeros((4, 2), np.uint8))
    b.finish()
    with pytest.raises(DataError, match="finished"):
        b.feed(np.zeros((4, 0), np.uint8))


def test_builder_handles_trailing_rows_and_short_axes():
    # depth 11 with scale 4: rows 8..10 are floor-cropped away; axis 0 (3) shorter than 8
    rng = np.random.default_rng(2)
    a = rng.integers(0, 9, size=(3, 10, 11)).astype(np.int32)
    scales = [(8, 2, 4), (8, 4, 8), (1, 5, 11)]
    for method in METHODS:
        b = PyramidBuilder(a.shape, a.dtype, scales, method)
        got = _assemble(_run(b, a, [1, 2, 3, 7]), [level_shape(a.shape, s) for s in scales],
                        a.dtype)
        for lv, s in zip(got, scales, strict=True):
            np.testing.assert_array_equal(lv, downsample(a, s, method), err_msg=method)
    assert math.prod(level_shape(a.shape, (8, 4, 8))) == 2


@pytest.mark.parametrize("method", METHODS)
def test_rows_computed_in_two_halves_equal_one_pass(method, monkeypatch):
    from jnrrd.pyramid import builder as builder_module

    monkeypatch.setattr(builder_module, "_PARALLEL_VOXELS", 1)
    rng = np.random.default_rng(3)
    shape = (9, 7, 40)
    a = rng.integers(0, 4 if method == "mode" else 900, size=shape).astype(np.uint16)
    scales = [(2, 2, 2), (4, 4, 4), (8, 8, 8)]
    b = PyramidBuilder(shape, a.dtype, scales, method)
    got = _assemble(_run(b, a, [8, 24]), [level_shape(shape, s) for s in scales], a.dtype)
    for level, s in enumerate(scales):
        np.testing.assert_array_equal(got[level], downsample(a, s, method), err_msg=str(s))


@settings(max_examples=60)
@given(shape=st.lists(st.integers(1, 40), min_size=2, max_size=4),
       blocks_=st.lists(st.sampled_from([1, 2, 3, 4, 8]), min_size=4, max_size=4),
       dtype=st.sampled_from(["uint8", "int16", "uint16", "int32", "uint64", "int64"]),
       order=st.sampled_from(["C", "F", "reversed"]), seed=st.integers(0, 2**32 - 1))
def test_integer_sums_in_cache_sized_slices_equal_one_pass(shape, blocks_, dtype, order, seed):
    # Exact sums computed a slice at a time (large inputs) equal the one-pass reduction, for
    # every layout, block, remainder and accumulator (including the split 64-bit one).
    from jnrrd.pyramid import blocks

    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, size=tuple(shape), dtype=dtype, endpoint=True)
    a = np.asfortranarray(a) if order == "F" else a
    a = a[..., ::-1] if order == "reversed" else a
    block = tuple(blocks_[: a.ndim])
    whole = blocks.block_sums(a, block, a.dtype)
    fastest = min(range(a.ndim), key=lambda k: abs(a.strides[k]))
    # the smallest budget that lets some other axis be cut (one block of it per slice)
    limit = min((block[k] * a.nbytes // a.shape[k] for k in range(a.ndim) if k != fastest),
                default=0)
    saved = blocks._CHUNK_BYTES
    try:
        blocks._CHUNK_BYTES = limit
        assume(blocks._chunk_axis(a, block) is not None)
        sliced = blocks.block_sums(a, block, a.dtype)
    finally:
        blocks._CHUNK_BYTES = saved
    assert len(sliced.parts) == len(whole.parts)
    for s, w in zip(sliced.parts, whole.parts, strict=True):
        assert s.dtype == w.dtype and s.shape == w.shape
        np.testing.assert_array_equal(s, w)
    mean = blocks.finish_mean(whole)
    try:
        blocks._CHUNK_BYTES = max(1, whole.parts[0].nbytes // 8)
        sliced_mean = blocks.finish_mean(whole)
    finally:
        blocks._CHUNK_BYTES = saved
    assert sliced_mean.dtype == mean.dtype
    np.testing.assert_array_equal(sliced_mean, mean)


def test_builder_with_sliced_sums_equals_downsample(monkeypatch):
    from jnrrd.pyramid import blocks

    monkeypatch.setattr(blocks, "_CHUNK_BYTES", 512)
    rng = np.random.default_rng(5)
    shape = (67, 45, 40)
    a = np.asfortranarray(rng.integers(0, 65535, size=shape).astype(np.uint16))
    scales = [(1, 1, 1), (2, 2, 2), (4, 4, 4), (8, 8, 8)]
    b = PyramidBuilder(shape, a.dtype, scales, "average")
    got = _assemble(_run(b, a, [8, 24]), [level_shape(shape, s) for s in scales], a.dtype)
    for level, s in enumerate(scales):
        np.testing.assert_array_equal(got[level], downsample(a, s, "average"), err_msg=str(s))
