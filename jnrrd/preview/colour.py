"""Values → colours: percentile windows, the label palette, RGB data.

- **Grey** (the default): one window for all views, from the 0.5th to the 99.5th percentile
  of the finite values shown (NaN and ±inf left out); below it black, above it white, NaN
  black. When the window holds one value, that value and below are black, above white.
- **Labels**: integer (or boolean) data whose file was downsampled with ``mode``, or that
  shows at most ``LABEL_MAX_VALUES`` distinct values; ``labels=True``/``False`` decides
  instead. 0 is black, any other value ``v`` takes ``PALETTE[(v - 1) % len(PALETTE)]``.
- **Colour** (an RGB axis): ``uint8`` as stored; other types through one window shared by the
  three components (so hues keep their balance).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["LABEL_MAX_VALUES", "PALETTE", "is_labels", "palette", "to_rgb", "window"]

#: integer data showing at most this many distinct values is a label volume
LABEL_MAX_VALUES = 16
#: the fixed label colours (label 1 first; 0 is black)
PALETTE = np.array([
    (230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200), (245, 130, 48),
    (145, 30, 180), (70, 240, 240), (240, 50, 230), (210, 245, 60), (250, 190, 212),
    (0, 128, 128), (220, 190, 255), (170, 110, 40), (255, 250, 200), (128, 0, 0),
    (170, 255, 195), (128, 128, 0), (255, 215, 180), (0, 0, 128), (128, 128, 128),
], dtype=np.uint8)
#: percentiles of the grey window
LOW, HIGH = 0.5, 99.5
#: values sampled (evenly) for the percentiles of a large picture
_SAMPLE = 1 << 20


def to_rgb(views: Sequence[np.ndarray], *, coloured: bool, labels: bool | None,
           mode_pyramid: bool) -> list[np.ndarray]:
    """Each view (rows x columns, plus a trailing axis of 3 when ``coloured``) as an
    ``uint8`` RGB picture."""
    if coloured:
        if all(v.dtype == np.uint8 for v in views):
            return [np.ascontiguousarray(v) for v in views]
        lo, hi = _window_of(views)
        return [window(v, lo, hi) for v in views]
    if is_labels(views, labels=labels, mode_pyramid=mode_pyramid):
        return [palette(v) for v in views]
    lo, hi = _window_of(views)
    return [np.repeat(window(v, lo, hi)[..., None], 3, axis=-1) for v in views]


def is_labels(views: Sequence[np.ndarray], *, labels: bool | None, mode_pyramid: bool) -> bool:
    """The labels rule (module docstring)."""
    if labels is not None:
        return bool(labels)
    if not all(v.dtype.kind in "iub" for v in views):
        return False
    if mode_pyramid:
        return True
    seen: set[int] = set()
    for v in views:
        seen.update(np.unique(v).tolist())
        if len(seen) > LABEL_MAX_VALUES:
            return False
    return True


def palette(v: np.ndarray) -> np.ndarray:
    """Label values as palette colours (0 black); non-integers are truncated first, NaN and
    infinities are black."""
    if v.dtype.kind == "b":
        v = v.astype(np.uint8)
    if v.dtype.kind == "f":
        v = np.where(np.isfinite(v), v, 0)
        v = np.trunc(v).astype(np.int64)
    nz = v != 0
    index = np.zeros(v.shape, dtype=np.intp)
    index[nz] = ((v[nz] - 1) % len(PALETTE)).astype(np.intp)
    out = PALETTE[index]
    out[~nz] = 0
    return out


def _window_of(views: Sequence[np.ndarray]) -> tuple[float, float]:
    """The ``LOW``..``HIGH`` percentiles of the finite values of all views (0, 0 if none)."""
    parts = []
    for v in views:
        flat = v.reshape(-1)
        flat = flat[:: max(1, flat.size // _SAMPLE)].astype(np.float64)
        parts.append(flat[np.isfinite(flat)])
    finite = np.concatenate(parts) if parts else np.empty(0)
    if finite.size == 0:
        return 0.0, 0.0
    lo, hi = np.percentile(finite, [LOW, HIGH])
    return float(lo), float(hi)


def window(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Values mapped linearly from ``lo..hi`` to 0..255 (clipped; NaN black; with a one-value
    window, that value and below are black, above white)."""
    x = v.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        if hi > lo:
            y = (x - lo) * (255.0 / (hi - lo))
        else:
            y = np.where(x > lo, 255.0, 0.0)
        y = np.clip(y, 0.0, 255.0)
    y[np.isnan(y)] = 0.0
    return np.rint(y).astype(np.uint8)
