"""Files on the local disk as a store: path confinement and opening (docs/security.md#path-policy),
whole-object and byte-range reads.

A key named by a header (``data_file``, a tile file) is resolved against the store's root under
the reader's :class:`~jnrrd.policy.Policy` before anything is opened: no absolute paths, no
``..`` escaping the root, no URLs, unless the policy opts in (URLs are then served by its
``opener`` alone). Only regular files are opened: a FIFO, device or socket would block or
stream endless bytes.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator
from typing import IO, Any

from ..errors import DataError, SecurityError, where
from ..policy import Policy
from .fileobj import StreamReader, read_at_most
from .objects import HeldObjects, Ready, ready
from .urls import is_url

__all__ = ["LocalStore", "file_version", "is_url", "open_resolved", "resolve_path"]

_DRIVE = re.compile(r"^[A-Za-z]:")


class LocalStore(HeldObjects):
    """The files under ``root``, each key resolved under ``policy`` before it is opened;
    read through :meth:`~.objects.HeldObjects.get_ranges`.

    ``source`` names the file whose header named the keys, for error messages.
    """

    def __init__(self, root: str, policy: Policy, *, source: Any = None) -> None:
        self.root = root
        self.policy = policy
        self.source = source

    def path(self, key: str, *, field: str = "data_file") -> str:
        """The real path of ``key`` under the path policy (``field`` names it in errors)."""
        return resolve_path(self.root, key, self.policy, source=self.source, field=field)

    def child(self, key: str, *, field: str) -> LocalStore:
        """The store rooted at directory ``key`` (e.g. ``tile:base_dir``), its keys confined
        to it (or the policy's other roots)."""
        root = self.path(key, field=field)
        policy = Policy.from_kwargs(self.policy,
                                    allowed_roots=(*self.policy.allowed_roots, root))
        return LocalStore(root, policy, source=self.source)

    def open(self, key: str, *, field: str = "data_file", what: str = "") -> IO[bytes]:
        """Open ``key`` for reading (a regular file, or a URL through the policy's opener)."""
        return open_resolved(self.path(key, field=field), self.policy, what=what)

    def open_reader(self, key: str, *, map_reads: bool = True, field: str = "data_file"
                    ) -> StreamReader:
        """A byte-range reader of ``key`` (memory-mapped, or ``pread`` when not
        ``map_reads``); the caller closes it."""
        return StreamReader(self.open(key, field=field), map_reads=map_reads, owned=True)

    def get(self, key: str, *, limit: int | None = None, field: str = "data_file",
            what: str = "") -> bytes:
        """The whole object, at most ``limit`` bytes (default ``max_bytes``), with memory
        proportional to what the file holds; ``FileNotFoundError`` when it is absent."""
        path = self.path(key, field=field)
        with open_resolved(path, self.policy, what=what) as f:
            if not is_url(path):
                real = os.path.realpath(path)
                if real != path:  # swapped for a symlink after resolution
                    raise DataError(f"{where(self.source)}tile file {path!r} changed")
            return read_at_most(f, self.policy.max_bytes if limit is None else limit)

    def _open_object(self, key: str, field: str) -> StreamReader:
        return self.open_reader(key, map_reads=False, field=field)

    def _whole(self, key: str, limit: int, field: str) -> Ready:
        return ready(lambda: self.get(key, limit=limit, field=field))

    def size(self, key: str, *, field: str = "data_file") -> int:
        """The size of the regular file ``key``; ``FileNotFoundError`` when there is none."""
        path = self.path(key, field=field)
        if is_url(path) or not os.path.isfile(path):
            raise FileNotFoundError(errno.ENOENT, "no regular file", path)
        return os.path.getsize(path)

    def exists(self, key: str, *, field: str = "data_file") -> bool:
        """Whether ``key`` is a regular file (a URL is never known to exist here)."""
        path = self.path(key, field=field)
        return not is_url(path) and os.path.isfile(path)

    def version(self, key: str, *, field: str = "data_file") -> tuple[int, int, int]:
        """(inode, size, mtime in ns) of ``key``: changes when it is replaced or rewritten."""
        return file_version(self.path(key, field=field))

    def walk(self, prefix: str) -> Iterator[str]:
        """The keys of the files under directory ``prefix`` (no policy: the names listed are
        resolved as keys before anything reads them)."""
        start = os.path.join(self.root, prefix)
        for top, _, names in os.walk(start):
            for n in names:
                yield os.path.relpath(os.path.join(top, n), self.root).replace(os.sep, "/")


def file_version(path: str | int) -> tuple[int, int, int]:
    """(inode, size, mtime in ns) of ``path`` (or of an open file descriptor): a token that
    changes when a write replaces the file; ``DataError`` when it no longer exists."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise DataError(f"{where(path)}the file no longer exists") from None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def resolve_path(
    root: str,
    path: str,
    policy: Policy,
    *,
    source: Any = None,
    field: str = "data_file",
) -> str:
    """Resolve a path read from a header against ``root`` under the path policy.

    Returns the real (symlink-free) absolute path. URLs are returned unchanged when the policy
    has an ``opener`` (which alone may serve them); otherwise they raise ``SecurityError``.
    Nothing is opened here.
    """
    prefix = where(source, field)
    if not isinstance(path, str) or not path:
        raise SecurityError(f"{prefix}expected a non-empty relative path, found {path!r}")
    if "\x00" in path:
        raise SecurityError(f"{prefix}path contains a NUL byte: {path!r}")
    if is_url(path):
        if policy.opener is None:
            raise SecurityError(
                f"{prefix}URL {path!r} is blocked; pass opener=... to let a callable serve URLs"
            )
        return path
    windows_abs = bool(_DRIVE.match(path)) or path.startswith("\\\\")
    if windows_abs or os.path.isabs(path):
        if not policy.allow_absolute:
            raise SecurityError(
                f"{prefix}absolute path {path!r} is blocked; pass allow_absolute=True to allow it"
            )
        full = path
    else:
        full = os.path.join(root, path)
    real = _realpath(full, policy)
    if policy.allow_absolute and (windows_abs or os.path.isabs(path)):
        return real
    if policy.allow_parent:
        return real
    roots = (_real_dir(root, policy), *policy.allowed_roots)
    for r in roots:
        if _inside(real, r):
            return real
    raise SecurityError(
        f"{prefix}path {path!r} resolves to {real!r}, outside {roots[0]!r}; "
        "pass allow_parent=True or allowed_roots=[...] to allow it"
    )


def _real_dir(d: str, policy: Policy) -> str:
    """``realpath`` of a directory, cached in the policy (one policy per read call).

    A header may name up to ``max_files`` files (10^5 by default) in a few directories;
    resolving every directory component for each file cost ~0.3 ms per file, half a minute
    for a 200-byte header (docs/security.md#caps).
    """
    cache = policy.extra.setdefault("_real_dirs", {})
    real = cache.get(d)
    if real is None:
        real = cache[d] = os.path.realpath(d)
    return real


def _realpath(full: str, policy: Policy) -> str:
    """``os.path.realpath(full)``: the directory part from the cache, the last component
    checked for a symlink every time (so a symlinked file is always followed before the
    root check)."""
    head, tail = os.path.split(full)
    if not tail or tail in (".", "..") or os.path.islink(full):
        return os.path.realpath(full)
    return os.path.join(_real_dir(head or ".", policy), tail)


def _inside(real: str, root: str) -> bool:
    """``commonpath([root, real]) == root`` for two real (normalised) paths."""
    if os.name == "posix":
        return real == root or real.startswith(root if root.endswith("/") else root + "/")
    try:
        return os.path.commonpath([root, real]) == root
    except ValueError:  # different drives on Windows
        return False


def open_resolved(path: str, policy: Policy, mode: str = "rb", *, what: str = "") -> IO[bytes]:
    """Open a path returned by :func:`resolve_path` (URLs through the policy's opener).

    Only regular files are opened: a FIFO, device or socket named by a header would block
    ``open()`` or a read forever, or stream endless bytes, so it is a ``DataError`` (``what``
    prefixes its message). The check is made on the opened descriptor (``O_NONBLOCK``, then
    ``fstat``), so a swap between check and read cannot get past it.
    """
    if is_url(path):
        assert policy.opener is not None  # resolve_path refused URLs without an opener
        return policy.opener(path, mode)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) \
        | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise  # the caller decides: a DataError, or padding under missing="fill"
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket (or a FIFO opened for writing only)
            raise _not_regular(path, "a socket", what) from None
        # A name too long, a symlink loop, a path through a regular file, no permission:
        # the header named something that holds no data (DataError, not a bare OSError).
        raise DataError(f"{what}{path!r} cannot be opened: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(path, _kind(st.st_mode), what)
        if flags & getattr(os, "O_NONBLOCK", 0) and hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, mode)  # the caller owns the handle
    except BaseException:
        os.close(fd)
        raise


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _not_regular(path: str, kind: str, what: str) -> DataError:
    return DataError(f"{what}{path!r} is not a regular file ({kind}); data and tile files "
                     "must be regular files")
