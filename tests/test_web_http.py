"""The web view's HTTP behaviour (jnrrd.web.server, jnrrd.web.protocol; docs/web-view.md):
Range, HEAD, validators, CORS, 404s, no key escaping the volume, hostile requests refused,
the connection cap, closing, the non-loopback warning and the command line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import jnrrd
from jnrrd.web import protocol as hp
from jnrrd.web import server as web_server


@pytest.fixture(scope="module")
def volume_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("web")
    path = root / "ct.jnrrd"
    data = np.arange(24 * 20 * 10, dtype=np.uint16).reshape(24, 20, 10) % 1000
    jnrrd.write(path, data, tile=8, compression="zstd", levels=2)
    (root / "secret.txt").write_text("not for the web")
    return path


@pytest.fixture(scope="module")
def server(volume_file: Path) -> Any:
    with jnrrd.serve(volume_file, cors=["https://viewer.example"]) as s:
        yield s


def get(url: str, method: str = "GET", **headers: str) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, method=method,
                                     headers={k.replace("_", "-"): v for k, v in headers.items()})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def raw(port: int, request: bytes) -> tuple[int, bytes]:
    """Send ``request`` bytes as they are; the status and the whole answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while True:
            data = sock.recv(65536)
            if not data:
                break
            chunks.append(data)
    answer = b"".join(chunks)
    return int(answer.split(b" ", 2)[1]), answer


def request_bytes(target: str, *lines: str, port: int, host: bool = True) -> bytes:
    head = [f"GET {target} HTTP/1.1"]
    if host:
        head.append(f"Host: 127.0.0.1:{port}")
    head += [*lines, "Connection: close"]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")


# -- ranges, HEAD, validators -------------------------------------------------------------
def test_range_requests(server: Any) -> None:
    url = server.url + "0/c/0/0/0"
    status, headers, whole = get(url)
    n = len(whole)
    assert status == 200 and headers["Accept-Ranges"] == "bytes" and n > 20
    cases = {"bytes=0-9": (206, whole[:10], f"bytes 0-9/{n}"),
             "bytes=5-": (206, whole[5:], f"bytes 5-{n - 1}/{n}"),
             "bytes=-7": (206, whole[-7:], f"bytes {n - 7}-{n - 1}/{n}"),
             f"bytes=3-{n + 100}": (206, whole[3:], f"bytes 3-{n - 1}/{n}"),
             f"bytes={n}-": (416, b"", f"bytes */{n}"),
             "bytes=0-1,4-5": (200, whole, None),         # several ranges: the whole body
             "bytes=9-3": (200, whole, None),             # invalid: ignored
             "items=0-3": (200, whole, None),
             # an end past any size is clamped; more than 64 digits is malformed
             "bytes=0-99999999999999999999": (206, whole, f"bytes 0-{n - 1}/{n}"),
             "bytes=0-" + "9" * 65: (200, whole, None)}
    for rng, (want, body, content_range) in cases.items():
        status, headers, got = get(url, Range=rng)
        assert (status, got, headers.get("Content-Range")) == (want, body, content_range), rng
    etag = headers["ETag"]
    assert get(url, Range="bytes=0-3", If_Range=etag)[0] == 206
    assert get(url, Range="bytes=0-3", If_Range='"other"')[0] == 200
    meta = get(server.url + "zarr.json", Range="bytes=0-0")
    assert meta[0] == 206 and meta[2] == b"{"


