"""The test servers themselves (tests/http_server.py, tests/s3_server.py): range semantics,
counters, latency, every fault, ETags, and round trips through the real clients (fsspec's
HTTPFileSystem over aiohttp, s3fs over moto). The remote-data tests rely on all of it."""

from __future__ import annotations

import http.client
import socket
import threading
import time

import pytest
from http_server import RangeServer, parse_range

pytestmark = pytest.mark.timeout(60)

DATA = bytes(range(256)) * 40  # 10240 bytes, every offset distinguishable mod 256
N = len(DATA)


@pytest.fixture
def served(http_server):
    (http_server.root / "d").mkdir()
    (http_server.root / "d" / "v.bin").write_bytes(DATA)
    return http_server


def get(server: RangeServer, path: str, method: str = "GET", timeout: float = 10,
        **headers: str) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        conn.request(method, path, headers={k.replace("_", "-"): v for k, v in headers.items()})
        answer = conn.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read()
    finally:
        conn.close()


# -- ranges -------------------------------------------------------------------------------------

RANGE_CASES = {
    "none": (None, 200, None, DATA),
    "closed": ("bytes=10-19", 206, f"bytes 10-19/{N}", DATA[10:20]),
    "one byte": ("bytes=0-0", 206, f"bytes 0-0/{N}", DATA[:1]),
    "open": ("bytes=10000-", 206, f"bytes 10000-{N - 1}/{N}", DATA[10000:]),
    "suffix": ("bytes=-7", 206, f"bytes {N - 7}-{N - 1}/{N}", DATA[-7:]),
    "suffix longer than file": (f"bytes=-{N + 5}", 206, f"bytes 0-{N - 1}/{N}", DATA),
    "end past the file": ("bytes=10200-99999", 206, f"bytes 10200-{N - 1}/{N}", DATA[10200:]),
    "last byte": (f"bytes={N - 1}-{N - 1}", 206, f"bytes {N - 1}-{N - 1}/{N}", DATA[-1:]),
    "start at size": (f"bytes={N}-", 416, f"bytes */{N}", b""),
    "start past size": (f"bytes={N + 10}-{N + 20}", 416, f"bytes */{N}", b""),
    "empty suffix": ("bytes=-0", 416, f"bytes */{N}", b""),
    "several ranges": ("bytes=0-1,4-5", 200, None, DATA),
    "malformed": ("bytes=a-b", 200, None, DATA),
    "reversed": ("bytes=9-3", 200, None, DATA),
    "other unit": ("items=0-1", 200, None, DATA),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", RANGE_CASES)
def test_get_range_semantics(served, case):
    header, status, content_range, body = RANGE_CASES[case]
    extra = {} if header is None else {"Range": header}
    got_status, headers, got = get(served, "/d/v.bin", **extra)
    assert got_status == status
    assert headers.get("Content-Range") == content_range
    assert got == body
    assert int(headers["Content-Length"]) == len(body)


def test_parse_range_of_an_empty_file_is_unsatisfiable():
    assert parse_range("bytes=0-", 0) == "416"
    assert parse_range("bytes=-3", 0) == "416"
    assert parse_range(None, 0) is None


def test_head_gives_the_headers_and_no_body(served):
    status, headers, body = get(served, "/d/v.bin", method="HEAD")
    assert (status, body) == (200, b"")
    assert headers["Content-Length"] == str(N)
    assert headers["Accept-Ranges"] == "bytes"
    assert headers["ETag"].startswith('"') and headers["ETag"].endswith('"')
    assert headers["Last-Modified"].endswith("GMT")
    assert served.counts == {"HEAD": 1} and served.bytes_sent == 0
    assert served.max_in_flight == 1


@pytest.mark.parametrize("path", ["/d/missing.bin", "/d", "/", "/../etc/passwd",
                                  "/d/%2e%2e/%2e%2e/x"])
def test_missing_files_directories_and_escapes_are_404(served, path):
    assert get(served, path)[0] == 404
    assert get(served, path, method="HEAD")[0] == 404


def test_keep_alive_serves_many_requests_on_one_connection_with_nodelay(served):
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    try:
        bodies = []
        for start in range(0, 100, 10):
            conn.request("GET", "/d/v.bin", headers={"Range": f"bytes={start}-{start + 9}"})
            if start == 0:
                sock = conn.sock
            bodies.append(conn.getresponse().read())
            assert conn.sock is sock  # the same connection
        assert b"".join(bodies) == DATA[:100]
        (accepted,) = served._sockets
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        conn.close()


def test_query_strings_and_percent_encoding(http_server):
    (http_server.root / "a b.bin").write_bytes(b"xyz")
    assert http_server.url_for("a b.bin").endswith("/a%20b.bin")
    assert http_server.url_for(http_server.root / "a b.bin") == http_server.url_for("a b.bin")
    assert get(http_server, "/a%20b.bin?x=1")[2] == b"xyz"


# -- counters and latency -----------------------------------------------------------------------

def test_counters_records_and_reset(served):
    get(served, "/d/v.bin", Range="bytes=0-99")
    get(served, "/d/v.bin", Range="bytes=-10")
    get(served, "/d/v.bin")
    get(served, "/d/v.bin", method="HEAD")
    get(served, "/nope")
    assert served.counts == {"GET": 4, "HEAD": 1} and served.requests == 5
    assert served.bytes_sent == 100 + 10 + N + len(b"404 /nope\n")
    assert served.ranges("/d/v.bin") == [(0, 100), (N - 10, N), (0, N)]
    assert [(r.method, r.path, r.range, r.status) for r in served.records] == [
        ("GET", "/d/v.bin", (0, 100), 206), ("GET", "/d/v.bin", (N - 10, N), 206),
        ("GET", "/d/v.bin", None, 200), ("HEAD", "/d/v.bin", None, 200),
        ("GET", "/nope", None, 404)]
    assert served.records[0].range_header == "bytes=0-99"
    stats = served.stats()
    assert stats["requests"] == 5 and stats["records"][0]["range"] == (0, 100)
    served.reset()
    assert (served.requests, served.bytes_sent, served.records) == (0, 0, [])


def test_latency_delays_every_response(served):
    served.latency = 0.05
    for _ in range(3):
        t0 = time.monotonic()
        assert get(served, "/d/v.bin", Range="bytes=0-0")[0] == 206
        assert time.monotonic() - t0 >= 0.05
    served.latency = 0.0


def test_concurrent_requests_are_served_in_parallel(served):
    """Threaded: 8 requests with 0.2 s latency each end well before 8 × 0.2 s."""
    served.latency = 0.2
    results = []
    threads = [threading.Thread(target=lambda i=i: results.append(
        get(served, "/d/v.bin", Range=f"bytes={i}-{i}")[2])) for i in range(8)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(results) == [DATA[i:i + 1] for i in range(8)]
    assert time.monotonic() - t0 < 8 * 0.2
    assert served.requests == 8
    assert served.max_in_flight > 1


# -- faults -------------------------------------------------------------------------------------

@pytest.mark.parametrize("status", [500, 403, 503])
def test_status_fault_for_one_path_a_number_of_times(served, status):
    (served.root / "other.bin").write_bytes(b"ok")
    served.fail("status", "/d/v.bin", status=status, times=2)
    assert get(served, "/other.bin")[0] == 200
    assert get(served, "/d/v.bin", Range="bytes=0-9")[0] == status
    assert get(served, "/d/v.bin", method="HEAD")[0] == status
    assert get(served, "/d/v.bin", Range="bytes=0-9")[:1] == (206,)
    assert served.faults == []


def test_fault_after_letting_requests_through(served):
    served.fail("status", status=500, skip=2, times=1)
    assert [get(served, "/d/v.bin")[0] for _ in range(4)] == [200, 200, 500, 200]


def test_fault_for_all_paths_until_cleared(served):
    served.fail("status", status=500)
    for _ in range(3):
        assert get(served, "/d/v.bin")[0] == 500
    served.clear_faults()
    assert get(served, "/d/v.bin")[0] == 200


def test_fault_methods(served):
    served.fail("status", methods=("HEAD",))
    assert get(served, "/d/v.bin", method="HEAD")[0] == 500
    assert get(served, "/d/v.bin")[0] == 200


def test_required_headers(served):
    served.required_headers = {"Authorization": "Bearer t"}
    assert get(served, "/d/v.bin")[0] == 401
    assert get(served, "/d/v.bin", Authorization="Bearer x")[0] == 401
    assert get(served, "/d/v.bin", Range="bytes=0-1", Authorization="Bearer t")[2] == DATA[:2]


def test_unknown_fault_is_refused(served):
    with pytest.raises(ValueError, match="unknown fault"):
        served.fail("explode")


@pytest.mark.parametrize("keep", [None, 0, 5])
def test_truncated_body_closes_the_connection_early(served, keep):
    served.fail("truncate", "d/v.bin", keep=keep)
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    try:
        conn.request("GET", "/d/v.bin", headers={"Range": "bytes=100-299"})
        answer = conn.getresponse()
        assert answer.status == 206 and answer.getheader("Content-Length") == "200"
        with pytest.raises(http.client.IncompleteRead) as info:
            answer.read()
        expected = 100 if keep is None else keep
        assert info.value.partial == DATA[100:100 + expected]
    finally:
        conn.close()
    assert served.records[-1].sent == expected


def test_wrong_content_range_serves_a_shifted_range(served):
    served.fail("wrong_range", shift=3)
    status, headers, body = get(served, "/d/v.bin", Range="bytes=100-199")
    assert status == 206
    assert headers["Content-Range"] == f"bytes 103-202/{N}"  # not the range asked for
    assert body == DATA[103:203] != DATA[100:200]


def test_ignore_range_answers_200_with_the_whole_body(served):
    served.fail("ignore_range")
    status, headers, body = get(served, "/d/v.bin", Range="bytes=100-199")
    assert (status, body) == (200, DATA)
    assert "Content-Range" not in headers


def test_stall_outlasts_a_client_timeout_and_close_ends_it(served):
    served.fail("stall", seconds=30)
    t0 = time.monotonic()
    with pytest.raises((TimeoutError, socket.timeout)):
        get(served, "/d/v.bin", timeout=0.3)
    assert time.monotonic() - t0 < 5
    t0 = time.monotonic()
    served.close()  # the stalled handler wakes up: close() does not wait 30 s
    assert time.monotonic() - t0 < 5


def test_close_ends_idle_keep_alive_connections(served):
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    conn.request("GET", "/d/v.bin")
    conn.getresponse().read()
    t0 = time.monotonic()
    served.close()
    assert time.monotonic() - t0 < 5
    assert served._thread is None
    conn.close()


# -- identity -----------------------------------------------------------------------------------

def test_etag_changes_when_the_file_changes(served):
    path = served.root / "d" / "v.bin"
    etag = get(served, "/d/v.bin", method="HEAD")[1]["ETag"]
    assert get(served, "/d/v.bin", method="HEAD")[1]["ETag"] == etag
    path.write_bytes(DATA[::-1])  # same size: the mtime (and maybe inode) must tell
    st = path.stat()
    import os

    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    etag2 = get(served, "/d/v.bin", method="HEAD")[1]["ETag"]
    assert etag2 != etag
    # replaced by rename (as an atomic writer does): a new inode
    tmp = served.root / "d" / "v.tmp"
    tmp.write_bytes(DATA)
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    tmp.replace(path)
    assert get(served, "/d/v.bin", method="HEAD")[1]["ETag"] not in (etag, etag2)


def test_if_range_and_if_match(served):
    etag = get(served, "/d/v.bin", method="HEAD")[1]["ETag"]
    assert get(served, "/d/v.bin", Range="bytes=0-3", If_Range=etag)[0] == 206
    assert get(served, "/d/v.bin", Range="bytes=0-3", If_Range='"old"')[::2] == (200, DATA)
    assert get(served, "/d/v.bin", If_Match=etag)[0] == 200
    assert get(served, "/d/v.bin", If_Match='"old"')[0] == 412


def test_in_memory_root_serves_current_contents_with_content_etags():
    files = {"a/x.bin": b"hello world"}
    with RangeServer(files) as server:
        status, headers, body = get(server, "/a/x.bin", Range="bytes=6-")
        assert (status, body) == (206, b"world")
        etag = headers["ETag"]
        files["a/x.bin"] = b"HELLO WORLD"
        status, headers, body = get(server, "/a/x.bin", Range="bytes=6-")
        assert body == b"WORLD" and headers["ETag"] != etag
        assert get(server, "/a/y.bin")[0] == 404


def test_control_endpoints_only_when_enabled(served):
    assert get(served, "/_server/stats")[0] == 404
    with RangeServer(served.root, control=True) as server:
        get(server, "/d/v.bin", Range="bytes=0-9")
        import json

        stats = json.loads(get(server, "/_server/stats")[2])
        assert stats["requests"] == 1 and stats["bytes_sent"] == 10
        get(server, "/_server/latency/0.01")
        assert server.latency == 0.01
        get(server, "/_server/reset")
        assert server.requests == 0


# -- the real clients ---------------------------------------------------------------------------

def http_fs():
    pytest.importorskip("aiohttp")
    fsspec = pytest.importorskip("fsspec")
    return fsspec.filesystem("http", skip_instance_cache=True)


def test_fsspec_http_reads_ranges_and_info(served):
    fs = http_fs()
    url = served.url_for("d/v.bin")
    assert fs.cat_file(url, start=1000, end=1100) == DATA[1000:1100]
    info = fs.info(url)
    assert info["size"] == N and info["ETag"] == get(served, "/d/v.bin", method="HEAD")[1]["ETag"]
    with fs.open(url, "rb", block_size=1024) as f:
        f.seek(5000)
        assert f.read(10) == DATA[5000:5010]
    assert ("GET", "/d/v.bin", (1000, 1100)) in [r[:3] for r in served.records]
    served.reset()
    got = fs.cat_ranges([url] * 3, [0, 100, 9000], [10, 110, 9010])
    assert got == [DATA[0:10], DATA[100:110], DATA[9000:9010]]
    assert sorted(served.ranges()) == [(0, 10), (100, 110), (9000, 9010)]


def test_fsspec_http_sees_faults(served):
    fs = http_fs()
    url = served.url_for("d/v.bin")
    aiohttp = pytest.importorskip("aiohttp")
    served.fail("status", status=500, times=1)
    # not an OSError: a reader through fsspec's HTTP filesystem must translate it
    with pytest.raises(aiohttp.ClientResponseError) as info:
        fs.cat_file(url, start=0, end=10)
    assert info.value.status == 500
    assert fs.cat_file(url, start=0, end=10) == DATA[:10]
    served.fail("stall", seconds=30, times=1)
    slow = pytest.importorskip("fsspec").filesystem(
        "http", skip_instance_cache=True,
        client_kwargs={"timeout": aiohttp.ClientTimeout(total=0.5)})
    t0 = time.monotonic()
    with pytest.raises((TimeoutError, OSError)):
        slow.cat_file(url, start=0, end=10)
    assert time.monotonic() - t0 < 10


@pytest.mark.slow
def test_s3fs_round_trip_through_moto(s3):
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True, **s3.storage_options)
    key = s3.path("dir/v.bin")
    fs.pipe(key, DATA)
    assert fs.cat(key) == DATA
    assert fs.cat_file(key, start=100, end=200) == DATA[100:200]
    info = fs.info(key)
    assert info["size"] == N and info["ETag"]
    s3.server.reset()
    assert fs.cat_file(key, start=-10) == DATA[-10:]
    (record,) = [r for r in s3.server.records if r.method == "GET"]
    assert record.path == f"/{key}" and record.status == 206 and record.sent == 10
    fs.pipe(key, DATA[::-1])
    fs.invalidate_cache()
    assert fs.info(key)["ETag"] != info["ETag"]
    assert fs.ls(s3.path("dir"), detail=False) == [key]
    with fs.open(key, "rb") as f:
        f.seek(N - 5)
        assert f.read() == DATA[::-1][-5:]


def test_s3_buckets_are_fresh_per_test(s3):
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True, **s3.storage_options)
    assert fs.ls(s3.bucket) == []
    assert s3.url("a/b") == f"s3://{s3.bucket}/a/b"


