"""moto's S3 API server on 127.0.0.1 for tests and benchmarks, with request counts.

``S3Server()`` runs moto's WSGI application (``moto[server]``) in this process on a free
port, served by a daemon thread, behind a small middleware that counts requests (by method),
records each one (method, path, Range header, status, body bytes) and can inject latency.
``fail(...)`` refuses chosen requests (e.g. the PUTs of an upload after the first few).
``S3Server(process=True)`` runs ``python -m moto.server`` in a subprocess instead (no
counters; the client's decoding then does not share a GIL with the server): the port is
polled for a bounded time, and the process is killed on ``close()``.

Nothing here talks to AWS: the credentials are fixed dummies, ``AWS_ENV`` turns off the EC2
metadata lookup and points the AWS config files at nothing, and the endpoint is 127.0.0.1.
The module imports nothing from pytest (benchmarks use it too); moto is imported when a
server starts.
"""

from __future__ import annotations

import collections
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = ["AWS_ENV", "REGION", "S3Bucket", "S3Fault", "S3Record", "S3Server", "free_port"]

REGION = "us-east-1"
#: The environment a test (or the moto subprocess) runs with: dummy credentials, no lookups.
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}
_START_TIMEOUT = 30.0


class S3Record(NamedTuple):
    """One request the S3 server answered."""

    method: str
    #: ``/bucket/key`` (path-style addressing).
    path: str
    range_header: str | None
    status: int
    sent: int


class _Counting:
    """WSGI middleware: latency before each request, then count and record it."""

    def __init__(self, app: Callable[..., Iterable[bytes]], owner: S3Server) -> None:
        self.app = app
        self.owner = owner

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]
                 ) -> Iterator[bytes]:
        owner = self.owner
        if owner.latency > 0:
            owner._stop.wait(min(owner.latency, 60.0))
        method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
        rng = environ.get("HTTP_RANGE")
        fault = owner._fault_for(method, path)
        if fault is not None:
            yield from self._refuse(environ, start_response, fault, rng)
            return
        records: list[S3Record] = []

        def start(code: str, headers: Any, *args: Any) -> Any:
            # counted before werkzeug sends a byte: a client holding its answer sees it counted
            length = {k.lower(): v for k, v in headers}.get("content-length", "0")
            size = 0 if method == "HEAD" else int(length)
            records.append(owner._record(S3Record(method, path, rng, int(code.split()[0]), size)))
            return start_response(code, headers, *args)

        sent = 0
        try:
            for block in self.app(environ, start):
                sent += len(block)
                yield block
        finally:
            if records and records[0].sent != sent:
                owner._correct(records[0], sent)


    def _refuse(self, environ: dict[str, Any], start_response: Callable[..., Any],
                fault: S3Fault, rng: str | None) -> Iterator[bytes]:
        """Answer with the fault's status and an S3 error document (the body is read first,
        so the connection stays usable)."""
        length = int(environ.get("CONTENT_LENGTH") or 0)
        if length:
            environ["wsgi.input"].read(length)
        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{fault.code}</Code>'
                f"<Message>injected by the test server</Message></Error>").encode()
        reason = {403: "Forbidden", 500: "Internal Server Error", 503: "Service Unavailable"}
        self.owner._record(S3Record(environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""),
                                    rng, fault.status, len(body)))
        start_response(f"{fault.status} {reason.get(fault.status, 'Error')}",
                       [("Content-Type", "application/xml"),
                        ("Content-Length", str(len(body)))])
        yield body


