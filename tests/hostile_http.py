"""A hostile HTTP/1.1 server for the remote-read tests: every answer is scripted.

``HostileServer(site)`` serves ``site`` (``{"a/b.jnrrd": (version_a, version_b)}``, two
versions of each object, usually of the same size) on 127.0.0.1 at a free port, with a raw
socket per connection (keep-alive), so that it can send what no well-behaved server sends.
``load(script)`` sets what it does: the ``k``-th request to a path gets ``script[k]`` (a
:class:`Behaviour`; past the script's end a plain, correct answer), so a path's story is the
same whatever order concurrent requests to different paths arrive in. A behaviour picks the
status (any code, redirects to the same path, another path, another host name for the same
server, a non-HTTP URL, or no ``Location``), the version headers (``ETag`` kept, dropped,
changed or weak; ``Last-Modified`` kept, dropped or changed), ``Content-Range`` (right,
missing, garbage, shifted, ``*`` total, huge total, short), ``Content-Length`` (right,
missing, huge, short, long, garbage), chunked transfer, a ``Content-Encoding`` (a real gzip
body, or a claimed one), the body (right, cut short, with extra bytes, endless, a trickle,
empty, the other version's bytes), a delay before the status line, whether the object turns
into its version B after this answer, and whether ``If-Match`` / ``If-Unmodified-Since``
are honoured (412).

Everything is bounded: an endless body stops after ``endless_cap`` bytes or when the client
hangs up, a trickle after ``trickle_cap`` seconds, a delay at :data:`MAX_WAIT`; every wait
ends when the server closes; sockets time out after :data:`IDLE` seconds of silence; the
handler threads are daemons. ``records`` lists every request (path, headers, status sent).
"""

from __future__ import annotations

import email.utils
import gzip
import hashlib
import socket
import socketserver
import threading
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from http_server import parse_range

__all__ = ["Behaviour", "HostileServer", "Request"]

#: no delay lasts longer than this (seconds), whatever a script asks
MAX_WAIT = 10.0
#: seconds a connection may stay silent (both ways) before the server drops it
IDLE = 5.0
_DATES = [email.utils.formatdate(1_700_000_000 + 86400 * k, usegmt=True) for k in range(3)]
_ZEROS = bytes(64 << 10)
_REASONS = {200: "OK", 206: "Partial Content", 301: "Moved Permanently", 302: "Found",
            303: "See Other", 307: "Temporary Redirect", 308: "Permanent Redirect",
            404: "Not Found", 412: "Precondition Failed", 416: "Range Not Satisfiable",
            500: "Internal Server Error", 503: "Service Unavailable"}


@dataclass(frozen=True)
class Behaviour:
    """How the server answers one request (the defaults: a correct answer)."""

    #: None: 206 for a satisfiable range, 416 past the end, 200 without a range; else forced
    status: int | None = None
    #: None | "loop" | "same-host" | "other-host" | "bad-scheme" | "no-location"
    redirect: str | None = None
    etag: str = "keep"  # keep | drop | change | weak
    last_modified: str = "keep"  # keep | drop | change
    content_range: str = "right"  # right | drop | garbage | shift | star | huge | short
    length: str = "right"  # right | drop | huge | short | long | garbage
    chunked: bool = False
    encoding: str | None = None  # None | "gzip" (a real gzip body) | "br" (claimed only)
    body: str = "right"  # right | short | extra | endless | trickle | empty | other
    delay: float = 0.0
    swap: bool = False
    conditions: bool = True


class Request(NamedTuple):
    """One request as the server saw and answered it."""

    method: str
    path: str
    headers: dict[str, str]
    status: int


@dataclass
class _State:
    script: list[Behaviour] = field(default_factory=list)
    version: dict[str, int] = field(default_factory=dict)
    seen: dict[str, int] = field(default_factory=dict)
    changes: int = 0
    only: str | None = None


