"""Checked JSON values shared by the tiling fields: integers (integral floats accepted,
booleans not) and lists of them."""

from __future__ import annotations

from typing import Any

from ..errors import HeaderError

__all__ = ["int_list", "is_int"]


def is_int(v: Any) -> bool:
    """An int or an integral float, not a bool."""
    return isinstance(v, int) and not isinstance(v, bool) or (
        isinstance(v, float) and v.is_integer()
    )


def int_list(v: Any, key: str, pre: str, *, minimum: int = 0, length: int | None = None
              ) -> tuple[int, ...]:
    """A list of integers >= ``minimum`` (of ``length`` entries), else ``HeaderError``."""
    if not isinstance(v, list) or not all(is_int(x) and x >= minimum for x in v):
        raise HeaderError(f"{pre}{key}: expected a list of integers ≥ {minimum}, found {v!r:.200}")
    if length is not None and len(v) != length:
        raise HeaderError(f"{pre}{key}: expected {length} entries, found {len(v)}")
    return tuple(int(x) for x in v)
