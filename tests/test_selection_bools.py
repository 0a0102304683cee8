"""Boolean scalars in a selection follow NumPy: a new axis of length 1 (True) or 0 (False),
never the integer 1 or 0 (issue 19 §4)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jnrrd

KEYS = [
    True,
    False,
    np.True_,
    np.False_,
    np.array(True),
    (0, True),
    (True, 0),
    (0, slice(None), True),
    (slice(None), 0, True),
    (True, True),
    (True, False),
    (Ellipsis, True),
    (True, Ellipsis, -1),
    (np.True_, slice(None, None, -2), 1),
    (False, slice(1, 3)),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bools")
    a = np.arange(6 * 5 * 4, dtype=np.int16).reshape(6, 5, 4)
    tiled, plain = d / "t.jnrrd", d / "p.jnrrd"
    jnrrd.write(tiled, a, tile=(4, 4, 4), levels=2)
    jnrrd.write(plain, a)
    return a, tiled, plain


@pytest.mark.parametrize("key", KEYS, ids=repr)
@pytest.mark.parametrize("order", ["F", "C"])
def test_boolean_scalars_follow_numpy(files, key, order):
    _, tiled, plain = files
    for path in (tiled, plain):
        with jnrrd.open(path, index_order=order) as vol:
            whole = np.asarray(vol)
            got = vol[key]
            want = whole[key]
            assert got.shape == want.shape
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("key", [True, False, (0, True), (Ellipsis, np.True_)], ids=repr)
def test_boolean_scalars_on_a_level_view(files, key):
    _, tiled, _ = files
    with jnrrd.open(tiled) as vol:
        level = vol.levels[1]
        want = np.asarray(level)[key]
        got = level[key]
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_vol_true_is_not_vol_one(files):
    a, tiled, _ = files
    with jnrrd.open(tiled) as vol:
        assert vol[True].shape == (1, 6, 5, 4)
        np.testing.assert_array_equal(vol[True][0], a)
        assert vol[False].shape == (0, 6, 5, 4)


def test_boolean_selection_keeps_index_errors(files):
    _, tiled, _ = files
    with jnrrd.open(tiled) as vol:
        with pytest.raises(IndexError):
            vol[True, 6]
        with pytest.raises(IndexError):
            vol[True, 0, 0, 0, 0]
        with pytest.raises(IndexError):
            vol[True, ..., ...]


def _component(draw, n: int):
    return draw(st.one_of(
        st.integers(-n, n - 1),
        st.builds(slice, st.none() | st.integers(-n - 2, n + 2),
                  st.none() | st.integers(-n - 2, n + 2),
                  st.none() | st.integers(-3, 3).filter(bool)),
    ))


@st.composite
def keys(draw):
    shape = (6, 5, 4)
    parts = [_component(draw, n) for n in shape[: draw(st.integers(0, 3))]]
    for _ in range(draw(st.integers(0, 3))):  # booleans anywhere, any number
        parts.insert(draw(st.integers(0, len(parts))),
                     draw(st.sampled_from([True, False, np.True_, np.False_])))
    if draw(st.booleans()):
        at = draw(st.integers(0, len(parts)))
        parts.insert(at, Ellipsis)
    return tuple(parts)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=keys(), order=st.sampled_from(["F", "C"]))
def test_mixed_selections_match_numpy(files, key, order):
    _, tiled, _ = files
    with jnrrd.open(tiled, index_order=order) as vol:
        whole = np.asarray(vol)
        try:
            want = whole[key]
        except IndexError:
            with pytest.raises(IndexError):
                vol[key]
            return
        got = vol[key]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
