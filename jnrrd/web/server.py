"""The read-only HTTP/1.1 server of ``jnrrd serve`` and ``jnrrd view`` (docs/web-view.md).

:class:`WebServer` answers the keys of a :class:`~jnrrd.web.store.ZarrStore` at its root
(``/zarr.json``, ``/0/zarr.json``, ``/0/c/...``) and, with a viewer, the neuroglancer client
(:mod:`jnrrd.web.viewer`). ``GET``, ``HEAD`` and ``OPTIONS`` only; single byte ranges;
``ETag`` and ``Last-Modified`` with ``If-None-Match``/``If-Modified-Since`` (304) and
``If-Range``; no content coding (chunks are sent as they are, whatever ``Accept-Encoding``
says); CORS only for the origins asked for. The request checks are in
:mod:`jnrrd.web.protocol`. Nothing maps a request path to a file: a path is a key of the
store, a name of the viewer's fixed file list, or a 404.

Each connection has its own daemon thread (started through :mod:`jnrrd._threads`), at most
:data:`MAX_CONNECTIONS` at once (more get a 503); an idle keep-alive connection ends after
:data:`IDLE_TIMEOUT` seconds, and :meth:`WebServer.close` ends every connection at once.
"""

from __future__ import annotations

import collections
import hashlib
import socket
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple

from .. import _platform
from .._threads import start_daemon
from ..errors import JnrrdError, RemoteError
from . import protocol as hp
from .store import ZarrStore

__all__ = ["IDLE_TIMEOUT", "MAX_CONNECTIONS", "Request", "WebServer"]

MAX_CONNECTIONS = 64
IDLE_TIMEOUT = 30.0
#: requests kept in :attr:`WebServer.requests`
_LOG_SIZE = 100_000
_SSE_KEEPALIVE = 15.0


class Request(NamedTuple):
    """One answered request, as :attr:`WebServer.requests` and ``--log`` show it."""

    method: str
    path: str
    status: int
    #: body bytes sent (counted as the answer starts: a client that hangs up midway is
    #: counted in full)
    sent: int
    #: the ``Range`` header, if any
    range: str | None
    #: whether the body was a stored tile, unchanged (its whole or a range of it)
    stored: bool


