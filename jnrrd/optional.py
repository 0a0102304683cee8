"""Optional packages, imported when a feature first needs them.

:func:`require` imports a module or raises :class:`~jnrrd.errors.MissingDependencyError`
naming the feature and the extra that installs it (``pip install "jnrrd[nifti]"``), so a
missing package is never a bare ``ModuleNotFoundError`` deep inside a call.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import MissingDependencyError

__all__ = ["require"]


def require(module: str, *, extra: str, feature: str, package: str | None = None
            ) -> ModuleType:
    """``import module``; on failure a ``MissingDependencyError`` saying that ``feature``
    needs ``package`` (default: the module's top-level name) from ``jnrrd[extra]``."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        name = package or module.split(".", 1)[0]
        raise MissingDependencyError(f"{feature} needs {name}, which is not installed: "
                                     f'pip install "jnrrd[{extra}]"') from e