def test_head_and_validators(server: Any) -> None:
    for key in ("zarr.json", "1/zarr.json", "0/c/1/1/2"):
        status, headers, body = get(server.url + key)
        assert status == 200
        h_status, h_headers, h_body = get(server.url + key, method="HEAD")
        assert (h_status, h_body) == (200, b"")
        assert h_headers["Content-Length"] == str(len(body)) == headers["Content-Length"]
        assert h_headers["ETag"] == headers["ETag"]
        assert headers["Cache-Control"] == "no-cache" and "Last-Modified" in headers
        assert "Content-Encoding" not in headers
        etag, modified = headers["ETag"], headers["Last-Modified"]
        assert get(server.url + key, If_None_Match=etag)[:3:2] == (304, b"")
        assert get(server.url + key, If_None_Match=f'"x", W/{etag}')[0] == 304
        assert get(server.url + key, If_None_Match='"x"')[0] == 200
        assert get(server.url + key, If_Modified_Since=modified)[0] == 304
        assert get(server.url + key, If_Modified_Since="Sat, 01 Jan 2000 00:00:00 GMT")[0] == 200
        assert get(server.url + key, If_Modified_Since="garbage")[0] == 200
    # gzip is never applied to chunks, whatever the client accepts
    assert "Content-Encoding" not in get(server.url + "0/c/0/0/0", Accept_Encoding="gzip")[1]


def test_chunk_etags_carry_the_file_version(tmp_path: Path) -> None:
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, np.zeros((8, 8, 8), np.uint8), tile=4, compression="zstd")
    with jnrrd.serve(path) as s:
        first = get(s.url + "0/c/0/0/0")[1]["ETag"]
    jnrrd.write(path, np.ones((8, 8, 8), np.uint8), tile=4, compression="zstd")
    with jnrrd.serve(path) as s:
        assert get(s.url + "0/c/0/0/0")[1]["ETag"] != first
        assert get(s.url + "0/c/0/0/0", If_None_Match=first)[0] == 200


def test_if_none_match_star_asks_whether_a_chunk_exists(tmp_path: Path) -> None:
    data = np.zeros((16, 8, 8), np.uint8)
    data[:8] = 5
    jnrrd.write(tmp_path / "s.jnrrd", data, tile=8, compression="zstd", sparse=True)
    with jnrrd.serve(tmp_path / "s.jnrrd") as s:
        assert get(s.url + "0/c/0/0/0", If_None_Match="*")[0] == 304
        assert get(s.url + "0/c/0/0/1", If_None_Match="*")[0] == 404  # sparse: absent


