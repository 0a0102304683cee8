"""Zstandard data that starts with empty frames is valid (RFC 8878: a stream is any sequence
of frames); tiles, codec chains and attached data all accept it (issue 19 §4)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

import jnrrd
from jnrrd.codecs.compress import decompress, decompress_at_most, decompress_prefix, zstd_into

A = np.arange(4 * 3 * 5, dtype=np.uint8).reshape((4, 3, 5), order="F")
WITH_SIZE = zstandard.ZstdCompressor(write_content_size=True)
NO_SIZE = zstandard.ZstdCompressor(write_content_size=False)
EMPTY = WITH_SIZE.compress(b"")


def frames(layout: str, payload: bytes, c: zstandard.ZstdCompressor = WITH_SIZE) -> bytes:
    """``E`` an empty frame, ``D`` the payload's next piece (the pieces split it evenly)."""
    n = layout.count("D")
    step = -(-len(payload) // n)
    out, k = [], 0
    for tok in layout.split():
        if tok == "E":
            out.append(EMPTY)
        else:
            out.append(c.compress(payload[k * step:(k + 1) * step]))
            k += 1
    return b"".join(out)


LAYOUTS = ["E D", "E E E D", "D E", "E D E D E", "E E D D"]


def tiled_file(path, tiles: list[bytes], codecs: list | None = None,
               tile: tuple[int, int, int] = (4, 3, 1)) -> None:
    """A hand-made tiled file (tiles in linear order, stored back to back)."""
    lines = [{"jnrrd": "0004"}, {"type": "uint8"}, {"dimension": 3}, {"sizes": [4, 3, 5]},
             {"encoding": "raw"},
             {"extensions": {"tile": "https://jnrrd.org/extensions/tile/v1.0.0"}},
             {"tile:enabled": True}, {"tile:dimensions": [0, 1, 2]},
             {"tile:sizes": list(tile)}, {"tile:storage": "internal"}]
    lines.append({"tile:codecs": codecs} if codecs else {"tile:compression": "zstd"})
    sizes = [len(t) for t in tiles]
    offsets = [0] * len(tiles)
    for _ in range(5):
        body = lines + [{"tile:offset_table": offsets}, {"tile:size_table": sizes}]
        head = "".join(json.dumps(x) + "\n" for x in body).encode() + b"\n"
        want = list(np.cumsum([len(head)] + sizes[:-1]))
        if want == offsets:
            break
        offsets = [int(o) for o in want]
    path.write_bytes(head + b"".join(tiles))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("c", [WITH_SIZE, NO_SIZE], ids=["size", "nosize"])
def test_decompress_accepts_leading_empty_frames(layout, c):
    payload = bytes(range(256)) * 4
    data = frames(layout, payload, c)
    assert decompress("zstd", data, len(payload)) == payload
    assert decompress_at_most("zstd", data, len(payload)) == payload
    assert bytes(decompress_prefix("zstd", data, 600)) == payload[:600]


def test_empty_frames_alone_are_empty_data():
    assert decompress("zstd", EMPTY * 3, 0) == b""
    with pytest.raises(jnrrd.DataError, match="short"):
        decompress("zstd", EMPTY * 3, 10)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_tile_of_empty_frames_then_data_reads(tmp_path, layout):
    tiles = [frames(layout, A[:, :, z].tobytes(order="F")) for z in range(5)]
    path = tmp_path / "t.jnrrd"
    tiled_file(path, tiles)
    np.testing.assert_array_equal(jnrrd.read(path)[0], A)
    with jnrrd.open(path) as vol:
        np.testing.assert_array_equal(vol.read_tile((0, 0, 3))[:, :, 0], A[:, :, 3])
    assert jnrrd.validate(path, deep=True) == []
    whole = tmp_path / "w.jnrrd"  # one tile: a selection of its first planes decodes a prefix
    tiled_file(whole, [frames(layout, A.tobytes(order="F"))], tile=(4, 3, 5))
    with jnrrd.open(whole) as vol:
        np.testing.assert_array_equal(vol[:, :, :2], A[:, :, :2])
        np.testing.assert_array_equal(vol[1:, 2, 1], A[1:, 2, 1])
    np.testing.assert_array_equal(jnrrd.read(whole)[0], A)


def test_codec_chain_tile_of_empty_frames_reads(tmp_path):
    tiles = [frames("E D", A[:, :, z].tobytes(order="F")) + b"" for z in range(5)]
    path = tmp_path / "c.jnrrd"
    tiled_file(path, tiles, codecs=[{"name": "bytes", "configuration": {}},
                                    {"name": "zstd", "configuration": {"level": 3}}])
    np.testing.assert_array_equal(jnrrd.read(path)[0], A)


def test_tile_and_attached_data_agree(tmp_path):
    stream = frames("E E D", A.tobytes(order="F"))
    attached = tmp_path / "a.jnrrd"
    lines = [{"jnrrd": "0004"}, {"type": "uint8"}, {"dimension": 3}, {"sizes": [4, 3, 5]},
             {"encoding": "zstd"}]
    attached.write_bytes("".join(json.dumps(x) + "\n" for x in lines).encode() + b"\n"
                         + stream)
    np.testing.assert_array_equal(jnrrd.read(attached)[0], A)
    tiled = tmp_path / "t.jnrrd"
    tiled_file(tiled, [frames("E E D", A[:, :, z].tobytes(order="F")) for z in range(5)])
    np.testing.assert_array_equal(jnrrd.read(tiled)[0], A)


@given(payload=st.binary(min_size=0, max_size=600),
       cuts=st.lists(st.integers(0, 600), max_size=4),
       empties=st.lists(st.integers(0, 6), max_size=4),
       sized=st.booleans(), prefix=st.integers(0, 600))
def test_any_frame_sequence_decodes_on_every_path(payload, cuts, empties, sized, prefix):
    """Empty frames anywhere (before, between, after data frames; with or without a content
    size) never change what a zstd stream decodes to."""
    c = WITH_SIZE if sized else NO_SIZE
    bounds = sorted({0, len(payload), *(min(x, len(payload)) for x in cuts)})
    pieces = [payload[a:b] for a, b in zip(bounds, bounds[1:])] or [b""]
    parts = []
    for i, piece in enumerate(pieces):
        parts.extend([EMPTY] * (empties[i] if i < len(empties) else 0))
        parts.append(c.compress(piece))
    parts.extend([EMPTY] * (empties[-1] if empties else 0))
    data = b"".join(parts)
    assert decompress("zstd", data, len(payload)) == payload
    assert decompress_at_most("zstd", data, len(payload)) == payload
    need = min(prefix, len(payload))
    assert bytes(decompress_prefix("zstd", data, need)) == payload[:need]
    out = bytearray(len(payload))
    zstd_into(data, memoryview(out), exact=True)
    assert bytes(out) == payload
