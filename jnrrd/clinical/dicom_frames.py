"""Enhanced (multi-frame) DICOM images → a volume: the functional groups say where each frame
is (``PlanePositionSequence``), how it is oriented (``PlaneOrientationSequence``), its pixel
spacing (``PixelMeasuresSequence``) and rescale (``PixelValueTransformationSequence``), per
frame or shared. Frames are then stacked like the images of a classic series
(:mod:`jnrrd.clinical.dicom_stack`); the pixel data is decoded once, on first read.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ..errors import UnsupportedError, where
from .dicom_scan import pixels, read_file
from .dicom_stack import orientation, stack_geometry
from .dicom_volume import ImageStack, rescale_plans, volume_header
from .loaded import Loaded

__all__ = ["FrameGroups", "read_multiframe"]


class FrameGroups:
    """Functional group attributes of each frame (per-frame, else shared)."""

    def __init__(self, ds: Any, path: str) -> None:
        self.path = path
        self.frames = int(getattr(ds, "NumberOfFrames", 1) or 1)
        per = getattr(ds, "PerFrameFunctionalGroupsSequence", None)
        shared = getattr(ds, "SharedFunctionalGroupsSequence", None)
        if per is not None and len(per) != self.frames:
            raise UnsupportedError(f"{where(path, 'PerFrameFunctionalGroupsSequence')}"
                                   f"{len(per)} items for {self.frames} frames")
        self.per = list(per) if per is not None else [None] * self.frames
        self.shared = shared[0] if shared else None

    def item(self, i: int, sequence: str) -> Any:
        """The first item of ``sequence`` for frame ``i`` (``None`` when absent)."""
        for group in (self.per[i], self.shared):
            seq = getattr(group, sequence, None) if group is not None else None
            if seq:
                return seq[0]
        return None

    def value(self, i: int, sequence: str, key: str) -> Any:
        item = self.item(i, sequence)
        return getattr(item, key, None) if item is not None else None

    def names(self) -> list[str]:
        """How messages name each frame."""
        return [f"{self.path} frame {i + 1}" for i in range(self.frames)]


def read_multiframe(path: str, *, resample: bool = False) -> Loaded:
    """An enhanced multi-frame image file as a volume."""
    ds = read_file(path)
    g = FrameGroups(ds, path)
    names = g.names()
    n = g.frames
    iop = orientation([g.value(i, "PlaneOrientationSequence", "ImageOrientationPatient")
                       or getattr(ds, "ImageOrientationPatient", None) for i in range(n)],
                      names, path)
    spacing = [g.value(i, "PixelMeasuresSequence", "PixelSpacing")
               or getattr(ds, "PixelSpacing", None) for i in range(n)]
    if any(s is None for s in spacing):
        raise UnsupportedError(f"{where(path, 'PixelSpacing')}missing for some frames")
    given = [[float(v) for v in s] for s in spacing if s is not None]
    ps = given[0]
    if any(np.max(np.abs(np.subtract(s, ps))) > 1e-4 for s in given):
        raise UnsupportedError(f"{where(path, 'PixelSpacing')}differs between frames: the "
                               "frames do not form one volume")
    positions = [g.value(i, "PlanePositionSequence", "ImagePositionPatient")
                 or (getattr(ds, "ImagePositionPatient", None) if n == 1 else None)
                 for i in range(n)]
    step = g.value(0, "PixelMeasuresSequence", "SpacingBetweenSlices") or g.value(
        0, "PixelMeasuresSequence", "SliceThickness")
    stack = stack_geometry(iop, ps, positions, names, resample=resample, source=path,
                           depth_step=float(step) if step else None)
    rescales = []
    for i in range(n):
        slope = g.value(i, "PixelValueTransformationSequence", "RescaleSlope")
        inter = g.value(i, "PixelValueTransformationSequence", "RescaleIntercept")
        if slope is None:
            slope, inter = getattr(ds, "RescaleSlope", None), getattr(ds, "RescaleIntercept",
                                                                      None)
        rescales.append((float(slope) if slope not in (None, "") else 1.0,
                         float(inter) if inter not in (None, "") else 0.0))
    plans = rescale_plans([ds] * n, names, rescales)
    frames = _Frames(path, n)
    data = ImageStack(frames.plane, plans, stack, ds)
    header = volume_header(stack, ds, data, {"frames": n})
    same = all(p is plans[0] for p in plans)
    codecs = plans[0].codecs if same and stack.resampling is None else None
    return Loaded(data, header, codecs, plans[0].padding_value if codecs else None,
                  close=frames.close)


class _Frames:
    """The file's frames, decoded once on first use (thread-safe)."""

    def __init__(self, path: str, count: int) -> None:
        self.path, self.count = path, count
        self._lock = threading.Lock()
        self._array: np.ndarray | None = None

    def plane(self, i: int) -> np.ndarray:
        with self._lock:
            if self._array is None:
                arr = pixels(read_file(self.path, pixels_too=True), self.path)
                self._array = arr[np.newaxis] if self.count == 1 else arr
            return self._array[i]

    def close(self) -> None:
        self._array = None