def test_an_internal_error_is_a_500_and_a_report(volume_file: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    errors: list[str] = []
    with jnrrd.serve(volume_file, on_error=errors.append) as s:
        def broken(arr: Any, coords: Any) -> Any:
            raise TypeError("a bug")

        monkeypatch.setattr(s.store, "chunk", broken)
        status, _, body = get(s.url + "0/c/0/0/0")
        assert status == 500 and b"internal error (TypeError: a bug)" in body
        assert errors == ["/0/c/0/0/0: internal error (TypeError: a bug)"]
        assert get(s.url + "zarr.json")[0] == 200


# -- CORS ---------------------------------------------------------------------------------
def test_cors_only_for_the_origins_asked_for(server: Any, volume_file: Path) -> None:
    url = server.url + "0/zarr.json"
    headers = get(url, Origin="https://viewer.example")[1]
    assert headers["Access-Control-Allow-Origin"] == "https://viewer.example"
    assert "Content-Range" in headers["Access-Control-Expose-Headers"]
    assert headers["Vary"] == "Origin"
    assert "Access-Control-Allow-Origin" not in get(url, Origin="https://evil.example")[1]
    assert "Access-Control-Allow-Origin" not in get(url)[1]
    status, pre, _ = get(url, method="OPTIONS", Origin="https://viewer.example",
                         Access_Control_Request_Method="GET",
                         Access_Control_Request_Headers="range",
                         Access_Control_Request_Private_Network="true")
    assert status == 204 and "Range" in pre["Access-Control-Allow-Headers"]
    assert pre["Access-Control-Allow-Private-Network"] == "true"
    assert "Access-Control-Allow-Origin" not in get(url, method="OPTIONS",
                                                    Origin="https://evil.example")[1]
    with jnrrd.serve(volume_file) as plain:  # no --cors: no page elsewhere reads it
        assert "Access-Control-Allow-Origin" not in get(
            plain.url + "zarr.json", Origin="https://viewer.example")[1]
    with jnrrd.serve(volume_file, cors="*") as anyone:
        assert get(anyone.url + "zarr.json", Origin="https://a.example")[1][
            "Access-Control-Allow-Origin"] == "*"
    for bad in ("viewer.example", "https://x.example/path", "ftp://x", ""):
        with pytest.raises(ValueError, match="origin"):
            hp.check_cors([bad])


# -- 404s and paths -----------------------------------------------------------------------
def test_unknown_keys_are_404(server: Any) -> None:
    for key in ("0", "0/", "2/zarr.json", "0/c/3/0/0", "0/c/0/0", "0/c/0/0/0/0",
                "0/c/01/0/0", "0/c/-1/0/0", "0/c/+1/0/0", "0/c/0.0/0/0", "0/c//0/0",
                "0/c/0/0/0/", ".zgroup", "0/.zarray", "zarr.json/", "view", "v/jnrrd/",
                "events/jnrrd", "0/c/99999999999999999999/0/0"):
        assert get(server.url + key)[0] == 404, key


ESCAPES = ["/../secret.txt", "/..%2fsecret.txt", "/%2e%2e/secret.txt", "/0/../../secret.txt",
           "/0/c/../../../secret.txt", "//secret.txt", "/secret.txt", "/./secret.txt",
           "/..\\secret.txt", "/%5c..%5csecret.txt", "/ct.jnrrd", "/../ct.jnrrd",
           "/0/c/0/0/0/../../../../../etc/passwd", "/etc/passwd", "/%00", "/v/jnrrd/../../ct.jnrrd",
           "/v/jnrrd/..%2f..%2fct.jnrrd", "/v/jnrrd/%2e%2e/%2e%2e/etc/passwd",
           "/v/jnrrd/index.html/../../../secret.txt"]


@pytest.mark.parametrize("viewer", [False, True])
def test_no_key_escapes_the_volume(volume_file: Path, viewer: bool) -> None:
    if viewer:
        pytest.importorskip("neuroglancer", reason="in the test extra")
    with jnrrd.serve(volume_file, viewer=viewer) as s:
        for target in ESCAPES:
            status, answer = raw(s.port, request_bytes(target, port=s.port))
            assert status in (400, 404), target
            assert b"not for the web" not in answer and b"root:" not in answer
            assert b'{"jnrrd": "0004"}' not in answer, target
        # the absolute form of a request target is refused outright
        assert raw(s.port, request_bytes(f"http://127.0.0.1:{s.port}/zarr.json",
                                         port=s.port))[0] == 400


# -- hostile requests ---------------------------------------------------------------------
def test_hostile_requests_are_refused(server: Any) -> None:
    p = server.port
    ok = request_bytes("/zarr.json", port=p)
    assert raw(p, ok)[0] == 200
    cases = {
        "two Host": (request_bytes("/zarr.json", "Host: 127.0.0.1:1", port=p), 400),
        "two Range": (request_bytes("/zarr.json", "Range: bytes=0-1", "Range: bytes=2-3",
                                    port=p), 400),
        "a body": (request_bytes("/zarr.json", "Content-Length: 5", port=p) + b"hello", 400),
        "chunked": (request_bytes("/zarr.json", "Transfer-Encoding: chunked", port=p)
                    + b"0\r\n\r\n", 400),
        "no Host": (request_bytes("/zarr.json", port=p, host=False), 400),
        "foreign Host": (request_bytes("/zarr.json", port=p, host=False).replace(
            b"Connection", b"Host: attacker.example\r\nConnection"), 403),
        "long target": (request_bytes("/" + "a" * 3000, port=p), 414),
        "non-ASCII target": (request_bytes("/zarr.json\u00e9", port=p), 400),
        "big headers": (request_bytes("/zarr.json", *[f"X-{i}: {'v' * 400}" for i in range(60)],
                                      port=p), 431),
        "too many headers": (request_bytes("/zarr.json", *[f"X-{i}: v" for i in range(150)],
                                           port=p), 431),
        "POST": (ok.replace(b"GET", b"POST", 1), 405),
        "DELETE": (ok.replace(b"GET", b"DELETE", 1), 405),
        "TRACE": (ok.replace(b"GET", b"TRACE", 1), 405),
        "HTTP/0.9": (b"GET /zarr.json\r\n\r\n", 400),
        "garbage": (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40, 400),
    }
    for name, (request, want) in cases.items():
        status, answer = raw(p, request)
        assert status == want, name
        assert b'"zarr_format"' not in answer, name
    assert raw(p, ok)[0] == 200  # and the server goes on
    for host in ("localhost", "[::1]"):
        assert raw(p, request_bytes("/zarr.json", port=p, host=False).replace(
            b"Connection", f"Host: {host}:{p}\r\nConnection".encode()))[0] == 200


def test_the_connection_cap_and_a_prompt_close(volume_file: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(web_server, "MAX_CONNECTIONS", 4)
    s = jnrrd.serve(volume_file)
    idle = [socket.create_connection(("127.0.0.1", s.port), timeout=10) for _ in range(4)]
    try:  # connections are accepted in order: the fifth finds four open
        # the refusal is sent as the connection is accepted: read it before sending anything
        # (a request sent after the server closed would be answered by a reset, losing it)
        with socket.create_connection(("127.0.0.1", s.port), timeout=30) as fifth:
            answer = b"".join(iter(lambda: fifth.recv(65536), b""))
        assert answer.startswith(b"HTTP/1.1 503 "), answer
        start = time.monotonic()
        s.close()  # idle keep-alive connections do not hold it up
        assert time.monotonic() - start < 5
        for sock in idle:
            assert sock.recv(10) == b""  # each connection was ended
    finally:
        for sock in idle:
            sock.close()
        s.close()
    assert s.closed and s.wait(0)


def test_a_non_loopback_host_warns_and_drops_the_host_check(
        volume_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # tests bind 127.0.0.1 only: the address is taken as a non-loopback one
    monkeypatch.setattr(web_server, "_is_loopback", lambda host: False)
    with pytest.warns(jnrrd.JnrrdWarning, match="not a loopback address"):
        s = jnrrd.serve(volume_file)
    with s:
        request = request_bytes("/zarr.json", port=s.port, host=False).replace(
            b"Connection", b"Host: scanner.example\r\nConnection")
        assert raw(s.port, request)[0] == 200
    assert web_server._is_loopback.__name__ == "<lambda>"
    monkeypatch.undo()
    assert [web_server._is_loopback(h) for h in ("127.0.0.1", "::1", "localhost",
                                                 "0.0.0.0", "192.168.1.2", "example.org")] \
        == [True, True, True, False, False, False]


def test_a_volume_that_fails_to_serve_is_closed(volume_file: Path) -> None:
    with jnrrd.serve(volume_file) as s, pytest.raises(OSError):
        jnrrd.serve(volume_file, port=s.port)  # the port is taken


def split_answer(answer: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return int(lines[0].split()[1]), headers, body


@pytest.mark.parametrize("method, extra, body, want", [
    ("POST", (), b"", 405), ("DELETE", (), b"", 405), ("PUT", ("Content-Length: 1",), b"x", 400),
    ("OPTIONS", ("Content-Length: 3",), b"abc", 400), ("TRACE", (), b"", 405),
    ("PROPFIND", (), b"", 405), ("FOO", (), b"", 405), ("GET", ("Content-Length: 2",), b"ab", 400),
])
def test_refusals_send_the_body_they_announce(server: Any, method: str, extra: tuple[str, ...],
                                              body: bytes, want: int) -> None:
    request = request_bytes("/zarr.json", *extra, port=server.port).replace(
        b"GET", method.encode(), 1) + body
    status, headers, sent = split_answer(raw(server.port, request)[1])
    assert status == want
    assert int(headers["content-length"]) == len(sent) > 0
    assert sent.decode().strip() and b"<html" not in sent.lower()
    if want == 405:
        assert headers["allow"] == "GET, HEAD, OPTIONS"


def test_the_root_short_paths_and_small_things(volume_file: Path) -> None:
    with jnrrd.serve(volume_file, cors="https://viewer.example") as s:
        status, headers, page = get(s.url)
        assert status == 200 and headers["Content-Type"].startswith("text/html")
        assert b'href="zarr.json"' in page and b"zarr.open_group" in page
        assert headers["Server"] == "jnrrd"
        # a doubled slash is not collapsed: "//" is an unknown key, as documented
        assert raw(s.port, request_bytes("//zarr.json", port=s.port))[0] == 404
        status, headers, _ = get(s.url + "favicon.ico")
        assert status == 204
        # with named origins, every answer varies with Origin (a cache keeps them apart)
        assert headers.get("Vary") == "Origin"
        assert get(s.url + "zarr.json")[1].get("Vary") == "Origin"
        # a range end past any size is clamped, not ignored
        status, headers, body = get(s.url + "zarr.json", Range="bytes=0-18446744073709551616")
        assert status == 206 and headers["Content-Range"].startswith("bytes 0-")
        whole = get(s.url + "zarr.json")[2]
        assert body == whole
        assert get(s.url + "zarr.json", Range="bytes=99999999999999999999-")[0] == 416


def test_the_request_log_is_bounded_and_current(volume_file: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import collections

    assert web_server.REQUEST_LOG_SIZE == 10_000
    appended = []

    class SlowLog(collections.deque):  # type: ignore[type-arg]
        def append(self, item: Any) -> None:
            time.sleep(0.3)  # a log append slower than the client
            super().append(item)
            appended.append(item)

    with jnrrd.serve(volume_file, keep_requests=3) as s:
        for _ in range(5):
            get(s.url + "zarr.json", "HEAD")
        assert len(s.requests) == 3
        s._log = SlowLog(maxlen=3)
        get(s.url + "zarr.json", "HEAD")
        assert len(appended) == 1  # recorded before the client had its answer
    with jnrrd.serve(volume_file, keep_requests=0) as s:
        get(s.url + "zarr.json")
        assert s.requests == []


# -- the command line ---------------------------------------------------------------------
def _start(*args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "jnrrd", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    return proc, line


def _stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    proc.terminate()
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode, err


def test_cli_serve_prints_the_url_logs_and_stops(volume_file: Path) -> None:
    proc, url = _start("serve", str(volume_file), "--log", "--cors", "https://a.example")
    try:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")
        assert get(url + "0/c/0/0/0")[0] == 200
        assert get(url + "0/c/0/0/0", Origin="https://a.example")[1][
            "Access-Control-Allow-Origin"] == "https://a.example"
    finally:
        code, err = _stop(proc)
    assert code == 0
    assert "jnrrd: GET /0/c/0/0/0 200" in err and " stored" in err
    assert "jnrrd: stopped" in err and "Traceback" not in err


@pytest.mark.slow  # a second subprocess; the browser tests start `jnrrd view` too
def test_cli_view_prints_the_viewer_url(volume_file: Path) -> None:
    pytest.importorskip("neuroglancer", reason="in the test extra")
    proc, url = _start("view", str(volume_file), "--no-browser", "--layout", "xy")
    try:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v/jnrrd/")
        status, _, page = get(url)
        assert status == 200 and b"zarr3://" in page and b'"layout":"xy"' in page
    finally:
        code, err = _stop(proc)
    assert code == 0 and "neuroglancer at" in err


@pytest.mark.parametrize("args, code, message", [
    (["serve", "x.jnrrd", "--port", "70000"], 2, "port"),
    (["serve", "x.jnrrd", "--cors", "evil"], 2, "origin"),
    (["view", "x.jnrrd", "--layout", "6panel"], 2, "layout"),
    (["serve", "missing.jnrrd"], 1, "missing.jnrrd"),
])
def test_cli_errors(args: list[str], code: int, message: str, tmp_path: Path,
                    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from jnrrd.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(args) == code
    assert message in capsys.readouterr().err
