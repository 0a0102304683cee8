"""Volumes like other lazy arrays: orthogonal indexing (``vol.oindex``), NumPy's advanced
indexing with one array index, pickling (re-open by path) and ``py.typed``."""

from __future__ import annotations

import copy
import io
import multiprocessing
import operator
import os
import pickle
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jnrrd
from jnrrd.engine.tiles import TileDecoder

FIXTURE = HealthCheck.function_scoped_fixture  # the module-scoped files are read only
SHAPE = (13, 11, 9)  # tiles of 4: edges that do not divide, 4 x 3 x 3 tiles


def _data(shape: tuple[int, ...] = SHAPE) -> np.ndarray:
    return np.random.default_rng(17).integers(0, 60000, shape, dtype=np.uint16)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("arrays")
    a = _data()
    out = {
        "zstd": d / "zstd.jnrrd", "raw": d / "raw.jnrrd", "untiled": d / "untiled.jnrrd",
        "virtual": d / "virtual.jnrrd", "external": d / "ext.jnrrd",
    }
    jnrrd.write(out["zstd"], a, tile=4, compression="zstd", levels=2)
    jnrrd.write(out["raw"], a, tile=4, levels=2)
    jnrrd.write(out["untiled"], a, encoding="gzip")
    jnrrd.write(out["virtual"], a, tile=4, levels=2, header={"tile:levels_stored": [0]})
    jnrrd.write(out["external"], a, tile=4, compression="gzip", storage="external")
    return out


# -- keys for hypothesis ------------------------------------------------------------------------
def _axis_key(n: int) -> st.SearchStrategy:
    return st.one_of(
        st.integers(-n, n - 1),
        st.builds(slice, st.none() | st.integers(-n - 2, n + 2),
                  st.none() | st.integers(-n - 2, n + 2),
                  st.none() | st.integers(-4, 4).filter(bool)),
        st.lists(st.integers(-n, n - 1), min_size=0, max_size=6),
        st.lists(st.integers(-n, n - 1), min_size=1, max_size=6).map(np.array),
        st.lists(st.booleans(), min_size=n, max_size=n).map(np.array),
    )


def _reference_oindex(a: np.ndarray, key: tuple) -> np.ndarray:
    """``a[np.ix_(...)]`` with int axes dropped: what oindex must return."""
    idx, drop = [], []
    for k, n in zip(key, a.shape, strict=True):
        if isinstance(k, slice):
            idx.append(np.arange(n)[k])
        elif isinstance(k, (int, np.integer)):
            idx.append(np.array([k]))
            drop.append(True)
            continue
        else:
            k = np.asarray(k, dtype=bool if np.asarray(k).dtype == bool else np.intp)
            idx.append(np.flatnonzero(k) if k.dtype == bool else k)
        drop.append(False)
    out = a[np.ix_(*idx)]
    return out[tuple(0 if d else slice(None) for d in drop)]


oindex_keys = st.tuples(*(_axis_key(n) for n in SHAPE))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["zstd", "raw", "untiled", "virtual", "external"])
@pytest.mark.parametrize("order", ["F", "C"])
@settings(max_examples=40, deadline=None, suppress_health_check=[FIXTURE])
@given(key=oindex_keys)
def test_oindex_matches_numpy_ix(files, name, order, key):
    a = _data()
    if order == "C":
        a = a.T
        key = key[::-1]  # each axis keeps its own key
    with jnrrd.open(files[name], index_order=order) as vol:
        got = vol.oindex[key]
    want = _reference_oindex(a, key)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def _one_array_keys() -> st.SearchStrategy:
    """A key with exactly one array index (int list/array of any shape, or a 1-D/2-D mask)."""
    n0, n1, n2 = SHAPE
    arrays = st.one_of(
        st.lists(st.integers(-n1, n1 - 1), min_size=0, max_size=5),
        st.lists(st.integers(-n1, n1 - 1), min_size=4, max_size=4).map(
            lambda v: np.array(v).reshape(2, 2)),
        st.lists(st.booleans(), min_size=n1, max_size=n1).map(np.array),
    )
    other = st.one_of(st.integers(-n0, n0 - 1), st.just(slice(None)),
                      st.builds(slice, st.none() | st.integers(-n0, n0),
                                st.none() | st.integers(-n0, n0),
                                st.sampled_from([None, 2, -1, -3])))
    last = st.one_of(st.integers(-n2, n2 - 1), st.just(slice(None)), st.just(slice(None, None, -2)))
    return st.one_of(
        st.tuples(other, arrays, last),
        st.tuples(other, arrays),
        st.tuples(st.just(Ellipsis), arrays, last),
        st.tuples(arrays.map(lambda k: k if np.asarray(k).dtype != bool else
                             np.resize(k, n0)), other.filter(lambda k: isinstance(k, slice)),
                  last),
    )


