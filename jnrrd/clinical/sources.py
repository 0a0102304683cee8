"""Clinical sources and targets of :func:`jnrrd.convert`: which format a path is, opening it,
and the write options a clinical volume implies (docs/clinical.md#converting).

- A **DICOM** source is a folder (its files, recursively, grouped by series) or one DICOM file
  (enhanced multi-frame, SEG): a ``.dcm`` suffix or the ``DICM`` marker at byte 128.
- A **NIfTI** source or target ends in ``.nii`` or ``.nii.gz`` (any case).
- **Time axes** stay out of the pyramid: when the header has an axis of kind ``time``, an
  integer ``levels`` scales only the other domain axes, and an integer (or default) ``tile``
  is 1 along time.
- **Stored integers**: a tiled JNRRD target of a rescaled source keeps the stored integers
  through the source's ``scale_offset`` + ``cast_value`` codecs, ahead of the compression
  asked for (unless ``codecs=`` says otherwise).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..header.foreign import is_dicom_file, is_nifti_path
from ..tiling.kinds import axis_kinds, is_domain
from .loaded import Loaded

__all__ = ["READER_OPTIONS", "clinical_format", "layout_options", "open_clinical",
           "storage_codecs"]

#: options of the clinical readers (not write options)
READER_OPTIONS = ("series", "resample")
_DEFAULT_TILE = {1: 65536, 2: 256}


def clinical_format(source: Any) -> str | None:
    """``"dicom"``, ``"nifti"`` or ``None`` for a source path (see the module docstring);
    folders that hold a Zarr group are not DICOM."""
    if not isinstance(source, (str, os.PathLike)):
        return None
    path = os.fspath(source)
    if "://" in path:
        return None
    if is_nifti_path(path):
        return "nifti"
    if os.path.isdir(path):
        return "dicom"
    if os.path.isfile(path) and is_dicom_file(path):
        return "dicom"
    return None


def open_clinical(source: Any, kind: str, *, series: str | None = None,
                  resample: bool = False) -> Loaded:
    """Open a DICOM or NIfTI source for conversion."""
    if kind == "nifti":
        if series is not None or resample:
            raise TypeError("series= and resample= are DICOM options; the source is NIfTI")
        from .nifti import read_nifti

        return read_nifti(source)
    from .dicom import read_dicom

    return read_dicom(source, series=series, resample=resample)


def layout_options(header: Mapping[str, Any], shape: tuple[int, ...], options: dict[str, Any],
                   index_order: str) -> dict[str, Any]:
    """``options`` with time axes kept out of the pyramid (see the module docstring);
    ``shape`` is in header order."""
    ndim = len(shape)
    kinds = axis_kinds(header, ndim)
    if "time" not in kinds:
        return options
    out = dict(options)
    spatial = [a for a in range(ndim) if is_domain(kinds[a]) and kinds[a] != "time"]
    levels, tile = out.get("levels"), out.get("tile")
    flip = (lambda v: list(v)[::-1]) if index_order == "C" else list
    if isinstance(levels, (int, np.integer)) and not isinstance(levels, bool):
        out["levels"] = [flip([2**k if a in spatial else 1 for a in range(ndim)])
                         for k in range(int(levels))]
    asked = any(out.get(k) is not None for k in ("levels", "compression", "codecs", "tile"))
    if asked and (tile is None or isinstance(tile, (int, np.integer))):
        side = int(tile) if tile is not None else _DEFAULT_TILE.get(len(spatial), 64)
        out["tile"] = flip([min(side, shape[a]) if a in spatial else 1
                            if kinds[a] == "time" else None for a in range(ndim)])
    return out


def storage_codecs(loaded_codecs: list[dict[str, Any]] | None, options: dict[str, Any],
                   stored_endian: str = "little") -> dict[str, Any]:
    """Write options that keep the stored integers: the source's array→array codecs, then
    ``bytes`` and the compression asked for (``compression=`` is folded into ``codecs``)."""
    if not loaded_codecs or options.get("codecs") is not None:
        return options
    from ..codecs import get_codec
    from ..tiling.codec_fields import compression_chain

    out = dict(options)
    stored = np.dtype(loaded_codecs[-1]["configuration"]["data_type"])
    comp = out.pop("compression", None)
    level = out.pop("compression_level", None)
    tail = compression_chain(comp, stored_endian, stored, level)
    out["codecs"] = [get_codec(c).to_json() for c in loaded_codecs] + tail
    return out
