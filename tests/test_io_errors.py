"""Short, oversized and hostile untiled data (docs/security.md#caps caps, docs/format.md#encodings,
docs/security.md#caps): errors come before allocation, reads cost about one output array, nothing
leaks a bare exception."""

from __future__ import annotations

import io
import time
import tracemalloc
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import jnrrd
from jnrrd.errors import DataError, HeaderError, JnrrdError, UnsupportedError


def header(type_name: str, sizes: list[int], encoding: str, *extra: str) -> bytes:
    lines = ['{"jnrrd": "0004"}', f'{{"type": "{type_name}"}}',
             f'{{"dimension": {len(sizes)}}}', f'{{"sizes": {sizes}}}',
             f'{{"encoding": "{encoding}"}}', '{"endian": "little"}', *extra]
    return ("\n".join(lines) + "\n\n").encode()


def measure(fn: Callable[[], object]) -> tuple[object, int, float]:
    """(result or raised exception, tracemalloc peak in bytes, seconds)."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    t0 = time.perf_counter()
    try:
        try:
            result: object = fn()
        except Exception as exc:  # returned for the caller to check
            result = exc
        return result, tracemalloc.get_traced_memory()[1], time.perf_counter() - t0
    finally:
        tracemalloc.stop()


def _read_path(p: Path, **kw) -> object:
    return jnrrd.read(p, **kw)


def _read_stream(p: Path, **kw) -> object:
    with open(p, "rb") as f:
        return jnrrd.read(f, **kw)


def _open_path(p: Path, **kw) -> object:
    with jnrrd.open(p, **kw) as vol:
        return vol[0, 0, 0]


READERS = [pytest.param(_read_path, id="read-path"),
           pytest.param(_read_stream, id="read-stream"),
           pytest.param(_open_path, id="open-path")]


@pytest.fixture(autouse=True, scope="module")
def _readers_loaded(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Each reader once on a small file before anything is measured: the peaks below bound
    what a read allocates, not the modules a process's first read imports (whether this file
    runs alone or after others)."""
    p = tmp_path_factory.mktemp("warm") / "small.jnrrd"
    jnrrd.write(p, np.zeros((2, 3, 4), np.uint8))
    for reader in READERS:
        reader.values[0](p)


# -- a tiny file claiming a huge volume ---------------------------------------------------------
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("kw, error", [
    pytest.param({}, UnsupportedError, id="over-max_bytes"),
    pytest.param({"max_bytes": 10**13}, DataError, id="cap-raised-short-file"),
])
def test_tiny_file_claiming_1e12_voxels(tmp_path: Path, reader, kw, error) -> None:
    p = tmp_path / "huge.jnrrd"
    p.write_bytes(header("uint8", [10000, 10000, 10000], "raw") + bytes(100))
    result, peak, seconds = measure(lambda: reader(p, **kw))
    assert isinstance(result, error), result
    assert "huge.jnrrd" in str(result)
    assert peak < 1 << 20, peak
    assert seconds < 10.0, seconds  # generous: shared CI cores; the peak bound is the real check


@pytest.mark.parametrize("encoding, body", [
    pytest.param("hex", b"00" * 100, id="hex"),
    pytest.param("ascii", b"1 " * 100, id="ascii"),
])
@pytest.mark.parametrize("reader", READERS[:2])
def test_short_text_detected_before_allocating(tmp_path: Path, reader, encoding: str,
                                               body: bytes) -> None:
    # 10^9 one-byte samples need at least 2·10^9 hex digits or ~2·10^9 ascii characters
    p = tmp_path / "short.jnrrd"
    p.write_bytes(header("uint8", [1000, 1000, 1000], encoding) + body)
    result, peak, seconds = measure(lambda: reader(p))
    assert isinstance(result, DataError), result
    assert "short.jnrrd" in str(result)
    assert peak < 1 << 20, peak
    assert seconds < 10.0, seconds  # generous: shared CI cores; the peak bound is the real check


@pytest.mark.parametrize("encoding", ["ascii", "hex"])
def test_text_read_reserves_only_the_file_size(tmp_path: Path, encoding: str) -> None:
    p = tmp_path / "t.jnrrd"
    jnrrd.write(p, np.arange(10, dtype="u2"), encoding=encoding)
    for reader in (_read_path, _read_stream):
        result, peak, _ = measure(lambda r=reader: r(p))
        assert not isinstance(result, Exception), result
        assert peak < 1 << 20, peak


def test_short_raw_stream_without_size(tmp_path: Path) -> None:
    """A non-seekable stream (a pipe) that ends early is a DataError too."""

    class Pipe(io.RawIOBase):
        def __init__(self, data: bytes) -> None:
            self._b = io.BytesIO(data)

        def readable(self) -> bool:
            return True

        def readinto(self, b) -> int:
            chunk = self._b.read(min(len(b), 7))
            b[: len(chunk)] = chunk
            return len(chunk)

    data = header("uint16", [50], "raw") + bytes(99)
    with pytest.raises(DataError, match="100 bytes"):
        jnrrd.read(io.BufferedReader(Pipe(data)))
    full = header("uint16", [50], "raw") + np.arange(50, dtype="<u2").tobytes()
    assert jnrrd.read(io.BufferedReader(Pipe(full)))[0].tolist() == list(range(50))


