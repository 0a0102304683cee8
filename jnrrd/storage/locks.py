"""One writer at a time: the lock an editable volume holds while it is open for writing
(``jnrrd.open(..., mode="r+")``, ``jnrrd.create``; docs/editing.md, "Locking").

- A local file: the lock file ``.<name>.jnrrd-lock`` beside it, held with an advisory lock
  of the operating system (``flock`` on POSIX, ``msvcrt.locking`` on Windows), which the
  system drops when the holder dies. Where the file system has no such locks, the lock file
  itself is the lock: created with ``O_CREAT | O_EXCL``, holding the owner's token, host,
  process and time; a lock file older than ``stale_after`` seconds without a refresh (or,
  on the same host, of a process that is gone) is stale and may be broken.
- An object store: the lock object ``.<name>.jnrrd-lock`` created only if absent (S3
  ``If-None-Match: *``; fsspec's ``mode="create"``), refreshed and released by the holder
  (S3: ``If-Match`` its ETag), broken when older than ``stale_after`` seconds (S3: only by
  an ``If-Match`` overwrite of the stale version, so two breakers cannot both win).

A holder calls :meth:`refresh` before it publishes a commit: it fails with
:class:`~jnrrd.errors.LockError` when the lock was broken meanwhile, so a writer whose lock
was taken over never commits. :func:`acquire` is the one entry point; an object-store
backend other than fsspec plugs in by giving :class:`ObjectLock` another
:class:`ConditionalPut`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import socket
import time
from typing import Any, Protocol

from .. import _platform
from ..errors import LockError

__all__ = ["STALE_AFTER", "ConditionalPut", "FileLock", "ObjectLock", "acquire",
           "lock_name"]

#: seconds after which a lock that was not refreshed counts as abandoned (lock files and
#: lock objects; an operating-system lock needs no timeout: it dies with its holder)
STALE_AFTER = 600.0

#: errors meaning "this file system has no advisory locks" (the lock file is used instead)
_NO_LOCKS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, getattr(errno, "ENOTSUP", 95)}


def lock_name(name: str) -> str:
    """The lock's name beside the target ``name``: ``.<name>.jnrrd-lock``."""
    return f".{name}.jnrrd-lock"


def _owner(token: str) -> bytes:
    return json.dumps({"token": token, "host": socket.gethostname(), "pid": os.getpid(),
                       "time": time.time()}).encode()


def _describe(body: bytes | None) -> str:
    try:
        info = json.loads(body or b"")
        return (f" (held by process {info['pid']} on {info['host']} since "
                f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(info['time']))})")
    except (ValueError, KeyError, TypeError, OverflowError, OSError):
        return ""


