"""``jnrrd.write`` to object stores (jnrrd.storage.remote_writes): every kind of write to
``memory://`` (the same objects as a local write, tokens aside) and to moto's S3 server
(read back by URL), rewrites that leave no stale objects, uploads that fail half way and
leave the previous dataset readable, and the refusals (``https://``, ``storage_options`` for
a path)."""

from __future__ import annotations

import hashlib
import re
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import jnrrd
from jnrrd.errors import MissingDependencyError
from jnrrd.storage import Staged, WriteStore
from jnrrd.storage.remote_writes import PUTS_IN_FLIGHT, RemoteWriteStore
from jnrrd.storage.targets import target_store

#: every test here runs through both backends of remote reads (tests/conftest.py), but for
#: the slow ones that only write (writes go through fsspec under either backend: their
#: obstore run would repeat their fsspec run)
pytestmark = pytest.mark.usefixtures("remote_backend")

fsspec = pytest.importorskip("fsspec")

#: every kind of write: (file name, keywords)
KINDS: dict[str, tuple[str, dict[str, Any]]] = {
    "untiled": ("v.jnrrd", {}),
    "untiled-gzip": ("v.jnrrd", {"encoding": "gzip"}),
    "detached": ("v.jnrrd", {"detached": True, "encoding": "zstd"}),
    "contiguous": ("v.jnrrd", {"tile": (16, 16, 8)}),
    "chunked": ("v.jnrrd", {"tile": (16, 16, 8), "compression": "zstd",
                            "tile_format": "chunked"}),
    "sparse": ("v.jnrrd", {"tile": (16, 16, 8), "compression": "zstd", "sparse": True}),
    "pyramid": ("v.jnrrd", {"tile": (16, 16, 8), "compression": "zstd", "levels": 2}),
    "external": ("v.jnrrd", {"tile": (16, 16, 8), "compression": "zstd",
                             "storage": "external", "levels": 2}),
    "nrrd": ("v.nrrd", {"encoding": "gzip"}),
    "nhdr": ("v.nhdr", {}),
}
_TOKEN = re.compile(r"\.([0-9a-f]{8})\.")


def _volume(seed: int = 0) -> np.ndarray:
    a = np.arange(40 * 36 * 20, dtype=np.uint16).reshape(40, 36, 20) + seed
    a[:16, :16, :8] = 0  # one all-padding tile: sparse writes skip it
    return a


def _digest(files: dict[str, bytes]) -> dict[str, str]:
    """Objects by name with the fresh tokens of a write replaced (as test_byte_identity)."""
    tokens = {m.group(1) for name in files for m in _TOKEN.finditer(name)}
    out = {}
    for name, data in files.items():
        for t in tokens:
            name = name.replace(t, "TOKEN")
            data = data.replace(t.encode(), b"TOKEN")
        out[name] = hashlib.sha256(data).hexdigest()
    return out


def _local_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _remote_files(fs: Any, root: str) -> dict[str, bytes]:
    root = fs._strip_protocol(root).rstrip("/")
    return {fs._strip_protocol(p)[len(root) + 1:]: fs.cat_file(p) for p in fs.find(root)}


@pytest.fixture
def mem() -> Any:
    """A fresh "bucket" on fsspec's in-memory filesystem, removed afterwards."""
    fs = fsspec.filesystem("memory")
    root = f"/jnrrd-test-{uuid.uuid4().hex[:12]}"
    yield fs, root
    if fs.exists(root):
        fs.rm(root, recursive=True)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_memory_writes_the_objects_a_local_write_writes(kind, mem, tmp_path):
    fs, root = mem
    name, kw = KINDS[kind]
    a = _volume()
    url = f"memory://{root}/{name}"
    jnrrd.write(url, a, **kw)
    jnrrd.write(tmp_path / name, a, **kw)
    assert _digest(_remote_files(fs, root)) == _digest(_local_files(tmp_path))
    data, header = jnrrd.read(url)
    np.testing.assert_array_equal(data, a)
    local, local_header = jnrrd.read(tmp_path / name)
    assert header.keys() == local_header.keys()


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_s3_round_trips(kind, s3, tmp_path):
    name, kw = KINDS[kind]
    a = _volume()
    url = s3.url(f"dir/{name}")
    jnrrd.write(url, a, storage_options=s3.storage_options, **kw)
    data, _ = jnrrd.read(url, storage_options=s3.storage_options)
    np.testing.assert_array_equal(data, a)
    if "tile" in kw:
        with jnrrd.open(url, storage_options=s3.storage_options) as vol:
            np.testing.assert_array_equal(vol[3:33, 5:30, 2:19], a[3:33, 5:30, 2:19])
            if "levels" in kw:
                jnrrd.write(tmp_path / name, a, **kw)
                with jnrrd.open(tmp_path / name) as local:
                    np.testing.assert_array_equal(vol.levels[1][...], local.levels[1][...])
    # no temporary or partial objects: the dataset's own objects only
    fs = fsspec.filesystem("s3", **s3.storage_options)
    names = {p.split("/", 1)[1] for p in fs.find(s3.bucket)}
    tiles = {n for n in names if ".tiles/" in n}
    rest = names - tiles - {f"dir/{name}"}
    assert all(re.fullmatch(r"dir/v\.[0-9a-f]{8}\.(data\.rawzst|raw)", n) for n in rest)
    assert len(rest) == (1 if kind in ("detached", "nhdr") else 0)


