"""Reading JNRRD and NRRD files by ``http://`` URL from tests/http_server.py (127.0.0.1).

What is proved, against a server that counts requests and bytes and injects faults:

- every kind of file (untiled, detached, internal contiguous/chunked/sparse, pyramids,
  external tiles, NRRD and detached NRRD) reads by URL exactly as from the local path, and
  ``open(url)[sel]`` equals the local read for seeded random selections;
- the requests are few: a region touching 64 tiles takes far fewer than 64 requests and
  about the touched tiles' bytes; a coarse level read fetches only that level's bytes;
  sparse tiles cost nothing; a 10⁶-tile header opens in at most 5 requests; several
  requests are in flight at once;
- failures (HTTP 500/403/404, a truncated body, a wrong Content-Range, an ignored Range,
  a stalled server, an object replaced under a reader) raise an error naming the URL
  (``RemoteError`` is a ``JnrrdError`` and an ``OSError``), within a bounded time, and never
  return wrong data; a transient failure is retried.

The files are written locally into the served directory: HTTP is read-only.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil

import numpy as np
import pytest
from http_server import RangeServer
from remote_cases import (
    BIG_TILE,
    KINDS,
    LEVELS,
    RNG_SEED,
    SHAPE,
    big_volume,
    covered,
    data_of,
    io_settings,
    many_tiles_file,
    random_selection,
    tile_ranges,
    values,
)

import jnrrd

pytest.importorskip("fsspec")
pytest.importorskip("aiohttp")

#: (and every test here runs through both backends of remote reads: tests/conftest.py)
pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("remote_backend")]

@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A directory holding one file of every kind (written once per module)."""
    root = tmp_path_factory.mktemp("site")
    for name, options in KINDS.items():
        jnrrd.write(root / name, data_of(name), **options)
    return root


@pytest.fixture(scope="module")
def module_server(site):
    with RangeServer(site) as server:
        yield server


@pytest.fixture
def web(module_server):
    """The module's server, counters at zero, no faults, no latency, no required headers."""
    module_server.clear_faults()
    module_server.latency = 0.0
    module_server.required_headers = {}
    module_server.reset()
    yield module_server
    module_server.clear_faults()
    module_server.required_headers = {}


# -- every kind, by URL as by path --------------------------------------------------------------

@pytest.mark.parametrize("name", KINDS)
def test_read_by_url_equals_local_read(web, site, name):
    url = web.url_for(name)
    local = values(jnrrd.read(site / name))
    np.testing.assert_array_equal(local, data_of(name))
    remote = values(jnrrd.read(url))
    assert remote.dtype == local.dtype
    np.testing.assert_array_equal(remote, local)
    assert dict(jnrrd.read_header(url)) == dict(jnrrd.read_header(site / name))
    assert web.requests > 0


@pytest.mark.parametrize("name", KINDS)
def test_open_selections_equal_local_reads(web, site, name):
    rng = np.random.default_rng([RNG_SEED, list(KINDS).index(name)])
    with jnrrd.open(site / name) as local, jnrrd.open(web.url_for(name)) as remote:
        assert remote.shape == local.shape and remote.dtype == local.dtype
        for _ in range(12):
            sel = random_selection(rng, local.shape)
            np.testing.assert_array_equal(remote[sel], local[sel], err_msg=str(sel))


@pytest.mark.parametrize("name", ["contiguous.jnrrd", "external.jnrrd", "sparse.jnrrd",
                                  "untiled.jnrrd"])
def test_orthogonal_indexing_and_tiles_by_url(web, site, name):
    rng = np.random.default_rng([RNG_SEED, 5, list(KINDS).index(name)])
    with jnrrd.open(site / name) as local, jnrrd.open(web.url_for(name)) as remote:
        for _ in range(4):
            sel = (np.sort(rng.choice(SHAPE[0], size=5, replace=False)),
                   slice(int(rng.integers(0, 40)), int(rng.integers(40, 80))),
                   rng.random(SHAPE[2]) < 0.3)
            np.testing.assert_array_equal(remote.oindex[sel], local.oindex[sel])
        if name != "untiled.jnrrd":
            for coords in [(0, 0, 0), (2, 1, 1), (1, 2, 0)]:
                np.testing.assert_array_equal(remote.read_tile(coords), local.read_tile(coords))


