"""The shared codec vectors (``tests/vectors``) as the conformance suite
(docs/format.md#zarr-axis-order).

The vector files are read from ``tests/vectors`` (a copy of the shared vectors;
``JNRRD_VECTORS`` overrides the location). Arrays are zarr (C-order) arrays; each is mapped
onto jnrrd's axis order as docs/format.md#zarr-axis-order says: ``tile = data.reshape(shape).T`` and
transpose orders remapped.
Every case runs; none is skipped.
"""

from __future__ import annotations

import base64
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from jnrrd.codecs import (
    ArrayArrayCodec,
    Bytes,
    BytesBytesCodec,
    CodecChain,
    Conditional,
    TileSpec,
    get_codec,
)
from jnrrd.errors import CodecError, DataError

# A copy of the shared vectors lives in tests/vectors (see its README)
VECTORS = Path(os.environ.get("JNRRD_VECTORS", Path(__file__).resolve().parent / "vectors"))
_SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "+Infinity": math.inf,
            "-Infinity": -math.inf}

# Decode failures are DataError (corrupt/short bytes, checksum) unless the stored bytes are
# intact but carry a value the codec's rules cannot map (docs/api.md#errors-and-warnings).
DECODE_CODEC_ERRORS = {
    "opt-err-decode-reserved-bit-hb8",
    "opt-err-decode-reserved-bit-hb16",
    "so-err-decode-inexact-division",
}


def load(name: str) -> list[dict[str, Any]]:
    """The cases of one vector file."""
    return json.loads((VECTORS / name).read_text(encoding="utf-8"))


def b64(text: str) -> bytes:
    """Decode a base64 field."""
    return base64.b64decode(text)


def varray(obj: dict[str, Any]) -> np.ndarray:
    """A vector array (C order, zarr shape) as NumPy."""
    dtype = np.dtype(obj["dtype"])
    data = obj["data"]
    if dtype.kind == "f":
        values = np.array([_SPECIAL[v] if isinstance(v, str) else float(v) for v in data],
                          dtype=np.float64).astype(dtype)
    else:
        values = np.array(data, dtype=dtype)
    return values.reshape(obj["shape"])


def jnrrd_order(order: list[int]) -> list[int]:
    """A zarr transpose order on n axes in jnrrd's axis order: p[i] = n-1-o[n-1-i]."""
    n = len(order)
    return [n - 1 - order[n - 1 - i] for i in range(n)]


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-exact equality, except that NaNs match by position."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind == "f":
        na, nb = np.isnan(a), np.isnan(b)
        if not np.array_equal(na, nb):
            return False
        return np.array_equal(a[~na].view(f"u{a.itemsize}"), b[~nb].view(f"u{b.itemsize}"))
    return np.array_equal(a, b)


def fill(value: Any, dtype: np.dtype) -> Any:
    """A vector fill value as a NumPy scalar of ``dtype``."""
    if isinstance(value, str):
        return np.dtype(dtype).type(_SPECIAL[value])
    return np.asarray(value).astype(dtype)[()]


def cases(*files: str) -> list[Any]:
    """pytest params, one per case, named by the case id."""
    return [pytest.param(c, id=c["id"]) for f in files for c in load(f)]


def runtime_for(case: dict[str, Any]) -> dict[str, Any]:
    """The conditional codec's runtime mask as its decision."""
    return {"decision": case["mask"]} if "mask" in case else {}


def kind(case: dict[str, Any]) -> str:
    """'error', 'exact' or 'round trip' (README table)."""
    if "error" in case:
        return "error"
    return "exact" if "encoded" in case else "round trip"


def expected_decode_error(case: dict[str, Any]) -> type[Exception]:
    """CodecError or DataError for a decode-direction error case."""
    return CodecError if case["id"] in DECODE_CODEC_ERRORS else DataError


# ---- bytes->bytes codecs ------------------------------------------------------------------

