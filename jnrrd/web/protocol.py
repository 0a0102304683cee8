"""The HTTP rules of the web view, as plain functions (RFC 9110): request checks, ranges,
validators, CORS. The server (:mod:`jnrrd.web.server`) applies them; nothing here does I/O.

Refused requests (docs/web-view.md, "What the server refuses"):

- a request target that is not a plain absolute path (``http://...`` absolute form, ``*``),
  longer than :data:`MAX_TARGET`, or holding bytes outside printable ASCII → 400 (414 when
  too long); every other unknown path is a 404, never a file lookup;
- a request with a body (``Content-Length`` other than 0, any ``Transfer-Encoding``) → 400;
- more than one ``Host``, ``Range``, ``If-Range``, ``If-None-Match``,
  ``If-Modified-Since`` or ``Origin`` → 400 (a proxy and this server could read different
  ones); header lines longer than :data:`MAX_HEADER_BYTES` in all → 431;
- on a loopback address, a ``Host`` other than the server's own names → 403: a web page
  cannot reach the volume through DNS rebinding.

``Range``: one ``bytes=a-b``, ``bytes=a-`` or ``bytes=-n`` is honoured (206); several ranges
or a malformed one are ignored (the whole body, 200), as RFC 9110 §14.2 allows; a range
starting past the end is 416.
"""

from __future__ import annotations

import email.utils
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import AddressError, ArgumentError

__all__ = ["ALLOWED_METHODS", "MAX_HEADER_BYTES", "MAX_TARGET", "REQUEST_LOG_SIZE", "Refusal",
           "address_error", "check_cors", "check_request", "cors_headers", "etag_matches",
           "http_date", "if_range_allows", "is_wildcard", "loopback_hosts", "not_modified",
           "parse_range", "preflight_headers", "redact", "request_path", "url_host",
           "without_query"]

#: the longest request target accepted (chunk keys are far shorter)
MAX_TARGET = 2048
#: the most header bytes accepted in one request
MAX_HEADER_BYTES = 16384
ALLOWED_METHODS = ("GET", "HEAD", "OPTIONS")
#: headers that must not repeat
_SINGLE = ("host", "range", "if-range", "if-none-match", "if-modified-since", "origin")
_PRINTABLE = re.compile(r"[\x21-\x7e]+")
#: a range's numbers: any end past the body is clamped (RFC 9110 §14.1.1); more digits than
#: this is a malformed range (ignored)
_RANGE = re.compile(r"bytes=([0-9]{0,64})-([0-9]{0,64})")
_ORIGIN = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?|https?://\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?")
#: request headers a cross-origin page may send (the preflight's answer)
_CORS_REQUEST_HEADERS = "Range, If-None-Match, If-Modified-Since, If-Range"
_CORS_EXPOSE = "Content-Range, Content-Length, Accept-Ranges, ETag, Last-Modified"