# -- reads cost about one output array ----------------------------------------------------------
@pytest.mark.parametrize("endian", ["little", "big"])
@pytest.mark.parametrize("reader", READERS[:2])
def test_raw_read_costs_one_output_array(tmp_path: Path, reader, endian: str) -> None:
    x = np.arange(2_000_000, dtype=np.float32).reshape(200, 100, 100)
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, x, header={"endian": endian})
    result, peak, _ = measure(lambda: reader(p))
    data, _ = result
    np.testing.assert_array_equal(data, x)
    assert data.dtype.isnative and data.flags.f_contiguous
    assert peak < 1.1 * x.nbytes, peak / x.nbytes


def test_open_reads_a_small_region_of_a_large_file(tmp_path: Path) -> None:
    x = np.random.default_rng(1).integers(0, 60000, (200, 200, 200), dtype=np.uint16)
    p = tmp_path / "big.jnrrd"
    jnrrd.write(p, x, header={"endian": "big"})
    expected = x[10:20, 50:52, -3:].copy()
    del x
    with jnrrd.open(p) as vol:
        result, peak, _ = measure(lambda: vol[10:20, 50:52, -3:])
        assert isinstance(result, np.ndarray)
        np.testing.assert_array_equal(result, expected)
        assert peak < 256 << 10, peak  # the volume is 16 MB


# -- no bare exceptions on damaged headers that reach the data section ------------------------
@pytest.mark.parametrize("extra, body", [
    pytest.param(('{"byte_skip": 1000}',), bytes(8), id="byte-skip-past-eof"),
    pytest.param(('{"line_skip": 5}',), b"a\nb\n" + bytes(8), id="line-skip-past-eof"),
    pytest.param((), b"", id="no-data-at-all"),
])
def test_damaged_attached_layouts(tmp_path: Path, extra, body: bytes) -> None:
    p = tmp_path / "d.jnrrd"
    p.write_bytes(header("uint8", [8], "raw", *extra) + body)
    with pytest.raises(DataError, match="d.jnrrd"):
        jnrrd.read(p)


def test_header_ending_at_eof_has_no_data(tmp_path: Path) -> None:
    p = tmp_path / "d.jnrrd"
    p.write_bytes(header("uint8", [8], "raw")[:-1])  # no blank line, no data
    with pytest.raises(HeaderError, match="header is truncated"):
        jnrrd.read(p)


@pytest.mark.parametrize("encoding", ["raw", "gzip", "zstd", "bzip2", "lz4", "hex"])
def test_every_truncation_is_a_jnrrd_error(tmp_path: Path, encoding: str) -> None:
    p = tmp_path / "t.jnrrd"
    x = np.random.default_rng(2).integers(-(2**31), 2**31, (2, 3, 4), dtype=np.int32)
    jnrrd.write(p, x, encoding=encoding)
    raw = p.read_bytes()
    body = len(raw) - raw.index(b"\n\n") - 2
    # Cut anywhere from the middle of the header to just before the data ends; a cut inside
    # a stream's end marker is tested separately (the data itself is complete there).
    last = {"gzip": 9, "bzip2": 11, "lz4": 5, "hex": 2}.get(encoding, 1)
    for keep in range(30, len(raw) - last + 1, 3):
        p.write_bytes(raw[:keep])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a cut header may end on a non-JSON line
            with pytest.raises(JnrrdError):
                jnrrd.read(p)
    assert body > 0


@pytest.mark.parametrize("encoding, cut", [
    pytest.param("gzip", 1, id="gzip-isize"),
    pytest.param("gzip", 8, id="gzip-crc32"),
    pytest.param("bzip2", 4, id="bzip2-stream-crc"),
    pytest.param("lz4", 4, id="lz4-end-mark"),
])
def test_stream_cut_inside_its_end_marker(tmp_path: Path, encoding: str, cut: int) -> None:
    p = tmp_path / "t.jnrrd"
    jnrrd.write(p, np.arange(24, dtype=np.int32), encoding=encoding)
    p.write_bytes(p.read_bytes()[:-cut])
    with pytest.raises(DataError, match="truncated"):
        jnrrd.read(p)


def test_open_a_2_gib_file_touches_little(tmp_path: Path) -> None:
    """A sparse 2 GiB raw file: open() maps it, a small read allocates only the result."""
    p = tmp_path / "sparse.jnrrd"
    head = header("uint8", [1024, 1024, 2048], "raw")
    with open(p, "wb") as f:
        f.write(head)
        f.seek(len(head) + (2 << 30) - 1)
        f.write(b"\x07")
    with jnrrd.open(p) as vol:
        result, peak, seconds = measure(lambda: (vol[5, 6, 100:110], vol[-1, -1, -1]))
    region, last = result
    assert region.tolist() == [0] * 10 and last == 7
    assert peak < 64 << 10, peak
    assert seconds < 10.0, seconds  # generous: shared CI cores; the peak bound is the real check
    result, peak, _ = measure(lambda: jnrrd.read(p, max_bytes=1 << 30))
    assert isinstance(result, UnsupportedError) and "max_bytes" in str(result)
    assert peak < 1 << 20, peak


# -- writes the reader would refuse --------------------------------------------------------------
@pytest.mark.parametrize("shape", [pytest.param((0, 3), id="empty-axis"),
                                   pytest.param((1,) * 17, id="17-axes")])
def test_write_refuses_shapes_the_format_cannot_hold(tmp_path: Path, shape) -> None:
    p = tmp_path / "v.jnrrd"
    with pytest.raises(UnsupportedError):
        jnrrd.write(p, np.zeros(shape, np.uint8))
    assert not p.exists()


def test_text_stream_source_names_the_problem() -> None:
    with pytest.raises(TypeError, match="binary"):
        jnrrd.read(io.StringIO('{"jnrrd": "0004"}\n'))
