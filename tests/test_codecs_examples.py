"""The codec documents' examples, end to end (issue #3 "Done when")."""

from __future__ import annotations

import base64
import io
import json
import os
import struct
from pathlib import Path

import numpy as np
import pytest
import tifffile
from hypothesis import given
from hypothesis import strategies as st

from jnrrd.codecs import Bytes, CodecChain, NumcodecsZlib, Offset, Pad, Zstd

TIFF_110 = base64.b64decode(
    "SUkqAAgAAAAIAAABAwABAAAAAAEAAAEBAwABAAAAAAEAAAIBAwABAAAAEAAAAAMBAwABAAAAAQAAAAYBAwABAAAA"
    "AQAAABEBBAABAAAAbgAAABYBAwABAAAAAAEAABcBBAABAAAAAAACAAAAAAA="
)
N5_HEADER = b"\x00\x00\x00\x02\x00\x00\x00\x40\x00\x00\x00\x40"
VECTORS = Path(os.environ.get("JNRRD_VECTORS", Path(__file__).resolve().parent / "vectors"))


def image(width: int, height: int, seed: int = 0) -> np.ndarray:
    """A jnrrd tile of a 2-D image: axis 0 is x (fastest, like a TIFF row)."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 65536, size=(width, height), dtype=np.uint16)


def tiff_header(width: int, height: int, compression: int):
    """A callable padding: a 110-byte little-endian TIFF header for the encoded strip."""

    def make(encoded: bytes) -> bytes:
        entries = [(256, 3, width), (257, 3, height), (258, 3, 16), (259, 3, compression),
                   (262, 3, 1), (273, 4, 110), (278, 3, height), (279, 4, len(encoded))]
        ifd = struct.pack("<H", len(entries))
        ifd += b"".join(struct.pack("<HHII", *e[:2], 1, e[2]) for e in entries)
        return b"II*\x00\x08\x00\x00\x00" + ifd + struct.pack("<I", 0)

    return make


@pytest.mark.parametrize("framing", [Pad("start", 110, TIFF_110), Offset(110, TIFF_110)],
                         ids=["pad", "offset"])
def test_static_tiff_prefix(framing) -> None:
    tile = image(256, 256)
    chain = CodecChain([Bytes("little"), framing], dtype="uint16", shape=(256, 256))
    stored = chain.encode(tile)
    assert len(stored) == 110 + 131072
    # tifffile indexes [row, column] = [y, x]: the transpose of the jnrrd tile.
    assert np.array_equal(tifffile.imread(io.BytesIO(stored)), tile.T)
    assert np.array_equal(chain.decode(stored), tile)


@pytest.mark.parametrize(
    "compressor, tiff_compression",
    [(None, 1), (NumcodecsZlib(level=6), 8), (Zstd(level=3), 50000)],
    ids=["none", "deflate", "zstd"],
)
@pytest.mark.parametrize("framing", ["pad", "offset"])
def test_callable_tiff_prefix_for_edge_tiles(compressor, tiff_compression, framing) -> None:
    width, height = 100, 37  # an edge tile of another size
    tile = (np.add.outer(np.arange(width), 3 * np.arange(height)) % 700).astype(np.uint16)
    header = tiff_header(width, height, tiff_compression)
    frame = Pad("start", 110, header) if framing == "pad" else Offset(110, header)
    codecs = [Bytes("little"), *([compressor] if compressor else []), frame]
    chain = CodecChain(codecs, dtype="uint16", shape=(width, height))
    stored = chain.encode(tile)
    with tifffile.TiffFile(io.BytesIO(stored)) as tif:
        assert tif.pages[0].compression == tiff_compression
        assert np.array_equal(tif.asarray(), tile.T)
    assert np.array_equal(chain.decode(stored), tile)


def test_n5_block_written_in_n5_layout() -> None:
    # An N5 block: big-endian header (mode 0, 2 dims, 64 x 64), then zstd of the big-endian
    # data with dimension 0 fastest -- jnrrd's own axis order, so no transpose is needed.
    block = image(64, 64, seed=3)
    stored = N5_HEADER + Zstd(level=3).encode(block.astype(">u2").tobytes(order="F"))
    chain = CodecChain.from_json(
        [{"name": "bytes", "configuration": {"endian": "big"}},
         {"name": "zstd", "configuration": {"level": 3}},
         {"name": "pad", "configuration": {"location": "start", "nbytes": 12,
                                            "padding": "AAAAAgAAAEAAAABA"}}],
        dtype="uint16", shape=(64, 64))
    assert np.array_equal(chain.decode(stored), block)
    assert chain.encode(block)[:12] == N5_HEADER


def test_n5_block_written_by_tensorstore() -> None:
    case = next(c for c in json.loads((VECTORS / "pipelines.json").read_text())
                if c["id"] == "pipe-n5-block-via-pad")
    # N5 dimension d is jnrrd axis d; the vector's zarr array lists N5 dimensions in order.
    n5_block = np.array(case["input"]["data"], dtype=np.uint16).reshape(case["input"]["shape"])
    chain = CodecChain.from_json(
        [{"name": "bytes", "configuration": {"endian": "big"}},
         {"name": "zstd", "configuration": {"level": 3}},
         {"name": "offset", "configuration": {"offset": 12, "prefix": "AAAAAgAAAEAAAABA"}}],
        dtype="uint16", shape=n5_block.shape)
    assert np.array_equal(chain.decode(base64.b64decode(case["decodes_from"])), n5_block)


QUANT = [
    {"name": "scale_offset", "configuration": {"offset": -10, "scale": 0.1}},
    {"name": "cast_value", "configuration": {
        "data_type": "uint8", "rounding": "nearest-even",
        "scalar_map": {"encode": [["NaN", 0]], "decode": [[0, "NaN"]]}}},
    "bytes",
]


@given(st.lists(st.one_of(st.floats(-4.9, 2540.0), st.just(float("nan"))), min_size=1,
                max_size=64))
def test_float64_to_uint8_quantization(values: list[float]) -> None:
    x = np.array(values, dtype=np.float64)
    chain = CodecChain.from_json(QUANT, dtype="float64", shape=x.shape, fill_value=float("nan"))
    assert chain.encoded_fill_value == 0
    stored = chain.encode(x)
    assert len(stored) == x.size
    y = chain.decode(stored)
    nan = np.isnan(x)
    assert np.array_equal(np.isnan(y), nan)
    assert np.all(np.frombuffer(stored, np.uint8)[nan] == 0)
    # Within half a quantization step (0.5 / scale = 5), plus float rounding of the scale.
    assert np.all(np.abs(y[~nan] - x[~nan]) <= 5.0 + 1e-9)


def test_conditional_compress_if_smaller() -> None:
    rng = np.random.default_rng(7)
    shape = (32, 32, 16)
    raw = int(np.prod(shape)) * 2
    chain = CodecChain.from_json(
        [{"name": "bytes", "configuration": {"endian": "little"}},
         {"name": "conditional", "configuration": {"codecs": [
             {"name": "zstd", "configuration": {"level": 3}}]}}],
        dtype="uint16", shape=shape, decision="compress_if_smaller")
    noise = rng.integers(0, 65536, size=shape, dtype=np.uint16)
    z, y, x = np.meshgrid(*(np.arange(n) for n in shape), indexing="ij")
    smooth = (1000 + 10 * z + 5 * y + x).astype(np.uint16)
    stored_noise, stored_smooth = chain.encode(noise), chain.encode(smooth)
    assert stored_noise[0] == 0 and len(stored_noise) == raw + 1
    assert stored_smooth[0] == 1 and len(stored_smooth) < raw // 4
    for tile, stored in ((noise, stored_noise), (smooth, stored_smooth)):
        assert np.array_equal(chain.decode(stored), tile)


@given(st.binary(min_size=0, max_size=2048), st.integers(0, 3))
def test_compress_if_smaller_never_grows(data: bytes, repeat: int) -> None:
    payload = data * (repeat + 1)
    chain = CodecChain.from_json(
        ["bytes", {"name": "conditional", "configuration": {"codecs": [
            {"name": "gzip", "configuration": {"level": 6}},
            {"name": "zstd", "configuration": {"level": 1}}]}}],
        dtype="uint8", shape=(len(payload),), decision="compress_if_smaller")
    tile = np.frombuffer(payload, np.uint8)
    stored = chain.encode(tile)
    assert len(stored) <= len(payload) + 1
    assert np.array_equal(chain.decode(stored), tile)
