"""Header shapes through ``jnrrd.read`` end to end (docs/format.md#the-header): the data starts at
the right byte whatever the line endings or termination, and bad headers fail with the right
error (the header package has its own unit tests)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import jnrrd
from jnrrd.errors import FormatError, HeaderError, JnrrdWarning, VersionError

DATA = bytes(range(6))  # uint8 sizes [3, 2]
LINES = [b'{"jnrrd": "0004"}', b'{"type": "uint8"}', b'{"dimension": 2}', b'{"sizes": [3, 2]}',
         b'{"encoding": "raw"}']
EXPECTED = np.array([[0, 3], [1, 4], [2, 5]], dtype=np.uint8)


def read_bytes(tmp_path: Path, raw: bytes, **kw) -> tuple[np.ndarray, dict]:
    p = tmp_path / "h.jnrrd"
    p.write_bytes(raw)
    return jnrrd.read(p, **kw)


@pytest.mark.parametrize("head, body", [
    pytest.param(b"\n".join(LINES) + b"\n\n", DATA, id="lf"),
    pytest.param(b"\r\n".join(LINES) + b"\r\n\r\n", DATA, id="crlf"),
    pytest.param(b"\n".join(LINES) + b"\n \t\r\n", DATA, id="blank-line-with-spaces"),
    pytest.param(b"\n".join(b"  " + x + b" \t" for x in LINES) + b"\n\n", DATA,
                 id="padded-lines"),
    pytest.param(b"\n".join(LINES) + b"\n\n", DATA + b"trailing bytes are ignored",
                 id="trailing-bytes"),
    pytest.param(b"\n".join(LINES) + b"\n\n", b"\n\n\n\n\n\n", id="data-that-looks-blank"),
    pytest.param(b"\n".join(LINES) + b"\n\n", b'{"a":1}\n', id="data-that-looks-json"),
])
def test_data_starts_after_the_blank_line(tmp_path: Path, head: bytes, body: bytes) -> None:
    data, h = read_bytes(tmp_path, head + body)
    assert data.tobytes(order="F") == body[:6]
    assert h["sizes"] == [3, 2]


@pytest.mark.parametrize("data", [
    pytest.param(DATA, id="binary"),
    pytest.param(b"[1, 2, 3]\n", id="json-array"),
    pytest.param(b"5\nxy", id="json-number"),
    pytest.param(b'"text"\n', id="json-string"),
    pytest.param(b'{"broken": \n', id="invalid-json"),
])
def test_no_blank_line_warns_and_data_starts_at_the_line(tmp_path: Path, data: bytes) -> None:
    raw = b"\n".join(LINES) + b"\n" + data + bytes(6)
    with pytest.warns(JnrrdWarning, match="without a blank line"):
        out, _ = read_bytes(tmp_path, raw)
    assert out.tobytes(order="F") == data[:6] + bytes(max(0, 6 - len(data)))


def test_bom_warns(tmp_path: Path) -> None:
    raw = b"\xef\xbb\xbf" + b"\n".join(LINES) + b"\n\n" + DATA
    with pytest.warns(JnrrdWarning, match="byte order mark"):
        data, _ = read_bytes(tmp_path, raw)
    np.testing.assert_array_equal(data, EXPECTED)


@pytest.mark.parametrize("line, error, match", [
    pytest.param(b'{"type": "uint8", "dimension": 2}', HeaderError, "one key per header line",
                 id="multi-key-line"),
    pytest.param(b"{}", HeaderError, "one key per header line", id="empty-object"),
    pytest.param(b'{"content": 1, "content": 2}', HeaderError, "duplicate key",
                 id="duplicate-key-inside-a-line"),
    pytest.param(b'{"type": "uint8"}', HeaderError, "type", id="repeated-core-field"),
])
def test_bad_header_lines(tmp_path: Path, line: bytes, error, match) -> None:
    raw = b"\n".join([*LINES[:3], line, *LINES[3:]]) + b"\n\n" + DATA
    with pytest.raises(error, match=match) as info:
        read_bytes(tmp_path, raw)
    assert "h.jnrrd" in str(info.value)


def test_repeated_field_with_allow_duplicates(tmp_path: Path) -> None:
    raw = b"\n".join([*LINES, b'{"encoding": "raw"}']) + b"\n\n" + DATA
    with pytest.warns(JnrrdWarning):
        data, _ = read_bytes(tmp_path, raw, allow_duplicates=True)
    np.testing.assert_array_equal(data, EXPECTED)


@pytest.mark.parametrize("first, error", [
    pytest.param(b'{"jnrrd": "0005"}', VersionError, id="newer-version"),
    pytest.param(b'{"jnrrd": 4}', FormatError, id="number-version"),
    pytest.param(b'{"NRRD": "0004"}', FormatError, id="concept-draft-magic"),
    pytest.param(b'{"type": "uint8"}', FormatError, id="no-magic"),
    pytest.param(b"JNRRD0004", FormatError, id="text-magic"),
    pytest.param(b"", FormatError, id="empty-first-line"),
])
def test_bad_magic(tmp_path: Path, first: bytes, error) -> None:
    raw = b"\n".join([first, *LINES[1:]]) + b"\n\n" + DATA
    with pytest.raises(error, match="h.jnrrd"):
        read_bytes(tmp_path, raw)


def test_empty_file_is_a_format_error(tmp_path: Path) -> None:
    with pytest.raises(FormatError):
        read_bytes(tmp_path, b"")


def test_header_only_through_read_header(tmp_path: Path) -> None:
    p = tmp_path / "h.jnrrd"
    p.write_bytes(b"\r\n".join(LINES) + b"\r\n\r\n" + DATA)
    h = jnrrd.read_header(p)
    assert h["sizes"] == [3, 2] and h["encoding"] == "raw"


def test_missing_encoding_and_endian_warn(tmp_path: Path) -> None:
    raw = b"\n".join([LINES[0], b'{"type": "uint16"}', *LINES[2:4]]) + b"\n\n" + bytes(12)
    with pytest.warns(JnrrdWarning) as record:
        data, _ = read_bytes(tmp_path, raw)
    messages = " ".join(str(w.message) for w in record)
    assert "encoding" in messages and "endian" in messages
    assert data.shape == (3, 2) and not data.any()
