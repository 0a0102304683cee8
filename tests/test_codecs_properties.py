"""Property-based round trips of codec chains (hypothesis; settings from tests/conftest.py)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from jnrrd.codecs import CastValue, CodecChain, get_codec

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64", "complex64"]

BYTES_BYTES = [
    {"name": "gzip", "configuration": {"level": 1}},
    {"name": "zstd", "configuration": {"level": 1, "checksum": True}},
    {"name": "lz4"},
    {"name": "bz2", "configuration": {"level": 1}},
    {"name": "numcodecs.lz4", "configuration": {"acceleration": 2}},
    {"name": "numcodecs.zlib", "configuration": {"level": 1}},
    {"name": "numcodecs.shuffle", "configuration": {"elementsize": 4}},
    {"name": "crc32c"},
    {"name": "pad", "configuration": {"location": "end", "nbytes": 3, "padding": "YWJj"}},
    {"name": "offset", "configuration": {"offset": 2}},
    {"name": "conditional", "configuration": {"codecs": [
        {"name": "numcodecs.shuffle", "configuration": {"elementsize": 2}},
        {"name": "zstd", "configuration": {"level": 1}}]}},
]


@st.composite
def lossless_cases(draw: st.DrawFn):
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=1, max_size=3)))
    array = draw(hnp.arrays(dtype, shape))
    codecs = []
    if draw(st.booleans()) and len(shape) > 1:
        codecs.append({"name": "transpose",
                       "configuration": {"order": draw(st.permutations(range(len(shape))))}})
    codecs.append({"name": "bytes",
                   "configuration": {"endian": draw(st.sampled_from(["little", "big"]))}})
    codecs += draw(st.lists(st.sampled_from(BYTES_BYTES), max_size=3))
    decision = draw(st.sampled_from([None, "always", "compress_if_smaller", 2]))
    return array, codecs, decision


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@given(lossless_cases())
def test_lossless_round_trip(case) -> None:
    array, codecs, decision = case
    chain = CodecChain.from_json(codecs, dtype=array.dtype, shape=array.shape, decision=decision)
    stored = chain.encode(array)
    decoded = chain.decode(stored)
    assert _same(np.ascontiguousarray(decoded), np.ascontiguousarray(array))
    if chain.encoded_size is not None:
        assert len(stored) == chain.encoded_size
    assert [get_codec(c).to_json() for c in codecs] == chain.to_json()


@given(
    st.floats(-1000, 1000),
    st.sampled_from([0.5, 0.1, 0.01, 2.0, 0.25]),
    st.sampled_from(["uint8", "int16", "uint16", "int32"]),
    st.sampled_from(["nearest-even", "nearest-away", "towards-zero"]),
    st.data(),
)
def test_quantization_error_bound(offset, scale, target, rounding, data) -> None:
    info = np.iinfo(target)
    lo = max(float(info.min) + 1, -1e6) / scale + offset
    hi = min(float(info.max), 1e6) / scale + offset
    values = data.draw(st.lists(st.one_of(st.floats(lo, hi), st.just(float("nan"))),
                                min_size=1, max_size=32))
    x = np.array(values, dtype=np.float64)
    sentinel = int(info.min)
    codecs = [
        {"name": "scale_offset", "configuration": {"offset": offset, "scale": scale}},
        {"name": "cast_value", "configuration": {
            "data_type": target, "rounding": rounding, "out_of_range": "clamp",
            "scalar_map": {"encode": [["NaN", sentinel]], "decode": [[sentinel, "NaN"]]}}},
        {"name": "bytes", "configuration": {"endian": "little"}},
    ]
    chain = CodecChain.from_json(codecs, dtype="float64", shape=x.shape)
    y = chain.decode(chain.encode(x))
    nan = np.isnan(x)
    assert np.array_equal(np.isnan(y), nan)
    step = 1.0 / scale
    # nearest modes: half a step; towards-zero: under one step (plus float rounding).
    bound = (0.5 if rounding.startswith("nearest") else 1.0) * step * (1 + 1e-9) + 1e-9
    assert np.all(np.abs(y[~nan] - x[~nan]) <= bound)


@given(
    hnp.arrays(np.float64, st.integers(1, 20),
               elements=st.floats(allow_nan=True, allow_infinity=True, width=64)),
    st.sampled_from(["float32", "float16"]),
    st.sampled_from(["nearest-even", "towards-zero", "towards-positive", "towards-negative",
                     "nearest-away"]),
)
def test_float_narrowing_brackets_the_value(x, target, rounding) -> None:
    codec = CastValue(target, rounding=rounding, out_of_range="clamp")
    from jnrrd.codecs import TileSpec

    spec = TileSpec(x.shape, np.dtype(np.float64))
    y = codec.encode(x, spec).astype(np.float64)
    finite = np.isfinite(x) & np.isfinite(y)
    tgt = np.dtype(target)
    with np.errstate(over="ignore"):  # stepping past the largest finite value gives ±inf
        lower = np.nextafter(y.astype(tgt), np.array(-np.inf, tgt)).astype(np.float64)
        upper = np.nextafter(y.astype(tgt), np.array(np.inf, tgt)).astype(np.float64)
    # The result is one of the two target values around x.
    assert np.all((lower[finite] <= x[finite]) & (x[finite] <= upper[finite]))
    if rounding == "towards-positive":
        assert np.all(y[finite] >= x[finite])
    if rounding == "towards-negative":
        assert np.all(y[finite] <= x[finite])
    if rounding == "towards-zero":
        assert np.all(np.abs(y[finite]) <= np.abs(x[finite]))
    if rounding == "nearest-even":
        with np.errstate(over="ignore"):
            ref = x.astype(tgt).astype(np.float64)
        assert np.array_equal(y[finite & np.isfinite(ref)], ref[finite & np.isfinite(ref)])
    assert np.array_equal(np.isnan(y), np.isnan(x))