class HostileServer:
    """A scripted HTTP/1.1 server of ``site`` on 127.0.0.1 (see the module docstring)."""

    def __init__(self, site: Mapping[str, tuple[bytes, bytes]], *,
                 endless_cap: int = 64 << 20, trickle_cap: float = 3.0,
                 trickle_interval: float = 0.02) -> None:
        self.site = dict(site)
        self.endless_cap, self.trickle_cap = endless_cap, trickle_cap
        self.trickle_interval = trickle_interval
        self.records: list[Request] = []
        self._state = _State()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._conns: set[socket.socket] = set()
        owner = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                owner._connection(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True
            request_queue_size = 128

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # clients hang up mid-answer on purpose here

        self._server = Server(("127.0.0.1", 0), Handler)
        self.port: int = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread: threading.Thread | None = None

    # -- life cycle ---------------------------------------------------------------------------
    def __enter__(self) -> HostileServer:
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        name=f"HostileServer:{self.port}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving; end every wait and connection."""
        self._stop.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=10)
            self._thread = None
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._server.server_close()

    def url_for(self, name: str) -> str:
        """The URL of ``name`` (a key of the site)."""
        return f"{self.url}/{urllib.parse.quote(name)}"

    def load(self, script: list[Behaviour], *, only: str | None = None) -> None:
        """Start a scenario: every object back to version A, request counts at zero; the
        script applies to the paths containing ``only`` (default: every path)."""
        with self._lock:
            self._state = _State(list(script), dict.fromkeys(self.site, 0), {}, 0, only)
            self.records = []

    def swap(self, name: str) -> None:
        """Turn the object ``name`` into its other version now."""
        with self._lock:
            self._state.version[name] = 1 - self._state.version.get(name, 0)

    def versions(self) -> dict[str, int]:
        """Which version (0: A, 1: B) each object is now."""
        with self._lock:
            return dict(self._state.version)

    # -- one connection -----------------------------------------------------------------------
    def _connection(self, conn: socket.socket) -> None:
        conn.settimeout(IDLE)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._conns.add(conn)
        rfile = conn.makefile("rb")
        try:
            while not self._stop.is_set():
                request = _read_request(rfile)
                if request is None or not self._answer(conn, *request):
                    break
        except OSError:
            pass  # a timeout or a hang-up ends the connection
        finally:
            with self._lock:
                self._conns.discard(conn)
            try:
                rfile.close()
                conn.close()
            except OSError:
                pass

    def _behaviour(self, path: str) -> tuple[Behaviour, bytes, bytes, int, int]:
        with self._lock:
            st = self._state
            k = st.seen.get(path, 0)
            st.seen[path] = k + 1
            scripted = st.only is None or st.only in path
            b = st.script[k] if k < len(st.script) and scripted else Behaviour()
            version = st.version.get(path, 0)
            st.changes += 1
            if b.swap and path in self.site:
                st.version[path] = 1 - version
            return b, *self.site[path], version, st.changes

    def _answer(self, conn: socket.socket, method: str, target: str,
                headers: dict[str, str]) -> bool:
        """Answer one request; False when the connection must close."""
        path = urllib.parse.unquote(urllib.parse.urlsplit(target).path).lstrip("/")
        if path not in self.site:
            return self._send(conn, method, path, headers, 404, {}, b"404\n", keep=True)
        b, a_bytes, b_bytes, version, counter = self._behaviour(path)
        if b.delay:
            self._stop.wait(min(b.delay, MAX_WAIT))
        if b.redirect is not None:
            return self._redirect(conn, method, path, headers, b)
        data, other = (a_bytes, b_bytes) if version == 0 else (b_bytes, a_bytes)
        tag = '"' + hashlib.sha256(data).hexdigest()[:16] + f'-{version}"'
        out: dict[str, str] = {"Accept-Ranges": "bytes"}
        etag = {"keep": tag, "drop": None, "weak": "W/" + tag,
                "change": f'"changed-{counter}"'}[b.etag]
        if etag:
            out["ETag"] = etag
        last = {"keep": _DATES[version], "drop": None, "change": _DATES[2]}[b.last_modified]
        if last:
            out["Last-Modified"] = last
        if b.conditions and _refused(headers, tag, _DATES[version]):
            return self._send(conn, method, path, headers, 412, out, b"412\n", keep=True)
        rng = parse_range(headers.get("range"), len(data))
        status = b.status or (416 if rng == "416" else 206 if rng else 200)
        if status not in (200, 206):
            if status == 416:
                out["Content-Range"] = f"bytes */{len(data)}"
            return self._send(conn, method, path, headers, status, out, b"", keep=True)
        start, stop = rng if isinstance(rng, tuple) and status == 206 else (0, len(data))
        body = (other if b.body == "other" else data)[start:stop]
        if status == 206:
            cr = _content_range(b.content_range, start, stop, len(data))
            if cr is not None:
                out["Content-Range"] = cr
        if b.encoding == "gzip":
            body = gzip.compress(body, mtime=0)
        if b.encoding:
            out["Content-Encoding"] = b.encoding
        return self._send(conn, method, path, headers, status, out, body, behaviour=b)

    def _redirect(self, conn: socket.socket, method: str, path: str,
                  headers: dict[str, str], b: Behaviour) -> bool:
        where = {"loop": f"/{path}", "same-host": f"/{path}",
                 "other-host": f"http://localhost:{self.port}/{path}",
                 "bad-scheme": "file:///etc/passwd", "no-location": None}[b.redirect or ""]
        out = {"Location": where} if where else {}
        return self._send(conn, method, path, headers, b.status or 302, out, b"", keep=True)

    def _send(self, conn: socket.socket, method: str, path: str, req: dict[str, str],
              status: int, out: dict[str, str], body: bytes, *,
              behaviour: Behaviour | None = None, keep: bool = False) -> bool:
        b = behaviour or Behaviour()
        with self._lock:
            self.records.append(Request(method, path, dict(req), status))
        head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Whatever')}"]
        head += [f"{k}: {v}" for k, v in out.items()]
        endless = b.body in ("endless", "trickle")
        length = _content_length(b.length, len(body))
        if b.chunked:
            head.append("Transfer-Encoding: chunked")
        elif length is not None:
            head.append(f"Content-Length: {length}")
        conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        if method == "HEAD":
            return True
        closes = not b.chunked and (length is None or b.length != "right")
        if b.body == "short":
            self._write(conn, body[: len(body) // 2], b.chunked, last=False)
            return False
        if b.body == "empty":
            self._write(conn, b"", b.chunked, last=b.chunked)
            return keep and b.chunked
        if b.body == "trickle":
            self._trickle(conn, body, b.chunked)
            return False
        extra = b"x" * 1000 if b.body == "extra" else b""
        self._write(conn, body + extra, b.chunked, last=not endless)
        if b.body == "endless":
            self._endless(conn, b.chunked)
            return False
        return not closes and not extra

    def _write(self, conn: socket.socket, data: bytes, chunked: bool, *, last: bool) -> None:
        if chunked:
            if data:
                conn.sendall(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            if last:
                conn.sendall(b"0\r\n\r\n")
        elif data:
            conn.sendall(data)

    def _endless(self, conn: socket.socket, chunked: bool) -> None:
        sent = 0
        while sent < self.endless_cap and not self._stop.is_set():
            self._write(conn, _ZEROS, chunked, last=False)
            sent += len(_ZEROS)

    def _trickle(self, conn: socket.socket, body: bytes, chunked: bool) -> None:
        end = time.monotonic() + self.trickle_cap
        for i in range(len(body) + 1 << 20):
            if time.monotonic() > end or self._stop.wait(self.trickle_interval):
                return
            piece = body[i : i + 1] if i < len(body) else b"\0"
            self._write(conn, piece, chunked, last=False)


def _refused(headers: dict[str, str], etag: str, last: str) -> bool:
    """Whether ``If-Match`` / ``If-Unmodified-Since`` refuse the current version."""
    match = headers.get("if-match")
    if match is not None and match.strip() not in ("*", etag):
        return True
    since = headers.get("if-unmodified-since")
    if since is not None:
        try:
            return email.utils.parsedate_to_datetime(last) > \
                email.utils.parsedate_to_datetime(since)
        except (TypeError, ValueError):
            return False
    return False


def _content_range(kind: str, start: int, stop: int, size: int) -> str | None:
    return {"right": f"bytes {start}-{stop - 1}/{size}", "drop": None,
            "garbage": "bytes=oops", "shift": f"bytes {start + 1}-{stop}/{size}",
            "star": f"bytes {start}-{stop - 1}/*",
            "huge": f"bytes {start}-{stop - 1 + (1 << 40)}/{size + (1 << 41)}",
            "short": f"bytes {start}-{max(start, stop - 2)}/{size}"}[kind]


def _content_length(kind: str, n: int) -> int | str | None:
    return {"right": n, "drop": None, "huge": 10**12, "short": max(0, n - 1), "long": n + 100,
            "garbage": "12x"}[kind]


def _read_request(rfile: Any) -> tuple[str, str, dict[str, str]] | None:
    """(method, target, lower-cased headers) of the next request, None at the end."""
    line = rfile.readline(8192)
    if not line:
        return None
    parts = line.decode("latin-1").split()
    if len(parts) < 2:
        return None
    headers: dict[str, str] = {}
    for _ in range(200):
        h = rfile.readline(8192)
        if h in (b"\r\n", b"\n", b""):
            break
        name, _, value = h.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return parts[0].upper(), parts[1], headers
