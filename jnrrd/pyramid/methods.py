"""The downsampling methods (docs/pyramids.md#methods): the one list, each name next
to its kernel.

A method is a kernel that computes level voxels from a *local* part of the floor-cropped level
0, plus its reach: which level-0 rows an output row needs (the blocks under it, or more for a
filter with a halo). Whole levels, regions, virtual levels, Dask levels and the streaming
builder all compute through :func:`compute_local` and :func:`axis_source`; the builder also
cascades ``average`` (integers), ``max``, ``min`` and ``mode`` from finer levels where that is
provably identical (:mod:`.builder`), every other method is computed from level 0.

Adding a method: one entry in :data:`METHOD_DEFS` (and the enum of ``downsample_method`` in
``schemas/tile.schema.json``, which ``tests/test_extending.py`` compares with
:data:`METHODS`). The header parser, the writer's checks, the CLI's ``--downsample`` choices
and the Dask writer take their list from here.

The filtered kernels import :mod:`.filters` (and SciPy) only when they run, so that the
header layer can import this list without loading SciPy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import HeaderError, where
from . import blocks
from .mode import block_mode

__all__ = ["METHODS", "METHOD_DEFS", "Method", "axis_source", "check_method", "compute_local"]

#: ``kernel(x, scale, block, cropped, lo, bounds, dtype)``: level voxels of ``bounds`` (level
#: ``(start, stop)`` per axis) from ``x``, the level-0 voxels starting at ``lo`` (at least
#: :func:`axis_source` of the bounds); ``cropped`` is the floor-cropped level-0 shape.
Kernel = Callable[[np.ndarray, tuple[int, ...], tuple[int, ...], tuple[int, ...],
                   tuple[int, ...], tuple[tuple[int, int], ...], np.dtype], np.ndarray]
#: ``reach(n0, s, b, r0, r1)``: level-0 rows ``[lo, hi)`` of a cropped axis of length ``n0``
#: (scale ``s``, block ``b``) that level rows ``[r0, r1)`` (``r0 < r1``) need.
Reach = Callable[[int, int, int, int, int], tuple[int, int]]


@dataclass(frozen=True)
class Method:
    """One downsampling method: its kernel and, for filters with a halo, its reach."""

    kernel: Kernel
    #: None: the blocks under the rows (``[r0 * b, r1 * b)``), nothing more
    reach: Reach | None = None
    #: the kernel works on float64 copies of its input (memory estimates count 8 bytes)
    float_work: bool = False


def _average(x: np.ndarray, scale: tuple[int, ...], block: tuple[int, ...],
             cropped: tuple[int, ...], lo: tuple[int, ...],
             bounds: tuple[tuple[int, int], ...], dt: np.dtype) -> np.ndarray:
    if dt.kind in "iu":
        return blocks.finish_mean(blocks.block_sums(x, block, dt))
    return blocks.mean_float(x, block).astype(dt)


def _gaussian(x: np.ndarray, scale: tuple[int, ...], block: tuple[int, ...],
              cropped: tuple[int, ...], lo: tuple[int, ...],
              bounds: tuple[tuple[int, int], ...], dt: np.dtype) -> np.ndarray:
    from .filters import gaussian_region

    return blocks.round_to_dtype(gaussian_region(x, scale, block, lo, bounds, cropped), dt)


def _gaussian_reach(n0: int, s: int, b: int, r0: int, r1: int) -> tuple[int, int]:
    from .filters import gaussian_reach

    return gaussian_reach(n0, s, b, r0, r1)


def _lanczos(x: np.ndarray, scale: tuple[int, ...], block: tuple[int, ...],
             cropped: tuple[int, ...], lo: tuple[int, ...],
             bounds: tuple[tuple[int, int], ...], dt: np.dtype) -> np.ndarray:
    from .filters import lanczos_region

    return blocks.round_to_dtype(lanczos_region(x, scale, cropped, lo, bounds), dt)


def _lanczos_reach(n0: int, s: int, b: int, r0: int, r1: int) -> tuple[int, int]:
    from .filters import lanczos_reach

    return lanczos_reach(n0, s, b, r0, r1)


#: Every downsampling method, by name (docs/pyramids.md#methods), in the order the docs list them.
METHOD_DEFS: dict[str, Method] = {
    "average": Method(_average),
    "gaussian": Method(_gaussian, _gaussian_reach, float_work=True),
    "lanczos": Method(_lanczos, _lanczos_reach, float_work=True),
    "max": Method(lambda x, scale, block, *_: blocks.block_max(x, block)),
    "min": Method(lambda x, scale, block, *_: blocks.block_min(x, block)),
    "mode": Method(lambda x, scale, block, *_: block_mode(x, block)),
}

#: The names of :data:`METHOD_DEFS`: the values ``tile:downsample_method`` and
#: ``write(..., downsample=)`` accept.
METHODS: tuple[str, ...] = tuple(METHOD_DEFS)


def check_method(method: Any) -> str:
    """``method`` if it is one of :data:`METHODS`, else ``HeaderError``."""
    if method not in METHODS:
        raise HeaderError(f"{where(None, 'tile:downsample_method')}expected one of "
                          f"{', '.join(METHODS)}, found {method!r}")
    return method


def axis_source(method: str, n0: int, s: int, b: int, r0: int, r1: int) -> tuple[int, int]:
    """Level-0 rows ``[lo, hi)`` of the cropped axis (length ``n0``) for level rows [r0, r1)."""
    if r1 <= r0:
        return 0, 0
    reach = METHOD_DEFS[method].reach
    if reach is None:
        return r0 * b, r1 * b
    return reach(n0, s, b, r0, r1)


def compute_local(x: np.ndarray, scale: tuple[int, ...], block: tuple[int, ...],
                  cropped: tuple[int, ...], lo: tuple[int, ...],
                  bounds: tuple[tuple[int, int], ...], method: str, dt: np.dtype
                  ) -> np.ndarray:
    """Run ``method``'s kernel on the local level-0 array ``x`` (which starts at ``lo``)."""
    return METHOD_DEFS[method].kernel(x, scale, block, cropped, lo, bounds, dt)