BYTES_FILES = ("gzip.json", "zstd.json", "crc32c.json", "numcodecs.bz2.json",
               "numcodecs.lz4.json", "pad.json", "offset.json", "optional.json")


@pytest.mark.slow
@pytest.mark.parametrize("case", cases(*BYTES_FILES))
def test_bytes_codec_vector(case: dict[str, Any]) -> None:
    if kind(case) == "error":
        if case["direction"] == "metadata":
            with pytest.raises(CodecError):
                get_codec(case["codec"])
            return
        codec = get_codec(case["codec"], **runtime_for(case))
        with pytest.raises(expected_decode_error(case)):
            codec.decode(b64(case["encoded"]))
        return
    codec = get_codec(case["codec"], **runtime_for(case))
    assert isinstance(codec, BytesBytesCodec)
    data = b64(case["input"])
    if "input_sha256" in case:
        import hashlib

        assert hashlib.sha256(data).hexdigest() == case["input_sha256"]
    encoded = codec.encode(data)
    if kind(case) == "exact":
        assert encoded == b64(case["encoded"])
        stored = b64(case["encoded"])
    else:
        stored = b64(case["decodes_from"])
        if "encoded_header" in case:
            header = b64(case["encoded_header"])
            assert encoded[: len(header)] == header
    # Decode with the exact expected size (as in a chain) and with only a bound.
    assert bytes(codec.decode(stored, size=len(data))) == data
    assert bytes(codec.decode(stored, limit=len(data) + 1024)) == data
    assert bytes(codec.decode(encoded, size=len(data))) == data
    # Canonical JSON is a fixed point and rebuilds an equal codec.
    again = get_codec(codec.to_json())
    assert again == codec and again.to_json() == codec.to_json()


@pytest.mark.parametrize(
    "case",
    [c for c in cases(*BYTES_FILES) if kind(c.values[0]) != "error" and c.values[0]["input"]],
)
def test_bytes_codec_vector_caps_output(case: dict[str, Any]) -> None:
    # Every decoder refuses to produce more than the expected size (empty inputs excluded:
    # nothing is smaller than empty).
    codec = get_codec(case["codec"], **runtime_for(case))
    data = b64(case["input"])
    stored = b64(case["encoded"] if "encoded" in case else case["decodes_from"])
    with pytest.raises(DataError):
        codec.decode(stored, size=len(data) - 1)
    with pytest.raises(DataError):
        codec.decode(stored, limit=len(data) - 1)


# ---- array->array codecs ------------------------------------------------------------------


def _fill_of(case: dict[str, Any], dtype: np.dtype) -> Any:
    return fill(case["fill_value"], dtype) if "fill_value" in case else None


@pytest.mark.slow
@pytest.mark.parametrize("case", cases("scale_offset.json", "cast_value.json"))
def test_array_codec_vector(case: dict[str, Any]) -> None:
    if kind(case) == "error":
        source = case["input"] if "input" in case else case.get("encoded")
        dtype = np.dtype(case.get("input_dtype") or source["dtype"])
        spec = TileSpec((1,), dtype, _fill_of(case, dtype))
        with pytest.raises(CodecError):
            codec = get_codec(case["codec"])
            out_spec = codec.resolve(spec)
            if case["direction"] == "encode":
                x = varray(case["input"])
                codec.encode(x, TileSpec(x.shape, dtype, spec.fill_value))
            elif case["direction"] == "decode":
                y = varray(case["encoded"])
                codec.decode(y, TileSpec(y.shape, dtype, spec.fill_value))
            else:
                # Metadata errors must surface while building/resolving, not later.
                pytest.fail(f"metadata accepted: {codec.to_json()} -> {out_spec}")
        return
    codec = get_codec(case["codec"])
    assert isinstance(codec, ArrayArrayCodec)
    x = varray(case["input"])
    spec = TileSpec(x.shape, x.dtype, _fill_of(case, x.dtype))
    out_spec = codec.resolve(spec)
    encoded = varray(case["encoded"]) if "encoded" in case else None
    enc = codec.encode(x, spec)
    if encoded is not None:
        assert same(enc, encoded), (enc, encoded)
        assert out_spec.dtype == encoded.dtype
    expected = varray(case["decoded"]) if "decoded" in case else x
    assert same(codec.decode(enc, spec), expected)
    if "encoded_fill_value" in case:
        assert same(np.asarray(out_spec.fill_value),
                    np.asarray(fill(case["encoded_fill_value"], out_spec.dtype)))
    # The same case through a whole chain, in jnrrd's axis order.
    chain = CodecChain([codec, Bytes("little")], dtype=x.dtype, shape=x.T.shape,
                       fill_value=spec.fill_value)
    stored = chain.encode(x.T)
    if encoded is not None:
        assert stored == encoded.astype(encoded.dtype.newbyteorder("<")).tobytes()
    assert same(chain.decode(stored), expected.T)
    again = get_codec(codec.to_json())
    assert again == codec and again.to_json() == codec.to_json()


