"""The jnrrd error tree.

Every problem with a file, a header, a codec configuration or stored bytes surfaces as one of
these. Leaves also inherit the matching builtin, so ``except PermissionError`` or
``except LookupError`` keeps working for callers who think in those terms::

    ValueError
    └── JnrrdError
        ├── FormatError            not a JNRRD (or classic NRRD) file at all
        ├── VersionError           a JNRRD magic of a version this library does not read
        ├── HeaderError            malformed, missing or inconsistent header fields
        ├── DataError              stored bytes corrupt, short, oversized, or failing a checksum
        ├── CodecError             invalid codec configuration, or a value a codec cannot map
        │   └── UnknownCodecError      (also LookupError) no codec of that name
        ├── MissingDependencyError (also ImportError) a feature needs an optional package
        ├── UnsupportedError       valid, but not supported here (or over a resource cap)
        ├── LockError              another writer holds the volume (jnrrd.open(..., mode="r+"))
        ├── RemoteError            (also OSError) a remote store failed: status, body, timeout
        │   ├── ObjectNotFoundError    (also FileNotFoundError) no such remote object
        │   └── AccessDeniedError      (also PermissionError) the store refused access
        ├── SecurityError          (also PermissionError) blocked by the path/URL policy
        ├── AddressError           (also OSError) the web view cannot listen where asked
        └── ValidationError        raised by ``validate(..., strict=True)``

    UserWarning
    └── JnrrdWarning               lenient reads: defaults assumed, aliases accepted, ...

Messages name the file, the field and what was expected. Use :func:`where` to build the
common ``"<file>: <field>: "`` prefix.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = [
    "AccessDeniedError",
    "AddressError",
    "CodecError",
    "DataError",
    "FormatError",
    "HeaderError",
    "JnrrdError",
    "JnrrdWarning",
    "LockError",
    "MissingDependencyError",
    "ObjectNotFoundError",
    "RemoteError",
    "SecurityError",
    "UnknownCodecError",
    "UnsupportedError",
    "ValidationError",
    "VersionError",
]


class JnrrdError(ValueError):
    """Base class of every error this library raises on bad input."""


class FormatError(JnrrdError):
    """The source is not a JNRRD (or classic NRRD) file."""


class VersionError(JnrrdError):
    """The JNRRD magic names a version this library does not read."""


class HeaderError(JnrrdError):
    """A header field is malformed, missing, or inconsistent with another."""


class DataError(JnrrdError):
    """Stored bytes are corrupt, short, oversized, or fail a checksum."""


class CodecError(JnrrdError):
    """An invalid codec configuration, or a value the codec's rules cannot encode or decode."""


class UnknownCodecError(CodecError, LookupError):
    """No codec is registered under that name."""


class MissingDependencyError(JnrrdError, ImportError):
    """A feature (a format, a codec, an integration) needs an optional package that is not
    installed; the message names the package and the install command."""


class UnsupportedError(JnrrdError):
    """Valid, but not supported by this library, or over one of the configured caps."""


class LockError(JnrrdError):
    """Another writer holds the volume: a second ``jnrrd.open(..., mode="r+")`` or
    ``jnrrd.create`` of a held target, or a lock that was broken as stale while held."""


class RemoteError(JnrrdError, OSError):
    """A remote store failed: an HTTP status, a truncated body, a wrong range, a timeout.
    The message names the URL and the byte range."""


class ObjectNotFoundError(FileNotFoundError, RemoteError):
    """A remote object (a URL, an object store key) does not exist; also a
    ``FileNotFoundError``, as a missing local file is. (The builtin comes first so that
    ``ObjectNotFoundError(errno, message, url)`` fills ``errno`` and ``filename``.)"""


class AccessDeniedError(PermissionError, RemoteError):
    """A remote store refused the request (no permission); also a ``PermissionError``."""


class SecurityError(JnrrdError, PermissionError):
    """Blocked by the path/URL policy (absolute paths, ``..``, URLs, symlink escapes)."""


class AddressError(JnrrdError, OSError):
    """The web view (``jnrrd.serve``) cannot listen where asked: a port in use, an address
    that is not this machine's, a host name that does not resolve."""


class ValidationError(JnrrdError):
    """A header or file failed validation (raised only by ``validate(..., strict=True)``)."""

    def __init__(self, message: str, problems: list[Any] | None = None) -> None:
        super().__init__(message)
        self.problems = list(problems or [])


class JnrrdWarning(UserWarning):
    """A lenient read: a default assumed, an alias accepted, a field ignored."""


def where(source: Any = None, field: str | None = None) -> str:
    """Return the ``"<file>: <field>: "`` prefix used by error messages (parts may be absent)."""
    parts = []
    name = describe_source(source)
    if name:
        parts.append(name)
    if field:
        parts.append(field)
    return "".join(p + ": " for p in parts)


def describe_source(source: Any) -> str:
    """A short human name for a path or file object (empty when there is none)."""
    if source is None:
        return ""
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    name = getattr(source, "name", None)
    if isinstance(name, (str, os.PathLike)):
        return os.fspath(name)
    return f"<{type(source).__name__}>"