def test_external_tiles_are_put_concurrently_then_the_header(s3, monkeypatch):
    import threading
    import time

    # the filesystem jnrrd uses (fsspec caches one per options): its public pipe_file counted
    fs = fsspec.filesystem("s3", **s3.storage_options)
    real = fs.pipe_file
    now, most, lock = [0], [0], threading.Lock()

    def counting(path, data, **kw):
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        try:
            time.sleep(0.02)  # the uploads overlap when they are in flight together
            return real(path, data, **kw)
        finally:
            with lock:
                now[0] -= 1

    monkeypatch.setattr(fs, "pipe_file", counting)
    # the requests of the writes alone: not those of the plugin validating what they wrote
    from plugins import validate_written

    monkeypatch.setattr(validate_written, "check_written", lambda *args, **kwargs: None)
    a = _volume()
    url = s3.url("v.jnrrd")
    jnrrd.write(url, a, storage_options=s3.storage_options, tile=(16, 16, 8),
                compression="zstd", storage="external", sparse=True)
    assert 1 < most[0] <= PUTS_IN_FLIGHT
    puts = [r.path for r in s3.server.records if r.method == "PUT"]
    assert len(puts) == 3 * 3 * 3 - 1 + 1  # one per stored tile (one is sparse), the header
    assert puts[-1] == f"/{s3.bucket}/v.jnrrd"
    assert all(".tiles/" in p for p in puts[:-1])
    assert dict(s3.server.counts) == {"PUT": 27, "GET": 2}  # + the fresh prefix, the sweep
    s3.server.reset()
    jnrrd.write(url, a, storage_options=s3.storage_options, tile=(16, 16, 8))
    # + the previous header (what it names is what the rewrite may remove), the listing,
    # the old tiles' bulk delete
    assert dict(s3.server.counts) == {"PUT": 1, "GET": 3, "POST": 1}
    s3.server.reset()
    jnrrd.write(url, a, storage_options=s3.storage_options, tile=(16, 16, 8))
    assert dict(s3.server.counts) == {"PUT": 1, "GET": 1}


def test_rewrites_leave_no_stale_objects(s3):
    opts = s3.storage_options
    fs = fsspec.filesystem("s3", **opts)
    url = s3.url("v.jnrrd")
    ext = {"tile": (16, 16, 8), "compression": "zstd", "storage": "external"}
    jnrrd.write(url, _volume(0), storage_options=opts, **ext)
    first = set(fs.find(s3.bucket))
    jnrrd.write(url, _volume(1), storage_options=opts, **ext)
    fs.invalidate_cache()
    second = set(fs.find(s3.bucket))
    assert first & second == {f"{s3.bucket}/v.jnrrd"}  # every old tile went
    assert len(second) == len(first)
    np.testing.assert_array_equal(jnrrd.read(url, storage_options=opts)[0], _volume(1))
    jnrrd.write(url, _volume(2), storage_options=opts, detached=True)
    jnrrd.write(url, _volume(3), storage_options=opts, tile=(16, 16, 8))
    fs.invalidate_cache()
    assert fs.find(s3.bucket) == [f"{s3.bucket}/v.jnrrd"]  # no tiles, no data file left
    np.testing.assert_array_equal(jnrrd.read(url, storage_options=opts)[0], _volume(3))


