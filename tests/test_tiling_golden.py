"""Golden fixtures: hand-computed tile bytes and tables, checked both ways.

Every case is a small uint8 array ``a[x, y] = x + 4y`` (sizes [4, 3]) with 2×2 tiles; the
expected stored tiles are written out by hand below (axis 0 fastest inside a tile, tiles in
linear order with the first tiled axis fastest). The writer must produce exactly these bytes
and tables; a file assembled by hand from them must read back as the array.
"""

from __future__ import annotations

import bz2
import gzip
import json
import zlib

import lz4.frame
import numpy as np
import pytest
import zstandard

import jnrrd

A = np.arange(12, dtype=np.uint8).reshape((4, 3), order="F")  # a[x, y] = x + 4y
FF = 0xFF

# tile order: (0,0) (1,0) (0,1) (1,1)
PAD = [[0, 1, 4, 5], [2, 3, 6, 7], [8, 9, FF, FF], [10, 11, FF, FF]]
VARIABLE = [[0, 1, 4, 5], [2, 3, 6, 7], [8, 9], [10, 11]]
# overlap 1 along axis 0 only: stored x-extent [tT-1, tT+3)
PAD_OVERLAP = [
    [FF, 0, 1, 2, FF, 4, 5, 6],
    [1, 2, 3, FF, 5, 6, 7, FF],
    [FF, 8, 9, 10, FF, FF, FF, FF],
    [9, 10, 11, FF, FF, FF, FF, FF],
]
VARIABLE_OVERLAP = [[0, 1, 2, 4, 5, 6], [1, 2, 3, 5, 6, 7], [8, 9, 10], [9, 10, 11]]

CASES = [
    pytest.param({}, PAD, id="pad"),
    pytest.param({"edge": "variable"}, VARIABLE, id="variable"),
    pytest.param({"overlap": [1, 0]}, PAD_OVERLAP, id="pad-overlap"),
    pytest.param({"edge": "variable", "overlap": [1, 0]}, VARIABLE_OVERLAP, id="variable-overlap"),
]

DECOMPRESS = {
    None: bytes,
    "gzip": gzip.decompress,
    "bzip2": bz2.decompress,
    "zstd": lambda b: zstandard.ZstdDecompressor().decompressobj().decompress(b),
    "lz4": lz4.frame.decompress,
}
COMPRESS = {
    "raw": bytes,
    "gzip": lambda b: gzip.compress(b, mtime=0),
    "bzip2": bz2.compress,
    "zstd": lambda b: zstandard.ZstdCompressor(level=3).compress(b),
    "lz4": lz4.frame.compress,
}


def split(path: str) -> tuple[dict, int, bytes]:
    with open(path, "rb") as f:
        raw = f.read()
    end = raw.index(b"\n\n") + 2
    header = {}
    for line in raw[: end - 2].split(b"\n"):
        header.update(json.loads(line))
    return header, end, raw


@pytest.mark.slow
@pytest.mark.parametrize("compression", [None, "gzip", "bzip2", "zstd", "lz4"])
@pytest.mark.parametrize(("opts", "tiles"), CASES)
def test_writer_produces_the_golden_tiles(tmp_path, opts, tiles, compression):
    path = str(tmp_path / "g.jnrrd")
    pad = {} if opts.get("edge") == "variable" else {"padding_value": 255}
    jnrrd.write(path, A, tile=(2, 2), compression=compression, **opts, **pad)
    header, data_start, raw = split(path)
    offsets, sizes = header["tile:offset_table"], header["tile:size_table"]
    assert header["tile:dimensions"] == [0, 1]
    assert header["tile:sizes"] == [2, 2]
    assert header["tile:compression"] == (compression or "raw")
    if compression is None:
        assert offsets[0] == data_start  # sizes known in advance: the exact fixed point
    else:
        # the header was given its upper bound; the gap before the first tile is zero-filled
        assert offsets[0] >= data_start and raw[data_start : offsets[0]].strip(b"\0") == b""
    for i, want in enumerate(tiles):
        stored = raw[offsets[i] : offsets[i] + sizes[i]]
        assert DECOMPRESS[compression](stored) == bytes(want), f"tile {i}"
        if i:
            assert offsets[i] == offsets[i - 1] + sizes[i - 1]  # contiguous
    assert len(raw) == offsets[-1] + sizes[-1]
    if compression is None:
        assert sizes == [len(t) for t in tiles]


def hand_file(path, tiles, extra: dict, *, order=None, compression="raw"):
    """Assemble a file by hand: header lines, blank line, then the tiles (optionally reordered)."""
    blobs = [COMPRESS[compression](bytes(t)) for t in tiles]
    order = order or list(range(len(tiles)))
    lines = [{"jnrrd": "0004"}, {"type": "uint8"}, {"dimension": 2}, {"sizes": [4, 3]},
             {"encoding": "raw"},
             {"extensions": {"tile": "https://jnrrd.org/extensions/tile/v1.0.0"}},
             {"tile:enabled": True}, {"tile:dimensions": [0, 1]}, {"tile:sizes": [2, 2]},
             {"tile:storage": "internal"}, {"tile:compression": compression}]
    lines += [{k: v} for k, v in extra.items()]

    def render(offsets, sizes):
        body = lines + [{"tile:offset_table": offsets}, {"tile:size_table": sizes}]
        return "".join(json.dumps(x) + "\n" for x in body).encode() + b"\n"

    start = 0
    for _ in range(5):
        offsets, pos = [0] * len(blobs), start
        for i in order:
            offsets[i] = pos
            pos += len(blobs[i])
        head = render(offsets, [len(b) for b in blobs])
        if len(head) == start:
            break
        start = len(head)
    with open(path, "wb") as f:
        f.write(head)
        for i in order:
            f.write(blobs[i])


