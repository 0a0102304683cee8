"""NIfTI-1/2 → JNRRD fields and data, through nibabel (``pip install nibabel``; the
``nifti`` extra).

- **Geometry**: the sform when its code is set, else the qform, else none (NIfTI's "method
  1": only ``spacings`` from ``pixdim``). The affine maps (i, j, k) to RAS+ millimetres; the
  header gets it in LPS (``space: left_posterior_superior``), x and y negated, as DICOM, ITK
  and 3D Slicer use: ``space_directions`` are the first three affine columns, ``space_origin``
  its translation. ``space_units`` come from ``xyzt_units`` (none when it says "unknown").
- **Values**: ``scl_slope``/``scl_inter`` are applied (:mod:`jnrrd.clinical.rescale`, float32
  values as ITK gives them); a tiled JNRRD keeps the stored integers when that is exact.
- **4-D**: the fourth axis is time: kind ``time``, ``spacings`` = ``pixdim[4]`` in the time
  unit of ``xyzt_units``, ``axis_mins`` = ``toffset`` (the first volume's time, as ITK's
  origin) when not 0; :func:`jnrrd.convert` keeps it out of the pyramid (tile 1, scale 1).
  NIfTI's 5th dimension (values per voxel: vectors, matrices) gets kind ``vector``, further
  ones ``list``; a 4th dimension of size 1 ahead of it only holds the place (NIfTI has no
  other way to reach the 5th), so it is left out (as ITK does: a 3-D vector image).
- **Labels**: intent ``label`` (1002) or ``neuroname`` (1003) marks a label map.
- What NIfTI says beyond that (form codes, intent, ``descrip``, ``toffset``) goes in the
  ``nifti:header`` field, which :mod:`jnrrd.clinical.nifti_write` uses when writing back.

``.nii`` data is memory-mapped; ``.nii.gz`` is decompressed into memory once.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..errors import UnsupportedError, where
from ..header.foreign import is_nifti_path
from ..optional import require
from .labels import mark_label_map
from .loaded import Loaded
from .rescale import Rescaled, plan_rescale

__all__ = ["LPS_FROM_RAS", "NIFTI_URI", "SPACE_UNITS", "TIME_UNITS", "is_nifti_path",
           "read_nifti", "stored_axes"]

NIFTI_URI = "https://jnrrd.org/extensions/nifti/v1.0.0"
#: RAS+ ⇄ LPS+: negate x and y (its own inverse)
LPS_FROM_RAS = np.diag([-1.0, -1.0, 1.0])
SPACE_UNITS = {"meter": "m", "mm": "mm", "micron": "um"}
TIME_UNITS = {"sec": "s", "msec": "ms", "usec": "us", "hz": "Hz", "ppm": "ppm", "rads": "rad/s"}
#: NIfTI intent codes of label maps: NIFTI_INTENT_LABEL, NIFTI_INTENT_NEURONAME
LABEL_INTENTS = (1002, 1003)
def _nibabel() -> Any:
    return require("nibabel", extra="nifti", feature="NIfTI")


def read_nifti(path: Any) -> Loaded:
    """Open the NIfTI file ``path``: its data (lazy where the file allows) and JNRRD header."""
    nib = _nibabel()
    name = os.fspath(path)
    try:
        img = nib.load(name)
    except (OSError, EOFError) as e:
        raise UnsupportedError(f"{where(name)}cannot read as NIfTI: {e}") from None
    except Exception as e:  # nibabel's ImageFileError and header errors
        raise UnsupportedError(f"{where(name)}not a readable NIfTI file: {e}") from None
    if not isinstance(img, (nib.Nifti1Image, nib.Nifti2Image)):
        raise UnsupportedError(f"{where(name)}expected a NIfTI-1 or NIfTI-2 image, found "
                               f"{type(img).__name__}")
    proxy = img.dataobj
    stored = np.dtype(proxy.dtype)
    if stored.fields is not None or stored.kind not in "iufc":
        raise UnsupportedError(f"{where(name, 'datatype')}NIfTI data type {stored} is not "
                               "supported (integers, floats and complex numbers are)")
    raw = _unscaled(nib, proxy, name)
    axes = stored_axes(tuple(int(n) for n in img.shape))
    if len(axes) < raw.ndim:  # the 4th dimension only holds the 5th's place (a view)
        raw = np.squeeze(raw, axis=3)
    slope, inter = _scaling(proxy)
    plan = plan_rescale(stored.newbyteorder("="), slope, inter)
    data = raw if plan.identity and raw.dtype.isnative else Rescaled(raw, plan)
    header = nifti_header(img, name)
    if plan.codecs is not None:
        return Loaded(data, header, plan.codecs, plan.padding_value)
    return Loaded(data, header)


def _unscaled(nib: Any, proxy: Any, name: str) -> Any:
    """The stored values: a memory map (``.nii``) or an array (``.nii.gz``), without
    nibabel's scaling (the rescale plan applies it, slab by slab)."""
    spec = (tuple(proxy.shape), proxy.dtype, proxy.offset, 1.0, 0.0)
    plain = nib.arrayproxy.ArrayProxy(proxy.file_like, spec, mmap="r", keep_file_open=False)
    try:
        return plain.get_unscaled()
    except (OSError, EOFError, ValueError) as e:
        raise UnsupportedError(f"{where(name)}cannot read the NIfTI data: {e}") from None


