"""Remote reads through fsspec's ``memory://`` filesystem: the store, the stream, the merged
requests, confinement, re-opening (no server needed; HTTP and S3: test_remote_http/s3)."""

from __future__ import annotations

import builtins
import os
import pickle
import sys

import numpy as np
import pytest

import jnrrd
from jnrrd.policy import Policy
from jnrrd.storage.remote import RemoteStore, filesystem, is_remote, local_path
from jnrrd.storage.remote_fetch import MAX_PIECE, MIN_PIECE, plan_requests

#: every test here runs through both backends of remote reads (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("remote_backend")

fsspec = pytest.importorskip("fsspec")


@pytest.fixture
def mem():
    """A fresh directory on fsspec's memory filesystem, removed afterwards."""
    fs = fsspec.filesystem("memory")
    root = f"/t{os.getpid()}_{id(fs)}_{np.random.default_rng().integers(1 << 30)}"
    yield fs, root
    try:
        fs.rm(root, recursive=True)
    except FileNotFoundError:
        pass


def _upload(fs, root: str, local_dir) -> None:
    for dirpath, _, names in os.walk(local_dir):
        for n in names:
            full = os.path.join(dirpath, n)
            rel = os.path.relpath(full, local_dir).replace(os.sep, "/")
            with builtins.open(full, "rb") as f:
                fs.pipe(f"{root}/{rel}", f.read())


def _volume(seed: int = 0, shape=(70, 60, 50)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 4000, shape).astype(np.uint16)


WRITES = {
    "untiled.jnrrd": {},
    "untiled-gzip.jnrrd": {"encoding": "gzip"},
    "detached.jnrrd": {"detached": True},
    "contiguous.jnrrd": {"tile": 16, "compression": "zstd", "levels": 2},
    "chunked.jnrrd": {"tile": 16, "compression": "gzip", "tile_format": "chunked"},
    "raw-tiles.jnrrd": {"tile": 16},
    "external.jnrrd": {"tile": 16, "compression": "lz4", "storage": "external"},
    "classic.nrrd": {"encoding": "gzip"},
    "classic.nhdr": {},
}


@pytest.mark.parametrize("name", sorted(WRITES))
def test_round_trip_by_url(mem, tmp_path, name) -> None:
    fs, root = mem
    data = _volume()
    jnrrd.write(tmp_path / name, data, **WRITES[name])
    _upload(fs, root, tmp_path)
    url = f"memory://{root}/{name}"
    got, header = jnrrd.read(url)
    np.testing.assert_array_equal(got, data)
    assert header == jnrrd.read_header(tmp_path / name)
    with jnrrd.open(url) as vol:
        rng = np.random.default_rng(1)
        for _ in range(5):
            lo = [int(rng.integers(0, s - 1)) for s in data.shape]
            hi = [int(rng.integers(a + 1, s + 1)) for a, s in zip(lo, data.shape, strict=True)]
            sel = tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))
            np.testing.assert_array_equal(vol[sel], data[sel])
        local = jnrrd.open(tmp_path / name)
        for k in range(1, len(vol.levels)):
            np.testing.assert_array_equal(vol.levels[k][...], local.levels[k][...])
        local.close()


def test_url_volume_defaults_to_a_cache_and_pickles(mem, tmp_path) -> None:
    fs, root = mem
    data = _volume(2)
    jnrrd.write(tmp_path / "v.jnrrd", data, tile=16, compression="zstd")
    _upload(fs, root, tmp_path)
    vol = jnrrd.open(f"memory://{root}/v.jnrrd")
    assert vol.cache_bytes == 256 << 20
    vol[0:20, 0:20, 0:20]
    vol[0:20, 0:20, 0:20]
    assert vol.cache_info().hits > 0
    again = pickle.loads(pickle.dumps(vol))
    np.testing.assert_array_equal(again[...], data)
    # the object replaced: the re-opened volume's version differs
    jnrrd.write(tmp_path / "w.jnrrd", data + 1, tile=16, compression="zstd")
    fs.pipe(f"{root}/v.jnrrd", (tmp_path / "w.jnrrd").read_bytes())
    with pytest.raises(jnrrd.DataError, match="changed"):
        pickle.loads(pickle.dumps(vol))


