"""Reader policy: the security caps and path/URL rules of one read (docs/security.md), and
the I/O settings it runs with (:class:`IOSettings`, docs/api.md "Configuration").

Every reader takes the same policy keywords; :func:`jnrrd._config.settings_for` turns them (over
the defaults of :data:`jnrrd.config`) into one frozen :class:`Policy` that is passed down,
never stored in a module global. The path rules themselves (confinement, regular files only)
are applied by :mod:`jnrrd.storage.local`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import IO, Any, Literal, TypedDict

from .errors import UnsupportedError, where

__all__ = ["IOSettings", "IOSettingsOptions", "Policy", "PolicyOptions", "SettingsOptions"]

GiB = 1 << 30
MiB = 1 << 20

Opener = Callable[[str, str], IO[bytes]]
Redirects = bool | Literal["same-host"]
#: the values of ``IOSettings.remote_backend`` (and of the ``backend`` storage option)
REMOTE_BACKENDS = ("auto", "fsspec", "obstore")


@dataclass(frozen=True)
class IOSettings:
    """How a call does its I/O (never what it may do: that is :class:`Policy`).

    ``threads``: threads that decode or encode tiles at once (``None``: the CPUs this process
    may use, its affinity mask and container quota); ``cache_bytes``: the decoded-tile cache
    of a volume (``None``: by storage kind, docs/api.md); for remote stores (docs/remote.md):
    ``request_concurrency`` requests in flight per filesystem, ``coalesce_gap`` the largest
    gap between two byte ranges one request may cover, ``request_timeout`` seconds one
    request may take in all, ``request_retries`` how often a 5xx answer or a dropped
    connection is retried (a timeout is not), ``connect_timeout`` seconds to connect and
    ``read_timeout`` seconds an HTTP answer may stay silent; ``remote_backend`` the client
    of remote reads (``"auto"``: obstore for ``s3://``, ``gs://`` and ``az://`` when it is
    installed and takes the ``storage_options``, else fsspec; ``"fsspec"`` or ``"obstore"``
    force one; HTTP goes through obstore only when it is forced and
    ``follow_redirects=True``; docs/remote.md, "Backends").
    """

    threads: int | None = None
    cache_bytes: int | None = None
    request_concurrency: int = 16
    coalesce_gap: int = 64 << 10
    request_timeout: float = 60.0
    request_retries: int = 2
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    remote_backend: Literal["auto", "fsspec", "obstore"] = "auto"

    def __post_init__(self) -> None:
        if self.remote_backend not in REMOTE_BACKENDS:
            raise ValueError("remote_backend must be 'auto', 'fsspec' or 'obstore', got "
                             f"{self.remote_backend!r}")
        for name, low in (("threads", 1), ("cache_bytes", 0)):
            v = getattr(self, name)
            if v is None:
                continue
            if isinstance(v, bool) or not hasattr(v, "__index__"):
                raise TypeError(f"{name} must be an int or None, got {type(v).__name__}")
            if v < low:
                raise ValueError(f"{name} must be >= {low} (or None), got {v}")
            object.__setattr__(self, name, int(v))  # a NumPy integer becomes an int
        for name, low in (("request_concurrency", 1), ("coalesce_gap", 0),
                          ("request_retries", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"{name} must be an int >= {low}, got {v!r}")
        for name in ("request_timeout", "connect_timeout", "read_timeout"):
            t = getattr(self, name)
            if (isinstance(t, bool) or not isinstance(t, (int, float))
                    or not 0 < t < float("inf")):
                raise ValueError(f"{name} must be a number of seconds > 0, got {t!r}")


@dataclass(frozen=True)
class Policy:
    """Caps and path rules for one read. All limits are configurable per call.

    ``max_bytes`` caps any single array allocation (decoded volume or level); ``max_tile_bytes``
    caps one stored tile's decoded size; ``max_header_bytes``/``max_line_bytes`` cap the header;
    ``max_tiles`` the tile count; ``max_files`` the number of data or tile files;
    ``max_levels`` the number of resolution levels (stored and virtual); ``max_pad``
    how far a ``[n]`` extension path may jump past the end of a list. ``follow_redirects``:
    where HTTP redirects may lead (``"same-host"``: the same scheme, host and port; ``True``:
    anywhere; ``False``: nowhere).

    :attr:`io` is the :class:`IOSettings` a reader runs with: set by the reader
    (:func:`jnrrd._config.settings_for`), not by the constructor (built-in defaults there).
    """

    allow_absolute: bool = False
    allow_parent: bool = False
    #: a remote key whose percent-escapes hide a '/', a '\\' or a '.'/'..' segment
    #: (storage.keys); refused unless this is true
    allow_encoded_keys: bool = False
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
    follow_redirects: Redirects = "same-host"
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    _io: IOSettings = field(default_factory=IOSettings, init=False, repr=False)

    def __post_init__(self) -> None:
        roots = self.allowed_roots
        if roots != ():  # one path or any iterable of paths (None: none), resolved
            object.__setattr__(self, "allowed_roots", () if roots is None else tuple(
                os.path.realpath(os.fspath(r)) for r in _as_iter(roots)))
        if self.bfloat16 not in (None, "ml_dtypes", "float32", "uint16"):
            raise ValueError("bfloat16 must be 'ml_dtypes', 'float32' or 'uint16'")
        f = self.follow_redirects
        if not (f is True or f is False or f == "same-host"):
            raise ValueError(f"follow_redirects must be True, False or 'same-host', got {f!r}")

    @property
    def io(self) -> IOSettings:
        """The I/O settings this policy's reader runs with."""
        return self._io

    def with_io(self, io: IOSettings) -> Policy:
        """This policy with ``io`` as its I/O settings."""
        new = dataclasses.replace(self)
        object.__setattr__(new, "_io", io)
        return new

    @classmethod
    def from_kwargs(cls, policy: Policy | None = None, /, **kwargs: Any) -> Policy:
        """``policy`` (default: the built-in one) with the fields in ``kwargs`` replaced;
        its I/O settings are kept. Unknown names raise ``TypeError``."""
        unknown = set(kwargs) - set(POLICY_FIELDS)
        if unknown:
            raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")
        base = policy if policy is not None else cls()
        if not kwargs:
            return base
        values = {name: getattr(base, name) for name in (*POLICY_FIELDS, "extra")}
        values.update(kwargs)
        return cls(**values).with_io(base.io)

    def check_bytes(self, nbytes: int, what: str, source: Any = None) -> None:
        """Raise ``UnsupportedError`` when an allocation of ``nbytes`` exceeds ``max_bytes``."""
        if nbytes > self.max_bytes:
            raise UnsupportedError(
                f"{where(source)}{what} needs {nbytes} bytes, over the max_bytes cap "
                f"({self.max_bytes}); pass max_bytes=... to allow it"
            )