def test_an_upload_failing_half_way_leaves_the_previous_dataset(s3, monkeypatch):
    opts = s3.storage_options
    fs = fsspec.filesystem("s3", **opts)
    url = s3.url("v.jnrrd")
    ext = {"tile": (16, 16, 8), "compression": "zstd", "storage": "external"}
    jnrrd.write(url, _volume(0), storage_options=opts, **ext)
    before = sorted(fs.find(s3.bucket))
    real = fs.pipe_file  # the filesystem jnrrd uses (fsspec caches one per options)
    calls = [0]

    def failing(path, data, **kw):
        calls[0] += 1
        if calls[0] == 5:
            raise OSError(5, "injected failure")
        return real(path, data, **kw)

    monkeypatch.setattr(fs, "pipe_file", failing)
    with pytest.raises(OSError, match="injected failure") as info:
        jnrrd.write(url, _volume(1), storage_options=opts, **ext)
    assert ".tiles/" in str(info.value)  # the error names the tile's URL
    monkeypatch.setattr(fs, "pipe_file", real)
    fs.invalidate_cache()
    assert sorted(fs.find(s3.bucket)) == before  # the new tiles were removed
    np.testing.assert_array_equal(jnrrd.read(url, storage_options=opts)[0], _volume(0))


def test_a_put_refused_after_some_tiles_leaves_the_previous_dataset(mem, monkeypatch):
    fs, root = mem
    url = f"memory://{root}/v.jnrrd"
    ext = {"tile": (16, 16, 8), "compression": "zstd", "storage": "external", "levels": 2}
    jnrrd.write(url, _volume(0), **ext)
    before = _remote_files(fs, root)
    real = RemoteWriteStore.put
    calls = [0]

    def put(self, key, data):
        calls[0] += 1
        if calls[0] > 7:
            raise OSError(28, "No space left on device")
        real(self, key, data)

    monkeypatch.setattr(RemoteWriteStore, "put", put)
    with pytest.raises(OSError, match="No space"):
        jnrrd.write(url, _volume(1), **ext)
    assert _remote_files(fs, root) == before
    np.testing.assert_array_equal(jnrrd.read(url)[0], _volume(0))


@pytest.mark.parametrize("kind", ["untiled", "chunked", "detached", "nhdr"])
def test_a_failed_upload_of_one_object_changes_nothing(kind, mem, monkeypatch, tmp_path):
    fs, root = mem
    name, kw = KINDS[kind]
    url = f"memory://{root}/{name}"
    jnrrd.write(url, _volume(0), **kw)
    before = _remote_files(fs, root)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    real = RemoteWriteStore.upload
    calls = [0]

    def upload(self, local, key):
        calls[0] += 1
        if calls[0] == (2 if kind in ("detached", "nhdr") else 1):  # the header's upload
            raise OSError(5, "connection reset")
        real(self, local, key)

    monkeypatch.setattr(RemoteWriteStore, "upload", upload)
    with pytest.raises(OSError, match="connection reset"):
        jnrrd.write(url, _volume(1), **kw)
    assert _remote_files(fs, root) == before  # a detached write's new data file is removed
    assert list(tmp_path.iterdir()) == []  # the local staging files are gone
    np.testing.assert_array_equal(jnrrd.read(url)[0], _volume(0))


@pytest.mark.parametrize("storage", ["external", "internal"])
def test_dask_writes_to_object_stores(storage, s3, mem, monkeypatch):
    da = pytest.importorskip("dask.array")
    from plugins import validate_written

    monkeypatch.setattr(validate_written, "check_written", lambda *args, **kwargs: None)
    a = _volume()
    kw = {"tile": (16, 16, 8), "compression": "zstd", "storage": storage}
    url = s3.url("d.jnrrd")
    jnrrd.write(url, da.from_array(a, chunks=12), storage_options=s3.storage_options, **kw)
    # internal: the tiles wait in a local directory (this process's scheduler), one upload
    assert dict(s3.server.counts) == ({"PUT": 1, "GET": 1} if storage == "internal"
                                      else {"PUT": 27 + 1, "GET": 2})
    np.testing.assert_array_equal(jnrrd.read(url, storage_options=s3.storage_options)[0], a)
    fs = fsspec.filesystem("s3", **s3.storage_options)
    assert not any("jnrrd-tmp" in p for p in fs.find(s3.bucket))  # the spool is gone
    fsm, root = mem
    jnrrd.write(f"memory://{root}/d.jnrrd", da.from_array(a, chunks=12), **kw)
    np.testing.assert_array_equal(jnrrd.read(f"memory://{root}/d.jnrrd")[0], a)


def test_http_urls_are_read_only():
    with pytest.raises(jnrrd.UnsupportedError, match=r"https://example\.invalid/v\.jnrrd.*"
                                                      "read-only"):
        jnrrd.write("https://example.invalid/v.jnrrd", _volume(), tile=16)
    with pytest.raises(jnrrd.UnsupportedError, match="read-only"):
        jnrrd.write("http://127.0.0.1:9/v.nrrd", _volume())