@pytest.mark.parametrize("name", ["zstd", "untiled"])
@settings(max_examples=60, deadline=None, suppress_health_check=[FIXTURE])
@given(key=_one_array_keys())
def test_one_array_index_follows_numpy(files, name, key):
    a = _data()
    with jnrrd.open(files[name]) as vol:
        got = vol[key]
    want = a[key]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_one_array_index_examples(files):
    a = _data()
    mask2 = a[:, :, 0] % 3 == 0
    with jnrrd.open(files["zstd"]) as vol:
        for key in [([1, 5, 9], slice(None), 3), (3, slice(None), [1, 5, 8]),
                    (slice(None), np.array([[1, 2], [5, 10]]), 3), (mask2, 4),
                    (Ellipsis, [8, 0, 8]), (True, [2, 2], Ellipsis), (mask2,),
                    (slice(None, None, -2), [], 1)]:
            np.testing.assert_array_equal(vol[key], a[key], err_msg=repr(key))
        np.testing.assert_array_equal(vol.levels[1][[0, 5]], vol.levels[1][...][[0, 5]])
    with jnrrd.open(files["raw"], index_order="C") as vol:
        c = a.T
        for key in [([1, 5, 8], slice(None), 3), (3, slice(None), [1, 12, 5]),
                    (c[:, :, 0] % 2 == 1, slice(None, None, -3)), (Ellipsis, [[0], [12]])]:
            np.testing.assert_array_equal(vol[key], c[key], err_msg=repr(key))


def test_index_errors(files):
    with jnrrd.open(files["zstd"]) as vol:
        with pytest.raises(IndexError, match="oindex"):
            vol[[1, 2], [3, 4]]  # NumPy would pair them pointwise
        with pytest.raises(IndexError, match="out of bounds"):
            vol.oindex[[13]]
        with pytest.raises(IndexError, match="out of bounds"):
            vol[[-14]]
        with pytest.raises(IndexError, match="does not match"):
            vol.oindex[:, np.ones(10, bool)]
        with pytest.raises(IndexError, match="does not match"):
            vol[np.ones((13, 10), bool)]
        with pytest.raises(IndexError, match="integer"):
            vol.oindex[[1.5]]
        with pytest.raises(IndexError, match="1-D"):
            vol.oindex[[[1, 2]]]
        with pytest.raises(IndexError, match="boolean scalar"):
            vol.oindex[True]
        with pytest.raises(IndexError, match="too many"):
            vol.oindex[0, 0, 0, 0]
        with pytest.raises(jnrrd.UnsupportedError, match="newaxis"):
            vol.oindex[None]


# -- only the touched tiles -------------------------------------------------------------------
@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, tuple[int, ...]]]:
    seen: list[tuple[int, tuple[int, ...]]] = []
    real = TileDecoder.decode

    def counting(self, level, coords, *args, **kwargs):
        seen.append((level.index, tuple(coords)))
        return real(self, level, coords, *args, **kwargs)

    monkeypatch.setattr(TileDecoder, "decode", counting)
    return seen


