"""The choice between the two backends of remote reads, and the quick part of the obstore
backend's tests (docs/remote.md, "Backends"); the whole remote suite runs through it in the
full suite (the ``remote_backend`` fixture of tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from forking import env_with_this_directory

import jnrrd
from jnrrd.errors import ObjectNotFoundError
from jnrrd.policy import IOSettings, Policy
from jnrrd.storage import remote_obstore
from jnrrd.storage.remote import choose_backend, filesystem, make_fetcher
from jnrrd.storage.remote_fetch import Fetcher
from jnrrd.storage.remote_obstore import ObstoreFS
from jnrrd.storage.remote_obstore_fetch import ObstoreFetcher
from jnrrd.storage.remote_writes import remote_target
from jnrrd.storage.resolve import open_source

pytest.importorskip("obstore")  # (in the test extra: .ci/run installs it)
pytestmark = pytest.mark.timeout(60)
ANYWHERE = {"follow_redirects": True}


def _policy(backend: str, **kw: object) -> Policy:
    return Policy(**kw).with_io(IOSettings(remote_backend=backend))  # type: ignore[arg-type]


def test_auto_takes_obstore_for_object_stores_and_http_only_when_asked() -> None:
    for url in ("s3://b/k", "gs://b/k", "az://c/k"):
        assert choose_backend(url, {}, Policy(), None) == "obstore"
        assert choose_backend(url, {}, _policy("fsspec"), None) == "fsspec"
        assert choose_backend(url, {}, _policy("fsspec"), "obstore") == "obstore"
    assert choose_backend("memory://b/k", {}, _policy("obstore"), None) == "fsspec"
    # HTTP: obstore's client follows redirects anywhere by itself, so only when asked for
    # and follow_redirects=True; else jnrrd's own client, whatever the setting
    url = "http://127.0.0.1:9/d/v.jnrrd"
    assert choose_backend(url, {}, _policy("auto", **ANYWHERE), None) == "fsspec"
    assert choose_backend(url, {}, _policy("obstore", **ANYWHERE), None) == "obstore"
    for rule in ("same-host", False):
        assert choose_backend(url, {}, _policy("obstore", follow_redirects=rule), None) == "fsspec"
    for odd in ("http://h/v.jnrrd?sig=1", "http://h/a%2Fb.jnrrd", "http://h/v.jnrrd#x"):
        assert choose_backend(odd, {}, _policy("obstore", **ANYWHERE), None) == "fsspec"
    fs, path = filesystem(url, {"backend": "obstore"}, policy=Policy(**ANYWHERE))
    assert isinstance(fs, ObstoreFS) and path == url and fs.key(path) == "d/v.jnrrd"
    with pytest.raises(ValueError, match="remote_backend"):
        IOSettings(remote_backend="boto")  # type: ignore[arg-type]
    with pytest.raises(jnrrd.UnsupportedError, match="boto"):
        filesystem("s3://b/k", {"backend": "boto"})


def test_storage_options_map_to_obstore_or_choose_fsspec() -> None:
    s3fs_style = {"key": "k", "secret": "s", "endpoint_url": "http://127.0.0.1:9",
                  "client_kwargs": {"region_name": "eu-west-1"}}
    fs, _ = filesystem("s3://b/k", s3fs_style, policy=Policy())
    assert isinstance(fs, ObstoreFS)
    assert fs.config == {"aws_access_key_id": "k", "aws_secret_access_key": "s",
                         "aws_endpoint": "http://127.0.0.1:9", "aws_region": "eu-west-1"}
    assert fs.client["allow_http"] is True
    assert fs.client["read_timeout"].total_seconds() == Policy().io.read_timeout
    fs, _ = filesystem("https://h/v.jnrrd", {"headers": {"X-Token": "t"}, "backend": "obstore"},
                       policy=Policy(**ANYWHERE))
    assert fs.client["default_headers"] == {"Accept-Encoding": "identity", "X-Token": "t"}
    # an option obstore has no name for: auto takes fsspec, forcing obstore names it
    fs, _ = filesystem("s3://b/k", {"requester_pays": True}, policy=Policy())
    assert not isinstance(fs, ObstoreFS)
    with pytest.raises(jnrrd.UnsupportedError, match="requester_pays"):
        filesystem("s3://b/k", {"requester_pays": True, "backend": "obstore"})
    with pytest.raises(jnrrd.UnsupportedError, match="client_kwargs"):
        filesystem("s3://b/k", {"client_kwargs": "x", "backend": "obstore"})
    # the "backend" option is never passed on
    fs, _ = filesystem("s3://b/k", {"backend": "fsspec", "anon": True}, policy=Policy())
    assert not isinstance(fs, ObstoreFS) and "backend" not in fs.storage_options


def test_writes_and_references_stay_with_fsspec_whatever_is_asked() -> None:
    """Writes need fsspec (docs/remote.md, "Backends"): the storage option does not move
    them."""
    store, key = remote_target("s3://b/d/v.jnrrd", {"backend": "obstore", "anon": True})
    assert not isinstance(store.fs, ObstoreFS) and key == "v.jnrrd"
    assert "backend" not in store.fs.storage_options


def test_forcing_obstore_without_it_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "obstore", None)  # import obstore fails
    assert not remote_obstore.available()
    assert choose_backend("s3://b/k", {}, Policy(), None) == "fsspec"
    with pytest.raises(jnrrd.MissingDependencyError, match=r"jnrrd\[obstore\]"):
        filesystem("s3://b/k", {"backend": "obstore"})


def test_the_fetcher_has_every_attribute_of_the_fsspec_one() -> None:
    fs, _ = filesystem("s3://b/k", {"anon": True}, policy=Policy())
    fetcher = make_fetcher(fs, Policy())
    assert isinstance(fetcher, ObstoreFetcher) and fetcher.ranged_open
    plain = Fetcher(filesystem("memory://x/v", policy=Policy())[0], Policy())
    assert set(vars(plain)) <= set(vars(fetcher))


def test_s3_reads_go_through_obstore_in_ranged_gets(s3, tmp_path) -> None:
    from remote_cases import put_to_s3, random_volume

    a = random_volume((64, 64, 40))  # 320 KiB of noise: past the first block
    jnrrd.write(tmp_path / "v.jnrrd", a, tile=8, compression="zstd")
    put_to_s3(s3, tmp_path / "v.jnrrd", "d/v.jnrrd")
    opened = open_source(s3.url("d/v.jnrrd"), Policy(), s3.storage_options)
    try:
        assert isinstance(opened.store.fetcher, ObstoreFetcher)
    finally:
        opened.close()
    s3.server.reset()
    with jnrrd.open(s3.url("d/v.jnrrd"), storage_options=s3.storage_options) as vol:
        np.testing.assert_array_equal(vol[-10:, :, -5:], a[-10:, :, -5:])
        token = vol.reopen.version
    gets = [r for r in s3.server.records if r.method == "GET"]
    assert len(gets) >= 2 and all(r.range_header for r in gets)  # first block, then tiles
    assert not [r for r in s3.server.records if r.method == "HEAD"]
    with jnrrd.open(s3.url("d/v.jnrrd"), storage_options={**s3.storage_options,
                                                         "backend": "fsspec"}) as vol:
        np.testing.assert_array_equal(vol[:], a)
        assert vol.reopen.version == token  # one version token whichever backend read it


def test_a_changed_object_is_a_data_error_through_obstore(s3, tmp_path) -> None:
    from remote_cases import put_to_s3, random_volume

    a = random_volume((64, 64, 40))  # past the first block: the tiles need more requests
    for i, arr in enumerate((a, a + 1)):
        jnrrd.write(tmp_path / f"v{i}.jnrrd", arr, tile=16, compression="zstd")
    put_to_s3(s3, tmp_path / "v0.jnrrd", "v.jnrrd")
    with jnrrd.open(s3.url("v.jnrrd"), storage_options=s3.storage_options) as vol:
        put_to_s3(s3, tmp_path / "v1.jnrrd", "v.jnrrd")  # If-Match: 412
        with pytest.raises(jnrrd.DataError, match="changed"):
            vol[-10:]


def test_http_through_obstore_when_asked_and_redirects_may_go_anywhere(http_server) -> None:
    from remote_cases import random_volume

    a = random_volume((64, 64, 40))
    jnrrd.write(http_server.root / "v.jnrrd", a, tile=16, compression="zstd")
    url = http_server.url_for("v.jnrrd")
    io = IOSettings(remote_backend="obstore")
    opened = open_source(url, _policy("obstore", **ANYWHERE), None)
    try:
        assert isinstance(opened.store.fetcher, ObstoreFetcher)
    finally:
        opened.close()
    http_server.reset()
    with jnrrd.open(url, io=io, follow_redirects=True) as vol:
        np.testing.assert_array_equal(vol[:], a)
    assert http_server.records and all(r.range_header for r in http_server.records)
    with pytest.raises(ObjectNotFoundError, match="absent"):
        jnrrd.open(http_server.url_for("absent.jnrrd"), io=io, follow_redirects=True)


# No answer of obstore's is handed from its runtime's threads to Python: such a thread holding
# Python code when the interpreter starts to finalize (a program that ends while requests are
# in flight) is ended by CPython through Rust frames, and the process aborts (SIGABRT).
# obstore's asynchronous calls answer through an event loop's call_soon_threadsafe, from a
# thread Python did not start; its blocking calls, which jnrrd makes from its request pool,
# answer in the calling thread.
def test_obstore_answers_reach_jnrrd_in_its_own_threads(s3, tmp_path, monkeypatch) -> None:
    import threading

    from remote_cases import put_to_s3

    from jnrrd.storage import aio

    a = np.random.default_rng(0).integers(0, 255, (64, 64, 40), np.uint8)
    jnrrd.write(tmp_path / "v.jnrrd", a, tile=16, compression="zstd", storage="external")
    put_to_s3(s3, tmp_path, "exit")
    loop = aio.loop()
    hand_over, strangers = loop.call_soon_threadsafe, []

    def watched(*args: object, **kw: object) -> object:
        if isinstance(threading.current_thread(), threading._DummyThread):
            strangers.append(args)
        return hand_over(*args, **kw)

    monkeypatch.setattr(loop, "call_soon_threadsafe", watched)
    io = IOSettings(remote_backend="obstore")
    with jnrrd.open(s3.url("exit/v.jnrrd"), storage_options=s3.storage_options, io=io,
                    cache_bytes=0) as vol:
        np.testing.assert_array_equal(vol[:], a)
    assert jnrrd.validate(s3.url("exit/v.jnrrd"), storage_options=s3.storage_options,
                          io=io, deep=True) == []
    assert strangers == []


def test_an_obstore_read_in_an_atexit_handler_works(http_server) -> None:
    from test_concurrency_readers import read_at_exit

    a = np.random.default_rng(0).integers(0, 255, (64, 64, 40), np.uint8)
    jnrrd.write(http_server.root / "v.jnrrd", a, tile=16, compression="zstd")
    assert read_at_exit(http_server.url_for("v.jnrrd")) == (
        f"first {a[0, 0, 0]}\nat exit {a.sum(dtype=np.int64)}\n")


# Ctrl-C in the middle of a long read: the exit waits for the requests on the wire, not for the
# read's queued ones (the request pool's threads are joined at exit).
_INTERRUPT_SCRIPT = """
import _thread, sys, threading, time
import jnrrd

