"""jnrrd: read and write JNRRD volumes (JSON-line headers, tiles, pyramids, codec stacks)."""

from __future__ import annotations

from .api import read, read_header
from .clinical.sitk import from_sitk, to_sitk
from .conversion import convert
from .editing.entry import compact, create
from .engine.volume import LevelView, Volume
from .errors import (
    CodecError,
    DataError,
    FormatError,
    HeaderError,
    JnrrdError,
    JnrrdWarning,
    LockError,
    RemoteError,
    SecurityError,
    UnsupportedError,
    ValidationError,
    VersionError,
)
from .header import Header
from .integrations.zarr_refs import kerchunk_refs
from .opening import open
from .storage.leftovers import cleanup
from .validate import Problem, validate
from .web import serve
from .world import WorldRegion
from .writing.dispatch import write

__version__ = "0.1.0"

__all__ = [
    "CodecError",
    "DataError",
    "FormatError",
    "Header",
    "HeaderError",
    "JnrrdError",
    "JnrrdWarning",
    "LevelView",
    "LockError",
    "Problem",
    "RemoteError",
    "SecurityError",
    "UnsupportedError",
    "ValidationError",
    "VersionError",
    "Volume",
    "WorldRegion",
    "__version__",
    "cleanup",
    "compact",
    "convert",
    "create",
    "from_sitk",
    "kerchunk_refs",
    "open",
    "read",
    "read_header",
    "serve",
    "to_sitk",
    "validate",
    "write",
]
