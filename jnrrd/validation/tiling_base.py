"""What the tiling checks share: the file facts (:class:`FileInfo`), the checker's state and
field access (:class:`TilingChecks`), and small helpers for reading lists and naming tiles."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..header.fields import CoreFields
from ..policy import Policy
from ..tiling.levels import Level
from .core import _int
from .report import Report, pointer

__all__ = ["FileInfo", "TilingChecks", "checked_ints", "describe_tile", "strip_field"]


@dataclass(frozen=True)
class FileInfo:
    """What is known about the file a header came from (all ``None`` for a bare mapping):
    ``store`` holds the header's directory (a local or remote store; ``None`` for a stream
    without a path)."""

    data_start: int | None = None
    file_size: int | None = None
    store: Any = None

    @property
    def header_dir(self) -> str | None:
        """The header's local directory, or ``None`` (remote, or no path)."""
        return None if self.store is None or getattr(self.store, "remote", False) \
            else self.store.root


def checked_ints(v: Any, minimum: int = 0) -> list[int] | None:
    """A list of integers >= ``minimum``, or ``None`` when ``v`` is not one."""
    if not isinstance(v, list):
        return None
    out = [_int(x) for x in v]
    if any(x is None or x < minimum for x in out):
        return None
    return out  # type: ignore[return-value]


def describe_tile(levels: tuple[Level, ...], index: int) -> str:
    """``"tile 5 (level 0, tile [1, 1, 0])"`` for a global stored-tile index."""
    for lv in levels:
        if lv.stored and lv.first <= index < lv.first + lv.grid.ntiles:
            coords = list(lv.grid.coords(index - lv.first))
            return f"tile {index} (level {lv.index}, tile {coords})"
    return f"tile {index}"


def strip_field(message: str, field: str) -> str:
    """A reader message without its leading ``field: `` (the Problem names the field)."""
    if field and message.startswith(field + ": "):
        return message[len(field) + 2:]
    return message.removeprefix(": ")



class TilingChecks:
    """The state of one header's tiling checks; ``self.levels`` is set once the geometry is
    sound. The checks themselves are mixed in (tables, files, geometry and codecs)."""

    def __init__(self, header: Mapping[str, Any], prefix: str, core: CoreFields | None,
                 policy: Policy, report: Report, info: FileInfo) -> None:
        self.h = header
        self.p = prefix + ":"
        self.core = core
        self.policy = policy
        self.r = report
        self.info = info
        self.levels: tuple[Level, ...] | None = None
        self.nstored: int | None = None

    def get(self, name: str, default: Any = None) -> Any:
        """The value of tiling field ``name``."""
        return self.h.get(self.p + name, default)

    def key(self, name: str, *path: Any) -> str:
        """The JSON pointer of tiling field ``name`` (and a path inside it)."""
        return pointer(self.p + name, *path)
