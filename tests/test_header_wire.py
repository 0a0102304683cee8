"""Header wire format: magic line, line rules, termination, caps (docs/format.md#the-header,
docs/security.md#caps)."""

from __future__ import annotations

import io
import math

import pytest

from jnrrd.errors import FormatError, HeaderError, JnrrdWarning, VersionError
from jnrrd.header import Header, parse_header, parse_header_bytes
from jnrrd.header.wire import PROBE
from jnrrd.policy import Policy

MAGIC = b'{"jnrrd": "0004"}\n'
BODY = MAGIC + b'{"type": "uint8"}\n{"dimension": 1}\n'


def parse(data: bytes, **policy: object) -> tuple[Header, int | None]:
    return parse_header_bytes(data, policy=Policy.from_kwargs(**policy), source="t.jnrrd")


# --- termination -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "start"),
    [
        pytest.param(BODY + b"\nDATA", len(BODY) + 1, id="blank-line"),
        pytest.param(BODY + b" \t\v\f\r\nDATA", len(BODY) + 6, id="blank-line-with-blanks"),
        pytest.param(
            MAGIC.replace(b"\n", b"\r\n") + b'{"type": "uint8"}\r\n\r\nDATA',
            len(MAGIC) + 1 + 19 + 2,
            id="crlf",
        ),
        pytest.param(BODY + b"\n{\"a\": 1}\n", len(BODY) + 1, id="data-looks-like-json"),
        pytest.param(BODY, None, id="eof-no-blank-line"),
        pytest.param(BODY[:-1], None, id="eof-inside-last-line"),
        pytest.param(BODY + b"   ", None, id="eof-after-blanks"),
        pytest.param(MAGIC, None, id="magic-only"),
        pytest.param(MAGIC[:-1], None, id="magic-without-newline"),
    ],
)
def test_termination(data: bytes, start: int | None) -> None:
    header, data_start = parse(data)
    assert data_start == start
    assert header["jnrrd"] == "0004"
    if data_start is not None:
        assert data[data_start:] in (b"DATA", b'{"a": 1}\n')


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(b"5", id="number"),
        pytest.param(b"[1, 2]", id="list"),
        pytest.param(b'"x"', id="string"),
        pytest.param(b"null", id="null"),
        pytest.param(b"\x00\x01\x02binary", id="binary"),
        pytest.param(b"  // a comment", id="comment"),
        pytest.param(b'{"a": 1}  // trailing comment', id="object-then-comment"),
        pytest.param(b'{"a": 1} {"b": 2}', id="two-objects"),
        pytest.param(b"{bad json", id="invalid-json"),
        pytest.param(b'{"a": "\xff\xfe"}', id="invalid-utf8"),
        pytest.param(b"...", id="ellipsis"),
    ],
)
def test_non_object_line_ends_header_with_warning(line: bytes) -> None:
    data = BODY + line + b"\nrest"
    with pytest.warns(JnrrdWarning, match="header ends here"):
        header, start = parse(data)
    assert start == len(BODY)
    assert header["type"] == "uint8"


def test_leading_blanks_before_brace_are_ignored() -> None:
    line = b' \t {"type": "int8"} \t\r\n'
    header, start = parse(MAGIC + line + b"\n")
    assert header["type"] == "int8"
    assert start == len(MAGIC) + len(line) + 1


# --- line rules ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "match"),
    [
        pytest.param(b"{}", "found an empty object", id="empty-object"),
        pytest.param(b'{"a": 1, "b": 2}', "one key per header line", id="multi-key"),
        pytest.param(b'{"a": 1, "a": 2}', "duplicate key 'a'", id="duplicate-keys"),
        pytest.param(b'{"m:a": {"b": 1, "b": 2}}', "duplicate key 'b'", id="nested-duplicate"),
        pytest.param(b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply",
                     id="deep-json"),
        pytest.param(b'{"a": ' + b"7" * 5000 + b"}", "unreadable JSON value", id="huge-int"),
    ],
)
def test_bad_line_is_header_error(line: bytes, match: str) -> None:
    with pytest.raises(HeaderError, match=match) as err:
        parse(BODY + line + b"\n\n")
    assert "t.jnrrd: line 4: " in str(err.value)


