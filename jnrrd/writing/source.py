"""The data handed to a writer: any array-like seen in file axis order (:class:`FileOrder`),
the values the file stores (:func:`values`) and the dtype its tiles are encoded from
(:func:`tile_dtype`). Shared by the NumPy, NRRD and Dask writers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..dtypes import from_user, storage_dtype
from .layout import TilePlan

__all__ = ["FileOrder", "read_dtype", "tile_dtype", "values"]


class FileOrder:
    """An array-like seen in file axis order (axis 0 fastest), whatever the caller's order."""

    def __init__(self, data: Any, index_order: str) -> None:
        self.data = data
        self.c = index_order == "C"
        shape = tuple(int(n) for n in data.shape)
        self.shape = shape[::-1] if self.c else shape
        self.dtype = np.dtype(data.dtype)

    def __getitem__(self, key: tuple[slice, ...]) -> np.ndarray:
        if self.c:
            return np.asarray(self.data[key[::-1]]).T
        return np.asarray(self.data[key])


def tile_dtype(plan: TilePlan, data: FileOrder) -> np.dtype:
    """The dtype tiles are encoded from: the stored type in native byte order (``block``:
    the data's own)."""
    if plan.type_name == "block":
        return np.dtype(data.dtype)
    return storage_dtype(plan.type_name).newbyteorder("=")


def values(a: np.ndarray, type_name: str) -> np.ndarray:
    """Source data as the values the file stores (bfloat16 stays a float type: pyramids
    average values, not words)."""
    if type_name != "bfloat16":
        return from_user(a, type_name)
    if a.dtype.name == "bfloat16":
        return a
    from ..dtypes import has_ml_dtypes, to_user

    words = from_user(a, "bfloat16")  # round to bfloat16 once, then work on exact values
    return to_user(words, "bfloat16", "ml_dtypes" if has_ml_dtypes() else "float32")


def read_dtype(read0: Callable[[tuple[slice, ...]], np.ndarray], plan: TilePlan) -> np.dtype:
    """The dtype ``read0`` gives (one voxel read)."""
    key = tuple(slice(0, 1) for _ in plan.shape)
    return read0(key).dtype
