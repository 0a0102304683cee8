"""What a clinical reader (DICOM, NIfTI, SimpleITK) hands to :func:`jnrrd.convert`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Loaded", "Reversed"]


@dataclass
class Loaded:
    """A volume read from a clinical format.

    ``data`` is an array-like (``shape``, ``dtype``, NumPy slicing) in header axis order
    (axis 0 fastest, ``data.shape == header["sizes"]``); ``header`` holds JNRRD fields;
    ``codecs`` are array→array codecs (JSON) that store the format's own integers in a tiled
    JNRRD (the rescale pair of :mod:`jnrrd.clinical.rescale`), with ``padding_value`` the
    value they can carry; ``close`` releases the files.
    """

    data: Any
    header: dict[str, Any]
    codecs: list[dict[str, Any]] | None = None
    padding_value: Any = None
    close: Callable[[], None] = field(default=lambda: None)


class Reversed:
    """An array-like with the axes of ``data`` reversed (header order → C order), lazily."""

    def __init__(self, data: Any) -> None:
        self._data = data
        self.shape = tuple(int(n) for n in data.shape)[::-1]
        self.dtype = np.dtype(data.dtype)
        self.ndim = len(self.shape)

    def __getitem__(self, key: Any) -> np.ndarray:
        if not isinstance(key, tuple):
            key = (key,)
        if any(k is Ellipsis for k in key):
            i = next(j for j, k in enumerate(key) if k is Ellipsis)
            key = key[:i] + (slice(None),) * (self.ndim - len(key) + 1) + key[i + 1:]
        key = key + (slice(None),) * (self.ndim - len(key))
        if any(not isinstance(k, (slice, int, np.integer)) for k in key):
            raise TypeError("only integers, slices and ... index a reversed clinical volume")
        return np.asarray(self._data[key[::-1]]).T

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self[...]
        return out if dtype is None else out.astype(dtype, copy=False)
