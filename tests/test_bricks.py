"""Bricks: cached tiles of a stored level at fixed places in one map (jnrrd/engine/bricks.py).

Bricks are off unless ``JNRRD_CACHE_BRICKS=1`` (set for every test here; off, the cache keeps
plain arrays: tests/test_tile_cache.py) and exist only where the system reserves unreserved
maps (Linux, not under ``vm.overcommit_memory=2``; not in the simulated platforms of
tests/conftest.py). Tiles of 16³ uint16 (8 KiB, two pages) go to bricks; every read is
compared with the array that was written, with bricks and without them (``Bricks.create``
made to refuse). Resident memory is read from ``/proc/self/pagemap``. No timings here
(benchmarks/viewer.py).
"""

from __future__ import annotations

import mmap

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from thread_runner import run_threads

import jnrrd
from jnrrd import _platform
from jnrrd.engine import bricks as bricks_mod
from jnrrd.engine.bricks import Bricks
from jnrrd.engine.cache import BRICKS_SETTING, TileCache
from jnrrd.tiling.grid import AxisSel, TileGrid

needs_bricks = pytest.mark.skipif(
    _platform.reserve_anonymous(1 << 20) is None,
    reason="this system (or simulated system) reserves no anonymous maps: no bricks")
pytestmark = [needs_bricks]


@pytest.fixture(autouse=True)
def bricks_on(monkeypatch):
    monkeypatch.setenv(BRICKS_SETTING, "1")

TILE = 16
TILE_BYTES = TILE**3 * 2  # 8 KiB: whole pages


@pytest.fixture(scope="module")
def data() -> np.ndarray:
    rng = np.random.default_rng(1818)
    return np.asfortranarray(rng.integers(0, 60000, size=(40, 48, 36), dtype=np.uint16))


@pytest.fixture(scope="module", params=["pad", "variable"])
def path(request, tmp_path_factory, data):
    p = tmp_path_factory.mktemp("bricks") / f"{request.param}.jnrrd"
    jnrrd.write(p, data, tile=TILE, compression="zstd", levels=2, edge=request.param)
    return p


@pytest.fixture(params=[True, False], ids=["bricks", "no-bricks"])
def use_bricks(request, monkeypatch):
    if not request.param:
        monkeypatch.setattr(bricks_mod.Bricks, "create", classmethod(lambda cls, g, d: None))
    return request.param


