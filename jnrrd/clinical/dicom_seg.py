"""DICOM SEG → a label map with segment metadata.

Every frame of a BINARY segmentation is one segment's mask on one plane. The planes are
placed on a regular grid along the slice normal (``SpacingBetweenSlices`` when given, else the
smallest gap between planes), from the first plane with a mask to the last; a voxel takes the
``SegmentNumber`` of the segment whose mask covers it, 0 elsewhere. Segments that overlap are
refused (a label map holds one label per voxel), as are FRACTIONAL segmentations
(probabilities, not labels).

The header marks a label map (:func:`jnrrd.clinical.labels.mark_label_map`) whose
``label:segments`` hold, per segment, ``value``, ``name`` (SegmentLabel), ``description``,
``color`` (RecommendedDisplayCIELabValue as sRGB in 0..1), ``algorithm_type``,
``algorithm_name``, and the coded ``category`` and ``type`` (``{"code", "scheme",
"meaning"}``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import UnsupportedError, where
from .dicom_frames import FrameGroups
from .dicom_scan import pixels, read_file
from .dicom_stack import frame_axes, orientation
from .dicom_volume import DICOM_URI
from .labels import mark_label_map
from .loaded import Loaded

__all__ = ["lab_to_rgb", "read_seg"]

_TOL = 1e-3  # mm


def lab_to_rgb(lab: Any) -> list[float]:
    """DICOM's encoded CIELab (three 0..65535 values) as sRGB in 0..1 (D65 white)."""
    v = [float(x) for x in lab]
    L, a, b = v[0] * 100 / 65535, v[1] * 255 / 65535 - 128, v[2] * 255 / 65535 - 128
    fy = (L + 16) / 116
    f = np.array([fy + a / 500, fy, fy - b / 200])
    xyz = np.where(f**3 > 0.008856, f**3, (f - 16 / 116) / 7.787) * [0.95047, 1.0, 1.08883]
    m = np.array([[3.2406, -1.5372, -0.4986], [-0.9689, 1.8758, 0.0415],
                  [0.0557, -0.2040, 1.0570]])
    lin = m @ xyz
    rgb = np.where(lin <= 0.0031308, 12.92 * lin, 1.055 * np.abs(lin) ** (1 / 2.4) - 0.055)
    return [round(float(c), 6) for c in np.clip(rgb, 0.0, 1.0)]


def _code(seq: Any) -> dict[str, str] | None:
    if not seq:
        return None
    item = seq[0]
    return {"code": str(getattr(item, "CodeValue", "")),
            "scheme": str(getattr(item, "CodingSchemeDesignator", "")),
            "meaning": str(getattr(item, "CodeMeaning", ""))}


def _segments(ds: Any, path: str) -> list[dict[str, Any]]:
    out = []
    for item in getattr(ds, "SegmentSequence", None) or []:
        seg: dict[str, Any] = {"value": int(item.SegmentNumber),
                               "name": str(getattr(item, "SegmentLabel", "") or
                                           f"Segment_{int(item.SegmentNumber)}")}
        for key, name in (("SegmentDescription", "description"),
                          ("SegmentAlgorithmType", "algorithm_type"),
                          ("SegmentAlgorithmName", "algorithm_name")):
            if getattr(item, key, None):
                seg[name] = str(getattr(item, key))
        lab = getattr(item, "RecommendedDisplayCIELabValue", None)
        if lab is not None:
            seg["color"] = lab_to_rgb(lab)
        for key, name in (("SegmentedPropertyCategoryCodeSequence", "category"),
                          ("SegmentedPropertyTypeCodeSequence", "type")):
            code = _code(getattr(item, key, None))
            if code is not None:
                seg[name] = code
        out.append(seg)
    if not out:
        raise UnsupportedError(f"{where(path, 'SegmentSequence')}the SEG describes no segment")
    return out


