"""Objects behind fsspec URLs (``s3://``, ``gs://``, ``az://``, ``http(s)://``,
``memory://``, ...) as a store: the read side.

- :func:`filesystem`: a URL and the caller's ``storage_options`` → fsspec filesystem and path
  (``MissingDependencyError`` naming the extra when fsspec or the protocol's package is
  absent), or the obstore backend's (:func:`choose_backend`, :mod:`.remote_obstore`);
- :class:`RemoteReader`: byte ranges of one object. Opening it costs one or two requests
  (the object's size and version, and its first block, which usually holds the whole
  header); ranges inside that block are served from it;
  :meth:`RemoteReader.fetch_many` merges a selection's ranges (:func:`plan_requests`) and
  returns one future per range while the requests are in flight;
- :class:`RemoteStore`: the objects under the header's "directory". Keys a header names are
  confined to it as on a local disk (docs/security.md#path-policy, docs/remote.md#security): no
  absolute paths or URLs, no ``..`` above it, unless the policy opts in.
"""

from __future__ import annotations

import contextlib
import errno
import posixpath
import re
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import Future
from typing import Any

from ..errors import (
    DataError,
    MissingDependencyError,
    ObjectNotFoundError,
    RemoteError,
    UnsupportedError,
    where,
)
from ..policy import REMOTE_BACKENDS, Policy
from .bodies import Bytes
from .keys import check_object_url, confine_key
from .objects import HeldObjects
from .remote_fetch import Answer, Fetcher, plan_requests
from .urls import is_remote, local_path
from .validators import Validator, warn_unversioned

__all__ = ["RemoteReader", "RemoteStore", "filesystem", "is_remote", "local_path",
           "split_url"]

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
#: the first request of an object: the header of most files, whole
FIRST_BLOCK = 256 << 10
#: the info fields that identify an object's content, by filesystem (first found wins)
_VERSION_FIELDS = ("ETag", "etag", "generation", "VersionId", "version_id", "md5Hash",
                   "LastModified", "last_modified", "mtime", "updated", "created")


def filesystem(url: str, storage_options: dict[str, Any] | None = None, *,
               policy: Policy | None = None, backend: str | None = None) -> tuple[Any, str]:
    """The filesystem and path of ``url``: an fsspec filesystem (``storage_options`` passed
    unchanged), or an :class:`~.remote_obstore.ObstoreFS` when the backend is obstore
    (:func:`choose_backend`: ``backend`` when the caller needs one, e.g. writes; else the
    storage option ``"backend"``, never passed on; else the policy's
    ``io.remote_backend``)."""
    options = dict(storage_options or {})
    asked = options.pop("backend", None)
    if choose_backend(url, options, policy, backend or asked) == "obstore":
        from .remote_obstore import obstore_filesystem

        return obstore_filesystem(url, options, policy or Policy(), fsspec_filesystem)
    return fsspec_filesystem(url, options)


def choose_backend(url: str, options: dict[str, Any], policy: Policy | None,
                   backend: str | None) -> str:
    """``"obstore"`` or ``"fsspec"`` for ``url``: ``backend`` when given, else the policy's
    ``io.remote_backend`` (docs/remote.md, "Backends"). Protocols obstore does not read
    (``memory://``, ``sftp://``, ...) always go through fsspec. ``s3://``, ``gs://``,
    ``az://``: ``"auto"`` takes obstore when it is installed and can read the URL with these
    options (:func:`~.remote_obstore.unusable_reason`), ``"obstore"`` takes it in any case
    (what it lacks is then the error). ``http(s)://``: obstore only when asked for and able
    to apply every rule (``follow_redirects=True``), else jnrrd's own HTTP client."""
    choice = backend or (policy.io.remote_backend if policy is not None else "auto")
    if choice not in REMOTE_BACKENDS:
        raise UnsupportedError(f"{url}: backend must be 'auto', 'fsspec' or 'obstore', not "
                               f"{choice!r}")
    from . import remote_obstore as ob

    scheme = url.partition("://")[0].lower()
    if choice == "fsspec" or scheme not in ob.OBSTORE_SCHEMES:
        return "fsspec"
    usable = ob.available() and ob.unusable_reason(url, options, policy) is None
    if scheme in ob.HTTP_SCHEMES:
        return "obstore" if choice == "obstore" and usable else "fsspec"
    return "obstore" if choice == "obstore" or usable else "fsspec"


