"""Untiled zstd data in several frames: written by jnrrd, decoded frame-parallel."""

from __future__ import annotations

import json

import numpy as np
import pytest
import zstandard

import jnrrd
from jnrrd.codecs import compress_stream
from jnrrd.writing import stream as datasection

# every test here runs through libdeflate's gzip path and through zlib alone
pytestmark = pytest.mark.usefixtures("gzip_engine")


@pytest.fixture
def small_frames(monkeypatch):
    monkeypatch.setattr(datasection, "_ZSTD_FRAME_BYTES", 1000)
    calls = []
    real = compress_stream._zstd_frames_into

    def spy(fileobj, out, what, *rest):
        used = real(fileobj, out, what, *rest)
        calls.append(used)
        return used

    monkeypatch.setattr(compress_stream, "_zstd_frames_into", spy)
    return calls


def data_start(raw: bytes) -> int:
    return raw.index(b"\n\n") + 2


def test_frames_are_written_and_decoded_in_parallel(tmp_path, small_frames):
    a = np.random.default_rng(0).integers(0, 1000, size=(30, 20, 7)).astype(np.uint16)
    path = tmp_path / "z.jnrrd"
    jnrrd.write(path, a, encoding="zstd")
    raw = path.read_bytes()
    body = raw[data_start(raw):]
    assert body.count((0xFD2FB528).to_bytes(4, "little")) >= 8  # 8400 bytes / 1000 per frame
    np.testing.assert_array_equal(jnrrd.read(path)[0], a)
    assert small_frames == [True]


def test_single_frame_without_content_size_decodes_sequentially(tmp_path, small_frames):
    a = np.arange(5000, dtype=np.uint16)
    path = tmp_path / "s.jnrrd"
    jnrrd.write(path, a)  # raw, then re-encoded below as a streamed zstd frame
    raw = path.read_bytes()
    head = raw[: data_start(raw)].replace(b'"encoding": "raw"', b'"encoding": "zstd"')
    stream = zstandard.ZstdCompressor().compressobj()
    body = stream.compress(a.tobytes()) + stream.flush()  # no content size in the header
    path.write_bytes(head + body)
    np.testing.assert_array_equal(jnrrd.read(path)[0], a)
    assert small_frames == [False]


def test_corrupt_middle_frame_is_a_data_error(tmp_path, small_frames):
    a = np.random.default_rng(1).integers(0, 50000, size=(4000,)).astype(np.uint32)
    path = tmp_path / "c.jnrrd"
    jnrrd.write(path, a, encoding="zstd")
    raw = bytearray(path.read_bytes())
    start = data_start(bytes(raw))
    raw[start + (len(raw) - start) // 2] ^= 0xFF  # inside one of the middle frames
    path.write_bytes(bytes(raw))
    with pytest.raises(jnrrd.DataError):
        jnrrd.read(path)


@pytest.mark.parametrize("cut", [1, 7, 200])
def test_truncated_multi_frame_data_is_a_data_error(tmp_path, small_frames, cut):
    a = np.random.default_rng(2).integers(0, 9, size=(6000,)).astype(np.uint8)
    path = tmp_path / "t.jnrrd"
    jnrrd.write(path, a, encoding="zstd")
    raw = path.read_bytes()
    path.write_bytes(raw[:-cut])
    with pytest.raises(jnrrd.DataError):
        jnrrd.read(path)


def test_frames_beyond_the_data_are_ignored(tmp_path, small_frames):
    a = np.arange(3000, dtype=np.uint8)
    path = tmp_path / "x.jnrrd"
    jnrrd.write(path, a, encoding="zstd")
    extra = zstandard.ZstdCompressor().compress(b"\x07" * 5000)
    path.write_bytes(path.read_bytes() + extra)
    np.testing.assert_array_equal(jnrrd.read(path)[0], a)
    head = json.loads(path.read_bytes().split(b"\n")[3])
    assert head == {"sizes": [3000]}
