"""Large read outputs on kept maps (jnrrd/engine/spare_maps.py): an output of MIN_OUTPUT bytes
or more lies on a map of its own, which goes back to SPARES when the last array using it is
gone, and the next large read writes into it without page faults. A map in use is never
handed out, old contents never show, and every fallback is a plain NumPy array.

MIN_OUTPUT and LAZY_FREE are lowered to 1 MiB here so that small files take the path of large
ones (tests/test_spare_maps_resident.py has the smaller maps kept resident); page faults come
from ``getrusage``. (tests/test_bricks_spares.py covers the bricks' side of SPARES.)
"""

from __future__ import annotations

import gc
import pickle
import resource
import time

import numpy as np
import pytest
from spare_maps_support import lease as _lease

import jnrrd
from jnrrd.engine import spare_maps
from jnrrd.engine.spare_maps import SPARES

MIB = 1 << 20
pytestmark = [
    pytest.mark.skipif(spare_maps._MADV_FREE is None, reason="no MADV_FREE: NumPy's outputs"),
    pytest.mark.usefixtures("fresh_spares")]


@pytest.fixture(autouse=True)
def small_outputs(monkeypatch):
    monkeypatch.setattr(spare_maps, "MIN_OUTPUT", MIB)
    monkeypatch.setattr(spare_maps, "LAZY_FREE", MIB)  # kept lazily freed, as large ones are


def _data(seed: int, shape=(64, 64, 128)) -> np.ndarray:  # 1 MiB of uint16
    rng = np.random.default_rng(seed)
    return np.asfortranarray(rng.integers(0, 60000, size=shape, dtype=np.uint16))


@pytest.fixture(scope="module", params=["tiled", "untiled", "untiled-gzip"])
def files(request, tmp_path_factory):
    """Two files of the same shape, with different contents."""
    out = []
    for seed in (1, 2):
        data = _data(seed)
        path = tmp_path_factory.mktemp("spare") / f"{request.param}-{seed}.jnrrd"
        if request.param == "tiled":
            jnrrd.write(path, data, tile=32, compression="zstd")
        else:
            jnrrd.write(path, data, encoding="gzip" if "gzip" in request.param else "raw")
        out.append((path, data))
    return out


def _leased(arr: np.ndarray) -> bool:
    return _lease(arr) is not None


def _kept(n: int) -> int:
    """``len(SPARES)`` once it is ``n`` (a tiled read's worker thread may drop its last
    reference to the output a moment after the read returned), or after 2 s."""
    for _ in range(200):
        if len(SPARES) == n:
            break
        time.sleep(0.01)
    return len(SPARES)


def test_an_output_goes_back_and_is_reused(files):
    (a, data_a), (b, data_b) = files
    out = jnrrd.read(a)[0]
    np.testing.assert_array_equal(out, data_a)
    assert _leased(out) and out.flags.writeable and out.flags.f_contiguous
    address = out.ctypes.data
    del out
    assert _kept(1) == 1
    again = jnrrd.read(b)[0]
    assert again.ctypes.data == address and len(SPARES) == 0
    np.testing.assert_array_equal(again, data_b)  # nothing of the first file shows


def test_a_map_in_use_is_never_handed_out(files):
    (a, data_a), (b, data_b) = files
    first = jnrrd.read(a)[0]
    view = first[:, 5, :]  # keeps the map in use after ``first`` is gone
    del first
    gc.collect()
    assert len(SPARES) == 0
    second = jnrrd.read(b)[0]
    assert not np.shares_memory(second, view)
    np.testing.assert_array_equal(view, data_a[:, 5, :])
    np.testing.assert_array_equal(second, data_b)
    del view
    assert _kept(1) == 1
    del second
    assert _kept(2) == 2


def test_opened_volumes_and_regions_use_it_too(files):
    (a, data_a), _ = files
    with jnrrd.open(a) as vol:
        whole = vol[...]
        np.testing.assert_array_equal(whole, data_a)
        assert _leased(whole)
        small = vol[:8, :8, :8]
        assert not _leased(small)  # under MIN_OUTPUT: NumPy's memory


def test_outputs_behave_like_numpy_arrays(files):
    (a, data_a), _ = files
    out = jnrrd.read(a)[0]
    assert np.array_equal(pickle.loads(pickle.dumps(out)), data_a)
    out += 1
    np.testing.assert_array_equal(out, data_a + 1)
    out.byteswap(inplace=True)
    np.testing.assert_array_equal(out.byteswap(), data_a + 1)
    assert np.shares_memory(out.copy(order="K"), out) is False


def test_the_second_read_faults_in_no_fresh_pages(files, monkeypatch):
    (a, data_a), _ = files
    monkeypatch.setattr(spare_maps, "_HUGEPAGE", None)  # 4 KiB pages: one fault each

    def faults() -> int:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        out = jnrrd.read(a)[0]
        n = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        np.testing.assert_array_equal(out, data_a)
        return n

    fresh = faults()
    reused = faults()
    assert fresh - reused >= MIB // 4096 * 3 // 4, (fresh, reused)