def _scaling(proxy: Any) -> tuple[float, float]:
    slope = float(getattr(proxy, "slope", 1.0))
    inter = float(getattr(proxy, "inter", 0.0))
    if not np.isfinite(slope) or slope == 0:  # NIfTI: 0 or NaN means "no scaling"
        return 1.0, 0.0
    return slope, inter if np.isfinite(inter) else 0.0


def _affine(hdr: Any) -> tuple[np.ndarray | None, int, int]:
    """The RAS affine NIfTI readers use (sform, else qform), the sform and qform codes."""
    sform, scode = hdr.get_sform(coded=True)
    qform, qcode = hdr.get_qform(coded=True)
    if scode and scode > 0:
        return np.asarray(sform, dtype=np.float64), int(scode), int(qcode or 0)
    if qcode and qcode > 0:
        return np.asarray(qform, dtype=np.float64), int(scode or 0), int(qcode)
    return None, int(scode or 0), int(qcode or 0)


def stored_axes(shape: tuple[int, ...]) -> list[int]:
    """The NIfTI dimensions that become header axes: all, but a 4th of size 1 ahead of a
    5th (its place holder)."""
    return [d for d in range(len(shape)) if not (d == 3 and len(shape) > 4 and shape[3] == 1)]


def nifti_header(img: Any, name: str) -> dict[str, Any]:
    """The JNRRD fields of a nibabel NIfTI image (see the module docstring)."""
    hdr = img.header
    full = tuple(int(n) for n in img.shape)
    dims = stored_axes(full)
    ndim = len(dims)
    has_time = len(full) > 3 and 3 in dims
    zooms = [float(z) for z in hdr.get_zooms()]
    space_unit, time_unit = hdr.get_xyzt_units()
    intent = hdr.get_intent()
    code = int(hdr["intent_code"])
    affine, scode, qcode = _affine(hdr)
    nspace = min(ndim, 3)
    out: dict[str, Any] = {"extensions": {"nifti": NIFTI_URI}}
    kinds: list[str] = ["domain"] * nspace + (["time"] if has_time else [])
    kinds += ["vector" if d == 4 else "list" for d in dims[len(kinds):]]
    out["kinds"] = kinds
    if affine is not None:
        lps = LPS_FROM_RAS @ affine[:3, :4]
        out["space"] = "left_posterior_superior"
        out["space_origin"] = [float(v) for v in lps[:, 3]]
        out["space_directions"] = [[float(v) for v in lps[:, d]] if d < nspace else None
                                   for d in range(ndim)]
        if space_unit in SPACE_UNITS:
            out["space_units"] = [SPACE_UNITS[space_unit]] * 3
    _sampled(out, ndim, nspace, zooms, affine is None, (space_unit, time_unit), has_time,
             float(hdr["toffset"]))
    descrip = bytes(hdr["descrip"]).split(b"\0", 1)[0].decode("latin-1").strip()
    if descrip:
        out["content"] = descrip
    out["nifti:header"] = {
        "version": 2 if type(img).__name__ == "Nifti2Image" else 1,
        "sform_code": scode, "qform_code": qcode, "intent_code": code,
        "intent_name": intent[2] or "", "intent_params": [float(p) for p in intent[1]],
        "descrip": descrip, "toffset": float(hdr["toffset"]),
        "xyzt_units": [space_unit, time_unit],
    }
    if code in LABEL_INTENTS:
        out = mark_label_map(out)
    return out


def _sampled(out: dict[str, Any], ndim: int, nspace: int, zooms: list[float],
             no_form: bool, xyzt: tuple[str, str], has_time: bool, toffset: float) -> None:
    """``spacings``, ``units`` and ``axis_mins``: the spatial axes' without a form (method 1:
    pixdim), the time axis's (pixdim[4], its unit, toffset)."""
    space_unit, time_unit = xyzt
    spacings: list[float | None] = [zooms[d] if no_form else None for d in range(nspace)]
    units: list[str | None] = [None] * ndim
    if no_form and space_unit in SPACE_UNITS:
        units[:nspace] = [SPACE_UNITS[space_unit]] * nspace
    if has_time:
        spacings.append(zooms[3] if zooms[3] > 0 else None)
        units[3] = TIME_UNITS.get(time_unit)
        if toffset and np.isfinite(toffset):
            out["axis_mins"] = [None] * 3 + [toffset] + [None] * (ndim - 4)
    spacings += [None] * (ndim - len(spacings))
    if any(s is not None for s in spacings):
        out["spacings"] = spacings
    if any(u is not None for u in units):
        out["units"] = units
