"""SimpleITK images ⇄ JNRRD (``pip install SimpleITK``; the ``itk`` extra).

:func:`to_sitk` gives a level of a volume as a ``SimpleITK.Image``; :func:`from_sitk` gives
``(data, header)`` for :func:`jnrrd.write`. ITK works in LPS millimetres and seconds:

- **Axes**: ITK image axes are the header's spatial axes (those with a ``space_directions``
  vector; every domain axis of a file without space fields) in header order, then a ``time``
  axis (a 4-D image); one non-domain axis (vector, RGB, list, ...) becomes the pixel's
  components (a vector image), and comes back as a first axis of kind ``vector``.
- **Geometry**: ITK ``spacing`` is each direction's length, ``direction`` the unit directions
  (columns), ``origin`` the level's origin; a ``right_anterior_superior`` (or
  ``left_anterior_superior``) file is turned to LPS. A time axis's ``spacings`` is its spacing
  and its ``axis_mins`` (the first sample's time) its origin. Back, ``space_directions`` =
  direction columns × spacing, ``space: left_posterior_superior`` for 3-D images (2-D images
  get a 2-D space without a name); a 4-D image whose fourth axis is apart from the others is
  3-D space plus a ``time`` axis (``axis_mins`` = its origin when not 0).
- **Units**: images carry none; ITK's readers give millimetres and seconds (its NIfTI reader
  scales ``micron`` and ``msec``), so :func:`to_sitk` scales known length units
  (``space_units``, or ``units`` without space fields) to millimetres and time units to
  seconds, warning about units it does not know (passed unscaled); :func:`from_sitk` says
  ``mm`` (3-D) and ``s``.
- **Label maps**: a LabelMap pixel type (``sitkLabelUInt8``...) comes through
  ``LabelMapToLabel`` as its label image, marked as a label map (SimpleITK cannot hand a
  LabelMap's pixels to NumPy).
- **Metadata**: the NRRD key/value pairs (3D Slicer segment fields among them) become the
  image's metadata dictionary, and image metadata other than ITK's own ``ITK_``/``NRRD_``
  keys comes back as key/value pairs.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import FormatError, JnrrdWarning, UnsupportedError, where
from ..optional import require
from ..tiling.kinds import axis_kinds, is_domain
from .units import to_mm, to_seconds

__all__ = ["from_sitk", "to_sitk"]

_TO_LPS = {"left_posterior_superior": (1.0, 1.0, 1.0), "right_anterior_superior":
           (-1.0, -1.0, 1.0), "left_anterior_superior": (1.0, -1.0, 1.0)}
_NRRD_URI = "https://jnrrd.org/extensions/nrrd/v1.0.0"


def _sitk() -> Any:
    return require("SimpleITK", extra="itk", feature="SimpleITK images")


def _axes(header: Mapping[str, Any], ndim: int, source: Any) -> tuple[list[int], int | None]:
    """(ITK image axes in header order, the component axis or None)."""
    kinds = axis_kinds(header, ndim)
    dirs = header.get("space_directions")
    if dirs is not None:
        spatial = [a for a in range(ndim) if dirs[a] is not None]
    else:
        spatial = [a for a in range(ndim) if is_domain(kinds[a]) and kinds[a] != "time"]
    time = [a for a in range(ndim) if kinds[a] == "time" and a not in spatial]
    rest = [a for a in range(ndim) if a not in spatial and a not in time]
    if len(rest) > 1 or len(time) > 1 or not 2 <= len(spatial) + len(time) <= 4:
        raise UnsupportedError(f"{where(source, 'kinds')}a SimpleITK image has 2 to 4 axes "
                               "and at most one component axis; found kinds "
                               f"{list(kinds)} with {len(spatial)} spatial axes")
    return spatial + time, (rest[0] if rest else None)


def to_sitk(source: Any, level: int = 0, **open_options: Any) -> Any:
    """Level ``level`` of ``source`` (a path, URL or open :class:`jnrrd.Volume`) as a
    ``SimpleITK.Image`` with the same pixels and geometry (see the module docstring)."""
    sitk = _sitk()
    from ..api import open as jopen

    if not hasattr(source, "levels"):
        _refuse_what_sitk_reads(source)
    vol = source if hasattr(source, "levels") else jopen(source, **open_options)
    try:
        if getattr(vol, "index_order", "F") != "F":
            raise ValueError("to_sitk needs a volume opened with index_order='F'")
        lv = vol.levels[level]
        header = vol.header
        axes, comp = _axes(header, lv.ndim, vol.name)
        data = np.asarray(lv[...])
        order = axes[::-1] + ([comp] if comp is not None else [])
        image = sitk.GetImageFromArray(np.ascontiguousarray(np.transpose(data, order)),
                                       isVector=comp is not None)
        _set_geometry(image, vol, lv, axes)
        _set_metadata(image, header)
        return image
    finally:
        if vol is not source:
            vol.close()


def _refuse_what_sitk_reads(source: Any) -> None:
    """A ``FormatError`` for a NIfTI or DICOM path: SimpleITK reads those itself."""
    from .sources import clinical_format

    kind = clinical_format(source)
    if kind is None:
        return
    path = os.fspath(source)
    how = (f"SimpleITK.ReadImage({path!r})" if kind == "nifti" else
           "SimpleITK.ImageSeriesReader (a series folder) or SimpleITK.ReadImage (one file)")
    raise FormatError(f"{path}: to_sitk reads JNRRD and NRRD volumes; SimpleITK reads "
                      f"{'NIfTI' if kind == 'nifti' else 'DICOM'} itself: {how} (or "
                      "jnrrd.convert() it to .jnrrd first)")


def _set_geometry(image: Any, vol: Any, lv: Any, axes: list[int]) -> None:
    origin, dirs = lv.header_geometry()
    core = vol.core
    n = len(axes)
    spacing = np.ones(n)
    direction = np.eye(n)
    org = np.zeros(n)
    odd: list[str] = []  # units that are not lengths or times jnrrd knows
    if dirs is not None:
        flip = np.asarray(_TO_LPS.get(core.space or "", (1.0, 1.0, 1.0)))
        sd = len(origin)
        spatial = [a for a in axes if dirs[a] is not None]
        if sd != len(spatial):
            raise UnsupportedError(f"{where(vol.name, 'space_directions')}{len(spatial)} "
                                   f"spatial axes in a {sd}-D space: ITK needs as many axes as "
                                   "space dimensions")
        f = (flip[:sd] if sd == 3 else np.ones(sd)) * _factors(
            core.space_units or (None,) * sd, to_mm, odd)
        for j, a in enumerate(spatial):
            v = np.asarray(dirs[a], dtype=np.float64) * f
            spacing[j] = float(np.linalg.norm(v))
            direction[:sd, j] = v / spacing[j]
        org[:sd] = np.asarray(origin, dtype=np.float64) * f
    _set_sampled_axes(core, axis_kinds(vol.header, len(core.sizes)), lv.level.scale, axes,
                      dirs, spacing, org, odd)
    if odd:
        warnings.warn(f"{where(vol.name, 'units')}{', '.join(sorted(set(odd)))}: not a unit of "
                      "length or time jnrrd converts; ITK counts millimetres and seconds, so "
                      "those values are passed unscaled", JnrrdWarning, stacklevel=3)
    image.SetSpacing([float(v) for v in spacing])
    image.SetOrigin([float(v) for v in org])
    image.SetDirection([float(v) for v in direction.ravel()])


def _set_sampled_axes(core: Any, kinds: Any, scale: Any, axes: list[int], dirs: Any,
                      spacing: np.ndarray, org: np.ndarray, odd: list[str]) -> None:
    """Spacing and origin of the image axes without a space direction (time; every axis of a
    file without space fields): ``spacings`` and ``axis_mins`` (the first sample's position)
    in millimetres or, for a ``time`` axis, seconds."""
    ndim = len(core.sizes)
    spacings, units = core.spacings or (None,) * ndim, core.units or (None,) * ndim
    mins, centers = core.axis_mins or (None,) * ndim, core.centers or (None,) * ndim
    for j, a in enumerate(axes):
        if dirs is not None and dirs[a] is not None:
            continue
        factor = _factors([units[a]], to_seconds if kinds[a] == "time" else to_mm, odd)[0]
        step = spacings[a]
        step = abs(float(step)) if step is not None and np.isfinite(step) else 1.0
        spacing[j] = step * scale[a] * factor
        low = mins[a]
        if low is not None and np.isfinite(low):
            shift = 0.0 if centers[a] == "node" else (scale[a] - 1) / 2 * step
            org[j] = (float(low) + shift) * factor


def _factors(units: Any, to: Any, odd: list[str]) -> np.ndarray:
    """ITK's unit (mm or s) per each of ``units`` (1 for an unknown unit, noted in ``odd``)."""
    out = []
    for u in units:
        f = to(u)
        if f is None:
            odd.append(repr(u))
        out.append(1.0 if f is None else f)
    return np.asarray(out, dtype=np.float64)


def _set_metadata(image: Any, header: Mapping[str, Any]) -> None:
    from ..header.model import find_prefix

    prefix = find_prefix(header, _NRRD_URI.rsplit("/", 1)[0] + "/") or "nrrd"
    kv = header.get(f"{prefix}:key_values")
    if isinstance(kv, Mapping):
        for k, v in kv.items():
            if isinstance(k, str) and isinstance(v, str):
                image.SetMetaData(k, v)


def from_sitk(image: Any) -> tuple[np.ndarray, dict[str, Any]]:
    """``(data, header)`` of a ``SimpleITK.Image`` for :func:`jnrrd.write`: ``data`` in
    header axis order (``data.shape == header["sizes"]``), the header with its geometry,
    kinds and metadata (see the module docstring)."""
    sitk = _sitk()
    if not isinstance(image, sitk.Image):
        raise TypeError(f"from_sitk expects a SimpleITK.Image, not {type(image).__name__}")
    kv = {k: image.GetMetaData(k) for k in image.GetMetaDataKeys()
          if not k.startswith(("ITK_", "NRRD_"))}
    label_map = image.GetPixelID() in _label_map_ids(sitk)
    if label_map:  # SimpleITK cannot hand a LabelMap's pixels to NumPy: its label image can
        image = sitk.LabelMapToLabel(image)
    n = image.GetDimension()
    data = sitk.GetArrayFromImage(image).T  # C order (z, y, x[, c]) -> (c, x, y, z)
    spacing = np.asarray(image.GetSpacing(), dtype=np.float64)
    direction = np.asarray(image.GetDirection(), dtype=np.float64).reshape(n, n)
    origin = np.asarray(image.GetOrigin(), dtype=np.float64)
    vector = image.GetNumberOfComponentsPerPixel() > 1 or image.GetPixelID() in _vector_ids(
        sitk)
    header = _geometry_header(spacing, direction, origin)
    if vector:  # the components: a first axis
        for key in ("space_directions", "kinds", "spacings", "units", "axis_mins"):
            if key in header:
                header[key].insert(0, "vector" if key == "kinds" else None)
    if kv:
        header["extensions"] = {"nrrd": _NRRD_URI}
        header["nrrd:key_values"] = kv
    if label_map:
        from .labels import mark_label_map

        header = mark_label_map(header)
    return data, header


def _geometry_header(spacing: np.ndarray, direction: np.ndarray, origin: np.ndarray
                     ) -> dict[str, Any]:
    """The geometry fields of an ITK image (LPS millimetres; a separate fourth axis is time,
    in seconds, starting at ``origin[3]``)."""
    n = len(spacing)
    cols = direction * spacing  # column j: the step along image axis j
    header: dict[str, Any] = {}
    space_n = n
    if n == 4 and np.allclose(direction[3, :3], 0) and np.allclose(direction[:3, 3], 0):
        space_n = 3  # a 3-D volume over time
    dirs: list[Any] = [[float(v) for v in cols[:space_n, j]] for j in range(space_n)]
    kinds = ["domain"] * space_n
    if space_n < n:
        dirs.append(None)
        kinds.append("time")
        header["spacings"] = [None] * space_n + [float(spacing[3])]
        header["units"] = [None] * space_n + ["s"]
        if origin[3] != 0:
            header["axis_mins"] = [None] * space_n + [float(origin[3])]
    if space_n == 3:
        header["space"] = "left_posterior_superior"
        header["space_units"] = ["mm"] * 3
    else:
        header["space_dimension"] = space_n
    header["space_origin"] = [float(v) for v in origin[:space_n]]
    header["space_directions"] = dirs
    header["kinds"] = kinds
    return header


def _label_map_ids(sitk: Any) -> set[int]:
    """SimpleITK's LabelMap pixel types (run-length label objects, not arrays)."""
    return {getattr(sitk, name) for name in dir(sitk)
            if name.startswith("sitkLabelUInt") and isinstance(getattr(sitk, name), int)}


def _vector_ids(sitk: Any) -> set[int]:
    return {getattr(sitk, name) for name in dir(sitk)
            if name.startswith("sitkVector") and isinstance(getattr(sitk, name), int)}