@pytest.mark.parametrize("name", LEVELS)
def test_levels_by_url(web, site, name):
    with jnrrd.open(web.url_for(name)) as remote, jnrrd.open(site / name) as local:
        assert len(remote.levels) == len(local.levels) == LEVELS[name]
        for k in range(LEVELS[name]):
            np.testing.assert_array_equal(values(jnrrd.read(web.url_for(name), level=k)),
                                          local.levels[k][...])
            np.testing.assert_array_equal(remote.levels[k][...], local.levels[k][...])


@pytest.mark.parametrize("name", ["contiguous.jnrrd", "external.jnrrd", "sparse.jnrrd"])
def test_validate_by_url(web, site, name):
    assert jnrrd.validate(web.url_for(name), deep=True) == []


@pytest.mark.parametrize("name", ["pyramid.jnrrd", "detached.jnrrd"])
def test_pickled_remote_volume_reopens_the_url(web, name):
    url = web.url_for(name)
    with jnrrd.open(url) as vol:
        clone = pickle.loads(pickle.dumps(vol))
        np.testing.assert_array_equal(clone[10:20, :, 5], vol[10:20, :, 5])
        assert clone.reopen.path == url


@pytest.mark.parametrize("name", ["external.jnrrd", "detached.jnrrd", "detached.nhdr",
                                  "pyramid.jnrrd"])
def test_storage_options_reach_every_request(web, name):
    """A server that wants a token: ``storage_options={"headers": ...}`` goes with the
    header's requests and with those of tiles and data files; without it, a 401 naming the
    URL."""
    web.required_headers = {"Authorization": "Bearer secret-16"}
    url = web.url_for(name)
    try:
        with pytest.raises(OSError) as info:
            jnrrd.open(url, io=io_settings(request_retries=0))
        assert_names(info.value, url)
        assert "401" in str(info.value)
        web.reset()
        got = values(jnrrd.read(url, storage_options={
            "headers": {"Authorization": "Bearer secret-16"}}))
    finally:
        web.required_headers = {}
    np.testing.assert_array_equal(got, data_of(name))
    assert web.requests > 1 and all(r.status in (200, 206) for r in web.records)


def test_file_url_is_a_local_path(web, site):
    url = (site / "pyramid.jnrrd").as_uri()
    np.testing.assert_array_equal(values(jnrrd.read(url)), data_of("pyramid.jnrrd"))
    assert web.requests == 0


def test_missing_object_is_file_not_found_naming_the_url(web):
    url = web.url_for("nothing-here.jnrrd")
    with pytest.raises(FileNotFoundError, match="nothing-here.jnrrd"):
        jnrrd.open(url)


# -- requests: few, concurrent, only the bytes needed -------------------------------------------



@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """The 256³ volume (tests/remote_cases.py) and a server of it."""
    root = tmp_path_factory.mktemp("big")
    a = big_volume(root / "big.jnrrd")
    with RangeServer(root) as server:
        yield server, a


