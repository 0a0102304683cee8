"""Bounded compression primitives (jnrrd.codecs.compress): every decoding branch."""

from __future__ import annotations

import bz2
import gzip
import io
import os
import threading
import zlib

import lz4.frame
import pytest
import zstandard

from jnrrd.codecs.compress import NAMES, compress, decompress, zstd_compress
from jnrrd.codecs.compress_stream import decompress_stream_into
from jnrrd.errors import DataError, JnrrdWarning, UnsupportedError

# every test here runs through libdeflate's gzip path and through zlib alone
pytestmark = pytest.mark.usefixtures("gzip_engine")

PAYLOAD = os.urandom(3000) + bytes(50_000) + b"jnrrd" * 2000


def _without_content_size(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(write_content_size=False).compress(data)


def _zstd_streamed(data: bytes) -> bytes:
    # A streaming writer does not know the size up front: no content size in the header.
    c = zstandard.ZstdCompressor().compressobj()
    return c.compress(data) + c.flush()


@pytest.mark.parametrize("name", NAMES)
def test_round_trip_single(name: str) -> None:
    packed = compress(name, PAYLOAD)
    assert decompress(name, packed, len(PAYLOAD)) == PAYLOAD
    assert decompress(name, memoryview(packed), len(PAYLOAD)) == PAYLOAD


@pytest.mark.parametrize("name", NAMES)
def test_round_trip_empty(name: str) -> None:
    assert decompress(name, compress(name, b""), 0) == b""


@pytest.mark.parametrize("name", NAMES)
def test_concatenated_members(name: str) -> None:
    a, b = PAYLOAD[:1000], PAYLOAD[1000:]
    packed = compress(name, a) + compress(name, b)
    assert decompress(name, packed, len(PAYLOAD)) == PAYLOAD


@pytest.mark.parametrize(
    "name, packed",
    [
        pytest.param("gzip", gzip.compress(PAYLOAD, mtime=0), id="gzip-module"),
        pytest.param("bz2", bz2.compress(PAYLOAD), id="bz2-module"),
        pytest.param("lz4", lz4.frame.compress(PAYLOAD, store_size=False), id="lz4-no-size"),
        pytest.param("zstd", _without_content_size(PAYLOAD), id="zstd-no-content-size"),
        pytest.param("zstd", _zstd_streamed(PAYLOAD), id="zstd-streamed"),
        pytest.param(
            "zstd",
            _without_content_size(PAYLOAD[:7]) + compress("zstd", PAYLOAD[7:]),
            id="zstd-mixed-frames",
        ),
    ],
)
def test_foreign_writers(name: str, packed: bytes) -> None:
    assert decompress(name, packed, len(PAYLOAD)) == PAYLOAD


def test_gzip_is_deterministic_rfc1952() -> None:
    a = compress("gzip", PAYLOAD, level=5)
    assert a == compress("gzip", PAYLOAD, level=5)
    assert a[:2] == b"\x1f\x8b" and a[4:8] == b"\0\0\0\0"  # magic, mtime 0
    assert gzip.decompress(a) == PAYLOAD


def test_zstd_frame_has_content_size_and_checksum() -> None:
    packed = zstd_compress(PAYLOAD, level=1, checksum=True)
    params = zstandard.get_frame_parameters(packed)
    assert params.content_size == len(PAYLOAD) and params.has_checksum
    assert zstandard.get_frame_parameters(compress("zstd", PAYLOAD)).content_size == len(PAYLOAD)


@pytest.mark.parametrize("name", NAMES)
def test_oversized_is_error_when_exact(name: str) -> None:
    packed = compress(name, PAYLOAD)
    with pytest.raises(DataError, match=f"tile 3: {name} data decompresses to more than"):
        decompress(name, packed, len(PAYLOAD) - 1, what="tile 3: ")


@pytest.mark.parametrize("name", NAMES)
def test_not_exact_returns_prefix(name: str) -> None:
    packed = compress(name, PAYLOAD) + compress(name, PAYLOAD)
    assert decompress(name, packed, 4000, exact=False) == PAYLOAD[:4000]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("exact", [True, False], ids=["exact", "prefix"])
def test_short_is_error(name: str, exact: bool) -> None:
    packed = compress(name, PAYLOAD)
    with pytest.raises(DataError, match="short"):
        decompress(name, packed, len(PAYLOAD) + 1, exact=exact)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_bomb_is_capped(name: str) -> None:
    # 64 MiB of zeros in a few KiB; decoding with a small expected size must stop early.
    bomb = compress(name, bytes(64 << 20), level=1 if name != "lz4" else 0)
    assert len(bomb) < (1 << 20)
    with pytest.raises(DataError, match="more than 1000"):
        decompress(name, bomb, 1000)
    assert decompress(name, bomb, 1000, exact=False) == bytes(1000)


def test_zstd_header_claiming_more_than_expected_uses_bounded_path() -> None:
    # The frame header says 1 MiB; a caller expecting 10 bytes must not get 1 MiB allocated.
    packed = compress("zstd", bytes(1 << 20))
    assert zstandard.frame_content_size(packed) == 1 << 20
    assert decompress("zstd", packed, 10, exact=False) == bytes(10)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("cut", [1, 8, 0.5], ids=["minus1", "minus8", "half"])
def test_truncation(name: str, cut: float) -> None:
    packed = compress(name, PAYLOAD)
    n = int(len(packed) * cut) if isinstance(cut, float) else len(packed) - cut
    with pytest.raises(DataError):
        decompress(name, packed[:n], len(PAYLOAD))


@pytest.mark.parametrize("name", NAMES)
def test_corruption(name: str) -> None:
    packed = bytearray(compress(name, PAYLOAD))
    packed[0] ^= 0xFF  # the magic number
    with pytest.raises(DataError, match=f"{name}"):
        decompress(name, bytes(packed), len(PAYLOAD))


@pytest.mark.parametrize("name", NAMES)
def test_garbage_and_empty(name: str) -> None:
    with pytest.raises(DataError):
        decompress(name, b"this is not compressed data at all", 10)
    with pytest.raises(DataError):
        decompress(name, b"", 10)


@pytest.mark.parametrize("name", NAMES)
def test_trailing_garbage_after_member(name: str) -> None:
    with pytest.raises(DataError):
        decompress(name, compress(name, PAYLOAD) + b"garbage!", len(PAYLOAD))


def test_gzip_trailing_zero_padding_tolerated() -> None:
    assert decompress("gzip", compress("gzip", PAYLOAD) + bytes(16), len(PAYLOAD)) == PAYLOAD


def test_corrupt_gzip_body_crc() -> None:
    packed = bytearray(compress("gzip", PAYLOAD))
    packed[-6] ^= 0x01  # inside the CRC-32 trailer
    with pytest.raises(DataError, match="corrupt gzip"):
        decompress("gzip", bytes(packed), len(PAYLOAD))


def test_zlib_rejected_unless_allowed() -> None:
    z = zlib.compress(PAYLOAD)
    with pytest.raises(DataError):
        decompress("gzip", z, len(PAYLOAD))
    with pytest.warns(JnrrdWarning, match="zlib stream"):
        assert decompress("gzip", z, len(PAYLOAD), allow_zlib=True, what="f: ") == PAYLOAD


def test_allow_zlib_does_not_warn_for_gzip() -> None:
    # filterwarnings=error: any warning here fails the test.
    packed = compress("gzip", PAYLOAD)
    assert decompress("gzip", packed, len(PAYLOAD), allow_zlib=True) == PAYLOAD


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda: compress("snappy", b""), id="unknown-compress"),
        pytest.param(lambda: decompress("snappy", b"", 0), id="unknown-decompress"),
        pytest.param(lambda: compress("gzip", b"", level=12), id="bad-level"),
        pytest.param(lambda: compress("zstd", b"", level=True), id="bool-level"),
        pytest.param(lambda: decompress("gzip", b"x", -1), id="negative-expected"),
        pytest.param(
            lambda: decompress_stream_into("gzip", io.BytesIO(), memoryview(bytearray(1)), skip=-1),
            id="negative-skip",
        ),
    ],
)
def test_bad_arguments(call) -> None:
    with pytest.raises(UnsupportedError):
        call()


