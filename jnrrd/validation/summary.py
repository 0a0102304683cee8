"""The text form of ``jnrrd validate``: one line per problem, except that many problems of
one table (a truncated file: every tile past its end) become one line naming the first few
entries and the count. ``--json`` keeps every problem."""

from __future__ import annotations

import re
from collections.abc import Sequence

from .report import Problem

__all__ = ["SHOWN", "text_lines"]

#: entries a summary line quotes; a group of more problems than this is summarized
SHOWN = 3
_INDEXED = re.compile(r"^(?P<base>.*?)/(?P<index>\d+)(?:/.*)?$")
_TILE_TABLES = ("offset_table", "size_table", "metadata", "files", "level_offsets")


def _group_key(p: Problem) -> tuple[str, str, bool, str]:
    """Problems of entries of one table group together; problems of one field only when
    their messages differ in numbers alone (e.g. one per missing external tile file)."""
    m = _INDEXED.match(p.field)
    if m:
        return p.severity, m.group("base"), True, ""
    return p.severity, p.field, False, re.sub(r"\d+", "#", p.message)


def text_lines(file: str, problems: Sequence[Problem]) -> list[str]:
    """``FILE: severity: field: message`` lines, groups summarized, then ``FILE: valid`` when
    no problem is an error."""
    groups: dict[tuple[str, str, bool, str], list[Problem]] = {}
    for p in problems:
        groups.setdefault(_group_key(p), []).append(p)
    lines: list[str] = []
    for (severity, base, indexed, _), group in groups.items():
        if len(group) <= SHOWN or not base:
            lines.extend(_line(file, p) for p in group)
        else:
            lines.append(_summary(file, severity, base, indexed, group))
    errors = sum(p.severity == "error" for p in problems)
    if not errors:
        warnings = sum(p.severity == "warning" for p in problems)
        lines.append(f"{file}: valid" + (f" ({warnings} warning{'s' * (warnings != 1)})"
                                         if warnings else ""))
    return lines


def _line(file: str, p: Problem) -> str:
    field = f"{p.field}: " if p.field else ""
    return f"{file}: {p.severity}: {field}{p.message}"


def _summary(file: str, severity: str, base: str, indexed: bool,
             group: Sequence[Problem]) -> str:
    plural = f"{severity}s" if len(group) != 1 else severity
    if indexed:
        entries = list(dict.fromkeys(int(_INDEXED.match(p.field).group("index"))  # type: ignore
                                     for p in group))
        noun = "tiles" if base.rsplit(":", 1)[-1] in _TILE_TABLES else "entries"
        shown = ", ".join(map(str, entries[:SHOWN]))
        if len(entries) > SHOWN:
            shown += f", ... {entries[-1]}"
        what = f"{len(entries)} {noun} with {plural} ({shown})"
    else:
        what = f"{len(group)} {plural}"
    return (f"{file}: {severity}: {base}: {what}; the first: {group[0].message} "
            "(--json lists every problem)")
