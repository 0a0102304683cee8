"""A small threaded HTTP/1.1 file server for tests and benchmarks: ranges, counts, faults.

``RangeServer(root)`` serves the files under a directory, or the entries of a ``dict`` of
``"a/b.jnrrd" -> bytes`` (read at each request, so a test may change it), on 127.0.0.1 at a
free port. What it does, per RFC 9110:

- ``GET`` with one ``Range: bytes=a-b`` / ``bytes=a-`` / ``bytes=-n`` -> 206 with
  ``Content-Range: bytes a-b/total``; without a Range (or with several, or a malformed one)
  -> 200 and the whole body; an unsatisfiable range -> 416 with ``Content-Range: bytes */total``.
  ``If-Range`` with another ETag -> 200 and the whole body; ``If-Match`` with another ETag -> 412.
- ``HEAD`` -> the headers only: Content-Length, ETag, Last-Modified, Accept-Ranges: bytes.
- 404 for a missing file (or a directory, or a path that leaves the root).
- A strong ``ETag`` that changes when the file changes (size, mtime_ns and inode for files;
  a content hash for the dict).
- Keep-alive (HTTP/1.1), ``TCP_NODELAY`` on accepted sockets (small answers would otherwise
  wait ~40 ms for the client's delayed ACK), no request logging.

Switches for tests: ``latency`` (seconds slept before each response), ``required_headers``
(401 without them), ``fail(...)`` (status
500/403, truncated body, wrong Content-Range, ignored Range, stall; for one path or all, for
the next ``times`` requests or always). Counters: ``counts`` (requests by method),
``bytes_sent`` (body bytes), ``records`` (one :class:`Record` per request),
``max_in_flight`` (the most requests answered at once), ``reset()``.

Every wait inside the server (latency, stalls) ends when the server stops, so ``close()``
always returns. The module imports nothing from pytest: benchmarks use it too, and
``python tests/http_server.py DIR [--latency S]`` serves a directory from another process
(with ``/_server/stats`` and ``/_server/reset`` for the counters).
"""

from __future__ import annotations

import argparse
import collections
import email.utils
import hashlib
import json
import os
import posixpath
import socket
import threading
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple

__all__ = ["FAULT_KINDS", "Fault", "RangeServer", "Record", "parse_range"]

#: What ``RangeServer.fail`` can inject.
FAULT_KINDS = ("status", "truncate", "wrong_range", "ignore_range", "stall")
#: No stall or latency lasts longer than this, whatever a test asks (the thread must end).
MAX_WAIT = 60.0
_CHUNK = 1 << 20
_CONTROL = "/_server/"


class Record(NamedTuple):
    """One request as the server saw and answered it."""

    method: str
    path: str
    #: The byte range served, ``(start, stop)`` half-open; None for a whole body or no body.
    range: tuple[int, int] | None
    status: int
    #: Body bytes sent (fewer than the range for a truncated answer).
    sent: int
    #: The raw ``Range`` header, or None.
    range_header: str | None


@dataclass
class Fault:
    """A misbehaviour for the requests to one path (or all paths)."""

    kind: str
    path: str | None = None
    status: int = 500
    #: truncate: body bytes sent before the connection closes (default: half the body).
    keep: int | None = None
    #: wrong_range: the served range starts this many bytes after the one asked for.
    shift: int = 1
    #: stall: seconds to wait before answering (bounded by MAX_WAIT and by close()).
    seconds: float = 10.0
    #: Applies to this many more requests, then is removed; None: every request.
    times: int | None = None
    #: Lets this many matching requests through first (e.g. 1: the first block of a file).
    skip: int = 0
    #: The methods it applies to.
    methods: tuple[str, ...] = ("GET", "HEAD")
    #: The ``Range`` header of every request it met (filled by the server).
    met: list[str | None] = field(default_factory=list)


