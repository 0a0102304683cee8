"""Retired bricks' maps kept for the next volume (jnrrd/engine/bricks.py, ``SPARES``).

Closing a volume hands its bricks' maps to the spares with their pages lazily freed
(``MADV_FREE``); the next volume opened takes one instead of a fresh map, so its cached tiles
land on pages already in memory. Every read is compared with the array that was written: a
reused map's old contents never show through. Page faults come from ``getrusage``, lazily
freed bytes from ``/proc/self/smaps``. (Maps under ``LAZY_FREE`` are kept resident instead:
tests/test_spare_maps_resident.py.)
"""

from __future__ import annotations

import resource

import numpy as np
import pytest
from bricks_support import needs_bricks
from spare_maps_support import lazy_free as _lazy_free

import jnrrd
from jnrrd.engine import spare_maps
from jnrrd.engine.bricks import SPARES, Bricks
from jnrrd.tiling.grid import TileGrid

pytestmark = [needs_bricks, pytest.mark.usefixtures("fresh_spares")]

TILE = 32


@pytest.fixture(autouse=True)
def large_maps_only(monkeypatch):
    """These small volumes' maps kept as a large volume's are (lazily freed), and their read
    results on NumPy's memory: the spares hold only the bricks' maps here."""
    monkeypatch.setattr(spare_maps, "LAZY_FREE", 0)
    monkeypatch.setattr(spare_maps, "MIN_OUTPUT", 1 << 62)


PAGES_PER_TILE = TILE**3 * 2 // 4096  # 16


def _volume(tmp_path, name: str, shape: tuple[int, ...], seed: int):
    data = np.asfortranarray(
        np.random.default_rng(seed).integers(0, 60000, size=shape, dtype=np.uint16))
    path = tmp_path / f"{name}.jnrrd"
    jnrrd.write(path, data, tile=TILE, compression="zstd")
    return path, data


def _level_map(vol):
    return vol._cache._bricks[0]._map


def _faults(read) -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    read()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_reopening_reuses_the_map(tmp_path):
    path, data = _volume(tmp_path, "v", (128, 128, 128), 1)
    with jnrrd.open(path, cache_bytes=64 << 20) as vol:
        first = _faults(lambda: np.testing.assert_array_equal(vol[...], data))
        kept = _level_map(vol)
        tiles = vol.cache_info().tiles
        start = np.frombuffer(kept, np.uint8).__array_interface__["data"][0]
    assert tiles == 64 and len(SPARES) == 1
    assert SPARES.resident() == tiles * PAGES_PER_TILE * 4096
    # the pages it held are lazily freed (the kernel marks them in batches: a few may lag)
    assert SPARES.resident() * 3 // 4 <= _lazy_free(start) <= SPARES.resident()
    with jnrrd.open(path, cache_bytes=64 << 20) as vol:
        again = _faults(lambda: np.testing.assert_array_equal(vol[...], data))
        assert _level_map(vol) is kept and len(SPARES) == 0
        np.testing.assert_array_equal(vol[...], data)  # from the reused map's slots
    # the second read faulted in none of the 1024 pages of its cached tiles again
    assert again <= first - tiles * PAGES_PER_TILE * 3 // 4, (first, again)


def test_a_reused_maps_earlier_pages_are_counted(tmp_path):
    """A map reused by a volume that caches little still holds the earlier volume's lazily
    freed pages: when it is retired again, they count against the spares' limit."""
    path, data = _volume(tmp_path, "v", (128, 128, 128), 7)
    full = 64 * PAGES_PER_TILE * 4096
    with jnrrd.open(path, cache_bytes=64 << 20) as vol:
        vol[...]
    assert SPARES.resident() == full
    with jnrrd.open(path, cache_bytes=64 << 20) as vol:
        assert vol[5, 6, 7] == data[5, 6, 7]  # one tile cached in the reused map
        start = np.frombuffer(_level_map(vol), np.uint8).__array_interface__["data"][0]
    assert SPARES.resident() == full
    assert _lazy_free(start) > 60 * PAGES_PER_TILE * 4096  # the earlier tiles' pages
    with jnrrd.open(path, cache_bytes=64 << 20) as vol:
        vol[5, 6, 7]
        vol._cache.clear()  # every page given back (MADV_DONTNEED)
        vol[5, 6, 7]
    assert SPARES.resident() == PAGES_PER_TILE * 4096