# ---- the bytes codec (array->bytes) -------------------------------------------------------


@pytest.mark.parametrize("case", cases("bytes.json"))
def test_bytes_vector(case: dict[str, Any]) -> None:
    if kind(case) == "error":
        with pytest.raises(CodecError):
            CodecChain.from_json([case["codec"]], dtype=case["input_dtype"], shape=(2,))
        return
    x = varray(case["input"])
    tile = x.T
    chain = CodecChain.from_json([case["codec"]], dtype=x.dtype, shape=tile.shape)
    stored = chain.encode(tile)
    assert stored == b64(case["encoded"])
    assert same(chain.decode(stored), tile)
    assert chain.decode(stored)[tuple(i - 1 for i in tile.shape)] == x.flat[-1]
    with pytest.raises(DataError):
        chain.decode(stored[:-1])
    with pytest.raises(DataError):
        chain.decode(stored + b"\0")


# ---- whole codec lists --------------------------------------------------------------------


def jnrrd_codecs(codecs: list[Any]) -> list[Any]:
    """A zarr codec list in jnrrd's axis order (transpose orders remapped)."""
    out = []
    for c in codecs:
        if isinstance(c, dict) and c.get("name") == "transpose":
            c = {"name": "transpose",
                 "configuration": {"order": jnrrd_order(c["configuration"]["order"])}}
        out.append(c)
    return out


@pytest.mark.parametrize("case", cases("pipelines.json"))
def test_pipeline_vector(case: dict[str, Any]) -> None:
    x = varray(case["input"])
    tile = x.T
    masks = case.get("mask", {})
    built = [get_codec(c, **({"decision": masks[str(i)]} if str(i) in masks else {}))
             for i, c in enumerate(jnrrd_codecs(case["codecs"]))]
    chain = CodecChain(built, dtype=x.dtype, shape=tile.shape,
                       fill_value=_fill_of(case, x.dtype))
    expected = varray(case["decoded"]).T if "decoded" in case else tile
    if "encoded" in case:
        assert chain.encode(tile) == b64(case["encoded"])
        assert same(chain.decode(b64(case["encoded"])), expected)
    else:
        assert same(chain.decode(b64(case["decodes_from"])), expected)
    assert same(chain.decode(chain.encode(tile)), expected)


def test_every_vector_file_is_used() -> None:
    used = {"bytes.json", "scale_offset.json", "cast_value.json", "pipelines.json", *BYTES_FILES}
    present = {p.name for p in VECTORS.glob("*.json")}
    assert present == used


def test_conditional_alias_reads_as_conditional() -> None:
    codec = get_codec({"name": "optional", "configuration": {"codecs": [{"name": "crc32c"}]}})
    assert isinstance(codec, Conditional)
    assert codec.to_json() == {"name": "conditional",
                               "configuration": {"codecs": [{"name": "crc32c"}]}}
