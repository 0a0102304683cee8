"""Where an untiled file's data lives: its detached data files as keys of the header
directory's store (:func:`data_names`, :func:`data_paths`), opening one
(:func:`open_data`), and a mapped raw section copied out (:func:`copied`)."""

from __future__ import annotations

from typing import IO, Any

import numpy as np

from ..dtypes import to_user
from ..errors import DataError, HeaderError, UnsupportedError, where
from ..policy import Policy
from ..storage.local import open_resolved
from .prefault import populating
from .spare_maps import empty

__all__ = ["copied", "data_names", "data_paths", "open_data"]


def data_names(core: Any, policy: Policy, source: Any = None
               ) -> tuple[list[str], str] | None:
    """``(names, field)`` of the detached data files, in order, as the header names them
    (keys of the header directory's store); ``None`` for attached data."""
    names: list[str]
    if core.data_file is not None:
        names, field = [core.data_file], "data_file"
    elif core.data_files is not None:
        names, field = list(core.data_files), "data_files"
    elif core.data_file_pattern is not None:
        names = core.data_file_pattern.file_names(max_files=policy.max_files, source=source)
        field = "data_file_pattern"
    else:
        return None
    if len(names) > policy.max_files:
        raise UnsupportedError(f"{where(source, field)}{len(names)} files exceed the "
                               f"max_files cap ({policy.max_files})")
    if not names:
        raise HeaderError(f"{where(source, field)}names no data file")
    return names, field


def data_paths(core: Any, store: Any, policy: Policy, source: Any = None
               ) -> list[str] | None:
    """Detached data files, in order, resolved as keys of ``store`` (the header's directory, a
    local or remote store; ``None`` when the header came from a stream without a path).
    ``None`` for attached data."""
    found = data_names(core, policy, source)
    if found is None:
        return None
    names, field = found
    if store is None:
        raise UnsupportedError(f"{where(source, field)}detached data needs the header's path; "
                               "open the file by path, not through a file object")
    paths = [store.path(n, field=field) for n in names]
    if getattr(store, "remote", False):  # URLs, opened through the policy's opener
        paths = [store.url(p) for p in paths]
    return paths


def open_data(path: str, core: Any, policy: Policy, source: Any) -> IO[bytes]:
    """Open one detached data file; a missing one is a ``DataError`` naming the field (as a
    missing external tile is, CONVENTIONS §1.2)."""
    field = ("data_file" if core.data_file is not None
             else "data_files" if core.data_files is not None else "data_file_pattern")
    try:
        return open_resolved(path, policy, what=f"{where(source, field)}data file ")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
        raise DataError(f"{where(source, field)}data file {path!r} cannot be read: "
                        f"{exc.strerror or exc}") from None


def copied(mapped: np.ndarray, core: Any, policy: Policy, shape: tuple[int, ...]
            ) -> np.ndarray:
    """A mapped raw section copied into fresh memory (byte-swapped in place), user dtype."""
    flat = empty(mapped.shape, mapped.dtype)
    with populating(flat):
        np.copyto(flat, mapped)
    if core.type_name != "bfloat16" and not flat.dtype.isnative and flat.dtype.kind != "V":
        flat = flat.byteswap(inplace=True).view(flat.dtype.newbyteorder("="))
    return to_user(flat, core.type_name, policy.bfloat16).reshape(shape, order="F")
