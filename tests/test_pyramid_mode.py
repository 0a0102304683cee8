"""The block-mode kernels against a brute-force count, on every path (pairwise, sorted rows,
children), for integer, float (with NaN) and complex data in C, F and strided layouts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jnrrd.pyramid.blocks import block_max, block_min
from jnrrd.pyramid.mode import block_mode, block_mode_tally


def brute_mode(x: np.ndarray, block: tuple[int, ...]) -> np.ndarray:
    """Most frequent value per block, ties to the smallest; NaNs never count together."""
    level = tuple(n // b for n, b in zip(x.shape, block, strict=True))
    out = np.empty(level, x.dtype)
    for idx in np.ndindex(*level):
        vals = x[tuple(slice(i * b, (i + 1) * b) for i, b in zip(idx, block, strict=True))]
        vals = vals.ravel()
        best, best_n = None, 0
        def key(v):
            return v != v, complex(v).real, complex(v).imag

        for v in sorted(set(vals.tolist()), key=key):
            n = 1 if v != v else int(np.count_nonzero(vals == v))
            if n > best_n:
                best, best_n = v, n
        out[idx] = best
    return out


def brute_count(x: np.ndarray, block: tuple[int, ...], ref: np.ndarray) -> np.ndarray:
    """How many members of each block equal ``ref`` at that block."""
    out = np.zeros(ref.shape, np.int64)
    for idx in np.ndindex(*ref.shape):
        vals = x[tuple(slice(i * b, (i + 1) * b) for i, b in zip(idx, block, strict=True))]
        out[idx] = np.count_nonzero(vals == ref[idx])
    return out


DTYPES = ["uint8", "int16", "uint32", "int64", "float32", "float64", "complex64"]


@st.composite
def cases(draw):
    nd = draw(st.integers(1, 3))
    sub = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    rel = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    block = tuple(s * r for s, r in zip(sub, rel, strict=True))
    shape = tuple(b * draw(st.integers(1, 4)) + draw(st.integers(0, 2)) for b in block)
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    nvals = draw(st.integers(1, 4))
    layout = draw(st.sampled_from(["C", "F", "strided"]))
    nan = dtype.kind in "fc" and draw(st.booleans())
    return shape, block, sub, rel, dtype, nvals, layout, nan, draw(st.integers(0, 2**32 - 1))


def _data(shape, dtype, nvals, layout, nan, seed):
    rng = np.random.default_rng(seed)
    # few values, in runs along the last axis: uniform and mixed blocks both occur
    vals = (rng.integers(-3 if dtype.kind in "ifc" else 0, 9, size=nvals)).astype(dtype)
    if nan:
        vals[0] = np.nan
    pick = rng.integers(0, nvals, size=shape)
    pick = np.where(rng.random(shape) < 0.6, pick[..., :1], pick)
    a = vals[pick]
    if layout == "F":
        a = np.asfortranarray(a)
    elif layout == "strided":
        big = np.zeros(tuple(2 * n for n in shape), dtype)
        big[tuple(slice(None, None, 2) for _ in shape)] = a
        a = big[tuple(slice(None, None, 2) for _ in shape)]
    return a


@given(cases())
def test_block_mode_equals_brute_force(case):
    shape, block, sub, rel, dtype, nvals, layout, nan, seed = case
    a = _data(shape, dtype, nvals, layout, nan, seed)
    expected = brute_mode(a, block)
    np.testing.assert_array_equal(block_mode(a, block), expected)
    lo, hi = block_min(a, block), block_max(a, block)
    np.testing.assert_array_equal(block_mode(a, block, lo, hi), expected)
    children = (rel, (block_min(a, sub), block_max(a, sub)))
    np.testing.assert_array_equal(block_mode(a, block, lo, hi, children=children), expected)
    # the tally of the finer level (uniform and two-valued children need no level-0 reads)
    _, *stats = block_mode_tally(a, sub)
    got, *tally = block_mode_tally(a, block, lo, hi, children=(rel, stats))
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(tally[0], lo)
    np.testing.assert_array_equal(tally[1], hi)
    np.testing.assert_array_equal(tally[2], brute_count(a, block, lo))
    np.testing.assert_array_equal(tally[3], brute_count(a, block, hi))
    # a stats-free tally agrees
    _, *plain = block_mode_tally(a, block)
    for p, t in zip(plain, tally, strict=True):
        np.testing.assert_array_equal(p, t)


@pytest.mark.parametrize("block", [(2, 2, 2), (4, 4, 4), (2, 4, 3)])
def test_mixed_blocks_counted_pairwise_and_sorted(block):
    # every block mixed: ties, majorities and all-distinct blocks side by side
    rng = np.random.default_rng(7)
    a = rng.integers(0, 3 if math.prod(block) > 8 else 4, size=tuple(6 * b for b in block))
    a = a.astype(np.uint16)
    np.testing.assert_array_equal(block_mode(a, block), brute_mode(a, block))
    np.testing.assert_array_equal(block_mode(a.T, block[::-1]), brute_mode(a.T, block[::-1]))


def test_tie_between_uniform_children_goes_to_the_smallest():
    a = np.zeros((4, 2), np.int32)
    a[:2] = 9  # child (0, 0) uniform 9, child (1, 0) uniform 0: a 4-4 tie
    lo, hi = block_min(a, (4, 2)), block_max(a, (4, 2))
    children = ((2, 1), (block_min(a, (2, 2)), block_max(a, (2, 2))))
    assert block_mode(a, (4, 2), lo, hi, children=children).tolist() == [[0]]


@pytest.mark.parametrize("batch", [1, 16, 200])
def test_mixed_blocks_in_small_batches_give_the_same_modes(batch, monkeypatch):
    from jnrrd.pyramid import mode

    rng = np.random.default_rng(11)
    a = rng.integers(0, 3, size=(12, 16, 20)).astype(np.uint16)
    a[:, :8] = 1  # uniform blocks among the mixed ones
    finer = block_mode_tally(a, (2, 2, 2))[1:]
    lo, hi = block_min(a, (4, 4, 4)), block_max(a, (4, 4, 4))
    expected = [brute_mode(a, (2, 2, 2)), brute_mode(a, (4, 4, 4))]
    monkeypatch.setattr(mode, "_BATCH", batch)
    np.testing.assert_array_equal(block_mode(a, (2, 2, 2)), expected[0])
    np.testing.assert_array_equal(block_mode(a, (4, 4, 4)), expected[1])
    got = block_mode_tally(a, (4, 4, 4), lo, hi, children=((2, 2, 2), finer))
    np.testing.assert_array_equal(got[0], expected[1])
    np.testing.assert_array_equal(got[3], brute_count(a, (4, 4, 4), lo))
    np.testing.assert_array_equal(got[4], brute_count(a, (4, 4, 4), hi))
