"""The obstore backend of remote reads: ``s3://``, ``gs://`` and ``az://`` objects through
obstore (Rust's ``object_store`` client: its requests and body reads run on its own threads,
outside the GIL).

:func:`obstore_filesystem` turns a URL and the caller's ``storage_options`` into an
:class:`ObstoreFS` (the object's URL is its path) and :class:`ObstoreFetcher` sends the range
requests, with the same rules as the fsspec backend (:mod:`.remote_fetch`): each ``GET``
carries the range and, once the object's version is known, ``If-Match`` (or
``If-Unmodified-Since``); every answer's ETag / Last-Modified / size is checked
(:class:`~.validators.Validator`), its range must be the one asked for, its body is read up to
the range and no further (:mod:`.bodies`), a failure names the URL and the range, and retries
and timeouts are the policy's (obstore's own retries are off). Confinement happens before any
request (:mod:`.keys`, :class:`~.remote.RemoteStore`).

``http(s)://`` stays with fsspec whatever the backend: obstore's HTTP client follows
redirects by itself (up to 10, to any host) with no option to refuse them, so
``follow_redirects`` could not be applied, and with obstore 0.12.1 a server that sends an
endless body crashed the process (a segmentation fault in obstore's threads, seen with
tests/hostile_http.py) (docs/remote.md, "Backends").

The mapping of fsspec's ``storage_options`` names to obstore's is :data:`OPTION_NAMES`
(docs/remote.md); obstore's own names (``aws_*``, ``google_*``, ``azure_*``, ``config``,
``client_options``) pass unchanged.
"""

from __future__ import annotations

import email.utils
import errno
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any, cast
from urllib.parse import urlsplit

from ..errors import (
    DataError,
    JnrrdError,
    MissingDependencyError,
    ObjectNotFoundError,
    RemoteError,
    UnsupportedError,
)
from ..policy import Policy
from .bodies import PIECE, Answer, LongBody, Read, Retry, ShortBody, Sink, read_exact
from .remote_fetch import Fetcher
from .remote_http import NO_RANGES, describe, span
from .validators import Validator

__all__ = ["OBSTORE_SCHEMES", "OPTION_NAMES", "ObstoreFS", "ObstoreFetcher", "available",
           "obstore_filesystem", "understands"]

#: the URL schemes this backend reads
OBSTORE_SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss")
#: fsspec's ``storage_options`` names (s3fs, gcsfs, adlfs) → obstore's config keys
OPTION_NAMES = {
    "key": "aws_access_key_id", "secret": "aws_secret_access_key",
    "token": "aws_session_token", "endpoint_url": "aws_endpoint",
    "region_name": "aws_region", "account_name": "azure_storage_account_name",
    "account_key": "azure_storage_account_key", "sas_token": "azure_storage_sas_token",
}
_NATIVE = ("aws_", "google_", "azure_")
_SKIP_SIGNATURE = {"s3": "aws_skip_signature", "gs": "google_skip_signature",
                   "az": "azure_skip_signature"}
_FAMILY = {"s3a": "s3", "gcs": "gs", "abfs": "az", "abfss": "az"}
_lock = threading.Lock()
_stores: dict[str, Any] = {}


def available() -> bool:
    """Whether obstore can be imported."""
    try:
        import obstore  # noqa: F401
    except ImportError:
        return False
    return True


def understands(url: str, options: dict[str, Any], policy: Policy | None) -> bool:
    """Whether this backend can read ``url`` with these options under ``policy``."""
    try:
        _check(url, policy)
        _config(_scheme(url), options)
    except (UnsupportedError, TypeError):
        return False
    return True


def _scheme(url: str) -> str:
    return urlsplit(url).scheme.lower()


def _check(url: str, policy: Policy | None) -> None:
    scheme = _scheme(url)
    if scheme not in OBSTORE_SCHEMES:
        raise UnsupportedError(f"{url}: the obstore backend reads {', '.join(OBSTORE_SCHEMES)}"
                               f" URLs, not {scheme}://; pass remote_backend='fsspec'")


