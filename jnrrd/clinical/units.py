"""Units of length and time as ITK counts them: millimetres and seconds.

SimpleITK images carry no units; ITK's readers give geometry in millimetres and time in
seconds (its NIfTI reader scales ``micron`` and ``msec`` so). :func:`to_mm` and
:func:`to_seconds` give the factor from a header's unit to those, ``None`` for a unit they do
not know (the caller passes the value unscaled and says so). docs/clinical.md#simpleitk.
"""

from __future__ import annotations

__all__ = ["to_mm", "to_seconds"]

_LENGTH = {"mm": 1.0, "millimeter": 1.0, "millimeters": 1.0, "millimetre": 1.0,
           "millimetres": 1.0, "m": 1000.0, "meter": 1000.0, "meters": 1000.0,
           "metre": 1000.0, "metres": 1000.0, "cm": 10.0, "centimeter": 10.0,
           "centimeters": 10.0, "um": 1e-3, "µm": 1e-3, "μm": 1e-3, "micron": 1e-3,
           "microns": 1e-3, "micrometer": 1e-3, "micrometers": 1e-3, "micrometre": 1e-3,
           "micrometres": 1e-3, "nm": 1e-6, "nanometer": 1e-6, "nanometers": 1e-6}
_TIME = {"s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0, "ms": 1e-3, "msec": 1e-3,
         "millisecond": 1e-3, "milliseconds": 1e-3, "us": 1e-6, "µs": 1e-6, "μs": 1e-6,
         "usec": 1e-6, "microsecond": 1e-6, "microseconds": 1e-6, "min": 60.0,
         "minute": 60.0, "minutes": 60.0, "h": 3600.0, "hour": 3600.0, "hours": 3600.0}


def _factor(table: dict[str, float], unit: str | None) -> float | None:
    if unit is None or not str(unit).strip():
        return 1.0  # no unit given: ITK's own
    return table.get(str(unit).strip().lower())


def to_mm(unit: str | None) -> float | None:
    """Millimetres per ``unit`` (1 when no unit is given; ``None`` when not a known length)."""
    return _factor(_LENGTH, unit)


def to_seconds(unit: str | None) -> float | None:
    """Seconds per ``unit`` (1 when no unit is given; ``None`` when not a known time)."""
    return _factor(_TIME, unit)
