"""jnrrd: read and write JNRRD volumes (JSON-line headers, tiles, pyramids, codec stacks).

The public names below are imported on first use (PEP 562), so ``import jnrrd`` (and the
``jnrrd`` command's start, ``jnrrd --help``) costs only the error classes: the readers,
writers, web server, integrations and clinical readers load when a program first touches
them. ``from jnrrd import open`` and ``jnrrd.open`` work as with eager imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import (
    AddressError,
    ArgumentError,
    CodecError,
    DataError,
    FormatError,
    HeaderError,
    JnrrdError,
    JnrrdWarning,
    LockError,
    MissingDependencyError,
    NoSuchFileError,
    RemoteError,
    SecurityError,
    SelectionError,
    UnsupportedError,
    ValidationError,
    VersionError,
)

if TYPE_CHECKING:  # what the lazy names are, for type checkers and editors
    from ._config import config
    from .api import read, read_header
    from .clinical.sitk import from_sitk, to_sitk
    from .conversion import convert
    from .editing.entry import compact, create
    from .engine.volume import LevelView, Volume
    from .header import Header
    from .integrations.zarr_refs import kerchunk_refs
    from .opening import open
    from .policy import IOSettings, Policy
    from .storage import cleanup
    from .validation import Problem, validate
    from .web import serve
    from .world import WorldRegion
    from .writing.dispatch import write

__version__ = "0.1.0"

#: public name -> the module that defines it (imported on first use)
_LAZY = {
    "open": "opening", "read": "api", "read_header": "api",
    "from_sitk": "clinical.sitk", "to_sitk": "clinical.sitk",
    "config": "_config",
    "convert": "conversion",
    "compact": "editing.entry", "create": "editing.entry",
    "LevelView": "engine.volume", "Volume": "engine.volume",
    "Header": "header",
    "kerchunk_refs": "integrations.zarr_refs",
    "IOSettings": "policy", "Policy": "policy",
    "cleanup": "storage",
    "Problem": "validation", "validate": "validation",
    "serve": "web",
    "WorldRegion": "world",
    "write": "writing.dispatch",
}

__all__ = [
    "AddressError",
    "ArgumentError",
    "CodecError",
    "DataError",
    "FormatError",
    "Header",
    "HeaderError",
    "IOSettings",
    "JnrrdError",
    "JnrrdWarning",
    "LevelView",
    "LockError",
    "MissingDependencyError",
    "NoSuchFileError",
    "Policy",
    "Problem",
    "RemoteError",
    "SecurityError",
    "SelectionError",
    "UnsupportedError",
    "ValidationError",
    "VersionError",
    "Volume",
    "WorldRegion",
    "__version__",
    "cleanup",
    "compact",
    "config",
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


def __getattr__(name: str) -> Any:
    """A public name's object, or a submodule (``jnrrd.api``), imported on first use."""
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        globals()[name] = value  # later lookups skip this function
        return value
    if not name.startswith("_"):
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