def _config(scheme: str, options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(config, client_options)`` of obstore for fsspec-style ``options``
    (``UnsupportedError`` naming an option it cannot map)."""
    family = _FAMILY.get(scheme, scheme)
    config: dict[str, Any] = dict(options.get("config") or {})
    client: dict[str, Any] = dict(options.get("client_options") or {})
    for name, value in options.items():
        if name in ("config", "client_options"):
            continue
        if name.startswith(_NATIVE):
            config[name] = value
        elif name in OPTION_NAMES and family in ("s3", "az") and OPTION_NAMES[name][:3] == (
                "aws" if family == "s3" else "azu"):
            config[OPTION_NAMES[name]] = value
        elif name == "anon" and family in _SKIP_SIGNATURE:
            config[_SKIP_SIGNATURE[family]] = bool(value)
        elif name == "client_kwargs" and family == "s3" and set(value or {}) <= {
                "region_name", "endpoint_url"}:
            for k, v in (value or {}).items():
                config[OPTION_NAMES[k]] = v
        else:
            raise UnsupportedError(f"storage option {name!r} has no obstore equivalent for "
                                   f"{scheme}:// (docs/remote.md, \"Backends\"); pass its "
                                   "obstore name, or remote_backend='fsspec'")
    endpoint = str(config.get("aws_endpoint", ""))
    if endpoint.startswith("http://"):
        client.setdefault("allow_http", True)
    return config, client


def obstore_filesystem(url: str, storage_options: dict[str, Any] | None, policy: Policy | None
                       ) -> tuple[ObstoreFS, str]:
    """The :class:`ObstoreFS` of ``url`` and the object's path (its URL)."""
    if not available():
        raise MissingDependencyError(f"{url}: remote_backend='obstore' needs obstore: pip "
                                     "install 'jnrrd[obstore]'")
    _check(url, policy)
    return ObstoreFS(url, dict(storage_options or {})), url


class ObstoreFS:
    """The store of one bucket / container / host, named by URLs (an object's path is its
    URL); the little of fsspec's filesystem interface a :class:`~.remote.RemoteStore` uses."""

    obstore = True

    def __init__(self, url: str, options: dict[str, Any]) -> None:
        parts = urlsplit(url)
        self.scheme = parts.scheme.lower()
        self.base = f"{parts.scheme}://{parts.netloc}"
        self.protocol = (self.scheme,)
        self.storage_options = options
        self.config, self.client = _config(self.scheme, options)
        self._last: Any = None  # the store last made (listings without a policy use it)

    def unstrip_protocol(self, path: str) -> str:
        """The URL of a path (a URL, or the form :meth:`strip` gives)."""
        return path if "://" in path else f"{self.scheme}://{path}"

    def strip(self, url: str) -> str:
        """A URL without its scheme (``bucket/key``, as fsspec names S3 objects)."""
        return url.partition("://")[2] if "://" in url else url

    def key(self, path: str) -> str:
        """The object's key in the store (as written: object stores take keys literally)."""
        if "://" not in path:  # the form :meth:`strip` gives: "bucket/key"
            rest = path.partition("/")[2]
        else:
            rest = path[len(self.base):] if path.startswith(self.base) else urlsplit(path).path
        return rest.lstrip("/")

    def store(self, policy: Policy) -> Any:
        """obstore's store for this base URL, options and timeouts (one per process)."""
        io = policy.io
        client = {"connect_timeout": timedelta(seconds=io.connect_timeout),
                  "timeout": timedelta(seconds=io.request_timeout), **self.client}
        ident = repr((self.base, sorted(self.config.items()), sorted(client.items())))
        with _lock:
            found = _stores.get(ident)
            if found is None:
                from obstore.store import from_url

                kw: dict[str, Any] = {"client_options": client,
                                      "retry_config": {"max_retries": 0}}
                if self.config:
                    kw["config"] = self.config
                try:
                    found = from_url(self.base, **kw)
                except Exception as exc:  # obstore's configuration errors
                    raise RemoteError(f"{self.base}: {describe(exc)}") from None
                _stores[ident] = found
            self._last = found
            return found

    def find(self, base: str, policy: Policy | None = None) -> Iterator[str]:
        """The objects under ``base`` (a URL or a stripped path), in the form of
        :meth:`strip` (with the store of ``policy``, else the one last used)."""
        import obstore

        prefix = self.key(base).rstrip("/")
        store = self.store(policy) if policy is not None else self._last
        netloc = self.base.partition("://")[2]
        for batch in obstore.list(store, prefix or None):
            for meta in batch:
                yield f"{netloc}/{meta['path']}"


class ObstoreFetcher(Fetcher):
    """The range requests of one :class:`ObstoreFS` (the fsspec :class:`Fetcher`'s
    submitting, waiting, retrying and part hand-out, obstore's requests)."""

    def __init__(self, fs: ObstoreFS, policy: Policy) -> None:
        from .aio import loop as aio_loop

        self.fs = fs
        self.policy = policy
        self.http = False
        self.s3 = False
        self.ranged_open = True
        self.client = None
        self.loop = aio_loop()
        self._sem = None
        self._lock = threading.Lock()
        self._waiting = 0
        self._store = fs.store(policy)

    def info(self, path: str, *, url: str) -> dict[str, Any]:
        """The object's size and version from a ranged ``GET`` of its first byte."""
        import asyncio

        assert self.loop is not None
        coro = self._attempts(path, 0, 1, url, False, None, head=True)
        answer = self.wait(asyncio.run_coroutine_threadsafe(coro, self.loop), url, 0, 1)
        return {"name": path, "size": answer.total, "type": "file",
                "validator": answer.validator}

    async def _once(self, path: str, start: int, stop: int, url: str,
                    expect: Validator | None, sink: Sink | None, head: bool) -> Answer:
        import obstore

        if stop <= start:
            return Answer(b"")
        options: dict[str, Any] = {"range": (start, stop)}
        if expect is not None:
            cond = expect.conditions()
            if "If-Match" in cond:
                options["if_match"] = cond["If-Match"]
            elif "If-Unmodified-Since" in cond:
                options["if_unmodified_since"] = email.utils.parsedate_to_datetime(
                    cond["If-Unmodified-Since"])
        key = self.fs.key(path)
        try:
            result = await obstore.get_async(self._store, key, options=cast(Any, options))
        except Exception as exc:
            if "Range request not supported" not in str(exc):
                return await self._failed(exc, key, start, stop, url, expect)
            result = await self._whole(key, start, stop, url, options)
        meta = result.meta
        got = _validator(meta)
        if expect is not None:
            expect.check(got, url)
        encoding = str((result.attributes or {}).get("Content-Encoding", "")).lower()
        if encoding not in ("", "identity"):
            raise RemoteError(f"{url}: {span(start, stop)}: the server encoded its answer "
                              f"(Content-Encoding: {encoding}): its bytes are not the object's")
        first, last = result.range
        size = int(meta["size"])
        if first == 0 and last == size and "range" not in options:  # a whole object
            first, last = start, min(stop, size)
        if first != start or last != min(stop, size) or last < first:
            raise RemoteError(f"{url}: {span(start, stop)}: the answer holds bytes "
                              f"{first}-{last - 1}, not the range asked for")
        n = min(stop, size) - start
        try:
            data = await _read(result, n, sink)
        except ShortBody as exc:
            raise Retry(str(exc)) from None
        except LongBody as exc:
            raise RemoteError(f"{url}: {span(start, stop)}: {exc}") from None
        except Exception as exc:  # the connection dropped while the body was read
            raise Retry(describe(exc)) from None
        return Answer(data, size, got)

    async def _whole(self, key: str, start: int, stop: int, url: str,
                     options: dict[str, Any]) -> Any:
        """The answer of a server that ignores ``Range`` (HTTP 200): accepted only from
        byte 0 and only when the whole object fits the request (as the fsspec backend)."""
        import obstore

        options.pop("range")
        try:
            result = await obstore.get_async(self._store, key, options=cast(Any, options))
        except Exception as exc:
            return await self._failed(exc, key, start, stop, url, None)
        if start != 0 or int(result.meta["size"]) > stop:
            raise RemoteError(f"{url}: {span(start, stop)}: {NO_RANGES}")
        return result

    async def _failed(self, exc: Exception, key: str, start: int, stop: int, url: str,
                      expect: Validator | None) -> Answer:
        """What a failed ``GET`` means (raised), or an empty object's answer."""
        import obstore
        from obstore.exceptions import (
            PermissionDeniedError,
            PreconditionError,
            UnauthenticatedError,
        )

        where = f"{url}: {span(start, stop)}"
        text = str(exc)
        head = text.split("\n", 1)[0]
        if isinstance(exc, FileNotFoundError):
            raise ObjectNotFoundError(errno.ENOENT, "no such object", url) from None
        if isinstance(exc, PreconditionError):
            was = (expect.etag or expect.last_modified) if expect is not None else None
            raise DataError(f"{url}: the object changed while it was read (HTTP 412: it is "
                            f"no longer the version it was, {was})") from None
        if isinstance(exc, (PermissionDeniedError, UnauthenticatedError)):
            raise RemoteError(f"{where}: access denied ({head})") from None
        if "416" in text or "Range Not Satisfiable" in text or "InvalidRange" in text:
            if expect is not None:
                raise DataError(f"{url}: the object changed while it was read "
                                f"({span(start, stop)} is past its end now)") from None
            try:
                meta = await obstore.head_async(self._store, key)
            except Exception as again:
                raise Retry(describe(again)) from None
            return Answer(b"", int(meta["size"]), _validator(meta))
        if "timed out" in text or "TimedOut" in text:
            raise RemoteError(f"{where}: no complete answer within the timeouts "
                              f"(connect_timeout, read_timeout, request_timeout): {head}"
                              ) from None
        if "non-2xx status code: 4" in text:
            raise RemoteError(f"{where}: {head}") from None
        if isinstance(exc, (JnrrdError, ValueError, TypeError)):
            raise RemoteError(f"{where}: {describe(exc)}") from None
        raise Retry(f"{type(exc).__name__}: {head}")


def _validator(meta: Any) -> Validator:
    last = meta.get("last_modified")  # obstore says 1970-01-01 when the server said nothing
    text = (email.utils.format_datetime(last, usegmt=True)
            if last is not None and last.timestamp() > 0 else None)
    return Validator(meta.get("e_tag") or None, text, int(meta["size"]))


async def _read(result: Any, n: int, sink: Sink | None) -> bytearray:
    """Exactly ``n`` bytes of an answer's body (bounded, :func:`~.bodies.read_exact`)."""
    stream = result.stream(min_chunk_size=min(max(n, 1), PIECE))
    pending = memoryview(b"")

    async def read(k: int) -> memoryview:
        nonlocal pending
        if not pending:
            try:
                pending = memoryview(await stream.__anext__())
            except StopAsyncIteration:
                return memoryview(b"")
        out, pending = pending[:k], pending[k:]
        return out

    return await read_exact(cast(Read, read), n, sink, more=lambda: len(pending) > 0)
