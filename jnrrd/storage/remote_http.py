"""One HTTP range request, checked: what :class:`~.remote_fetch.Fetcher` sends to
``http(s)://`` objects (on an aiohttp session of :mod:`.aio`, with the request options of the
caller's ``storage_options``).

Every request asks for one byte range with ``Accept-Encoding: identity`` (byte offsets are the
object's own) and, once the object's version is known, with the conditions of its
:class:`~.validators.Validator` (``If-Match`` / ``If-Unmodified-Since``). The answer is
checked before a byte of its body is used:

- status: 404/410 is :class:`~jnrrd.errors.ObjectNotFoundError`, 412 (or 416 inside an object
  known to be longer) a ``DataError`` ("changed"), 5xx and 429 worth a retry, any other
  status but 200/206 a ``RemoteError``; a ``Content-Encoding`` other than identity is refused;
- redirects (301, 302, 303, 307, 308) are followed by hand, at most :data:`MAX_REDIRECTS`,
  only to the same scheme, host and port unless ``policy.follow_redirects`` is ``True``
  (``False``: none at all);
- ``Content-Range`` must be the range asked for (clipped to the object's end), and a
  ``Content-Length`` must agree with it; the validator must be the one the object opened with;
- the body is read up to the bytes asked for and no further (:mod:`.bodies`): a body that
  holds more is an error, one that ends early a retry, and a connection left with unread
  bytes is dropped, never drained;
- a 200 (the server ignored ``Range``) is accepted only from byte 0 and only when the whole
  object fits the request; otherwise the error says what to do.

Timeouts: ``policy.io.connect_timeout`` to connect, ``policy.io.read_timeout`` of silence while
waiting for the answer or its next bytes (aiohttp's ``sock_connect`` / ``sock_read``); the
caller bounds the whole request by ``policy.io.request_timeout``. A timeout is not retried.
"""

from __future__ import annotations

import errno
import re
from typing import Any
from urllib.parse import urljoin, urlsplit

from ..errors import DataError, JnrrdError, ObjectNotFoundError, RemoteError, SecurityError
from ..policy import Policy
from .aio import HttpClient
from .bodies import Answer, LongBody, Retry, ShortBody, Sink, read_at_most, read_exact
from .validators import Validator

__all__ = ["MAX_REDIRECTS", "NO_RANGES", "describe", "http_get", "span"]

#: redirects followed for one request at most
MAX_REDIRECTS = 5
_REDIRECTS = (301, 302, 303, 307, 308)
_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$", re.IGNORECASE)
_UNSATISFIED = re.compile(r"^\s*bytes\s+\*/(\d+)\s*$", re.IGNORECASE)
#: what to do about a server that answers ranged requests with the whole object
NO_RANGES = ("the server does not serve byte ranges: download the file, or serve it with a "
             "server that does (it answered HTTP 200 with the whole object)")


def span(start: int, stop: int | None) -> str:
    """``"bytes a-b"`` of a request, for messages."""
    return f"bytes {start}-" + ("" if stop is None else str(stop - 1))


def describe(exc: BaseException) -> str:
    """An exception as ``"Type: message"``."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def http_get(client: HttpClient, url: str, start: int, stop: int, *, policy: Policy,
                   expect: Validator | None = None, sink: Sink | None = None,
                   head: bool = False) -> Answer:
    """Bytes ``start:stop`` of ``url`` (fewer at the object's end) on ``client``'s session,
    checked as the module says. ``head``: only the answer's metadata is wanted (the body is
    not read; a 200's size is its ``Content-Length``)."""
    import aiohttp

    session = await client.session()
    kw = dict(client.request_kwargs)
    headers = dict(kw.pop("headers", None) or {})
    for name in ("allow_redirects", "timeout", "auto_decompress"):
        kw.pop(name, None)
    headers["Range"] = f"bytes={start}-{stop - 1}"
    headers["Accept-Encoding"] = "identity"  # byte offsets of the object, not of a gzip
    if expect is not None:
        headers.update(expect.conditions())
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=policy.io.connect_timeout,
                                    sock_read=policy.io.read_timeout)
    target = url
    try:
        for _ in range(MAX_REDIRECTS + 1):
            # auto_decompress=False: an encoded answer is refused, never decoded (decoding a
            # hostile gzip body in the client would cost memory and, once, crashed it)
            async with session.get(client.url(target), headers=headers, timeout=timeout,
                                   allow_redirects=False, auto_decompress=False, **kw) as r:
                if r.status in _REDIRECTS:
                    target = _redirect(r, url, target, policy)
                    continue
                answer = await _answer(r, start, stop, url, expect, sink, head)
                if not r.content.at_eof():
                    r.close()  # unread bytes: drop the connection rather than drain it
                return answer
    except (JnrrdError, FileNotFoundError, Retry):
        raise
    except Exception as exc:  # aiohttp's errors, a dropped connection, a timeout
        raise _failure(exc, url, start, stop, policy) from None
    raise RemoteError(f"{url}: {span(start, stop)}: more than {MAX_REDIRECTS} redirects")