#: the answered requests :attr:`~jnrrd.web.WebServer.requests` keeps by default (the newest)
REQUEST_LOG_SIZE = 10_000
#: a URL: scheme, credentials, the rest up to the query, the query and fragment
_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)([^\s/?#@]*@)?([^\s?#]*)([?#]\S*)?")


def redact(text: str) -> str:
    """``text`` with every URL's credentials (``user:password@``) removed and its query and
    fragment (a signed URL's signature, a token) replaced by ``?…``: what the server shows
    its clients (names, error messages) never carries them."""
    return _URL.sub(lambda m: m.group(1) + m.group(3) + ("?…" if m.group(4) else ""), text)


def without_query(text: str) -> str:
    """``text`` with every URL's credentials, query and fragment removed (a file name)."""
    return _URL.sub(lambda m: m.group(1) + m.group(3), text)



class Refusal(Exception):
    """A request refused before routing: ``status`` and a one-line reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def loopback_hosts(port: int) -> frozenset[str]:
    """The ``Host`` values a loopback-bound server answers (lower case)."""
    names = ("127.0.0.1", "localhost", "[::1]")
    out = {f"{n}:{port}" for n in names}
    if port == 80:
        out |= set(names)
    return frozenset(out)


def request_path(target: str) -> str:
    """The path of an origin-form request target (query dropped), or :class:`Refusal`."""
    if len(target) > MAX_TARGET:
        raise Refusal(414, f"request target longer than {MAX_TARGET} bytes")
    if not target.startswith("/") or not _PRINTABLE.fullmatch(target):
        raise Refusal(400, "the request target must be a path of printable ASCII")
    return target.split("?", 1)[0].split("#", 1)[0]


def check_request(headers: Any, *, hosts: frozenset[str] | None) -> None:
    """:class:`Refusal` for a request this read-only server must not answer (see the module
    docstring); ``hosts``: the ``Host`` values accepted (``None``: any)."""
    items = headers.items()
    if sum(len(k) + len(v) + 4 for k, v in items) > MAX_HEADER_BYTES:
        raise Refusal(431, f"request headers longer than {MAX_HEADER_BYTES} bytes")
    for name in _SINGLE:
        if len(headers.get_all(name) or ()) > 1:
            raise Refusal(400, f"more than one {name} header")
    if headers.get("transfer-encoding") is not None:
        raise Refusal(400, "a request body (transfer-encoding) is not accepted")
    length = headers.get("content-length")
    if length is not None and length.strip() != "0":
        raise Refusal(400, "a request body is not accepted")
    host = headers.get("host")
    if host is None:
        raise Refusal(400, "no Host header")
    if hosts is not None and host.strip().lower() not in hosts:
        raise Refusal(403, "unexpected Host header (the server answers only its own "
                           "loopback names)")


def parse_range(value: str | None, size: int) -> tuple[int, int] | None | str:
    """``(start, stop)`` of a single satisfiable byte range, ``None`` to send the whole body
    (no header, several ranges, a malformed one), or ``"unsatisfiable"``."""
    if value is None:
        return None
    m = _RANGE.fullmatch(value.strip())
    if m is None or not (m.group(1) or m.group(2)):
        return None
    if m.group(1):
        start = int(m.group(1))
        last = int(m.group(2)) if m.group(2) else None
        if last is not None and last < start:
            return None  # an invalid range-spec: ignored (RFC 9110 §14.1.1)
        if start >= size:
            return "unsatisfiable"
        if last is None:
            last = size - 1
        return start, min(last, size - 1) + 1
    suffix = int(m.group(2))
    if suffix == 0 or size == 0:
        return "unsatisfiable"
    return max(0, size - suffix), size


def _tags(value: str) -> list[str]:
    return [t.strip().removeprefix("W/") for t in value.split(",") if t.strip()]


def etag_matches(value: str | None, etag: str) -> bool:
    """Whether an ``If-None-Match`` value names ``etag`` (weak comparison) or is ``*``."""
    if value is None:
        return False
    tags = _tags(value[:4096])
    return "*" in tags or etag in tags


def not_modified(headers: Any, etag: str, last_modified: float | None) -> bool:
    """RFC 9110 §13.2.2 for GET/HEAD: ``If-None-Match`` decides when present, else
    ``If-Modified-Since`` (an unparsable date is ignored; so is the header when the answer
    has no ``last_modified``)."""
    inm = headers.get("if-none-match")
    if inm is not None:
        return etag_matches(inm, etag)
    ims = headers.get("if-modified-since")
    if ims is None or last_modified is None:
        return False
    try:
        when = email.utils.parsedate_to_datetime(ims[:64])
    except (TypeError, ValueError, IndexError):
        return False
    if when is None or when.tzinfo is None:
        return False
    return int(last_modified) <= when.timestamp()


def if_range_allows(headers: Any, etag: str, last_modified: float) -> bool:
    """Whether a ``Range`` may be honoured under ``If-Range`` (absent: yes)."""
    value = headers.get("if-range")
    if value is None:
        return True
    value = value.strip()
    if value.startswith('"'):
        return value == etag  # strong comparison
    try:
        when = email.utils.parsedate_to_datetime(value[:64])
    except (TypeError, ValueError, IndexError):
        return False
    return when is not None and int(last_modified) == int(when.timestamp())


def http_date(timestamp: float) -> str:
    """An IMF-fixdate (``Last-Modified``)."""
    return email.utils.formatdate(timestamp, usegmt=True)


def check_cors(origins: Sequence[str], name: str = "cors") -> tuple[str, ...]:
    """The ``cors`` values checked: ``*`` or ``scheme://host[:port]`` origins
    (:class:`~jnrrd.ArgumentError` otherwise, naming the option as ``name``)."""
    out = []
    for o in origins:
        o = o.strip().rstrip("/")
        if o != "*" and not _ORIGIN.fullmatch(o):
            raise ArgumentError(f"{name} {o!r}: expected '*' or an origin such as "
                                "https://neuroglancer-demo.appspot.com")
        out.append(o)
    return tuple(out)


def _allowed(origin: str | None, allowed: Sequence[str]) -> str | None:
    """The ``Access-Control-Allow-Origin`` value for ``origin``, or ``None``."""
    if origin is None or not allowed:
        return None
    if "*" in allowed:
        return "*"
    return origin if origin in allowed else None


def cors_headers(headers: Mapping[str, str] | Any, allowed: Sequence[str]
                 ) -> list[tuple[str, str]]:
    """The CORS response headers of a simple request (none when the origin is not allowed)."""
    # with named origins, every answer depends on Origin (a shared cache keeps them apart)
    vary = [("Vary", "Origin")] if allowed and "*" not in allowed else []
    value = _allowed(headers.get("origin"), allowed)
    if value is None:
        return vary
    return [("Access-Control-Allow-Origin", value),
            ("Access-Control-Expose-Headers", _CORS_EXPOSE), *vary]


def preflight_headers(headers: Any, allowed: Sequence[str]) -> list[tuple[str, str]]:
    """The answer to a CORS preflight (``OPTIONS`` with ``Access-Control-Request-Method``);
    Chrome's private network access check included (a public page reading a loopback
    server asks for it)."""
    out = cors_headers(headers, allowed)
    if not any(k == "Access-Control-Allow-Origin" for k, _ in out):
        return out
    out += [("Access-Control-Allow-Methods", ", ".join(ALLOWED_METHODS)),
            ("Access-Control-Allow-Headers", _CORS_REQUEST_HEADERS),
            ("Access-Control-Max-Age", "600")]
    if (headers.get("access-control-request-private-network") or "").lower() == "true":
        out.append(("Access-Control-Allow-Private-Network", "true"))
    return out


def is_wildcard(host: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def url_host(host: str) -> str:
    """The host part of a URL that reaches a server listening on ``host``: a wildcard
    address (``0.0.0.0``, ``::``) becomes this machine's loopback address, an IPv6 address
    gets its brackets."""
    if is_wildcard(host):
        return "[::1]" if ":" in host else "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def address_error(e: OSError, host: str, port: int) -> AddressError:
    """A bind failure in words (``[Errno 98]`` means nothing to most users)."""
    import errno
    import socket

    where = f"{url_host(host)}:{port}"
    if e.errno in (errno.EADDRINUSE, getattr(errno, "WSAEADDRINUSE", -1)):
        return AddressError(f"cannot listen on {where}: port {port} is already in use "
                            "(choose another port, or port 0 (--port 0) for a free one)")
    if e.errno in (errno.EACCES, getattr(errno, "WSAEACCES", -1)):
        return AddressError(f"cannot listen on {where}: port {port} needs privileges here "
                            "(choose a port above 1023, or port 0 (--port 0) for a free one)")
    if isinstance(e, socket.gaierror) or e.errno in (
            errno.EADDRNOTAVAIL, getattr(errno, "WSAEADDRNOTAVAIL", -1)):
        return AddressError(f"cannot listen on host {host!r}: not an address of this machine "
                            "(127.0.0.1 for this machine only, 0.0.0.0 for all its addresses)")
    return AddressError(f"cannot listen on {where}: {e.strerror or e}")
