"""``Problem`` and the ``Report`` that collects them (docs/api.md#validation)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["MAX_PER_FIELD", "Problem", "Report", "json_value", "pointer", "top_field"]

Severity = Literal["error", "warning", "note"]

#: at most this many problems are listed for one field; the rest are counted in one more
#: problem, so a million-tile table with every offset wrong stays a readable report
MAX_PER_FIELD = 100


@dataclass(frozen=True)
class Problem:
    """One finding of :func:`jnrrd.validation.validate`.

    ``severity`` is ``"error"`` (the file cannot be read as written), ``"warning"`` (it reads,
    leniently) or ``"note"`` (informational). ``field`` is a header key (``"sizes"``,
    ``"tile:offset_table"``) or a JSON pointer into the header (``"/tile:offset_table/3"``);
    it is ``""`` for the file as a whole. ``found`` and ``expected`` are JSON-ready values.
    """

    severity: Severity
    field: str
    message: str
    found: Any = None
    expected: Any = None

    def to_json(self) -> dict[str, Any]:
        """The problem as a JSON object (docs/cli.md#validate ``--json``, without ``file``)."""
        return {
            "severity": self.severity,
            "field": self.field,
            "message": self.message,
            "found": self.found,
            "expected": self.expected,
        }


def pointer(key: str, *path: Any) -> str:
    """A JSON pointer (RFC 6901) to ``header[key][path...]``; the bare key when no path."""
    if not path:
        return key
    parts = [key, *map(str, path)]
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def top_field(field: str) -> str:
    """The header key a field or JSON pointer belongs to."""
    if field.startswith("/"):
        return field[1:].split("/", 1)[0].replace("~1", "/").replace("~0", "~")
    return field


def json_value(value: Any, *, limit: int = 20) -> Any:
    """``value`` made JSON-ready: tuples as lists, NumPy scalars as Python numbers, non-finite
    floats as their JSON-extension spelling, long lists shortened to ``limit`` entries."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, int):
        return int(value)
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:  # NumPy scalar
        return json_value(value.item(), limit=limit)
    if isinstance(value, Mapping):
        return {str(k): json_value(v, limit=limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
        items = list(value.tolist() if hasattr(value, "tolist") else value)
        out = [json_value(v, limit=limit) for v in items[:limit]]
        if len(items) > limit:
            out.append(f"... {len(items) - limit} more")
        return out
    return repr(value)


class Report:
    """Collects problems in the order found; caps how many are listed per field."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self._per_field: Counter[str] = Counter()
        self._dropped: Counter[tuple[Severity, str]] = Counter()
        self._seen: set[tuple[str, str, str]] = set()

    def add(self, severity: Severity, field: str, message: str, found: Any = None,
            expected: Any = None) -> None:
        """Record one problem (an exact repeat of an earlier one is dropped)."""
        key = (severity, field, message)
        if key in self._seen:
            return
        self._seen.add(key)
        top = top_field(field)
        self._per_field[top] += 1
        if self._per_field[top] > MAX_PER_FIELD:
            self._dropped[(severity, top)] += 1
            return
        self.problems.append(
            Problem(severity, field, message, json_value(found), json_value(expected))
        )

    def unlisted(self, severity: Severity, field: str, n: int) -> None:
        """Count ``n`` more problems of ``field`` that were found but not made one by one
        (they are summed up in :meth:`finish` with the ones the cap cut)."""
        if n > 0:
            top = top_field(field)
            self._per_field[top] += n
            self._dropped[(severity, top)] += n

    def error(self, field: str, message: str, found: Any = None, expected: Any = None) -> None:
        """Record an error: the file cannot be read as it is."""
        self.add("error", field, message, found, expected)

    def warning(self, field: str, message: str, found: Any = None,
                expected: Any = None) -> None:
        """Record a warning: the reader accepts it leniently."""
        self.add("warning", field, message, found, expected)

    def note(self, field: str, message: str, found: Any = None, expected: Any = None) -> None:
        """Record a note: informational only."""
        self.add("note", field, message, found, expected)

    def has_error(self, fields: Iterable[str] | None = None) -> bool:
        """True when an error was recorded (for one of ``fields`` when given)."""
        wanted = None if fields is None else set(fields)
        return any(
            p.severity == "error" and (wanted is None or top_field(p.field) in wanted)
            for p in self.problems
        ) or any(s == "error" and (wanted is None or f in wanted) for s, f in self._dropped)

    def has_any(self, field: str) -> bool:
        """True when any problem was recorded for the header key ``field``."""
        return self._per_field[field] > 0

    def finish(self) -> list[Problem]:
        """The problems, plus one summary problem per field whose list was cut short."""
        out = list(self.problems)
        for (severity, field), n in self._dropped.items():
            out.append(Problem(severity, field, f"{n} more problems of this kind not listed",
                               n, None))
        return out
