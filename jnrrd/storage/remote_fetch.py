"""Byte-range requests to an fsspec filesystem: many in flight, merged when close, checked.

A :class:`Fetcher` runs the requests of one filesystem. On an asynchronous filesystem
(``s3fs``, ``gcsfs``, ``adlfs``, fsspec's HTTP) they run as coroutines on fsspec's own event
loop, at most ``policy.io.request_concurrency`` at once, each returning a
:class:`concurrent.futures.Future` at once, so decoding starts on the first bytes while later
ones are still on the wire. Other filesystems (``memory://``, ``sftp``, ...) run them on the
I/O pool of :mod:`jnrrd._threads`. In a forked child a fetcher makes its own client, loop and
locks on first use, so an object opened before the fork reads there too.

Every answer is checked. HTTP requests are sent and checked by :mod:`.remote_http` (status,
redirects, ``Content-Range``, encoding, the object's version, bodies bounded by the request);
S3 ``GetObject`` answers carry ``If-Match`` and are read as far as their range and no further
(:mod:`.bodies`); an answer longer than the range asked for is a ``RemoteError``. A failure
names the URL and the byte range; 5xx answers and dropped connections are retried
``policy.io.request_retries`` times first, timeouts are not (a silent server fails in
``policy.io.read_timeout``, every request in ``policy.io.request_timeout``). A missing object is
:class:`~jnrrd.errors.ObjectNotFoundError` (a ``FileNotFoundError``).

:func:`plan_requests` merges the byte ranges of a selection into few requests: neighbours
whose gap is at most ``gap`` bytes share a request, and a long run is cut into pieces so that
several connections carry it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import re
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from .._threads import io_submit
from ..errors import DataError, JnrrdError, ObjectNotFoundError, RemoteError
from ..policy import Policy
from .aio import http_client, in_thread
from .aio import loop as aio_loop
from .bodies import Answer, LongBody, Retry, ShortBody, read_exact
from .remote_http import describe, http_get, span
from .validators import Validator

__all__ = ["Answer", "Fetcher", "Parts", "Piece", "backoff", "gave_up", "plan_requests"]

#: the smallest piece a long run of ranges is cut into for parallel requests
MIN_PIECE = 1 << 20
#: ... and the largest
MAX_PIECE = 32 << 20
_TOTAL = re.compile(r"^\s*bytes\s+[\d*-]+/(\d+)\s*$", re.IGNORECASE)
_FORK_LOCK = threading.Lock()


class Fetcher:
    """The range requests of one fsspec filesystem ``fs`` under ``policy``'s limits."""

    def __init__(self, fs: Any, policy: Policy) -> None:
        self.fs = fs
        self.policy = policy
        self.http = _is_http(fs)
        #: objects open with a ranged GET whose answer gives their size and version (HTTP;
        #: elsewhere the filesystem's ``info`` does)
        self.ranged_open = self.http
        self.s3 = _protocols(fs) & {"s3", "s3a"} != set() and hasattr(fs, "call_s3")
        # obstore's requests block in its own threads (:mod:`.remote_obstore_fetch`)
        ours = not getattr(fs, "obstore", False)
        #: HTTP: our own session (:mod:`.aio`) with the caller's options
        self.client = (http_client(getattr(fs, "storage_options", {}))
                       if self.http and ours else None)
        # requests of asynchronous filesystems run as coroutines on the request loop
        self.loop = (aio_loop() if ours and (self.http or getattr(fs, "async_impl", False))
                     else None)
        self._sem: asyncio.Semaphore | None = None
        self._lock = threading.Lock()
        self._waiting = 0  # requests submitted and not yet answered
        self._pid = os.getpid()

    def filesystem(self) -> Any:
        """The filesystem this process's requests go through (:meth:`_this_process`)."""
        self._this_process()
        return self.fs

    def _this_process(self) -> None:
        """After a fork, this process's own client, loop and locks: the parent's (an
        asynchronous fsspec filesystem, the request loop, a lock held at the fork) do not
        work in the child, so an object opened before the fork reads here too."""
        if self._pid == os.getpid():
            return
        with _FORK_LOCK:
            if self._pid != os.getpid():
                Fetcher.__init__(self, self._fs_for_this_process(), self.policy)

    def _fs_for_this_process(self) -> Any:
        fs = self.fs
        if getattr(fs, "async_impl", False):  # fsspec's instances are per process
            return type(fs)(*fs.storage_args, **fs.storage_options)
        return fs

    # -- submitting -------------------------------------------------------------------------
    def submit(self, path: str, start: int, stop: int, *, url: str, exact: bool = True,
               expect: Validator | None = None) -> Future[Answer]:
        """Start fetching bytes ``start:stop`` of ``path``; ``exact``: the object must hold
        them all (else a short answer is the object's end); ``expect``: the version the
        answer must come from (:meth:`Validator.check`)."""
        self._this_process()
        with self._lock:
            self._waiting += 1
        future = self._launch(path, start, stop, url, exact, expect)
        future.add_done_callback(self._answered)
        return future

    def submit_parts(self, path: str, start: int, stop: int, parts: Sequence[tuple[int, int]],
                     *, url: str, expect: Validator | None = None
                     ) -> list[Future[memoryview]]:
        """Fetch bytes ``start:stop`` in one request, and hand out each of ``parts`` (ranges
        relative to ``start``) as soon as the body has passed its end: one future each, so
        the first tiles of a long request decode while the rest are on the wire."""
        sink = Parts(parts)
        self._this_process()
        with self._lock:
            self._waiting += 1
        whole = self._launch(path, start, stop, url, True, expect, sink)
        whole.add_done_callback(self._answered)
        whole.add_done_callback(sink.finish)
        return sink.futures

    def _launch(self, path: str, start: int, stop: int, url: str, exact: bool,
                expect: Validator | None = None, sink: Parts | None = None, *,
                head: bool = False) -> Future[Answer]:
        """One request (with its retries) started: a coroutine on the request loop for an
        asynchronous filesystem, a blocking call on the I/O pool otherwise."""
        if self.loop is not None:
            coro = self._attempts(path, start, stop, url, exact, expect, sink, head=head)
            return asyncio.run_coroutine_threadsafe(coro, self.loop)
        return io_submit(self._sync, path, start, stop, url, exact)

    def _answered(self, _: Future[Answer]) -> None:
        with self._lock:
            self._waiting -= 1

    def wait(self, future: Future[Any], url: str, start: int, stop: int | None) -> Any:
        """The answer of ``future``, within the time it may take: its own tries, after the
        tries of the requests queued before it (each bounded by ``request_timeout``)."""
        p = self.policy
        rounds = 1 + self._waiting // max(1, p.io.request_concurrency)
        limit = ((p.io.request_timeout + 1.0) * (p.io.request_retries + 1) + 5.0) * rounds + 25.0
        try:
            return future.result(timeout=limit)
        except FutureTimeout:
            future.cancel()
            raise RemoteError(f"{url}: {span(start, stop)}: no answer within {limit:.0f} s"
                              ) from None

    def get(self, path: str, start: int, stop: int, *, url: str, exact: bool = True,
            expect: Validator | None = None) -> Answer:
        """:meth:`submit`, then :meth:`wait`."""
        return self.wait(self.submit(path, start, stop, url=url, exact=exact, expect=expect),
                         url, start, stop)

    def info(self, path: str, *, url: str) -> dict[str, Any]:
        """The object's metadata: ``size`` (``None`` when the server does not say), ``type``,
        and ``validator`` over HTTP (one ranged ``GET`` of its first byte, checked as any
        request: redirects, timeouts, status); the filesystem's ``info`` elsewhere (size,
        ETag, ...), asked of the store, never of a listing the filesystem cached: another
        process may have replaced the object since. Errors name the URL."""
        self._this_process()
        if self.ranged_open:
            answer = self.wait(self._launch(path, 0, 1, url, False, head=True), url, 0, 1)
            return {"name": path, "size": answer.total, "type": "file",
                    "validator": answer.validator}
        with contextlib.suppress(Exception):
            self.fs.invalidate_cache(path)
        try:
            future = io_submit(self.fs.info, path)
            return future.result(timeout=self.policy.io.request_timeout + 5.0)
        except FileNotFoundError as exc:
            raise ObjectNotFoundError(errno.ENOENT, f"no such object ({exc})", url) from None
        except IsADirectoryError:
            raise
        except FutureTimeout:
            raise RemoteError(f"{url}: no answer to the metadata request within "
                              f"{self.policy.io.request_timeout:.0f} s") from None
        except PermissionError as exc:
            raise RemoteError(f"{url}: access denied ({exc})") from None
        except Exception as exc:  # any client failure, named with the URL
            raise RemoteError(f"{url}: metadata request failed: {describe(exc)}") from None

    # -- one request, with retries ----------------------------------------------------------
    async def _attempts(self, path: str, start: int, stop: int, url: str, exact: bool,
                        expect: Validator | None = None, sink: Parts | None = None, *,
                        head: bool = False) -> Answer:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.policy.io.request_concurrency)
        retries, timeout = self.policy.io.request_retries, self.policy.io.request_timeout
        async with self._sem:
            for attempt in range(retries + 1):
                try:
                    async with asyncio.timeout(timeout):  # no task of its own (wait_for's)
                        answer = await self._once(path, start, stop, url, expect, sink, head)
                except Retry as exc:
                    reason = exc.message
                except TimeoutError:  # not retried: a person waits once
                    raise RemoteError(f"{url}: {span(start, stop)}: no complete answer "
                                      f"within {timeout:g} s (request_timeout)") from None
                else:
                    return _checked(answer, start, stop, url, exact)
                if attempt < retries:
                    await asyncio.sleep(backoff(attempt))
        raise gave_up(url, start, stop, reason, retries)

    async def _once(self, path: str, start: int, stop: int, url: str,
                    expect: Validator | None, sink: Parts | None, head: bool) -> Answer:
        if self.client is not None:
            return await http_get(self.client, path, start, stop, policy=self.policy,
                                  expect=expect, sink=sink, head=head)
        try:
            if self.s3:
                return await self._s3(path, start, stop, url, expect, sink)
            data = await in_thread(self.fs.cat_file, path, start=start, end=stop)
        except FileNotFoundError as exc:
            raise ObjectNotFoundError(errno.ENOENT, f"no such object ({exc})", url) from None
        except (IsADirectoryError, JnrrdError, Retry):
            raise
        except PermissionError as exc:
            raise RemoteError(f"{url}: {span(start, stop)}: access denied ({exc})") from None
        except (TypeError, ValueError) as exc:  # a bad option: no retry helps
            raise RemoteError(f"{url}: {span(start, stop)}: {describe(exc)}") from None
        except Exception as exc:  # client libraries raise their own types
            text = str(exc)
            if expect is not None and ("PreconditionFailed" in text or "412" in text
                                       or "pre-conditions" in text):
                raise DataError(f"{url}: the object changed while it was read (its ETag is "
                                f"no longer {expect.etag})") from None
            raise Retry(describe(exc)) from None
        return Answer(bytes(data))

    async def _s3(self, path: str, start: int, stop: int, url: str,
                  expect: Validator | None, sink: Parts | None = None) -> Answer:
        """One ranged ``GetObject`` through s3fs's public ``call_s3``, with ``IfMatch`` when
        the version is known; the body is read (on s3fs's loop, where its client lives) as
        far as the range and no further."""
        if stop <= start:
            return Answer(b"")
        fs = self.fs
        bucket, key, version = fs.split_path(path)
        kw: dict[str, Any] = {"Range": f"bytes={start}-{stop - 1}"}
        if version:
            kw["VersionId"] = version
        if expect is not None and expect.etag:
            kw["IfMatch"] = expect.etag
        resp = await in_thread(fs.call_s3, "get_object", Bucket=bucket, Key=key, **kw)
        body = resp["Body"]
        try:
            m = _TOTAL.match(resp.get("ContentRange") or "")
            total = int(m.group(1)) if m else None
            got = Validator(resp.get("ETag") or None, _text(resp.get("LastModified")), total)
            if expect is not None:
                expect.check(got, url)
            n = resp.get("ContentLength")
            if not isinstance(n, int) or n > stop - start:
                raise RemoteError(f"{url}: {span(start, stop)}: the answer holds {n} bytes, "
                                  "not the range asked for")
            try:  # read on s3fs's loop, where the body's stream belongs: one hop, not one a piece
                data = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(
                    read_exact(body.read, n, sink), fs.loop))
            except ShortBody as exc:
                raise Retry(str(exc)) from None
            except LongBody as exc:
                raise RemoteError(f"{url}: {span(start, stop)}: {exc}") from None
        finally:
            fs.loop.call_soon_threadsafe(body.close)
        return Answer(data, total, got)

    def _sync(self, path: str, start: int, stop: int, url: str, exact: bool) -> Answer:
        retries = self.policy.io.request_retries
        for attempt in range(retries + 1):
            try:
                data = self.fs.cat_file(path, start=start, end=stop)
            except FileNotFoundError as exc:
                raise ObjectNotFoundError(errno.ENOENT, f"no such object ({exc})", url
                                          ) from None
            except IsADirectoryError:
                raise
            except PermissionError as exc:
                raise RemoteError(f"{url}: {span(start, stop)}: access denied ({exc})"
                                  ) from None
            except Exception as exc:  # any client failure, retried then named
                if attempt == retries:
                    raise RemoteError(f"{url}: {span(start, stop)}: {describe(exc)}"
                                      ) from None
                continue
            return _checked(Answer(bytes(data)), start, stop, url, exact)
        raise AssertionError("unreachable")


