"""Dask arrays in and out on the local (threaded / synchronous) schedulers.

docs/api.md#volumes: ``Volume.to_dask(level)`` chunks are the tiles; ``write`` accepts a Dask array
and gives the NumPy writer's data (exact for average/max/min/mode, 1e-9 relative or ±1 for
gaussian/lanczos); docs/format.md#atomic-writes. Cluster tests live in ``test_dask_cluster.py``.
"""

from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import jnrrd
from jnrrd.integrations import dask as dask_io
from jnrrd.integrations import dask_write

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

METHODS = ("average", "max", "min", "mode", "gaussian", "lanczos")
EXACT = ("average", "max", "min", "mode")


@pytest.fixture(autouse=True)
def _threads():
    with dask.config.set(scheduler="threads"):
        yield
    dask_io.clear_cache()


def _volume(shape=(37, 30, 21), dtype=np.uint16, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.normal(100.0, 30.0, shape).astype(dtype)
    info = np.iinfo(dtype)
    hi = min(int(info.max), 5000)
    # Few distinct values so that mode has real ties and runs.
    return (rng.integers(0, 6, shape) * (hi // 6) + rng.integers(0, 3, shape)).astype(dtype)


def _same_levels(p, q, method, levels=3):
    for k in range(levels):
        a, _ = jnrrd.read(p, level=k)
        b, _ = jnrrd.read(q, level=k)
        assert a.shape == b.shape and a.dtype == b.dtype
        if method in EXACT:
            np.testing.assert_array_equal(a, b, err_msg=f"level {k}")
        elif a.dtype.kind in "iu":
            assert np.abs(a.astype(np.int64) - b.astype(np.int64)).max() <= 1
        else:
            np.testing.assert_allclose(a, b, rtol=1e-9)


def _listing(d):
    return sorted(os.listdir(d))


# --- importing -------------------------------------------------------------------------------


def test_import_jnrrd_does_not_import_dask_or_xarray():
    code = ("import sys, jnrrd; bad = [m for m in ('dask', 'distributed', 'xarray') "
            "if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


# --- reading ---------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("order", ["F", "C"])
@pytest.mark.parametrize(("tile", "opts"), [
    pytest.param((16, 16, 8), {}, id="internal"),
    pytest.param((16, 16, 8), {"storage": "external", "compression": "zstd"}, id="external"),
    pytest.param({0: 16, 2: 8}, {"overlap": 2, "compression": "gzip"}, id="two-axes-overlap"),
    pytest.param((16, 16, 8), {"edge": "variable", "overlap": 1}, id="variable-edge"),
])
def test_to_dask_chunks_are_tile_cores_and_data_matches(tmp_path, order, tile, opts):
    a = _volume()
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, a, tile=tile, levels=2, **opts)
    with jnrrd.open(p, index_order=order) as vol:
        for k in range(2):
            x = vol.levels[k].to_dask()
            assert x.shape == vol.levels[k].shape
            assert x.dtype == vol.dtype
            assert tuple(c[0] for c in x.chunks) == vol.levels[k].chunks
            expect, _ = jnrrd.read(p, level=k, index_order=order)
            np.testing.assert_array_equal(x.compute(), expect)


def test_to_dask_virtual_level(tmp_path):
    a = _volume()
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, a, {"tile:levels_stored": [0]}, tile=(16, 16, 8), levels=3, downsample="max")
    with jnrrd.open(p) as vol:
        assert not vol.levels[2].stored
        x = vol.to_dask(level=2)
        from jnrrd.pyramid import downsample

        expect = downsample(a, (4, 4, 4), "max")
        np.testing.assert_array_equal(x.compute(), expect)


def test_to_dask_untiled_volume_is_cut_in_slabs(tmp_path, monkeypatch):
    monkeypatch.setattr(dask_io, "_UNTILED_CHUNK_BYTES", 37 * 30 * 2 * 4)
    a = _volume()
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, a)
    with jnrrd.open(p) as vol:
        x = vol.to_dask()
    assert x.chunks == ((37,), (30,), (4, 4, 4, 4, 4, 1))
    np.testing.assert_array_equal(x.compute(), a)


def test_to_dask_graph_is_small_and_holds_no_data(tmp_path):
    a = _volume((64, 64, 32))
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, a, tile=16)
    with jnrrd.open(p) as vol:
        x = vol.to_dask()
    graph = dict(x.__dask_graph__())
    assert len(graph) == 4 * 4 * 2
    blob = pickle.dumps(graph)
    assert len(blob) < a.nbytes / 50
    # The volume (file handles, caches) is not in the graph: only path, stamp and policy.
    assert b"Volume" not in blob
    # The unpickled graph alone computes the data (what a worker in another process gets).
    y = da.Array(pickle.loads(blob), x.name, x.chunks, dtype=x.dtype)
    np.testing.assert_array_equal(y.compute(scheduler="sync"), a)


