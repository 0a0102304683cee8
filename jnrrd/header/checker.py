"""The checker behind the core fields: one method per value shape (integer, number, string,
list), each raising ``HeaderError`` that names the file, the field and what was expected."""

from __future__ import annotations

import warnings
from typing import Any

from ..errors import HeaderError, JnrrdWarning, where

__all__ = ["INT64_LIMIT", "Checker", "Number"]

INT64_LIMIT = 2**63  # header integers lie in [-2**63, 2**63)

Number = float | None


class Checker:
    """Holds the source for messages; one method per value shape."""

    def __init__(self, source: Any) -> None:
        self.source = source

    def fail(self, field: str, expected: str, found: Any) -> HeaderError:
        """A ``HeaderError`` naming the field, what was expected and (shortened) what was found."""
        text = repr(found)
        if len(text) > 80:
            text = text[:77] + "..."
        return HeaderError(f"{where(self.source, field)}expected {expected}, found {text}")

    def warn(self, field: str, message: str, *, depth: int = 0) -> None:
        """Warn about ``field``. ``depth`` counts the extra helper frames between the check and
        the helpers :func:`~jnrrd.header.fields.core_fields` calls directly, so the warning
        points at the same caller wherever the check lives."""
        warnings.warn(f"{where(self.source, field)}{message}", JnrrdWarning,
                      stacklevel=4 + depth)

    def integer(self, value: Any, field: str, *, lo: int | None = None) -> int:
        """An int (integral floats accepted, booleans rejected: docs/format.md#core-fields) that
        fits a signed 64-bit integer, like every count, size and skip (so no arithmetic on it can
        reach NumPy or the OS out of range)."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(field, _int_text(lo), value)
        if isinstance(value, float):
            if not value.is_integer():
                raise self.fail(field, _int_text(lo), value)
            value = int(value)
        if (lo is not None and value < lo) or not -INT64_LIMIT <= value < INT64_LIMIT:
            raise self.fail(field, _int_text(lo) + " that fits 64 bits", value)
        return value

    def number(self, value: Any, field: str, *, nullable: bool = True) -> Number:
        """A float (``None`` for null when ``nullable``); ints beyond float range are refused."""
        if value is None and nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(field, "a number" + (" or null" if nullable else ""), value)
        try:
            return float(value)
        except OverflowError:  # an int beyond float range
            raise self.fail(field, "a number within float range", value) from None

    def string(self, value: Any, field: str, *, nullable: bool = False) -> str | None:
        """A string (``None`` for null when ``nullable``)."""
        if value is None and nullable:
            return None
        if not isinstance(value, str):
            raise self.fail(field, "a string" + (" or null" if nullable else ""), value)
        return value

    def array(self, value: Any, field: str, length: int | None, what: str) -> list[Any]:
        """A list (or tuple) of ``length`` entries (any length when ``None``)."""
        if not isinstance(value, list | tuple):
            raise self.fail(field, f"a list of {_len_text(length)}{what}", value)
        if length is not None and len(value) != length:
            raise self.fail(field, f"a list of {length} {what}, not {len(value)}", value)
        return list(value)


def _int_text(lo: int | None) -> str:
    return "an integer" if lo is None else f"an integer >= {lo}"


def _len_text(length: int | None) -> str:
    return "" if length is None else f"{length} "
