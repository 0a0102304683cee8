"""The decoded-tile cache (``jnrrd.open(..., cache_bytes=N)``, jnrrd/engine/cache.py).

Decodes are counted by wrapping ``TileDecoder.decode``; every read is compared with the array
that was written. No timings here (benchmarks/viewer.py measures the viewer case).
"""

from __future__ import annotations

import pickle
import threading
import time

import numpy as np
import pytest
from thread_runner import run_threads

import jnrrd
from jnrrd.engine import tiles as tiles_mod
from jnrrd.engine.cache import TileCache

TILE = 8
TILE_BYTES = TILE**3 * 2  # uint16


@pytest.fixture(scope="module")
def data() -> np.ndarray:
    rng = np.random.default_rng(18)
    return np.asfortranarray(rng.integers(0, 4000, size=(32, 24, 40), dtype=np.uint16))


@pytest.fixture(scope="module")
def zstd_file(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("cache") / "v.jnrrd"
    jnrrd.write(path, data, tile=TILE, compression="zstd", levels=3)
    return path


@pytest.fixture
def decodes(monkeypatch):
    """Counts of decoded stored tiles, by ``(level, coords)``; ``delay`` slows each decode."""
    seen: dict[tuple, int] = {}
    lock = threading.Lock()
    real = tiles_mod.TileDecoder.decode

    def counting(self, level, coords, *args, **kwargs):
        with lock:
            seen[(level.index, tuple(coords))] = seen.get((level.index, tuple(coords)), 0) + 1
        if counting.delay:
            time.sleep(counting.delay)
        return real(self, level, coords, *args, **kwargs)

    counting.delay = 0.0
    monkeypatch.setattr(tiles_mod.TileDecoder, "decode", counting)
    counting.seen = seen
    return counting


def _total(decodes) -> int:
    return sum(decodes.seen.values())


def test_hits_do_not_decode(zstd_file, data, decodes):
    with jnrrd.open(zstd_file, cache_bytes=64 << 20) as vol:
        assert vol.cache_bytes == 64 << 20
        np.testing.assert_array_equal(vol[:, :, 5], data[:, :, 5])
        first = _total(decodes)
        assert first == 4 * 3  # the tiles of one z plane
        for z in range(8):  # the same tile row: every slice is a hit
            np.testing.assert_array_equal(vol[:, :, z], data[:, :, z])
            np.testing.assert_array_equal(vol[3, :, z], data[3, :, z])
        np.testing.assert_array_equal(vol.oindex[[1, 30], :, 7], data[[1, 30], :, 7])
        np.testing.assert_array_equal(vol.read_tile((1, 2, 0)), data[8:16, 16:24, 0:8])
        assert _total(decodes) == first
        info = vol.cache_info()
        assert info.misses == first and info.hits > 0 and info.tiles == first
        assert info.bytes == first * TILE_BYTES
        # a full read decodes only what was not cached yet
        np.testing.assert_array_equal(vol[...], data)
        assert _total(decodes) == 4 * 3 * 5 and max(decodes.seen.values()) == 1


def test_zero_caches_nothing(zstd_file, data, decodes):
    with jnrrd.open(zstd_file, cache_bytes=0) as vol:
        for _ in range(3):
            np.testing.assert_array_equal(vol[:, :, 5], data[:, :, 5])
            vol.read_tile((0, 0, 0))
        assert _total(decodes) == 3 * (12 + 1)
        assert vol.cache_info()[3:] == (0, 0, 0)


def test_default_is_off_for_local_files(zstd_file, data, decodes):
    with jnrrd.open(zstd_file) as vol:
        assert vol.cache_bytes == 0
        vol[:, :, 5]
        vol[:, :, 5]
        assert _total(decodes) == 24


def test_lru_order_and_byte_bound(zstd_file, data, decodes):
    with jnrrd.open(zstd_file, cache_bytes=2 * TILE_BYTES) as vol:
        a, b, c = (0, 0, 0), (1, 0, 0), (2, 0, 0)
        vol.read_tile(a)
        vol.read_tile(b)
        vol.read_tile(a)  # a is now the most recently used
        vol.read_tile(c)  # evicts b, the least recently used
        assert vol._cache.keys() == [(0, a), (0, c)]
        info = vol.cache_info()
        assert info.bytes == 2 * TILE_BYTES and info.evictions == 1
        before = dict(decodes.seen)
        vol.read_tile(a)
        vol.read_tile(c)
        assert decodes.seen == before  # both still cached
        vol.read_tile(b)
        assert decodes.seen[(0, b)] == 2
        # a whole read through a two-tile budget stays within it and stays correct
        np.testing.assert_array_equal(vol[...], data)
        assert vol.cache_info().bytes <= 2 * TILE_BYTES


def test_tile_larger_than_budget_is_not_cached(zstd_file, data, decodes):
    with jnrrd.open(zstd_file, cache_bytes=TILE_BYTES - 1) as vol:
        for _ in range(2):
            np.testing.assert_array_equal(vol[:8, :8, :8], data[:8, :8, :8])
        assert decodes.seen[(0, (0, 0, 0))] == 2
        assert vol.cache_info().tiles == 0


def test_levels_share_the_budget(zstd_file, data, decodes):
    with jnrrd.open(zstd_file, cache_bytes=3 * TILE_BYTES) as vol:
        lv1, lv2 = vol.levels[1], vol.levels[2]
        vol.read_tile((0, 0, 0))
        vol.read_tile((0, 0, 0), 1)
        vol.read_tile((0, 0, 0), 2)
        keys = vol._cache.keys()
        assert {k[0] for k in keys} == {0, 1, 2}
        assert vol.cache_info().bytes <= 3 * TILE_BYTES
        vol.read_tile((1, 0, 0), 1)  # a level-1 tile evicts the level-0 one
        assert vol._cache.keys()[0][0] == 1 and (0, (0, 0, 0)) not in vol._cache.keys()
        full = jnrrd.read(zstd_file, level=1)[0]
        np.testing.assert_array_equal(lv1[...], full)
        np.testing.assert_array_equal(lv2[...], jnrrd.read(zstd_file, level=2)[0])
        assert vol.cache_info().bytes <= 3 * TILE_BYTES


def test_cached_data_cannot_be_changed_through_results(zstd_file, data):
    with jnrrd.open(zstd_file, cache_bytes=1 << 20) as vol:
        t = vol.read_tile((0, 0, 0))
        t[...] = 7  # a copy: the cache keeps the decoded values
        s = vol[:, :, 0]
        s[...] = 9
        np.testing.assert_array_equal(vol.read_tile((0, 0, 0)), data[:8, :8, :8])
        np.testing.assert_array_equal(vol[:, :, 0], data[:, :, 0])
        for key in vol._cache.keys():
            cached = vol._cache.get(key)
            assert not cached.flags.writeable
            with pytest.raises(ValueError):
                cached[(0,) * cached.ndim] = 1


def test_concurrent_readers(zstd_file, data):
    budget = 10 * TILE_BYTES
    rng = np.random.default_rng(7)
    boxes = []
    for _ in range(240):
        lo = [int(rng.integers(0, n - 4)) for n in data.shape]
        hi = [int(rng.integers(a + 1, min(n, a + 12) + 1)) for a, n in zip(lo, data.shape)]
        boxes.append(tuple(slice(a, b) for a, b in zip(lo, hi)))
    peak = [0]
    with jnrrd.open(zstd_file, cache_bytes=budget) as vol:
        def reader(k: int) -> None:
            for box in boxes[k::8]:
                np.testing.assert_array_equal(vol[box], data[box])
                peak[0] = max(peak[0], vol.cache_info().bytes)

        run_threads(reader, 8)
        info = vol.cache_info()
        assert info.bytes <= budget and peak[0] <= budget
        assert info.bytes == info.tiles * TILE_BYTES
        assert info.hits > 0 and info.evictions > 0


def test_concurrent_misses_decode_once(zstd_file, data, decodes):
    decodes.delay = 0.05
    barrier = threading.Barrier(6)
    out: list[np.ndarray] = [None] * 6  # type: ignore[list-item]
    with jnrrd.open(zstd_file, cache_bytes=1 << 20) as vol:
        def reader(k: int) -> None:
            barrier.wait()
            out[k] = vol[2:6, 3:7, 1:5] if k % 2 else vol.read_tile((0, 0, 0))

        threads = [threading.Thread(target=reader, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert decodes.seen == {(0, (0, 0, 0)): 1}
    for k, o in enumerate(out):
        want = data[2:6, 3:7, 1:5] if k % 2 else data[:8, :8, :8]
        np.testing.assert_array_equal(o, want)


@pytest.mark.parametrize("bad,err", [(-1, ValueError), ("1", TypeError), (1.5, TypeError),
                                     (True, TypeError)])
def test_bad_values(zstd_file, bad, err):
    with pytest.raises(err, match="cache_bytes"):
        jnrrd.open(zstd_file, cache_bytes=bad)


def test_pickling_keeps_the_budget(zstd_file, data):
    with jnrrd.open(zstd_file, cache_bytes=1 << 20) as vol:
        vol[:, :, 0]
        back = pickle.loads(pickle.dumps(vol.levels[1]))
        try:
            assert back.volume.cache_bytes == 1 << 20
            assert back.volume.cache_info().tiles == 0  # a cache of its own
            assert back.volume.reopen == vol.reopen
            np.testing.assert_array_equal(back[...], jnrrd.read(zstd_file, level=1)[0])
        finally:
            back.volume.close()
    with jnrrd.open(zstd_file) as plain:
        assert plain.reopen != vol.reopen  # the budget is part of how it was opened
        again = pickle.loads(pickle.dumps(plain))
        assert again.cache_bytes == 0
        again.close()


def test_virtual_levels_use_the_same_cache(tmp_path, data, decodes):
    path = tmp_path / "virtual.jnrrd"
    jnrrd.write(path, data, tile=TILE, compression="zstd", levels=3,
                header={"tile:levels_stored": [0]})
    with jnrrd.open(path) as vol:  # default with virtual levels: 256 MiB
        assert vol.cache_bytes == 256 << 20
        want = jnrrd.read(path, level=1)[0]
        np.testing.assert_array_equal(vol.levels[1][...], want)
        n = _total(decodes)
        np.testing.assert_array_equal(vol.levels[1][...], want)
        assert _total(decodes) == n  # virtual tiles (and level 0's) came from the cache
        assert {k[0] for k in vol._cache.keys()} == {0, 1}
    with jnrrd.open(path, cache_bytes=0) as vol:
        m = _total(decodes)
        np.testing.assert_array_equal(vol.levels[1][...], want)
        n = _total(decodes) - m
        np.testing.assert_array_equal(vol.levels[1][...], want)
        assert n > 0 and _total(decodes) == m + 2 * n  # computed again: nothing cached
        assert vol.cache_info().tiles == 0


def test_raw_internal_and_sparse_tiles_are_not_cached(tmp_path, data):
    raw = tmp_path / "raw.jnrrd"
    jnrrd.write(raw, data, tile=TILE)
    with jnrrd.open(raw, cache_bytes=1 << 20) as vol:
        np.testing.assert_array_equal(vol[:, :, 3], data[:, :, 3])
        assert vol.cache_info().tiles == 0  # read from the memory map: nothing to decode
    sparse = np.zeros((16, 16, 16), np.uint16)
    sparse[8:, 8:, 8:] = 5
    path = tmp_path / "sparse.jnrrd"
    jnrrd.write(path, sparse, tile=TILE, compression="zstd", sparse=True)
    with jnrrd.open(path, cache_bytes=1 << 20) as vol:
        np.testing.assert_array_equal(vol[...], sparse)
        np.testing.assert_array_equal(vol[...], sparse)
        assert vol.cache_info().tiles == 1


def test_external_tiles_are_cached(tmp_path, data, decodes):
    path = tmp_path / "ext.jnrrd"
    jnrrd.write(path, data, tile=TILE, header={"tile:storage": "external",
                                               "tile:pattern": "t/{x}_{y}_{z}.raw"})
    with jnrrd.open(path, cache_bytes=1 << 20) as vol:
        np.testing.assert_array_equal(vol[:, :, 2], data[:, :, 2])
        np.testing.assert_array_equal(vol[:, :, 3], data[:, :, 3])
        assert _total(decodes) == 12 and vol.cache_info().tiles == 12


def test_tile_cache_unit():
    c = TileCache(100)
    a = np.zeros(40, np.uint8)
    assert c.put("a", a) is not a and not c.get("a").flags.writeable
    assert a.flags.writeable  # the caller's array is left alone
    c.put("b", np.zeros(40, np.uint8))
    c.get("a")
    c.put("c", np.zeros(40, np.uint8))
    assert c.keys() == ["a", "c"] and c.info().bytes == 80
    c.put("big", np.zeros(101, np.uint8))
    assert "big" not in c.keys()
    assert c.get_or_load("d", lambda: None) is None and "d" not in c.keys()
    with pytest.raises(KeyError):
        c.get_or_load("e", lambda: {}["boom"])
    assert c.get_or_load("e", lambda: np.ones(10, np.uint8)).sum() == 10  # not poisoned
    c.clear()
    assert c.info().tiles == 0 and TileCache(0).get_or_load("x", lambda: a) is a


def test_a_closed_cache_keeps_nothing_a_late_loader_hands_it():
    """A tile whose decode finishes after its volume was closed is returned, not cached."""
    c = TileCache(100)
    c.put("a", np.zeros(40, np.uint8))
    c.clear(close=True)
    late = c.get_or_load("b", lambda: np.ones(40, np.uint8))
    assert late.sum() == 40 and c.keys() == [] and c.info().bytes == 0
    c.clear()
    c.put("c", np.zeros(40, np.uint8))
    assert c.keys() == []
