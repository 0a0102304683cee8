"""The shared codec vectors (``../shared/vectors``) as the conformance suite (CONVENTIONS §2).

The vector files are read from the shared folder at test time (``JNRRD_VECTORS`` overrides the
location). Arrays are zarr (C-order) arrays; each is mapped onto jnrrd's axis order as
CONVENTIONS §2 says: ``tile = data.reshape(shape).T`` and transpose orders remapped.
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
    BytesBytesCodec,
    get_codec,
)
from jnrrd.errors import CodecError, DataError

VECTORS = Path(
    os.environ.get("JNRRD_VECTORS", Path(__file__).resolve().parents[2] / "shared" / "vectors")
)
_SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "+Infinity": math.inf,
            "-Infinity": -math.inf}

# Decode failures are DataError (corrupt/short bytes, checksum) unless the stored bytes are
# intact but carry a value the codec's rules cannot map (CONVENTIONS §3).
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


@pytest.mark.parametrize("case", [c for c in cases(*BYTES_FILES) if kind(c.values[0]) != "error"])
def test_bytes_codec_vector_caps_output(case: Any) -> None:
    # Every decoder refuses to produce more than the expected size.
    codec = get_codec(case["codec"], **runtime_for(case))
    data = b64(case["input"])
    stored = b64(case["encoded"] if "encoded" in case else case["decodes_from"])
    if not data:
        return  # nothing smaller than empty to expect
    with pytest.raises(DataError):
        codec.decode(stored, size=len(data) - 1)
    with pytest.raises(DataError):
        codec.decode(stored, limit=len(data) - 1)
