"""A reader's ``source`` (a path, a binary file object) → the opened header stream, the store
of the directory its detached data and external tiles are named from, and its key there.

Paths are opened here (the caller owns the stream); a caller's stream is used as it is and
never closed. A stream whose ``name`` is an existing path gets its directory as a store; one
without (``BytesIO``, a socket) has none, and reading external tiles or detached data through
it fails with a message saying so. A URL string (``s3://``, ``https://``, ... any fsspec
protocol, with the caller's ``storage_options``) opens the remote object as a stream
(:mod:`.remote_stream`) and its "directory" as a :class:`~.remote.RemoteStore`; a
``file://`` URL is a local path.
"""

from __future__ import annotations

import builtins
import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, cast

from ..errors import NoSuchFileError
from ..policy import Policy
from .fileobj import stream_dir
from .local import LocalStore
from .urls import is_remote, local_path

if TYPE_CHECKING:  # the remote modules load when a URL is opened (:func:`_resolve_url`)
    from .remote import RemoteStore

__all__ = ["Opened", "named", "open_source", "opened"]


@dataclass
class Opened:
    """An opened source: ``stream`` at its start, ``store`` of the header's directory (or
    ``None``), ``key`` of the header file in it, ``path`` of the header file when it has one,
    ``name`` for messages (the source when it names a file), ``owned``: close ``stream``."""

    stream: IO[bytes]
    store: LocalStore | RemoteStore | None
    key: str | None
    path: str | None
    name: Any
    owned: bool

    @property
    def header_dir(self) -> str | None:
        """The header's local directory (the store's root), or ``None``."""
        return self.store.root if isinstance(self.store, LocalStore) else None

    @property
    def remote(self) -> bool:
        """Whether the source is a remote object (a URL)."""
        return bool(getattr(self.store, "remote", False))

    def close(self) -> None:
        """Close the stream when it was opened here."""
        if self.owned:
            self.stream.close()


def named(source: Any) -> bool:
    """Whether ``source`` names a file: a path, or a stream with a path-like ``name``."""
    return isinstance(source, (str, os.PathLike)) or isinstance(
        getattr(source, "name", None), (str, os.PathLike)
    )


def open_source(source: Any, policy: Policy, storage_options: dict[str, Any] | None = None
            ) -> Opened:
    """Open a path or URL (owned) or take a binary stream as it is (not owned)."""
    source = local_path(source)
    if is_remote(source):
        return _resolve_url(source, policy, storage_options)
    if storage_options:
        raise TypeError("storage_options= is for URLs (s3://, https://, ...); "
                        f"{source!r} is not one")
    name = source if named(source) else None
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        try:
            f = builtins.open(path, "rb")
        except FileNotFoundError as e:  # also a JnrrdError, as a missing remote object is
            raise NoSuchFileError(e.errno, e.strerror, path) from None
        root = os.path.dirname(os.path.abspath(path))
        return Opened(f, LocalStore(root, policy, source=name), os.path.basename(path), path,
                      name, True)
    if not hasattr(source, "read"):
        raise TypeError(f"source must be a path or a binary file object, not "
                        f"{type(source).__name__}")
    found = stream_dir(source)
    if found is None:
        return Opened(source, None, None, None, name, False)
    path = os.fspath(source.name)
    return Opened(source, LocalStore(found, policy, source=name), os.path.basename(path),
                  path, name, False)


def _resolve_url(url: str, policy: Policy, storage_options: dict[str, Any] | None
                 ) -> Opened:
    from .remote import RemoteReader, RemoteStore, filesystem, split_url
    from .remote_stream import RemoteStream

    fs, path = filesystem(url, storage_options, policy=policy)
    root, key = split_url(path, name_url=url)
    store = RemoteStore(fs, root, policy, source=url)
    stream = RemoteStream(store, key, RemoteReader(store.fetcher, path, url))
    return Opened(cast(IO[bytes], stream), store, key, None, url, True)


@contextlib.contextmanager
def opened(source: Any, policy: Policy, storage_options: dict[str, Any] | None = None
           ) -> Iterator[Opened]:
    """:func:`open_source` as a context manager (an opened path is closed on exit)."""
    src = open_source(source, policy, storage_options)
    try:
        yield src
    finally:
        src.close()