def test_region_touching_64_tiles_takes_far_fewer_requests(big):
    """The 200³-of-512³ case at half scale: 100³ at offset 50 touches tiles 1..4 on each
    axis (64 tiles); neighbours in the file share requests."""
    server, a = big
    with jnrrd.open(server.url_for("big.jnrrd"), cache_bytes=0) as vol:
        touched = tile_ranges(vol, 0, 50 // BIG_TILE, 149 // BIG_TILE)
        assert len(touched) == 64
        server.reset()
        np.testing.assert_array_equal(vol[50:150, 50:150, 50:150], a[50:150, 50:150, 50:150])
    assert server.counts["GET"] <= 16, server.counts
    assert covered(touched, server.ranges())
    need = sum(b - a for a, b in touched)
    assert need <= server.bytes_sent <= 1.1 * need


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_region_of_the_full_size_volume(tmp_path):
    """The issue's own case: a 200³ region of a 512³ zstd uint16 file with 64³ tiles (64
    tiles touched) in far fewer requests than 64, and at most 1.1× the touched bytes."""
    a = big_volume(tmp_path / "v.jnrrd", n=512, tile=64)
    with RangeServer(tmp_path) as server:
        with jnrrd.open(server.url_for("v.jnrrd"), cache_bytes=0) as vol:
            touched = tile_ranges(vol, 0, 100 // 64, 299 // 64)
            assert len(touched) == 64
            server.reset()
            got = vol[100:300, 100:300, 100:300]
            ranges, sent, gets = server.ranges(), server.bytes_sent, server.counts["GET"]
    np.testing.assert_array_equal(got, a[100:300, 100:300, 100:300])
    # 16 runs of 4 neighbouring tiles (~2 MB each); long runs may be cut into pieces so
    # that several connections carry them (measured: 24 requests)
    assert gets <= 32, gets
    assert covered(touched, ranges)
    need = sum(e - s for s, e in touched)
    assert need <= sent <= 1.1 * need


def test_coarse_level_read_fetches_only_that_level(big):
    server, a = big
    with jnrrd.open(server.url_for("big.jnrrd"), cache_bytes=0) as vol:
        mine = tile_ranges(vol, 2)
        others = tile_ranges(vol, 0) + tile_ranges(vol, 1)
        server.reset()
        coarse = vol.levels[2][...]
        got = server.ranges()
    np.testing.assert_array_equal(coarse, values(jnrrd.read(server.url_for("big.jnrrd"),
                                                            level=2)))
    assert got and covered(mine, got)
    lo, hi = mine[0][0], max(b for _, b in mine)
    for s, e in got:  # within level 2's span, overlapping no tile of levels 0 and 1
        assert lo <= s and e <= hi, (s, e, lo, hi)
        assert not any(s < b and a < e for a, b in others)


def test_full_read_keeps_several_requests_in_flight(big):
    server, a = big
    server.latency = 0.1  # long enough that a loaded machine still overlaps the requests
    try:
        with jnrrd.open(server.url_for("big.jnrrd"), cache_bytes=0) as vol:
            server.reset()
            # the last axis varies slowest in the file: half of it is one run of bytes
            np.testing.assert_array_equal(vol[:, :, :128], a[:, :, :128])
    finally:
        server.latency = 0.0
    assert server.max_in_flight >= 2, server.max_in_flight
    assert server.counts["GET"] <= 16  # ~8 MB of level 0 in pieces of at least 1 MiB


def test_repeated_region_is_served_by_the_tile_cache(big):
    server, a = big
    with jnrrd.open(server.url_for("big.jnrrd"), cache_bytes=64 << 20) as vol:
        vol[0:40, 0:40, 0:40]
        server.reset()
        np.testing.assert_array_equal(vol[0:40, 0:40, 0:40], a[0:40, 0:40, 0:40])
    assert server.requests == 0


def test_sparse_tiles_cost_no_request(web):
    with jnrrd.open(web.url_for("sparse.jnrrd"), cache_bytes=0) as vol:
        web.reset()
        assert not vol[:48, :32, :].any()  # all-zero tiles: none stored
        assert web.requests == 0
        np.testing.assert_array_equal(vol[48:, 40:, :], data_of("sparse.jnrrd")[48:, 40:, :])


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    """A server of ``many.jnrrd``: 10⁶ one-voxel tiles, a ~14 MB header."""
    root = tmp_path_factory.mktemp("many")
    (root / "many.jnrrd").write_bytes(many_tiles_file(10**6))
    with RangeServer(root) as server:
        yield server


@pytest.mark.slow
def test_open_of_a_million_tile_header_is_bounded(many):
    many.clear_faults()
    many.reset()
    with jnrrd.open(many.url_for("many.jnrrd")) as vol:
        assert vol.shape == (10**6,)
        assert many.requests <= 5, many.records
        got = vol[123_456:123_460]
    np.testing.assert_array_equal(got, np.arange(123_456, 123_460) % 251)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("fault", ["500", "truncated", "wrong Content-Range", "stalled"])
def test_fault_while_the_header_grows(many, fault):
    """The first block arrives; a later block of the header fails: an error naming the URL."""
    kind, options = FAULTS[fault]
    many.clear_faults()
    many.fail(kind, skip=1, **options)
    url = many.url_for("many.jnrrd")
    try:
        with pytest.raises(OSError) as info:
            jnrrd.open(url, **fast_fail(kind))
    finally:
        many.clear_faults()
    assert_names(info.value, url)


@pytest.mark.timeout(30)
def test_a_header_block_retried_after_a_truncation(many):
    many.clear_faults()
    many.fail("truncate", skip=1, times=1)
    with jnrrd.open(many.url_for("many.jnrrd"), io=io_settings(request_retries=2)) as vol:
        np.testing.assert_array_equal(vol[-3:], np.arange(10**6 - 3, 10**6) % 251)
    assert many.faults == []


LARGE = (160, 160, 160)  # uint16, raw: an 8 MB data section, read in concurrent pieces


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    root = tmp_path_factory.mktemp("large")
    a = np.random.default_rng(RNG_SEED).integers(0, 2**16, size=LARGE, dtype=np.uint16)
    jnrrd.write(root / "large.jnrrd", a)
    with RangeServer(root) as server:
        yield server, a


def test_large_untiled_read_takes_concurrent_pieces(large):
    server, a = large
    server.clear_faults()
    server.latency = 0.1  # long enough that a loaded machine still overlaps the requests
    try:
        server.reset()
        np.testing.assert_array_equal(values(jnrrd.read(server.url_for("large.jnrrd"))), a)
    finally:
        server.latency = 0.0
    assert server.max_in_flight >= 2, server.max_in_flight
    assert server.counts["GET"] <= 16, server.counts
    assert server.bytes_sent <= 1.1 * a.nbytes


@pytest.mark.timeout(30)
@pytest.mark.parametrize("fault", ["500", "truncated", "wrong Content-Range", "Range ignored"])
def test_fault_in_a_large_untiled_read(large, fault):
    server, _ = large
    kind, options = FAULTS[fault]
    url = server.url_for("large.jnrrd")
    server.clear_faults()
    server.fail(kind, skip=1, **options)
    try:
        with pytest.raises(OSError) as info:
            jnrrd.read(url, **fast_fail(kind))
    finally:
        server.clear_faults()
    assert_names(info.value, url)
    assert "bytes" in str(info.value)


@pytest.mark.timeout(30)
def test_large_untiled_read_retries_a_truncated_piece(large):
    server, a = large
    server.clear_faults()
    server.fail("truncate", skip=2, times=1)
    got = values(jnrrd.read(server.url_for("large.jnrrd"), io=io_settings(request_retries=2)))
    np.testing.assert_array_equal(got, a)
    assert server.faults == []


# -- failures -----------------------------------------------------------------------------------

#: no retries; a timeout that a loaded machine meets, except where a stall is the point
FAST_FAIL = {"request_retries": 0, "request_timeout": 5.0}
STALL_TIMEOUT = 0.5
FAULTS = {
    "500": ("status", {"status": 500}),
    "403": ("status", {"status": 403}),
    "truncated": ("truncate", {}),
    "wrong Content-Range": ("wrong_range", {"shift": 7}),
    "Range ignored": ("ignore_range", {}),
    "stalled": ("stall", {"seconds": 20}),
}


def fast_fail(kind: str) -> dict:
    """The reader keywords of a fast failure (``io=``)."""
    knobs = {**FAST_FAIL, "request_timeout": STALL_TIMEOUT} if kind == "stall" else FAST_FAIL
    return {"io": io_settings(**knobs)}


def assert_names(exc: BaseException, url: str) -> None:
    assert isinstance(exc, OSError) and isinstance(exc, jnrrd.JnrrdError), type(exc).__mro__
    assert url in str(exc), str(exc)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("fault", FAULTS)
def test_fault_at_open_is_an_error_naming_the_url(web, fault):
    kind, options = FAULTS[fault]
    url = web.url_for("contiguous.jnrrd")
    web.fail(kind, **options)
    with pytest.raises(OSError) as info:
        jnrrd.open(url, **fast_fail(kind))
    assert_names(info.value, url)


#: (file, fault) pairs: every fault on every layout, but one stall (each waits for the
#: timeout), and no ignored Range on external tiles (fetched whole: a 200 is their right
#: answer, tested below)
READ_FAULTS = [(name, fault) for name in ("contiguous.jnrrd", "untiled.jnrrd", "external.jnrrd")
               for fault in FAULTS
               if not (name == "external.jnrrd" and FAULTS[fault][0] == "ignore_range")
               and not (name != "contiguous.jnrrd" and FAULTS[fault][0] == "stall")]


@pytest.mark.slow
@pytest.mark.timeout(30)
@pytest.mark.parametrize(("name", "fault"), READ_FAULTS)
def test_fault_during_a_read_is_an_error_naming_the_url_and_range(web, name, fault):
    kind, options = FAULTS[fault]
    with jnrrd.open(web.url_for(name), cache_bytes=0, **fast_fail(kind)) as vol:
        web.fail(kind, **options)
        with pytest.raises(OSError) as info:
            vol[...]
    assert isinstance(info.value, jnrrd.JnrrdError), type(info.value).__mro__
    assert web.url in str(info.value) and "bytes" in str(info.value), str(info.value)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("fault", ["500", "truncated"])
def test_transient_faults_are_retried_to_the_right_data(web, fault):
    kind, options = FAULTS[fault]
    with jnrrd.open(web.url_for("contiguous.jnrrd"), cache_bytes=0,
                    io=io_settings(request_retries=2, request_timeout=5.0)) as vol:
        web.fail(kind, times=1, **options)
        np.testing.assert_array_equal(vol[...], data_of("contiguous.jnrrd"))
    assert web.faults == []  # the fault was met


@pytest.mark.timeout(30)
@pytest.mark.parametrize("knob", ["request_timeout", "read_timeout"])
def test_a_timeout_is_not_retried(web, knob):
    """A silent server fails once, in the timeout: retrying it would multiply the wait."""
    with jnrrd.open(web.url_for("contiguous.jnrrd"), cache_bytes=0,
                    io=io_settings(request_retries=2, **{knob: STALL_TIMEOUT})) as vol:
        stall = web.fail("stall", seconds=20)
        with pytest.raises(jnrrd.RemoteError, match=knob):
            vol[...]
    assert stall.met and len(stall.met) == len(set(stall.met))  # one try per range


@pytest.mark.timeout(30)
def test_403_is_not_retried(web):
    with jnrrd.open(web.url_for("contiguous.jnrrd"), cache_bytes=0,
                    io=io_settings(request_retries=3)) as vol:
        web.fail("status", status=403)
        web.reset()
        with pytest.raises(jnrrd.JnrrdError, match="403"):
            vol[...]
    assert web.counts["GET"] == len({r.range for r in web.records})  # one try per range


def test_external_tiles_from_a_server_without_ranges(web):
    with jnrrd.open(web.url_for("external.jnrrd"), cache_bytes=0) as vol:
        web.fail("ignore_range")
        np.testing.assert_array_equal(vol[...], data_of("external.jnrrd"))


def test_a_small_file_served_whole_is_accepted(http_server, tmp_path):
    """A server that ignores Range is fine when the whole object fits the first request."""
    a = np.arange(60, dtype=np.uint8).reshape(3, 4, 5)
    jnrrd.write(tmp_path / "small.jnrrd", a, tile=2, compression="zstd")
    http_server.fail("ignore_range")
    np.testing.assert_array_equal(values(jnrrd.read(http_server.url_for("small.jnrrd"))), a)


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_object_replaced_under_a_reader_is_a_data_error_not_wrong_data(http_server, tmp_path,
                                                                       compression):
    """Uncompressed, the new file has the same size and tile offsets: only the version
    token (ETag) tells the reader; with zstd the tiles move too."""
    a = data_of("contiguous.jnrrd")
    jnrrd.write(http_server.root / "v.jnrrd", a, tile=32, compression=compression)
    url = http_server.url_for("v.jnrrd")
    with jnrrd.open(url, cache_bytes=0) as vol:
        first = vol[:2, :2, :2]
        size = (http_server.root / "v.jnrrd").stat().st_size
        jnrrd.write(http_server.root / "v.jnrrd", a[::-1].copy(), tile=32,
                    compression=compression)
        assert compression or (http_server.root / "v.jnrrd").stat().st_size == size
        with pytest.raises(jnrrd.DataError) as info:
            vol[...]
    assert url in str(info.value)
    if compression is None:
        assert "changed" in str(info.value)
    np.testing.assert_array_equal(first, a[:2, :2, :2])


def test_missing_external_tile_fails_as_locally(http_server, site):
    shutil.copytree(site, http_server.root / "copy")
    tiles = sorted((http_server.root / "copy").glob("external.*/0/*.tile"))
    os.remove(tiles[0])
    local = http_server.root / "copy" / "external.jnrrd"
    with pytest.raises(Exception) as expected:
        jnrrd.read(local)
    with pytest.raises(type(expected.value)) as info:
        jnrrd.read(http_server.url_for("copy/external.jnrrd"))
    assert tiles[0].name in str(info.value)


# -- paths inside a header stay under the header's URL ------------------------------------------

def detached_header(data_file: str) -> bytes:
    fields = [{"jnrrd": "0004"}, {"type": "uint8"}, {"dimension": 2}, {"sizes": [3, 4]},
              {"encoding": "raw"}, {"data_file": data_file}]
    return "".join(json.dumps(f) + "\n" for f in fields).encode() + b"\n"


@pytest.mark.parametrize("how", ["parent", "absolute", "other host", "same host URL"])
def test_header_paths_cannot_leave_the_headers_prefix(http_server, how):
    secret = bytes(range(12))
    (http_server.root / "secret.raw").write_bytes(secret)
    (http_server.root / "sub").mkdir()
    with RangeServer({"secret.raw": secret}) as other:
        data_file = {"parent": "../secret.raw", "absolute": "/secret.raw",
                     "other host": other.url_for("secret.raw"),
                     "same host URL": http_server.url_for("secret.raw")}[how]
        (http_server.root / "sub" / "h.jnrrd").write_bytes(detached_header(data_file))
        with pytest.raises(jnrrd.SecurityError):
            jnrrd.read(http_server.url_for("sub/h.jnrrd"))
        assert other.requests == 0
    assert all(r.path != "/secret.raw" for r in http_server.records)
    if how in ("parent", "absolute"):  # the policy's opt-ins reach it on the same host
        opt = {"allow_parent": True} if how == "parent" else {"allow_absolute": True}
        got = values(jnrrd.read(http_server.url_for("sub/h.jnrrd"), **opt))
        np.testing.assert_array_equal(got, np.frombuffer(secret, np.uint8).reshape(4, 3).T)
