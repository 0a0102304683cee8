"""JNRRD (or any array with JNRRD fields) → NIfTI-1/2, header through nibabel, data streamed.

- **Axes**: NIfTI wants the spatial axes first, then time, then vector components. Header
  axes are placed so: domain axes that are not ``time`` (at most 3) → i, j, k; a ``time`` axis
  → the 4th; a non-domain axis → the 4th when it is a ``list`` (e.g. DWI gradients) and there
  is no time axis, else the 5th (a vector: intent ``vector``, the 4th of size 1).
- **Geometry**: ``space_directions``/``space_origin`` in LPS (or RAS, LAS) become the RAS+
  affine, written as **both** the sform and the qform, with the form codes of a
  ``nifti:header`` field (a file read from NIfTI: as read, 0 included) else 1, "scanner";
  ``space_units`` (else the saved unit, else mm for an anatomical space) and the time axis's
  unit, spacing and ``axis_mins`` go to ``xyzt_units``, ``pixdim[4]`` and ``toffset`` (a file
  without a time axis keeps its saved time unit and ``toffset``). Without an anatomical
  space, the directions (or ``spacings``) are written with form codes 0, and a warning.
- **Values** are written as read (rescaled values stay values: no ``scl_slope``); a label map
  gets intent ``label``, a vector its saved intent (else ``vector``); ``content`` becomes
  ``descrip``. Fields NIfTI cannot hold (``label:segments``, ``dicom:series``, NRRD
  key/value pairs, ``measurement_frame``, ...) are named in a warning.

The file is written beside the target and renamed into place (a ``.nii.gz`` is gzip level 6);
memory stays bounded by one slab of about 64 MiB.
"""

from __future__ import annotations

import gzip
import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..errors import JnrrdWarning, UnsupportedError, where
from ..header import core_fields
from ..header.model import TILE_URI_PREFIX, find_prefix, split_key
from ..storage import reported_as, target_store
from ..tiling.kinds import axis_kinds, is_domain
from .labels import is_label_map, label_prefix
from .nifti import NIFTI_URI, SPACE_UNITS, TIME_UNITS, _nibabel
from .units import to_mm, to_seconds

__all__ = ["nifti_layout", "write_nifti"]

_SPACE_FLIP = {"left_posterior_superior": (-1.0, -1.0, 1.0), "left_posterior_superior_time":
               (-1.0, -1.0, 1.0), "right_anterior_superior": (1.0, 1.0, 1.0),
               "right_anterior_superior_time": (1.0, 1.0, 1.0),
               "left_anterior_superior": (-1.0, 1.0, 1.0),
               "left_anterior_superior_time": (-1.0, 1.0, 1.0)}
_SPACE_BACK = {v: k for k, v in SPACE_UNITS.items()}
_TIME_BACK = {v: k for k, v in TIME_UNITS.items()} | {"sec": "sec", "msec": "msec"}
_TYPES = {"u1", "i1", "i2", "u2", "i4", "u4", "i8", "u8", "f4", "f8", "c8", "c16"}
_SLAB = 64 << 20
#: the core fields a NIfTI file holds (or that describe the source's storage)
_CARRIED = {"jnrrd", "type", "dimension", "sizes", "endian", "encoding", "block_size",
            "content", "space", "space_dimension", "space_units", "space_origin",
            "space_directions", "spacings", "kinds", "units", "axis_mins", "line_skip",
            "byte_skip", "data_file", "data_files", "data_file_pattern", "extensions"}


def nifti_layout(header: Mapping[str, Any], ndim: int, source: Any = None
                 ) -> tuple[list[int | None], bool]:
    """The header axis of each NIfTI dimension (``None`` for an added size-1 dimension) and
    whether the data is a vector (5th dimension)."""
    kinds = axis_kinds(header, ndim)
    spatial = [a for a in range(ndim) if is_domain(kinds[a]) and kinds[a] != "time"]
    times = [a for a in range(ndim) if kinds[a] == "time"]
    other = [a for a in range(ndim) if not is_domain(kinds[a])]
    if len(spatial) > 3 or len(times) > 1 or len(other) > 1:
        raise UnsupportedError(f"{where(source, 'kinds')}NIfTI holds up to 3 spatial axes, "
                               f"one time axis and one vector axis; found kinds {list(kinds)}")
    order: list[int | None] = list(spatial)
    if not times and not other:
        return order, False
    order += [None] * (3 - len(order))
    if times:
        order.append(times[0])
    if other:
        if not times and kinds[other[0]] in ("list", None):
            order.append(other[0])
            return order, False
        if not times:
            order.append(None)
        order.append(other[0])
        return order, True
    return order, False