class _Answer(NamedTuple):
    status: int
    body: bytes
    headers: list[tuple[str, str]]
    stored: bool = False


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "jnrrd"
    sys_version = ""
    timeout = IDLE_TIMEOUT
    server: _HTTPServer

    #: errors on a request line without a version still get a status line (no HTTP/0.9)
    default_request_version = "HTTP/1.0"

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        if len(self.requestline.split()) != 3:  # "GET /path": an HTTP/0.9 request
            self.send_error(400, "Bad request line: expected METHOD TARGET HTTP/1.x")
            return False
        return True

    def setup(self) -> None:
        super().setup()
        # small answers would otherwise wait for the client's delayed ACK
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # every request is recorded by WebServer._record instead

    def do_GET(self) -> None:
        self.server.owner.answer(self, "GET")

    def do_HEAD(self) -> None:
        self.server.owner.answer(self, "HEAD")

    def do_OPTIONS(self) -> None:
        self.server.owner.answer(self, "OPTIONS")

    def _read_only(self) -> None:
        self.server.owner.answer(self, self.command)

    do_POST = do_PUT = do_DELETE = do_PATCH = _read_only


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # a fixed --port can be taken again at once after a restart (not on Windows)
    allow_reuse_address = _platform.REUSE_ADDRESS
    #: viewers open dozens of connections at once: socketserver's default backlog of 5
    #: drops SYNs, which then wait for the retransmission
    request_queue_size = 256
    owner: WebServer

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.owner.track(request):
            try:
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                                b"Connection: close\r\n\r\n")
            except OSError:
                pass
            self.shutdown_request(request)
            return
        start_daemon(self.process_request_thread, request, client_address,
                     name="jnrrd-web-connection")

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.owner.untrack(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client hanging up mid-answer is normal; answer() reports real failures


class WebServer:
    """A running read-only server of one :class:`ZarrStore` (see the module docstring).

    ``url`` is the store's root URL, ``viewer_url`` the neuroglancer page (``None`` without a
    viewer). ``requests`` lists the answered requests; ``on_request`` is called with each
    :class:`Request` and ``on_error`` with each failure message (default: nothing).
    :meth:`close` stops it (also on leaving a ``with`` block).
    """

    def __init__(self, store: ZarrStore, *, host: str = "127.0.0.1", port: int = 0,
                 cors: Sequence[str] = (), viewer: Any = None, last_modified: float,
                 token: str, on_request: Callable[[Request], None] | None = None,
                 on_error: Callable[[str], None] | None = None) -> None:
        self.store = store
        self.cors = hp.check_cors(cors)
        self.viewer = viewer
        self.last_modified = float(last_modified)
        self._token = token
        self.on_request = on_request
        self.on_error = on_error
        self._log: collections.deque[Request] = collections.deque(maxlen=_LOG_SIZE)
        self._lock = threading.Lock()
        self._sockets: set[Any] = set()
        self._stop = threading.Event()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        server_class = type("_Bound", (_HTTPServer,), {"address_family": family})
        self._httpd = server_class((host, port), _Handler)  # binds now: errors raise here
        self._httpd.owner = self
        self.host = host
        self.port = int(self._httpd.server_address[1])
        self.loopback = _is_loopback(host)
        self._hosts = hp.loopback_hosts(self.port) if self.loopback else None
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{self.port}/"
        self.viewer_url = self.url + viewer.entry if viewer is not None else None
        self._thread = start_daemon(self._httpd.serve_forever, 0.1, name="jnrrd-web-server")

    # -- life cycle -----------------------------------------------------------------------
    def close(self) -> None:
        """Stop serving, end every open connection, close the volume; returns in seconds."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:
            open_sockets = list(self._sockets)
        for sock in open_sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(timeout=10)
        self.store.vol.close()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until :meth:`close` (from another thread or a signal handler) or
        ``timeout`` seconds; True when closed."""
        return self._stop.wait(timeout)

    @property
    def closed(self) -> bool:
        return self._stop.is_set()

    def __enter__(self) -> WebServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "serving"
        return f"<jnrrd.web.WebServer {self.url} {state}>"

    def track(self, sock: Any) -> bool:
        """Count a new connection in; False when there are too many (or when closing)."""
        with self._lock:
            if len(self._sockets) >= MAX_CONNECTIONS or self._stop.is_set():
                return False
            self._sockets.add(sock)
            return True

    def untrack(self, sock: Any) -> None:
        """Count a finished connection out."""
        with self._lock:
            self._sockets.discard(sock)

    # -- the log --------------------------------------------------------------------------
    @property
    def requests(self) -> list[Request]:
        """The answered requests, oldest first (the last 100 000)."""
        with self._lock:
            return list(self._log)

    def reset(self) -> None:
        """Forget the recorded requests."""
        with self._lock:
            self._log.clear()

    def _record(self, request: Request) -> None:
        with self._lock:
            self._log.append(request)
        if self.on_request is not None:
            self.on_request(request)

    # -- answering ------------------------------------------------------------------------
    def answer(self, h: _Handler, method: str) -> None:
        """Answer one parsed request on handler ``h``."""
        rng = h.headers.get("range")
        try:
            path = hp.request_path(h.path)
            hp.check_request(h.headers, hosts=self._hosts)
            if method not in hp.ALLOWED_METHODS:
                raise hp.Refusal(405, "read-only server: GET, HEAD and OPTIONS only")
            if method == "GET" and self.viewer is not None and self.viewer.is_events(path):
                self._events(h, path)
                return
            ans = self._route(h, method, path)
        except hp.Refusal as r:
            extra = [("Allow", ", ".join(hp.ALLOWED_METHODS))] if r.status == 405 else []
            ans = _text(r.status, r.reason, extra)
            h.close_connection = True
        except (JnrrdError, OSError) as e:
            ans = self._failure(h.path, e)
        except Exception as e:  # a bug: still an answer, and a report, never a dropped line
            ans = self._failure(h.path, e, internal=True)
        self._send(h, method, ans, rng)

    def _route(self, h: _Handler, method: str, path: str) -> _Answer:
        if method == "OPTIONS":
            pre = hp.preflight_headers(h.headers, self.cors)
            return _Answer(204, b"", [("Allow", ", ".join(hp.ALLOWED_METHODS)), *pre])
        if self.viewer is not None:
            target = self.viewer.redirect(path)
            if target is not None:
                return _Answer(302, b"", [("Location", target), ("Cache-Control", "no-cache")])
            page = self.viewer.get(path)
            if page is not None:
                content_type, body, cache = page
                return _Answer(200, body, [("Content-Type", content_type),
                                           ("Cache-Control", cache),
                                           ("ETag", _etag(body))])
        found = self.store.lookup(path[1:])
        if found is None:
            return _text(404, "not found")
        if isinstance(found, bytes):
            return _Answer(200, found, [("Content-Type", "application/json"),
                                        ("ETag", _etag(found)), *self._validators()])
        arr, coords = found
        etag = f'"{self._token}-{arr.level}-{"-".join(map(str, coords))}"'
        # answered without reading the tile, unless "*" asks whether the chunk exists at all
        if ((h.headers.get("if-none-match") or "").strip() != "*"
                and hp.not_modified(h.headers, etag, self.last_modified)):
            return _Answer(304, b"", [("ETag", etag), *self._validators()])
        data, stored = self.store.chunk(arr, coords)
        if data is None:
            return _text(404, "absent chunk: every voxel is the fill value")
        return _Answer(200, data, [("Content-Type", "application/octet-stream"),
                                   ("ETag", etag), *self._validators()], stored)

    def _validators(self) -> list[tuple[str, str]]:
        return [("Last-Modified", hp.http_date(self.last_modified)),
                ("Cache-Control", "no-cache")]

    def _failure(self, target: str, e: BaseException, internal: bool = False) -> _Answer:
        status = 502 if isinstance(e, RemoteError) else 500
        message = " ".join(str(e).split()) or type(e).__name__
        if internal:
            message = f"internal error ({type(e).__name__}: {message})"
        if self.on_error is not None:
            self.on_error(f"{target[:200]}: {message}")
        return _text(status, message)

    def _send(self, h: _Handler, method: str, ans: _Answer, rng: str | None) -> None:
        status, body, headers = ans.status, ans.body, list(ans.headers)
        if status == 200 and method in ("GET", "HEAD"):
            headers.append(("Accept-Ranges", "bytes"))
            etag = dict(headers).get("ETag", "")
            dated = any(k == "Last-Modified" for k, _ in headers)
            sent_range = None
            if hp.not_modified(h.headers, etag, self.last_modified if dated else None):
                status, body = 304, b""
                headers = [(k, v) for k, v in headers if k != "Content-Type"]
            elif (method == "GET" and rng is not None  # HEAD has no range semantics
                  and hp.if_range_allows(h.headers, etag, self.last_modified)):
                sent_range = hp.parse_range(rng, len(body))
            if sent_range == "unsatisfiable":
                status, body = 416, b""
                headers = [("Content-Range", f"bytes */{len(ans.body)}")]
            elif isinstance(sent_range, tuple):
                start, stop = sent_range
                status, body = 206, body[start:stop]
                headers.append(("Content-Range", f"bytes {start}-{stop - 1}/{len(ans.body)}"))
        if method != "OPTIONS":
            headers += hp.cors_headers(h.headers, self.cors)
        h.send_response(status)
        for k, v in headers:
            h.send_header(k, v)
        h.send_header("X-Content-Type-Options", "nosniff")
        if status != 304:
            h.send_header("Content-Length", str(len(body)))
        if h.close_connection:
            h.send_header("Connection", "close")
        h.end_headers()
        send = method == "GET" and status not in (204, 304) and bool(body)
        # recorded before the body goes out: a client holding its answer finds it in the log
        self._record(Request(method, h.path[:hp.MAX_TARGET], status, len(body) if send else 0,
                             rng, ans.stored and status in (200, 206)))
        if send:
            try:
                h.wfile.write(body)
            except OSError:
                h.close_connection = True

    def _events(self, h: _Handler, path: str) -> None:
        """The viewer's state channel (server-sent events): held open and silent, so the
        client knows its server is there; ends when the server closes."""
        h.close_connection = True
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Connection", "close")
        h.end_headers()
        self._record(Request("GET", path, 200, 0, None, False))
        try:
            h.wfile.write(b": jnrrd\n\n")
            while not self._stop.wait(_SSE_KEEPALIVE):
                h.wfile.write(b": keep-alive\n\n")
        except OSError:
            pass


def _text(status: int, text: str, extra: list[tuple[str, str]] | None = None) -> _Answer:
    return _Answer(status, (text + "\n").encode(), [
        ("Content-Type", "text/plain; charset=utf-8"), *(extra or [])])


def _etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