def backoff(attempt: int) -> float:
    """Seconds to wait after failed try ``attempt`` (0, 1, ...) before the next."""
    return 0.05 * 4**attempt


def gave_up(url: str, start: int, stop: int, reason: str, retries: int) -> RemoteError:
    """The error of a request whose every try failed, the last for ``reason``."""
    return RemoteError(f"{url}: {span(start, stop)}: {reason}"
                       + (f" (after {retries + 1} tries)" if retries else ""))


def _checked(answer: Answer, start: int, stop: int, url: str, exact: bool) -> Answer:
    if len(answer.data) > stop - start:
        raise RemoteError(f"{url}: {span(start, stop)}: {len(answer.data)} bytes answered, "
                          f"more than asked")
    if exact and len(answer.data) != stop - start:
        raise DataError(f"{url}: {span(start, stop)}: the object ended early "
                        f"({len(answer.data)} of {stop - start} bytes)")
    return answer


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _protocols(fs: Any) -> set[str]:
    protocol = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    return set(protocol)


def _is_http(fs: Any) -> bool:
    return bool(_protocols(fs) & {"http", "https"})


class Parts:
    """The parts of one request (ranges relative to its start), each a future resolved as
    soon as the bytes received cover it; the rest are resolved (or failed) at the end."""

    def __init__(self, parts: Sequence[tuple[int, int]]) -> None:
        self.parts = list(parts)
        self.futures: list[Future[memoryview]] = [Future() for _ in self.parts]
        self._by_end = sorted(range(len(self.parts)), key=lambda i: self.parts[i][1])
        self._next = 0

    def received(self, buf: memoryview, got: int) -> None:
        """Resolve every part that ends within the first ``got`` bytes of ``buf``."""
        order, parts = self._by_end, self.parts
        while self._next < len(order) and parts[order[self._next]][1] <= got:
            i = order[self._next]
            self._next += 1
            fut = self.futures[i]
            if not fut.done():  # a retried request passes parts it already handed out
                fut.set_result(buf[parts[i][0] : parts[i][1]])
        if got < len(buf):
            return
        self._next = 0  # a retry starts over

    def finish(self, whole: Future[Answer]) -> None:
        """The request ended: resolve what is left from its answer, or fail it."""
        exc = whole.exception() if not whole.cancelled() else RemoteError("request cancelled")
        data = None if exc is not None else whole.result().data
        for (a, b), fut in zip(self.parts, self.futures, strict=True):
            if fut.done():
                continue
            if exc is not None:
                fut.set_exception(exc)
            else:
                assert data is not None
                fut.set_result(memoryview(data)[a:b])


