"""The range requests of the obstore backend (:mod:`.remote_obstore`), with the rules of the
fsspec backend's :class:`~.remote_fetch.Fetcher`, whose submitting, waiting and part hand-out
:class:`ObstoreFetcher` inherits.

Requests are obstore's blocking calls, made from the request pool of :mod:`jnrrd._threads`
(at most ``policy.io.request_concurrency`` of one fetcher at once): each waits outside the
GIL while obstore's runtime carries it, and its answer goes straight to the thread that waits
for it, with no event loop in between. No answer is ever handed from obstore's threads to
Python's, so none can arrive while the interpreter is finalizing: the pool's threads are
joined at exit, before it (an answer handed to an event loop at that moment aborts the
process).

Each ``GET`` carries its byte range and, once the object's version is known, ``If-Match`` (or
``If-Unmodified-Since``); every answer's ETag / Last-Modified / size is checked
(:class:`~.validators.Validator`), its range must be the one asked for, an encoded answer is
refused, and its body is read up to the range and no further (:mod:`.bodies`): obstore hands
the body out in chunks of :data:`~.bodies.PIECE` bytes (a body of up to 2 MiB in one), each
at most that size plus one network read, so memory is bounded by the request whatever the
server sends. A failure names the URL and the range; 5xx answers and dropped connections are
retried by the fetcher (obstore's own retries are off), timeouts are not. An object opens
with one ranged ``GET`` whose answer gives its size and version.

In a process forked after obstore ran the fetcher becomes the fsspec backend's fetcher of the
same URL and options (:meth:`~.remote_obstore.ObstoreFS.fallback`): an object opened before
the fork reads on in the child, with the version it opened with.
"""

from __future__ import annotations

import email.utils
import errno
import re
import time
from collections import deque
from concurrent.futures import Future
from typing import Any, cast

from .._threads import exiting, in_request_thread, request_submit
from ..errors import DataError, ObjectNotFoundError, RemoteError, SecurityError
from ..policy import Policy
from .bodies import PIECE, Answer, Bytes, LongBody, Retry, ShortBody, Sink, read_exact_blocking
from .remote_fetch import Fetcher, Parts, _checked, backoff, gave_up
from .remote_http import NO_RANGES, describe, span
from .remote_obstore import ObstoreFS
from .validators import Validator

__all__ = ["ObstoreFetcher"]

#: the HTTP status obstore's error texts give
_STATUS = re.compile(r"\bstatus(?: code)?:? (\d{3})\b", re.IGNORECASE)
#: a body up to this size is handed out in one chunk (one wait for obstore's runtime instead
#: of one per piece); larger bodies come a piece at a time as they arrive
_ONE_CHUNK = 2 << 20
_TIMEOUTS = ("no complete answer within the timeouts (connect_timeout, read_timeout, "
             "request_timeout)")


