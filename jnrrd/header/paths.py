"""Hierarchical extension paths (docs/format.md#hierarchical-extension-paths):
``prefix:name[0].child`` assignments.

Grammar (docs/format.md#hierarchical-extension-paths)::

    path := seg ( "." seg )*          seg  := name ( "[" index "]" )*
    name := 1*( any char except "." "[" "]" )     index := "0" | [1-9][0-9]*   (<= 9 digits)

Assignments of one header are applied in increasing depth (number of components), ties in line
order, so the more specific path always wins (docs/format.md#hierarchical-extension-paths).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

from ..errors import HeaderError, JnrrdWarning, where

__all__ = ["Assignment", "apply_assignments", "parse_path"]

_SEGMENT = re.compile(r"([^.\[\]]+)((?:\[(?:0|[1-9][0-9]{0,8})\])*)")
_INDEX = re.compile(r"\[([0-9]+)\]")

#: all padding nulls of one header together may not exceed this many times ``policy.max_pad``
#: (each line alone is capped by ``max_pad``; this bounds a header of many padding lines)
PAD_BUDGET_FACTOR = 16

Component = str | int


def parse_path(path: str) -> list[Component] | None:
    """Split a path into names and list indexes, or return ``None`` when it is invalid.

    >>> parse_path("creator[0].@type")
    ['creator', 0, '@type']
    """
    components: list[Component] = []
    for segment in path.split("."):
        match = _SEGMENT.fullmatch(segment)
        if match is None:
            return None
        components.append(match.group(1))
        components.extend(int(i) for i in _INDEX.findall(match.group(2)))
    return components


@dataclass(frozen=True, slots=True)
class Assignment:
    """One extension line: ``key`` is the full header key, ``prefix`` the text before ``:``."""

    key: str
    prefix: str
    components: tuple[Component, ...]
    value: Any
    lineno: int


def apply_assignments(
    target: MutableMapping[str, Any],
    assignments: list[Assignment],
    *,
    max_pad: int,
    source: Any = None,
) -> None:
    """Apply extension assignments to ``target`` under top-level keys ``"prefix:root"``.

    Rules (docs/format.md#hierarchical-extension-paths): missing containers are created (a list
    before an index, else an object); an index equal to the length appends, a larger one pads with
    ``null`` (at most ``max_pad`` per assignment, ``HeaderError`` beyond); descending into a value
    of the wrong kind replaces it with a fresh container (warn); a whole value replaces, never
    deep-merges.
    """
    budget = [PAD_BUDGET_FACTOR * max_pad]
    seen: set[tuple[Component, ...]] = set()
    # sorted() is stable: equal depths keep line order, so the later line wins
    # (docs/format.md#hierarchical-extension-paths).
    for a in sorted(assignments, key=lambda a: len(a.components)):
        top = f"{a.prefix}:{a.components[0]}"
        ident = (a.prefix, *a.components)
        if ident in seen:
            warnings.warn(
                f"{where(source, a.key)}repeated on line {a.lineno}; the last value wins",
                JnrrdWarning,
                stacklevel=3,
            )
        seen.add(ident)
        if len(a.components) == 1:
            target[top] = a.value
            continue
        parent: Any = target
        key: Component = top
        for comp in a.components[1:]:
            child = _get(parent, key)
            kind = list if isinstance(comp, int) else dict
            if not isinstance(child, kind):
                if child is not None:  # a padding null is simply filled in, silently
                    warnings.warn(
                        f"{where(source, a.key)}line {a.lineno} descends into a "
                        f"{type(child).__name__}; replaced by a new "
                        f"{'list' if kind is list else 'object'}",
                        JnrrdWarning,
                        stacklevel=3,
                    )
                child = kind()
                _set(parent, key, child, a, max_pad, budget, source)
            parent, key = child, comp
        _set(parent, key, a.value, a, max_pad, budget, source)


def _get(parent: Any, key: Component) -> Any:
    if isinstance(parent, list):
        assert isinstance(key, int)  # a list's component is an index (the grammar above)
        return parent[key] if key < len(parent) else None
    return parent.get(key)


def _set(
    parent: Any,
    key: Component,
    value: Any,
    a: Assignment,
    max_pad: int,
    budget: list[int],
    source: Any,
) -> None:
    if not isinstance(parent, list):
        parent[key] = value
        return
    assert isinstance(key, int)  # lists are only created for integer components
    n = len(parent)
    if key < n:
        parent[key] = value
        return
    pad = key - n
    if pad:
        if pad > max_pad or pad > budget[0]:
            limit = "max_pad" if pad > max_pad else f"{PAD_BUDGET_FACTOR} x max_pad per header"
            raise HeaderError(
                f"{where(source, a.key)}index [{key}] on line {a.lineno} would pad a list of "
                f"{n} with {pad} nulls, over the {limit} cap ({max_pad}); pass max_pad=... "
                "to allow it"
            )
        budget[0] -= pad
        parent.extend([None] * pad)
    parent.append(value)