# ---- streaming into a buffer ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("skip", [0, 1, 4097])
@pytest.mark.parametrize("chunk_size", [7, 4096, 1 << 20])
def test_stream_into(name: str, skip: int, chunk_size: int) -> None:
    stream = compress(name, PAYLOAD[:20_000]) + compress(name, PAYLOAD[20_000:])
    out = bytearray(len(PAYLOAD) - skip)
    decompress_stream_into(name, io.BytesIO(stream), memoryview(out), skip=skip,
                           chunk_size=chunk_size)
    assert bytes(out) == PAYLOAD[skip:]


@pytest.mark.parametrize("name", NAMES)
def test_stream_into_ignores_what_follows(name: str) -> None:
    stream = io.BytesIO(compress(name, PAYLOAD) + b"trailing junk that is not data")
    out = bytearray(1000)
    decompress_stream_into(name, stream, memoryview(out), skip=10, chunk_size=512)
    assert bytes(out) == PAYLOAD[10:1010]


@pytest.mark.parametrize("name", NAMES)
def test_stream_into_short(name: str) -> None:
    out = bytearray(len(PAYLOAD) + 1)
    with pytest.raises(DataError, match="short"):
        decompress_stream_into(name, io.BytesIO(compress(name, PAYLOAD)), memoryview(out))