def test_file_url_is_a_local_path(tmp_path) -> None:
    data = _volume(3, (8, 9, 10))
    jnrrd.write(tmp_path / "f.jnrrd", data)
    got, _ = jnrrd.read("file://" + str(tmp_path / "f.jnrrd"))
    np.testing.assert_array_equal(got, data)
    assert local_path("file:///a/b%20c.jnrrd") == "/a/b c.jnrrd"
    assert not is_remote("file:///x") and is_remote("s3://b/x") and not is_remote("x.jnrrd")


def test_storage_options_need_a_url(tmp_path) -> None:
    jnrrd.write(tmp_path / "f.jnrrd", _volume(4, (4, 4, 4)))
    with pytest.raises(TypeError, match="storage_options"):
        jnrrd.open(tmp_path / "f.jnrrd", storage_options={"anon": True})


def test_missing_fsspec_names_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "fsspec.core", None)
    with pytest.raises(jnrrd.errors.MissingDependencyError, match=r"jnrrd\[remote\]"):
        jnrrd.open("memory://nothing/here.jnrrd")


def test_unknown_protocol_is_a_jnrrd_error() -> None:
    with pytest.raises(jnrrd.JnrrdError, match="nosuchproto"):
        filesystem("nosuchproto://bucket/x.jnrrd")


def test_missing_object_is_file_not_found(mem) -> None:
    _, root = mem
    with pytest.raises(FileNotFoundError):
        jnrrd.open(f"memory://{root}/absent.jnrrd")


# -- confinement ---------------------------------------------------------------------------------

@pytest.mark.parametrize("key", ["https://elsewhere.example/x.raw", "s3://other/x.raw",
                                 "../x.raw", "a/../../x.raw", "/abs/x.raw", "a\x00b",
                                 "a\\b.raw", ""])
def test_header_paths_are_confined(key) -> None:
    fs = fsspec.filesystem("memory")
    store = RemoteStore(fs, "/bucket/dir", Policy(), source="memory://bucket/dir/h.jnrrd")
    with pytest.raises(jnrrd.SecurityError):
        store.path(key, field="data_file")


def test_header_paths_resolve_under_the_header() -> None:
    fs = fsspec.filesystem("memory")
    store = RemoteStore(fs, "/bucket/dir", Policy())
    assert store.path("t/0_0.tile") == "/bucket/dir/t/0_0.tile"
    assert store.path("t/../x.raw") == "/bucket/dir/x.raw"
    opened = RemoteStore(fs, "/bucket/dir", Policy(allow_parent=True, allow_absolute=True))
    assert opened.path("../x.raw") == "/bucket/x.raw"
    assert opened.path("/other/x.raw") == "/other/x.raw"
    s3 = RemoteStore(fs, "bucket/dir", Policy(allow_absolute=True))
    assert s3.path("/other/x.raw") == "bucket/other/x.raw"  # same bucket
    http = RemoteStore(fs, "https://host/a/b", Policy(allow_parent=True))
    assert http.path("c/d.tile") == "https://host/a/b/c/d.tile"
    assert http.path("../d.tile") == "https://host/a/d.tile"


def test_detached_data_outside_the_header_is_refused(mem, tmp_path) -> None:
    fs, root = mem
    fs.pipe(f"{root}/sub/evil.jnrrd",
            b'{"jnrrd": "0004"}\n{"type": "uint8"}\n{"dimension": 1}\n{"sizes": [4]}\n'
            b'{"encoding": "raw"}\n{"data_file": "../secret.raw"}\n\n')
    fs.pipe(f"{root}/secret.raw", b"\x01\x02\x03\x04")
    with pytest.raises(jnrrd.SecurityError, match="allow_parent"):
        jnrrd.read(f"memory://{root}/sub/evil.jnrrd")
    got, _ = jnrrd.read(f"memory://{root}/sub/evil.jnrrd", allow_parent=True)
    assert got.tolist() == [1, 2, 3, 4]


# -- request planning ----------------------------------------------------------------------------

def test_plan_merges_neighbours_and_keeps_far_ranges_apart() -> None:
    ranges = [(300, 400), (0, 100), (100, 200), (10_000, 10_100), (150, 180)]
    plan = plan_requests(ranges, gap=50, concurrency=4)
    assert [(p.start, p.stop) for p in plan] == [(0, 200), (300, 400), (10_000, 10_100)]
    assert sorted(m for p in plan for m in p.members) == [0, 1, 2, 3, 4]
    assert plan_requests(ranges, gap=200, concurrency=4)[0].stop == 400