class FileLock:
    """The lock of a local target (see the module doc). ``os_locks=False`` uses the lock
    file alone (what happens on a file system without advisory locks)."""

    def __init__(self, target: str, *, stale_after: float = STALE_AFTER,
                 os_locks: bool = True) -> None:
        d, name = os.path.split(os.path.abspath(target))
        self.target = target
        self.path = os.path.join(d, lock_name(name))
        self.stale_after = float(stale_after)
        self.token = secrets.token_hex(8)
        self._fd: int | None = None
        self._os = os_locks
        self._acquire()

    # -- acquiring --------------------------------------------------------------------------
    def _acquire(self) -> None:
        if self._os:
            try:
                self._acquire_os()
                return
            except OSError as exc:
                if exc.errno not in _NO_LOCKS:
                    raise
                self._os = False  # no advisory locks here: the lock file alone
        self._acquire_file()

    def _acquire_os(self) -> None:
        for _ in range(16):  # a holder may unlink the file between our open and our lock
            fd, created = self._open_lock_file()
            try:
                _platform.lock_exclusive(fd)
            except BlockingIOError:
                body = _read(fd)
                os.close(fd)
                raise LockError(f"{self.target}: another writer has it open for writing"
                                f"{_describe(body)}") from None
            except OSError:
                os.close(fd)
                if created:  # no advisory locks here: the lock file alone will be the lock
                    with contextlib.suppress(OSError):
                        os.unlink(self.path)
                raise
            if _same_file(fd, self.path):
                os.ftruncate(fd, 0)
                os.write(fd, _owner(self.token))
                self._fd = fd
                return
            os.close(fd)
        raise LockError(f"{self.target}: could not take the lock {self.path}")

    def _open_lock_file(self) -> tuple[int, bool]:
        """The lock file, opened for reading and writing, and whether this call made it."""
        for _ in range(16):
            try:
                return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644), True
            except FileExistsError:
                pass
            except FileNotFoundError:
                raise FileNotFoundError(errno.ENOENT, "no such directory", self.target
                                        ) from None
            try:
                return os.open(self.path, os.O_RDWR), False
            except FileNotFoundError:
                continue  # released meanwhile: make it
        raise LockError(f"{self.target}: could not open the lock file {self.path}")

    def _acquire_file(self) -> None:
        for _ in range(4):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                self._break_if_stale()
                continue
            try:
                os.write(fd, _owner(self.token))
                os.fsync(fd)
            finally:
                os.close(fd)
            return
        raise LockError(f"{self.target}: another writer holds it{_describe(_slurp(self.path))}")

    def _break_if_stale(self) -> None:
        """Remove a stale lock file (renamed aside first, so that only one of several
        breakers removes it, and only the version it judged stale)."""
        body = _slurp(self.path)
        if body is None:
            return  # gone meanwhile: try again
        if not self._stale(body):
            raise LockError(f"{self.target}: another writer holds it{_describe(body)}; a "
                            f"lock not refreshed for {self.stale_after:g} s counts as stale")
        aside = f"{self.path}.broken-{secrets.token_hex(4)}"
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return  # another breaker was first
        if _slurp(aside) != body:  # a fresh lock replaced the stale one meanwhile: put it back
            with contextlib.suppress(OSError):
                os.link(aside, self.path)
        with contextlib.suppress(OSError):
            os.unlink(aside)

    def _stale(self, body: bytes) -> bool:
        try:
            age = time.time() - os.stat(self.path).st_mtime
        except FileNotFoundError:
            return True
        if age > self.stale_after:
            return True
        try:
            info = json.loads(body)
            same_host = info.get("host") == socket.gethostname()
            pid = int(info["pid"])
        except (ValueError, KeyError, TypeError, AttributeError):
            return False
        return same_host and _platform.process_exists(pid) is False

    # -- holding ----------------------------------------------------------------------------
    def refresh(self) -> None:
        """Check that the lock is still ours (``LockError`` when it was broken) and renew
        its time."""
        if self._os:
            return  # the system holds it for us until we close it
        body = _slurp(self.path)
        if body is not None and self.token in body.decode("utf-8", "replace"):
            with contextlib.suppress(OSError):
                os.utime(self.path)
            return
        raise LockError(f"{self.target}: the lock was broken while this writer held it (not "
                        f"refreshed for {self.stale_after:g} s); nothing was committed")

    def release(self) -> None:
        """Give the lock up (idempotent)."""
        if self._os:
            fd, self._fd = self._fd, None
            if fd is None:
                return
            if os.name == "posix":  # Windows cannot remove a file that is open
                with contextlib.suppress(OSError):
                    os.unlink(self.path)
            os.close(fd)  # closing drops the system's lock
            return
        body = _slurp(self.path)
        if body is not None and self.token in body.decode("utf-8", "replace"):
            with contextlib.suppress(OSError):
                os.unlink(self.path)


class ConditionalPut(Protocol):
    """The object-store operations a lock object needs (fsspec here; another backend
    implements the same four)."""

    def create(self, path: str, data: bytes) -> Any:
        """Write ``data`` only if ``path`` does not exist (``FileExistsError`` otherwise);
        return its version token."""
        ...

    def replace(self, path: str, data: bytes, version: Any) -> Any:
        """Overwrite ``path`` only if it is still at ``version``; return the new version
        (``LockError`` when it is not)."""
        ...

    def read(self, path: str) -> tuple[bytes, Any, float] | None:
        """``(data, version, age in seconds)`` of ``path``, or ``None`` when absent."""
        ...

    def delete(self, path: str, version: Any) -> None:
        """Remove ``path`` if it is still at ``version`` (best effort)."""
        ...


class ObjectLock:
    """The lock object of a target on an object store (see the module doc)."""

    def __init__(self, ops: ConditionalPut, path: str, url: str, *,
                 stale_after: float = STALE_AFTER) -> None:
        self.ops, self.path, self.url = ops, path, url
        self.stale_after = float(stale_after)
        self.token = secrets.token_hex(8)
        self.version: Any = None
        self._last = 0.0
        self._acquire()

    def _acquire(self) -> None:
        for _ in range(4):
            try:
                self.version = self.ops.create(self.path, _owner(self.token))
                self._last = time.monotonic()
                return
            except FileExistsError:
                pass
            found = self.ops.read(self.path)
            if found is None:
                continue  # released meanwhile: try again
            body, version, age = found
            if age <= self.stale_after:
                raise LockError(f"{self.url}: another writer holds it{_describe(body)}; a "
                                f"lock object not refreshed for {self.stale_after:g} s "
                                "counts as stale")
            self.version = self.ops.replace(self.path, _owner(self.token), version)
            self._last = time.monotonic()
            return
        raise LockError(f"{self.url}: could not take the lock object {self.path}")

    def refresh(self) -> None:
        """Renew the lock object (``LockError`` when it is no longer ours)."""
        self.version = self.ops.replace(self.path, _owner(self.token), self.version)
        self._last = time.monotonic()

    def release(self) -> None:
        """Remove the lock object (idempotent, best effort)."""
        if self.version is not None:
            version, self.version = self.version, None
            with contextlib.suppress(Exception):
                self.ops.delete(self.path, version)


