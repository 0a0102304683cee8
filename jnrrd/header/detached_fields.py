"""Detached data fields (docs/format.md#attached-and-detached-data): ``data_file``, ``data_files``
and ``data_file_pattern`` (with its printf-style format), checked into a
:class:`DataFilePattern` or plain names."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import HeaderError, UnsupportedError, where
from .checker import Checker

__all__ = ["DataFilePattern", "detached_fields"]

# docs/format.md#attached-and-detached-data: exactly one integer conversion; "%%" is a literal
# percent.
_PERCENT = re.compile(r"%(%|[-+ 0#]*([0-9]*)[diu])?")
_MAX_WIDTH = 64  # a "%999999999d" would build a gigabyte string (docs/security.md#caps)


@dataclass(frozen=True, slots=True)
class DataFilePattern:
    """``data_file_pattern`` (docs/format.md#attached-and-detached-data): files ``format % i`` for i
    = min, min+step, ..."""

    format: str
    min: int
    max: int
    step: int

    @property
    def count(self) -> int:
        """How many files the pattern names (``max`` need not be reached exactly)."""
        return (self.max - self.min) // self.step + 1

    def file_names(self, *, max_files: int | None = None, source: Any = None) -> list[str]:
        """The file names, in order; ``UnsupportedError`` when over ``max_files``."""
        if max_files is not None and self.count > max_files:
            raise UnsupportedError(
                f"{where(source, 'data_file_pattern')}names {self.count} files, over the "
                f"max_files cap ({max_files}); pass max_files=... to allow it"
            )
        # Safe: the format was checked to hold exactly one integer conversion and "%%".
        return [self.format % i for i in range(self.min, self.max + _sign(self.step), self.step)]


def _sign(x: int) -> int:
    return 1 if x > 0 else -1


def detached_fields(
    c: Checker, header: Mapping[str, Any]
) -> tuple[DataFilePattern | None, str | None, tuple[str, ...] | None]:
    """``(data_file_pattern, data_file, data_files)``: at most one of them is set."""
    given = [f for f in ("data_file", "data_files", "data_file_pattern") if f in header]
    if len(given) > 1:
        raise HeaderError(
            f"{where(c.source, given[1])}expected at most one of data_file, data_files, "
            f"data_file_pattern; found {', '.join(given)}"
        )
    data_file = None
    data_files = None
    pattern = None
    if "data_file" in header:
        data_file = c.string(header["data_file"], "data_file")
        if not data_file:
            raise c.fail("data_file", "a non-empty path", data_file)
    elif "data_files" in header:
        items = c.array(header["data_files"], "data_files", None, "paths")
        if not items:
            raise c.fail("data_files", "a non-empty list of paths", items)
        data_files = tuple(str(c.string(v, f"data_files[{i}]")) for i, v in enumerate(items))
        if not all(data_files):
            raise c.fail("data_files", "non-empty paths", list(data_files))
    elif "data_file_pattern" in header:
        pattern = _pattern(c, header["data_file_pattern"])
    return pattern, data_file, data_files


def _pattern(c: Checker, value: Any) -> DataFilePattern:
    field = "data_file_pattern"
    if not isinstance(value, Mapping):
        raise c.fail(field, "an object {format, min, max, step}", value)
    extra = sorted(set(value) - {"format", "min", "max", "step"})
    if extra:
        c.warn(field, f"unknown keys {extra} ignored")
    for key in ("format", "min", "max"):
        if key not in value:
            raise HeaderError(f"{where(c.source, f'{field}.{key}')}required key is missing")
    fmt = c.string(value["format"], f"{field}.format")
    assert fmt is not None
    conversions = 0
    for m in _PERCENT.finditer(fmt):
        spec = m.group(1)
        if spec is None:
            raise c.fail(f"{field}.format", "exactly one %d/%i/%u conversion ('%%' for %)", fmt)
        if spec != "%":
            conversions += 1
            if m.group(2) and int(m.group(2)) > _MAX_WIDTH:
                raise c.fail(f"{field}.format", f"a field width up to {_MAX_WIDTH}", fmt)
    if conversions != 1:
        raise c.fail(f"{field}.format", "exactly one %d/%i/%u conversion ('%%' for %)", fmt)
    lo = c.integer(value["min"], f"{field}.min")
    hi = c.integer(value["max"], f"{field}.max")
    if "step" in value:
        step = c.integer(value["step"], f"{field}.step")
    else:
        c.warn(f"{field}.step", "missing; assuming 1")
        step = 1
    if step == 0 or (hi > lo and step < 0) or (hi < lo and step > 0):
        sign = "positive " if hi > lo else "negative " if hi < lo else ""
        raise c.fail(f"{field}.step", f"a non-zero {sign}step from min {lo} to max {hi}", step)
    return DataFilePattern(format=fmt, min=lo, max=hi, step=step)
