"""The write half of object stores (``s3://``, ``gs://``, ``az://``, ``memory://``, ... any
writable fsspec URL): :class:`RemoteWriteStore`, the :class:`~jnrrd.storage.WriteStore` a write
to a URL goes through.

An object store has no rename, but its PUT is atomic: an object appears whole, or not at all,
when the request returns (and is durable then). The writers' order does the rest:

- :meth:`RemoteWriteStore.put` (external tiles, the Dask writer's tiles) uploads under a fresh
  prefix, many requests in flight (at most :data:`PUTS_IN_FLIGHT`, which bounds the memory
  held by tiles on the wire); :meth:`~RemoteWriteStore.sync` waits for all of them (and raises
  the first failure) before a writer commits the header that names them;
- :meth:`~RemoteWriteStore.stage` (an internal file, an untiled file, a header, a detached
  data file) is a :class:`RemoteStaged`: a :class:`~jnrrd.storage.writes.StagedFile` in a
  private directory under :func:`tempfile.gettempdir` (``TMPDIR``), uploaded as one object by
  :meth:`RemoteStaged.commit` (s3fs: one PUT below 100 MiB, a multipart upload above, which
  becomes visible only when it completes);
- :meth:`~RemoteWriteStore.tidy`, after the new header is in place, deletes the objects the
  previous header of the same key named and a write to that key made
  (:meth:`~RemoteWriteStore.owned`, :mod:`jnrrd.storage.ownership`), and nothing else.

Local staging files are never ``fsync``ed: they are scratch, and an upload that did not finish
is lost whether or not they are; ``durable=False`` therefore changes nothing here.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import re
import shutil
import tempfile
import threading
from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any

from .._threads import io_submit
from ..errors import AccessDeniedError, ObjectNotFoundError, RemoteError, UnsupportedError
from . import aio
from .names import fresh_token
from .ownership import read_head, referenced_names
from .protocols import Staged
from .remote import filesystem, split_url, strip_protocol
from .writes import StagedFile

__all__ = ["PUTS_IN_FLIGHT", "READ_ONLY", "RemoteStaged", "RemoteWriteStore", "check_writable",
           "remote_target"]

#: uploads of :meth:`RemoteWriteStore.put` in flight at once (each holds one encoded tile)
PUTS_IN_FLIGHT = 16
#: URL schemes that can be read but not written
READ_ONLY = ("http", "https")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def check_writable(url: str) -> None:
    """``UnsupportedError`` for a URL whose protocol is read-only (``http(s)://``)."""
    m = _SCHEME.match(url)
    if m is not None and m.group(1).lower() in READ_ONLY:
        raise UnsupportedError(f"{url}: {m.group(1).lower()}:// URLs are read-only; write to "
                               "an object store (s3://, gs://, az://, memory://, ...) or a "
                               "local path")


def remote_target(url: str, storage_options: dict[str, Any] | None = None
                  ) -> tuple[RemoteWriteStore, str]:
    """The store a write to ``url`` goes through, and the target's key in it
    (``UnsupportedError`` for a read-only protocol such as ``https://``)."""
    check_writable(url)
    fs, path = filesystem(url, storage_options, backend="fsspec")  # writes: docs/remote.md
    root, key = split_url(path, name_url=url)
    return RemoteWriteStore(fs, root), key


class RemoteWriteStore:
    """The objects under ``root`` (an fsspec path of a "directory") on ``fs`` as the target of
    a write; keys are names under it. Pickled (a Dask task's copy), it puts synchronously."""

    remote = True  # as the read side's RemoteStore: the objects are not on the local disk

    def __init__(self, fs: Any, root: str) -> None:
        self.fs = fs
        self.root = root.rstrip("/")
        self._blocking = False
        self._setup()

    def _setup(self) -> None:
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(PUTS_IN_FLIGHT)
        self._pending: dict[int, tuple[str, Future[Any]]] = {}  # uploads on the wire
        self._failed: list[tuple[str, BaseException]] = []  # uploads that failed, by key
        self._count = 0
        # uploads of an asynchronous filesystem: its public pipe_file on the request loop's
        # pool of blocking calls (PUTS_IN_FLIGHT at once)
        self._concurrent = bool(getattr(self.fs, "async_impl", False))

    def __getstate__(self) -> dict[str, Any]:
        return {"fs": self.fs, "root": self.root}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.fs, self.root = state["fs"], state["root"]
        self._blocking = True  # nobody in this process waits for its futures
        self._setup()

    # -- names ------------------------------------------------------------------------------
    def fs_path(self, key: str) -> str:
        """The fsspec path of ``key``."""
        return posixpath.join(self.root, key) if key else self.root

    def path(self, key: str) -> str:
        """The URL of ``key`` (for messages)."""
        return self.url(self.fs_path(key))

    def url(self, path: str) -> str:
        """The URL of an fsspec path."""
        return path if _SCHEME.match(path) else self.fs.unstrip_protocol(path)

    # -- whole objects under fresh keys ------------------------------------------------------
    def put(self, key: str, data: Any) -> None:
        """Start uploading ``data`` as the object ``key`` (a fresh name: nobody reads it
        before a header names it); :meth:`sync` waits for it. Blocks while
        :data:`PUTS_IN_FLIGHT` uploads are on the wire."""
        body = data if isinstance(data, bytes) else bytes(data)  # the caller may reuse its buffer
        path = self.fs_path(key)
        if self._blocking:
            self._call("upload", path, self.fs.pipe_file, path, body)
            return
        if self._failed:  # an earlier upload failed: stop the write now, not at sync()
            key0, exc = self._failed[0]
            raise _named(exc, "upload", self.path(key0))
        self._slots.acquire()
        try:
            if self._concurrent:
                fut: Future[Any] = aio.submit(aio.in_thread(self.fs.pipe_file, path, body))
            else:
                fut = io_submit(self.fs.pipe_file, path, body)
        except BaseException:
            self._slots.release()
            raise
        with self._lock:
            n = self._count = self._count + 1
            self._pending[n] = (key, fut)
        fut.add_done_callback(lambda f: self._done(n, key, f))

    def _done(self, n: int, key: str, fut: Future[Any]) -> None:
        """An upload stopped: free its slot, forget it, remember a failure."""
        exc = fut.exception() if not fut.cancelled() else RemoteError("upload cancelled")
        with self._lock:
            self._pending.pop(n, None)
            if exc is not None:
                self._failed.append((key, exc))
        self._slots.release()  # after the failure is noted: the next put sees it

    def reserve(self, prefix: str) -> None:
        """Claim a fresh prefix (``FileExistsError`` when objects exist under it): one listing
        of the directory (object stores have no directories to create)."""
        path = self.fs_path(prefix)
        if self._strip(path) in {self._strip(e["name"]) for e in self._listing()}:
            raise FileExistsError(17, "objects exist under this prefix", self.url(path))

    def sync(self, prefix: str) -> None:
        """Wait until every object put under ``prefix`` is stored (the first failure is
        raised, naming its URL, once all have stopped)."""
        failed = self._settle(prefix)
        if failed:
            key, exc = failed[0]
            raise _named(exc, "upload", self.path(key))
        self.fs.invalidate_cache(self.fs_path(prefix))

    def _settle(self, prefix: str) -> list[tuple[str, BaseException]]:
        """Wait for the uploads under ``prefix``; return (and forget) their failures."""
        start = prefix.rstrip("/") + "/" if prefix else ""
        with self._lock:
            mine = [f for k, f in self._pending.values() if k.startswith(start)]
        for fut in mine:
            with contextlib.suppress(BaseException):
                fut.result()
        with self._lock:
            failed = [(k, e) for k, e in self._failed if k.startswith(start)]
            self._failed = [(k, e) for k, e in self._failed if not k.startswith(start)]
        return failed

    # -- staged objects ---------------------------------------------------------------------
    def stage(self, key: str, *, token: str | None = None, random_access: bool = False,
              write_back: bool = False) -> RemoteStaged:
        """A new object for ``key``, written to a local temporary file and uploaded as one
        object at commit (``write_back`` does nothing here)."""
        return RemoteStaged(self, key, token or fresh_token(), random_access=random_access)

    def upload(self, local: str, key: str) -> None:
        """Upload the local file ``local`` as the object ``key`` (one atomic PUT, or a
        multipart upload that becomes visible when it completes)."""
        path = self.fs_path(key)
        self._call("upload", path, self.fs.put_file, local, path)

    def append_object(self, staged: Staged, key: str, size: int) -> None:
        """Append the first ``size`` bytes of the object ``key`` to ``staged`` (downloaded in
        pieces of at most 8 MiB)."""
        self.sync("")
        path = self.fs_path(key)
        at, step = 0, 8 << 20
        while at < size:
            piece = self._call("download", path, self.fs.cat_file, path, start=at,
                               end=min(size, at + step))
            if not piece:
                raise RemoteError(f"{self.url(path)}: bytes {at}-{size - 1}: the object "
                                  "ended early")
            staged.file.write(piece)
            at += len(piece)

    # -- removal ----------------------------------------------------------------------------
    def delete(self, key: str) -> None:
        """Remove the object ``key``."""
        path = self.fs_path(key)
        self._call("delete", path, self.fs.rm_file, path)

    def discard(self, prefix: str) -> None:
        """Wait for the uploads under ``prefix`` to stop, then remove everything under it
        (best effort)."""
        self._settle(prefix)
        path = self.fs_path(prefix)
        with contextlib.suppress(Exception):
            self.fs.rm(path, recursive=True)

    def owned(self, key: str) -> list[str]:
        """The fresh data files and tile prefixes the current header object at ``key`` names
        and a write to ``key`` made (keys are case-sensitive): what a rewrite removes once its
        new header is in place. Empty when there is none (or it cannot be read)."""
        try:
            head = read_head(_Ranges(self.fs, self.fs_path(key)))  # ranged GETs, no HEAD
        except Exception:  # no previous header, or an unreadable one: nothing proved
            return []
        return referenced_names(head, posixpath.basename(key))

    def tidy(self, key: str, *, keep: Iterable[str] = (), owned: Iterable[str] = ()
             ) -> list[str]:
        """After ``key``'s header is in place: remove the objects (and prefixes) beside it
        named in ``owned`` (:meth:`owned` of the previous header), except the keys in
        ``keep``; return their URLs. Best effort: one listing, then deletes."""
        owned = set(owned)
        if not owned:
            return []
        kept = {k.strip("/") for k in keep}
        try:
            entries = self._listing()
        except Exception:  # best effort: the write itself has succeeded
            return []
        removed = []
        for e in entries:
            name = posixpath.basename(self._strip(e["name"]))
            if name in kept or name == key or name not in owned:
                continue
            path = self.fs_path(name)
            with contextlib.suppress(Exception):
                if e.get("type") == "directory":
                    self.fs.rm(path, recursive=True)  # S3: one listing, one bulk delete
                else:
                    self.fs.rm_file(path)
                removed.append(self.url(path))
        return removed

    # -- helpers ----------------------------------------------------------------------------
    def _listing(self) -> list[dict[str, Any]]:
        """The entries of the root "directory", fresh (one listing request)."""
        self.fs.invalidate_cache(self.root)
        try:
            return list(self.fs.ls(self.root, detail=True))
        except FileNotFoundError:
            return []

    def _strip(self, path: str) -> str:
        return strip_protocol(path if _SCHEME.match(path) else self.url(path)).rstrip("/")

    def _call(self, what: str, path: str, fn: Any, *args: Any, **kw: Any) -> Any:
        try:
            return fn(*args, **kw)
        except Exception as exc:
            raise _named(exc, what, self.url(path)) from exc


class _Ranges:
    """An object read from its start in ranged requests (``read(n)``: the next ``n`` bytes)."""

    def __init__(self, fs: Any, path: str) -> None:
        self.fs, self.path, self.at = fs, path, 0

    def read(self, n: int) -> bytes:
        data = bytes(self.fs.cat_file(self.path, start=self.at, end=self.at + n))[:n]
        self.at += len(data)
        return data


class RemoteStaged(StagedFile):
    """A new object for a remote key: a local temporary file (in a private directory under
    :func:`tempfile.gettempdir`), uploaded as one object by :meth:`commit`, removed with its
    directory by :meth:`commit` or :meth:`abort`."""

    def __init__(self, store: RemoteWriteStore, key: str, token: str, *,
                 random_access: bool = False) -> None:
        self.store, self.key = store, key
        self.tmpdir = tempfile.mkdtemp(prefix="jnrrd-upload-")
        # a fixed name: the key's last part may be longer than a local file name may be
        local = os.path.join(self.tmpdir, "object")
        try:
            super().__init__(local, token, durable=False, random_access=random_access)
        except BaseException:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            raise

    def commit(self) -> None:
        """Close the local file and upload it as the object (visible whole once uploaded)."""
        final = self._final
        if final is None:
            self.file.flush()
            final = self.tmp
        self.close()
        try:
            self.store.upload(final, self.key)
        finally:
            self._unlink()

    def _unlink(self) -> None:
        super()._unlink()
        shutil.rmtree(self.tmpdir, ignore_errors=True)


def _named(exc: BaseException, what: str, url: str) -> BaseException:
    """``exc`` as a :class:`~jnrrd.errors.RemoteError` naming ``url``: a missing object or
    bucket is an ``ObjectNotFoundError`` (also a ``FileNotFoundError``), a refused permission
    an ``AccessDeniedError`` (also a ``PermissionError``)."""
    if isinstance(exc, RemoteError) or not isinstance(exc, Exception):
        return exc
    detail = str(exc) or type(exc).__name__
    if url in detail:
        detail = detail.replace(url, "").strip(" :") or type(exc).__name__
    if isinstance(exc, FileNotFoundError):
        return ObjectNotFoundError(errno.ENOENT, f"{what} failed: {detail}", url)
    if isinstance(exc, PermissionError):
        return AccessDeniedError(errno.EACCES, f"{what} failed: {detail}", url)
    if isinstance(exc, FileExistsError):
        return exc
    return RemoteError(f"{url}: {what} failed: {detail}")