@pytest.mark.parametrize("order", ["F", "C"])
def test_oindex_decodes_only_touched_tiles_once(files, decoded, order):
    a = _data()
    key = ([12, 0, 1, 12], slice(None, None, -5), np.arange(9) == 8)  # tiles (0|3, 0|1|2, 2)
    with jnrrd.open(files["zstd"], index_order=order) as vol:
        if order == "C":
            got = vol.oindex[key[::-1]]
            np.testing.assert_array_equal(got, _reference_oindex(a.T, key[::-1]))
        else:
            np.testing.assert_array_equal(vol.oindex[key], _reference_oindex(a, key))
    # axis 1 with step -5 reads 10, 5, 0: tiles 2, 1, 0
    want = {(0, (t0, t1, 2)) for t0 in (0, 3) for t1 in (0, 1, 2)}
    assert sorted(decoded) == sorted(want)  # each touched tile once, nothing else


def test_array_index_decodes_only_touched_tiles(files, decoded):
    with jnrrd.open(files["zstd"]) as vol:
        vol[[1, 9, 2], :, 3]
        assert sorted(set(decoded)) == sorted(decoded)
        assert {c for _, c in decoded} == {(t0, t1, 0) for t0 in (0, 2) for t1 in range(3)}
        decoded.clear()
        vol.levels[1].oindex[[0, 5], 0]  # level 1 is (6, 5, 4): tiles (0|1, 0, 0)
        assert sorted(decoded) == [(1, (0, 0, 0)), (1, (1, 0, 0))]


def test_sparse_tiles_give_the_padding_value(tmp_path):
    a = np.zeros((16, 8, 8), np.int16)
    a[12:, 5:, :] = 7
    p = tmp_path / "sparse.jnrrd"
    jnrrd.write(p, a, tile=4, compression="zstd", sparse=True)
    with jnrrd.open(p) as vol:
        key = ([0, 15, 13], [7, 1], slice(None, None, 3))
        np.testing.assert_array_equal(vol.oindex[key], _reference_oindex(a, key))


# -- pickling ---------------------------------------------------------------------------------
def test_pickle_reopens_with_the_same_options(files):
    a = _data()
    with jnrrd.open(files["zstd"], index_order="C", max_bytes=1 << 20) as vol:
        back = pickle.loads(pickle.dumps(vol))
        lv = pickle.loads(pickle.dumps(vol.levels[1]))
    with back:
        assert back is not vol and back.index_order == "C" and back.shape == a.T.shape
        np.testing.assert_array_equal(back[...], a.T)
        assert back.reopen == vol.reopen and back.reopen.version == vol.reopen.version
        assert dict(back.reopen.policy)["max_bytes"] == 1 << 20
    assert lv.index == 1 and lv.shape == (4, 5, 6) and lv.volume.levels[1] is lv
    with lv.volume, jnrrd.open(files["zstd"], index_order="C") as vol:
        np.testing.assert_array_equal(lv[...], vol.levels[1][...])
    for name in ("untiled", "external", "virtual"):
        with jnrrd.open(files[name], missing="fill") as vol, \
                pickle.loads(pickle.dumps(vol)) as back:
            assert back.reopen.missing == "fill"
            np.testing.assert_array_equal(back[2:5, ::2, 1], a[2:5, ::2, 1])


def test_pickle_of_a_classic_nrrd(tmp_path):
    a = _data((5, 4, 3))
    p = tmp_path / "a.nrrd"
    jnrrd.write(p, a)
    with jnrrd.open(p) as vol, pickle.loads(pickle.dumps(vol)) as back:
        np.testing.assert_array_equal(back[...], a)


