"""A write's target → the write store it goes through and its key there: a local path (or a
``file://`` URL) → :class:`~jnrrd.storage.writes.LocalWriteStore`, any other fsspec URL →
:class:`~jnrrd.storage.remote_writes.RemoteWriteStore` (``https://`` is read-only)."""

from __future__ import annotations

import os
from typing import Any

from . import WriteStore
from .remote import is_remote, local_path
from .remote_writes import remote_target
from .writes import target_store as local_target

__all__ = ["is_remote_target", "target_store"]


def is_remote_target(target: Any) -> bool:
    """Whether ``target`` is a URL written through fsspec (not a path or ``file://``)."""
    return is_remote(local_path(target))


def target_store(target: str | os.PathLike[str], storage_options: dict[str, Any] | None = None
                 ) -> tuple[WriteStore, str]:
    """The store a write to ``target`` goes through, and the target's key in it
    (``storage_options`` go to fsspec for a URL; for a path they are a ``TypeError``)."""
    target = local_path(os.fspath(target))
    if is_remote(target):
        return remote_target(target, storage_options)
    if storage_options:
        raise TypeError(f"storage_options= is for URLs (s3://, memory://, ...); {target!r} "
                        "is not one")
    return local_target(target)