class FsspecOps:
    """:class:`ConditionalPut` on an fsspec filesystem: exclusive create through
    ``pipe_file(mode="create")``; on S3 (s3fs) overwrites and deletes conditional on the
    ETag (``If-Match``), elsewhere checked by reading the owner token back (a narrow race
    between two breakers of one stale lock, documented in docs/editing.md)."""

    def __init__(self, fs: Any) -> None:
        self.fs = fs
        self.s3 = type(fs).__module__.startswith("s3fs")

    def create(self, path: str, data: bytes) -> Any:
        out = self.fs.pipe_file(path, data, mode="create")
        return _etag(out) or self._version(path, data)

    def replace(self, path: str, data: bytes, version: Any) -> Any:
        if self.s3:
            try:
                out = self.fs.pipe_file(path, data, IfMatch=version)
            except FileNotFoundError:
                raise LockError(f"{path}: the lock object is gone") from None
            except OSError as exc:
                raise LockError(f"{path}: the lock object changed ({exc}); another writer "
                                "has taken it") from None
            return _etag(out) or self._version(path, data)
        found = self.read(path)
        if found is None or found[1] != version:
            raise LockError(f"{path}: the lock object changed; another writer has taken it")
        self.fs.pipe_file(path, data)
        return self._version(path, data)

    def read(self, path: str) -> tuple[bytes, Any, float] | None:
        try:
            self.fs.invalidate_cache(path)
            info = self.fs.info(path)
            data = self.fs.cat_file(path)
        except FileNotFoundError:
            return None
        return data, _etag(info) or data, max(0.0, time.time() - _mtime(info))

    def delete(self, path: str, version: Any) -> None:
        if self.s3:
            bucket, key, _ = self.fs.split_path(path)
            self.fs.call_s3("delete_object", Bucket=bucket, Key=key, IfMatch=version)
            self.fs.invalidate_cache(path)
            return
        found = self.read(path)
        if found is not None and found[1] == version:
            self.fs.rm_file(path)

    def _version(self, path: str, data: bytes) -> Any:
        found = self.read(path)
        if found is None or found[0] != data:
            raise LockError(f"{path}: the lock object changed; another writer has taken it")
        return found[1]


def acquire(target: str, *, fs: Any = None, fs_path: str | None = None,
            stale_after: float = STALE_AFTER) -> FileLock | ObjectLock:
    """The writer's lock of ``target``: a :class:`FileLock` for a local path, an
    :class:`ObjectLock` at ``fs_path`` on the fsspec filesystem ``fs`` for a URL.
    ``LockError`` when another writer holds it."""
    if not (isinstance(stale_after, (int, float)) and stale_after > 0):
        raise ValueError(f"stale_after must be a positive number of seconds, got "
                         f"{stale_after!r}")
    if fs is None:
        return FileLock(target, stale_after=stale_after)
    assert fs_path is not None
    return ObjectLock(FsspecOps(fs), fs_path, target, stale_after=stale_after)


# -- helpers -------------------------------------------------------------------------------
def _same_file(fd: int, path: str) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _read(fd: int) -> bytes | None:
    """The holder's note in the lock file ``fd`` (None where its lock forbids reading it:
    Windows locks the byte range)."""
    try:
        return _platform.pread(fd, 4096, 0)
    except OSError:
        return None


def _slurp(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read(4096)
    except OSError:
        return None


def _etag(info: Any) -> Any:
    if isinstance(info, dict):
        for k in ("ETag", "etag"):
            if info.get(k):
                return info[k]
    return None


def _mtime(info: dict[str, Any]) -> float:
    for k in ("LastModified", "last_modified", "mtime", "created"):
        v = info.get(k)
        if v is None:
            continue
        if hasattr(v, "timestamp"):
            return float(v.timestamp())
        with contextlib.suppress(TypeError, ValueError):
            return float(v)
    return time.time()

