"""Dask in and out on a ``dask.distributed`` cluster of two worker processes.

Workers open the file themselves (the graph carries paths, not data), compute tiles and write
them; the results equal the NumPy path (docs/pyramids.md#methods). Slow: a cluster takes seconds to
start on the shared machines.
"""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

import jnrrd

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

pytestmark = pytest.mark.slow

EXACT = ("average", "max", "min", "mode")


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       host="127.0.0.1", dashboard_address="127.0.0.1:0")
    c = distributed.Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


def _volume(shape=(48, 40, 36), seed=1):
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 5, shape) * 1000 + rng.integers(0, 3, shape)).astype(np.uint16)


def _open_on_worker() -> list[str]:
    from jnrrd.integrations import dask as dask_io

    return sorted({ref.path for ref in dask_io._CACHE})


def _pid() -> int:
    return os.getpid()


def test_to_dask_sum_on_workers(client, tmp_path):
    a = _volume()
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, a, tile=16, compression="zstd")
    with jnrrd.open(p) as vol:
        x = vol.to_dask()
    graph = dict(x.__dask_graph__())
    assert len(pickle.dumps(graph)) < a.nbytes / 20
    total = x.sum(dtype=np.int64).compute()
    assert int(total) == int(a.sum(dtype=np.int64))
    # Every worker process read tiles by opening the file itself.
    opened = client.run(_open_on_worker)
    assert len(opened) == 2
    assert all(str(p) in paths for paths in opened.values())
    pids = client.run(_pid)
    assert os.getpid() not in pids.values()


def test_to_dask_virtual_level_on_workers(client, tmp_path):
    a = _volume()
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, a, {"tile:levels_stored": [0]}, tile=16, levels=2, downsample="mode")
    with jnrrd.open(p) as vol:
        got = vol.to_dask(level=1).compute()
    from jnrrd.pyramid import downsample

    np.testing.assert_array_equal(got, downsample(a, (2, 2, 2), "mode"))


@pytest.mark.parametrize("storage", ["internal", "external"])
@pytest.mark.parametrize("method", ["average", "max", "min", "mode", "gaussian", "lanczos"])
def test_write_on_workers_equals_numpy_writer(client, tmp_path, method, storage):
    a = _volume()
    x = da.from_array(a, chunks=(20, 17, 11))  # not aligned with the 16³ tiles
    kw = {"tile": 16, "levels": 3, "downsample": method, "storage": storage,
          "compression": "zstd"}
    p, q = tmp_path / "dask.jnrrd", tmp_path / "numpy.jnrrd"
    jnrrd.write(p, x, **kw)
    jnrrd.write(q, x.compute(), **kw)
    for k in range(3):
        got, _ = jnrrd.read(p, level=k)
        want, _ = jnrrd.read(q, level=k)
        if method in EXACT:
            np.testing.assert_array_equal(got, want)
        else:
            assert np.abs(got.astype(np.int64) - want.astype(np.int64)).max() <= 1
    if storage == "internal" and method in EXACT:
        assert p.read_bytes() == q.read_bytes()
    names = sorted(os.listdir(tmp_path))
    if storage == "internal":
        assert names == ["dask.jnrrd", "numpy.jnrrd"]
    else:
        assert len(names) == 4  # two headers, two tile directories


def test_write_with_progress_on_workers(client, tmp_path):
    a = _volume((32, 32, 32))
    seen = []
    jnrrd.write(tmp_path / "v.jnrrd", da.from_array(a, chunks=13), tile=16, levels=2,
                storage="external", progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (9, 9) and len(seen) == 9
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "v.jnrrd")[0], a)


def test_copy_between_files_on_workers(client, tmp_path):
    """Read tiles on workers and write them on workers: no array passes through the client."""
    a = _volume()
    src, dst = tmp_path / "src.jnrrd", tmp_path / "dst.jnrrd"
    jnrrd.write(src, a, tile=12, compression="zstd")
    with jnrrd.open(src) as vol:
        jnrrd.write(dst, vol.to_dask(), tile=16, levels=2, compression="lz4")
    np.testing.assert_array_equal(jnrrd.read(dst)[0], a)
