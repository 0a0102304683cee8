"""The obstore backend of remote reads: its choice, its options and its object names.

obstore is Rust's ``object_store`` client: requests and body reads run on its own threads,
outside the GIL. It reads ``s3://``, ``gs://`` and ``az://`` objects, and ``http(s)://``
objects when it can apply every rule of jnrrd's own HTTP client (docs/remote.md,
"Backends"):

- :func:`unusable_reason` says why obstore cannot read a URL with these options under a
  policy (``None``: it can). HTTP: obstore's client follows redirects by itself (up to 10, to
  any host) with no option to refuse them, so only ``follow_redirects=True`` allows it; a URL
  with a query, a fragment or an escaped ``/`` cannot be spelled as an obstore path. And
  obstore cannot run in a process forked after it ran in the parent (its runtime's threads
  are gone in the child).
- :func:`obstore_config` maps fsspec's ``storage_options`` names to obstore's
  (:data:`OPTION_NAMES`, docs/remote.md); obstore's own names (``aws_*``, ``google_*``,
  ``azure_*``, ``config``, ``client_options``) pass unchanged.
- :class:`ObstoreFS` names the objects of one bucket, container or host by URL (an object's
  path is its URL), makes obstore's store with the policy's timeouts (one per process and
  configuration; obstore's own retries off: the fetcher retries), lists, and gives the
  fsspec filesystem of the same URL and options for a forked child
  (:meth:`ObstoreFS.fallback`).

The requests are :class:`~.remote_obstore_fetch.ObstoreFetcher`'s.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import unquote, urlsplit

from ..errors import MissingDependencyError, RemoteError, UnsupportedError
from ..policy import Policy

__all__ = ["HTTP_SCHEMES", "OBSTORE_SCHEMES", "OPTION_NAMES", "ObstoreFS", "available",
           "forked", "obstore_config", "obstore_filesystem", "unusable_reason"]

#: the URL schemes this backend reads
OBSTORE_SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "http", "https")
HTTP_SCHEMES = ("http", "https")
#: ``(url, storage_options) -> (fsspec filesystem, path)``: :func:`~.remote.fsspec_filesystem`
Fsspec = Callable[[str, dict[str, Any]], tuple[Any, str]]
#: fsspec's ``storage_options`` names (s3fs, adlfs) → obstore's config keys, by store family
OPTION_NAMES = {
    "s3": {"key": "aws_access_key_id", "secret": "aws_secret_access_key",
           "token": "aws_session_token", "endpoint_url": "aws_endpoint",
           "region_name": "aws_region"},
    "az": {"account_name": "azure_storage_account_name",
           "account_key": "azure_storage_account_key", "sas_token": "azure_storage_sas_token"},
}
_NATIVE = {"s3": "aws_", "gs": "google_", "az": "azure_"}
_SKIP_SIGNATURE = {"s3": "aws_skip_signature", "gs": "google_skip_signature",
                   "az": "azure_skip_signature"}
_FAMILY = {"s3a": "s3", "gcs": "gs", "abfs": "az", "abfss": "az", "https": "http"}
_lock = threading.Lock()
#: obstore's stores of this process, by configuration; ``pid``: the process that made them
_stores: dict[str, Any] = {}
_runtime: dict[str, int] = {}
_FORKED = ("obstore ran in the process (pid {pid}) this one was forked from, and cannot make "
           "requests in a forked child; open the file in the child with "
           "remote_backend='fsspec', or start the child with the 'spawn' method")


def available() -> bool:
    """Whether obstore can be imported."""
    try:
        import obstore  # noqa: F401
    except ImportError:
        return False
    return True


def forked() -> bool:
    """Whether obstore ran in a process this one was forked from: its runtime's threads did
    not survive the fork, so its requests would never be answered here."""
    pid = _runtime.get("pid")
    return pid is not None and pid != os.getpid()


def _family(url: str) -> str:
    scheme = urlsplit(url).scheme.lower()
    return _FAMILY.get(scheme, scheme)


def unusable_reason(url: str, options: dict[str, Any], policy: Policy | None) -> str | None:
    """Why obstore cannot read ``url`` with ``options`` under ``policy`` (``None``: it can)."""
    scheme = urlsplit(url).scheme.lower()
    if scheme not in OBSTORE_SCHEMES:
        return f"the obstore backend reads {', '.join(OBSTORE_SCHEMES)} URLs, not {scheme}://"
    if forked():
        return _FORKED.format(pid=_runtime["pid"])
    if scheme in HTTP_SCHEMES:
        follow = policy.follow_redirects if policy is not None else "same-host"
        if follow is not True:
            return (f"obstore's HTTP client follows redirects to any host by itself, so "
                    f"follow_redirects={follow!r} cannot be applied by it (pass "
                    "follow_redirects=True to read HTTP through obstore)")
        parts = urlsplit(url)
        if parts.query or parts.fragment or "%2f" in parts.path.lower():
            return ("obstore names HTTP objects by path: a URL with a query, a fragment or "
                    "an escaped '/' cannot be spelled in it")
    try:
        obstore_config(url, options)
    except UnsupportedError as exc:
        return str(exc).removeprefix(f"{url}: ")
    return None


def obstore_config(url: str, options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(config, client_options)`` of obstore for fsspec-style ``options`` of ``url``
    (``UnsupportedError`` naming an option it cannot map)."""
    family = _family(url)
    config: dict[str, Any] = dict(_mapping(options.get("config"), "config", url))
    client = dict(_mapping(options.get("client_options"), "client_options", url))
    names = OPTION_NAMES.get(family, {})
    for name, value in options.items():
        if name in ("config", "client_options"):
            continue
        if family in _NATIVE and name.startswith(_NATIVE[family]):
            config[name] = value
        elif name in names:
            config[names[name]] = value
        elif name == "anon" and family in _SKIP_SIGNATURE:
            config[_SKIP_SIGNATURE[family]] = bool(value)
        elif name == "client_kwargs" and family == "s3" and set(
                _mapping(value, name, url)) <= {"region_name", "endpoint_url"}:
            config.update({names[k]: v for k, v in _mapping(value, name, url).items()})
        elif name == "headers" and family == "http":
            client["default_headers"] = {str(k): str(v)
                                         for k, v in _mapping(value, name, url).items()}
        else:
            raise UnsupportedError(f"{url}: storage option {name!r} has no obstore "
                                   "equivalent (docs/remote.md, \"Backends\"); pass its "
                                   "obstore name, or remote_backend='fsspec'")
    if family == "http":  # byte offsets of the object, never of a compressed form of it
        client["default_headers"] = {"Accept-Encoding": "identity",
                                     **client.get("default_headers", {})}
    if urlsplit(url).scheme.lower() == "http" or str(
            config.get("aws_endpoint", "")).startswith("http://"):
        client.setdefault("allow_http", True)
    return config, client