def test_volume_cache_evicts_and_closes(tmp_path, monkeypatch):
    monkeypatch.setattr(dask_io, "_OPEN_VOLUMES", 1)
    arrays = []
    for k in range(3):
        p = tmp_path / f"v{k}.jnrrd"
        a = _volume((20, 20, 10), seed=k)
        jnrrd.write(p, a, tile=8)
        with jnrrd.open(p) as vol:
            arrays.append((vol.to_dask(), a))
    for x, a in arrays * 2:
        np.testing.assert_array_equal(x.compute(), a)
    assert len(dask_io._CACHE) == 1
    entry = next(iter(dask_io._CACHE.values()))
    dask_io.clear_cache()
    assert entry.evicted and entry.users == 0 and not dask_io._CACHE


def test_to_dask_slicing_reads_only_touched_tiles(tmp_path, monkeypatch):
    from jnrrd.engine.tiles import TileDecoder

    a = _volume((64, 64, 32))
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, a, tile=16, compression="zstd")
    calls = []
    original = TileDecoder.decode

    def counting(self, level, coords, *args, **kwargs):
        calls.append(coords)
        return original(self, level, coords, *args, **kwargs)

    monkeypatch.setattr(TileDecoder, "decode", counting)
    with jnrrd.open(p) as vol:
        x = vol.to_dask()[20:30, 0:10, 5]
        np.testing.assert_array_equal(x.compute(), a[20:30, 0:10, 5])
    assert sorted(set(calls)) == [(1, 0, 0)]


def test_to_dask_of_a_file_object_runs_in_process_only(tmp_path):
    a = _volume()
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, a, tile=16)
    with open(p, "rb") as f, jnrrd.open(io.BufferedReader(f)) as vol:
        x = vol.to_dask()
        np.testing.assert_array_equal(x.compute(), a)
        with pytest.raises(jnrrd.UnsupportedError, match="open it by path"):
            pickle.dumps(dict(x.__dask_graph__()))


def test_to_dask_detects_a_rewritten_file(tmp_path):
    a = _volume()
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, a, tile=16)
    with jnrrd.open(p) as vol:
        x = vol.to_dask()
    jnrrd.write(p, a + 1, tile=16)
    with pytest.raises(jnrrd.DataError, match="changed after the Dask graph was built"):
        x.compute()


def test_to_dask_level_out_of_range(tmp_path):
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, _volume(), tile=16)
    with jnrrd.open(p) as vol, pytest.raises(IndexError, match="level 3 does not exist"):
        vol.to_dask(level=3)


def test_to_dask_keeps_policy(tmp_path):
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, _volume(), tile=16)
    with jnrrd.open(p, max_bytes=10) as vol:
        x = vol.to_dask()
    with pytest.raises(jnrrd.UnsupportedError, match="max_bytes"):
        x.compute()


# --- writing ---------------------------------------------------------------------------------

@pytest.mark.parametrize("suffix", [".jnrrd", ".nrrd"])
def test_a_volume_opened_by_path_carries_its_reopener(tmp_path, suffix):
    # The opener hands the volume a picklable, hashable re-opener: the Dask layer re-opens
    # files through it (on workers) without importing jnrrd.api or the engine.
    a = _volume()
    p = tmp_path / f"v{suffix}"
    jnrrd.write(p, a, **({"tile": 16} if suffix == ".jnrrd" else {}))
    with jnrrd.open(p, index_order="C", max_tiles=1000) as vol:
        reopen = vol.reopen
        assert reopen is not None and reopen.path == os.path.abspath(p)
        copy = pickle.loads(pickle.dumps(reopen))
        assert copy == reopen and hash(copy) == hash(reopen)
        with copy() as again:
            assert again.index_order == "C" and again.reopen == reopen
            np.testing.assert_array_equal(again[...], a.T)
    with open(p, "rb") as f, jnrrd.open(f) as vol:
        assert vol.reopen is None
    # the reading side imports neither the opener nor the engine
    assert not any(m.startswith(("jnrrd.api", "jnrrd.engine"))
                   for m in _imported_modules("jnrrd.integrations.dask"))


def _imported_modules(module: str) -> set[str]:
    """The jnrrd modules ``module`` names in its imports (any depth)."""
    import ast
    import importlib

    path = importlib.util.find_spec(module).origin
    out = set()
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = module.rsplit(".", node.level)[0]
            out.add(f"{base}.{node.module}" if node.module else base)
        elif isinstance(node, ast.ImportFrom) and node.module.startswith("jnrrd"):
            out.add(node.module)
    return out



