"""Byte-range requests to an fsspec filesystem: many in flight, merged when close, checked.

A :class:`Fetcher` runs the requests of one filesystem. On an asynchronous filesystem
(``s3fs``, ``gcsfs``, ``adlfs``, fsspec's HTTP) they run as coroutines on fsspec's own event
loop, at most ``policy.request_concurrency`` at once, each returning a
:class:`concurrent.futures.Future` at once, so decoding starts on the first bytes while later
ones are still on the wire. Other filesystems (``memory://``, ``sftp``, ...) run them on the
I/O pool of :mod:`jnrrd._threads`.

Every answer is checked: an HTTP status other than 200/206, a ``Content-Range`` that is not
the range asked for, a body shorter than it, a timeout are a :class:`~jnrrd.errors.RemoteError`
naming the URL and the byte range (5xx answers, dropped connections and timeouts are retried
``policy.request_retries`` times first). A missing object is ``FileNotFoundError``.

:func:`plan_requests` merges the byte ranges of a selection into few requests: neighbours
whose gap is at most ``gap`` bytes share a request, and a long run is cut into pieces so that
several connections carry it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import re
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from functools import partial
from typing import Any

from .._threads import io_submit
from ..errors import DataError, RemoteError
from ..policy import Policy

__all__ = ["Answer", "Fetcher", "Parts", "Piece", "plan_requests"]

_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$", re.IGNORECASE)
#: the smallest piece a long run of ranges is cut into for parallel requests
MIN_PIECE = 1 << 20
#: ... and the largest
MAX_PIECE = 32 << 20


@dataclass
class Answer:
    """What a request returned: the bytes, the object's total size when the server said it
    (``Content-Range``), and its version token when the answer carried one (``ETag``)."""

    data: bytes
    total: int | None = None
    etag: str | None = None


class _Retry(Exception):
    """A failure worth another try (5xx, a dropped connection, a timeout)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Fetcher:
    """The range requests of one fsspec filesystem ``fs`` under ``policy``'s limits."""

    def __init__(self, fs: Any, policy: Policy) -> None:
        self.fs = fs
        self.policy = policy
        self.http = _is_http(fs)
        self.s3 = _protocols(fs) & {"s3", "s3a"} != set() and hasattr(fs, "_call_s3")
        self.loop = getattr(fs, "loop", None) if getattr(fs, "async_impl", False) else None
        self._sem: asyncio.Semaphore | None = None
        self._lock = threading.Lock()
        self._waiting = 0  # requests submitted and not yet answered

    # -- submitting -------------------------------------------------------------------------
    def submit(self, path: str, start: int, stop: int | None, *, url: str,
               exact: bool = True, etag: str | None = None) -> Future[Answer]:
        """Start fetching bytes ``start:stop`` of ``path`` (``stop=None``: to the end);
        ``exact``: the object must hold them all (else a short answer is the object's end);
        ``etag``: the version the bytes must come from (S3: ``If-Match``)."""
        with self._lock:
            self._waiting += 1
        if self.loop is not None:
            coro = self._attempts(path, start, stop, url, exact, etag)
            future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        else:
            future = io_submit(self._sync, path, start, stop, url, exact)
        future.add_done_callback(self._answered)
        return future

    def submit_parts(self, path: str, start: int, stop: int, parts: Sequence[tuple[int, int]],
                     *, url: str, etag: str | None = None) -> list[Future[memoryview]]:
        """Fetch bytes ``start:stop`` in one request, and hand out each of ``parts`` (ranges
        relative to ``start``) as soon as the body has passed its end: one future each, so
        the first tiles of a long request decode while the rest are on the wire."""
        sink = Parts(parts)
        with self._lock:
            self._waiting += 1
        if self.loop is not None:
            coro = self._attempts(path, start, stop, url, True, etag, sink)
            whole = asyncio.run_coroutine_threadsafe(coro, self.loop)
        else:
            whole = io_submit(self._sync, path, start, stop, url, True)
        whole.add_done_callback(self._answered)
        whole.add_done_callback(sink.finish)
        return sink.futures

    def _answered(self, _: Future[Answer]) -> None:
        with self._lock:
            self._waiting -= 1

    def wait(self, future: Future[Any], url: str, start: int, stop: int | None) -> Any:
        """The answer of ``future``, within the time it may take: its own tries, after the
        tries of the requests queued before it (each bounded by ``request_timeout``)."""
        p = self.policy
        rounds = 1 + self._waiting // max(1, p.request_concurrency)
        limit = ((p.request_timeout + 1.0) * (p.request_retries + 1) + 5.0) * rounds + 25.0
        try:
            return future.result(timeout=limit)
        except FutureTimeout:
            future.cancel()
            raise RemoteError(f"{url}: {_span(start, stop)}: no answer within {limit:.0f} s"
                              ) from None

    def get(self, path: str, start: int, stop: int | None, *, url: str,
            exact: bool = True, etag: str | None = None) -> Answer:
        """:meth:`submit`, then :meth:`wait`."""
        return self.wait(self.submit(path, start, stop, url=url, exact=exact, etag=etag), url,
                         start, stop)

    def info(self, path: str, *, url: str) -> dict[str, Any]:
        """The filesystem's ``info`` of ``path`` (size, ETag, ...); errors name the URL.
        Asked of the store, never of a listing the filesystem cached: another process may
        have replaced the object since."""
        with contextlib.suppress(Exception):
            self.fs.invalidate_cache(path)
        try:
            future = io_submit(self.fs.info, path)
            return future.result(timeout=self.policy.request_timeout + 5.0)
        except FileNotFoundError as exc:
            raise FileNotFoundError(errno.ENOENT, f"no such object ({exc})", url) from None
        except IsADirectoryError:
            raise
        except FutureTimeout:
            raise RemoteError(f"{url}: no answer to the metadata request within "
                              f"{self.policy.request_timeout:.0f} s") from None
        except PermissionError as exc:
            raise RemoteError(f"{url}: access denied ({exc})") from None
        except Exception as exc:  # any client failure, named with the URL
            raise RemoteError(f"{url}: metadata request failed: {_describe(exc)}") from None

    # -- one request, with retries ----------------------------------------------------------
    async def _attempts(self, path: str, start: int, stop: int | None, url: str,
                        exact: bool, etag: str | None = None, sink: Parts | None = None
                        ) -> Answer:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.policy.request_concurrency)
        retries, timeout = self.policy.request_retries, self.policy.request_timeout
        async with self._sem:
            for attempt in range(retries + 1):
                try:
                    answer = await asyncio.wait_for(
                        self._once(path, start, stop, url, etag, sink), timeout)
                except _Retry as exc:
                    reason = exc.message
                except TimeoutError:
                    reason = f"no answer within {timeout:g} s"
                else:
                    return _checked(answer, start, stop, url, exact)
                if attempt < retries:
                    await asyncio.sleep(0.05 * 4**attempt)
        raise RemoteError(f"{url}: {_span(start, stop)}: {reason}"
                          + (f" (after {retries + 1} tries)" if retries else ""))

    async def _once(self, path: str, start: int, stop: int | None, url: str,
                    etag: str | None = None, sink: Parts | None = None) -> Answer:
        if self.http:
            return await self._http(path, start, stop, url, etag, sink)
        try:
            if self.s3:
                return await self._s3(path, start, stop, etag, sink)
            data = await self.fs._cat_file(path, start=start, end=stop)
        except FileNotFoundError as exc:
            raise FileNotFoundError(errno.ENOENT, f"no such object ({exc})", url) from None
        except IsADirectoryError:
            raise
        except PermissionError as exc:
            raise RemoteError(f"{url}: {_span(start, stop)}: access denied ({exc})") from None
        except (TypeError, ValueError) as exc:  # a bad option: no retry helps
            raise RemoteError(f"{url}: {_span(start, stop)}: {_describe(exc)}") from None
        except Exception as exc:  # client libraries raise their own types
            text = str(exc)
            if etag and ("PreconditionFailed" in text or "412" in text
                         or "pre-conditions" in text):
                raise DataError(f"{url}: the object changed while it was read (its ETag is "
                                f"no longer {etag})") from None
            raise _Retry(_describe(exc)) from None
        return Answer(bytes(data))

    async def _s3(self, path: str, start: int, stop: int | None, etag: str | None,
                  sink: Parts | None = None) -> Answer:
        """One ranged ``GetObject`` through s3fs, with ``IfMatch`` when the version is known
        (the ETag of the answer comes back with it)."""
        fs = self.fs
        bucket, key, version = fs.split_path(path)
        kw: dict[str, Any] = {"Range": f"bytes={start}-" + ("" if stop is None else
                                                              str(stop - 1))}
        if version:
            kw["VersionId"] = version
        if etag:
            kw["IfMatch"] = etag
        if stop is not None and stop <= start:
            return Answer(b"")
        resp = await fs._call_s3("get_object", Bucket=bucket, Key=key, **kw)
        body = resp["Body"]
        try:
            if sink is None or stop is None:
                data: Any = await body.read()
            else:
                data = await _stream(partial(body.read, _CHUNK), stop - start, sink)
        finally:
            body.close()
        return Answer(data, etag=resp.get("ETag"))

    async def _http(self, url: str, start: int, stop: int | None, name: str,
                    etag: str | None = None, sink: Parts | None = None) -> Answer:
        fs = self.fs
        kw = dict(fs.kwargs)
        headers = dict(kw.pop("headers", None) or {})
        headers["Range"] = f"bytes={start}-" + ("" if stop is None else str(stop - 1))
        headers.setdefault("Accept-Encoding", "identity")  # byte offsets of the object
        try:
            session = await fs.set_session()
            async with session.get(fs.encode_url(url), headers=headers, **kw) as r:
                return await _http_answer(r, start, stop, name, etag, sink)
        except (FileNotFoundError, RemoteError, DataError, _Retry):
            raise
        except (TypeError, ValueError) as exc:  # a bad option: no retry helps
            raise RemoteError(f"{name}: {_span(start, stop)}: {_describe(exc)}") from None
        except Exception as exc:  # aiohttp's errors, a dropped connection
            raise _Retry(_describe(exc)) from None

    def _sync(self, path: str, start: int, stop: int | None, url: str, exact: bool) -> Answer:
        retries = self.policy.request_retries
        for attempt in range(retries + 1):
            try:
                data = self.fs.cat_file(path, start=start, end=stop)
            except (FileNotFoundError, IsADirectoryError):
                raise
            except PermissionError as exc:
                raise RemoteError(f"{url}: {_span(start, stop)}: access denied ({exc})"
                                  ) from None
            except Exception as exc:  # any client failure, retried then named
                if attempt == retries:
                    raise RemoteError(f"{url}: {_span(start, stop)}: {_describe(exc)}"
                                      ) from None
                continue
            return _checked(Answer(bytes(data)), start, stop, url, exact)
        raise AssertionError("unreachable")