def _affine(core: Any, order: list[int | None], source: Any) -> tuple[np.ndarray, bool]:
    """The RAS+ affine (4 x 4) and whether it is anatomical (else form codes 0)."""
    aff = np.eye(4)
    space = core.space
    if core.space_directions is None:
        sp = core.spacings or (None,) * len(core.sizes)
        for j, a in enumerate(order[:3]):
            step = None if a is None else sp[a]
            if step is not None and math.isfinite(step):
                aff[j, j] = abs(float(step))
        return aff, False
    flip = np.asarray(_SPACE_FLIP.get(space or "", (1.0, 1.0, 1.0)))
    cols = []
    for a in order[:3]:
        v = core.space_directions[a] if a is not None else None
        cols.append(None if v is None else np.asarray(v[:3], dtype=np.float64) * flip)
    for j, c in enumerate(cols):
        if c is None:  # a missing spatial column: the unit normal of the others
            known = [x for x in cols if x is not None]
            n = np.cross(known[0], known[1]) if len(known) == 2 else np.eye(3)[j]
            cols[j] = n / (np.linalg.norm(n) or 1.0)
    aff[:3, :3] = np.stack([np.asarray(c) for c in cols], axis=1)
    origin = core.space_origin or (0.0, 0.0, 0.0)
    aff[:3, 3] = np.asarray([0.0 if v is None else v for v in origin[:3]]) * flip
    return aff, space in _SPACE_FLIP


def write_nifti(target: Any, data: Any, header: Mapping[str, Any], *,
                storage_options: dict[str, Any] | None = None,
                progress: Callable[[int], None] | None = None) -> None:
    """Write ``data`` (header axis order, ``shape == header["sizes"]``) with the JNRRD fields
    ``header`` as the NIfTI file ``target`` (``.nii`` or ``.nii.gz``)."""
    nib = _nibabel()
    name = str(target)
    fields = {k: v for k, v in header.items() if k not in ("sizes", "dimension", "type")}
    fields.update(type=np.dtype(data.dtype).name, dimension=len(data.shape),
                  sizes=list(data.shape), encoding="raw")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JnrrdWarning)  # the source's own reader warned
        core = core_fields(_plain(fields), source=name)
    dtype = np.dtype(data.dtype)
    if dtype.str[1:] not in _TYPES:
        raise UnsupportedError(f"{where(name, 'type')}NIfTI has no type for {dtype.name}; "
                               "convert the data (e.g. float16 -> float32, bool -> uint8)")
    order, vector = nifti_layout(header, len(data.shape), name)
    _warn_dropped(header, name)
    shape = [1 if a is None else int(data.shape[a]) for a in order]
    hdr = _header(nib, core, header, order, shape, vector, dtype, name)
    store, key = target_store(name, storage_options=storage_options)
    staged: Any = store.stage(key)  # a context manager: committed when the block succeeds
    with reported_as(name), staged as f:
        out: Any = (gzip.GzipFile(fileobj=f, mode="wb", compresslevel=6, mtime=0)
                    if name.lower().endswith(".gz") else f)
        hdr.write_to(out)
        _write_data(out, data, order, dtype, progress)
        if out is not f:
            out.close()


def _header(nib: Any, core: Any, header: Mapping[str, Any], order: list[int | None],
            shape: list[int], vector: bool, dtype: np.dtype, name: str) -> Any:
    saved = _saved(header)
    big = max(shape) > 32767 or saved.get("version") == 2
    hdr = nib.Nifti2Header() if big else nib.Nifti1Header()
    hdr.set_data_shape(shape)
    hdr.set_data_dtype(dtype.newbyteorder("<"))
    aff, anatomical = _affine(core, order, name)
    space_unit, factor = _space_unit(core, saved, anatomical, name)
    aff[:3, :] *= factor
    if anatomical:
        scode, qcode = _codes(saved)
    else:
        scode = qcode = 0
        warnings.warn(f"{where(name, 'space')}no anatomical space (LPS, RAS, LAS): the NIfTI "
                      "orientation is written as unknown (form codes 0)", JnrrdWarning,
                      stacklevel=4)
    hdr.set_sform(aff, code=scode)
    hdr.set_qform(aff, code=qcode)
    _time(hdr, core, order, saved, name)
    hdr.set_xyzt_units(space_unit, hdr.get_xyzt_units()[1])
    _intent(hdr, header, vector, dtype)
    text = header.get("content") or saved.get("descrip") or ""
    hdr["descrip"] = str(text).encode("latin-1", "replace")[:79]
    return hdr


def _codes(saved: Mapping[str, Any]) -> tuple[int, int]:
    """The sform and qform codes: a NIfTI source's as read (when one of them is set), else
    1 ("scanner") for both."""
    scode, qcode = int(saved.get("sform_code") or 0), int(saved.get("qform_code") or 0)
    return (scode, qcode) if scode or qcode else (1, 1)


