"""jnrrd: read and write JNRRD volumes (JSON-line headers, tiles, pyramids, codec stacks)."""

from __future__ import annotations

from .errors import (
    CodecError,
    DataError,
    FormatError,
    HeaderError,
    JnrrdError,
    JnrrdWarning,
    SecurityError,
    UnsupportedError,
    ValidationError,
    VersionError,
)

__version__ = "0.1.0"

__all__ = [
    "CodecError",
    "DataError",
    "FormatError",
    "HeaderError",
    "JnrrdError",
    "JnrrdWarning",
    "SecurityError",
    "UnsupportedError",
    "ValidationError",
    "VersionError",
    "__version__",
]
