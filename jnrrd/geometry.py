"""Per-level world geometry: origin, directions and the affine (docs/format.md#per-level-geometry,
docs/api.md#volumes).

With space fields, level 0 uses ``space_origin`` / ``space_directions``. Without them the
level-0 directions are the diagonal of ``spacings`` (1 where unknown) over all axes and the
origin is 0. Levels scale each direction by the axis scale and move the origin so sample
centres stay aligned (cell-centred axes), as :func:`jnrrd.pyramid.level_geometry` defines.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .pyramid.quality import level_geometry as _scaled

__all__ = ["level_geometry"]


def level_geometry(core: Any, scale: tuple[int, ...], *, for_affine: bool = False
                   ) -> tuple[np.ndarray | None, list[np.ndarray | None] | None]:
    """``(origin, directions)`` of a level; ``directions[d]`` is None for non-spatial axes.

    Without space fields, returns ``(None, None)`` unless ``for_affine`` asks for the
    spacing-based default frame.
    """
    ndim = len(core.sizes)
    if core.space_directions is not None:
        origin0 = core.space_origin
        if origin0 is None or any(v is None for v in origin0):
            sd = next(len(v) for v in core.space_directions if v is not None) if any(
                v is not None for v in core.space_directions) else 0
            origin0 = tuple(0.0 if origin0 is None or origin0[i] is None else origin0[i]
                            for i in range(sd))
        dirs0 = [None if v is None else tuple(0.0 if c is None else c for c in v)
                 for v in core.space_directions]
    elif for_affine:
        spacings = core.spacings or (None,) * ndim
        dirs0 = []
        for d in range(ndim):
            step = spacings[d]
            step = 1.0 if step is None or step != step else float(step)
            dirs0.append(tuple(step if j == d else 0.0 for j in range(ndim)))
        origin0 = (0.0,) * ndim
    else:
        return None, None
    origin, dirs = _scaled(scale, origin0, dirs0, core.centers)
    return (np.asarray(origin, dtype=np.float64) if origin is not None else None,
            [None if v is None else np.asarray(v, dtype=np.float64) for v in dirs])