def test_storage_options_for_a_path_is_a_type_error(tmp_path):
    with pytest.raises(TypeError, match="storage_options"):
        jnrrd.write(tmp_path / "v.jnrrd", _volume(), storage_options={"anon": True})
    with pytest.raises(TypeError, match="storage_options"):
        jnrrd.write(str(tmp_path / "v.nrrd"), _volume(), storage_options={"anon": True})
    assert list(tmp_path.iterdir()) == []


def test_file_urls_are_local_paths(tmp_path):
    a = _volume()
    jnrrd.write(f"file://{tmp_path}/v.jnrrd", a, tile=16)
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "v.jnrrd")[0], a)


def test_durable_false_and_the_protocols(mem):
    fs, root = mem
    store, key = target_store(f"memory://{root}/v.jnrrd")
    assert isinstance(store, WriteStore) and key == "v.jnrrd"
    staged = store.stage(key)
    assert isinstance(staged, Staged)
    staged.write(b"abc")
    assert not fs.exists(f"{root}/v.jnrrd")  # invisible until committed
    staged.commit()
    assert fs.cat_file(f"{root}/v.jnrrd") == b"abc"
    a = _volume()
    jnrrd.write(f"memory://{root}/w.jnrrd", a, tile=16, durable=False)
    np.testing.assert_array_equal(jnrrd.read(f"memory://{root}/w.jnrrd")[0], a)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["external", "pyramid", "detached", "nhdr"])
def test_the_server_refusing_uploads_half_way_leaves_the_previous_dataset(kind, s3):
    opts = s3.storage_options
    fs = fsspec.filesystem("s3", **opts)
    name, kw = KINDS[kind]
    url = s3.url(f"dir/{name}")
    jnrrd.write(url, _volume(0), storage_options=opts, **kw)
    before = {p: fs.cat_file(p) for p in fs.find(s3.bucket)}
    # external: tiles go through, then 403; the others: the data goes, the header is refused
    s3.server.fail("PUT", skip=5 if kind == "external" else 1 if kind in ("detached", "nhdr")
                   else 0)
    with pytest.raises(PermissionError) as info:
        jnrrd.write(url, _volume(1), storage_options=opts, **kw)
    assert s3.url("dir/") in str(info.value)  # names the object refused
    s3.server.clear_faults()
    fs.invalidate_cache()
    assert {p: fs.cat_file(p) for p in fs.find(s3.bucket)} == before
    np.testing.assert_array_equal(jnrrd.read(url, storage_options=opts)[0], _volume(0))


def test_a_pickled_store_puts_synchronously(mem):
    import pickle

    fs, root = mem
    store, _ = target_store(f"memory://{root}/v.jnrrd")
    copy = pickle.loads(pickle.dumps(store))  # a Dask task's copy in a worker process
    copy.put("t/0", memoryview(b"abc"))
    assert fs.cat_file(f"{root}/t/0") == b"abc"  # stored on return: no one syncs a copy
    store.put("t/1", b"de")
    store.sync("t")
    assert fs.cat_file(f"{root}/t/1") == b"de"


@pytest.mark.slow
@pytest.mark.parametrize("storage", ["external", "internal"])
@pytest.mark.parametrize("remote_backend", ["fsspec"], indirect=True)  # writes: fsspec only
def test_dask_on_a_process_cluster_writes_to_s3(storage, s3):
    da = pytest.importorskip("dask.array")
    distributed = pytest.importorskip("distributed")
    a = _volume()
    url = s3.url("c.jnrrd")
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  host="127.0.0.1", dashboard_address="127.0.0.1:0") as cluster, \
            distributed.Client(cluster):
        jnrrd.write(url, da.from_array(a, chunks=12), storage_options=s3.storage_options,
                    tile=(16, 16, 8), compression="zstd", storage=storage)
    np.testing.assert_array_equal(jnrrd.read(url, storage_options=s3.storage_options)[0], a)
    fs = fsspec.filesystem("s3", **s3.storage_options)
    fs.invalidate_cache()
    assert not any("jnrrd-tmp" in p for p in fs.find(s3.bucket))


def test_convert_to_s3(s3, tmp_path):
    a = _volume()
    jnrrd.write(tmp_path / "v.nrrd", a)
    url = s3.url("v.jnrrd")
    jnrrd.convert(tmp_path / "v.nrrd", url, storage_options=s3.storage_options, tile=16,
                  compression="zstd", levels=2)
    with jnrrd.open(url, storage_options=s3.storage_options) as vol:
        np.testing.assert_array_equal(vol[...], a)
        assert len(vol.levels) == 2