async def _http_answer(r: Any, start: int, stop: int | None, url: str,
                       etag: str | None = None, sink: Parts | None = None) -> Answer:
    """Check an aiohttp response to a range request and read its body (into ``sink`` as it
    arrives, when given)."""
    span = _span(start, stop)
    if r.status == 404:
        raise FileNotFoundError(errno.ENOENT, "no such object", url)
    if r.status == 416:  # the range starts at or past the end: an empty object or range
        total = _total(r.headers.get("Content-Range"))
        return Answer(b"", total, r.headers.get("ETag"))
    if r.status >= 500 or r.status == 429:
        raise _Retry(f"HTTP {r.status} {r.reason or ''}".rstrip())
    if r.status not in (200, 206):
        raise RemoteError(f"{url}: {span}: HTTP {r.status} {r.reason or ''}".rstrip())
    got_etag = r.headers.get("ETag")
    if etag is not None and got_etag is not None and got_etag != etag:
        raise DataError(f"{url}: the object changed while it was read (ETag {etag} became "
                        f"{got_etag})")
    etag = got_etag
    if r.status == 200:
        # the server ignored the range: acceptable only for an object that ends within it
        length = r.headers.get("Content-Length")
        if start != 0 or length is None or (stop is not None and int(length) > stop):
            raise RemoteError(f"{url}: {span}: the server answered with the whole object "
                              "(HTTP 200): it does not serve byte ranges")
        data = await r.read()
        return Answer(data, len(data), etag)
    m = _CONTENT_RANGE.match(r.headers.get("Content-Range", ""))
    if m is None:
        raise RemoteError(f"{url}: {span}: HTTP 206 without a valid Content-Range "
                          f"({r.headers.get('Content-Range')!r})")
    first, last = int(m.group(1)), int(m.group(2))
    total = None if m.group(3) == "*" else int(m.group(3))
    want_last = (stop - 1) if stop is not None else None
    if total is not None and want_last is not None:
        want_last = min(want_last, total - 1)
    if first != start or (want_last is not None and last != want_last):
        raise RemoteError(f"{url}: {span}: the server answered bytes {first}-{last} "
                          f"(Content-Range {r.headers.get('Content-Range')!r})")
    try:
        if sink is None:
            data: Any = await r.read()
        else:
            # whatever the connection has received, as it was received: no joins or slices
            data = await _stream(r.content.readany, last - first + 1, sink)
    except Exception as exc:  # a body cut short
        raise _Retry(f"the body ended early ({_describe(exc)})") from None
    if len(data) != last - first + 1:
        raise _Retry(f"the body holds {len(data)} bytes, Content-Range says "
                     f"{last - first + 1}")
    return Answer(data, total, etag)