def test_plan_keeps_runs_whole_when_they_fill_the_connections() -> None:
    tile = 400 << 10
    # 16 runs of 4 contiguous tiles, far apart: 16 requests, none cut (one round trip)
    ranges = [(r * 100 * tile + t * tile, r * 100 * tile + (t + 1) * tile)
              for r in range(16) for t in range(4)]
    plan = plan_requests(ranges, gap=64 << 10, concurrency=16)
    assert len(plan) == 16 and all(len(p.members) == 4 for p in plan)
    # 8 such runs leave connections idle: the runs are cut to use them
    assert len(plan_requests(ranges[:32], gap=64 << 10, concurrency=16)) > 8


def test_plan_cuts_long_runs_for_several_connections() -> None:
    tile = 256 << 10
    ranges = [(i * tile, (i + 1) * tile) for i in range(512)]  # 128 MiB, contiguous
    plan = plan_requests(ranges, gap=0, concurrency=16)
    assert len(plan) >= 16
    for p in plan:
        assert p.stop - p.start <= max(MIN_PIECE, min(MAX_PIECE, (128 << 20) // 16))
    assert [m for p in plan for m in p.members] == list(range(512))


def test_memory_reads_fetch_only_what_a_selection_touches(mem, tmp_path, monkeypatch) -> None:
    fs, root = mem
    data = _volume(5, (64, 64, 64))
    jnrrd.write(tmp_path / "v.jnrrd", data, tile=16, compression="zstd", levels=2)
    _upload(fs, root, tmp_path)
    seen: list[tuple[int, int]] = []
    real = type(fs).cat_file

    def counting(self, path, start=None, end=None, **kw):
        seen.append((start, end))
        return real(self, path, start=start, end=end, **kw)

    monkeypatch.setattr(type(fs), "cat_file", counting)
    vol = jnrrd.open(f"memory://{root}/v.jnrrd", cache_bytes=0)
    opened = len(seen)
    assert opened <= 2  # the header is inside the first block
    seen.clear()
    level = vol.levels[1]
    np.testing.assert_array_equal(level[...], jnrrd.read(tmp_path / "v.jnrrd", level=1)[0])
    spans = [loc for _, loc in level.tile_locations() if loc is not None]
    lo = min(s.offset for s in spans)
    hi = max(s.offset + s.size for s in spans)
    for a, b in seen:  # the coarse level's bytes only (or the first block's)
        assert a >= lo and b <= hi


@pytest.mark.parametrize("knob", [{"request_concurrency": 0}, {"coalesce_gap": -1},
                                  {"request_timeout": 0}, {"request_retries": 1.5},
                                  {"request_concurrency": True}])
def test_remote_knobs_are_checked(knob) -> None:
    with pytest.raises(ValueError, match=next(iter(knob))):
        jnrrd.open("memory://nothing/x.jnrrd", io=jnrrd.IOSettings(**knob))


def test_parts_resolve_as_the_body_arrives_and_a_short_body_is_an_error() -> None:
    import asyncio

    from jnrrd.storage.bodies import LongBody, ShortBody, read_exact
    from jnrrd.storage.remote_fetch import Parts

    body = bytes(range(200)) * 5  # 1000 bytes
    parts = [(0, 100), (100, 400), (400, 1000), (50, 60)]
    sink = Parts(parts)
    chunks = [body[:120], body[120:500], body[500:]]
    seen = []

    async def read(n):
        seen.append([f.done() for f in sink.futures])
        return chunks.pop(0) if chunks else b""

    buf = asyncio.run(read_exact(read, 1000, sink))
    assert bytes(buf) == body
    # before the second chunk, the parts inside the first 120 bytes were already handed out
    assert seen[1] == [True, False, False, True]
    for (a, b), fut in zip(parts, sink.futures, strict=True):
        assert bytes(fut.result()) == body[a:b]

    short = Parts([(0, 10), (10, 1000)])
    pieces = [body[:500]]

    async def read_short(n):
        return pieces.pop(0) if pieces else b""

    with pytest.raises(ShortBody, match="ended early"):
        asyncio.run(read_exact(read_short, 1000, short))
    assert short.futures[0].done() and not short.futures[1].done()

    long = Parts([(0, 10), (10, 1000)])
    pieces = [body[:500], body + body[:1]]

    with pytest.raises(LongBody, match="more than the 1000 bytes"):
        asyncio.run(read_exact(read_short, 1000, long))
    assert long.futures[0].done() and not long.futures[1].done()
