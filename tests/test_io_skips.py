"""``line_skip`` and ``byte_skip`` (docs/format.md#line-and-byte-skips): attached and detached,
every encoding, ``byte_skip: -1`` with raw, and skips that run past the end of the file."""

from __future__ import annotations

import bz2
import gzip
from pathlib import Path

import lz4.frame
import numpy as np
import pytest
import zstandard

import jnrrd
from jnrrd.errors import DataError, HeaderError

VALUES = [10, 20, 30, 40]
RAW = bytes(VALUES)


def header(encoding: str, *extra: str) -> bytes:
    lines = ['{"jnrrd": "0004"}', '{"type": "uint8"}', '{"dimension": 1}', '{"sizes": [4]}',
             f'{{"encoding": "{encoding}"}}', *extra]
    return ("\n".join(lines) + "\n\n").encode()


def encode(encoding: str, data: bytes) -> bytes:
    return {
        "raw": lambda: data,
        "hex": lambda: data.hex().encode() + b"\n",
        "ascii": lambda: " ".join(str(b) for b in data).encode() + b"\n",
        "gzip": lambda: gzip.compress(data),
        "bzip2": lambda: bz2.compress(data),
        "zstd": lambda: zstandard.ZstdCompressor().compress(data),
        "lz4": lambda: lz4.frame.compress(data),
    }[encoding]()


ALL = ["raw", "hex", "ascii", "gzip", "bzip2", "zstd", "lz4"]
JUNK_LINES = b"first skipped line\r\nsecond \x00\xff binary line\n"


def _read(path: Path) -> list[int]:
    data, _ = jnrrd.read(path)
    with jnrrd.open(path) as vol:
        assert vol[::-1].tolist() == data.tolist()[::-1]
    return data.tolist()


@pytest.mark.parametrize("encoding", ALL)
def test_line_skip_attached(tmp_path: Path, encoding: str) -> None:
    p = tmp_path / "a.jnrrd"
    p.write_bytes(header(encoding, '{"line_skip": 2}') + JUNK_LINES + encode(encoding, RAW))
    assert _read(p) == VALUES


@pytest.mark.parametrize("encoding", ALL)
def test_line_skip_detached(tmp_path: Path, encoding: str) -> None:
    (tmp_path / "d.bin").write_bytes(JUNK_LINES + encode(encoding, RAW))
    p = tmp_path / "a.jnrrd"
    p.write_bytes(header(encoding, '{"line_skip": 2}', '{"data_file": "d.bin"}'))
    assert _read(p) == VALUES


@pytest.mark.parametrize("encoding, junk", [
    pytest.param("raw", b"\x01\x02\x03", id="raw"),
    pytest.param("hex", b"zz\n", id="hex"),  # skipped before hex parsing: not an error
    pytest.param("ascii", b"99 ", id="ascii"),
])
def test_byte_skip_in_the_file(tmp_path: Path, encoding: str, junk: bytes) -> None:
    p = tmp_path / "a.jnrrd"
    p.write_bytes(header(encoding, '{"line_skip": 1}', f'{{"byte_skip": {len(junk)}}}')
                  + b"a line\n" + junk + encode(encoding, RAW))
    assert _read(p) == VALUES


