"""The ``cast_value`` codec: value conversion between integer and floating-point types.

Merged zarr-extensions text, with the project's resolutions
(docs/codecs.md#scale_offset-and-cast_value-quantization):

- every inexact cast is rounded by the configured mode (float→int, narrowing float→float,
  int→float with too few significand bits); rounding happens with an unbounded exponent, then
  the range check;
- ``out_of_range``: absent/``"error"`` raises, ``"clamp"`` saturates (±Infinity for float
  targets), ``"wrap"`` (integer targets only) reduces modulo 2**bits;
- NaN or ±Infinity to an integer type is an error unless ``scalar_map`` covers it;
- ``scalar_map`` is looked up once in the original values, first occurrence wins, a NaN key
  matches any NaN, keys match numerically (0.0 matches -0.0);
- the fill value is cast like data; one that is not mapped explicitly and does not survive the
  encode→decode round trip is an error at construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import CodecError
from ._base import ArrayArrayCodec, TileSpec, as_dtype, parse_scalar, same_value, scalar_json

__all__ = ["ROUNDING_MODES", "CastValue"]

ROUNDING_MODES = (
    "nearest-even",
    "towards-zero",
    "towards-positive",
    "towards-negative",
    "nearest-away",
)
OUT_OF_RANGE = ("clamp", "wrap", "error")

_Entries = tuple[tuple[Any, Any], ...]
#: ``scalar_map`` as JSON: ``{"encode": [[from, to], ...], "decode": [[from, to], ...]}``.
ScalarMap = dict[str, list[list[Any]]]


def _real(dtype: np.dtype, what: str) -> np.dtype:
    if dtype.kind not in "iuf":
        raise CodecError(f"cast_value: {what} {dtype.name} is not an integer or float type")
    return dtype


def _norm_json(value: Any) -> Any:
    return "Infinity" if value == "+Infinity" else value


def _scalar_map(scalar_map: Any, target: np.dtype) -> ScalarMap | None:
    """``scalar_map`` checked and normalized (a fresh copy; ``"+Infinity"`` → ``"Infinity"``);
    the entries typed by ``data_type`` are checked now, the others when a chain resolves."""
    if scalar_map is None:
        return None
    if not isinstance(scalar_map, dict) or set(scalar_map) - {"encode", "decode"}:
        raise CodecError("cast_value: scalar_map: expected an object with 'encode'/'decode' lists")
    for direction, entries in scalar_map.items():
        if not isinstance(entries, (list, tuple)) or not all(
            isinstance(e, (list, tuple)) and len(e) == 2 for e in entries
        ):
            raise CodecError(
                f"cast_value: scalar_map.{direction}: expected a list of [from, to] pairs"
            )
    normalized = {
        d: [[_norm_json(a), _norm_json(b)] for a, b in scalar_map[d]]
        for d in ("encode", "decode")
        if d in scalar_map
    }
    for _, value in normalized.get("encode", []):
        parse_scalar(value, target, f"cast_value: scalar_map output for {target.name}")
    for key, _ in normalized.get("decode", []):
        parse_scalar(key, target, f"cast_value: scalar_map.decode key for {target.name}")
    return normalized


@dataclass(frozen=True, init=False)
class CastValue(ArrayArrayCodec):
    """Cast tile values to ``data_type`` (encode) and back (decode) by value.

    ``data_type`` is kept as the NumPy name of the target type and ``scalar_map`` as its JSON
    (a copy, ``"+Infinity"`` written ``"Infinity"``).
    """

    name = "cast_value"

    data_type: str
    rounding: str = "nearest-even"
    out_of_range: str | None = None
    scalar_map: ScalarMap | None = field(default=None, hash=False)  # compared, not hashed
    target: np.dtype = field(init=False, compare=False, repr=False)
    # (encode, decode) entries typed for each source dtype met (see _entries)
    _maps: dict[np.dtype, tuple[_Entries, _Entries]] = field(
        init=False, compare=False, repr=False)

    def __init__(
        self,
        data_type: Any,
        rounding: str = "nearest-even",
        out_of_range: str | None = None,
        scalar_map: dict[str, Sequence[Sequence[Any]]] | None = None,
    ) -> None:
        target = _real(as_dtype(data_type, "cast_value: data_type"), "data_type")
        if rounding not in ROUNDING_MODES:
            raise CodecError(
                f"cast_value: rounding: {rounding!r} is not one of {', '.join(ROUNDING_MODES)}"
            )
        if out_of_range is not None and out_of_range not in OUT_OF_RANGE:
            raise CodecError(
                f"cast_value: out_of_range: {out_of_range!r} is not 'clamp' or 'wrap'"
            )
        if out_of_range == "wrap" and target.kind == "f":
            raise CodecError(
                f"cast_value: out_of_range 'wrap' is only permitted for integer targets, "
                f"not {target.name}"
            )
        # The configuration fields (their defaults are dropped from the JSON).
        object.__setattr__(self, "data_type", target.name)
        object.__setattr__(self, "rounding", rounding)
        object.__setattr__(self, "out_of_range", out_of_range)
        object.__setattr__(self, "scalar_map", _scalar_map(scalar_map, target))
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "_maps", {})

    def _entries(self, source: np.dtype) -> tuple[_Entries, _Entries]:
        """(encode, decode) maps typed by (source, target) and (target, source)."""
        cached = self._maps.get(source)
        if cached is None:
            smap = self.scalar_map or {}
            enc = tuple(
                (
                    parse_scalar(a, source, f"cast_value: scalar_map.encode key for {source.name}"),
                    parse_scalar(b, self.target, "cast_value: scalar_map.encode output"),
                )
                for a, b in smap.get("encode", [])
            )
            dec = tuple(
                (
                    parse_scalar(a, self.target, "cast_value: scalar_map.decode key"),
                    parse_scalar(b, source, f"cast_value: scalar_map.decode output for "
                                 f"{source.name}"),
                )
                for a, b in smap.get("decode", [])
            )
            cached = self._maps[source] = (enc, dec)
        return cached

    def resolve(self, spec: TileSpec) -> TileSpec:
        """The target dtype; the fill value is cast and checked (see the module docstring)."""
        source = _real(spec.dtype, "input data type")
        enc_map, dec_map = self._entries(source)
        fill = spec.fill_value
        if fill is not None:
            arr = np.asarray([fill], dtype=source)
            try:
                enc = self._cast(arr, source, self.target, enc_map)
            except CodecError as exc:
                raise CodecError(f"cast_value: fill value {scalar_json(arr[0])}: {exc}") from None
            if not _matched(arr, enc_map)[0]:
                try:
                    back = self._cast(enc, self.target, source, dec_map)
                except CodecError as exc:
                    raise CodecError(
                        f"cast_value: fill value {scalar_json(arr[0])} does not round-trip: {exc}"
                    ) from None
                if not same_value(back[0], arr[0]):
                    raise CodecError(
                        f"cast_value: fill value {scalar_json(arr[0])} encodes to "
                        f"{scalar_json(enc[0])} and decodes to {scalar_json(back[0])}; a fill "
                        "value must survive the round trip"
                    )
            fill = enc[0]
        return TileSpec(spec.shape, self.target, fill)

    def encode(self, array: np.ndarray, spec: TileSpec) -> np.ndarray:
        """Cast to the target type."""
        return self._cast(array, spec.dtype, self.target, self._entries(spec.dtype)[0])

    def decode(self, array: np.ndarray, spec: TileSpec) -> np.ndarray:
        """Cast back to the source type (same rounding and range rules, decode map)."""
        return self._cast(array, self.target, spec.dtype, self._entries(spec.dtype)[1])

    # ---- the cast ------------------------------------------------------------------------

    def _cast(self, x: np.ndarray, src: np.dtype, tgt: np.dtype, entries: _Entries) -> np.ndarray:
        x = np.asarray(x)
        if x.dtype != src:
            x = x.astype(src)
        if not entries:
            return self._convert(x, src, tgt)
        done, values = _matched(x, entries)
        out = np.empty(x.shape, dtype=tgt)
        for (_, value), mask in zip(entries, values, strict=True):
            out[mask] = value
        rest = ~done
        if rest.any():
            out[rest] = self._convert(x[rest], src, tgt)
        return out

    def _convert(self, x: np.ndarray, src: np.dtype, tgt: np.dtype) -> np.ndarray:
        if tgt.kind in "iu":
            if src.kind in "iu":
                return self._int_to_int(x, src, tgt)
            return self._float_to_int(x, src, tgt)
        return self._to_float(x, src, tgt)

    def _fail(self, value: Any, src: np.dtype, tgt: np.dtype, why: str) -> CodecError:
        return CodecError(
            f"cast_value: {src.name} value {scalar_json(value)} {why} {tgt.name}"
            + ("" if self.out_of_range else " (out_of_range is not set)")
        )

    def _int_to_int(self, x: np.ndarray, src: np.dtype, tgt: np.dtype) -> np.ndarray:
        info = np.iinfo(tgt)
        if x.size == 0 or (info.min <= int(x.min()) and int(x.max()) <= info.max):
            return x.astype(tgt)
        # NumPy compares with out-of-range Python ints exactly (NEP 50).
        low, high = x < info.min, x > info.max
        if self.out_of_range == "wrap":
            return x.astype(tgt)  # integer astype is two's-complement truncation: mod 2**bits
        if self.out_of_range == "clamp":
            out = x.astype(tgt)
            out[low] = info.min
            out[high] = info.max
            return out
        raise self._fail(x[low | high][0], src, tgt, "is out of the range of")

    def _round(self, xf: np.ndarray) -> np.ndarray:
        mode = self.rounding
        if mode == "nearest-even":
            return np.rint(xf)
        if mode == "towards-zero":
            return np.trunc(xf)
        if mode == "towards-positive":
            return np.ceil(xf)
        if mode == "towards-negative":
            return np.floor(xf)
        # nearest-away: trunc plus one step away when the (exact) fraction is >= 1/2; adding
        # 0.5 first would round 0.49999999999999994 up.
        t = np.trunc(xf)
        return t + np.copysign((np.abs(xf - t) >= 0.5).astype(xf.dtype), xf)

    def _float_to_int(self, x: np.ndarray, src: np.dtype, tgt: np.dtype) -> np.ndarray:
        finite = np.isfinite(x)
        if not finite.all():
            bad = x[~finite][0]
            raise self._fail(bad, src, tgt, "cannot be cast (without a scalar_map entry) to")
        r = self._round(x.astype(np.float64))  # exact widening of float16/32
        bits = tgt.itemsize * 8
        lo = 0.0 if tgt.kind == "u" else -(2.0 ** (bits - 1))
        hi_excl = 2.0**bits if tgt.kind == "u" else 2.0 ** (bits - 1)  # exact powers of two
        low, high = r < lo, r >= hi_excl
        if not (low.any() or high.any()):
            return r.astype(tgt)
        if self.out_of_range == "clamp":
            info = np.iinfo(tgt)
            out = np.where(low | high, 0.0, r).astype(tgt)
            out[low] = info.min
            out[high] = info.max
            return out
        if self.out_of_range == "wrap":
            # fmod is exact; reduce modulo 2**64 in uint64 arithmetic (which wraps), then
            # truncate to the target width (two's complement).
            m = np.fmod(r, 2.0**64)
            neg = m < 0
            u = np.abs(m).astype(np.uint64)
            u[neg] = np.uint64(0) - u[neg]
            return u.astype(tgt)
        raise self._fail(x[low | high][0], src, tgt, "rounds out of the range of")

    def _to_float(self, x: np.ndarray, src: np.dtype, tgt: np.dtype) -> np.ndarray:
        fi = np.finfo(tgt)
        if src.kind == "f" and src.itemsize <= tgt.itemsize:
            return x.astype(tgt)  # widening (or same type) is exact
        if src.kind in "iu" and src.itemsize * 8 - (src.kind == "i") <= fi.nmant + 1:
            return x.astype(tgt)  # every integer of the source fits the significand
        # RNE conversion first. int -> float16 goes through float64 (exact below 2**53, and
        # anything above overflows float16) so NumPy's direct conversion is used once only.
        with np.errstate(over="ignore", invalid="ignore"):
            if src.kind in "iu" and tgt.itemsize == 2:
                r = x.astype(np.float64).astype(tgt)
            else:
                r = x.astype(tgt)
        # Out of range after rounding with an unbounded exponent (the rules in
        # docs/codecs.md#scale_offset-and-cast_value-quantization), tested on the source
        # values against thresholds that are exact in the comparison type.
        big_m = float(fi.max)
        # 2**(emax+1), the first power of two out of range (beyond float64 itself: infinite).
        e_lim = 2.0 ** int(fi.maxexp) if fi.maxexp < 1024 else np.inf
        h_lim = big_m + 2.0 ** (int(fi.maxexp) - 2 - int(fi.nmant))  # max + ulp(max) / 2
        cmp = x if src.kind == "f" else x.astype(np.float64)  # monotone, thresholds exact
        with np.errstate(invalid="ignore"):
            mode = self.rounding
            if mode in ("nearest-even", "nearest-away"):
                pos, neg = cmp >= h_lim, cmp <= -h_lim
            elif mode == "towards-zero":
                pos, neg = cmp >= e_lim, cmp <= -e_lim
            elif mode == "towards-positive":
                pos, neg = cmp > big_m, cmp <= -e_lim
            else:
                pos, neg = cmp >= e_lim, cmp < -big_m
            if src.kind == "f":
                finite = np.isfinite(x)
                pos &= finite
                neg &= finite
        oor = pos | neg
        if mode != "nearest-even":
            r = self._directed(x, r, src, tgt, ~oor)
        if oor.any():
            if self.out_of_range != "clamp":
                raise self._fail(x[oor][0], src, tgt, "rounds out of the finite range of")
            # Clamping to a float type saturates at ±Infinity (same rules).
            r[pos] = np.inf
            r[neg] = -np.inf
        return r

    def _directed(
        self, x: np.ndarray, r: np.ndarray, src: np.dtype, tgt: np.dtype, ok: np.ndarray
    ) -> np.ndarray:
        """Adjust the RNE result ``r`` by one step where the mode rounds the other way."""
        # A step from the largest finite value towards infinity is infinity: expected here
        # (out-of-range handling follows), not a floating-point fault.
        with np.errstate(over="ignore"):
            return self._directed_steps(x, r, src, tgt, ok)

    def _directed_steps(
        self, x: np.ndarray, r: np.ndarray, src: np.dtype, tgt: np.dtype, ok: np.ndarray
    ) -> np.ndarray:
        sign = _exact_sign(r, x, src)  # sign(r - x), exact; 0 where equal or non-finite
        sign[~ok] = 0
        mode = self.rounding
        up = np.array(np.inf, dtype=tgt)
        if mode == "towards-positive":
            step_up, step_down = sign < 0, np.zeros_like(ok)
        elif mode == "towards-negative":
            step_up, step_down = np.zeros_like(ok), sign > 0
        elif mode == "towards-zero":
            xs = np.sign(x)
            step_up, step_down = (sign < 0) & (xs < 0), (sign > 0) & (xs > 0)
        else:  # nearest-away: only exact ties differ from RNE
            other = np.nextafter(r, np.where(sign > 0, -up, up).astype(tgt))
            tie = (sign != 0) & (_exact_sign_dist(r, other, x, src) == 0)
            away = np.abs(other.astype(np.float64)) > np.abs(r.astype(np.float64))
            pick = tie & away
            if pick.any():
                r = r.copy()
                r[pick] = other[pick]
            return r
        if step_up.any() or step_down.any():
            r = r.copy()
            r[step_up] = np.nextafter(r[step_up], up)
            r[step_down] = np.nextafter(r[step_down], -up)
        return r


def _matched(x: np.ndarray, entries: _Entries) -> tuple[np.ndarray, list[np.ndarray]]:
    """(any-key mask, per-entry masks); first occurrence wins, NaN keys match any NaN."""
    done = np.zeros(x.shape, dtype=bool)
    masks = []
    for key, _ in entries:
        if isinstance(key, np.floating) and np.isnan(key):
            m = np.isnan(x) if x.dtype.kind == "f" else np.zeros(x.shape, dtype=bool)
        else:
            m = x == key  # numeric equality: 0.0 matches -0.0
        m &= ~done
        done |= m
        masks.append(m)
    return done, masks


def _exact_sign(r: np.ndarray, x: np.ndarray, src: np.dtype) -> np.ndarray:
    """sign(r - x) computed exactly (r: target floats, x: source values); 0 for non-finite."""
    if src.kind == "f":
        back = r.astype(src)  # exact: the target is the narrower type
        with np.errstate(invalid="ignore"):
            return np.where(back > x, 1, np.where(back < x, -1, 0)).astype(np.int8)
    rf = r.astype(np.float64)
    xf = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        out = np.where(rf > xf, 1, np.where(rf < xf, -1, 0)).astype(np.int8)
    # 64-bit integers beyond 2**53 lose precision in float64: decide those exactly.
    if src.itemsize == 8:
        huge = np.abs(xf) >= 2.0**53
        for idx in zip(*np.nonzero(huge), strict=True):
            rv = float(rf[idx])
            if not np.isfinite(rv):
                out[idx] = 1 if rv > 0 else -1
                continue
            diff = int(rv) - int(x[idx])
            out[idx] = (diff > 0) - (diff < 0)
    return out


def _exact_sign_dist(r: np.ndarray, other: np.ndarray, x: np.ndarray, src: np.dtype) -> np.ndarray:
    """sign(|r - x| - |other - x|), exactly (used to detect ties)."""
    if src.kind == "f" and src.itemsize < 8:
        xr = x.astype(np.float64)
        d1 = np.abs(r.astype(np.float64) - xr)
        d2 = np.abs(other.astype(np.float64) - xr)
        return np.sign(d1 - d2)
    if src.kind == "f":
        # float64 source: r, other are narrower floats bracketing x, so x - r and other - x
        # are exact by Sterbenz's lemma except near zero, where both are tiny and exact too.
        with np.errstate(invalid="ignore", over="ignore"):
            d1 = np.abs(r.astype(np.float64) - x)
            d2 = np.abs(other.astype(np.float64) - x)
            # inf - inf (both neighbours overflowed) is NaN: not a tie, and not a fault
            return np.sign(d1 - d2)
    out = np.zeros(x.shape, dtype=np.int8)
    xf = x.astype(np.float64)
    small = np.abs(xf) < 2.0**53
    d1 = np.abs(r.astype(np.float64) - xf)
    d2 = np.abs(other.astype(np.float64) - xf)
    out[small] = np.sign(d1 - d2)[small]
    for idx in zip(*np.nonzero(~small), strict=True):
        xv = int(x[idx])
        a, b = float(r[idx]), float(other[idx])
        if not (np.isfinite(a) and np.isfinite(b)):
            out[idx] = 1
            continue
        e1, e2 = abs(int(a) - xv), abs(int(b) - xv)
        out[idx] = (e1 > e2) - (e1 < e2)
    return out