@pytest.mark.slow
@pytest.mark.parametrize("storage", ["internal", "external"])
@pytest.mark.parametrize("method", METHODS)
def test_write_dask_equals_numpy_writer(tmp_path, method, storage):
    a = _volume()
    x = da.from_array(a, chunks=(13, 11, 7))  # not aligned with the tiles
    kw = {"tile": (16, 8, 8), "levels": 3, "downsample": method, "storage": storage,
              "compression": "zstd"}
    p, q = tmp_path / "dask.jnrrd", tmp_path / "numpy.jnrrd"
    jnrrd.write(p, x, **kw)
    jnrrd.write(q, a, **kw)
    _same_levels(p, q, method)
    if storage == "internal" and method in EXACT:
        assert p.read_bytes() == q.read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize(("name", "shape", "dtype", "kw"), [
    pytest.param("overlap-pad", (37, 30, 21), np.uint16,
                 {"tile": (16, 16, 8), "overlap": 3, "padding_value": 7}, id="overlap-pad"),
    pytest.param("overlap-variable", (37, 30, 21), np.int16,
                 {"tile": (16, 16, 8), "overlap": (2, 1, 20), "edge": "variable"},
                 id="overlap-variable-wider-than-tile"),
    pytest.param("two-axes", (37, 30, 21), np.uint8,
                 {"tile": {1: 8, 2: 4}, "levels": [1, 2, 4]}, id="untiled-axis-0"),
    pytest.param("float", (33, 20, 18), np.float32,
                 {"tile": 8, "levels": 3, "compression": "lz4"}, id="float32-average"),
    pytest.param("int64", (20, 20, 20), np.int64,
                 {"tile": 8, "levels": [1, 2, [4, 4, 3]]}, id="int64-per-axis-scales"),
    pytest.param("short-axis", (40, 30, 3), np.uint16,
                 {"tile": (16, 16, 2), "levels": 3, "downsample": "max"},
                 id="axis-shorter-than-scale"),
    pytest.param("stats", (37, 30, 21), np.uint16,
                 {"tile": 16, "levels": 2, "tile_stats": True, "checksum": "crc32", "align": 4096},
                 id="stats-checksum-align"),
    pytest.param("quality", (32, 24, 16), np.uint16,
                 {"tile": 8, "levels": 3, "quality": True}, id="quality"),
    pytest.param("2d", (50, 41), np.uint16, {"tile": 16, "levels": 3, "downsample": "mode"},
                 id="2d-mode"),
])
def test_write_dask_options_equal_numpy_writer(tmp_path, name, shape, dtype, kw):
    a = _volume(shape, dtype)
    x = da.from_array(a, chunks=tuple(max(1, n // 3 + 1) for n in shape))
    p, q = tmp_path / "dask.jnrrd", tmp_path / "numpy.jnrrd"
    jnrrd.write(p, x, **kw)
    jnrrd.write(q, a, **kw)
    assert p.read_bytes() == q.read_bytes()


def test_write_dask_sparse_tiles(tmp_path):
    a = np.zeros((32, 32, 16), np.uint8)
    a[:16, :16, :8] = 5
    x = da.from_array(a, chunks=10)
    for storage in ("internal", "external"):
        p, q = tmp_path / f"d-{storage}.jnrrd", tmp_path / f"n-{storage}.jnrrd"
        jnrrd.write(p, x, tile=16, sparse=True, storage=storage)
        jnrrd.write(q, a, tile=16, sparse=True, storage=storage)
        hp, hq = jnrrd.read_header(p), jnrrd.read_header(q)
        key = "tile:offset_table" if storage == "internal" else "tile:files"
        assert hp[key] == hq[key]
        np.testing.assert_array_equal(jnrrd.read(p)[0], a)


def test_write_dask_c_order(tmp_path):
    a = _volume((21, 30, 37))
    x = da.from_array(a, chunks=(5, 9, 11))
    p, q = tmp_path / "dask.jnrrd", tmp_path / "numpy.jnrrd"
    kw = {"tile": (8, 16, 16), "levels": 2, "index_order": "C"}
    jnrrd.write(p, x, **kw)
    jnrrd.write(q, a, **kw)
    assert p.read_bytes() == q.read_bytes()
    np.testing.assert_array_equal(jnrrd.read(p, index_order="C")[0], a)


def test_write_dask_bfloat16(tmp_path):
    ml = pytest.importorskip("ml_dtypes")
    a = _volume((20, 18, 16), np.float32).astype(ml.bfloat16)
    x = da.from_array(a, chunks=7)
    p, q = tmp_path / "dask.jnrrd", tmp_path / "numpy.jnrrd"
    jnrrd.write(p, x, tile=8, levels=2)
    jnrrd.write(q, a, tile=8, levels=2)
    assert p.read_bytes() == q.read_bytes()


def test_write_dask_runs_on_the_synchronous_scheduler_and_reports_progress(tmp_path):
    a = _volume((32, 32, 16))
    seen = []
    with dask.config.set(scheduler="sync"):
        jnrrd.write(tmp_path / "v.jnrrd", da.from_array(a, chunks=12), tile=16, levels=2,
                    progress=lambda done, total: seen.append((done, total)))
    total = 2 * 2 * 1 + 1
    assert seen == [(k, total) for k in range(1, total + 1)]
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "v.jnrrd")[0], a)


def test_write_dask_from_to_dask_roundtrip(tmp_path):
    a = _volume()
    p, q = tmp_path / "src.jnrrd", tmp_path / "dst.jnrrd"
    jnrrd.write(p, a, tile=16, compression="zstd")
    with jnrrd.open(p) as vol:
        jnrrd.write(q, vol.to_dask(), tile=(8, 8, 8), levels=2, storage="external")
    np.testing.assert_array_equal(jnrrd.read(q)[0], a)


def _failing(a, bad_block):
    x = da.from_array(a, chunks=(16, 16, 8))

    def boom(block, block_id=None):
        if block_id == bad_block:
            raise RuntimeError("disk on fire")
        return block

    return x.map_blocks(boom, dtype=a.dtype)


@pytest.mark.parametrize("storage", ["internal", "external"])
def test_write_dask_failure_keeps_the_old_dataset(tmp_path, storage):
    old = _volume()
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, old, tile=16, storage=storage)
    before = _listing(tmp_path)
    with pytest.raises(RuntimeError, match="disk on fire"):
        jnrrd.write(p, _failing(old + 1, (1, 1, 1)), tile=16, levels=2, storage=storage)
    assert _listing(tmp_path) == before
    np.testing.assert_array_equal(jnrrd.read(p)[0], old)
    # The next write replaces it and leaves only its own files.
    jnrrd.write(p, da.from_array(old + 2, chunks=9), tile=16, storage=storage)
    np.testing.assert_array_equal(jnrrd.read(p)[0], old + 2)
    assert len(_listing(tmp_path)) == len(before)


