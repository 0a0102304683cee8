"""A remote object's version token, asked again: the check a Dask or xarray task makes that
the object behind a URL is still the one its graph was built from.

The token has the form the reader took at open (``RemoteReader.version``): over HTTP the
token of the :class:`~.validators.Validator` of a one-byte range request (ETag, else
Last-Modified, and size), elsewhere the filesystem's ``info`` (ETag, generation, ... and
size). :meth:`VersionCheck.start` sends the request at once, so it is in
flight while the task reads its tiles; :meth:`VersionCheck.result` waits for it.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from concurrent.futures import Future
from typing import Any

from .._threads import io_submit
from .remote import filesystem, make_fetcher, version_of
from .remote_fetch import Answer, Fetcher
from .validators import Validator

__all__ = ["VersionCheck"]

#: per process: one fetcher per re-opener (its filesystem, policy and connection limits)
_FETCHERS: dict[Any, tuple[Fetcher, str]] = {}
_LOCK = threading.Lock()


def _fetcher(reopen: Any) -> tuple[Fetcher, str]:
    with _LOCK:
        found = _FETCHERS.get(reopen)
    if found is None:
        policy = reopen.settings()
        fs, path = filesystem(reopen.path, reopen.storage_options, policy=policy)
        found = (make_fetcher(fs, policy), path)
        with _LOCK:
            found = _FETCHERS.setdefault(reopen, found)
    return found


def _fresh_info(fs: Any, path: str) -> dict[str, Any]:
    """``fs.info(path)`` asked of the store, not of a listing fsspec keeps (``dircache``)."""
    try:
        fs.invalidate_cache(path)
    except Exception:  # a filesystem without a cache
        pass
    info: dict[str, Any] = fs.info(path)
    return info


class VersionCheck:
    """A version request in flight for the URL of a re-opener (``api.Reopen``)."""

    def __init__(self, fetcher: Fetcher, path: str, url: str, future: Future[Any]) -> None:
        self.fetcher, self.path, self.url, self.future = fetcher, path, url, future

    @classmethod
    def start(cls, reopen: Any) -> VersionCheck:
        """Send the request for the object's current version now."""
        fetcher, path = _fetcher(reopen)
        url = reopen.path
        if fetcher.ranged_open:
            future: Future[Any] = fetcher.submit(path, 0, 1, url=url, exact=False)
        else:
            future = io_submit(_fresh_info, fetcher.filesystem(), path)
        return cls(fetcher, path, url, future)

    def result(self) -> Hashable:
        """The object's version now (``("missing",)`` when it is gone)."""
        try:
            if self.fetcher.ranged_open:
                answer: Answer = self.fetcher.wait(self.future, self.url, 0, 1)
                got = answer.validator or Validator()
                if answer.total is None:
                    info = self.fetcher.info(self.path, url=self.url)
                    got.check(info["validator"], self.url)
                    return got.with_size(info.get("size")).token()
                return got.with_size(answer.total).token()
            p = self.fetcher.policy
            return version_of(self.future.result(timeout=p.io.request_timeout + 5.0))
        except FileNotFoundError:
            return ("missing",)