@pytest.mark.parametrize("name", NAMES)
def test_stream_into_truncated(name: str) -> None:
    packed = compress(name, PAYLOAD)
    with pytest.raises(DataError):
        decompress_stream_into(name, io.BytesIO(packed[: len(packed) // 2]),
                               memoryview(bytearray(len(PAYLOAD))), chunk_size=256)


@pytest.mark.parametrize("name", NAMES)
def test_stream_into_corrupt(name: str) -> None:
    with pytest.raises(DataError):
        decompress_stream_into(name, io.BytesIO(b"\x00\x01not compressed" * 10),
                               memoryview(bytearray(100)))


@pytest.mark.parametrize("name", NAMES)
def test_stream_into_empty(name: str) -> None:
    with pytest.raises(DataError):
        decompress_stream_into(name, io.BytesIO(b""), memoryview(bytearray(1)))


def test_stream_into_zlib_warns() -> None:
    out = bytearray(len(PAYLOAD))
    with pytest.warns(JnrrdWarning):
        decompress_stream_into("gzip", io.BytesIO(zlib.compress(PAYLOAD)), memoryview(out),
                               allow_zlib=True, chunk_size=100)
    assert bytes(out) == PAYLOAD


def test_stream_into_bounded_reads() -> None:
    # The reader never asks for more than chunk_size compressed bytes at once.
    class Recorder(io.BytesIO):
        biggest = 0

        def read(self, n: int = -1) -> bytes:  # type: ignore[override]
            assert n is not None and n >= 0
            Recorder.biggest = max(Recorder.biggest, n)
            return super().read(n)

        def readinto(self, b) -> int:  # type: ignore[override]
            Recorder.biggest = max(Recorder.biggest, len(b))
            return super().readinto(b)

    for name in NAMES:
        Recorder.biggest = 0
        out = bytearray(len(PAYLOAD))
        decompress_stream_into(name, Recorder(compress(name, PAYLOAD)), memoryview(out),
                               chunk_size=1000)
        assert bytes(out) == PAYLOAD and 0 < Recorder.biggest <= 1000


def test_threads_share_nothing() -> None:
    blobs = [compress("zstd", os.urandom(100) * 50 + bytes([i]) * 5000) for i in range(8)]
    sizes = [10_000] * 8
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(50):
                for blob, size in zip(blobs, sizes, strict=True):
                    assert len(decompress("zstd", blob, size)) == size
                    compress("zstd", blob)
        except BaseException as exc:  # collected and re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


# --- decoding into a buffer, and prefixes -----------------------------------------------------


def test_zstd_into_fills_the_buffer_and_checks_the_size():
    from jnrrd.codecs.compress import zstd_into

    payload = bytes(range(256)) * 4096
    frame = zstandard.ZstdCompressor(level=3).compress(payload)
    out = bytearray(len(payload))
    zstd_into(frame, memoryview(out), exact=True)
    assert bytes(out) == payload
    with pytest.raises(DataError, match="more than"):
        zstd_into(frame, memoryview(bytearray(len(payload) - 1)), exact=True)
    with pytest.raises(DataError, match="short"):
        zstd_into(frame, memoryview(bytearray(len(payload) + 1)), exact=True)
    head = bytearray(1000)
    zstd_into(frame, memoryview(head), exact=False)
    assert bytes(head) == payload[:1000]
    with pytest.raises(DataError, match="corrupt"):
        zstd_into(b"\x28\xb5\x2f\xfd" + b"\xff" * 20, memoryview(bytearray(10)), exact=False)


@pytest.mark.parametrize("name", ["zstd", "lz4", "gzip", "bz2"])
def test_decompress_prefix_returns_the_first_bytes(name):
    from jnrrd.codecs.compress import decompress_prefix

    payload = bytes(b % 4 for b in os.urandom(300_000))
    data = compress(name, payload)
    assert bytes(decompress_prefix(name, data, 12_345)) == payload[:12_345]
    with pytest.raises(DataError, match="short"):
        decompress_prefix(name, data, len(payload) + 1)
