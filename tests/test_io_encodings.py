"""Core data encodings end to end (docs/format.md#encodings, #endianness): golden bytes both ways,
both byte orders, concatenated members/frames, zlib-as-gzip, LZ4 block data, corrupt and bomb
input."""

from __future__ import annotations

import bz2
import gzip
import os
import time
import tracemalloc
import zlib
from pathlib import Path

import lz4.block
import lz4.frame
import numpy as np
import pytest
import zstandard

import jnrrd
from jnrrd.errors import DataError, JnrrdWarning

# every test here runs through libdeflate's gzip path and through zlib alone
pytestmark = pytest.mark.usefixtures("gzip_engine")

# The (2, 2) int16 array a[x, y] with file order (axis 0 fastest) 1, -2, 258, 3.
A = np.array([[1, 258], [-2, 3]], dtype=np.int16)
LE = bytes.fromhex("0100feff02010300")
BE = bytes.fromhex("0001fffe01020003")

COMPRESSORS = {
    "gzip": (b"\x1f\x8b", gzip.decompress),
    "bzip2": (b"BZh", bz2.decompress),
    "zstd": (b"\x28\xb5\x2f\xfd",
             lambda b: zstandard.ZstdDecompressor().stream_reader(b).read()),
    "lz4": (b"\x04\x22\x4d\x18", lz4.frame.decompress),
}


def _compress(enc: str, data: bytes) -> bytes:
    if enc == "gzip":
        return gzip.compress(data)
    if enc == "bzip2":
        return bz2.compress(data)
    if enc == "zstd":
        return zstandard.ZstdCompressor().compress(data)
    return lz4.frame.compress(data)


def header(type_name: str, sizes: list[int], encoding: str, endian: str | None = None,
           *extra: str) -> bytes:
    lines = ['{"jnrrd": "0004"}', f'{{"type": "{type_name}"}}',
             f'{{"dimension": {len(sizes)}}}', f'{{"sizes": {sizes}}}']
    if endian is not None:
        lines.append(f'{{"endian": "{endian}"}}')
    lines.append(f'{{"encoding": "{encoding}"}}')
    lines.extend(extra)
    return ("\n".join(lines) + "\n\n").encode()


def write_file(path: Path, head: bytes, data: bytes) -> Path:
    path.write_bytes(head + data)
    return path


def data_section(path: Path) -> bytes:
    raw = path.read_bytes()
    return raw[raw.index(b"\n\n") + 2:]


# -- golden bytes, writing ------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("endian, expected", [
    pytest.param("little", LE, id="little"),
    pytest.param("big", BE, id="big"),
])
@pytest.mark.parametrize("enc", ["raw", "hex", *COMPRESSORS])
def test_write_golden_binary(tmp_path: Path, enc: str, endian: str, expected: bytes) -> None:
    p = tmp_path / "a.jnrrd"
    jnrrd.write(p, A, header={"endian": endian}, encoding=enc)
    raw = p.read_bytes()
    assert raw.startswith(header("int16", [2, 2], enc, endian))
    body = data_section(p)
    if enc == "raw":
        assert body == expected
    elif enc == "hex":
        assert body == expected.hex().encode() + b"\n"
    else:
        magic, decompress = COMPRESSORS[enc]
        assert body.startswith(magic)
        assert decompress(body) == expected


def test_write_golden_ascii(tmp_path: Path) -> None:
    p = tmp_path / "a.jnrrd"
    jnrrd.write(p, A, encoding="ascii", header={"endian": "big"})
    # ascii carries no byte order: the endian field is dropped (docs/format.md#endianness)
    assert p.read_bytes() == header("int16", [2, 2], "ascii") + b"1 -2\n258 3\n"


def test_hex_lines_are_70_characters(tmp_path: Path) -> None:
    p = tmp_path / "a.jnrrd"
    jnrrd.write(p, np.arange(100, dtype=np.uint8), encoding="hex")
    lines = data_section(p).split(b"\n")
    assert [len(x) for x in lines] == [70, 70, 60, 0]