@pytest.mark.parametrize("encoding", ["gzip", "bzip2", "zstd", "lz4"])
@pytest.mark.parametrize("skip", [1, 3, 5000])
def test_byte_skip_of_the_decompressed_stream(tmp_path: Path, encoding: str, skip: int
                                              ) -> None:
    prefix = bytes(range(256)) * (skip // 256 + 1)
    p = tmp_path / "a.jnrrd"
    p.write_bytes(header(encoding, f'{{"byte_skip": {skip}}}')
                  + encode(encoding, prefix[:skip] + RAW))
    assert _read(p) == VALUES


@pytest.mark.parametrize("encoding", ["gzip", "zstd"])
def test_byte_skip_past_the_decompressed_end(tmp_path: Path, encoding: str) -> None:
    p = tmp_path / "a.jnrrd"
    p.write_bytes(header(encoding, '{"byte_skip": 2}') + encode(encoding, RAW))
    with pytest.raises(DataError, match="a.jnrrd.*short"):
        jnrrd.read(p)


@pytest.mark.parametrize("before", [
    pytest.param(b"", id="nothing-before"),
    pytest.param(b"some lines\nand junk\x00\x01", id="lines-and-junk"),
    pytest.param(bytes(1000), id="zeros"),
])
def test_byte_skip_minus_one_reads_the_last_bytes(tmp_path: Path, before: bytes) -> None:
    # line_skip is moot with byte_skip -1 (docs/format.md#line-and-byte-skips), even when there are
    # fewer lines
    p = tmp_path / "a.jnrrd"
    p.write_bytes(header("raw", '{"byte_skip": -1}', '{"line_skip": 7}') + before + RAW)
    assert _read(p) == VALUES


def test_byte_skip_minus_one_detached_per_file(tmp_path: Path) -> None:
    (tmp_path / "0.raw").write_bytes(b"header junk" + RAW[:2])
    (tmp_path / "1.raw").write_bytes(b"x" + RAW[2:])
    p = tmp_path / "a.jnrrd"
    p.write_bytes(header("raw", '{"byte_skip": -1}', '{"data_files": ["0.raw", "1.raw"]}'))
    assert _read(p) == VALUES


def test_byte_skip_minus_one_short_file(tmp_path: Path) -> None:
    p = tmp_path / "a.jnrrd"
    p.write_bytes(header("raw", '{"byte_skip": -1}')[:-1])  # no data after the header
    (tmp_path / "d.raw").write_bytes(RAW[:3])
    p.write_bytes(header("raw", '{"byte_skip": -1}', '{"data_file": "d.raw"}'))
    with pytest.raises(DataError, match="d.raw.*byte_skip -1"):
        jnrrd.read(p)


@pytest.mark.parametrize("encoding", ["ascii", "hex", "gzip", "bzip2", "zstd", "lz4"])
def test_byte_skip_minus_one_needs_raw(tmp_path: Path, encoding: str) -> None:
    p = tmp_path / "a.jnrrd"
    p.write_bytes(header(encoding, '{"byte_skip": -1}') + encode(encoding, RAW))
    with pytest.raises(HeaderError, match="a.jnrrd: byte_skip"):
        jnrrd.read(p)


@pytest.mark.parametrize("field, value", [
    pytest.param("byte_skip", "-2", id="byte-skip-below-minus-one"),
    pytest.param("line_skip", "-1", id="negative-line-skip"),
    pytest.param("byte_skip", "1.5", id="fractional-byte-skip"),
    pytest.param("line_skip", '"2"', id="string-line-skip"),
])
def test_bad_skip_values(tmp_path: Path, field: str, value: str) -> None:
    p = tmp_path / "a.jnrrd"
    p.write_bytes(header("raw", f'{{"{field}": {value}}}') + RAW)
    with pytest.raises(HeaderError, match=f"a.jnrrd: {field}"):
        jnrrd.read(p)


@pytest.mark.parametrize("encoding", ALL)
@pytest.mark.parametrize("attached", [True, False], ids=["attached", "detached"])
def test_eof_inside_skipped_lines(tmp_path: Path, encoding: str, attached: bool) -> None:
    p = tmp_path / "a.jnrrd"
    if attached:
        p.write_bytes(header(encoding, '{"line_skip": 3}') + b"one\ntwo\n")
    else:
        (tmp_path / "d.bin").write_bytes(b"one\r\ntwo\r\nno newline at the end")
        p.write_bytes(header(encoding, '{"line_skip": 3}', '{"data_file": "d.bin"}'))
    with pytest.raises(DataError, match="line_skip"):
        jnrrd.read(p)


@pytest.mark.parametrize("encoding", ["raw", "hex", "ascii"])
def test_eof_inside_skipped_bytes(tmp_path: Path, encoding: str) -> None:
    p = tmp_path / "a.jnrrd"
    p.write_bytes(header(encoding, '{"byte_skip": 100}') + encode(encoding, RAW))
    with pytest.raises(DataError, match="a.jnrrd"):
        jnrrd.read(p)


def test_written_files_never_carry_skips(tmp_path: Path) -> None:
    p = tmp_path / "w.jnrrd"
    jnrrd.write(p, np.array(VALUES, np.uint8), header={"line_skip": 3, "byte_skip": 5})
    h = jnrrd.read_header(p)
    assert "line_skip" not in h and "byte_skip" not in h
    assert jnrrd.read(p)[0].tolist() == VALUES
