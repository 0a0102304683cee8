"""Dask and xarray over URLs: ``jnrrd.open(url, storage_options=...).to_dask()`` and
``xr.open_dataset(url, engine="jnrrd", storage_options=...)``, on the test HTTP server and
moto's S3 server (127.0.0.1 only).

Tasks carry the URL, its ``storage_options`` and the object's version token; every task asks
for the object's version again, so a replaced object is a ``DataError`` (threaded scheduler
here, worker processes of a ``distributed.LocalCluster`` in the slow test)."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from remote_cases import put_to_s3, random_volume

import jnrrd
from jnrrd.errors import DataError

da = pytest.importorskip("dask.array")
pytest.importorskip("fsspec")

#: (and every test here runs through both backends of remote reads: tests/conftest.py)
pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("remote_backend")]


def _volume(shape=(40, 30, 20), seed=3):
    return random_volume(shape, seed)


_put = put_to_s3


@pytest.fixture(autouse=True)
def _fresh_cache():
    from jnrrd.integrations.dask import clear_cache

    clear_cache()
    yield
    clear_cache()


@pytest.mark.parametrize("kind", ["internal", "external", "nhdr", "pyramid"])
def test_to_dask_over_http_equals_local(http_server, kind):
    a = _volume()
    name = "v.nhdr" if kind == "nhdr" else "v.jnrrd"
    kw = {"nhdr": {}, "internal": {"tile": 16, "compression": "zstd"},
          "external": {"tile": 16, "compression": "zstd", "storage": "external"},
          "pyramid": {"tile": 16, "compression": "zstd", "levels": 2}}[kind]
    jnrrd.write(http_server.root / name, a, **kw)
    url = http_server.url_for(name)
    with jnrrd.open(url) as vol:
        x = vol.to_dask()
        level = len(vol.levels) - 1
        y = vol.to_dask(level=level)
        want = vol.levels[level][...]
    np.testing.assert_array_equal(x.compute(scheduler="threads"), a)
    np.testing.assert_array_equal(y.compute(scheduler="threads"), want)


def _replace(path, data):
    """Rewrite a served file (new bytes, new ETag)."""
    time.sleep(0.01)
    jnrrd.write(path, data, tile=16, compression="zstd")


def test_to_dask_http_object_replaced_is_data_error(http_server):
    a = _volume()
    path = http_server.root / "v.jnrrd"
    jnrrd.write(path, a, tile=16, compression="zstd")
    with jnrrd.open(http_server.url_for("v.jnrrd")) as vol:
        x = vol.to_dask()
    # a first compute fills this process's cache of open volumes: the check is per task
    assert int(x.sum(dtype=np.int64).compute(scheduler="threads")) == int(a.sum(dtype=np.int64))
    _replace(path, a + 1)
    with pytest.raises(DataError, match="changed"):
        x.compute(scheduler="threads")


def test_to_dask_s3_object_replaced_is_data_error(s3, tmp_path):
    a = _volume()
    local = tmp_path / "v.jnrrd"
    jnrrd.write(local, a, tile=16, compression="zstd")
    _put(s3, local, "d/v.jnrrd")
    url = s3.url("d/v.jnrrd")
    with jnrrd.open(url, storage_options=s3.storage_options) as vol:
        x = vol.to_dask()
    np.testing.assert_array_equal(x.compute(scheduler="threads"), a)
    # same shape and layout, other bytes: only the version token tells them apart
    jnrrd.write(local, a[::-1].copy(), tile=16, compression="zstd")
    _put(s3, local, "d/v.jnrrd")
    with pytest.raises(DataError, match="changed"):
        x.compute(scheduler="threads")
    # a graph built after the replacement reads the new bytes
    with jnrrd.open(url, storage_options=s3.storage_options) as vol:
        np.testing.assert_array_equal(vol.to_dask().compute(scheduler="threads"), a[::-1])


def test_to_dask_s3_object_deleted_is_data_error(s3, tmp_path):
    import fsspec

    a = _volume()
    local = tmp_path / "v.jnrrd"
    jnrrd.write(local, a, tile=16, compression="zstd")
    _put(s3, local, "v.jnrrd")
    with jnrrd.open(s3.url("v.jnrrd"), storage_options=s3.storage_options) as vol:
        x = vol.to_dask()
    fs = fsspec.filesystem("s3", **s3.storage_options)
    fs.rm(s3.path("v.jnrrd"))
    with pytest.raises(DataError, match="changed"):
        x.compute(scheduler="threads")


def test_to_dask_pickles_url_and_options(s3, tmp_path):
    import pickle

    a = _volume()
    jnrrd.write(tmp_path / "v.jnrrd", a, tile=16, compression="zstd")
    _put(s3, tmp_path / "v.jnrrd", "v.jnrrd")
    with jnrrd.open(s3.url("v.jnrrd"), storage_options=s3.storage_options) as vol:
        x = vol.to_dask()
    graph = dict(x.__dask_graph__())
    task = next(iter(graph.values()))
    ref = task[1] if isinstance(task, tuple) else task.args[0]
    ref2 = pickle.loads(pickle.dumps(ref))
    assert ref2.path == s3.url("v.jnrrd") and ref2.remote
    assert ref2.reopen.storage_options == s3.storage_options
    assert ref2.stamp == ref.stamp and ref.stamp is not None


def test_xarray_open_dataset_url(s3, tmp_path):
    xr = pytest.importorskip("xarray")
    a = _volume()
    jnrrd.write(tmp_path / "v.jnrrd", a, {"labels": ["x", "y", "z"]}, tile=16,
                compression="zstd", levels=2)
    _put(s3, tmp_path / "v.jnrrd", "v.jnrrd")
    url = s3.url("v.jnrrd")
    ds = xr.open_dataset(url, engine="jnrrd", storage_options=s3.storage_options)
    np.testing.assert_array_equal(ds["data"].values, a)
    np.testing.assert_array_equal(ds["data"].isel(x=[5, 1], y=slice(3, 9)).values,
                                  a[[5, 1], 3:9])
    ds.close()
    ds = xr.open_dataset(url, engine="jnrrd", chunks={},
                         backend_kwargs={"storage_options": s3.storage_options, "level": 1})
    with jnrrd.open(url, storage_options=s3.storage_options) as vol:
        want = vol.levels[1][...]
    np.testing.assert_array_equal(ds["data"].compute().values, want)
    ds.close()


def test_xarray_guesses_url_by_suffix(http_server):
    pytest.importorskip("xarray")
    from jnrrd.integrations.xarray import JnrrdBackendEntrypoint

    entry = JnrrdBackendEntrypoint()
    assert entry.guess_can_open(http_server.url_for("v.jnrrd"))
    http_server.reset()
    assert not entry.guess_can_open(http_server.url_for("v.bin"))
    assert http_server.requests == 0  # guessing sends no request


# -- distributed: worker processes re-open the URL ----------------------------------------------

@pytest.mark.slow
def test_to_dask_s3_on_local_cluster(s3, tmp_path):
    distributed = pytest.importorskip("distributed")
    a = _volume((48, 40, 36))
    local = tmp_path / "v.jnrrd"
    jnrrd.write(local, a, tile=16, compression="zstd", levels=2)
    _put(s3, local, "c/v.jnrrd")
    url = s3.url("c/v.jnrrd")
    with jnrrd.open(url, storage_options=s3.storage_options) as vol:
        x = vol.to_dask()
        coarse = vol.to_dask(level=1)
        want = vol.levels[1][...]
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       host="127.0.0.1", dashboard_address="127.0.0.1:0")
    try:
        with distributed.Client(cluster) as client:
            np.testing.assert_array_equal(x.compute(), a)
            np.testing.assert_array_equal(coarse.compute(), want)

            def opened() -> list[str]:
                from jnrrd.integrations import dask as dask_io

                return sorted({ref.path for ref in dask_io._CACHE})

            seen = client.run(opened)
            assert len(seen) == 2 and all(url in paths for paths in seen.values())
            pids = client.run(os.getpid)
            assert os.getpid() not in pids.values()
            # replaced under the workers' cached volumes: every task checks the version
            jnrrd.write(local, a[::-1].copy(), tile=16, compression="zstd", levels=2)
            _put(s3, local, "c/v.jnrrd")
            with pytest.raises(DataError, match="changed"):
                x.compute()
    finally:
        cluster.close()


def test_each_task_asks_the_version_once(http_server):
    """A warm worker (its volume and decoded tiles cached) still asks for the object's
    version in every task: one one-byte request per chunk, and no tile bytes."""
    a = _volume((64, 64, 32))
    jnrrd.write(http_server.root / "v.jnrrd", a, tile=16, compression="zstd")
    url = http_server.url_for("v.jnrrd")
    with jnrrd.open(url) as vol:
        x = vol.to_dask()
    np.testing.assert_array_equal(x.compute(scheduler="threads"), a)
    http_server.reset()
    np.testing.assert_array_equal(x.compute(scheduler="threads"), a)
    assert http_server.ranges() == [(0, 1)] * x.npartitions
