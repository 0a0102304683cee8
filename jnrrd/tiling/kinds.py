"""Axis kinds in the writer's layout decisions (docs/format.md#domain-axes).

Axes whose ``kinds`` entry is ``domain``, ``space``, ``time``, ``none``, ``???`` or absent are
*domain* axes; every other kind (vector, RGB colour, list, tensor, ...) marks a *non-domain*
axis. An integer tile (``tile=64`` and the default tile) tiles the domain axes only and is
capped at each axis length; pyramid levels never scale a non-domain axis; a level that repeats
an earlier level which already has one voxel on every downsampled axis is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import HeaderError, UnsupportedError
from ..policy import Policy
from .grid import TileGrid

__all__ = ["DOMAIN_KINDS", "axis_kinds", "cap_level_tiles", "cap_tile", "check_level_scales",
           "check_tile_caps", "domain_axes", "max_levels", "non_domain_scales"]

#: kind spellings (lower case, ``-`` as ``_``) of domain axes; ``None`` (absent) is one too
DOMAIN_KINDS = frozenset({"domain", "space", "time", "none", "???"})


def axis_kinds(header: Mapping[str, Any], ndim: int) -> tuple[str | None, ...]:
    """The header's ``kinds`` normalised (lower case, ``-`` as ``_``), ``None`` where absent.

    A ``kinds`` value of the wrong shape is left to the header checks (it reads as absent here).
    """
    kinds = header.get("kinds")
    if not isinstance(kinds, (list, tuple)) or len(kinds) != ndim:
        return (None,) * ndim
    return tuple(k.strip().lower().replace("-", "_") if isinstance(k, str) else None
                 for k in kinds)


def is_domain(kind: str | None) -> bool:
    """``True`` for a domain kind (or no kind at all)."""
    return kind is None or kind in DOMAIN_KINDS


def domain_axes(kinds: Sequence[str | None]) -> tuple[int, ...]:
    """The domain axes (header order)."""
    return tuple(a for a, k in enumerate(kinds) if is_domain(k))


def cap_tile(sizes: Sequence[int], axes: Sequence[int], shape: Sequence[int],
             overlap: Sequence[int]) -> tuple[int, ...]:
    """An integer tile capped at each axis length (kept above the halo, so that the overlap
    stays smaller than the tile)."""
    return tuple(min(t, max(shape[a], o + 1))
                 for t, a, o in zip(sizes, axes, overlap, strict=True))


def cap_level_tiles(sizes: Sequence[int], axes: Sequence[int], level_shapes: Sequence[
        Sequence[int]], overlap: Sequence[int]) -> list[tuple[int, ...]]:
    """Per-level tile sizes for an integer tile: capped at each level's axis lengths."""
    return [cap_tile(sizes, axes, shp, overlap) for shp in level_shapes]


def _describe(kinds: Sequence[str | None], a: int) -> str:
    return f"axis {a} (kind {kinds[a]!r})"


def max_levels(shape: Sequence[int], scaled: Sequence[int]) -> int:
    """How many levels ``levels=N`` (scales 1, 2, 4, ...) may ask for: level k is allowed while
    level k − 1 still has more than one voxel on some downsampled axis."""
    return 1 + max((shape[a].bit_length() - 1 for a in scaled), default=0)


def non_domain_scales(scales: Sequence[Sequence[int]], kinds: Sequence[str | None]
                      ) -> list[tuple[int, int, int]]:
    """``(level, axis, scale)`` wherever a level scales a non-domain axis."""
    return [(i, a, k) for i, s in enumerate(scales) for a, k in enumerate(s)
            if k != 1 and not is_domain(kinds[a])]


def check_level_scales(scales: Sequence[Sequence[int]], shape: Sequence[int],
                       kinds: Sequence[str | None], scaled: Sequence[int], field: str) -> None:
    """Refuse scales on non-domain axes and levels that repeat a one-voxel level.

    ``scaled`` lists the axes ``levels=N`` downsamples (the tiled domain axes); ``field`` names
    the argument or header field in messages.
    """
    for i, a, k in non_domain_scales(scales, kinds)[:1]:
        raise HeaderError(
            f"{field}: level {i} scales {_describe(kinds, a)} by {k}; a non-domain "
            "axis is never downsampled (docs/format.md#domain-axes), its scale must be 1")
    if len(scales) > 1 and not scaled:
        described = ", ".join(_describe(kinds, a) for a in range(len(kinds)))
        raise HeaderError(f"{field}: {len(scales)} levels need a tiled domain axis to "
                          f"downsample; found none ({described}); at most 1 level")
    for i in range(1, len(scales)):
        prev = [max(1, n // k) for n, k in zip(shape, scales[i - 1], strict=True)]
        if all(prev[a] == 1 for a in scaled):
            top = max_levels(shape, scaled)
            dims = "x".join(str(shape[a]) for a in scaled)
            raise HeaderError(
                f"{field}: level {i} would repeat level {i - 1}, which already has one voxel "
                f"on every downsampled axis ({dims} voxels on the tiled domain axes "
                f"{list(scaled)}); at most {top} level(s), scales 1 to {2 ** (top - 1)}")


def check_tile_caps(grids: Sequence[TileGrid], itemsize: int, field: str,
                    policy: Policy | None = None) -> None:
    """The reader's ``max_tiles``/``max_tile_bytes`` caps (default policy) on a planned layout,
    checked before anything is allocated: a file the writer writes opens under default caps."""
    policy = policy or Policy()
    if len(grids) > policy.max_levels:
        raise UnsupportedError(f"{field}: {len(grids)} levels exceed the readers' max_levels "
                               f"cap ({policy.max_levels})")
    total = 0
    for i, grid in enumerate(grids):
        total += grid.ntiles
        if total > policy.max_tiles:
            raise UnsupportedError(f"{field}: {total} tiles exceed the readers' max_tiles cap "
                                   f"({policy.max_tiles}); choose larger tiles")
        shape = grid.max_stored_shape()
        nbytes = itemsize
        for n in shape:
            nbytes *= n
        if nbytes > policy.max_tile_bytes:
            raise UnsupportedError(
                f"{field}: one level-{i} tile of shape {list(shape)} holds {nbytes} bytes, over "
                f"the readers' max_tile_bytes cap ({policy.max_tile_bytes}); choose smaller "
                "tiles")
