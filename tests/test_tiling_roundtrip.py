"""Tiled volumes: hypothesis round trips, laziness, threads, bounded-memory writes."""

from __future__ import annotations

import os
import threading
import tracemalloc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import jnrrd
from jnrrd.engine import sources
from jnrrd.engine import tiles as tiles_mod
from jnrrd.storage import local as storage_local

QUANTIZE = [
    {"name": "scale_offset", "configuration": {"offset": 0.5, "scale": 10.0}},
    {"name": "cast_value", "configuration": {"data_type": "int16", "out_of_range": "clamp"}},
    {"name": "bytes", "configuration": {"endian": "little"}},
    {"name": "zstd", "configuration": {"level": 1}},
]


@st.composite
def tiled_case(draw):
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 9), min_size=ndim, max_size=ndim)))
    axes = draw(st.lists(st.booleans(), min_size=ndim, max_size=ndim).filter(any))
    tiled = tuple(a for a in range(ndim) if axes[a])
    tile = tuple(draw(st.integers(1, 6)) for _ in tiled)
    overlap = tuple(draw(st.integers(0, min(2, t - 1))) for t in tile)
    edge = draw(st.sampled_from(["pad", "variable"]))
    storage = draw(st.sampled_from(["internal", "internal-chunked", "external"]))
    comp = draw(st.sampled_from([None, "gzip", "zstd", "lz4", "bzip2", "quantize"]))
    dtype = draw(st.sampled_from(["uint8", "int16", ">u2", "float32", "float64"]))
    order = draw(st.sampled_from(["F", "C"]))
    seed = draw(st.integers(0, 2**16))
    return shape, tiled, tile, overlap, edge, storage, comp, dtype, order, seed


def _selection(draw, shape):
    key = []
    for n in shape:
        kind = draw(st.sampled_from(["int", "slice", "all"]))
        if kind == "int":
            key.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            start = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            stop = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            step = draw(st.sampled_from([None, 1, 2, 3, -1, -2]))
            key.append(slice(start, stop, step))
        else:
            key.append(slice(None))
    return tuple(key)


@pytest.mark.slow
@given(case=tiled_case(), data=st.data())
def test_open_slices_equal_numpy(tmp_path_factory, case, data):
    shape, tiled, tile, overlap, edge, storage, comp, dtype, order, seed = case
    rng = np.random.default_rng(seed)
    caller_shape = shape[::-1] if order == "C" else shape
    if comp == "quantize":
        dtype = "float64"
    x = (rng.integers(0, 200, size=caller_shape) / (4 if comp == "quantize" else 1)).astype(dtype)
    ndim = len(shape)
    # tile/overlap arguments follow the caller's axes: map header-order choices onto them
    tile_map = {(ndim - 1 - a if order == "C" else a): t for a, t in zip(tiled, tile)}
    ov_full = [0] * ndim
    for a, o in zip(tiled, overlap):
        ov_full[ndim - 1 - a if order == "C" else a] = o
    path = str(tmp_path_factory.mktemp("rt") / "v.jnrrd")
    kw = {"codecs": QUANTIZE} if comp == "quantize" else {"compression": comp}
    fmt = "chunked" if storage == "internal-chunked" else "contiguous"
    jnrrd.write(path, x, tile=tile_map, overlap=ov_full, edge=edge, index_order=order,
                storage=storage.split("-")[0], tile_format=fmt, **kw)
    tol = 0.05 + 1e-12 if comp == "quantize" else 0
    back, header = jnrrd.read(path, index_order=order)
    assert back.shape == x.shape
    np.testing.assert_allclose(back.astype(float), x.astype(float), atol=tol, rtol=0)
    key = _selection(data.draw, caller_shape)
    with jnrrd.open(path, index_order=order) as vol:
        got = vol[key]
        np.testing.assert_allclose(np.asarray(got, float), np.asarray(x[key], float), atol=tol,
                                   rtol=0)
        assert got.shape == x[key].shape


def _counting(monkeypatch):
    calls = {"tiles": 0, "internal": 0}
    real_decode = tiles_mod.TileDecoder.decode
    real_read = sources.InternalSource.read

    def decode(self, level, coords, *args, **kwargs):
        calls["tiles"] += 1
        return real_decode(self, level, coords, *args, **kwargs)

    def read(self, level, coords, limit):
        calls["internal"] += 1
        return real_read(self, level, coords, limit)

    monkeypatch.setattr(tiles_mod.TileDecoder, "decode", decode)
    monkeypatch.setattr(sources.InternalSource, "read", read)
    return calls


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_reads_decode_only_the_tiles_a_region_touches(tmp_path, monkeypatch, compression):
    x = np.random.default_rng(3).integers(0, 255, size=(256, 256, 256), dtype=np.uint8)
    path = str(tmp_path / "big.jnrrd")
    jnrrd.write(path, x, tile=(32, 32, 32), compression=compression)
    calls = _counting(monkeypatch)
    with jnrrd.open(path) as vol:
        assert calls == {"tiles": 0, "internal": 0}  # opening reads no tile data
        region = vol[40:56, 100:116, 7:23]  # 16³ inside one tile along x and y, one along z
        np.testing.assert_array_equal(region, x[40:56, 100:116, 7:23])
        assert calls["tiles"] == 1 and calls["internal"] == 1
        vol[60:68, 60:68, 60:68]  # straddles 2×2×2 tiles
        assert calls["tiles"] == 1 + 8


