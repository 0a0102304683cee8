"""The pieces of a DICOM volume shared by classic series, multi-frame images and SEG: the
stored type, rescale plans (:mod:`jnrrd.clinical.rescale`), the lazy :class:`ImageStack` and
the JNRRD fields of a stacked volume (docs/clinical.md#dicom)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._threads import run_parallel
from ..errors import UnsupportedError, where
from ..tiling.grid import expand_key
from .dicom_stack import Stack
from .rescale import Rescale, plan_rescale, varying_type

__all__ = ["DICOM_URI", "ImageStack", "number", "rescale_plans", "stored_type", "volume_header"]

DICOM_URI = "https://jnrrd.org/extensions/dicom/v1.0.0"
_SERIES_KEYS = (("Modality", "modality"), ("SeriesInstanceUID", "series_uid"),
                ("StudyInstanceUID", "study_uid"),
                ("FrameOfReferenceUID", "frame_of_reference_uid"),
                ("SOPClassUID", "sop_class_uid"), ("SeriesDescription", "series_description"),
                ("SeriesNumber", "series_number"), ("Manufacturer", "manufacturer"),
                ("ManufacturerModelName", "model"), ("BodyPartExamined", "body_part"),
                ("RescaleType", "rescale_type"))


def number(ds: Any, key: str) -> float | None:
    """``ds.key`` as a float (``None`` when absent, empty or not a number)."""
    v = getattr(ds, key, None)
    try:
        return float(v) if v not in (None, "") else None
    except (TypeError, ValueError):
        return None


def stored_type(ds: Any) -> tuple[np.dtype, tuple[int, int]]:
    """The stored integer type (``BitsAllocated``, ``PixelRepresentation``) and the range
    ``BitsStored`` allows."""
    bits = int(getattr(ds, "BitsAllocated", 16))
    signed = int(getattr(ds, "PixelRepresentation", 0)) == 1
    if bits not in (1, 8, 16, 32):
        raise UnsupportedError(f"{where(None, 'BitsAllocated')}{bits} bits per sample is not "
                               "supported (1, 8, 16, 32 are)")
    dtype = np.dtype(f"{'i' if signed else 'u'}{max(bits, 8) // 8}")
    stored = int(getattr(ds, "BitsStored", bits) or bits)
    lo, hi = (-(1 << (stored - 1)), (1 << (stored - 1)) - 1) if signed else (0, (1 << stored) - 1)
    return dtype, (lo, hi)


def rescale_plans(dss: Sequence[Any], names: Sequence[str],
                  rescales: Sequence[tuple[float, float]] | None = None) -> list[Rescale]:
    """The rescale of each image (``rescales``, else each dataset's RescaleSlope/Intercept);
    when they differ, one plan each without codecs, all giving one type: the smallest integer
    type holding every image's values when every slope and intercept is an integer, else
    float64 (:func:`~jnrrd.clinical.rescale.varying_type`)."""
    dtype, rng = stored_type(dss[0])
    if rescales is None:
        rescales = [(number(d, "RescaleSlope") or 1.0, number(d, "RescaleIntercept") or 0.0)
                    for d in dss]
    if len(set(rescales)) == 1:
        plan = plan_rescale(dtype, *rescales[0], stored_range=rng, float_dtype=np.float64)
        return [plan] * len(rescales)
    values = varying_type(dtype, list(rescales), stored_range=rng)
    return [Rescale(dtype, s, i, values, None, 0) for s, i in rescales]


class ImageStack:
    """The volume of sorted images as a lazy array (header order: [samples,] columns, rows,
    slices); ``plane(i)`` decodes input image ``i``; only the slices a read touches are
    decoded."""

    def __init__(self, plane: Callable[[int], np.ndarray], plans: Sequence[Rescale],
                 stack: Stack, first: Any) -> None:
        self._plane, self.plans, self.stack = plane, list(plans), stack
        rows, cols = int(first.Rows), int(first.Columns)
        self.samples = int(getattr(first, "SamplesPerPixel", 1) or 1)
        plane_shape = (cols, rows) if self.samples == 1 else (self.samples, cols, rows)
        self.shape = (*plane_shape, stack.depth)
        dtype = self.plans[0].dtype
        if stack.resampling is not None and dtype.kind != "f":
            dtype = np.dtype(np.float32)  # interpolated values are not integers
        self.dtype = dtype
        self.ndim = len(self.shape)

    def _values(self, i: int) -> np.ndarray:
        """Input image ``i`` rescaled, in header order."""
        raw = self._plane(i)
        want = (self.shape[-2], self.shape[-3]) if self.samples == 1 else (
            self.shape[-2], self.shape[-3], self.samples)
        if raw.shape != want:
            raise UnsupportedError(f"image {i}: decoded pixels of shape {raw.shape}, "
                                   f"expected {want}")
        vals = self.plans[i].apply(raw)
        return vals.T if self.samples == 1 else vals.transpose(2, 1, 0)

    def slice_values(self, k: int) -> np.ndarray:
        """Output slice ``k`` (resampled when the stack asks for it)."""
        order = self.stack.order
        rs = self.stack.resampling
        if rs is None:
            return self._values(order[k])
        lo, w = int(rs.lower[k]), float(rs.weight[k])
        a = self._values(order[lo]).astype(self.dtype)
        if w == 0:
            return a
        b = self._values(order[lo + 1]).astype(self.dtype)
        return (a * (1 - w) + b * w).astype(self.dtype)

    def __getitem__(self, key: Any) -> np.ndarray:
        key = expand_key(key, self.ndim)
        last = key[-1]
        ks = range(*last.indices(self.shape[-1])) if isinstance(last, slice) else None
        if ks is None:
            k = int(last)
            k = k + self.shape[-1] if k < 0 else k
            if not 0 <= k < self.shape[-1]:
                raise IndexError(f"slice {last} is outside 0..{self.shape[-1] - 1}")
            return self.slice_values(k)[key[:-1]]
        plane_shape = np.empty(self.shape[:-1], dtype=np.uint8)[key[:-1]].shape
        out = np.empty((*plane_shape, len(ks)), dtype=self.dtype, order="F")

        def task(j: int, k: int) -> Callable[[], None]:
            def run() -> None:
                out[..., j] = self.slice_values(k)[key[:-1]]
            return run

        # the images decode on the shared pool (file reads and NumPy copies release the GIL)
        run_parallel([task(j, k) for j, k in enumerate(ks)])
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self[...]
        return out if dtype is None else out.astype(dtype, copy=False)


def volume_header(stack: Stack, first: Any, data: ImageStack,
                  extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JNRRD fields of a stacked DICOM volume (see the module docstring); ``first`` is
    the first image in slice order (its description, window, ...)."""
    colour = data.samples > 1
    dirs: list[Any] = [[float(v) for v in stack.directions[:, d]] for d in range(3)]
    out: dict[str, Any] = {
        "space": "left_posterior_superior",
        "space_origin": [float(v) for v in stack.origin],
        "space_directions": [None, *dirs] if colour else dirs,
        "space_units": ["mm", "mm", "mm"],
        "kinds": (["RGB-color"] if colour else []) + ["domain"] * 3,
        "extensions": {"dicom": DICOM_URI},
    }
    desc = str(getattr(first, "SeriesDescription", "") or "").strip()
    if desc:
        out["content"] = desc
    series: dict[str, Any] = {}
    for key, name in _SERIES_KEYS:
        v = getattr(first, key, None)
        if v not in (None, ""):
            series[name] = str(v) if not isinstance(v, (int, float)) else v
    plans = [data.plans[i] for i in stack.order]  # in slice order
    if all(p is plans[0] for p in plans):
        series["rescale"] = {"slope": plans[0].slope, "intercept": plans[0].intercept}
    else:
        series["rescale"] = {"per_slice": [{"slope": p.slope, "intercept": p.intercept}
                                           for p in plans]}
    for key, name in (("WindowCenter", "window_center"), ("WindowWidth", "window_width")):
        v = getattr(first, key, None)
        if v is not None:
            vals = list(v) if isinstance(v, Sequence) and not isinstance(v, str) else [v]
            series[name] = [float(x) for x in vals]
    if stack.resampling is not None:
        series["resampled"] = True
    series.update(extra or {})
    out["dicom:series"] = series
    return out