io = jnrrd.IOSettings(remote_backend="obstore", request_concurrency=4)
vol = jnrrd.open(sys.argv[1], io=io, follow_redirects=True, cache_bytes=0)
threading.Timer(0.3, _thread.interrupt_main).start()
try:
    vol[:]
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def test_an_interrupted_obstore_read_exits_without_sending_its_queued_requests(
        http_server) -> None:
    a = np.random.default_rng(0).integers(0, 255, (128, 128, 64), np.uint8)
    jnrrd.write(http_server.root / "v.jnrrd", a, tile=16, compression="zstd",
                storage="external")  # 512 tile files: a request each
    http_server.latency = 0.05
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_INTERRUPT_SCRIPT),
                           http_server.url_for("v.jnrrd")],
                          capture_output=True, text=True, timeout=60, cwd=http_server.root)
    assert (done.returncode, done.stdout) == (0, "interrupted\n"), done.stderr[-2000:]
    assert http_server.requests < 100  # 4 at a time, 0.05 s each: not the 513 of the read


# tracemalloc.stop() while obstore requests are in flight: a thread of obstore's runtime that
# attached to the interpreter (its asynchronous calls answer that way) raced the stop and
# crashed the process (python/cpython#128679, CPython before 3.12.9 and 3.13.2); no thread of
# obstore's attaches now (docs/remote.md, "Backends").
_TRACEMALLOC_SCRIPT = """
import json, sys, threading, time, tracemalloc
import jnrrd

url, opts = sys.argv[1], json.loads(sys.argv[2])
vol = jnrrd.open(url, storage_options=opts, io=jnrrd.IOSettings(remote_backend="obstore"),
                 cache_bytes=0)
for i in range(40):
    tracemalloc.start()
    reading = threading.Thread(target=lambda: vol[:])
    reading.start()
    time.sleep(0.002 * (i % 10))
    tracemalloc.stop()
    reading.join()
print("done", flush=True)
"""