def test_kept_maps_are_bounded(files, monkeypatch):
    (a, _), _ = files
    monkeypatch.setattr(spare_maps, "SPARE_BYTES", 2 * MIB)
    outs = [jnrrd.read(a)[0] for _ in range(4)]
    maps = [_lease(o)._map for o in outs]
    for i in range(4):  # given back in this order: the oldest kept go first
        outs[i] = None
        _kept(min(i + 1, 2))
    assert len(SPARES) == 2 and SPARES.resident() == 2 * MIB
    assert [m.closed for m in maps] == [True, True, False, False]


def test_a_map_far_larger_than_the_output_is_not_taken(files):
    (a, data_a), _ = files
    big = spare_maps.empty((8 * MIB,), np.uint8)
    del big
    assert len(SPARES) == 1
    out = jnrrd.read(a)[0]  # 1 MiB: an 8 MiB map is more than twice that
    assert len(SPARES) == 1
    np.testing.assert_array_equal(out, data_a)


@pytest.mark.parametrize("why", ["refused", "object dtype", "no MADV_FREE"])
def test_fallbacks_are_numpy_arrays(monkeypatch, why):
    if why == "refused":
        monkeypatch.setattr(spare_maps, "new_map", lambda size, flags: None)
        dtype = np.float64
    elif why == "object dtype":
        dtype = object
    else:
        monkeypatch.setattr(spare_maps, "_MADV_FREE", None)
        dtype = np.float64
    arr = spare_maps.empty((256, 1024), dtype, order="F")
    assert arr.shape == (256, 1024) and arr.dtype == dtype and arr.flags.f_contiguous
    assert not _leased(arr) and arr.flags.owndata


@pytest.mark.parametrize("dtype", ["bfloat16", "record", ">u2"])
def test_every_dtype_keeps_its_type(tmp_path, dtype):
    """The map is bytes viewed as the result's dtype: extension types (ml_dtypes'
    bfloat16), records and byte orders come out as NumPy would make them."""
    import ml_dtypes

    if dtype == "bfloat16":
        dt = np.dtype(ml_dtypes.bfloat16)
    elif dtype == "record":
        dt = np.dtype([("a", "<f4"), ("b", ">i2")])
    else:
        dt = np.dtype(dtype)
    arr = spare_maps.empty((512, 1024), dt, order="F")
    assert _leased(arr) and arr.dtype == dt and arr.flags.f_contiguous
    data = np.asfortranarray(np.arange(512 * 1024).reshape(512, 1024) % 200).astype(dt)
    arr[...] = data
    assert arr.tobytes() == data.tobytes()
    path = tmp_path / "bf16.jnrrd"
    if dtype == "bfloat16":
        jnrrd.write(path, data, tile=128, compression="zstd")
        out = jnrrd.read(path)[0]
        assert _leased(out) and out.dtype == dt
        np.testing.assert_array_equal(out, data)


def test_a_result_dropped_while_the_kept_maps_are_busy_is_given_back():
    """A result may be freed anywhere, even by a garbage collection inside SPARES's own lock:
    its map is then unmapped at once instead of waiting for that lock (no deadlock)."""
    arr = spare_maps.empty((2 * MIB,), np.uint8)
    kept = _lease(arr)._map
    with SPARES._lock:  # as a collection inside put() would be
        del arr
    assert kept.closed and len(SPARES) == 0
    again = spare_maps.empty((2 * MIB,), np.uint8)
    del again
    assert len(SPARES) == 1  # not busy: kept


def test_a_map_larger_than_the_limit_is_not_kept(monkeypatch):
    monkeypatch.setattr(spare_maps, "SPARE_BYTES", 5 * MIB)
    small = [spare_maps.empty((2 * MIB,), np.uint8) for _ in range(2)]
    maps = [_lease(a)._map for a in small]
    del small
    big = spare_maps.empty((6 * MIB,), np.uint8)
    kept = _lease(big)._map
    del big
    assert kept.closed and len(SPARES) == 2 and not any(m.closed for m in maps)


def test_results_outlive_a_clear(files):
    (a, data_a), _ = files
    out = jnrrd.read(a)[0]
    held = spare_maps.empty((2 * MIB,), np.uint8)
    del held
    SPARES.clear()
    np.testing.assert_array_equal(out, data_a)  # its map is the result's, not a kept one
    del out
    assert _kept(1) == 1


def test_bricks_take_no_map_more_than_twice_their_size():
    from jnrrd.engine.bricks import Bricks
    from jnrrd.tiling.grid import TileGrid

    big = spare_maps.empty((8 * MIB,), np.uint8)
    del big
    grid = TileGrid((64, 64, 64), (0, 1, 2), (32, 32, 32), (0, 0, 0))  # 8 tiles of 64 KiB
    b = Bricks.create(grid, np.dtype(np.uint16))
    assert b is not None and len(b._map) == 8 * 64 * 1024 and len(SPARES) == 1


def test_threads_reading_and_dropping_results(files):
    from thread_runner import run_threads

    (a, data_a), (b, data_b) = files

    def reader(k: int) -> None:
        for i in range(6):
            path, data = (a, data_a) if (k + i) % 2 else (b, data_b)
            out = jnrrd.read(path)[0]
            view = out[:, 3]
            del out
            np.testing.assert_array_equal(view, data[:, 3])

    run_threads(reader, 4)
    assert len(SPARES) <= spare_maps.SPARE_MAPS  # bounded (a map dropped while busy: unmapped)
    np.testing.assert_array_equal(jnrrd.read(a)[0], data_a)
