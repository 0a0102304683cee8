"""DICOM → JNRRD fields and data through pydicom (``pip install pydicom``; the ``dicom`` extra).

A source is a folder (its files read recursively and grouped by SeriesInstanceUID:
:mod:`jnrrd.clinical.dicom_scan`; ``series=`` picks one) or one file. Classic series (one
image per file) and enhanced multi-frame objects (:mod:`jnrrd.clinical.dicom_frames`) become
volumes; a SEG object becomes a label map (:mod:`jnrrd.clinical.dicom_seg`).

- **Order and geometry**: :mod:`jnrrd.clinical.dicom_stack` (position along the slice normal,
  spacing checks, LPS ``space_directions``/``space_origin``, ``space_units`` mm).
- **Values**: ``RescaleSlope``/``RescaleIntercept`` applied as GDCM (and so SimpleITK) does:
  integer slope and intercept give integers of the smallest type holding the rescaled range of
  ``BitsStored``; others give float64. A tiled JNRRD keeps the stored integers through
  ``scale_offset`` + ``cast_value`` when that is exact (:mod:`jnrrd.clinical.rescale`). Images
  whose rescale differs from slice to slice give the smallest integer type holding every
  slice's values when all slopes and intercepts are integers, else float64; no codecs.
- **Colour** images (``SamplesPerPixel`` 3) get a first axis of kind ``RGB-color``.
- **Metadata**: ``content`` is the SeriesDescription; ``dicom:series`` keeps the UIDs,
  modality, description, manufacturer, rescale and window of the first slice (by position;
  a rescale that varies is listed per slice). No patient attributes are copied.

Pixel data is read when the writer asks for a slab: memory stays bounded by a slab of
images (a multi-frame file is decoded at once).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import UnsupportedError, where
from .dicom_scan import SEG_SOP_CLASS, Series, choose, fast_plane, pixels, read_file, scan
from .dicom_stack import orientation, stack_geometry
from .dicom_volume import ImageStack, number, rescale_plans, volume_header
from .loaded import Loaded

__all__ = ["read_dicom"]
def read_dicom(source: Any, *, series: str | None = None, resample: bool = False) -> Loaded:
    """Open a DICOM folder or file (see the module docstring)."""
    path = os.fspath(source)
    if os.path.isdir(path):
        chosen = choose(scan(path), series, path)
    else:
        ds = read_file(path)
        uid = str(getattr(ds, "SeriesInstanceUID", ""))
        if series is not None and series != uid:
            raise UnsupportedError(f"{where(path, 'series')}the file belongs to series {uid}, "
                                   f"not {series}")
        chosen = Series(uid, [path], [ds])
    first = chosen.datasets[0]
    if str(getattr(first, "SOPClassUID", "")) == SEG_SOP_CLASS:
        from .dicom_seg import read_seg

        if len(chosen.files) != 1:
            raise UnsupportedError(f"{where(path)}series {chosen.uid} holds "
                                   f"{len(chosen.files)} SEG objects; convert one file")
        return read_seg(chosen.files[0], resample=resample)
    if any(int(getattr(d, "NumberOfFrames", 1) or 1) > 1 or
           "PerFrameFunctionalGroupsSequence" in d for d in chosen.datasets):
        from .dicom_frames import read_multiframe

        if len(chosen.files) != 1:
            raise UnsupportedError(f"{where(path)}series {chosen.uid} holds "
                                   f"{len(chosen.files)} multi-frame objects; convert one file")
        return read_multiframe(chosen.files[0], resample=resample)
    return _classic(chosen, path, resample)


def _same(datasets: Sequence[Any], names: Sequence[str], keys: Sequence[str]) -> None:
    """Every image has the first image's value of each of ``keys``."""
    first = datasets[0]
    for key in keys:
        want = getattr(first, key, None)
        for ds, n in zip(datasets, names, strict=True):
            if getattr(ds, key, None) != want:
                raise UnsupportedError(f"{where(n, key)}{getattr(ds, key, None)!r} differs "
                                       f"from {want!r} ({names[0]}): the images do not form "
                                       "one volume")


def _classic(chosen: Series, source: str, resample: bool) -> Loaded:
    dss, names = chosen.datasets, chosen.files
    _same(dss, names, ("Rows", "Columns", "SamplesPerPixel", "BitsAllocated", "BitsStored",
                       "PixelRepresentation", "PhotometricInterpretation"))
    iop = orientation([getattr(d, "ImageOrientationPatient", None) for d in dss], names, source)
    spacing = _pixel_spacing(dss, names)
    first = dss[0]
    step = number(first, "SpacingBetweenSlices") or number(first, "SliceThickness")
    stack = stack_geometry(iop, spacing, [getattr(d, "ImagePositionPatient", None)
                                          for d in dss], names, resample=resample,
                           source=source, depth_step=step)
    plans = rescale_plans(dss, names)
    first = dss[stack.order[0]]  # the first slice (not the first file by name)

    def plane(i: int) -> np.ndarray:
        fast = fast_plane(dss[i], names[i], chosen.pixel_at[i] if chosen.pixel_at else None)
        return fast if fast is not None else pixels(read_file(names[i], pixels_too=True),
                                                    names[i])

    data = ImageStack(plane, plans, stack, first)
    header = volume_header(stack, first, data)
    same = all(p is plans[0] for p in plans)
    codecs = plans[0].codecs if same and stack.resampling is None else None
    return Loaded(data, header, codecs, plans[0].padding_value if codecs else None)


def _pixel_spacing(dss: Sequence[Any], names: Sequence[str]) -> list[float]:
    first = [float(v) for v in getattr(dss[0], "PixelSpacing", None) or [1.0, 1.0]]
    for ds, n in zip(dss, names, strict=True):
        got = [float(v) for v in getattr(ds, "PixelSpacing", None) or [1.0, 1.0]]
        if np.max(np.abs(np.subtract(got, first))) > 1e-4:
            raise UnsupportedError(f"{where(n, 'PixelSpacing')}{got} differs from {first} "
                                   f"({names[0]}): the images do not form one volume")
    return first