def _failure(exc: Exception, url: str, start: int, stop: int, policy: Policy) -> Exception:
    """What an exception of the client means: a timeout (not retried), a bad option or URL
    (not retried), or a failure worth another try."""
    import aiohttp

    where = f"{url}: {span(start, stop)}"
    connect = getattr(aiohttp, "ConnectionTimeoutError", ())
    if isinstance(exc, connect) or (isinstance(exc, aiohttp.ClientConnectorError)
                                    and isinstance(exc.os_error, TimeoutError)):
        return RemoteError(f"{where}: no connection within {policy.io.connect_timeout:g} s "
                           "(connect_timeout)")
    if isinstance(exc, TimeoutError):
        return RemoteError(f"{where}: the server sent nothing for {policy.io.read_timeout:g} s "
                           "(read_timeout)")
    if isinstance(exc, (TypeError, ValueError, aiohttp.InvalidURL)):
        return RemoteError(f"{where}: {describe(exc)}")
    if isinstance(exc, aiohttp.ClientResponseError):  # a malformed answer: no retry helps
        return RemoteError(f"{where}: the server's answer is malformed ({describe(exc)})")
    return Retry(describe(exc))


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(scheme)


def _redirect(r: Any, url: str, current: str, policy: Policy) -> str:
    """The URL a redirect leads to, when the policy lets the request follow it."""
    location = r.headers.get("Location")
    if not location:
        raise RemoteError(f"{url}: HTTP {r.status} redirect without a Location")
    try:
        target = urljoin(current, location.strip())
        origin = _origin(target)
    except ValueError:
        raise RemoteError(f"{url}: HTTP {r.status} redirect to an invalid URL "
                          f"{location!r}") from None
    if origin[0] not in ("http", "https"):
        raise SecurityError(f"{url}: the server redirects to {target!r}, not an HTTP URL")
    if policy.follow_redirects is False:
        raise RemoteError(f"{url}: the server redirects to {target} (HTTP {r.status}) and "
                          "follow_redirects=False; read that URL instead")
    if policy.follow_redirects == "same-host" and origin != _origin(url):
        raise SecurityError(f"{url}: the server redirects to another host ({target}); pass "
                            "follow_redirects=True to follow it, or read that URL")
    return target