@pytest.mark.parametrize("compression", ["zstd", "lz4", "gzip"])
@pytest.mark.parametrize("order", ["F", "C"])
def test_regions_ending_early_in_a_tile_decode_only_its_prefix(tmp_path, monkeypatch,
                                                              compression, order):
    from jnrrd.codecs import compress

    x = np.random.default_rng(4).integers(0, 9, size=(24, 20, 40), dtype=np.int16)
    path = str(tmp_path / "p.jnrrd")
    jnrrd.write(path, x, tile=(8, 8, 16), compression=compression)
    needs = []
    real = compress.decompress_prefix

    def spy(name, data, need, **kw):
        needs.append(need)
        return real(name, data, need, **kw)

    monkeypatch.setattr(tiles_mod, "decompress_prefix", spy)
    with jnrrd.open(path, index_order=order) as vol:
        for key in [(slice(None), slice(None), slice(3, 21)), (5, slice(2, 19), 17),
                    (slice(None), 4, slice(18, 3, -2)), (slice(1, 23, 5), slice(None), 31)]:
            ckey = key if order == "F" else key[::-1]
            want = x[key] if order == "F" else x[key].T
            np.testing.assert_array_equal(vol[ckey], want)
    # last z read per tile: 20 (tile 1: 5 of 16 planes), 17 (2), 18 (3) and 14 (tile 0: 15);
    # 31 reads all of tile 1. gzip streams are decoded whole.
    plane = 8 * 8 * 2
    expected = {5 * plane, 2 * plane, 3 * plane, 15 * plane}
    assert set(needs) == (set() if compression == "gzip" else expected)


def test_prefix_reads_stop_before_a_damaged_tail(tmp_path):
    # one 512 KiB tile: lz4 frames hold 64 KiB blocks, the damage is in the last one
    x = np.random.default_rng(5).integers(0, 9, size=(64, 64, 64), dtype=np.uint16)
    path = tmp_path / "d.jnrrd"
    jnrrd.write(path, x, tile=(64, 64, 64), compression="lz4")
    raw = bytearray(path.read_bytes())
    raw[-40:-12] = b"\xff" * 28
    path.write_bytes(bytes(raw))
    with jnrrd.open(path) as vol:
        np.testing.assert_array_equal(vol[:, :, :4], x[:, :, :4])  # never reaches the tail
        with pytest.raises(jnrrd.JnrrdError):
            vol[:, :, :]


def test_external_reads_open_only_the_touched_files(tmp_path, monkeypatch):
    x = np.arange(64 * 64, dtype=np.uint16).reshape(64, 64)
    path = str(tmp_path / "ext.jnrrd")
    jnrrd.write(path, x, tile=(16, 16), storage="external", compression="lz4")
    opened = []
    real = storage_local.open_resolved

    def spy(p, policy, mode="rb", **kw):
        opened.append(p)
        return real(p, policy, mode, **kw)

    monkeypatch.setattr(storage_local, "open_resolved", spy)
    with jnrrd.open(path) as vol:
        assert opened == []
        np.testing.assert_array_equal(vol[20:30, 36:46], x[20:30, 36:46])
    assert len(opened) == 1


def test_many_threads_read_one_volume(tmp_path):
    rng = np.random.default_rng(5)
    x = rng.integers(0, 60000, size=(96, 80, 64), dtype=np.uint16)
    path = str(tmp_path / "t.jnrrd")
    jnrrd.write(path, x, tile=(16, 16, 16), compression="zstd")
    errors = []
    with jnrrd.open(path) as vol:
        def worker(seed):
            r = np.random.default_rng(seed)
            try:
                for _ in range(30):
                    lo = [int(r.integers(0, n - 1)) for n in x.shape]
                    hi = [int(r.integers(a + 1, n + 1)) for a, n in zip(lo, x.shape)]
                    key = tuple(slice(a, b) for a, b in zip(lo, hi))
                    if not np.array_equal(vol[key], x[key]):
                        errors.append(key)
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []


def test_read_tile_returns_the_stored_extent(tmp_path):
    x = np.arange(10 * 7, dtype=np.int16).reshape(10, 7)
    path = str(tmp_path / "rt.jnrrd")
    jnrrd.write(path, x, tile=(4, 4), overlap=(1, 1), padding_value=-1)
    with jnrrd.open(path) as vol:
        t = vol.read_tile((1, 0))
        assert t.shape == (6, 6)
        np.testing.assert_array_equal(t[1:5, 1:5], x[4:8, 0:4])
        assert (t[:, 0] == -1).all()  # halo above row 0 is padding
        np.testing.assert_array_equal(vol.read_tile((2, 1), core=True), x[8:10, 4:7])
    with jnrrd.open(path, index_order="C") as vol:
        np.testing.assert_array_equal(vol.read_tile((0, 1), core=True), x.T[0:4, 4:8])


def test_volume_read_tile_takes_a_level(tmp_path):
    """docs/api.md#volumes: ``Volume.read_tile(coords, level=0, *, core=False)``."""
    x = np.arange(20 * 12, dtype=np.float32).reshape(20, 12)
    path = str(tmp_path / "lv.jnrrd")
    jnrrd.write(path, x, tile=(4, 4), levels=3)
    with jnrrd.open(path) as vol:
        np.testing.assert_array_equal(vol.read_tile((1, 2)), vol.levels[0].read_tile((1, 2)))
        np.testing.assert_array_equal(vol.read_tile((1, 0), 1), vol.levels[1].read_tile((1, 0)))
        np.testing.assert_array_equal(vol.read_tile((1, 0), level=2, core=True),
                                      vol.levels[2][4:5, 0:3])
        np.testing.assert_array_equal(vol.read_tile((2, 1), level=1, core=True),
                                      vol.levels[1][8:10, 4:6])
        with pytest.raises(IndexError, match="level 3 does not exist"):
            vol.read_tile((0, 0), 3)
        with pytest.raises(TypeError, match="level must be an int"):
            vol.read_tile((0, 0), level="1")


def test_read_tile_on_an_untiled_volume_is_unsupported(tmp_path):
    """Issue 19: read_tile on an untiled volume was an AssertionError."""
    path = str(tmp_path / "flat.jnrrd")
    jnrrd.write(path, np.zeros((3, 4), dtype=np.uint8))
    with jnrrd.open(path) as vol:
        assert not vol.tiled
        for call in (lambda: vol.read_tile((0, 0)), lambda: vol.levels[0].read_tile((0, 0)),
                     lambda: vol.read_tile((0, 0), 0, core=True)):
            with pytest.raises(jnrrd.errors.UnsupportedError, match="flat.jnrrd: read_tile: "
                               "the volume is not tiled"):
                call()


def test_volume_properties(tmp_path):
    x = np.zeros((50, 40, 30), dtype=np.float32)
    path = str(tmp_path / "p.jnrrd")
    jnrrd.write(path, x, tile=(16, 16, 16), levels=2)
    with jnrrd.open(path) as vol:
        assert vol.shape == (50, 40, 30) and vol.ndim == 3 and vol.dtype == np.float32
        assert vol.chunks == (16, 16, 16)
        assert len(vol.levels) == 2 and vol.levels[1].shape == (25, 20, 15)
        assert vol.levels[1].scale == (2, 2, 2)
        assert vol.header["sizes"] == [50, 40, 30]
        assert np.asarray(vol).shape == x.shape
    with jnrrd.open(path, index_order="C") as vol:
        assert vol.shape == (30, 40, 50) and vol.chunks == (16, 16, 16)
        assert vol[1, :, 3].shape == (40,)


@pytest.mark.slow
def test_write_larger_than_the_memory_budget(tmp_path):
    """An 800 MB memmap source is written under a 400 MB traced peak and read back."""
    src = np.lib.format.open_memmap(str(tmp_path / "src.npy"), mode="w+", dtype=np.uint16,
                                    shape=(1024, 1024, 400), fortran_order=True)
    for k in range(0, 400, 50):
        src[:, :, k : k + 50] = (np.arange(k, k + 50, dtype=np.uint16) * 7)[None, None, :]
    src.flush()
    path = str(tmp_path / "big.jnrrd")
    tracemalloc.start()
    try:
        jnrrd.write(path, src, tile=(128, 128, 64), compression="zstd")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 400 * 2**20, peak
    with jnrrd.open(path) as vol:
        for k in range(0, 400, 97):
            np.testing.assert_array_equal(vol[:, 500:520, k : k + 3], src[:, 500:520, k : k + 3])
    assert os.path.getsize(path) < src.nbytes


def test_progress_callback_counts_every_tile(tmp_path):
    seen = []
    jnrrd.write(str(tmp_path / "p.jnrrd"), np.zeros((20, 20), np.uint8), tile=(8, 8),
                levels=2, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (9 + 4, 13)