def _space_unit(core: Any, saved: Mapping[str, Any], anatomical: bool, name: str
                ) -> tuple[str, float]:
    """NIfTI's spatial unit and the factor taking ``space_units`` to it: meter, mm, micron
    as they are, other lengths in mm; without ``space_units``, the saved unit, else mm for an
    anatomical space."""
    su = (core.space_units or (None,))[0]
    if su in _SPACE_BACK:
        return _SPACE_BACK[su], 1.0
    if su:
        factor = to_mm(su)
        if factor is not None:
            return "mm", factor
        warnings.warn(f"{where(name, 'space_units')}{su!r} is not a unit NIfTI has (meter, "
                      "mm, micron): written as unknown", JnrrdWarning, stacklevel=5)
        return "unknown", 1.0
    units = saved.get("xyzt_units") or [None, None]
    return ("unknown" if units[0] == "unknown" or not anatomical else "mm"), 1.0


def _time(hdr: Any, core: Any, order: list[int | None], saved: Mapping[str, Any],
          name: str) -> None:
    """``pixdim[4]``, the time unit and ``toffset``: the time axis's spacing, unit and
    ``axis_mins`` (a time unit NIfTI lacks in seconds); without a time axis, the saved unit
    and ``toffset``."""
    n = len(core.sizes)
    units = saved.get("xyzt_units") or [None, None]
    time_unit = units[1] if units[1] in _TIME_BACK.values() else "unknown"
    toffset = float(saved.get("toffset") or 0.0)
    if len(order) > 3 and order[3] is not None:
        t = order[3]
        unit = (core.units or (None,) * n)[t]
        time_unit, factor = _TIME_BACK.get(unit or "", "unknown"), 1.0
        if unit and unit not in _TIME_BACK:
            seconds = to_seconds(unit)
            if seconds is None:
                warnings.warn(f"{where(name, 'units')}{unit!r} is not a time unit NIfTI has: "
                              "written as unknown", JnrrdWarning, stacklevel=5)
            else:
                time_unit, factor = "sec", seconds
        zooms = list(hdr.get_zooms())
        sp = (core.spacings or (None,) * n)[t]
        zooms[3] = float(sp) * factor if sp is not None and math.isfinite(sp) else 1.0
        hdr.set_zooms(zooms)
        low = (core.axis_mins or (None,) * n)[t]
        toffset = float(low) * factor if low is not None and math.isfinite(low) else 0.0
    hdr.set_xyzt_units(hdr.get_xyzt_units()[0], time_unit)
    hdr["toffset"] = toffset


def _warn_dropped(header: Mapping[str, Any], name: str) -> None:
    """A warning naming the fields NIfTI cannot hold (tiling fields, which describe the
    source's storage, excepted)."""
    tile = find_prefix(header, TILE_URI_PREFIX) or "tile"
    own = find_prefix(header, NIFTI_URI) or "nifti"
    flag = f"{label_prefix(header)}:map"
    dropped = []
    for key, value in header.items():
        parts = split_key(str(key))
        if parts is None:
            if key not in _CARRIED and value is not None:
                dropped.append(key)
        elif parts[0] not in (tile, own) and key != flag:
            dropped.append(key)
    if dropped:
        warnings.warn(f"{where(name)}NIfTI cannot hold the fields {dropped}; they are not "
                      "written", JnrrdWarning, stacklevel=4)


def _saved(header: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``nifti:header`` field of a header read from NIfTI (``{}`` when absent)."""
    value = header.get("nifti:header")
    return value if isinstance(value, Mapping) else {}


def _intent(hdr: Any, header: Mapping[str, Any], vector: bool, dtype: np.dtype) -> None:
    saved = _saved(header)
    if is_label_map(header, dtype):
        hdr.set_intent("label", (), name=str(saved.get("intent_name") or "")[:15])
    elif vector and not saved.get("intent_code"):
        hdr.set_intent("vector", (), name="")
    elif saved.get("intent_code"):
        try:
            hdr.set_intent(int(saved["intent_code"]), tuple(saved.get("intent_params") or ()),
                           name=str(saved.get("intent_name") or "")[:15])
        except (KeyError, ValueError, TypeError):
            pass  # an intent nibabel does not know: written without one


def _write_data(out: Any, data: Any, order: list[int | None], dtype: np.dtype,
                progress: Callable[[int], None] | None) -> None:
    """The data in NIfTI order (first dimension fastest), one slab along the slowest present
    header axis at a time."""
    present = [a for a in order if a is not None]
    if not present:
        return
    last = present[-1]
    n = int(data.shape[last])
    row = max(1, dtype.itemsize * math.prod(int(s) for s in data.shape) // max(n, 1))
    step = max(1, _SLAB // row)
    done = 0
    for lo in range(0, n, step):
        key = tuple(slice(lo, min(n, lo + step)) if a == last else slice(None)
                    for a in range(len(data.shape)))
        block = np.asarray(data[key])
        block = np.transpose(block, present).astype(dtype.newbyteorder("<"), copy=False)
        out.write(np.asfortranarray(block).tobytes(order="F"))
        done += block.nbytes
        if progress is not None:
            progress(done)


def _plain(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, Mapping):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v