async def _answer(r: Any, start: int, stop: int, url: str, expect: Validator | None,
                  sink: Sink | None, head: bool) -> Answer:
    """Check a response to a range request and read its body (bounded)."""
    where = f"{url}: {span(start, stop)}"
    status = r.status
    if status in (404, 410):
        raise ObjectNotFoundError(errno.ENOENT, "no such object", url)
    if status == 412 and expect is not None:
        raise DataError(f"{url}: the object changed while it was read (HTTP 412: it is no "
                        f"longer the version it was, {expect.etag or expect.last_modified})")
    if status == 416:  # the range starts at or past the end: an empty object
        m = _UNSATISFIED.match(r.headers.get("Content-Range", ""))
        total = int(m.group(1)) if m else None
        if expect is not None:
            raise DataError(f"{url}: the object changed while it was read ({span(start, stop)}"
                            " is past its end now)")
        return Answer(b"", total, Validator.of(r.headers, total))
    if status >= 500 or status == 429:
        raise Retry(f"HTTP {status} {r.reason or ''}".rstrip())
    if status not in (200, 206):
        raise RemoteError(f"{where}: HTTP {status} {r.reason or ''}".rstrip())
    encoding = r.headers.get("Content-Encoding", "").strip().lower()
    if encoding not in ("", "identity") and head:  # it exists; its size is unknown
        return Answer(b"", None, Validator.of(r.headers, None))
    if encoding not in ("", "identity"):
        raise RemoteError(f"{where}: the server encoded its answer (Content-Encoding: "
                          f"{encoding}) although the request asked for identity: its bytes "
                          "are not the object's")
    length = _content_length(r, where)
    if status == 200:
        return await _whole(r, start, stop, url, expect, length, head)
    first, last, total = _content_range(r, start, stop, where)
    n = last - first + 1
    if length is not None and length != n:
        raise RemoteError(f"{where}: Content-Length {length} and Content-Range "
                          f"{r.headers.get('Content-Range')!r} disagree")
    got = Validator.of(r.headers, total)
    if expect is not None:
        expect.check(got, url)
    try:
        data = await read_exact(lambda _: _piece(r.content), n, sink,
                                more=lambda: bool(r.content.read_nowait(1)))
    except ShortBody as exc:
        raise Retry(str(exc)) from None
    except LongBody as exc:
        raise RemoteError(f"{where}: {exc}") from None
    return Answer(data, total, got)


async def _piece(content: Any) -> bytes:
    """The next piece of a body as aiohttp buffered it (one network read, never joined with
    the next: :func:`~.bodies.read_exact` copies it once); ``b""`` at the body's end."""
    while True:
        data, end_of_http_chunk = await content.readchunk()
        if data or not end_of_http_chunk:  # (b"", True) only marks a chunk boundary
            return data  # type: ignore[no-any-return]


async def _whole(r: Any, start: int, stop: int, url: str, expect: Validator | None,
                 length: int | None, head: bool) -> Answer:
    """A 200 answer to a range request: the whole object, acceptable when it starts at
    byte 0 and fits the request."""
    where = f"{url}: {span(start, stop)}"
    if start != 0 or (length is not None and length > stop and not head):
        raise RemoteError(f"{where}: {NO_RANGES}")
    got = Validator.of(r.headers, length)
    if expect is not None:
        expect.check(got, url)
    if head:
        return Answer(b"", length, got)
    try:
        data = await read_at_most(r.content.read, stop)
    except LongBody:
        raise RemoteError(f"{where}: {NO_RANGES}") from None
    if length is not None and len(data) != length:
        raise Retry(f"the body ended early ({len(data)} of {length} bytes)")
    got = got.with_size(len(data))
    if expect is not None:
        expect.check(got, url)
    return Answer(data, len(data), got)


def _content_length(r: Any, where: str) -> int | None:
    value = r.headers.get("Content-Length")
    if value is None or "Transfer-Encoding" in r.headers:
        return None
    value = value.strip()
    if not value.isdigit() or not value.isascii():
        raise RemoteError(f"{where}: invalid Content-Length {value!r}")
    return int(value)


def _content_range(r: Any, start: int, stop: int, where: str) -> tuple[int, int, int | None]:
    """``(first, last, total)`` of a 206's ``Content-Range``, which must be the range asked
    for (its end clipped to the object's)."""
    text = r.headers.get("Content-Range", "")
    m = _CONTENT_RANGE.match(text)
    if m is None:
        raise RemoteError(f"{where}: HTTP 206 without a valid Content-Range ({text!r})")
    first, last = int(m.group(1)), int(m.group(2))
    total = None if m.group(3) == "*" else int(m.group(3))
    want = stop - 1 if total is None else min(stop - 1, total - 1)
    if first != start or last < first or (total is not None and last >= total) \
            or (last != want and (total is not None or last > want)):
        raise RemoteError(f"{where}: the server answered bytes {first}-{last} "
                          f"(Content-Range {text!r})")
    return first, last, total
