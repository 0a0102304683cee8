"""Space and per-axis fields (docs/format.md#core-fields, #types): ``space``/``space_dimension``,
origin, directions, measurement frame, space units, centers, kinds and per-axis strings, checked
against the dimension and the space dimension."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import HeaderError, where
from .checker import Checker, Number

__all__ = ["KIND_SIZES", "SPACES", "canonical_space", "check_centers", "check_kinds",
           "check_strings", "space_fields"]

#: canonical space name -> space dimension (docs/format.md#core-fields)
SPACES: dict[str, int] = {
    "right_anterior_superior": 3,
    "left_anterior_superior": 3,
    "left_posterior_superior": 3,
    "right_anterior_superior_time": 4,
    "left_anterior_superior_time": 4,
    "left_posterior_superior_time": 4,
    "scanner_xyz": 3,
    "scanner_xyz_time": 4,
    "3D_right_handed": 3,
    "3D_left_handed": 3,
    "3D_right_handed_time": 4,
    "3D_left_handed_time": 4,
}
_SPACE_LOOKUP: dict[str, str] = {
    **{name.lower(): name for name in SPACES},
    "ras": "right_anterior_superior",
    "las": "left_anterior_superior",
    "lps": "left_posterior_superior",
    "rast": "right_anterior_superior_time",
    "last": "left_anterior_superior_time",
    "lpst": "left_posterior_superior_time",
}

#: JNRRD kind -> the axis size it implies (None: any size), docs/format.md#core-fields and teem's
#: kind table
KIND_SIZES: dict[str, int | None] = {
    "domain": None,
    "space": None,
    "time": None,
    "list": None,
    "point": None,
    "vector": None,
    "covariant_vector": None,
    "normal": None,
    "stub": 1,
    "scalar": 1,
    "complex": 2,
    "2_vector": 2,
    "3_color": 3,
    "rgb_color": 3,
    "hsv_color": 3,
    "xyz_color": 3,
    "4_color": 4,
    "rgba_color": 4,
    "3_vector": 3,
    "3_gradient": 3,
    "3_normal": 3,
    "4_vector": 4,
    "quaternion": 4,
    "2d_symmetric_matrix": 3,
    "2d_masked_symmetric_matrix": 4,
    "2d_matrix": 4,
    "2d_masked_matrix": 5,
    "3d_symmetric_matrix": 6,
    "3d_masked_symmetric_matrix": 7,
    "3d_matrix": 9,
    "3d_masked_matrix": 10,
}

_UNKNOWN = frozenset({"???", "none"})


def canonical_space(space: Any) -> str | None:
    """The long underscore form of a ``space`` name (docs/format.md#core-fields: any case, ``-`` as
    ``_``, the short forms RAS, LPS, ...); ``None`` when ``space`` is not a known space name."""
    key = space.lower().replace("-", "_") if isinstance(space, str) else None
    return _SPACE_LOOKUP.get(key) if key is not None else None



def space_fields(c: Checker, get: Callable[[str], Any], dimension: int) -> tuple[
    str | None, int | None, tuple[Number, ...] | None,
    tuple[tuple[Number, ...] | None, ...] | None, tuple[tuple[Number, ...], ...] | None,
    tuple[str | None, ...] | None,
]:
    """(space, space_dimension, origin, directions, measurement frame, space units)."""
    space, sd = _space(c, get("space"), get("space_dimension"))
    sd = _infer_space_dimension(c, sd, get("space_origin"), get("space_directions"))
    space_origin = _vector(c, get("space_origin"), "space_origin", sd)
    space_directions = _directions(c, get("space_directions"), dimension, sd)
    frame = get("measurement_frame")
    measurement_frame = None
    if frame is not None:
        measurement_frame = tuple(
            _column(c, col, f"measurement_frame[{i}]", sd)
            for i, col in enumerate(
                c.array(frame, "measurement_frame", _need_sd(c, sd, "measurement_frame"),
                        "columns")
            )
        )
    space_units = check_strings(c, get("space_units"), "space_units", sd)
    return space, sd, space_origin, space_directions, measurement_frame, space_units

def _space(c: Checker, space: Any, sd_value: Any) -> tuple[str | None, int | None]:
    name = None
    sd = None
    if space is not None:
        name = canonical_space(space)
        if name is None:
            raise c.fail("space", "a space name such as 'right_anterior_superior' or 'RAS'", space)
        sd = SPACES[name]
    if sd_value is not None:
        given = c.integer(sd_value, "space_dimension", lo=1)
        if sd is not None and given != sd:
            raise c.fail("space_dimension", f"{sd} (the dimension of space {name!r})", given)
        sd = given
    return name, sd


def _infer_space_dimension(
    c: Checker, sd: int | None, origin: Any, directions: Any
) -> int | None:
    """Without ``space``/``space_dimension``, take sd from the origin or a direction (warn)."""
    if sd is not None:
        return sd
    candidates = [origin] if isinstance(origin, list | tuple) else []
    if isinstance(directions, list | tuple):
        candidates += [d for d in directions if isinstance(d, list | tuple) and d]
    if not candidates:
        return None
    sd = len(candidates[0])
    if sd == 0:
        return None
    c.warn("space_dimension", f"missing (and no space); inferred {sd} from the space vectors",
           depth=1)  # called through space_fields
    return sd


def _need_sd(c: Checker, sd: int | None, field: str) -> int:
    if sd is None:
        raise HeaderError(f"{where(c.source, field)}needs 'space' or 'space_dimension'")
    return sd


def _column(c: Checker, value: Any, field: str, sd: int | None) -> tuple[Number, ...]:
    """A measurement frame column: a vector, never null (the frame has no "none" columns)."""
    column = _vector(c, value, field, sd)
    if column is None:
        raise c.fail(field, f"an array of {sd} numbers", value)
    return column


def _vector(c: Checker, value: Any, field: str, sd: int | None) -> tuple[Number, ...] | None:
    if value is None:
        return None
    items = c.array(value, field, _need_sd(c, sd, field), "numbers")
    return tuple(c.number(v, f"{field}[{i}]") for i, v in enumerate(items))


def _directions(
    c: Checker, value: Any, dimension: int, sd: int | None
) -> tuple[tuple[Number, ...] | None, ...] | None:
    if value is None:
        return None
    out: list[tuple[Number, ...] | None] = []
    for i, v in enumerate(c.array(value, "space_directions", dimension, "vectors or nulls")):
        field = f"space_directions[{i}]"
        if isinstance(v, list | tuple) and len(v) == 0:
            c.warn(field, "[] read as null (a non-spatial axis)",
                   depth=1)  # called through space_fields
            v = None
        out.append(_vector(c, v, field, sd))
    return tuple(out)


def check_strings(
    c: Checker, value: Any, field: str, length: int | None
) -> tuple[str | None, ...] | None:
    """A per-axis (or per-space-axis) list of strings or nulls."""
    if value is None:
        return None
    if length is None:
        length = _need_sd(c, length, field)
    items = c.array(value, field, length, "strings")
    return tuple(c.string(v, f"{field}[{i}]", nullable=True) for i, v in enumerate(items))


def check_centers(c: Checker, value: Any, dimension: int) -> tuple[str | None, ...] | None:
    """``centers``: ``'cell'``, ``'node'`` or ``None`` (unknown) per axis."""
    if value is None:
        return None
    out: list[str | None] = []
    for i, v in enumerate(c.array(value, "centers", dimension, "centerings")):
        if v is not None and not isinstance(v, str):
            raise c.fail(f"centers[{i}]", "'cell', 'node' or null", v)
        key = v.lower() if isinstance(v, str) else v
        if v is None or key in _UNKNOWN:
            out.append(None)
        elif key in ("cell", "node"):
            out.append(key)
        else:
            raise c.fail(f"centers[{i}]", "'cell', 'node' or null", v)
    return tuple(out)


def check_kinds(c: Checker, value: Any, sizes: tuple[int, ...]) -> tuple[str | None, ...] | None:
    """``kinds``: canonical kind names (``None`` unknown); a size the kind contradicts warns."""
    if value is None:
        return None
    out: list[str | None] = []
    for i, v in enumerate(c.array(value, "kinds", len(sizes), "kinds")):
        if v is not None and not isinstance(v, str):
            raise c.fail(f"kinds[{i}]", "a kind name or null", v)
        key = v.lower().replace("-", "_") if v is not None else None
        if key is None or key in _UNKNOWN:
            out.append(None)
            continue
        if key not in KIND_SIZES:
            raise c.fail(f"kinds[{i}]", "a kind such as 'domain', 'space' or 'rgb_color'", v)
        expected = KIND_SIZES[key]
        if expected is not None and sizes[i] != expected:
            c.warn(f"kinds[{i}]", f"kind {key!r} implies size {expected}, axis has {sizes[i]}")
        out.append(key)
    return tuple(out)
