"""Downsampling kernels and streaming level computation for multi-resolution pyramids.

docs/format.md#level-scales-and-sizes (level sizes), docs/format.md#per-level-geometry (per-level
geometry, level quality, virtual levels) and docs/pyramids.md#methods ("Pyramid methods", defined on
the floor-cropped level 0); docs/format.md#stored-and-virtual-levels. Arrays are indexed like the
header's axes (``a.shape == sizes``; the last axis is the slowest in the file, so streaming goes in
slabs along it). This package works on NumPy arrays and callables only; it knows nothing of headers,
tile grids or files.

- :mod:`.methods` — the one list of downsampling methods (:data:`METHODS`), each with its kernel;
- :mod:`.blocks` — block geometry and the exact block reductions (average, max, min, mode);
- :mod:`.filters` — ``gaussian`` and ``lanczos`` with their halos;
- :mod:`.region` — whole levels and level regions from level 0;
- :mod:`.builder` — the single-pass, bounded-memory :class:`PyramidBuilder`;
- :mod:`.quality` — ``tile:level_quality`` and per-level geometry.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .blocks import level_shape
    from .builder import Piece, PyramidBuilder
    from .methods import METHODS
    from .quality import level_geometry, level_quality
    from .region import compute_region, downsample, source_region

#: the names below, imported from their modules on first use (so that importing one module of
#: the package, e.g. ``jnrrd.pyramid.methods`` for the list of methods, loads no other)
_LAZY = {"level_shape": "blocks", "Piece": "builder", "PyramidBuilder": "builder",
         "METHODS": "methods", "level_geometry": "quality", "level_quality": "quality",
         "compute_region": "region", "downsample": "region", "source_region": "region"}

__all__ = [
    "METHODS",
    "Piece",
    "PyramidBuilder",
    "compute_region",
    "downsample",
    "level_geometry",
    "level_quality",
    "level_shape",
    "source_region",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
