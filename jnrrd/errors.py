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
        ├── SelectionError         (also IndexError) an index, slice or level outside the volume
        ├── ArgumentError          a call's argument has a value the call does not take
        ├── NoSuchFileError        (also FileNotFoundError) no such local file
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
    "ArgumentError",
    "CodecError",
    "DataError",
    "FormatError",
    "HeaderError",
    "JnrrdError",
    "JnrrdWarning",
    "LockError",
    "MissingDependencyError",
    "NoSuchFileError",
    "ObjectNotFoundError",
    "RemoteError",
    "SecurityError",
    "SelectionError",
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


class SelectionError(JnrrdError, IndexError):
    """An index or selection that does not fit the volume: an index out of bounds, too many
    indices, a zero slice step, a boolean mask of the wrong shape, a pyramid level that does
    not exist. Also an ``IndexError``, as NumPy raises for these; the message names the file,
    the axis (or level), the value and the valid range."""


class ArgumentError(JnrrdError):
    """A call's argument has a value the call does not take (``index_order="X"``, a negative
    size, an array of the wrong shape); the message names the file, the argument and what
    was expected."""


class NoSuchFileError(FileNotFoundError, JnrrdError):
    """A local file to read does not exist: the builtin ``FileNotFoundError`` (with ``errno``
    and ``filename``) that is also a jnrrd error. A missing remote object is its sibling
    :class:`ObjectNotFoundError`; ``except FileNotFoundError`` catches both."""


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


def check_index_order(index_order: object, source: Any = None) -> str:
    """``index_order`` when it is ``"F"`` or ``"C"`` (docs/index-order.md); else an
    :class:`ArgumentError` naming ``source`` and the argument."""
    if index_order not in ("F", "C"):
        raise ArgumentError(f"{where(source, 'index_order')}expected 'F' or 'C' (axis 0 "
                            f"first, as in the file, or reversed), got {index_order!r:.80}")
    return index_order  # type: ignore[return-value]


def no_such_level(source: Any, level: Any, count: int) -> SelectionError:
    """The :class:`SelectionError` for a pyramid level outside ``0..count-1`` of ``source``
    (raised by ``vol.levels[k]``, ``read(level=)``, previews, the dask and xarray views)."""
    return SelectionError(f"{where(source, 'levels')}level {level} does not exist: the "
                          f"file has {count} level{'s' if count != 1 else ''} (0..{count - 1})")