@pytest.mark.parametrize(
    ("token", "check"),
    [
        pytest.param(b"NaN", math.isnan, id="nan"),
        pytest.param(b"Infinity", lambda v: v == math.inf, id="infinity"),
        pytest.param(b"-Infinity", lambda v: v == -math.inf, id="minus-infinity"),
        pytest.param(b"[NaN, Infinity]", lambda v: math.isnan(v[0]) and v[1] == math.inf,
                     id="nested"),
    ],
)
def test_non_finite_tokens_accepted(token: bytes, check: object) -> None:
    header, _ = parse(BODY + b'{"min": ' + token + b"}\n\n")
    assert check(header["min"])  # type: ignore[operator]


def test_keys_are_case_sensitive_and_unicode() -> None:
    with pytest.warns(JnrrdWarning, match="unknown field"):
        header, _ = parse(BODY + '{"Type": "é✓"}\n\n'.encode())
    assert header["Type"] == "é✓"
    assert header["type"] == "uint8"


# --- magic line -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "error", "match"),
    [
        pytest.param(b"", FormatError, "empty input", id="empty"),
        pytest.param(b"NRRD0004\ntype: float\n\n", FormatError, "NRRD0004", id="classic-nrrd"),
        pytest.param(b'{"NRRD": "0004"}\n\n', FormatError, "NRRD", id="nrrd-key"),
        pytest.param(b'{"jnrrd": 4}\n\n', FormatError, "version string", id="not-a-string"),
        pytest.param(b'{"jnrrd": null}\n\n', FormatError, "version string", id="null-version"),
        pytest.param(b'{"jnrrd": "0005"}\n\n', VersionError, "'0005'", id="newer-version"),
        pytest.param(b'{"jnrrd": "0003"}\n\n', VersionError, "'0003'", id="older-version"),
        pytest.param(b'{"jnrrd": "0004", "type": "uint8"}\n', FormatError, "first line",
                     id="multi-key-magic"),
        pytest.param(b"{}\n", FormatError, "first line", id="empty-object-magic"),
        pytest.param(b'{"jnrrd": }\n', FormatError, "not valid JSON", id="invalid-json-magic"),
        pytest.param(b"\n" + MAGIC, FormatError, "first line", id="blank-first-line"),
        pytest.param(b'{"type": "uint8"}\n' + MAGIC, FormatError, "first line",
                     id="magic-not-first"),
        pytest.param(b"{" + b" " * (PROBE + 10), FormatError, "longer than", id="huge-first-line"),
        pytest.param(b"\x89PNG\r\n\x1a\n", FormatError, "PNG", id="png"),
    ],
)
def test_bad_magic(data: bytes, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match) as err:
        parse(data)
    assert str(err.value).startswith("t.jnrrd: ")


def test_bom_warns_and_counts_in_offsets() -> None:
    data = b"\xef\xbb\xbf" + BODY + b"\nDATA"
    with pytest.warns(JnrrdWarning, match="byte order mark"):
        header, start = parse(data)
    assert header["type"] == "uint8"
    assert start is not None and data[start:] == b"DATA"


def test_magic_with_blanks_and_crlf() -> None:
    magic = b'  {"jnrrd":"0004"}  \r\n'
    header, start = parse(magic + b"\r\n")
    assert header == {"jnrrd": "0004"}
    assert start == len(magic) + 2


# --- caps -----------------------------------------------------------------------------------


def _line_of(total: int) -> bytes:
    """A header line of exactly ``total`` bytes (without its newline)."""
    prefix = b'{"m:x": "'
    return prefix + b"a" * (total - len(prefix) - 2) + b'"}'


@pytest.mark.parametrize(
    ("line", "policy", "match"),
    [
        pytest.param(_line_of(1001), {"max_line_bytes": 1000}, "max_line_bytes", id="long-line"),
        pytest.param(_line_of(1001) + b"\n\n", {"max_line_bytes": 1000}, "max_line_bytes",
                     id="long-line-terminated"),
        pytest.param(_line_of(200_000), {"max_line_bytes": 100_000}, "max_line_bytes",
                     id="long-line-over-probe"),
        pytest.param(b" " * 2000 + b"\n", {"max_line_bytes": 1000}, "max_line_bytes",
                     id="long-blank-run"),
        pytest.param(b" " * 200_000 + b"{}", {"max_line_bytes": 100_000}, "max_line_bytes",
                     id="long-blank-run-over-probe"),
        pytest.param(b'{"m:a": 1}\n' * 200 + b"\n", {"max_header_bytes": 1000},
                     "max_header_bytes", id="huge-header"),
        pytest.param(b'{"m:a": 1}\n' * 200, {"max_header_bytes": 1000}, "max_header_bytes",
                     id="huge-header-no-blank"),
    ],
)
def test_caps(line: bytes, policy: dict[str, int], match: str) -> None:
    with pytest.raises(HeaderError, match=match):
        parse(BODY + line, **policy)


