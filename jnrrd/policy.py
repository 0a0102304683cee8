"""Reader policy: resource caps and the path/URL policy (digest §5, CONVENTIONS §1.1, §3).

Every reader takes the same ``**policy`` keywords; :meth:`Policy.from_kwargs` turns them into
one frozen value that is passed down, never stored in a module global.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import IO, Any, Literal

from .errors import DataError, SecurityError, UnsupportedError, where

__all__ = ["Policy", "is_url", "resolve_path"]

GiB = 1 << 30
MiB = 1 << 20

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_DRIVE = re.compile(r"^[A-Za-z]:")

Opener = Callable[[str, str], IO[bytes]]


@dataclass(frozen=True)
class Policy:
    """Caps and path rules for one read. All limits are configurable per call.

    ``max_bytes`` caps any single array allocation (decoded volume or level); ``max_tile_bytes``
    caps one stored tile's decoded size; ``max_header_bytes``/``max_line_bytes`` cap the header;
    ``max_tiles`` the tile count; ``max_files`` the number of data or tile files;
    ``max_levels`` the number of resolution levels (stored and virtual); ``max_pad``
    how far a ``[n]`` extension path may jump past the end of a list.
    """

    allow_absolute: bool = False
    allow_parent: bool = False
    allowed_roots: tuple[str, ...] = ()
    opener: Opener | None = None
    allow_duplicates: bool = False
    bfloat16: Literal["ml_dtypes", "float32", "uint16"] | None = None
    legacy_c_order: bool = False
    max_bytes: int = 16 * GiB
    max_header_bytes: int = 1 * GiB
    max_line_bytes: int = 256 * MiB
    max_tiles: int = 10**7
    max_tile_bytes: int = 1 * GiB
    max_files: int = 10**5
    max_levels: int = 1024
    max_pad: int = 65536
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_kwargs(cls, policy: Policy | None = None, /, **kwargs: Any) -> Policy:
        """Build a policy from reader keywords (unknown keywords raise ``TypeError``)."""
        names = {f.name for f in fields(cls)} - {"extra"}
        unknown = set(kwargs) - names
        if unknown:
            raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")
        if "allowed_roots" in kwargs and kwargs["allowed_roots"] is not None:
            kwargs["allowed_roots"] = tuple(
                os.path.realpath(os.fspath(r)) for r in _as_iter(kwargs["allowed_roots"])
            )
        elif "allowed_roots" in kwargs:
            kwargs["allowed_roots"] = ()
        if kwargs.get("bfloat16") not in (None, "ml_dtypes", "float32", "uint16"):
            raise ValueError("bfloat16 must be 'ml_dtypes', 'float32' or 'uint16'")
        base = policy if policy is not None else cls()
        if not kwargs:
            return base
        values = {f.name: getattr(base, f.name) for f in fields(cls)}
        values.update(kwargs)
        return cls(**values)

    def check_bytes(self, nbytes: int, what: str, source: Any = None) -> None:
        """Raise ``UnsupportedError`` when an allocation of ``nbytes`` exceeds ``max_bytes``."""
        if nbytes > self.max_bytes:
            raise UnsupportedError(
                f"{where(source)}{what} needs {nbytes} bytes, over the max_bytes cap "
                f"({self.max_bytes}); pass max_bytes=... to allow it"
            )


def _as_iter(value: Any) -> Iterable[Any]:
    if isinstance(value, (str, os.PathLike)):
        return (value,)
    return value


def is_url(path: str) -> bool:
    """True for ``scheme://...`` strings."""
    return bool(_URL.match(path))


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
    for a 200-byte header (digest §5, "Amplification through many files").
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
