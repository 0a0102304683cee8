"""Downsampling kernels, regions, quality and level geometry (docs/format.md#tile-geometry,
#per-level-geometry, docs/pyramids.md#methods)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.ndimage import gaussian_filter

from jnrrd.errors import DataError, HeaderError, JnrrdError, UnsupportedError
from jnrrd.pyramid import (
    METHODS,
    blocks,
    compute_region,
    downsample,
    level_geometry,
    level_quality,
    level_shape,
    source_region,
)

# --- level shapes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "scale", "expected"),
    [
        pytest.param((512, 512, 512), (2, 2, 2), (256, 256, 256), id="even"),
        pytest.param((5, 7, 3), (2, 3, 4), (2, 2, 1), id="floor-and-clamp"),
        pytest.param((4, 3, 2, 4), (8, 8, 8, 1), (1, 1, 1, 4), id="N<s-and-untiled"),
        pytest.param((1,), (16,), (1,), id="single-voxel"),
    ],
)
def test_level_shape(shape, scale, expected):
    assert level_shape(shape, scale) == expected


@pytest.mark.parametrize(
    ("shape", "scale"),
    [
        pytest.param((4, 4), (2,), id="too-few-scales"),
        pytest.param((4, 4), (2, 0), id="zero-scale"),
        pytest.param((4, 4), (2, 1.5), id="float-scale"),
        pytest.param((4, 4), (True, 1), id="bool-scale"),
        pytest.param((4, 0), (1, 1), id="empty-axis"),
        pytest.param((), (), id="no-axes"),
    ],
)
def test_level_shape_rejects(shape, scale):
    with pytest.raises(HeaderError):
        level_shape(shape, scale)


# --- exact values ----------------------------------------------------------------------------

# a[x, y] = x + 5 y on a 5 x 3 grid (axis 0 fastest, like the header's axes)
GRID = (np.arange(15).reshape(3, 5).T).astype(np.uint8)


@pytest.mark.parametrize(
    ("a", "scale", "method", "expected"),
    [
        # floor-crop drops the trailing 5; 1.5 -> 2 and 3.5 -> 4 (half to even)
        pytest.param(np.array([1, 2, 3, 4, 5], np.uint8), (2,), "average", [2, 4], id="avg-odd"),
        pytest.param(np.array([0, 1, 2, 3], np.uint8), (2,), "average", [0, 2], id="avg-ties"),
        pytest.param(np.array([-1, -2, -3, -4, -1, 0], np.int8), (2,), "average", [-2, -4, 0],
                     id="avg-negative-ties"),
        pytest.param(np.array([1, 1, 2, 2, 2, 1, 9], np.int16), (3,), "average", [1, 2],
                     id="avg-thirds"),
        # blocks x in {0,1} | {2,3}, y in {0,1,2}: means 5.5 -> 6 and 7.5 -> 8
        pytest.param(GRID, (2, 3), "average", [[6], [8]], id="avg-anisotropic"),
        # N < s on axis 0: one voxel over all 5; y block {0, 1}: mean 2 + 2.5 = 4.5 -> 4
        pytest.param(GRID, (8, 2), "average", [[4]], id="avg-N<s"),
        pytest.param(GRID, (2, 3), "max", [[11], [13]], id="max-anisotropic"),
        pytest.param(GRID, (2, 3), "min", [[0], [2]], id="min-anisotropic"),
        pytest.param(GRID, (8, 2), "max", [[9]], id="max-N<s"),
        pytest.param(np.array([3, 1, 1, 3, 5, 5, 2, 7, 4], np.uint8), (4,), "mode", [1, 5],
                     id="mode-tie-smallest"),
        pytest.param(np.array([[2, 9], [9, 2], [7, 7]], np.int32), (2, 2), "mode", [[2]],
                     id="mode-2d-tie"),
        pytest.param(np.array([[2, 9, 9], [9, 1, 1]], np.uint16), (2, 8), "mode", [[9]],
                     id="mode-N<s"),
        pytest.param(np.array([0.5, 1.0, 2.0, 4.0], np.float32), (2,), "average", [0.75, 3.0],
                     id="avg-float"),
        pytest.param(np.array([1.0, np.nan, 2.0, 2.0], np.float64), (2,), "max", [np.nan, 2.0],
                     id="max-nan"),
    ],
)
def test_exact_values(a, scale, method, expected):
    got = downsample(a, scale, method)
    assert got.dtype == a.dtype
    np.testing.assert_array_equal(got, np.array(expected, dtype=a.dtype))


INT_TYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", INT_TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("which", ["min", "max", "max-1", "min+1"])
def test_average_of_constant_is_the_constant(dtype, which):
    info = np.iinfo(dtype)
    value = {"min": info.min, "max": info.max, "max-1": info.max - 1,
             "min+1": info.min + 1}[which]
    a = np.full((6, 5, 9), value, dtype=dtype)
    for scale in [(2, 2, 2), (3, 5, 9), (6, 1, 4), (8, 8, 8)]:
        got = downsample(a, scale, "average")
        assert got.dtype == a.dtype
        assert (got == value).all(), (scale, got)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "bfloat16"])
def test_average_of_constant_float_within_one_ulp(dtype):
    import ml_dtypes

    dt = np.dtype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    eps = float(ml_dtypes.finfo(dt).eps)
    for value in (0.1, -3.3e3, 1e-3, 7.0):
        a = np.full((7, 3, 5), value).astype(dt)
        c = float(a.flat[0])
        ulp = eps * 2.0 ** math.floor(math.log2(abs(c)))
        got = downsample(a, (3, 2, 5), "average")
        assert got.dtype == dt
        assert np.all(np.abs(got.astype(np.float64) - c) <= ulp), (dtype, value, got)


def _exact_average(a: np.ndarray, scale) -> np.ndarray:
    """Python-int reference: exact mean rounded half to even."""
    block = blocks.effective_block(a.shape, tuple(scale))
    level = tuple(max(1, n // s) for n, s in zip(a.shape, scale, strict=True))
    out = np.empty(level, dtype=a.dtype)
    for idx in np.ndindex(*level):
        sl = tuple(slice(i * b, (i + 1) * b) for i, b in zip(idx, block, strict=True))
        vals = [int(v) for v in a[sl].ravel()]
        out[idx] = round(Fraction(sum(vals), len(vals)))  # round() is half to even
    return out


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.int32, np.uint32],
                         ids=lambda t: np.dtype(t).name)
def test_average_wide_integers_match_python_ints(dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(1)
    a = rng.integers(info.min, info.max, size=(7, 6, 5), dtype=dtype, endpoint=True)
    a[:2] = info.max  # sums far beyond 64 bits
    a[2:4, :, 0] = info.min
    for scale in [(2, 2, 2), (3, 3, 5), (7, 2, 1)]:
        np.testing.assert_array_equal(downsample(a, scale, "average"), _exact_average(a, scale))


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.int16],
                         ids=lambda t: np.dtype(t).name)
def test_python_int_fallback_for_huge_blocks(dtype):
    # counts of 2**31 and more leave no exact machine accumulator: Python ints are used
    info = np.iinfo(dtype)
    count = (1 << 31) + 3
    total = np.array([info.max * count, info.min * count + 1, info.max * (count // 2)],
                     dtype=object)
    sums = blocks.Sums((total,), count, np.dtype(dtype))
    got = blocks.finish_mean(sums)
    expected = [round(Fraction(int(t), count)) for t in total]
    assert got.dtype == np.dtype(dtype)
    assert [int(v) for v in got] == expected


def test_accumulator_choice_proves_no_overflow():
    assert blocks._acc_kind(np.dtype(np.uint16), 8) == np.uint32
    assert blocks._acc_kind(np.dtype(np.uint16), 1 << 16) == np.uint64
    assert blocks._acc_kind(np.dtype(np.int32), 8) == np.int64
    assert blocks._acc_kind(np.dtype(np.int64), 8) == "split"
    assert blocks._acc_kind(np.dtype(np.uint64), 1 << 30) == "object"


# --- gaussian and lanczos against independent references -----------------------------------


def _crop(a, scale):
    block = blocks.effective_block(a.shape, tuple(scale))
    level = tuple(max(1, n // s) for n, s in zip(a.shape, scale, strict=True))
    return a[tuple(slice(0, n * b) for n, b in zip(level, block, strict=True))], block, level


def _block_mean_reshape(y, block, level):
    shape = [d for n, b in zip(level, block, strict=True) for d in (n, b)]
    return y.reshape(shape).mean(axis=tuple(range(1, 2 * len(level), 2)))


def _gaussian_reference(a, scale):
    c, block, level = _crop(a, scale)
    sigma = [2 * s / 6 if s > 1 else 0 for s in scale]
    y = gaussian_filter(c.astype(np.float64), sigma, truncate=4.0, mode="nearest")
    return _block_mean_reshape(y, block, level)


def _lanczos_reference(a, scale):
    c, _, level = _crop(a, scale)
    y = c.astype(np.float64)
    for axis, s in enumerate(scale):
        n0 = y.shape[axis]
        rows = []
        for i in range(level[axis]):
            x = (i + 0.5) * s - 0.5
            js = [j for j in range(math.floor(x - 3 * s), math.ceil(x + 3 * s) + 1)
                  if abs(j - x) < 3 * s]
            w = np.array([np.sinc((j - x) / s) * np.sinc((j - x) / (3 * s)) for j in js])
            w /= w.sum()
            idx = np.clip(js, 0, n0 - 1)
            rows.append(np.tensordot(w, np.take(y, idx, axis=axis), axes=(0, axis)))
        y = np.moveaxis(np.array(rows), 0, axis)
    return y


@pytest.mark.parametrize("method", ["gaussian", "lanczos"])
@pytest.mark.parametrize(
    ("shape", "scale"),
    [
        pytest.param((17, 9, 6), (2, 3, 1), id="anisotropic"),
        pytest.param((9, 13), (4, 2), id="2d-odd"),
        pytest.param((5, 12), (8, 3), id="N<s"),
        pytest.param((40,), (8,), id="1d"),
    ],
)
@pytest.mark.parametrize("dtype", [np.float64, np.uint8, np.int16], ids=["f8", "u1", "i2"])
def test_filtered_methods_match_reference(method, shape, scale, dtype):
    rng = np.random.default_rng(3)
    a = (rng.random(shape) * 250).astype(dtype)
    ref = (_gaussian_reference if method == "gaussian" else _lanczos_reference)(a, scale)
    got = downsample(a, scale, method)
    assert got.shape == level_shape(shape, scale) and got.dtype == a.dtype
    if a.dtype.kind == "f":
        np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-9)
    else:
        info = np.iinfo(a.dtype)
        expected = np.clip(np.rint(ref), info.min, info.max)
        assert np.abs(got.astype(np.float64) - expected).max() <= 1


def test_lanczos_clips_integer_overshoot():
    # a step edge rings: Lanczos overshoots below 0 and above 255; integers are clipped
    a = np.zeros(64, np.uint8)
    a[32:] = 255
    ref = _lanczos_reference(a.astype(np.float64), (2,))
    assert ref.min() < 0 and ref.max() > 255
    got = downsample(a, (2,), "lanczos")
    np.testing.assert_array_equal(got, np.clip(np.rint(ref), 0, 255).astype(np.uint8))


def test_gaussian_of_constant_is_constant():
    a = np.full((9, 10, 11), 1234, np.uint16)
    for scale in [(2, 2, 2), (4, 3, 1)]:
        assert (downsample(a, scale, "gaussian") == 1234).all()
        assert (downsample(a, scale, "lanczos") == 1234).all()


# --- mode is label-safe -----------------------------------------------------------------------


@given(
    data=st.data(),
    shape=st.lists(st.integers(1, 9), min_size=1, max_size=3),
    labels=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=6, unique=True),
)
def test_mode_never_introduces_a_label(data, shape, labels):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    a = rng.choice(np.array(labels, dtype=np.uint32), size=tuple(shape))
    scale = tuple(data.draw(st.integers(1, 10)) for _ in shape)
    got = downsample(a, scale, "mode")
    assert set(np.unique(got)) <= set(np.unique(a))
    # and it is the most frequent value, smallest on ties, of each block
    c, block, level = _crop(a, scale)
    for idx in np.ndindex(*level):
        vals, counts = np.unique(c[tuple(slice(i * b, (i + 1) * b) for i, b in
                                         zip(idx, block, strict=True))], return_counts=True)
        assert got[idx] == vals[np.argmax(counts)]


# --- regions ---------------------------------------------------------------------------------


@st.composite
def region_cases(draw):
    nd = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 14)) for _ in range(nd))
    scale = tuple(draw(st.integers(1, 5)) for _ in range(nd))
    level = level_shape(shape, scale)
    region = []
    for n in level:
        a = draw(st.integers(0, n))
        b = draw(st.integers(a, n))
        region.append(slice(a, b))
    method = draw(st.sampled_from(METHODS))
    dtype = draw(st.sampled_from([np.uint8, np.int16, np.int64, np.float32, np.float64]))
    seed = draw(st.integers(0, 2**32 - 1))
    return shape, scale, tuple(region), method, np.dtype(dtype), seed


@given(region_cases())
def test_compute_region_equals_whole_level(case):
    shape, scale, region, method, dtype, seed = case
    rng = np.random.default_rng(seed)
    a = (rng.random(shape) * 200 - (0 if dtype.kind == "u" else 50)).astype(dtype)
    if method == "mode":
        a = (a // 37).astype(dtype)
    src = source_region(shape, scale, method, region)
    reads = []

    def read0(sl):
        reads.append(sl)
        return a[sl]

    got = compute_region(read0, shape, scale, method, region)
    assert reads == [src]
    for sl, n in zip(src, shape, strict=True):
        assert 0 <= sl.start <= sl.stop <= n
    expected = downsample(a, scale, method)[region]
    assert got.dtype == dtype
    # the same float64 operations on the same voxels: bit-identical, even for the filters
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(
    ("method", "region", "expected"),
    [
        pytest.param("average", (slice(2, 4), slice(0, 1)), (slice(4, 8), slice(0, 3)),
                     id="blocks"),
        # radius int(4·σ + 0.5): 3 on axis 0 (σ = 2/3), 4 on axis 1 (σ = 1, clipped to the
        # cropped 6 voxels)
        pytest.param("gaussian", (slice(2, 4), slice(0, 1)), (slice(1, 11), slice(0, 6)),
                     id="gaussian-halo-clipped"),
        # taps at offsets -5..6 (s = 2) and -7..9 (s = 3) from i·s, clamped to [0, 12), [0, 6)
        pytest.param("lanczos", (slice(3, 4), slice(0, 1)), (slice(1, 12), slice(0, 6)),
                     id="lanczos-taps"),
        pytest.param("max", (slice(1, 1), slice(0, 1)), (slice(0, 0), slice(0, 0)),
                     id="empty"),
    ],
)
def test_source_region(method, region, expected):
    # shape (13, 7), scale (2, 3): level (6, 2), cropped level 0 (12, 6)
    assert source_region((13, 7), (2, 3), method, region) == expected


def test_compute_region_errors():
    a = np.zeros((8, 8), np.uint8)
    with pytest.raises(HeaderError, match="step 1"):
        compute_region(lambda sl: a[sl], a.shape, (2, 2), "max", (slice(0, 4, 2), slice(0, 4)))
    with pytest.raises(HeaderError, match="tuple of 2 slices"):
        compute_region(lambda sl: a[sl], a.shape, (2, 2), "max", (slice(0, 4),))
    with pytest.raises(HeaderError, match="tile:downsample_method"):
        compute_region(lambda sl: a[sl], a.shape, (2, 2), "median", (slice(0, 4),) * 2)
    with pytest.raises(DataError, match="returned shape"):
        compute_region(lambda sl: a, a.shape, (2, 2), "max", (slice(0, 1),) * 2)
    with pytest.raises(UnsupportedError):
        downsample(np.zeros(4, bool), (2,))
    with pytest.raises(JnrrdError):
        downsample(np.zeros((4, 4)), (2, 2), "nearest")


# --- quality ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "scale", "dtype"),
    [
        pytest.param((9, 7, 5), (2, 2, 2), np.uint16, id="u2-odd"),
        pytest.param((9, 7, 5), (4, 1, 8), np.int8, id="i1-N<s"),
        pytest.param((12, 10), (3, 2), np.float32, id="f4"),
    ],
)
@pytest.mark.parametrize("method", ["average", "max", "lanczos"])
def test_level_quality_against_numpy(shape, scale, dtype, method):
    rng = np.random.default_rng(5)
    a = (rng.random(shape) * 100).astype(dtype)
    level = downsample(a, scale, method)
    c, block, _ = _crop(a, scale)
    up = level
    for axis, b in enumerate(block):
        up = np.repeat(up, b, axis=axis)
    rmse = math.sqrt(np.mean((c.astype(np.float64) - up.astype(np.float64)) ** 2))
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        peak = float(info.max) - float(info.min)
    else:
        peak = float(c.max()) - float(c.min())
    got = level_quality(a, level, scale)
    assert got["rmse"] == pytest.approx(rmse, rel=1e-12)
    assert got["psnr"] == pytest.approx(20 * math.log10(peak / rmse), rel=1e-12)


def test_level_quality_zero_error_has_null_psnr():
    a = np.full((4, 4), 7, np.uint8)
    assert level_quality(a, downsample(a, (2, 2)), (2, 2)) == {"rmse": 0.0, "psnr": None}
    assert level_quality(a, a, (1, 1)) == {"rmse": 0.0, "psnr": None}
    with pytest.raises(HeaderError, match="expected shape"):
        level_quality(a, a, (2, 2))


# --- geometry --------------------------------------------------------------------------------


def test_level_geometry_maps_centres_onto_block_centres():
    # a rotated, sheared, anisotropic frame: level-L voxel centres must sit on the centre of
    # the level-0 blocks they summarise (cell centring)
    origin = [10.0, -4.0, 2.5]
    dirs = [[0.8, 0.6, 0.0], [-0.3, 0.4, 0.1], [0.05, 0.0, 1.5]]
    scale = (2, 3, 4)
    o_l, d_l = level_geometry(scale, origin, dirs, ["cell", None, "cell"])
    D0, DL = np.array(dirs).T, np.array(d_l).T
    for idx in [(0, 0, 0), (1, 2, 3), (5, 0, 7)]:
        centre_l = np.array(o_l) + DL @ np.array(idx)
        members = [np.array(origin) + D0 @ (np.array(idx) * scale + np.array(off))
                   for off in np.ndindex(*scale)]
        np.testing.assert_allclose(centre_l, np.mean(members, axis=0), atol=1e-12)


def test_level_geometry_node_and_non_spatial_axes():
    o, d = level_geometry((2, 4, 1), [1.0, 2.0], [[1.0, 0.0], None, [0.0, 2.0]],
                          ["node", None, "cell"])
    assert d == [[2.0, 0.0], None, [0.0, 2.0]]
    assert o == [1.0, 2.0]  # node-centred axis 0, non-spatial axis 1, scale 1 on axis 2
    o, d = level_geometry((2, 2), None, [[1.0, 0.0], [0.0, 1.0]])
    assert o is None and d == [[2.0, 0.0], [0.0, 2.0]]
    with pytest.raises(HeaderError, match="centers"):
        level_geometry((2,), [0.0], [[1.0]], ["corner"])
    with pytest.raises(HeaderError, match="space_directions"):
        level_geometry((2, 2), [0.0], [[1.0]])


# --- kernels wider than their axis are folded (same filter, bounded work) ---------------------


@pytest.mark.parametrize("method", ["gaussian", "lanczos"])
@pytest.mark.parametrize(("shape", "scale"), [
    pytest.param((5, 12), (8, 3), id="N<s"),
    pytest.param((4, 4), (64, 1), id="s=64"),
    pytest.param((6, 3), (1024, 2), id="s=1024"),
    pytest.param((3,), (2**12,), id="s=4096"),
])
def test_folded_kernels_match_the_reference(method, shape, scale):
    """Regression for the folding of kernels wider than the axis (a 4×4 virtual level at
    scale 2^26 took 20 s and 4 GB): still the filters of docs/pyramids.md#methods to 1e-9."""
    a = np.random.default_rng(4).random(shape) * 250
    ref = (_gaussian_reference if method == "gaussian" else _lanczos_reference)(a, scale)
    np.testing.assert_allclose(downsample(a, scale, method), ref, rtol=1e-9, atol=1e-9)