def test_tracemalloc_stops_while_obstore_requests_are_in_flight(s3, tmp_path) -> None:
    import json

    from remote_cases import put_to_s3

    a = np.random.default_rng(0).integers(0, 255, (128, 128, 64), np.uint8)
    jnrrd.write(tmp_path / "v.jnrrd", a, tile=16, compression="zstd")
    put_to_s3(s3, tmp_path, "tm")
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_TRACEMALLOC_SCRIPT),
                           s3.url("tm/v.jnrrd"), json.dumps(s3.storage_options)],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "done\n"), done.stderr[-2000:]


# The fork runs in a fresh interpreter (forking the loaded test runner can fail with ENOMEM,
# tests/test_hangs.py): a volume opened before the fork reads in the child (through the fsspec
# backend when obstore read it: obstore's runtime does not survive a fork), and so does one
# opened there.
_FORK_SCRIPT = """
import json, os, sys
import numpy as np
import jnrrd
from forking import wait_for_child

url, opts, backend, bound = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], float(sys.argv[4])
io = jnrrd.IOSettings(remote_backend=backend, request_timeout=5.0)
vol = jnrrd.open(url, storage_options=opts, io=io, cache_bytes=0)
want = vol[:]
pid = os.fork()
if pid == 0:
    code = 3
    try:
        if backend == "obstore":  # obstore cannot run here: "auto" takes fsspec, forcing
            try:                  # it says why
                jnrrd.open(url, storage_options=opts, io=io)
                os._exit(4)
            except jnrrd.UnsupportedError as exc:
                assert "forked" in str(exc), exc
            io = jnrrd.IOSettings(remote_backend="auto", request_timeout=5.0)
        again = jnrrd.open(url, storage_options=opts, io=io, cache_bytes=0)[:]
        code = 0 if np.array_equal(vol[:], want) and np.array_equal(again, want) else 2
    finally:
        os._exit(code)
wait_for_child(pid, bound, "the forked child's read")
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
@pytest.mark.parametrize("backend", ["obstore", pytest.param("fsspec", marks=pytest.mark.slow)])
def test_a_volume_opened_before_a_fork_reads_in_the_child(s3, tmp_path, backend) -> None:
    import json

    from remote_cases import put_to_s3, random_volume

    a = random_volume((64, 64, 40))
    jnrrd.write(tmp_path / "v.jnrrd", a, tile=16, compression="zstd", storage="external")
    put_to_s3(s3, tmp_path, "d")
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_FORK_SCRIPT), s3.url("d/v.jnrrd"),
         json.dumps(s3.storage_options), backend, "30"],
        capture_output=True, text=True, timeout=90,
        env={**env_with_this_directory(), "PYTHONWARNINGS": "ignore"})
    assert done.returncode == 0, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])


_ALONE_SCRIPT = """
import json, sys
for name in ("fsspec", "s3fs", "aiohttp", "botocore", "aiobotocore"):
    sys.modules[name] = None  # import fails: jnrrd[obstore] without jnrrd[remote]/[s3]
import numpy as np
import jnrrd

url, opts, n = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
with jnrrd.open(url, storage_options=opts) as vol:
    assert vol[:].sum() == n * (n - 1) // 2, "wrong data"
assert jnrrd.validate(url, storage_options=opts, deep=True) == []
"""


@pytest.mark.slow
def test_the_obstore_extra_alone_reads_s3(s3, tmp_path) -> None:
    import json

    from remote_cases import put_to_s3

    n = 64 * 64 * 40
    jnrrd.write(tmp_path / "v.jnrrd", np.arange(n, dtype=np.int64).reshape(64, 64, 40),
                tile=16, compression="zstd", storage="external")
    put_to_s3(s3, tmp_path, "d")
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_ALONE_SCRIPT), s3.url("d/v.jnrrd"),
         json.dumps(s3.storage_options), str(n)],
        capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
