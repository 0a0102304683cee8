"""The padding value as each part of the library sees it (docs/format.md#tiling-fields).

A sparse tile reads back as the padding value, so the writer may omit a tile only when every
voxel of its core is *bit-identical* to the padding value in the stored type: ``-0.0`` is not
``0.0`` and a NaN with a payload is not the canonical NaN. bfloat16 padding is a float value,
rounded to a bfloat16 like data; the codec chain sees it as its 16-bit word.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["all_padding", "chain_fill", "value_fill"]


def value_fill(padding: Any, type_name: str) -> Any:
    """The padding value as the reader hands it out (``None`` is NaN; bfloat16 rounded)."""
    if type_name == "bfloat16":
        from ..dtypes import to_user

        words = np.array([chain_fill(padding, type_name)], dtype=np.uint16)
        return float(to_user(words, "bfloat16", "float32")[0])
    return np.nan if padding is None else padding


def chain_fill(padding: Any, type_name: str) -> Any:
    """The padding value as the codec chain sees it: bfloat16 as its 16-bit word."""
    if type_name != "bfloat16":
        return padding
    from ..dtypes import bfloat16_words

    return int(bfloat16_words([np.nan if padding is None else padding])[0])


def all_padding(core: np.ndarray, fill: Any) -> bool:
    """Whether every voxel of ``core`` has the bit pattern of ``fill`` in ``core``'s dtype."""
    dtype = core.dtype
    if dtype.kind in "biu":
        return bool((core == fill).all())
    if dtype.kind == "c":
        ref = complex(fill)
        return all_padding(core.real, ref.real) and all_padding(core.imag, 0.0)
    if dtype.type is np.void:  # block: padding bytes are 0x00
        return not np.ascontiguousarray(core).view(np.uint8).any()
    words = np.dtype(f"u{dtype.itemsize}")
    want = np.full((), fill, dtype=dtype).view(words)
    return bool((core.view(words) == want).all())