def test_s3_latency(s3):
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True, **s3.storage_options)
    fs.pipe(s3.path("x"), b"abc")
    s3.server.latency = 0.05
    t0 = time.monotonic()
    assert fs.cat_file(s3.path("x"), start=1, end=2) == b"b"
    assert time.monotonic() - t0 >= 0.05


def test_s3_faults_refuse_chosen_requests(s3):
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True, **s3.storage_options)
    s3.server.fail("PUT", contains="/b", skip=1, times=1)
    fs.pipe(s3.path("a"), b"1")  # not matching: passes
    fs.pipe(s3.path("b1"), b"2")  # matching, skipped: passes
    with pytest.raises(PermissionError):
        fs.pipe(s3.path("b2"), b"3")
    fs.pipe(s3.path("b3"), b"4")  # times=1: the fault is gone
    assert s3.server.faults == []
    fs.invalidate_cache()
    assert sorted(fs.ls(s3.bucket, detail=False)) == [s3.path(k) for k in ("a", "b1", "b3")]
    assert [r.status for r in s3.server.records if r.method == "PUT"] == [200, 200, 403, 200]


@pytest.mark.slow
def test_moto_in_a_subprocess(monkeypatch):
    pytest.importorskip("moto.server")
    s3fs = pytest.importorskip("s3fs")
    from s3_server import AWS_ENV, S3Server

    for name, value in AWS_ENV.items():
        monkeypatch.setenv(name, value)
    with S3Server(process=True) as server:
        bucket = server.bucket()
        fs = s3fs.S3FileSystem(skip_instance_cache=True, **server.storage_options())
        fs.pipe(f"{bucket}/k", DATA)
        assert fs.cat_file(f"{bucket}/k", start=5, end=9) == DATA[5:9]
        proc = server._proc
    assert proc is not None and proc.poll() is not None  # stopped


def test_no_test_reaches_another_host() -> None:
    """The session's guard (tests/loopback_only.py): other hosts fail at once."""
    import socket

    with pytest.raises(OSError, match="only this machine"):
        socket.getaddrinfo("s3.amazonaws.com", 443)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with pytest.raises(OSError, match="only this machine"):
            s.connect(("192.0.2.1", 80))
    finally:
        s.close()
    assert socket.getaddrinfo("127.0.0.1", 80)