def read_seg(path: str, *, resample: bool = False) -> Loaded:
    """A DICOM SEG file as a label map (see the module docstring)."""
    ds = read_file(path)
    kind = str(getattr(ds, "SegmentationType", "BINARY")).upper()
    if kind != "BINARY":
        raise UnsupportedError(f"{where(path, 'SegmentationType')}{kind} segmentations hold "
                               "probabilities or occupancy, not labels; only BINARY SEG "
                               "becomes a label map")
    if resample:
        raise UnsupportedError(f"{where(path)}resample=True: labels cannot be interpolated")
    segments = _segments(ds, path)
    g = FrameGroups(ds, path)
    names = g.names()
    n = g.frames
    iop = orientation([g.value(i, "PlaneOrientationSequence", "ImageOrientationPatient")
                       for i in range(n)], names, path)
    ps = [float(v) for v in g.value(0, "PixelMeasuresSequence", "PixelSpacing") or (1, 1)]
    positions = np.asarray([g.value(i, "PlanePositionSequence", "ImagePositionPatient")
                            for i in range(n)], dtype=np.float64).reshape(n, 3)
    seg_of = [g.value(i, "SegmentIdentificationSequence", "ReferencedSegmentNumber")
              for i in range(n)]
    row, col, normal = frame_axes(iop, path)
    dist = positions @ normal
    step = g.value(0, "PixelMeasuresSequence", "SpacingBetweenSlices")
    index, origin, depth, gap = _grid(dist, positions, normal,
                                      float(step) if step else None, path)
    frames = pixels(read_file(path, pixels_too=True), path)
    frames = frames[np.newaxis] if n == 1 else frames
    values = [s["value"] for s in segments]
    dtype = np.uint8 if max(values) <= 255 else np.uint16
    labels = np.zeros((int(ds.Columns), int(ds.Rows), depth), dtype=dtype, order="F")
    for i in range(n):
        if seg_of[i] is None or int(seg_of[i]) not in values:
            raise UnsupportedError(f"{where(names[i], 'ReferencedSegmentNumber')}"
                                   f"{seg_of[i]!r} is not a segment of the SEG")
        mask = frames[i].T != 0
        k, value = int(index[i]), int(seg_of[i])
        plane = labels[:, :, k]
        clash = plane[mask]
        clash = clash[(clash != 0) & (clash != value)]
        if clash.size:
            raise UnsupportedError(f"{where(path)}segments {int(clash[0])} and {value} overlap "
                                   f"on plane {k + 1} of {depth}: a label map holds one label "
                                   "per voxel")
        plane[mask] = value
    dirs = [[float(v) for v in row * ps[1]], [float(v) for v in col * ps[0]],
            [float(v) for v in normal * gap]]
    header: dict[str, Any] = {
        "space": "left_posterior_superior", "space_origin": [float(v) for v in origin],
        "space_directions": dirs, "space_units": ["mm"] * 3, "kinds": ["domain"] * 3,
        "extensions": {"dicom": DICOM_URI},
        "content": str(getattr(ds, "SeriesDescription", "") or "segmentation"),
        "dicom:series": {k: str(getattr(ds, a)) for a, k in (
            ("Modality", "modality"), ("SeriesInstanceUID", "series_uid"),
            ("StudyInstanceUID", "study_uid"), ("FrameOfReferenceUID", "frame_of_reference_uid"),
            ("SOPClassUID", "sop_class_uid")) if getattr(ds, a, None)},
    }
    return Loaded(labels, mark_label_map(header, segments))


def _grid(dist: np.ndarray, positions: np.ndarray, normal: np.ndarray, step: float | None,
          path: str) -> tuple[np.ndarray, np.ndarray, int, float]:
    """Each frame's plane index on a regular grid, the grid's origin, depth and step."""
    groups = np.round(dist / _TOL).astype(np.int64)
    planes = np.array([dist[groups == g].mean() for g in np.unique(groups)])
    if step is None or step <= 0:
        gaps = np.diff(planes)
        step = float(gaps.min()) if gaps.size else 1.0
    lo = float(planes.min())
    index = np.round((dist - lo) / step).astype(np.int64)
    if np.max(np.abs(lo + index * step - dist)) > max(_TOL, 1e-3 * step):
        raise UnsupportedError(f"{where(path, 'PlanePositionSequence')}the frames' positions "
                               f"do not lie on a grid of {step:.4f} mm along the slice normal")
    first = positions[int(np.argmin(dist))]
    origin = first - normal * (float(first @ normal) - lo)
    # frames of one plane must share the in-plane position (no shifted masks)
    for k in np.unique(index):
        at = positions[index == k]
        if np.max(np.abs(at - (origin + normal * step * k))) > max(_TOL, 1e-3 * step) * 10:
            raise UnsupportedError(f"{where(path, 'PlanePositionSequence')}frames on plane "
                                   f"{int(k) + 1} are shifted within the plane")
    return index, origin, int(index.max()) + 1, step