# -- golden bytes, reading hand-made files ----------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("endian, payload", [
    pytest.param("little", LE, id="little"),
    pytest.param("big", BE, id="big"),
])
@pytest.mark.parametrize("enc", ["raw", "hex", *COMPRESSORS])
def test_read_golden_binary(tmp_path: Path, enc: str, endian: str, payload: bytes) -> None:
    if enc == "raw":
        body = payload
    elif enc == "hex":
        body = payload.hex().upper().encode()[:5] + b" \n\t" + payload.hex().encode()[5:]
    else:
        body = _compress(enc, payload)
    p = write_file(tmp_path / "a.jnrrd", header("int16", [2, 2], enc, endian), body)
    data, h = jnrrd.read(p)
    assert data.dtype == np.dtype("int16")  # native order for the user
    np.testing.assert_array_equal(data, A)
    with jnrrd.open(p) as vol:
        np.testing.assert_array_equal(vol[...], A)


@pytest.mark.parametrize("body", [
    pytest.param(b"1 -2 258 3\n", id="one-line"),
    pytest.param(b"  1\n-2\r\n\t258 \v3\f", id="any-whitespace"),
    pytest.param(b"+1 -2 258 3 77 88\n", id="extra-values-ignored"),
])
def test_read_golden_ascii(tmp_path: Path, body: bytes) -> None:
    # endian "big" is ignored for ascii
    p = write_file(tmp_path / "a.jnrrd", header("int16", [2, 2], "ascii", "big"), body)
    np.testing.assert_array_equal(jnrrd.read(p)[0], A)


# -- concatenations and frames without content size -------------------------------------------
def _zstd_no_size(b: bytes) -> bytes:
    return zstandard.ZstdCompressor(write_content_size=False).compress(b)


def _zstd_streamed(b: bytes) -> bytes:
    c = zstandard.ZstdCompressor().compressobj()
    return c.compress(b) + c.flush()


@pytest.mark.slow
@pytest.mark.parametrize("enc, make", [
    pytest.param("gzip", lambda: gzip.compress(LE[:3]) + gzip.compress(LE[3:]),
                 id="gzip-two-members"),
    pytest.param("gzip", lambda: gzip.compress(LE) + b"\0\0\0\0", id="gzip-zero-padding"),
    pytest.param("bzip2", lambda: bz2.compress(LE[:5]) + bz2.compress(LE[5:]),
                 id="bzip2-two-streams"),
    pytest.param("zstd", lambda: _zstd_no_size(LE[:1]) + _zstd_no_size(LE[1:]),
                 id="zstd-two-frames-no-size"),
    pytest.param("zstd", lambda: _zstd_streamed(LE), id="zstd-streamed-frame"),
    pytest.param("zstd", lambda: zstandard.ZstdCompressor().compress(LE[:4])
                 + zstandard.ZstdCompressor().compress(LE[4:]), id="zstd-two-frames-sized"),
    pytest.param("lz4", lambda: lz4.frame.compress(LE[:6], store_size=False)
                 + lz4.frame.compress(LE[6:]), id="lz4-two-frames"),
])
def test_concatenated_streams(tmp_path: Path, enc: str, make) -> None:
    p = write_file(tmp_path / "a.jnrrd", header("int16", [2, 2], enc, "little"), make())
    np.testing.assert_array_equal(jnrrd.read(p)[0], A)


def test_zlib_labelled_gzip_warns(tmp_path: Path) -> None:
    p = write_file(tmp_path / "a.jnrrd", header("int16", [2, 2], "gzip", "little"),
                   zlib.compress(LE))
    with pytest.warns(JnrrdWarning, match="zlib stream"):
        data, _ = jnrrd.read(p)
    np.testing.assert_array_equal(data, A)


def test_lz4_block_data_is_a_data_error(tmp_path: Path) -> None:
    p = write_file(tmp_path / "a.jnrrd", header("int16", [2, 2], "lz4", "little"),
                   lz4.block.compress(LE))
    with pytest.raises(DataError, match="a.jnrrd.*lz4"):
        jnrrd.read(p)


# -- truncated and corrupt data ---------------------------------------------------------------
PAYLOAD = np.random.default_rng(5).integers(0, 256, 4096, dtype=np.uint8).tobytes()


def _corrupt_checksum(enc: str) -> bytes:
    if enc == "gzip":
        b = bytearray(gzip.compress(PAYLOAD))
        b[-6] ^= 0xFF  # CRC-32 of the member
    elif enc == "bzip2":
        b = bytearray(bz2.compress(PAYLOAD))
        b[len(b) // 2] ^= 0x10  # inside the block: its CRC no longer matches
    elif enc == "zstd":
        b = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(PAYLOAD))
        b[-1] ^= 0xFF
    else:
        b = bytearray(lz4.frame.compress(PAYLOAD, content_checksum=True))
        b[-1] ^= 0xFF
    return bytes(b)