def test_line_exactly_at_cap_is_accepted() -> None:
    with pytest.warns(JnrrdWarning, match="not declared"):
        header, start = parse(BODY + _line_of(1000) + b"\n\n", max_line_bytes=1000)
    assert len(header["m:x"]) == 1000 - 11
    assert start == len(BODY) + 1002


def test_blank_run_longer_than_probe_then_field() -> None:
    header, _ = parse(BODY + b" " * (PROBE + 100) + b'{"content": "x"}\n\n')
    assert header["content"] == "x"


class CountingStream(io.RawIOBase):
    """A non-seekable stream that records how many bytes were handed out."""

    def __init__(self, data: bytes) -> None:
        self._inner = io.BytesIO(data)
        self.handed = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buf: memoryview) -> int:  # type: ignore[override]
        n = self._inner.readinto(buf)
        self.handed += n
        return n


def test_binary_line_is_never_scanned() -> None:
    """A huge binary "line" after a header without a blank line costs one probe at most."""
    data = BODY + b"\x00" * (8 << 20)
    stream = CountingStream(data)
    with pytest.warns(JnrrdWarning, match="does not start with"):
        _, start = parse_header(stream)  # type: ignore[arg-type]
    assert start == len(BODY)
    assert stream.handed <= len(BODY) + PROBE


# --- streams --------------------------------------------------------------------------------


def test_non_seekable_stream_left_at_data_start() -> None:
    data = BODY + b"\nDATA" + bytes(range(256)) * 100
    stream = io.BufferedReader(CountingStream(data))  # type: ignore[arg-type]
    header, start = parse_header(stream)
    assert header["type"] == "uint8"
    assert start == len(BODY) + 1
    assert stream.read() == data[start:]


def test_seekable_stream_moved_back_after_non_json_line() -> None:
    data = BODY + b"garbage\nmore"
    stream = io.BytesIO(data)
    with pytest.warns(JnrrdWarning):
        _, start = parse_header(stream)
    assert stream.tell() == start == len(BODY)


def test_stream_not_at_offset_zero_gives_absolute_offset() -> None:
    before = b"\x00" * 5  # bytes of an enclosing container before the header
    data = before + BODY + b"\nDATA"
    stream = io.BytesIO(data)
    stream.seek(len(before))
    _, start = parse_header(stream)
    assert start == len(before) + len(BODY) + 1
    assert data[start:] == b"DATA"


def test_file_name_in_messages(tmp_path: object) -> None:
    path = tmp_path / "vol.jnrrd"  # type: ignore[operator]
    path.write_bytes(BODY + b"{}\n")
    with open(path, "rb") as f, pytest.raises(HeaderError, match=r"vol\.jnrrd: line 4: "):
        parse_header(f)


def test_text_stream_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="binary"):
        parse_header(io.StringIO('{"jnrrd": "0004"}\n'))  # type: ignore[arg-type]


class ShortReads:
    """A non-seekable stream whose readline returns at most 5 bytes per call."""

    def __init__(self, data: bytes) -> None:
        self._inner = io.BytesIO(data)

    def readline(self, limit: int = -1) -> bytes:
        return self._inner.readline(min(limit, 5) if limit >= 0 else 5)

    def read(self, n: int = -1) -> bytes:
        return self._inner.read(n)


def test_short_readline_pieces_are_joined() -> None:
    data = BODY + b'{"content": "a longer value than five bytes"}\n\nDATA'
    stream = ShortReads(data)
    header, start = parse_header(stream)  # type: ignore[arg-type]
    assert header["content"] == "a longer value than five bytes"
    assert start == len(data) - 4
    assert stream.read() == b"DATA"
