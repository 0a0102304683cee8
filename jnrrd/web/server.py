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
from .protocol import REQUEST_LOG_SIZE
from .store import ZarrStore

__all__ = ["IDLE_TIMEOUT", "MAX_CONNECTIONS", "REQUEST_LOG_SIZE", "Request", "WebServer"]

MAX_CONNECTIONS = 64
IDLE_TIMEOUT = 30.0
#: a refused request's body is read (and dropped) up to this size, so that closing the
#: connection does not reset it before the client has read the answer
_DRAIN_BYTES = 65536
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

    #: the request target as sent (``self.path`` has a leading ``//`` collapsed)
    target = ""

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        words = self.requestline.split()
        if len(words) != 3:  # "GET /path": an HTTP/0.9 request
            self.send_error(400, "Bad request line: expected METHOD TARGET HTTP/1.x")
            return False
        self.target = words[1]
        return True

    def version_string(self) -> str:
        return self.server_version

    def __getattr__(self, name: str) -> Any:
        # every method but GET, HEAD and OPTIONS (TRACE, PROPFIND, ...) is a 405, not the
        # standard library's 501 page
        if name.startswith("do_"):
            return self._read_only
        raise AttributeError(name)

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
    viewer). ``requests`` lists the answered requests (the last ``keep_requests``, 0 for
    none); ``on_request`` is called with each
    :class:`Request` and ``on_error`` with each failure message (default: nothing).
    :meth:`close` stops it (also on leaving a ``with`` block).
    """

    def __init__(self, store: ZarrStore, *, host: str = "127.0.0.1", port: int = 0,
                 cors: Sequence[str] = (), viewer: Any = None, last_modified: float,
                 token: str, on_request: Callable[[Request], None] | None = None,
                 on_error: Callable[[str], None] | None = None,
                 keep_requests: int = REQUEST_LOG_SIZE) -> None:
        self.store = store
        self.cors = hp.check_cors(cors)
        self.viewer = viewer
        self.last_modified = float(last_modified)
        self._token = token
        self.on_request = on_request
        self.on_error = on_error
        self._log: collections.deque[Request] = collections.deque(maxlen=max(0, keep_requests))
        self._lock = threading.Lock()
        self._sockets: set[Any] = set()
        self._stop = threading.Event()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        server_class = type("_Bound", (_HTTPServer,), {"address_family": family})
        try:
            self._httpd = server_class((host, port), _Handler)  # binds now
        except OSError as e:
            raise hp.address_error(e, host, port) from None
        self._httpd.owner = self
        self.host = host
        self.port = int(self._httpd.server_address[1])
        self.loopback = _is_loopback(host)
        self._hosts = hp.loopback_hosts(self.port) if self.loopback else None
        #: listening on every address of this machine (``0.0.0.0``, ``::``): the URL then
        #: names 127.0.0.1 (or ``[::1]``), which works from here
        self.all_addresses = hp.is_wildcard(host)
        self.url = f"http://{hp.url_host(host)}:{self.port}/"
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
        """The answered requests, oldest first (the last ``keep_requests``, by default
        :data:`REQUEST_LOG_SIZE`)."""
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
            path = hp.request_path(h.target)
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
            ans = self._failure(h.target, e)
        except Exception as e:  # a bug: still an answer, and a report, never a dropped line
            ans = self._failure(h.target, e, internal=True)
        self._send(h, method, ans, rng)
        if h.close_connection:
            _drain(h)

    def _route(self, h: _Handler, method: str, path: str) -> _Answer:
        if method == "OPTIONS":
            pre = hp.preflight_headers(h.headers, self.cors)
            return _Answer(204, b"", [("Allow", ", ".join(hp.ALLOWED_METHODS)), *pre])
        if path == "/":
            body = self._index_page()
            return _Answer(200, body, [("Content-Type", "text/html; charset=utf-8"),
                                       ("Content-Security-Policy", "default-src 'none'"),
                                       ("ETag", _etag(body)), *self._validators()])
        if path == "/favicon.ico":  # browsers ask for it: no icon, and no error to log
            return _Answer(204, b"", [("Cache-Control", "max-age=86400")])
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

    def _index_page(self) -> bytes:
        """The root's page: what this is, and where to go (the printed URL is the root)."""
        import html

        name = html.escape(self.store.name)
        levels = ", ".join(f'<a href="{a.level}/zarr.json">{a.level}</a>'
                           for a in self.store.arrays)
        view = ('<p>The neuroglancer viewer: <a href="view">view</a>.</p>\n'
                if self.viewer is not None else "")
        return (
            f"<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{name} (jnrrd)"
            f"</title></head><body>\n<h1>{name}</h1>\n<p>A read-only Zarr v3 group with "
            f'OME-Zarr 0.5 metadata, served by jnrrd: <a href="zarr.json">zarr.json</a>; '
            f"the levels' arrays: {levels}.</p>\n{view}<p>Read it with a Zarr reader, e.g. "
            "<code>zarr.open_group(url, mode=\"r\")</code> with this page's URL.</p>\n"
            "</body></html>\n").encode()

    def _validators(self) -> list[tuple[str, str]]:
        return [("Last-Modified", hp.http_date(self.last_modified)),
                ("Cache-Control", "no-cache")]

    def _failure(self, target: str, e: BaseException, internal: bool = False) -> _Answer:
        status = 502 if isinstance(e, RemoteError) else 500
        # a URL's query (a signed URL's signature, a token) and credentials stay here
        message = hp.redact(" ".join(str(e).split())) or type(e).__name__
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
        send = method != "HEAD" and status not in (204, 304) and bool(body)
        # recorded before the answer goes out: a client holding its answer finds it in the log
        self._record(Request(method[:16], h.target[:hp.MAX_TARGET], status,
                             len(body) if send else 0, rng,
                             ans.stored and status in (200, 206)))
        h.send_response(status)
        for k, v in headers:
            h.send_header(k, v)
        h.send_header("X-Content-Type-Options", "nosniff")
        if status not in (204, 304):
            h.send_header("Content-Length", str(len(body)))
        if h.close_connection:
            h.send_header("Connection", "close")
        h.end_headers()
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


def _drain(h: _Handler) -> None:
    """Read what is left of a refused request's body (at most :data:`_DRAIN_BYTES`, for at
    most a second) before the connection closes: closing a socket with unread bytes resets
    it, and the client could lose the answer."""
    import time

    try:
        length = int(h.headers.get("content-length") or 0)
    except ValueError:
        length = 0
    if h.headers.get("transfer-encoding") is not None:
        length = _DRAIN_BYTES
    length = min(max(length, 0), _DRAIN_BYTES)
    deadline = time.monotonic() + 1.0
    try:
        while length > 0 and time.monotonic() < deadline:
            h.connection.settimeout(max(0.01, deadline - time.monotonic()))
            data = h.rfile.read1(min(length, 16384))
            if not data:
                break
            length -= len(data)
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