def test_gaussian_normalisation_closed_form_matches_the_sum(monkeypatch):
    """Beyond _EXACT_RADIUS the kernel's sum is computed in closed form; at a radius both can
    do they agree to double precision."""
    from jnrrd.pyramid import filters

    for s in (2**15, 2**17):
        sigma, r = filters.gaussian_sigma(s), filters.gaussian_radius(s)
        exact = filters._gaussian_total(sigma, r)
        monkeypatch.setattr(filters, "_EXACT_RADIUS", 0)
        closed = filters._gaussian_total(sigma, r)
        monkeypatch.undo()
        assert abs(closed - exact) <= 1e-12 * exact, (s, closed, exact)


@pytest.mark.parametrize("method", ["gaussian", "lanczos"])
def test_folded_region_is_bit_identical_to_the_whole(method):
    a = np.random.default_rng(8).random((7, 40)) * 100
    scale = (16, 1)
    whole = downsample(a, scale, method)
    for r in [(slice(0, 1), slice(3, 9)), (slice(0, 1), slice(0, 40))]:
        got = compute_region(lambda sl: a[sl], a.shape, scale, method, r)
        np.testing.assert_array_equal(got, whole[r])


def test_folded_gaussian_over_a_long_axis_matches_the_reference():
    """Over 2048 voxels a folded Gaussian (a dense filter) is applied by FFT: a 10^5-voxel
    axis at a scale beyond its length took O(n²), about 40 s."""
    a = np.random.default_rng(6).random((3000, 2)) * 250 - 100
    ref = _gaussian_reference(a, (4096, 1))
    np.testing.assert_allclose(downsample(a, (4096, 1), "gaussian"), ref, rtol=1e-9,
                               atol=1e-9)