def _checked(answer: Answer, start: int, stop: int | None, url: str, exact: bool) -> Answer:
    if stop is not None and len(answer.data) > stop - start:
        raise RemoteError(f"{url}: {_span(start, stop)}: {len(answer.data)} bytes answered, "
                          f"more than asked")
    if exact and stop is not None and len(answer.data) != stop - start:
        raise DataError(f"{url}: {_span(start, stop)}: the object ended early "
                        f"({len(answer.data)} of {stop - start} bytes)")
    return answer


def _total(content_range: str | None) -> int | None:
    m = re.match(r"^\s*bytes\s+\*/(\d+)\s*$", content_range or "")
    return int(m.group(1)) if m else None


def _span(start: int, stop: int | None) -> str:
    return f"bytes {start}-" + ("" if stop is None else str(stop - 1))


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _protocols(fs: Any) -> set[str]:
    protocol = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    return set(protocol)


def _is_http(fs: Any) -> bool:
    return bool(_protocols(fs) & {"http", "https"})


async def _stream(next_chunk: Any, size: int, sink: Parts) -> bytearray:
    """Read ``size`` body bytes, a chunk at a time from ``await next_chunk()``, into one
    buffer, handing ``sink`` every part the bytes received so far cover."""
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        chunk = await next_chunk()
        if not chunk:
            break
        if len(chunk) > size - got:
            raise _Retry(f"the body holds more than the {size} bytes of its range")
        view[got : got + len(chunk)] = chunk
        got += len(chunk)
        sink.received(buf, got)
    if got != size:
        raise _Retry(f"the body ended early ({got} of {size} bytes)")
    return buf


#: the most bytes read from an S3 response body at a time
_CHUNK = 256 << 10


class Parts:
    """The parts of one request (ranges relative to its start), each a future resolved as
    soon as the bytes received cover it; the rest are resolved (or failed) at the end."""

    def __init__(self, parts: Sequence[tuple[int, int]]) -> None:
        self.parts = list(parts)
        self.futures: list[Future[memoryview]] = [Future() for _ in self.parts]
        self._by_end = sorted(range(len(self.parts)), key=lambda i: self.parts[i][1])
        self._next = 0

    def received(self, buf: bytearray, got: int) -> None:
        """Resolve every part that ends within the first ``got`` bytes of ``buf``."""
        order, parts = self._by_end, self.parts
        while self._next < len(order) and parts[order[self._next]][1] <= got:
            i = order[self._next]
            self._next += 1
            fut = self.futures[i]
            if not fut.done():  # a retried request passes parts it already handed out
                fut.set_result(memoryview(buf)[parts[i][0] : parts[i][1]])
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