def make_fetcher(fs: Any, policy: Policy) -> Fetcher:
    """The :class:`Fetcher` of a filesystem :func:`filesystem` returned."""
    if getattr(fs, "obstore", False):
        from .remote_obstore_fetch import ObstoreFetcher

        return ObstoreFetcher(fs, policy)
    return Fetcher(fs, policy)


def fsspec_filesystem(url: str, storage_options: dict[str, Any] | None = None
                      ) -> tuple[Any, str]:
    """The fsspec filesystem and path of ``url`` (``storage_options`` passed unchanged)."""
    try:
        from fsspec.core import url_to_fs
    except ImportError:
        raise MissingDependencyError(
            f"{url}: reading or writing URLs needs fsspec: pip install 'jnrrd[remote]' "
            "(and 'jnrrd[s3]' for s3://)") from None
    try:
        return url_to_fs(url, **(storage_options or {}))
    except ImportError as exc:
        raise MissingDependencyError(
            f"{url}: {exc} (pip install 'jnrrd[remote]' for http(s)://, 'jnrrd[s3]' for "
            "s3://, or the protocol's fsspec package, e.g. gcsfs for gs://, adlfs for "
            "az://)") from None
    except ValueError as exc:
        raise UnsupportedError(f"{url}: {exc}") from None


def strip_protocol(url: str) -> str:
    """A URL's path as its fsspec filesystem names it (fsspec's public ``strip_protocol``)."""
    from fsspec.core import strip_protocol as strip

    return str(strip(url))


def split_url(url: str, *, name_url: str | None = None) -> tuple[str, str]:
    """``(directory URL, name)`` of an object's URL (or fsspec path); one spelling of each
    object (:func:`~.keys.check_object_url`; ``name_url`` names it in errors)."""
    check_object_url(name_url or url, url)
    head, _, name = url.rstrip("/").rpartition("/")
    if not name or head.endswith(":/"):
        raise UnsupportedError(f"{url}: expected the URL of an object, not of a bucket or "
                               "host")
    return head, name