#: the policy keywords every reader takes, by name (``Policy``'s fields)
POLICY_FIELDS: tuple[str, ...] = tuple(
    f.name for f in fields(Policy) if f.init and f.name != "extra")
#: the I/O settings, by name (``IOSettings``'s fields)
IO_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(IOSettings))


class PolicyOptions(TypedDict, total=False):
    """The policy keywords of every reader (``read``, ``open``, ``read_header``,
    ``validate``, ...): :class:`Policy`'s fields, by name. ``allowed_roots`` also takes one
    path or any iterable of paths."""

    allow_absolute: bool
    allow_parent: bool
    allow_encoded_keys: bool
    allowed_roots: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | None
    opener: Opener | None
    allow_duplicates: bool
    bfloat16: Literal["ml_dtypes", "float32", "uint16"] | None
    legacy_c_order: bool
    max_bytes: int
    max_header_bytes: int
    max_line_bytes: int
    max_tiles: int
    max_tile_bytes: int
    max_files: int
    max_levels: int
    max_pad: int
    follow_redirects: Redirects


class IOSettingsOptions(TypedDict, total=False):
    """:class:`IOSettings`'s fields, by name (``jnrrd.config(...)`` takes them)."""

    threads: int | None
    cache_bytes: int | None
    request_concurrency: int
    coalesce_gap: int
    request_timeout: float
    request_retries: int
    connect_timeout: float
    read_timeout: float
    remote_backend: Literal["auto", "fsspec", "obstore"]


def _as_iter(value: Any) -> Iterable[Any]:
    if isinstance(value, (str, os.PathLike)):
        return (value,)
    return value


class SettingsOptions(PolicyOptions, IOSettingsOptions, total=False):
    """Every setting by name: what ``jnrrd.config(...)`` and ``jnrrd.config.set(...)`` take."""