def _mapping(value: Any, name: str, url: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UnsupportedError(f"{url}: storage option {name!r}: obstore takes a dict, not "
                               f"{type(value).__name__}")
    return value


def obstore_filesystem(url: str, storage_options: dict[str, Any] | None, policy: Policy,
                       fsspec: Fsspec) -> tuple[ObstoreFS, str]:
    """The :class:`ObstoreFS` of ``url`` and the object's path (its URL);
    ``MissingDependencyError`` without obstore, ``UnsupportedError`` naming what it cannot
    do. ``fsspec`` makes the fsspec filesystem a forked child reads through instead."""
    if not available():
        raise MissingDependencyError(f"{url}: remote_backend='obstore' needs obstore: pip "
                                     "install 'jnrrd[obstore]'")
    options = dict(storage_options or {})
    reason = unusable_reason(url, options, policy)
    if reason is not None:
        raise UnsupportedError(f"{url}: {reason}")
    return ObstoreFS(url, options, policy, fsspec), url


class ObstoreFS:
    """The objects of one bucket, container or host, named by URL (an object's path is its
    URL); the little of fsspec's filesystem interface a :class:`~.remote.RemoteStore` uses."""

    #: the marker :func:`~.remote.make_fetcher` looks for
    obstore = True
    #: its requests are blocking calls, each waiting outside the GIL while obstore's runtime
    #: carries it (no event loop of ours)
    async_impl = False

    def __init__(self, url: str, options: dict[str, Any], policy: Policy, fsspec: Fsspec
                 ) -> None:
        parts = urlsplit(url)
        self.scheme = parts.scheme.lower()
        self.http = self.scheme in HTTP_SCHEMES
        self.base = f"{parts.scheme}://{parts.netloc}"
        self.protocol = (self.scheme,)
        self.storage_options = options
        self.config, self.client = obstore_config(url, options)
        io = policy.io
        self.client = {"connect_timeout": timedelta(seconds=io.connect_timeout),
                       "read_timeout": timedelta(seconds=io.read_timeout),
                       "timeout": timedelta(seconds=io.request_timeout), **self.client}
        self._fsspec = fsspec
        self._fallback: Any = None

    def unstrip_protocol(self, path: str) -> str:
        """The URL of a path (a URL, or the form :meth:`strip` gives)."""
        return path if "://" in path else f"{self.scheme}://{path}"

    def strip(self, url: str) -> str:
        """A URL without its scheme (``bucket/key``, as fsspec names S3 objects)."""
        return url.partition("://")[2] if "://" in url else url

    def key(self, path: str) -> str:
        """The object's key in the store: as written for object stores (their keys are
        literal); HTTP: the URL's path percent-decoded once (obstore encodes it again)."""
        if "://" not in path:  # the form :meth:`strip` gives: "bucket/key"
            rest = path.partition("/")[2]
        else:
            rest = path[len(self.base):] if path.startswith(self.base) else urlsplit(path).path
        rest = rest.lstrip("/")
        return unquote(rest) if self.http else rest

    def store(self) -> Any:
        """obstore's store for this base URL, options and timeouts (one per process)."""
        ident = repr((self.base, sorted(self.config.items()), sorted(self.client.items())))
        with _lock:
            if forked():  # the stores (and obstore's runtime) are the parent's
                raise RemoteError(f"{self.base}: " + _FORKED.format(pid=_runtime["pid"]))
            _runtime.setdefault("pid", os.getpid())
            found = _stores.get(ident)
            if found is None:
                from obstore.store import from_url

                kw: dict[str, Any] = {"client_options": self.client,
                                      "retry_config": {"max_retries": 0}}
                if self.config:
                    kw["config"] = self.config
                try:
                    found = from_url(self.base, **kw)
                except Exception as exc:  # obstore's configuration errors, named
                    raise RemoteError(f"{self.base}: obstore refused the configuration: "
                                      f"{str(exc).splitlines()[0]}") from None
                _stores[ident] = found
            return found

    def find(self, base: str) -> Iterator[str]:
        """The objects under ``base`` (a URL or a stripped path), in the form of
        :meth:`strip` (through :meth:`fallback` in a forked child)."""
        if forked():
            yield from self.fallback().find(self.unstrip_protocol(base))
            return
        import obstore

        prefix = self.key(base).rstrip("/")
        netloc = self.base.partition("://")[2]
        for batch in obstore.list(self.store(), prefix or None):
            for meta in batch:
                yield f"{netloc}/{meta['path']}"

    def fallback(self) -> Any:
        """The fsspec filesystem of the same URL and options: what a process forked after
        obstore ran reads through (:func:`forked`)."""
        if self._fallback is None:
            try:
                self._fallback = self._fsspec(self.base + "/", self.storage_options)[0]
            except MissingDependencyError as exc:
                raise RemoteError(f"{self.base}: obstore cannot make requests in a process "
                                  "forked after it ran, and the fsspec backend a forked "
                                  f"child reads through is missing ({exc})") from None
            except (TypeError, ValueError) as exc:
                raise RemoteError(f"{self.base}: obstore cannot make requests in a process "
                                  "forked after it ran, and fsspec does not take these "
                                  f"storage_options ({exc})") from None
        return self._fallback