def test_old_contents_never_show(tmp_path):
    """A smaller volume in a larger volume's old map: its uncached tiles are decoded, never
    read from the slots the old volume filled."""
    big, _ = _volume(tmp_path, "big", (128, 128, 64), 2)
    small, data = _volume(tmp_path, "small", (96, 64, 96), 3)
    with jnrrd.open(big, cache_bytes=64 << 20) as vol:
        vol[...]
        kept = _level_map(vol)
    with jnrrd.open(small, cache_bytes=64 << 20) as vol:
        np.testing.assert_array_equal(vol[40:70, 5:40, 20:50], data[40:70, 5:40, 20:50])
        assert _level_map(vol) is kept
        info = vol.cache_info()
        np.testing.assert_array_equal(vol[...], data)  # part cached, part decoded
        assert vol.cache_info().misses > info.misses
        np.testing.assert_array_equal(vol[:, 7], data[:, 7])  # all cached


def test_spares_are_bounded(tmp_path, monkeypatch):
    path, data = _volume(tmp_path, "v", (64, 64, 64), 4)
    tile_bytes = PAGES_PER_TILE * 4096
    monkeypatch.setattr(spare_maps, "SPARE_BYTES", 20 * tile_bytes)
    vols = [jnrrd.open(path, cache_bytes=64 << 20) for _ in range(12)]
    maps = []
    for vol in vols:
        np.testing.assert_array_equal(vol[...], data)  # 8 tiles each
        maps.append(_level_map(vol))
    for vol in vols:
        vol.close()
    # 20 tiles' worth: the two newest maps; the older ten were unmapped
    assert len(SPARES) == 2 and SPARES.resident() == 16 * tile_bytes
    assert [m.closed for m in maps] == [True] * 10 + [False] * 2
    monkeypatch.setattr(spare_maps, "SPARE_BYTES", 1 << 40)
    vols = [jnrrd.open(path, cache_bytes=64 << 20) for _ in range(spare_maps.SPARE_MAPS + 3)]
    for vol in vols:
        vol[0, 0, 0]
    for vol in vols:
        vol.close()
    assert len(SPARES) == spare_maps.SPARE_MAPS


@pytest.mark.parametrize("why", ["no MADV_FREE", "nothing cached"])
def test_maps_given_back(tmp_path, monkeypatch, why):
    path, data = _volume(tmp_path, "v", (64, 64, 64), 5)
    if why == "no MADV_FREE":
        monkeypatch.setattr(spare_maps, "_MADV_FREE", None)
    with jnrrd.open(path, cache_bytes=64 << 20) as vol:
        np.testing.assert_array_equal(vol[...], data)
        kept = _level_map(vol)
        if why == "nothing cached":
            vol._cache.clear()
    assert len(SPARES) == 0 and kept.closed


def test_a_closed_volume_caches_nothing(tmp_path):
    path, data = _volume(tmp_path, "v", (64, 64, 64), 6)
    vol = jnrrd.open(path, cache_bytes=64 << 20)
    np.testing.assert_array_equal(vol[...], data)
    vol.close()
    assert vol._cache._bricks == {} and vol.cache_info().tiles == 0
    with pytest.raises(jnrrd.JnrrdError):
        vol[...]
    assert vol.cache_info().tiles == 0 and len(SPARES) == 1


def test_spares_given_back_when_the_system_refuses_a_map(tmp_path, monkeypatch):
    path, data = _volume(tmp_path, "v", (64, 64, 64), 8)
    with jnrrd.open(path, cache_bytes=64 << 20) as vol:
        vol[...]
    assert len(SPARES) == 1
    real, calls = spare_maps.mmap.mmap, []

    def refuse_once(*args, **kwargs):
        calls.append(len(SPARES))
        if len(calls) == 1 or calls[0] == "refuse every time":
            raise OSError(12, "Cannot allocate memory")
        return real(*args, **kwargs)

    monkeypatch.setattr(spare_maps.mmap, "mmap", refuse_once)
    grid = TileGrid((256, 256, 256), (0, 1, 2), (TILE,) * 3, (0, 0, 0))  # larger than the spare
    assert Bricks.create(grid, np.dtype(np.uint16)) is not None
    assert calls == [1, 0] and len(SPARES) == 0
    calls.clear()
    calls.append("refuse every time")
    assert Bricks.create(grid, np.dtype(np.uint16)) is None  # no spares left to give back
    assert calls == ["refuse every time", 0]