@pytest.mark.parametrize("kw", [{}, {"tile": 8, "storage": "external"}])
def test_a_missing_bucket_is_file_not_found_naming_the_url(s3, kw):
    with pytest.raises(FileNotFoundError, match="s3://no-such-bucket-x/v"):
        jnrrd.write("s3://no-such-bucket-x/v.jnrrd", _volume(), storage_options=s3.storage_options,
                    **kw)


def test_a_protocol_without_its_package_is_a_missing_dependency(monkeypatch):
    import sys

    import fsspec  # noqa: F401 - loads fsspec.registry

    known = sys.modules["fsspec.registry"]._registry  # filesystems imported so far
    monkeypatch.setitem(sys.modules, "gcsfs", None)  # as if gcsfs were not installed
    for name in ("gs", "gcs"):
        if name in known:
            monkeypatch.delitem(known, name)
    with pytest.raises(MissingDependencyError, match="gs://b/v.jnrrd"):
        jnrrd.write("gs://b/v.jnrrd", _volume())


def test_a_failed_upload_stops_the_write_early(mem, monkeypatch):
    fs, root = mem
    calls = [0]
    real = type(fs).pipe_file

    def pipe_file(self, path, value, **kw):
        calls[0] += 1
        if calls[0] == 1:
            raise OSError(5, "injected failure")
        return real(self, path, value, **kw)

    monkeypatch.setattr(type(fs), "pipe_file", pipe_file)
    a = np.arange(40 * 40 * 40, dtype=np.uint16).reshape(40, 40, 40)
    with pytest.raises(OSError, match="injected failure"):
        jnrrd.write(f"memory://{root}/v.jnrrd", a, tile=8, storage="external")
    assert calls[0] < 5 * 5 * 5  # not every tile was tried
    assert not fs.exists(root) or fs.find(root) == []


@pytest.mark.slow  # a subprocess that imports jnrrd and s3fs: seconds
@pytest.mark.parametrize("remote_backend", ["fsspec"], indirect=True)  # writes: fsspec only
def test_a_writer_killed_mid_upload_leaves_harmless_objects(s3):
    """SIGKILL during the tile uploads: the previous dataset stays readable; the new tiles
    are unreferenced and stay so: an object store keeps no journal, so no later write can
    prove them its own, and cleanup never removes what it cannot prove (docs/remote.md)."""
    import json
    import os
    import subprocess
    import sys
    import time

    opts = s3.storage_options
    fs = fsspec.filesystem("s3", **opts)
    url = s3.url("k.jnrrd")
    ext = {"tile": (8, 8, 8), "compression": "zstd", "storage": "external"}
    jnrrd.write(url, _volume(0), storage_options=opts, **ext)
    header = fs.cat_file(s3.path("k.jnrrd"))
    before = set(fs.find(s3.bucket))
    script = ("import json, sys, numpy as np, jnrrd\n"
              "a = np.arange(40 * 36 * 20, dtype=np.uint16).reshape(40, 36, 20) + 1\n"
              "jnrrd.write(sys.argv[1], a, storage_options=json.loads(sys.argv[2]),\n"
              "            tile=(8, 8, 8), compression='zstd', storage='external')\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(jnrrd.__file__)))
    env = {**os.environ, "PYTHONPATH": root}
    s3.server.latency = 0.05
    s3.server.reset()
    proc = subprocess.Popen([sys.executable, "-c", script, url, json.dumps(opts)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while s3.server.counts["PUT"] < 8 and proc.poll() is None:
            assert time.monotonic() < deadline, "the writer made no uploads"
            time.sleep(0.01)
    finally:
        proc.kill()
        proc.wait(10)
    s3.server.latency = 0.0
    fs.invalidate_cache()
    assert fs.cat_file(s3.path("k.jnrrd")) == header  # the header was never replaced
    np.testing.assert_array_equal(jnrrd.read(url, storage_options=opts)[0], _volume(0))
    orphans = set(fs.find(s3.bucket)) - before
    assert orphans and all(".tiles/" in p for p in orphans)  # tiles no header names
    jnrrd.write(url, _volume(2), storage_options=opts, **ext)
    fs.invalidate_cache()
    after = set(fs.find(s3.bucket))
    assert orphans <= after  # not provably the target's: kept, and still named by no header
    assert not after & {p for p in before if ".tiles/" in p}  # the replaced dataset's tiles
    np.testing.assert_array_equal(jnrrd.read(url, storage_options=opts)[0], _volume(2))
