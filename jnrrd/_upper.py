"""Functions of the upper layers that a lower one offers as its own method.

``Volume.to_dask`` is an engine method whose body lives in :mod:`jnrrd.integrations.dask`. The
engine never imports integrations (docs/architecture.md, "Import rules"): it looks the function
up here by name, and the integration's module (and Dask) is imported on the first call, as
every public name of ``jnrrd`` is.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["upper"]

#: name -> (module under ``jnrrd``, function): the one list of such functions
_UPPER = {
    "volume_to_dask": ("integrations.dask", "volume_to_dask"),
}


def upper(name: str) -> Callable[..., Any]:
    """The function ``name`` of :data:`_UPPER`, its module imported on first use."""
    module, attr = _UPPER[name]
    function: Callable[..., Any] = getattr(importlib.import_module(f"jnrrd.{module}"), attr)
    return function