def _boxes(shape, count, seed):
    """Random basic selections: slices of any step (reversed too) and integers."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        key = []
        for n in shape:
            kind = rng.integers(0, 6)
            a, b = sorted(int(v) for v in rng.integers(0, n + 1, 2))
            if kind == 0:
                key.append(int(rng.integers(0, n)))
            elif kind == 1:
                key.append(slice(None))
            elif kind == 2:
                key.append(slice(b - 1 if b else None, a - 1 if a else None, -1))
            elif kind == 3:
                key.append(slice(a, b, int(rng.integers(2, 5))))
            else:
                key.append(slice(a, max(b, a + 1)))
        out.append(tuple(key))
    return out


def _bricks_in_use(vol) -> bool:
    return any(b is not None for b in vol._cache._bricks.values())


def test_cached_reads_equal_the_data(path, data, use_bricks):
    with jnrrd.open(path, cache_bytes=64 << 20) as vol:
        np.testing.assert_array_equal(vol[...], data)  # every tile cached
        assert _bricks_in_use(vol) == use_bricks
        for key in _boxes(data.shape, 300, 5):
            np.testing.assert_array_equal(vol[key], data[key], err_msg=str(key))
        level1 = jnrrd.read(path, level=1)[0]
        np.testing.assert_array_equal(vol.levels[1][...], level1)
        np.testing.assert_array_equal(vol.levels[1][3:17, ::-1, 5], level1[3:17, ::-1, 5])
        np.testing.assert_array_equal(vol.read_tile((1, 2, 0)), data[16:32, 32:48, 0:16])
        assert vol.cache_info().misses == 3 * 3 * 3 + 2 * 2 * 2


def test_whole_tile_reads_skip_the_tile_loop(path, data, monkeypatch):
    """With every tile of a step-1 selection cached, the read copies blocks out of the bricks:
    the per-tile path (the pieces) is not entered."""
    with jnrrd.open(path, cache_bytes=64 << 20) as vol:
        vol[...]
        hits = vol.cache_info().hits

        def refuse(*args, **kwargs):
            raise AssertionError("the per-tile path ran")

        monkeypatch.setattr(TileGrid, "pieces", refuse)
        for key in [(slice(None), slice(None), 20), (5, slice(None), slice(None)),
                    (slice(3, 37), slice(1, 47), slice(2, 35)), (slice(None, None, -1),) * 3,
                    (39, 47, 35)]:
            np.testing.assert_array_equal(vol[key], data[key])
        assert vol.cache_info().hits == hits + 9 + 9 + 27 + 27 + 1
        with pytest.raises(AssertionError, match="per-tile"):
            vol[::2, :, 0]  # a step: the per-tile path


def test_partly_cached_reads_decode_the_rest(path, data, use_bricks):
    with jnrrd.open(path, cache_bytes=64 << 20) as vol:
        np.testing.assert_array_equal(vol[:, :, 3], data[:, :, 3])
        np.testing.assert_array_equal(vol[:20, 10:30, :], data[:20, 10:30, :])
        info = vol.cache_info()
        assert info.tiles == 3 * 3 + 2 * 2 * 3 - 2 * 2 and info.misses == info.tiles


def _resident(start: int, nbytes: int) -> int:
    """Resident bytes of ``[start, start + nbytes)`` of this process (``/proc/self/pagemap``:
    bit 63 of a page's entry says it is in memory)."""
    page = 4096
    first, count = start // page, -(-(start + nbytes) // page) - start // page
    with open("/proc/self/pagemap", "rb") as f:
        f.seek(first * 8)
        entries = np.frombuffer(f.read(count * 8), np.uint64)
    return int(((entries >> np.uint64(63)) & np.uint64(1)).sum()) * page


def _bricks_resident(b: Bricks) -> int:
    return _resident(b._view.__array_interface__["data"][0], len(b._map))


def test_memory_is_the_budget(path, data):
    budget = 6 * TILE_BYTES
    with jnrrd.open(path, cache_bytes=budget) as vol:
        np.testing.assert_array_equal(vol[...], data)
        bricks = vol._cache._bricks[0]
        info = vol.cache_info()
        assert info.bytes == info.tiles * TILE_BYTES <= budget and info.evictions > 0
        assert bricks._present.sum() == info.tiles
        # only the cached tiles' pages are resident, not the 27 tiles read
        assert TILE_BYTES <= _bricks_resident(bricks) <= info.bytes
        if "pad" in str(path):  # every stored tile fills its slot
            assert _bricks_resident(bricks) == info.bytes
        start, size = bricks._view.__array_interface__["data"][0], len(bricks._map)
        vol.close()
    assert _resident(start, size) == 0  # unmapped with the volume: nothing kept


def test_bricks_are_off_by_default(path, data, monkeypatch):
    monkeypatch.delenv(BRICKS_SETTING)
    with jnrrd.open(path, cache_bytes=64 << 20) as vol:
        np.testing.assert_array_equal(vol[...], data)
        assert not _bricks_in_use(vol) and vol.cache_info().tiles == 27


def test_reserving_is_not_allocating():
    """A level far larger than the machine's memory (8 TiB) only reserves address space; a
    ``mmap`` module without ``MAP_NORESERVE`` (Python < 3.13) leaves the kernel's overcommit
    to decide, so there a 2 GiB level."""
    n = 1 << (14 if hasattr(mmap, "MAP_NORESERVE") else 10)
    grid = TileGrid((n,) * 3, (0, 1, 2), (64,) * 3, (0,) * 3)
    b = Bricks.create(grid, np.dtype(np.uint16))
    assert b is not None and b.slot_bytes == 64**3 * 2
    tile = np.full((64,) * 3, 7, np.uint16, order="F")
    where = (n // 64 - 1, 3, n // 64 - 1)
    start = b._view.__array_interface__["data"][0] + grid.index(where) * b.slot_bytes
    b.store(where, tile)
    assert _resident(start, b.slot_bytes) == tile.nbytes
    out = np.empty((1, 64, 64), np.uint16, order="F")
    assert b.copy_region(_sel((n - 64, n - 63), (192, 256), (n - 64, n)), out) == 1
    assert (out == 7).all()
    assert b.copy_region(_sel((0, 1), (0, 1), (0, 1)), out[:1, :1, :1]) == 0  # not present
    b.release(where)
    assert _resident(start, b.slot_bytes) == 0


@pytest.mark.parametrize("grid,dtype,ok", [
    (TileGrid((64, 64), (0, 1), (64, 64), (0, 0)), np.uint8, True),  # 4 KiB: one page
    (TileGrid((64, 64), (0, 1), (32, 32), (0, 0)), np.uint8, False),  # 1 KiB: mostly padding
    (TileGrid((90, 90), (0, 1), (45, 45), (0, 0)), np.float64, True),  # 15.8 KiB in 16 KiB
    (TileGrid((64, 64, 64), (0, 1, 2), (16, 16, 16), (2, 2, 2)), np.uint16, False),  # overlap
    (TileGrid((128, 128, 3), (0, 1), (64, 64), (0, 0)), np.uint16, True),  # an untiled axis
    (TileGrid((64, 64, 3), (0, 1), (32, 32), (0, 0)), np.uint16, False),  # 6 KiB in 8 KiB
    (TileGrid(((1 << 13) + 1, 1 << 13, 1 << 13), (0, 1, 2), (32,) * 3, (0,) * 3), np.uint16,
     False),  # more than 2²⁴ tiles
])
def test_which_levels_get_bricks(grid, dtype, ok):
    assert (Bricks.create(grid, np.dtype(dtype)) is not None) == ok


def test_untiled_axis_and_2d(tmp_path):
    rng = np.random.default_rng(3)
    rgb = rng.integers(0, 255, size=(3, 100, 70), dtype=np.uint8)  # channels first, untiled
    p = tmp_path / "rgb.jnrrd"
    jnrrd.write(p, rgb, header={"kinds": ["RGB-color", "space", "space"]}, tile=(None, 64, 64),
                compression="zstd")
    with jnrrd.open(p, cache_bytes=1 << 20) as vol:
        vol[...]
        assert _bricks_in_use(vol)
        for key in _boxes(rgb.shape, 200, 9):
            np.testing.assert_array_equal(vol[key], rgb[key], err_msg=str(key))


def test_second_chance_for_tiles_read_as_blocks(path, data):
    with jnrrd.open(path, cache_bytes=2 * TILE_BYTES) as vol:
        a, b = (slice(0, 16), slice(0, 16), slice(0, 16)), (slice(16, 32), slice(0, 16),
                                                           slice(0, 16))
        vol[a]
        vol[b]
        np.testing.assert_array_equal(vol[a], data[a])  # a hit through the bricks' copy
        vol[32:40, 0:16, 0:16]  # a third tile: evicts b, which was not read again
        assert sorted(k[1] for k in vol._cache.keys()) == [(0, 0, 0), (2, 0, 0)]
        assert vol.cache_info().evictions == 1


def test_concurrent_readers_with_evictions(path, data):
    budget = 5 * TILE_BYTES
    boxes = _boxes(data.shape, 400, 11)
    with jnrrd.open(path, cache_bytes=budget) as vol:
        def reader(k: int) -> None:
            for key in boxes[k::6]:
                np.testing.assert_array_equal(vol[key], data[key])

        run_threads(reader, 6)
        info = vol.cache_info()
        assert info.bytes <= budget and info.evictions > 0
        assert _bricks_in_use(vol)


def test_handed_out_tiles_are_copies():
    grid = TileGrid((32, 32), (0, 1), (32, 32), (0, 0))
    c = TileCache(1 << 20, {0: (grid, np.dtype(np.float32))})
    tile = np.asfortranarray(np.arange(1024, dtype=np.float32).reshape(32, 32))
    kept = c.put((0, (0, 0)), tile)
    assert not kept.flags.writeable and tile.flags.writeable
    got = c.get((0, (0, 0)))
    assert not got.flags.writeable and not np.shares_memory(got, c._bricks[0]._view)
    np.testing.assert_array_equal(got, tile)
    c.put((1, (0, 0)), tile)  # a level without bricks: kept as it is
    assert np.shares_memory(c.get((1, (0, 0))), tile)
    assert c.info().bytes == 2 * tile.nbytes


@st.composite
def _stored_level(draw, rows: bool = False):
    """A grid (1–4 axes, some untiled, pad or variable edges), its data, which tiles are
    stored in bricks, and a box to read. ``rows``: the first axis tiled by 8 or 16 (rows of 64
    or 128 bytes of float64) and the box covering whole tile rows (``Bricks._gather_rows``)."""
    nd = draw(st.integers(1, 4))
    shape = [draw(st.integers(1, 40)) for _ in range(nd)]
    axes = tuple(a for a in range(nd) if (rows and a == 0) or draw(st.booleans())) or (nd - 1,)
    tile = [draw(st.sampled_from([8, 16] if rows and a == 0 else [1, 2, 4, 8, 16]))
            for a in axes]
    if rows:
        shape[0] = max(shape[0], tile[0])
    edge = draw(st.sampled_from(["pad", "variable"]))
    grid = TileGrid(tuple(shape), axes, tuple(tile), (0,) * len(axes), edge)
    missing = draw(st.sampled_from([0.0, 0.0, 0.02, 0.3]))  # mostly every tile present
    keep = list(np.random.default_rng(draw(st.integers(0, 99))).random(grid.ntiles) >= missing)
    ranges = []
    for n in shape:
        lo = draw(st.integers(0, n - 1))
        ranges.append((lo, draw(st.integers(lo + 1, n))))
    if rows:
        e0 = tile[0]
        lo = draw(st.integers(0, shape[0] // e0 - 1))
        ranges[0] = (lo * e0, draw(st.integers(lo + 1, shape[0] // e0)) * e0)
    return grid, keep, ranges


@given(st.one_of(_stored_level(), _stored_level(rows=True)))
def test_copy_region_property(case):
    grid, keep, ranges = case
    b = Bricks(grid, np.dtype(np.float64), _slot(grid), _anonymous(grid))
    rng = np.random.default_rng(len(keep))
    data = np.asfortranarray(rng.random(grid.shape))
    for index, stored in enumerate(keep):
        if stored:
            coords = grid.coords(index)
            tile = np.full(grid.stored_shape(coords), np.nan, order="F")  # padding: NaN
            tile[grid.valid_in_stored(coords)] = data[grid.valid_region(coords)]
            assert b.fits(coords, tile)
            b.store(coords, tile)
    out = np.full([hi - lo for lo, hi in ranges], -1.0, order="F")
    touched = {grid.index(c) for c in grid.tiles_in_region(tuple(slice(*r) for r in ranges))}
    n = b.copy_region(_sel(*ranges), out)
    if all(keep[i] for i in touched):
        assert n == len(touched)
        np.testing.assert_array_equal(out, data[tuple(slice(*r) for r in ranges)])
    else:
        assert n == 0 and (out == -1).all()


def test_slices_gathered_as_tile_rows(monkeypatch):
    """Slices covering whole tile rows (rows of >= 64 bytes) are one gather of rows, and give
    what the block copies give; other selections take the block copies."""
    grid = TileGrid((96, 70, 45), (0, 1, 2), (32, 32, 16), (0, 0, 0), "pad")
    b = Bricks.create(grid, np.dtype(np.uint16))
    data = np.asfortranarray(
        np.random.default_rng(7).integers(0, 60000, size=grid.shape, dtype=np.uint16))
    for index in range(grid.ntiles):
        coords = grid.coords(index)
        tile = np.zeros(grid.stored_shape(coords), np.uint16, order="F")
        tile[grid.valid_in_stored(coords)] = data[grid.valid_region(coords)]
        b.store(coords, tile)
    blocks = []
    monkeypatch.setattr(np, "copyto", lambda dst, src: blocks.append(dst.__setitem__(..., src)))
    cases = [((0, 96), (33, 34), (0, 45)), ((32, 96), (0, 70), (17, 18)),
             ((0, 32), (5, 69), (3, 44)), ((0, 96), (0, 70), (0, 45)),
             ((10, 11), (0, 70), (0, 45)), ((3, 90), (7, 9), (0, 45))]
    for ranges, gathered in zip(cases, [True] * 4 + [False] * 2, strict=True):
        blocks.clear()
        out = np.full([hi - lo for lo, hi in ranges], 1, np.uint16, order="F")
        assert b.copy_region(_sel(*ranges), out) > 0
        np.testing.assert_array_equal(out, data[tuple(slice(*r) for r in ranges)])
        assert (not blocks) == gathered, ranges
    assert b._rows.dtype.itemsize == 64


def test_a_region_found_present_is_checked_again_after_a_release():
    """Consecutive reads of the same tiles skip the presence check; releasing or clearing a
    tile, or taking its used mark, ends that: the region is then missing (0) or marked
    again."""
    grid = TileGrid((64, 32), (0, 1), (32, 32), (0, 0), "pad")
    b = Bricks(grid, np.dtype(np.float64), _slot(grid), _anonymous(grid))
    data = np.asfortranarray(np.arange(64 * 32, dtype=np.float64).reshape(64, 32))

    def store(coords: tuple[int, ...]) -> None:
        b.store(coords, np.asfortranarray(data[coords[0] * 32:coords[0] * 32 + 32]))

    def read(lo: int) -> int:
        out = np.full((32, 32), -1.0, order="F")
        n = b.copy_region(_sel((lo, lo + 32), (0, 32)), out)
        if n:
            np.testing.assert_array_equal(out, data[lo:lo + 32])
        return n

    store((0, 0))
    store((1, 0))
    assert read(16) == 2 and read(16) == 2  # the second read: the same spans, not checked
    assert b.take_used((0, 0)) and not b.take_used((0, 0))
    assert read(16) == 2 and b.take_used((0, 0))  # marked again
    assert read(16) == 2
    b.release((1, 0))
    assert read(16) == 0
    store((1, 0))
    assert read(16) == 2 and read(16) == 2
    b.clear()
    assert read(16) == 0


def _sel(*ranges: tuple[int, int]) -> tuple[AxisSel, ...]:
    return tuple(AxisSel(lo, 1, hi - lo) for lo, hi in ranges)


def _slot(grid: TileGrid) -> int:
    nbytes = 8 * int(np.prod(grid.max_stored_shape()))
    return -(-nbytes // 4096) * 4096


def _anonymous(grid: TileGrid):
    import mmap

    return mmap.mmap(-1, _slot(grid) * grid.ntiles, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
