"""A write's target → the write store it goes through and its key there: a local path (or a
``file://`` URL) → :class:`~jnrrd.storage.writes.LocalWriteStore`, any other fsspec URL →
:class:`~jnrrd.storage.remote_writes.RemoteWriteStore` (``https://`` is read-only).

:func:`local_target` holds every write to a local path to the names a file system can take
(docs/security.md, "Write targets"): a NUL byte is a ``SecurityError``, a name too long for
the names a write makes beside it (its journal and temporary files: :data:`SUFFIX_BYTES`
bytes longer) is an ``UnsupportedError``, both before anything is created; an over-long name
the file system refuses during the write (a data file or tile directory named from the
target, a path past the system's limit) is the same ``UnsupportedError``, never a bare
``OSError``.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from typing import Any

from ..errors import SecurityError, UnsupportedError
from .protocols import WriteStore
from .urls import is_remote, local_path
from .writes import target_store as local_target_store

__all__ = ["SUFFIX_BYTES", "is_remote_target", "local_target", "target_store"]

#: how much longer than the target's name the names beside it get: the journal
#: ``.<name>.jnrrd-tmp-<8 hex>.pending`` (:mod:`jnrrd.storage.leftovers`)
SUFFIX_BYTES = len(".") + len(".jnrrd-tmp-") + 8 + len(".pending")
_NAME_MAX = 255  # where the system cannot say (Windows: 255 UTF-16 units per component)


def is_remote_target(target: Any) -> bool:
    """Whether ``target`` is a URL written through fsspec (not a path or ``file://``)."""
    return is_remote(local_path(target))


def target_store(target: str | os.PathLike[str], storage_options: dict[str, Any] | None = None
                 ) -> tuple[WriteStore, str]:
    """The store a write to ``target`` goes through, and the target's key in it
    (``storage_options`` go to fsspec for a URL; for a path they are a ``TypeError``)."""
    path: str = local_path(os.fspath(target))
    if is_remote(path):
        from .remote_writes import remote_target  # loaded by the first write to a URL

        return remote_target(path, storage_options)
    if storage_options:
        raise TypeError(f"storage_options= is for URLs (s3://, memory://, ...); {path!r} "
                        "is not one")
    return local_target_store(path)


def check_local_target(path: str) -> None:
    """``SecurityError`` for a path with a NUL byte, ``UnsupportedError`` for a name that the
    names a write makes beside it (:data:`SUFFIX_BYTES` longer) would not fit."""
    if "\0" in path:
        raise SecurityError(f"{path!r}: a path cannot contain a NUL byte")
    full = os.path.abspath(path)
    name = os.path.basename(full)
    try:
        size = len(os.fsencode(name))
    except UnicodeError:
        size = len(name.encode("utf-8", "surrogatepass"))
    limit = _name_max(os.path.dirname(full))
    if size + SUFFIX_BYTES > limit:
        raise UnsupportedError(
            f"{path}: the file name is {size} bytes; a write makes names up to "
            f"{SUFFIX_BYTES} bytes longer beside it (its journal and temporary files) and the "
            f"file system takes at most {limit}: use a name of at most "
            f"{limit - SUFFIX_BYTES} bytes")


def _name_max(directory: str) -> int:
    try:
        return int(os.pathconf(directory, "PC_NAME_MAX"))
    except (OSError, ValueError, AttributeError):  # no pathconf, or no such directory yet
        return _NAME_MAX


@contextlib.contextmanager
def local_target(target: Any) -> Iterator[None]:
    """Around a write to ``target``: a local path is checked first
    (:func:`check_local_target`), and a name the file system finds too long during the
    write (``ENAMETOOLONG``) becomes an ``UnsupportedError`` naming ``target``. URLs and
    file objects pass through unchanged."""
    if not isinstance(target, (str, os.PathLike)) or is_remote_target(os.fspath(target)):
        yield
        return
    path = os.fspath(target)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    check_local_target(local_path(path))
    try:
        yield
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        name = exc.filename if exc.filename not in (None, path) else None
        raise UnsupportedError(
            f"{path}: a name is too long for the file system"
            + (f" ({os.path.basename(os.fspath(name))!r}, made beside the target from its "
               "name)" if name is not None else "")
            + "; use a shorter target name") from None