def parse_range(header: str | None, size: int) -> tuple[int, int] | None | str:
    """``(start, stop)`` of one byte range; None: the whole body; ``"416"``: unsatisfiable."""
    if header is None:
        return None
    unit, _, spec = header.strip().partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return None  # another unit or several ranges: RFC 9110 lets a server ignore them
    first, dash, last = spec.strip().partition("-")
    first, last = first.strip(), last.strip()
    if not dash or not (first.isdigit() or first == "") or not (last.isdigit() or last == ""):
        return None  # malformed: ignored, the whole body
    if first == "":
        if last == "" or int(last) == 0 or size == 0:
            return "416"
        return max(0, size - int(last)), size
    start = int(first)
    if last != "" and int(last) < start:
        return None  # invalid range-spec: ignored
    if start >= size:
        return "416"
    stop = size if last == "" else min(size, int(last) + 1)
    return start, stop


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "jnrrd-test-http"
    #: Idle keep-alive connections end by themselves after this many seconds.
    timeout = 30
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.owner._opened(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner._closed(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.owner._answer(self, "GET")

    def do_HEAD(self) -> None:
        self.server.owner._answer(self, "HEAD")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    #: the listen backlog: socketserver's default of 5 drops the SYNs of a client that opens
    #: dozens of connections at once (tensorstore: one per chunk), which then wait ~1 s for
    #: the retransmission
    request_queue_size = 256
    owner: RangeServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hangs up mid-answer is normal here (timeouts, truncation tests)


class RangeServer:
    """A threaded HTTP/1.1 server of ``root`` (a directory or a dict) on 127.0.0.1."""

    def __init__(self, root: str | os.PathLike[str] | Mapping[str, bytes], *,
                 latency: float = 0.0, port: int = 0, control: bool = False) -> None:
        self.root = root if isinstance(root, Mapping) else Path(root)
        self.latency = latency
        self.control = control
        self.faults: list[Fault] = []
        #: headers every request must carry (e.g. a bearer token), else 401
        self.required_headers: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._thread: threading.Thread | None = None
        self._started = time.time()  # the Last-Modified of dict entries
        self._in_flight = 0
        self.reset()
        # Binding here, in the caller's thread, makes start-up bounded: an error raises now.
        self._httpd = _Server(("127.0.0.1", port), _Handler)
        self._httpd.owner = self
        self.port: int = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"

    # -- life cycle ---------------------------------------------------------------------------
    def start(self) -> RangeServer:
        """Serve from a daemon thread (returns at once: the socket already listens)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,),
                                            name=f"RangeServer:{self.port}", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, end pending waits, close every connection and the socket."""
        self._stop.set()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=10)
            self._thread = None
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:  # ends the handler threads blocked on keep-alive reads
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._httpd.server_close()

    def __enter__(self) -> RangeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def url_for(self, path: str | os.PathLike[str]) -> str:
        """The URL of ``path`` (relative to the root, or an absolute path inside it)."""
        p = Path(path)
        if p.is_absolute() and isinstance(self.root, Path):
            p = p.relative_to(self.root)
        return f"{self.url}/{urllib.parse.quote(p.as_posix().lstrip('/'))}"

    # -- counters -----------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget every count and record (the faults and the latency stay)."""
        with self._lock:
            self.counts: collections.Counter[str] = collections.Counter()
            self.bytes_sent = 0
            self.records: list[Record] = []
            #: the most requests being answered at once (a client's concurrency, seen here)
            self.max_in_flight = 0

    @property
    def requests(self) -> int:
        """Requests answered since the last reset (any method)."""
        return sum(self.counts.values())

    def ranges(self, path: str | None = None) -> list[tuple[int, int]]:
        """The byte ranges GET served (``(0, size)`` for a whole body), optionally of one path."""
        out = []
        for r in list(self.records):
            if r.method == "GET" and r.status in (200, 206) and (path is None or r.path == path):
                out.append(r.range if r.range is not None else (0, r.sent))
        return out

    def stats(self) -> dict[str, Any]:
        """The counters as plain data."""
        with self._lock:
            return {"counts": dict(self.counts), "requests": sum(self.counts.values()),
                    "bytes_sent": self.bytes_sent, "max_in_flight": self.max_in_flight,
                    "records": [r._asdict() for r in self.records]}

    # -- faults -------------------------------------------------------------------------------
    def fail(self, kind: str, path: str | None = None, **options: Any) -> Fault:
        """Inject a fault (:class:`Fault`) for one URL path (e.g. ``"/v.jnrrd"``) or all."""
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault {kind!r}; one of {FAULT_KINDS}")
        if path is not None and not path.startswith("/"):
            path = "/" + path
        fault = Fault(kind, path, **options)
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        """Remove every fault."""
        with self._lock:
            self.faults.clear()

    def _fault_for(self, method: str, path: str, range_header: str | None) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if method in fault.methods and fault.path in (None, path):
                    if fault.skip > 0:
                        fault.skip -= 1
                        return None
                    if fault.times is not None:
                        fault.times -= 1
                        if fault.times <= 0:
                            self.faults.remove(fault)
                    fault.met.append(range_header)
                    return fault
        return None

    # -- serving ------------------------------------------------------------------------------
    def _opened(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)

    def _closed(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)

    def _wait(self, seconds: float) -> None:
        if seconds > 0:
            self._stop.wait(min(seconds, MAX_WAIT))

    def _lookup(self, path: str) -> tuple[Any, int, str, float] | None:
        """(source, size, etag, mtime) of a URL path, None if there is no such file."""
        rel = posixpath.normpath(urllib.parse.unquote(path)).lstrip("/")
        if rel in ("", ".") or rel.startswith(".."):
            return None
        if isinstance(self.root, Mapping):
            data = self.root.get(rel)
            if data is None:
                return None
            data = bytes(data)
            etag = '"' + hashlib.sha256(data).hexdigest()[:32] + '"'
            return data, len(data), etag, self._started
        file = self.root / rel
        try:
            st = file.stat()
        except OSError:
            return None
        if not file.is_file():
            return None
        return file, st.st_size, f'"{st.st_size:x}-{st.st_mtime_ns:x}-{st.st_ino:x}"', st.st_mtime

    def _record(self, method: str, path: str, rng: tuple[int, int] | None, status: int,
                sent: int, header: str | None) -> Record:
        """Count a request before its first byte leaves: a client that has its answer sees it
        counted (``sent`` is what the body will hold; ``_short`` corrects a hang-up)."""
        record = Record(method, path, rng, status, sent, header)
        with self._lock:
            self.counts[method] += 1
            self.bytes_sent += sent
            self.records.append(record)
        return record

    def _short(self, record: Record, sent: int) -> None:
        """Correct a record whose body ended early (the client hung up)."""
        with self._lock:
            self.bytes_sent -= record.sent - sent
            for i in range(len(self.records) - 1, -1, -1):
                if self.records[i] is record:
                    self.records[i] = record._replace(sent=sent)
                    break

    def _answer(self, h: _Handler, method: str) -> None:
        path = urllib.parse.urlsplit(h.path).path
        if self.control and path.startswith(_CONTROL):
            return self._control(h, path[len(_CONTROL):])
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            self._serve(h, method, path)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _serve(self, h: _Handler, method: str, path: str) -> None:
        range_header = h.headers.get("Range")
        self._wait(self.latency)
        if any(h.headers.get(k) != v for k, v in self.required_headers.items()):
            return self._status(h, method, path, 401, range_header)
        fault = self._fault_for(method, path, range_header)
        if fault is not None and fault.kind == "stall":
            self._wait(fault.seconds)
            if self._stop.is_set():
                h.close_connection = True
                return
        if fault is not None and fault.kind == "status":
            return self._status(h, method, path, fault.status, range_header)
        found = self._lookup(path)
        if found is None:
            return self._status(h, method, path, 404, range_header)
        source, size, etag, mtime = found
        if h.headers.get("If-Match") not in (None, "*", etag):
            return self._status(h, method, path, 412, range_header)
        rng = parse_range(range_header, size)
        if h.headers.get("If-Range") not in (None, etag):
            rng = None
        if fault is not None and fault.kind == "ignore_range":
            rng = None
        if rng == "416":
            h.send_response(416)
            h.send_header("Content-Range", f"bytes */{size}")
            h.send_header("Content-Length", "0")
            self._record(method, path, None, 416, 0, range_header)
            return h.end_headers()
        assert not isinstance(rng, str)
        if rng is not None and fault is not None and fault.kind == "wrong_range":
            start = min(rng[0] + fault.shift, size - 1)
            rng = (start, min(size, start + rng[1] - rng[0]))
        start, stop = rng if rng is not None else (0, size)
        h.send_response(200 if rng is None else 206)
        h.send_header("Accept-Ranges", "bytes")
        h.send_header("ETag", etag)
        h.send_header("Last-Modified", email.utils.formatdate(mtime, usegmt=True))
        h.send_header("Content-Type", "application/octet-stream")
        h.send_header("Content-Length", str(stop - start))
        if rng is not None:
            h.send_header("Content-Range", f"bytes {start}-{stop - 1}/{size}")
        status = 200 if rng is None else 206
        if method == "HEAD":
            self._record(method, path, None, status, 0, range_header)
            return h.end_headers()
        limit = stop - start
        if fault is not None and fault.kind == "truncate":
            limit = min(limit, (stop - start) // 2 if fault.keep is None else fault.keep)
        record = self._record(method, path, rng, status, limit, range_header)
        h.end_headers()
        sent = self._send_body(h, source, start, start + limit)
        if sent < limit:
            self._short(record, sent)
        if limit < stop - start:
            h.close_connection = True
            try:
                h.connection.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def _send_body(self, h: _Handler, source: Any, start: int, stop: int) -> int:
        sent = 0
        try:
            if isinstance(source, bytes):
                h.wfile.write(source[start:stop])
                return stop - start
            with open(source, "rb") as f:
                f.seek(start)
                while sent < stop - start:
                    block = f.read(min(_CHUNK, stop - start - sent))
                    if not block:
                        break  # the file shrank under us: the client sees a short body
                    h.wfile.write(block)
                    sent += len(block)
        except OSError:  # the client hung up
            h.close_connection = True
        return sent

    def _status(self, h: _Handler, method: str, path: str, status: int,
                range_header: str | None) -> None:
        body = b"" if method == "HEAD" else f"{status} {path}\n".encode()
        h.send_response(status)
        h.send_header("Content-Type", "text/plain")
        h.send_header("Content-Length", str(len(body)))
        self._record(method, path, None, status, len(body), range_header)
        h.end_headers()
        if body:
            try:
                h.wfile.write(body)
            except OSError:
                h.close_connection = True

    def _control(self, h: _Handler, command: str) -> None:
        if command == "reset":
            self.reset()
        elif command.startswith("latency/"):
            self.latency = float(command.split("/", 1)[1])
        body = json.dumps(self.stats()).encode() if command == "stats" else b"{}"
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)


def main(argv: list[str] | None = None) -> None:
    """Serve a directory until interrupted; print the URL first (for benchmarks)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root")
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    server = RangeServer(args.root, latency=args.latency, port=args.port, control=True)
    print(server.url, flush=True)
    try:
        server._httpd.serve_forever(0.05)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()


if __name__ == "__main__":
    main()