@dataclass
class S3Fault:
    """Refuse requests: ``method`` (None: any) to paths containing ``contains`` (None: any),
    after letting ``skip`` of them through, ``times`` times (None: always)."""

    method: str | None = "PUT"
    contains: str | None = None
    status: int = 403
    code: str = "AccessDenied"
    skip: int = 0
    times: int | None = None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Server:
    """moto's S3 server on 127.0.0.1: ``endpoint_url``, ``storage_options()``, ``bucket()``."""

    def __init__(self, *, process: bool = False, latency: float = 0.0) -> None:
        self.process = process
        self.latency = latency
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._httpd: Any = None
        self.faults: list[S3Fault] = []
        self.reset()
        self.port = self._start_process() if process else self._start_thread()
        self.endpoint_url = f"http://127.0.0.1:{self.port}"

    def _start_thread(self) -> int:
        import logging

        from moto.server import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
        app = _Counting(DomainDispatcherApplication(create_backend_app), self)
        # Bound here, in the caller's thread: start-up is bounded, errors raise now.
        self._httpd = make_server("127.0.0.1", 0, app, threaded=True)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,),
                                        name="S3Server", daemon=True)
        self._thread.start()
        return int(self._httpd.server_address[1])

    def _start_process(self) -> int:
        port = free_port()
        env = {**os.environ, **AWS_ENV}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=env)
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"moto.server exited with {self._proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return port
            except OSError:
                time.sleep(0.05)
        self.close()
        raise RuntimeError(f"moto.server did not listen on 127.0.0.1:{port} within "
                           f"{_START_TIMEOUT:.0f} s")

    def close(self) -> None:
        """Stop the server (thread or process); returns within seconds."""
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=5)
            self._proc = None

    def __enter__(self) -> S3Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- clients ------------------------------------------------------------------------------
    def storage_options(self) -> dict[str, Any]:
        """s3fs keyword arguments for this server (fresh dict each call)."""
        return {"key": AWS_ENV["AWS_ACCESS_KEY_ID"], "secret": AWS_ENV["AWS_SECRET_ACCESS_KEY"],
                "endpoint_url": self.endpoint_url, "client_kwargs": {"region_name": REGION}}

    def bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh random name by default) and return its name."""
        name = name or f"test-{uuid.uuid4().hex[:16]}"
        request = urllib.request.Request(f"{self.endpoint_url}/{name}", method="PUT")
        with urllib.request.urlopen(request, timeout=10) as answer:
            answer.read()
        return name

    # -- faults (the in-process server only) --------------------------------------------------
    def fail(self, method: str | None = "PUT", contains: str | None = None, **options: Any
             ) -> S3Fault:
        """Refuse matching requests (see :class:`S3Fault`), e.g. every PUT after the third:
        ``fail("PUT", skip=3)``; 5xx statuses are retried by botocore, 403 is not."""
        fault = S3Fault(method, contains, **options)
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        """Remove every fault."""
        with self._lock:
            self.faults.clear()

    def _fault_for(self, method: str, path: str) -> S3Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.method not in (None, method) or (
                        fault.contains is not None and fault.contains not in path):
                    continue
                if fault.skip > 0:
                    fault.skip -= 1
                    return None
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        self.faults.remove(fault)
                return fault
        return None

    # -- counters (the in-process server only) ------------------------------------------------
    def reset(self) -> None:
        """Forget every count and record."""
        with self._lock:
            self.counts: collections.Counter[str] = collections.Counter()
            self.bytes_sent = 0
            self.records: list[S3Record] = []

    @property
    def requests(self) -> int:
        """Requests answered since the last reset (any method)."""
        return sum(self.counts.values())

    def _record(self, record: S3Record) -> S3Record:
        with self._lock:
            self.counts[record.method] += 1
            self.bytes_sent += record.sent
            self.records.append(record)
        return record

    def _correct(self, record: S3Record, sent: int) -> None:
        with self._lock:
            self.bytes_sent += sent - record.sent
            for i in range(len(self.records) - 1, -1, -1):
                if self.records[i] is record:
                    self.records[i] = record._replace(sent=sent)
                    break


class S3Bucket(NamedTuple):
    """A fresh bucket on a running server, as the ``s3`` fixture gives it."""

    server: S3Server
    bucket: str
    storage_options: dict[str, Any]

    def url(self, key: str = "") -> str:
        """``s3://bucket/key``."""
        return f"s3://{self.bucket}/{key.lstrip('/')}"

    def path(self, key: str = "") -> str:
        """``bucket/key`` (the form s3fs methods take)."""
        return f"{self.bucket}/{key.lstrip('/')}"