class RemoteReader:
    """Byte ranges of one remote object; ``head`` holds its first bytes (fetched at open).

    ``expect`` is the object's :class:`~.validators.Validator` as it opened (HTTP: the first
    answer's ETag, else its Last-Modified date, and its size; S3: the ETag of its metadata):
    every later request carries its conditions and every answer must carry it, so bytes of
    another version of the object are never returned (``DataError``)."""

    remote = True

    def __init__(self, fetcher: Fetcher, path: str, url: str, *, first: int = FIRST_BLOCK
                 ) -> None:
        self.fetcher, self.path, self.url = fetcher, path, url
        self.expect: Validator | None = None
        if fetcher.ranged_open:
            answer = fetcher.get(path, 0, first, url=url, exact=False)
            got = answer.validator or Validator()
            size = answer.total
            if size is None:  # "Content-Range: bytes 0-n/*": ask the size (same version)
                info = fetcher.info(path, url=url)
                size = info.get("size")
                if size is None:
                    raise RemoteError(f"{url}: the server states the object's size neither "
                                      "in Content-Range nor in Content-Length")
                got.check(info["validator"], url)
            self.expect = got.with_size(size)
            if self.expect.kind == "size":
                warn_unversioned(url)
            self.version: Hashable = self.expect.token()
        else:
            info = fetcher.info(path, url=url)
            size = info.get("size")
            if size is None or info.get("type") == "directory":
                raise DataError(f"{url}: not an object (a directory or prefix)")
            size = int(size)
            self.version = version_of(info)
            if fetcher.s3:  # the ETag every later answer must carry (S3: If-Match)
                self.expect = Validator(info.get("ETag") or None, None, size)
            answer = (self._get(0, min(first, size)) if size else Answer(b""))
        self.file_size = size
        self.head: bytes | bytearray = bytes(answer.data)

    def grow_head(self, upto: int) -> None:
        """Extend :attr:`head` to the first ``upto`` bytes (or the whole object)."""
        upto = min(upto, self.file_size)
        if upto > len(self.head):
            more = self._fetch(len(self.head), upto)
            self.head = b"".join((self.head, more))

    def get_range(self, start: int, stop: int) -> memoryview | bytes | bytearray:
        """Bytes ``start:stop``; ``DataError("file ended early")`` past the object's end."""
        if stop <= len(self.head):
            return memoryview(self.head)[start:stop]
        if stop > self.file_size:
            raise DataError("file ended early")
        return self._fetch(start, stop)

    def get_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[memoryview | bytes]:
        """The bytes of each ``(start, stop)``, fetched concurrently, in order."""
        return [f.result() for f in self.fetch_many(ranges)]

    def read_into(self, start: int, buf: Any) -> None:
        """Fill ``buf`` with the bytes from ``start``: pieces of at least 4 MiB fetched
        concurrently, each copied in as it arrives."""
        view = memoryview(buf).cast("B")
        n = len(view)
        piece = max(4 << 20, -(-n // 16))
        spans = [(a, min(a + piece, start + n)) for a in range(start, start + n, piece)]
        for (a, b), part in zip(spans, self.fetch_many(spans), strict=True):
            view[a - start : b - start] = part.result()

    def fetch_many(self, ranges: Sequence[tuple[int, int]]) -> list[Slice]:
        """One pending :class:`Slice` per ``(start, stop)``: the ranges merged into few
        requests (gap ``policy.io.coalesce_gap``), all started now."""
        out: list[Slice | None] = [None] * len(ranges)
        todo: list[int] = []
        for i, (a, b) in enumerate(ranges):
            if b > self.file_size:
                out[i] = Slice(None, 0, 0, error=DataError("file ended early"))
            elif b <= len(self.head):
                out[i] = Slice(Done(self.head), a, b)
            else:
                todo.append(i)
        policy = self.fetcher.policy
        plan = plan_requests([ranges[i] for i in todo], gap=policy.io.coalesce_gap,
                             concurrency=policy.io.request_concurrency)
        for piece in plan:
            # each range's future resolves as soon as its bytes arrive: decoding the first
            # tiles of a request overlaps the transfer of the rest
            parts = [(ranges[todo[m]][0] - piece.start, ranges[todo[m]][1] - piece.start)
                     for m in piece.members]
            futures = self.fetcher.submit_parts(self.path, piece.start, piece.stop, parts,
                                                url=self.url, expect=self.expect)
            for m, fut in zip(piece.members, futures, strict=True):
                a, b = ranges[todo[m]]
                out[todo[m]] = Slice(Pending(fut, self, a, b), 0, b - a)
        return [s for s in out if s is not None]

    def _fetch(self, start: int, stop: int) -> Bytes:
        return self._get(start, stop).data

    def _get(self, start: int, stop: int) -> Answer:
        with gone_is_changed(self.url):
            return self.fetcher.get(self.path, start, stop, url=self.url, expect=self.expect)

    def close(self) -> None:
        """Drop the first block (nothing else is held open)."""
        self.head = b""


class Done:
    """An already available answer, shaped like a pending one."""

    def __init__(self, data: Bytes) -> None:
        self.data = data

    def result(self) -> Bytes:
        return self.data

    def when_ready(self, fn: Callable[[], object]) -> None:
        fn()


class Pending:
    """The bytes ``start:stop`` of an object, on their way; :meth:`result` waits for them
    (bounded)."""

    def __init__(self, future: Future[memoryview], reader: RemoteReader, start: int,
                 stop: int) -> None:
        self.future, self.reader, self.start, self.stop = future, reader, start, stop

    def result(self) -> memoryview:
        r = self.reader
        with gone_is_changed(r.url):
            return r.fetcher.wait(self.future, r.url, self.start, self.stop)

    def when_ready(self, fn: Callable[[], object]) -> None:
        """``fn()`` once the bytes are there or the request failed (on the thread that
        completes it, or now)."""
        self.future.add_done_callback(lambda _: fn())


@contextlib.contextmanager
def gone_is_changed(url: str) -> Iterator[None]:
    """An object that was there when it was opened and is missing now was replaced or
    deleted while it was read: ``DataError``, not ``FileNotFoundError``."""
    try:
        yield
    except FileNotFoundError:
        raise DataError(f"{url}: the object disappeared while it was read (deleted or "
                        "replaced); open it again") from None


class Whole:
    """A whole object on its way (at most the limit asked for); :meth:`result` waits."""

    def __init__(self, fetcher: Fetcher, future: Future[Answer], url: str) -> None:
        self.fetcher, self.future, self.url = fetcher, future, url

    def result(self) -> bytes | bytearray:
        return self.fetcher.wait(self.future, self.url, 0, None).data

    def when_ready(self, fn: Callable[[], object]) -> None:
        """``fn()`` once the object is there or the request failed."""
        self.future.add_done_callback(lambda _: fn())


class Slice:
    """The bytes of one range: a slice of an available block, or a pending range."""

    def __init__(self, source: Done | Pending | None, start: int, stop: int, *,
                 error: Exception | None = None) -> None:
        self.source, self.start, self.stop, self.error = source, start, stop, error

    def when_ready(self, fn: Callable[[], object]) -> None:
        """``fn()`` once :meth:`result` no longer waits."""
        if self.source is None:
            fn()
        else:
            self.source.when_ready(fn)

    def result(self) -> memoryview:
        if self.error is not None:
            raise self.error
        assert self.source is not None
        return memoryview(self.source.result())[self.start : self.stop]


def version_of(info: dict[str, Any]) -> Hashable:
    """An object's version token from its ``info``: ETag/generation/... and size (over
    HTTP, its validator's token)."""
    if isinstance(info.get("validator"), Validator):
        return info["validator"].token()
    for name in _VERSION_FIELDS:
        value = info.get(name)
        if value is not None:
            if name in ("ETag", "etag"):  # the form of a validator's token (either backend)
                return Validator(str(value), None, info.get("size")).token()
            return (name, str(value), info.get("size"))
    return ("size", info.get("size"))


class RemoteStore(HeldObjects):
    """The objects under ``root`` (a directory URL's fsspec path) on ``fs``; keys a header
    names are confined under ``policy``; read through
    :meth:`~.objects.HeldObjects.get_ranges`."""

    remote = True

    def __init__(self, fs: Any, root: str, policy: Policy, *, source: Any = None,
                 fetcher: Fetcher | None = None) -> None:
        self.fs, self.root, self.policy, self.source = fs, root.rstrip("/"), policy, source
        self.fetcher = fetcher or make_fetcher(fs, policy)

    def strip(self, path: str) -> str:
        """An fsspec path or URL as the filesystem's path (its protocol stripped)."""
        if getattr(self.fs, "obstore", False):
            return str(self.fs.strip(self.url(path)))
        return strip_protocol(path if _URL.match(path) else self.url(path))

    def url(self, path: str) -> str:
        """The URL of an fsspec path (for messages)."""
        return path if _URL.match(path) else self.fs.unstrip_protocol(path)

    def path(self, key: str, *, field: str = "data_file") -> str:
        """The fsspec path of ``key`` under the path policy (``field`` names it in errors):
        :func:`~.keys.confine_key`, then joined to the root."""
        found = confine_key(key, self.policy, prefix=where(self.source, field),
                            root=self.url(self.root))
        if found.absolute:
            if self.root.startswith("/"):  # a filesystem with a root (memory://, sftp)
                return found.path
            return _join(_bucket_root(self.root), found.path.lstrip("/"))  # same bucket/host
        return _join(self.root, found.path)

    def child(self, key: str, *, field: str) -> RemoteStore:
        """The store rooted at directory ``key`` (e.g. ``tile:base_dir``)."""
        return RemoteStore(self.fs, self.path(key, field=field), self.policy,
                           source=self.source, fetcher=self.fetcher)

    def open_reader(self, key: str, *, field: str = "data_file", map_reads: bool = True
                    ) -> RemoteReader:
        """A byte-range reader of ``key`` (one or two requests)."""
        path = self.path(key, field=field)
        return RemoteReader(self.fetcher, path, self.url(path))

    def submit_get(self, key: str, *, limit: int, field: str = "data_file"
                   ) -> Future[Answer]:
        """Start fetching the whole object ``key`` (at most ``limit`` bytes)."""
        path = self.path(key, field=field)
        return self.fetcher.submit(path, 0, limit, url=self.url(path), exact=False)

    def get(self, key: str, *, limit: int | None = None, field: str = "data_file",
            what: str = "") -> Bytes:
        """The whole object, at most ``limit`` bytes (default ``max_bytes``);
        ``FileNotFoundError`` when it is absent."""
        path = self.path(key, field=field)
        limit = self.policy.max_bytes if limit is None else limit
        return self.fetcher.get(path, 0, limit, url=self.url(path), exact=False).data

    def _open_object(self, key: str, field: str) -> RemoteReader:
        return self.open_reader(key, field=field)

    def _whole(self, key: str, limit: int, field: str) -> Whole:
        path = self.path(key, field=field)
        url = self.url(path)
        return Whole(self.fetcher, self.fetcher.submit(path, 0, limit, url=url, exact=False),
                     url)

    def size(self, key: str, *, field: str = "data_file") -> int:
        """The object's size; ``FileNotFoundError`` when it is absent."""
        path = self.path(key, field=field)
        info = self._info(path)
        if info.get("size") is None:
            raise RemoteError(f"{self.url(path)}: the server does not state the object's "
                              "size")
        return int(info["size"])

    def exists(self, key: str, *, field: str = "data_file") -> bool:
        """Whether ``key`` is an object."""
        try:
            self._info(self.path(key, field=field))
        except FileNotFoundError:
            return False
        return True

    def _info(self, path: str) -> dict[str, Any]:
        info = self.fetcher.info(path, url=self.url(path))
        if info.get("type") == "directory":
            raise ObjectNotFoundError(errno.ENOENT, "not an object (a directory or prefix)",
                                      self.url(path))
        return info

    def version(self, key: str, *, field: str = "data_file") -> Hashable:
        """The object's version token (ETag, generation, ... and size)."""
        path = self.path(key, field=field)
        return version_of(self.fetcher.info(path, url=self.url(path)))

    def walk(self, prefix: str) -> Iterator[str]:
        """The keys of the objects under ``prefix`` (``UnsupportedError`` over HTTP, which
        has no listing: fsspec would scrape a page of links of any size)."""
        if self.fetcher.http:
            raise UnsupportedError(f"{self.url(self.root)}: HTTP cannot list the objects "
                                   f"under {prefix!r}; pass max_files=... to ask for each "
                                   "object by name")
        base = self.path(prefix, field="tile:pattern") if prefix else self.root
        try:
            found = self.fetcher.filesystem().find(base)
        except FileNotFoundError:
            return
        except Exception as exc:  # a listing that fails, named
            raise RemoteError(f"{self.url(base)}: listing failed: {exc}") from None
        root = self.strip(self.root).rstrip("/") + "/"
        for p in found:
            p = self.strip(p)
            if p.startswith(root):
                yield p[len(root):]


def _join(root: str, rel: str) -> str:
    if rel in ("", "."):
        return root
    m = _URL.match(root)
    if m is None:
        return posixpath.normpath(posixpath.join(root, rel)) if root else rel
    scheme, rest = root[: m.end()], root[m.end():]
    host, _, path = rest.partition("/")
    joined = posixpath.normpath(posixpath.join("/" + path, rel))
    return f"{scheme}{host}{joined}"


def _bucket_root(root: str) -> str:
    m = _URL.match(root)
    if m is not None:
        return root[: m.end()] + root[m.end():].partition("/")[0]
    return root.partition("/")[0]