def test_write_dask_leftovers_of_an_interrupted_write_are_removed(tmp_path):
    a = _volume()
    p = tmp_path / "v.jnrrd"
    # What a killed internal write leaves behind: its per-tile spool directory.
    spool = tmp_path / ".v.jnrrd.jnrrd-tmp-deadbeef.tiles"
    spool.mkdir()
    (spool / "0").write_bytes(b"x")
    jnrrd.write(p, da.from_array(a, chunks=10), tile=16)
    assert _listing(tmp_path) == ["v.jnrrd"]


def test_write_dask_rejects_block_type_pyramids(tmp_path):
    a = np.zeros((8, 8), dtype="V4")
    with pytest.raises(jnrrd.UnsupportedError, match="cannot downsample"):
        jnrrd.write(tmp_path / "v.jnrrd", da.from_array(a, chunks=4), tile=4, levels=2)
    assert _listing(tmp_path) == []


def test_level_tasks_stay_bounded(tmp_path, monkeypatch):
    """A level chunk whose level-0 region is over the budget is split, then rechunked."""
    monkeypatch.setattr(dask_write, "_PYRAMID_TASK_BYTES", 200_000)
    calls = []
    original = dask_write.level_block

    def counting(spec, region, bounds, arrays):
        calls.append(region)
        return original(spec, region, bounds, arrays)

    monkeypatch.setattr(dask_write, "level_block", counting)
    a = _volume((48, 48, 16))
    p, q = tmp_path / "dask.jnrrd", tmp_path / "numpy.jnrrd"
    kw = {"tile": 16, "levels": 3, "downsample": "gaussian"}
    jnrrd.write(p, da.from_array(a, chunks=20), **kw)
    jnrrd.write(q, a, **kw)
    _same_levels(p, q, "gaussian")
    with jnrrd.open(p) as vol:
        tiles = sum(lv.grid.ntiles for lv in vol.tiling.levels[1:])
    assert len(calls) > tiles


@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_bfloat16_pyramid_averages_values(tmp_path, kind):
    ml = pytest.importorskip("ml_dtypes")
    from jnrrd.pyramid import downsample

    a = np.tile(np.array([[-1.0, -3.0], [-1.0, -3.0]], np.float32), (4, 4)).astype(ml.bfloat16)
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, a if kind == "numpy" else da.from_array(a, chunks=3), tile=4, levels=2)
    got, _ = jnrrd.read(p, level=1)
    want = downsample(a, (2, 2), "average")  # -2.0 everywhere
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
