"""Optional packages, imported when a feature first needs them.

:func:`require` imports a module or raises :class:`~jnrrd.errors.MissingDependencyError`
naming the feature, the package to install (``pip install nibabel``: a name pip finds on
PyPI) and jnrrd's extra that lists it (``nifti``, for an install from a jnrrd checkout:
``pip install -e ".[nifti]"``), so a missing package is never a bare
``ModuleNotFoundError`` deep inside a call.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import MissingDependencyError

__all__ = ["missing_message", "require"]


def require(module: str, *, extra: str, feature: str, package: str | None = None,
            pip: str | None = None) -> ModuleType:
    """``import module``; on failure a ``MissingDependencyError`` saying that ``feature``
    needs ``package`` (default: the module's top-level name), installed with ``pip install
    <pip>`` (default: ``package``), which jnrrd's ``extra`` lists."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependencyError(missing_message(
            package or module.split(".", 1)[0], extra=extra, feature=feature, pip=pip)) from e


def missing_message(package: str, *, extra: str, feature: str, pip: str | None = None) -> str:
    """The text of a :class:`MissingDependencyError`: what is missing, for what, and the
    install command (the package from PyPI; jnrrd's extra from a checkout)."""
    requirement = pip or package
    if any(c in requirement for c in "[<>= "):
        requirement = f"'{requirement}'"
    return (f"{package} is not installed (needed for {feature}): pip install {requirement} "
            f"(it is jnrrd's extra jnrrd[{extra}]: pip install -e '.[{extra}]' in a jnrrd "
            "checkout)")