CASES = [
    *(pytest.param(enc, lambda e=enc: _compress(e, PAYLOAD)[: len(_compress(e, PAYLOAD)) // 2],
                   id=f"{enc}-truncated") for enc in COMPRESSORS),
    *(pytest.param(enc, lambda e=enc: _compress(e, PAYLOAD)[:-30], id=f"{enc}-tail-cut")
      for enc in COMPRESSORS),
    *(pytest.param(enc, lambda e=enc: _corrupt_checksum(e), id=f"{enc}-checksum")
      for enc in COMPRESSORS),
    *(pytest.param(enc, lambda: b"", id=f"{enc}-empty") for enc in COMPRESSORS),
    *(pytest.param(enc, lambda: b"not compressed at all, just text", id=f"{enc}-garbage")
      for enc in COMPRESSORS),
    pytest.param("raw", lambda: PAYLOAD[:4095], id="raw-one-byte-short"),
    pytest.param("raw", lambda: b"", id="raw-empty"),
    pytest.param("hex", lambda: PAYLOAD.hex().encode()[:-2], id="hex-short"),
    pytest.param("hex", lambda: PAYLOAD.hex().encode()[:-1], id="hex-odd-digits"),
    pytest.param("hex", lambda: b"zz" + PAYLOAD.hex().encode(), id="hex-bad-character"),
    pytest.param("ascii", lambda: b"1 2 3\n", id="ascii-short"),
    pytest.param("ascii", lambda: b"1 2 x3 " * 2000, id="ascii-not-a-number"),
    pytest.param("ascii", lambda: b"256 " * 4096, id="ascii-out-of-range"),
    pytest.param("ascii", lambda: b"1.5 " * 4096, id="ascii-float-for-int"),
]


@pytest.mark.slow
@pytest.mark.parametrize("enc, make", CASES)
def test_bad_data_is_a_data_error(tmp_path: Path, enc: str, make) -> None:
    p = write_file(tmp_path / "bad.jnrrd", header("uint8", [4096], enc), make())
    with pytest.raises(DataError, match="bad.jnrrd"):
        jnrrd.read(p)
    with open(p, "rb") as f, pytest.raises(DataError):
        jnrrd.read(f)


# -- decompression bombs -----------------------------------------------------------------------
@pytest.mark.parametrize("enc", list(COMPRESSORS))
def test_bomb_stops_at_expected_size(tmp_path: Path, enc: str) -> None:
    # 16 MiB of zeros compress to a few KiB; the volume needs 16 bytes.
    zeros = bytes(1 << 20)
    if enc == "gzip":
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        bomb = b"".join(c.compress(zeros) for _ in range(16)) + c.flush()
    elif enc == "bzip2":
        c = bz2.BZ2Compressor(9)
        bomb = b"".join(c.compress(zeros) for _ in range(16)) + c.flush()
    elif enc == "zstd":
        c = zstandard.ZstdCompressor(level=1).compressobj()
        bomb = b"".join(c.compress(zeros) for _ in range(16)) + c.flush()
    else:
        c = lz4.frame.LZ4FrameCompressor()
        bomb = c.begin() + b"".join(c.compress(zeros) for _ in range(16)) + c.flush()
    assert len(bomb) < 1 << 20
    p = write_file(tmp_path / "bomb.jnrrd", header("uint8", [16], enc), bomb)
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        if enc == "zstd":
            data, _ = jnrrd.read(p)
        else:  # a longer gzip/bzip2/lz4 stream is read from its start, with a warning
            with pytest.warns(JnrrdWarning, match="decompressed bytes past the 16"):
                data, _ = jnrrd.read(p)
        elapsed = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert data.tolist() == [0] * 16
    assert peak < 8 << 20, peak
    assert elapsed < 10.0, elapsed  # generous: shared CI cores


def test_compressed_output_beyond_the_data_is_ignored(tmp_path: Path) -> None:
    # NRRD §5: decompressed bytes after the data are ignored
    p = write_file(tmp_path / "a.jnrrd", header("int16", [2, 2], "zstd", "little"),
                   zstandard.ZstdCompressor().compress(LE + os.urandom(100)))
    np.testing.assert_array_equal(jnrrd.read(p)[0], A)