@dataclass
class Piece:
    """One request of a plan: bytes ``start:stop`` serving the ranges ``members`` (indices
    into the planned list)."""

    start: int
    stop: int
    members: list[int]


def plan_requests(ranges: Sequence[tuple[int, int]], *, gap: int, concurrency: int
                  ) -> list[Piece]:
    """Merge ``ranges`` (``(start, stop)``) into few requests: sorted, neighbours at most
    ``gap`` bytes apart joined (at most 32 MiB a request). When that leaves fewer runs than
    ``concurrency`` connections, long runs are cut (between ranges) into pieces of about
    ``total / concurrency`` bytes (at least 1 MiB) so that they travel on several connections;
    otherwise every run is one request (one round trip for them all)."""
    order = sorted(range(len(ranges)), key=lambda i: ranges[i])
    runs = _merge(ranges, order, gap, MAX_PIECE)
    if len(runs) >= concurrency:
        return runs
    total = sum(b - a for a, b in ranges)
    piece = min(MAX_PIECE, max(MIN_PIECE, -(-total // max(1, concurrency))))
    return _merge(ranges, order, gap, piece)


def _merge(ranges: Sequence[tuple[int, int]], order: list[int], gap: int, piece: int
           ) -> list[Piece]:
    out: list[Piece] = []
    for i in order:
        a, b = ranges[i]
        last = out[-1] if out else None
        if last is not None and a - last.stop <= gap and max(b, last.stop) - last.start <= piece:
            last.stop = max(last.stop, b)
            last.members.append(i)
        elif last is not None and a >= last.start and b <= last.stop:
            last.members.append(i)  # inside the previous request (a repeated range)
        else:
            out.append(Piece(a, b, [i]))
    return out