@pytest.mark.parametrize("compression", ["raw", "gzip", "bzip2", "zstd", "lz4"])
@pytest.mark.parametrize(("opts", "tiles"), CASES)
def test_reader_reads_hand_made_files(tmp_path, opts, tiles, compression):
    extra = {}
    if opts.get("edge"):
        extra["tile:edge_handling"] = opts["edge"]
    if opts.get("overlap"):
        extra["tile:overlap"] = opts["overlap"]
    extra["tile:padding_value"] = 255
    path = str(tmp_path / "h.jnrrd")
    hand_file(path, tiles, extra, compression=compression)
    data, header = jnrrd.read(path)
    np.testing.assert_array_equal(data, A)
    with jnrrd.open(path) as vol:
        assert vol.read_tile((0, 1)).ravel(order="F").tolist() == tiles[2]
        np.testing.assert_array_equal(vol.read_tile((1, 1), core=True), A[2:4, 2:3])


def test_chunked_file_with_tiles_in_reverse_order(tmp_path):
    path = str(tmp_path / "c.jnrrd")
    hand_file(path, PAD, {"tile:format": "chunked", "tile:padding_value": 255},
              order=[3, 2, 1, 0])
    np.testing.assert_array_equal(jnrrd.read(path)[0], A)


def test_sparse_internal_tiles_read_as_padding(tmp_path):
    path = str(tmp_path / "s.jnrrd")
    b = A.copy()
    b[2:4, 0:2] = 7  # tile (1, 0) is all padding value
    jnrrd.write(path, b, tile=(2, 2), padding_value=7, sparse=True)
    header, _, _ = split(path)
    assert header["tile:offset_table"][1] is None
    assert header["tile:size_table"][1] is None
    np.testing.assert_array_equal(jnrrd.read(path)[0], b)


def test_external_pattern_tiles_hold_the_golden_bytes(tmp_path):
    path = str(tmp_path / "e.jnrrd")
    jnrrd.write(path, A, tile=(2, 2), storage="external", pattern="t_{y}_{x}.raw",
                padding_value=255)
    header, _, _ = split(path)
    base = tmp_path / header["tile:base_dir"]
    for i, (x, y) in enumerate([(0, 0), (1, 0), (0, 1), (1, 1)]):
        assert (base / f"t_{y}_{x}.raw").read_bytes() == bytes(PAD[i])
    np.testing.assert_array_equal(jnrrd.read(path)[0], A)


def test_external_files_list_and_null_entries(tmp_path):
    for i, t in enumerate(PAD[:3]):
        (tmp_path / f"tile{i}.bin").write_bytes(bytes(t))
    files = [{"indices": [0, 0], "file": "tile0.bin"}, {"indices": [1, 0], "file": "tile1.bin"},
             {"indices": [0, 1], "file": "tile2.bin"}, {"indices": [1, 1], "file": None}]
    lines = [{"jnrrd": "0004"}, {"type": "uint8"}, {"dimension": 2}, {"sizes": [4, 3]},
             {"encoding": "raw"},
             {"extensions": {"tile": "https://jnrrd.org/extensions/tile/v1.0.0"}},
             {"tile:enabled": True}, {"tile:dimensions": [0, 1]}, {"tile:sizes": [2, 2]},
             {"tile:storage": "external"}, {"tile:files": files}, {"tile:padding_value": 99}]
    path = tmp_path / "f.jnrrd"
    path.write_bytes("".join(json.dumps(x) + "\n" for x in lines).encode() + b"\n")
    want = A.copy()
    want[2:4, 2] = 99
    np.testing.assert_array_equal(jnrrd.read(path)[0], want)


def test_pyramid_levels_are_concatenated_in_order(tmp_path):
    path = str(tmp_path / "p.jnrrd")
    a = np.arange(64, dtype=np.uint8).reshape((8, 8), order="F")
    jnrrd.write(path, a, tile=(4, 4), levels=2)
    header, data_start, raw = split(path)
    offsets, sizes = header["tile:offset_table"], header["tile:size_table"]
    assert len(offsets) == 4 + 1  # 2×2 tiles at level 0, one 4×4 tile at level 1
    assert header["tile:level_offsets"] == [offsets[0], offsets[4]]
    level1 = np.frombuffer(raw[offsets[4] : offsets[4] + sizes[4]], np.uint8)
    # block means of a[x, y] = x + 8y over 2×2 blocks: 4.5 + 2i + 16j -> round half to even
    want = np.array([[4.5 + 2 * i + 16 * j for i in range(4)] for j in range(4)])
    np.testing.assert_array_equal(level1, np.round(want).ravel())


def test_zlib_stream_in_gzip_tile_is_accepted_with_a_warning(tmp_path):
    hand = str(tmp_path / "zz.jnrrd")
    COMPRESS["zlib"] = zlib.compress
    try:
        hand_file(hand, PAD, {"tile:padding_value": 255}, compression="zlib")
    finally:
        del COMPRESS["zlib"]
    with open(hand, "rb") as f:
        raw = f.read().replace(b'"tile:compression": "zlib"', b'"tile:compression": "gzip"')
    with open(hand, "wb") as f:
        f.write(raw)
    with pytest.warns(jnrrd.JnrrdWarning, match="zlib"):
        np.testing.assert_array_equal(jnrrd.read(hand)[0], A)
