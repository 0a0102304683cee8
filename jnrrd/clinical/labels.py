"""Label maps: integer volumes whose values name segments, not intensities.

A label map stays one everywhere: its pyramid levels take the most frequent label
(``downsample="mode"``) instead of an average that would invent labels between two others,
napari opens it as a Labels layer, and OME-Zarr export writes it as an OME-Zarr label image.

**The marker** (docs/clinical.md#label-maps) is the ``label`` extension, declared with
:data:`LABEL_URI`::

    {"extensions": {"label": "https://jnrrd.org/extensions/label/v1.0.0"}}
    {"label:map": true}
    {"label:segments": [{"value": 1, "name": "liver", "color": [0.8, 0.4, 0.3]}]}

``label:map`` says yes or no explicitly; ``label:segments`` (optional) describes each label
value (``value`` an integer; ``name``, ``color`` as RGB in 0..1, ``description`` and any other
keys are kept as given). Without ``label:map``, :func:`is_label_map` also recognises an
integer volume by:

1. 3D Slicer segmentation fields (``Segmentation_MasterRepresentation``, ``Segment<N>_ID``,
   ``Segment<N>_LabelValue`` among the NRRD key/value pairs, or as plain header keys);
2. a ``mode`` pyramid (``tile:downsample_method``), which only label maps use;
3. a ``content`` field naming labels, a label map or a segmentation.

Readers of NIfTI (intent ``label``) and DICOM SEG set the marker; a caller sets it with
:func:`mark_label_map` (or by writing the fields) and clears it with ``{"label:map": false}``.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import HeaderError, JnrrdWarning, where
from ..header.model import LABEL_URI, LABEL_URI_PREFIX, TILE_URI_PREFIX, find_prefix

__all__ = ["LABEL_PREFIX", "LABEL_URI", "LABEL_URI_PREFIX", "default_downsample",
           "has_slicer_fields", "is_label_map", "label_flag", "label_prefix", "mark_label_map",
           "palette", "segments", "slicer_key_values", "slicer_segments", "slicer_segments_of",
           "warn_if_averaged"]

LABEL_PREFIX = "label"
_NRRD_URI_PREFIX = "https://jnrrd.org/extensions/nrrd/"

_CONTENT = re.compile(r"\b(labels?|label ?maps?|segmentations?)\b", re.IGNORECASE)
_SEGMENT_KEY = re.compile(r"Segment(\d+)_(\w+)")
_SLICER_MARKERS = ("Segmentation_MasterRepresentation",)
#: methods that compute new values between labels (max/min/mode pick existing ones)
_INVENTING = ("average", "gaussian", "lanczos")


def label_prefix(header: Mapping[str, Any]) -> str:
    """The prefix of the label extension: the one declared with :data:`LABEL_URI_PREFIX`,
    else ``label`` (the writer declares it under that name)."""
    return find_prefix(header, LABEL_URI_PREFIX) or LABEL_PREFIX


def label_flag(header: Mapping[str, Any], source: Any = None) -> bool | None:
    """``label:map`` as given (``True``/``False``), ``None`` when absent; anything else is a
    :class:`~jnrrd.errors.HeaderError`."""
    key = f"{label_prefix(header)}:map"
    value = header.get(key)
    if value is None or isinstance(value, bool):
        return value
    raise HeaderError(f"{where(source, key)}expected true or false, found {value!r}")


def _key_values(header: Mapping[str, Any]) -> dict[str, Any]:
    """The NRRD key/value pairs (``nrrd:key_values``) and plain unprefixed keys together."""
    prefix = find_prefix(header, _NRRD_URI_PREFIX) or "nrrd"
    kv = header.get(f"{prefix}:key_values")
    out = {k: v for k, v in header.items() if isinstance(k, str) and ":" not in k}
    if isinstance(kv, Mapping):
        out.update(kv)
    return out


def _is_slicer(kv: Mapping[str, Any]) -> bool:
    if any(k in kv for k in _SLICER_MARKERS):
        return True
    return any((m := _SEGMENT_KEY.fullmatch(k)) is not None and m.group(2) in (
        "ID", "LabelValue") for k in kv if isinstance(k, str))


def has_slicer_fields(header: Mapping[str, Any]) -> bool:
    """Whether the header holds 3D Slicer segmentation fields (key/value pairs or plain
    keys)."""
    return _is_slicer(_key_values(header))


def _integer(dtype: Any) -> bool:
    try:
        return np.dtype(dtype).kind in "iub"
    except TypeError:
        return False


def _type_of(header: Mapping[str, Any]) -> Any:
    from ..dtypes import TYPES, canonical_type

    t = header.get("type")
    if t is None:
        return None
    try:
        return TYPES.get(canonical_type(t))
    except (HeaderError, TypeError, KeyError):
        return None


def is_label_map(header: Mapping[str, Any], dtype: Any = None) -> bool:
    """True when ``header`` (with data of ``dtype``, else the header's ``type``) describes a
    label map (see the module docstring for the rules). Non-integer data is never one."""
    dtype = dtype if dtype is not None else _type_of(header)
    if dtype is None or not _integer(dtype):
        return False
    flag = label_flag(header)
    if flag is not None:
        return flag
    if has_slicer_fields(header):
        return True
    tile = find_prefix(header, TILE_URI_PREFIX) or "tile"
    if header.get(f"{tile}:downsample_method") == "mode":
        return True
    content = header.get("content")
    return isinstance(content, str) and bool(_CONTENT.search(content))


def default_downsample(header: Mapping[str, Any], dtype: Any) -> str:
    """The pyramid method when the caller names none: ``mode`` for a label map, else
    ``average``."""
    return "mode" if is_label_map(header, dtype) else "average"


def warn_if_averaged(header: Mapping[str, Any], dtype: Any, method: str, source: Any = None
                     ) -> None:
    """Warn when a label map is asked for a pyramid method that invents values."""
    if method in _INVENTING and is_label_map(header, dtype):
        warnings.warn(f"{where(source, 'downsample')}{method!r} on a label map computes values "
                      "between labels (new labels appear, small ones vanish); 'mode' keeps "
                      "the labels (the default for label maps)", JnrrdWarning, stacklevel=5)


def mark_label_map(header: Mapping[str, Any], segments: Sequence[Mapping[str, Any]] | None = None
                   ) -> dict[str, Any]:
    """A copy of ``header`` marked as a label map (``label:map: true``, the extension declared),
    with ``label:segments`` when ``segments`` are given."""
    out = dict(header)
    prefix = label_prefix(out)
    ext = dict(out.get("extensions") or {})
    ext.setdefault(prefix, LABEL_URI)
    out["extensions"] = ext
    out[f"{prefix}:map"] = True
    if segments is not None:
        out[f"{prefix}:segments"] = [dict(s) for s in segments]
    return out


def slicer_segments(kv: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``label:segments`` entries from 3D Slicer's ``Segment<N>_*`` key/value pairs (``value``
    from ``LabelValue``, ``name``, ``color``, ``id``, ``layer``), in segment order."""
    by_index: dict[int, dict[str, str]] = {}
    for k, v in kv.items():
        m = _SEGMENT_KEY.fullmatch(k) if isinstance(k, str) else None
        if m is not None and isinstance(v, str):
            by_index.setdefault(int(m.group(1)), {})[m.group(2)] = v
    out = []
    for i in sorted(by_index):
        f = by_index[i]
        seg: dict[str, Any] = {"value": _int(f.get("LabelValue"), i + 1)}
        if "Name" in f:
            seg["name"] = f["Name"]
        color = _floats(f.get("Color"))
        if color is not None and len(color) == 3:
            seg["color"] = color
        if "ID" in f:
            seg["id"] = f["ID"]
        if "Layer" in f:
            seg["layer"] = _int(f["Layer"], 0)
        out.append(seg)
    return out


def segments(header: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The segments of a label map: ``label:segments``, else those 3D Slicer's key/value pairs
    describe; ``[]`` when neither says."""
    given = header.get(f"{label_prefix(header)}:segments")
    if isinstance(given, list):
        return [dict(s) for s in given if isinstance(s, Mapping)]
    return slicer_segments(_key_values(header))


def slicer_key_values(header: Mapping[str, Any], shape: Sequence[int]) -> dict[str, str]:
    """3D Slicer's segmentation key/value pairs for ``label:segments`` (what a ``.seg.nrrd``
    needs for Slicer to load it as a segmentation); ``{}`` when the header already has Slicer
    fields or no segments. ``shape`` is the 3 spatial sizes (extent of every segment)."""
    if has_slicer_fields(header):
        return {}
    given = header.get(f"{label_prefix(header)}:segments")
    if not isinstance(given, list) or not given:
        return {}
    extent = " ".join(f"0 {int(n) - 1}" for n in shape)
    kv = {"Segmentation_MasterRepresentation": "Binary labelmap",
          "Segmentation_ContainedRepresentationNames": "Binary labelmap|",
          "Segmentation_ReferenceImageExtentOffset": "0 0 0"}
    for i, seg in enumerate(s for s in given if isinstance(s, Mapping)):
        value = int(seg["value"])
        color = seg.get("color") or palette(value)
        kv[f"Segment{i}_ID"] = str(seg.get("id") or f"Segment_{value}")
        kv[f"Segment{i}_Name"] = str(seg.get("name") or f"Segment_{value}")
        kv[f"Segment{i}_LabelValue"] = str(value)
        kv[f"Segment{i}_Layer"] = str(int(seg.get("layer", 0)))
        kv[f"Segment{i}_Color"] = " ".join(f"{float(c):.6g}" for c in color)
        kv[f"Segment{i}_Extent"] = extent
        kv[f"Segment{i}_Tags"] = "Segmentation.Status:inprogress|"
    return kv


def slicer_segments_of(data: Any, *, slab_bytes: int = 64 << 20) -> list[dict[str, Any]]:
    """One segment per non-zero value found in ``data`` (an array-like, read one slab along
    its last axis at a time): what a label map without ``label:segments`` gives 3D Slicer."""
    shape = tuple(int(n) for n in data.shape)
    n = shape[-1] if shape else 1
    row = max(1, np.dtype(data.dtype).itemsize * int(np.prod(shape[:-1])))
    step = max(1, slab_bytes // row)
    found: set[int] = set()
    for lo in range(0, n, step):
        found.update(int(v) for v in np.unique(np.asarray(data[..., lo:lo + step])))
    return [{"value": v, "name": f"Segment_{v}"} for v in sorted(found - {0})]


def palette(value: int) -> tuple[float, float, float]:
    """A stable colour per label value (golden-angle hues)."""
    import colorsys

    return colorsys.hsv_to_rgb((value * 0.618033988749895) % 1.0, 0.6, 0.9)


def _int(text: Any, default: int) -> int:
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return default


def _floats(text: Any) -> list[float] | None:
    if not isinstance(text, str):
        return None
    try:
        return [float(x) for x in text.split()]
    except ValueError:
        return None