class ObstoreFetcher(Fetcher):
    """The range requests of one :class:`~.remote_obstore.ObstoreFS`."""

    def __init__(self, fs: ObstoreFS, policy: Policy) -> None:
        super().__init__(fs, policy)
        #: the store's URLs are HTTP (no listing; validation asks for each object by name)
        self.http = fs.http
        self.ranged_open = True
        #: requests waiting for one of this fetcher's threads, and the threads running
        self._queue: deque[tuple[Future[Answer], tuple[Any, ...]]] = deque()
        self._busy = 0

    def _fs_for_this_process(self) -> Any:
        """After a fork: the fsspec filesystem of the same URL and options (obstore's
        requests would never be answered in a process forked after it ran)."""
        if isinstance(self.fs, ObstoreFS):
            return self.fs.fallback()
        return super()._fs_for_this_process()

    def _launch(self, path: str, start: int, stop: int, url: str, exact: bool,
                expect: Validator | None = None, sink: Parts | None = None, *,
                head: bool = False) -> Future[Answer]:
        """Queue the request; a thread of the request pool takes it as soon as fewer than
        ``request_concurrency`` of this fetcher's requests are running."""
        if not isinstance(self.fs, ObstoreFS):  # a forked child's fsspec backend
            return super()._launch(path, start, stop, url, exact, expect, sink, head=head)
        future: Future[Answer] = Future()
        with self._lock:
            self._queue.append((future, (path, start, stop, url, exact, expect, sink)))
            if self._busy >= self.policy.io.request_concurrency:
                return future
            self._busy += 1
        request_submit(self._drain)
        return future

    def _drain(self) -> None:
        """Run queued requests until none is left. Once the interpreter begins to exit (the
        main thread returned, or a Ctrl-C ended it in the middle of a read), the request
        pool sends no queued request: each fails with a ``RemoteError``, and the exit waits
        only for the requests already on the wire. (A read in an ``atexit`` handler runs
        its requests in its own thread, :func:`jnrrd._threads.request_submit`.)"""
        pooled = in_request_thread()
        while True:
            with self._lock:
                if not self._queue:
                    self._busy -= 1
                    return
                future, args = self._queue.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            if pooled and exiting():
                path, start, stop, url = args[:4]
                future.set_exception(RemoteError(f"{url}: {span(start, stop)}: not sent: "
                                                 "the program is exiting"))
                continue
            try:
                answer = self._attempts_blocking(*args)
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(answer)

    def _attempts_blocking(self, path: str, start: int, stop: int, url: str, exact: bool,
                           expect: Validator | None, sink: Sink | None) -> Answer:
        """One request with its retries (each try bounded by the store's timeouts)."""
        retries = self.policy.io.request_retries
        for attempt in range(retries + 1):
            try:
                answer = self._once_blocking(path, start, stop, url, expect, sink)
            except Retry as exc:
                reason = exc.message
            else:
                return _checked(answer, start, stop, url, exact)
            if attempt < retries:
                time.sleep(backoff(attempt))
        raise gave_up(url, start, stop, reason, retries)

    def _once_blocking(self, path: str, start: int, stop: int, url: str,
                       expect: Validator | None, sink: Sink | None) -> Answer:
        fs = self.fs
        assert isinstance(fs, ObstoreFS)
        if stop <= start:
            return Answer(b"")
        found = self._get(fs, fs.key(path), start, stop, url, expect)
        if isinstance(found, Answer):  # an empty object
            return found
        result, whole = found
        meta = result.meta  # (obstore builds the dict anew at each access)
        got = _validator(meta)
        if expect is not None:
            expect.check(got, url)
        encoding = str((result.attributes or {}).get("Content-Encoding", "")).lower()
        if encoding not in ("", "identity"):
            raise RemoteError(f"{url}: {span(start, stop)}: the server encoded its answer "
                              f"(Content-Encoding: {encoding}): its bytes are not the object's")
        size = int(meta["size"])
        first, last = (start, min(stop, size)) if whole else result.range
        if first != start or last != min(stop, size) or last < first:
            raise RemoteError(f"{url}: {span(start, stop)}: the answer holds bytes "
                              f"{first}-{last - 1}, not the range asked for")
        try:
            data = _read(result, last - first, sink)
        except ShortBody as exc:
            raise Retry(str(exc)) from None
        except LongBody as exc:
            raise RemoteError(f"{url}: {span(start, stop)}: {exc}") from None
        except Exception as exc:  # a timeout (not retried), or the connection dropped
            if _timed_out(str(exc)):
                raise RemoteError(f"{url}: {span(start, stop)}: {_TIMEOUTS}") from None
            raise Retry(describe(exc)) from None
        return Answer(data, size, got)

    def _get(self, fs: ObstoreFS, key: str, start: int, stop: int, url: str,
             expect: Validator | None) -> tuple[Any, bool] | Answer:
        """obstore's answer to a ranged ``GET`` with the conditions of ``expect``, and
        whether it holds the whole object: a server that ignores ``Range`` (HTTP 200) is
        accepted only from byte 0 and only when the whole object fits the request (as the
        fsspec backend); an empty object's :class:`Answer`."""
        import obstore

        options: dict[str, Any] = {}
        cond = expect.conditions() if expect is not None else {}
        if "If-Match" in cond:
            options["if_match"] = cond["If-Match"]
        elif "If-Unmodified-Since" in cond:
            options["if_unmodified_since"] = email.utils.parsedate_to_datetime(
                cond["If-Unmodified-Since"])
        store = fs.store()
        try:
            ranged = {**options, "range": (start, stop)}
            return obstore.get(store, key, options=cast(Any, ranged)), False
        except Exception as exc:
            if "Range request not supported" not in str(exc):
                return self._failed(exc, key, start, stop, url, expect)
        try:
            result = obstore.get(store, key, options=cast(Any, options))
        except Exception as exc:
            return self._failed(exc, key, start, stop, url, expect)
        if start != 0 or int(result.meta["size"]) > stop:
            raise RemoteError(f"{url}: {span(start, stop)}: {NO_RANGES}")
        return result, True

    def _failed(self, exc: Exception, key: str, start: int, stop: int, url: str,
                expect: Validator | None) -> Answer:
        """What a failed ``GET`` means (raised), or an empty object's answer."""
        from obstore.exceptions import (
            NotFoundError,
            PermissionDeniedError,
            PreconditionError,
            UnauthenticatedError,
        )

        where = f"{url}: {span(start, stop)}"
        text = str(exc)
        head = text.split("\n", 1)[0]
        m = _STATUS.search(text)
        status = int(m.group(1)) if m else None
        if isinstance(exc, NotFoundError) or status in (404, 410):
            raise ObjectNotFoundError(errno.ENOENT, "no such object", url) from None
        if isinstance(exc, PreconditionError) or status == 412:
            was = (expect.etag or expect.last_modified) if expect is not None else None
            raise DataError(f"{url}: the object changed while it was read (HTTP 412: it is "
                            f"no longer the version it was, {was})") from None
        if isinstance(exc, (PermissionDeniedError, UnauthenticatedError)):
            raise RemoteError(f"{where}: access denied ({head})") from None
        if status == 416 or "Range Not Satisfiable" in text or "InvalidRange" in text:
            return self._past_the_end(key, start, stop, url, expect)
        if status is not None and 300 <= status < 400:  # a redirect its client did not follow
            raise SecurityError(f"{url}: the server redirects (HTTP {status}) to a URL that "
                                "is not an HTTP URL (or not a valid one)") from None
        if "error following redirect" in text or "redirect without" in text:
            raise RemoteError(f"{where}: a redirect that could not be followed: too many "
                              f"redirects (a loop), or one without a Location ({head})"
                              ) from None
        if _timed_out(text):
            raise RemoteError(f"{where}: {_TIMEOUTS} ({head})") from None
        if status is not None and 400 <= status < 500 and status != 429:
            raise RemoteError(f"{where}: HTTP {status} ({head})") from None
        if isinstance(exc, (ValueError, TypeError)):  # a key or option obstore refuses
            raise RemoteError(f"{where}: {describe(exc)}") from None
        raise Retry(f"{type(exc).__name__}: {head}")  # 5xx, 429, a dropped connection

    def _past_the_end(self, key: str, start: int, stop: int, url: str,
                      expect: Validator | None) -> Answer:
        """A range past the object's end: the object shrank (``DataError``) once its
        version is known; at open, an empty object (its size and version asked)."""
        import obstore

        if expect is not None:
            raise DataError(f"{url}: the object changed while it was read "
                            f"({span(start, stop)} is past its end now)")
        assert isinstance(self.fs, ObstoreFS)
        try:
            meta = obstore.head(self.fs.store(), key)
        except Exception as again:
            raise Retry(describe(again)) from None
        return Answer(b"", int(meta["size"]), _validator(meta))


def _timed_out(text: str) -> bool:
    """Whether an obstore error is one of its client's timeouts (its text says so: obstore's
    exceptions carry no status or kind)."""
    return "timed out" in text or "TimedOut" in text or "kind: Timeout" in text


def _validator(meta: Any) -> Validator:
    last = meta.get("last_modified")  # obstore says 1970-01-01 when the server said nothing
    text = (email.utils.format_datetime(last, usegmt=True)
            if last is not None and last.timestamp() > 0 else None)
    return Validator(meta.get("e_tag") or None, text, int(meta["size"]))


def _read(result: Any, n: int, sink: Sink | None) -> Bytes:
    """Exactly ``n`` bytes of an answer's body (bounded, :func:`~.bodies.read_exact_blocking`)."""
    stream = result.stream(min_chunk_size=max(n, 1) if n <= _ONE_CHUNK else PIECE)
    pending = memoryview(b"")

    def read(k: int) -> memoryview:
        nonlocal pending
        if not pending:
            try:
                pending = memoryview(next(stream))
            except StopIteration:
                return memoryview(b"")
        out, pending = pending[:k], pending[k:]
        return out

    return read_exact_blocking(read, n, sink, more=lambda: len(pending) > 0)
