"""What a preview shows: which axes, which level, how many pixels per axis.

Pure decisions on the header and the level shapes (no I/O), all in header axis order:

- **shown axes**: the first three domain axes (docs/format.md#domain-axes) that are not ``time`` and
  have more than one voxel; with fewer than two of those, time axes and then one-voxel axes
  fill up to two. Other domain axes are cut at their middle index.
- **colour**: the first ``RGB-color``/``RGBA-color`` axis with at least three entries is shown
  as colour (its first three entries); every other non-domain axis shows its first entry.
- **pixels**: one pixel size for every view, so the physical aspect holds: the longest
  physical extent among the shown axes gets ``size`` pixels. An axis's voxel side is the length
  of its ``space_directions`` vector, else ``|spacings|``, else 1 (level-0 values).
- **level**: the coarsest stored level that still has at least as many voxels as pixels on
  every shown axis (or all of level 0's voxels on an axis that gets more pixels than level 0
  has); virtual levels are skipped, since reading one reads level 0.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ArgumentError, JnrrdWarning, UnsupportedError, no_such_level, where
from ..tiling.kinds import axis_kinds, is_domain

__all__ = ["MAX_SIZE", "Plan", "choose_level", "make_plan", "pixels_for", "shown_axes",
           "voxel_sides"]

#: the largest ``size`` accepted (pixels on the longest side of a view)
MAX_SIZE = 8192
#: kinds shown as colour (normalised: lower case, ``-`` as ``_``)
COLOUR_KINDS = frozenset({"rgb_color", "rgba_color"})


@dataclass(frozen=True)
class Plan:
    """A preview's decisions (header axis order)."""

    level: int
    shown: tuple[int, ...]
    colour: int | None
    pixels: tuple[int, ...]


def shown_axes(kinds: Sequence[str | None], shape: Sequence[int]
               ) -> tuple[tuple[int, ...], int | None]:
    """``(shown axes, colour axis or None)`` for axis ``kinds`` and level-0 ``shape``."""
    domain = [a for a, k in enumerate(kinds) if is_domain(k)]
    if len(domain) < 2:
        raise UnsupportedError(
            f"preview: a picture needs two domain axes (space, time, domain or no kind); the "
            f"volume has {len(domain)} (shape {list(shape)}, kinds {list(kinds)})")
    shown = [a for a in domain if kinds[a] != "time" and shape[a] > 1][:3]
    for extra in ([a for a in domain if kinds[a] == "time" and shape[a] > 1]
                  + [a for a in domain if shape[a] <= 1]):
        if len(shown) >= 2:
            break
        if extra not in shown:
            shown.append(extra)
    colour = next((a for a, k in enumerate(kinds) if k in COLOUR_KINDS and shape[a] >= 3),
                  None)
    return tuple(sorted(shown)), colour


def voxel_sides(core: Any) -> tuple[float, ...]:
    """Each axis's level-0 voxel side length (1 where the header does not say, and where it
    says something that is no length: zero, NaN, infinite, or a vector whose length
    overflows; a :class:`~jnrrd.JnrrdWarning` names the field then)."""
    n = len(core.sizes)
    sides = [1.0] * n
    dirs = core.space_directions
    spacings = core.spacings
    for a in range(n):
        v, field = None, ""
        if dirs is not None and dirs[a] is not None:
            # hypot never overflows in between: |(1e308, 1e308)| is 1.4e308, not an error
            v, field = math.hypot(*(float(c) for c in dirs[a] if c is not None)), \
                "space_directions"
        elif spacings is not None and spacings[a] is not None:
            v, field = abs(float(spacings[a])), "spacings"
        if v is None:
            continue
        if math.isfinite(v) and v > 0:
            sides[a] = v
        else:
            warnings.warn(f"preview: {field} of axis {a} gives the voxel side {v!r}, not a "
                          "length: the preview takes 1 for it", JnrrdWarning, stacklevel=4)
    return tuple(sides)


def pixels_for(shape0: Sequence[int], sides: Sequence[float], shown: Sequence[int],
               size: int) -> tuple[int, ...]:
    """Pixels along each shown axis: the longest physical extent gets ``size``. Extents are
    compared relative to the longest voxel side, so no product overflows (sides of 1e308
    and 1e-308 give 1 pixel to the short axis, not an error)."""
    top = max(sides[a] for a in shown)
    extents = [shape0[a] * (sides[a] / top) for a in shown]
    longest = max(extents)
    return tuple(max(1, min(size, round(size * (e / longest)))) for e in extents)


def choose_level(shapes: Sequence[Sequence[int]], stored: Sequence[bool],
                 shown: Sequence[int], pixels: Sequence[int]) -> int:
    """The coarsest stored level with enough voxels on every shown axis (level 0 at least)."""
    best, best_voxels = 0, math.prod(shapes[0])
    for k, (shape, is_stored) in enumerate(zip(shapes, stored, strict=True)):
        if k == 0 or not is_stored:
            continue
        enough = all(shape[a] >= min(p, shapes[0][a]) for a, p in zip(shown, pixels,
                                                                      strict=True))
        if enough and math.prod(shape) < best_voxels:
            best, best_voxels = k, math.prod(shape)
    return best


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def make_plan(header: Mapping[str, Any], core: Any, shapes: Sequence[Sequence[int]],
              stored: Sequence[bool], size: int, level: int | None = None,
              source: Any = None) -> Plan:
    """The plan for a preview of ``size`` pixels (longest side of a view) from levels of
    ``shapes`` (header order); ``level`` forces a level; ``source`` names the file in errors.

    :class:`~jnrrd.errors.ArgumentError` for a size outside 1..``MAX_SIZE``;
    :class:`~jnrrd.errors.SelectionError` (an ``IndexError``) for a level that does not exist;
    :class:`~jnrrd.errors.UnsupportedError` for fewer than two domain axes."""
    if not _is_int(size) or not 1 <= size <= MAX_SIZE:
        raise ArgumentError(f"{where(source)}preview: size must be an integer from 1 to "
                            f"{MAX_SIZE}, got {size!r:.40}")
    if level is not None and (not _is_int(level) or not 0 <= level < len(shapes)):
        raise no_such_level(source, repr(level)[:40], len(shapes))
    size = int(size)
    level = None if level is None else int(level)
    shape0 = tuple(shapes[0])
    shown, colour = shown_axes(axis_kinds(header, len(shape0)), shape0)
    pixels = pixels_for(shape0, voxel_sides(core), shown, size)
    if level is None:
        level = choose_level(shapes, stored, shown, pixels)
    return Plan(level=level, shown=shown, colour=colour, pixels=pixels)