def test_unpickling_a_changed_file_raises(tmp_path):
    p = tmp_path / "a.jnrrd"
    jnrrd.write(p, _data(), tile=4)
    with jnrrd.open(p) as vol:
        blob = pickle.dumps(vol)
        lblob = pickle.dumps(vol.levels[0])
    pickle.loads(blob).close()  # unchanged: fine
    jnrrd.write(p, _data() // 2, tile=4)  # a rewrite replaces the file
    with pytest.raises(jnrrd.DataError, match="changed"):
        pickle.loads(blob)
    with pytest.raises(jnrrd.DataError, match="changed"):
        pickle.loads(lblob)
    os.remove(p)
    with pytest.raises(jnrrd.DataError, match="no longer exists"):
        pickle.loads(blob)


def test_pickle_refuses_file_objects_and_closed_volumes(files):
    with open(files["zstd"], "rb") as f, jnrrd.open(f) as vol:
        with pytest.raises(TypeError, match=r"by path.*jnrrd\.open\(path\)"):
            pickle.dumps(vol)
        with pytest.raises(TypeError, match="file object"):
            copy.deepcopy(vol.levels[1])
    with jnrrd.open(io.BytesIO(files["zstd"].read_bytes())) as vol:
        with pytest.raises(TypeError, match="file object"):
            pickle.dumps(vol)
    vol = jnrrd.open(files["zstd"])
    vol.close()
    assert vol.closed
    with pytest.raises(ValueError, match="closed"):
        pickle.dumps(vol)
    with pytest.raises(ValueError, match="closed"):
        pickle.dumps(vol.levels[1])


def test_copy_and_deepcopy_are_independent_volumes(files):
    a = _data()
    with jnrrd.open(files["zstd"]) as vol:
        for c in (copy.copy(vol), copy.deepcopy(vol)):
            assert c is not vol and c.reopen == vol.reopen
            c.close()
            np.testing.assert_array_equal(vol[1:3], a[1:3])  # the original stays open
        lv = copy.deepcopy(vol.levels[1])
        with lv.volume:
            assert lv is not vol.levels[1] and lv.index == 1 and lv.volume is not vol
            np.testing.assert_array_equal(lv[...], vol.levels[1][...])


def test_pickled_volume_in_a_spawned_process(files):
    a = _data()
    ctx = multiprocessing.get_context("spawn")
    t0 = time.perf_counter()
    with jnrrd.open(files["zstd"], index_order="C") as vol, ctx.Pool(1) as pool:
        got = pool.apply(operator.getitem, (vol, (slice(2, 7), 3)))
        level = pool.apply(np.asarray, (vol.levels[1],))
        np.testing.assert_array_equal(level, vol.levels[1][...])
    np.testing.assert_array_equal(got, a.T[2:7, 3])
    assert time.perf_counter() - t0 < 20


# -- typing -----------------------------------------------------------------------------------
def test_package_is_typed():
    assert (Path(jnrrd.__file__).parent / "py.typed").is_file()


def test_ecosystem_example_runs(tmp_path, monkeypatch):
    text = (Path(__file__).resolve().parents[1] / "docs" / "ecosystem.md").read_text()
    section = text.split("## Volumes as lazy arrays")[1].split("\n## ")[0]
    (block,) = section.split("```python\n")[1:]
    monkeypatch.chdir(tmp_path)
    exec(compile(block.split("```")[0], "docs/ecosystem.md", "exec"), {"__name__": "example"})


@pytest.mark.parametrize("name", ["zstd", "raw", "untiled", "virtual", "external"])
def test_reads_after_close_raise(files, name):
    """A closed volume says so, in a jnrrd error naming the file, for every way of reading."""
    path = files[name]
    vol = jnrrd.open(path, cache_bytes=1 << 20)
    vol[:2]
    vol.close()
    reads = [lambda: vol[...], lambda: vol.levels[0][1], lambda: vol.levels[0].oindex[[0, 1]],
             lambda: np.asarray(vol.levels[0])]
    if vol.tiled:
        reads += [lambda: vol.read_tile((0, 0, 0)), lambda: vol.levels[0].read_tile((0, 0, 0))]
    for read in reads:
        with pytest.raises(jnrrd.JnrrdError, match=rf"{path.name}.*closed"):
            read()
