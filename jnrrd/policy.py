"""Reader policy: resource caps and the path/URL switches (docs/security.md#path-policy, #caps).

Every reader takes the same ``**policy`` keywords; :meth:`Policy.from_kwargs` turns them into
one frozen value that is passed down, never stored in a module global. The path rules
themselves (confinement, regular files only) are applied by :mod:`jnrrd.storage.local`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import IO, Any, Literal

from .errors import UnsupportedError, where

__all__ = ["Policy"]

GiB = 1 << 30
MiB = 1 << 20

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
    #: remote reads (docs/remote.md): requests in flight per filesystem, the largest gap
    #: between two byte ranges fetched by one request, seconds one request may take in all,
    #: how often a 5xx answer or a dropped connection is retried (a timeout is not), seconds
    #: to connect and seconds an HTTP answer may stay silent, and where HTTP redirects may
    #: lead ("same-host": the same scheme, host and port; True: anywhere; False: nowhere)
    request_concurrency: int = 16
    coalesce_gap: int = 64 << 10
    request_timeout: float = 60.0
    request_retries: int = 2
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    follow_redirects: bool | Literal["same-host"] = "same-host"
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
        _check_remote_knobs(kwargs)
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


def _check_remote_knobs(kwargs: dict[str, Any]) -> None:
    """The remote-read keywords: positive counts and times (``ValueError`` otherwise)."""
    for name, low in (("request_concurrency", 1), ("coalesce_gap", 0), ("request_retries", 0)):
        v = kwargs.get(name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < low):
            raise ValueError(f"{name} must be an int >= {low}, got {v!r}")
    for name in ("request_timeout", "connect_timeout", "read_timeout"):
        t = kwargs.get(name)
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float))
                              or not 0 < t < float("inf")):
            raise ValueError(f"{name} must be a number of seconds > 0, got {t!r}")
    f = kwargs.get("follow_redirects", "same-host")
    if not (f is True or f is False or f == "same-host"):
        raise ValueError("follow_redirects must be True, False or 'same-host', got "
                         f"{kwargs['follow_redirects']!r}")


def _as_iter(value: Any) -> Iterable[Any]:
    if isinstance(value, (str, os.PathLike)):
        return (value,)
    return value
