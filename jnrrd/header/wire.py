"""The header wire format: magic line, one single-key JSON object per line, termination.

Implements the normative reader algorithm of docs/format.md#where-the-header-ends (with the magic
rules of docs/format.md#magic-line and the line rules of docs/format.md#lines-and-json-tokens).
Lines are read with ``readline(limit)``, so a stream is never read past the line being examined and
no "line" is ever read without a bound (docs/security.md#caps, header DoS):

* the first piece of every line is at most :data:`PROBE` bytes; a line whose first non-blank
  byte is not ``{`` ends the header right there (binary data is never scanned for ``\\n``);
* a line that starts with ``{`` is read up to ``policy.max_line_bytes`` (and never past what
  ``policy.max_header_bytes`` still allows).
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass
from typing import IO, Any

from ..errors import FormatError, HeaderError, JnrrdWarning, VersionError, describe_source, where
from ..policy import Policy

__all__ = ["MAGIC_KEY", "MAX_NESTING", "PROBE", "VERSION", "Entry", "nesting_depth",
           "read_entries"]

MAGIC_KEY = "jnrrd"
VERSION = "0004"
BOM = b"\xef\xbb\xbf"

#: first piece read of every line; also the longest magic line accepted (a real one is 17 bytes)
PROBE = 64 * 1024

#: deepest nesting of lists/objects a header value may have (its line's object not counted),
#: extension path components included: every consumer of a header (validation, rendering,
#: ``info --json``, codec chains) may then recurse over it without meeting Python's limit
MAX_NESTING = 64

# docs/format.md#lines-and-json-tokens: ASCII whitespace other than the line feed, which alone
# splits lines.
_BLANKS = re.compile(rb"[ \t\r\v\f]*")


def _blank_run(piece: bytes) -> int:
    """Length of the run of blanks that starts ``piece`` (the pattern matches the empty run)."""
    found = _BLANKS.match(piece)
    return found.end() if found is not None else 0


@dataclass(frozen=True, slots=True)
class Entry:
    """One header line: its single key and value, its 1-based line number and byte offset."""

    key: str
    value: Any
    lineno: int
    offset: int


class _DuplicateKey(Exception):
    """Raised inside the JSON decoder when an object repeats a key
    (docs/format.md#one-key-per-line)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(k)
            seen.add(k)
    return obj


# One decoder for every line: NaN/Infinity/-Infinity are accepted on read
# (docs/format.md#lines-and-json-tokens).
_DECODER = json.JSONDecoder(object_pairs_hook=_unique_pairs)


class _Invalid(Exception):
    """The line is not valid UTF-8 or not valid JSON: it ends the header
    (docs/format.md#where-the-header-ends)."""


def nesting_depth(value: Any, limit: int) -> int:
    """How deeply lists and dicts nest in ``value`` (0 for a scalar), counted without
    recursion and only up to ``limit + 1`` (enough to tell that it is over ``limit``)."""
    deepest = 0
    stack = [(value, 1)] if isinstance(value, list | dict) else []
    while stack:
        v, d = stack.pop()
        deepest = max(deepest, d)
        if d > limit:
            break
        for x in (v.values() if isinstance(v, dict) else v):
            if isinstance(x, list | dict):
                stack.append((x, d + 1))
    return deepest


def _decode(text: bytes, prefix: str) -> Any:
    """Decode one stripped line; ``_Invalid`` ends the header, ``HeaderError`` is fatal."""
    try:
        obj = _DECODER.decode(text.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _Invalid(str(exc)) from None
    except _DuplicateKey as exc:
        raise HeaderError(f"{prefix}duplicate key {exc.key!r} inside one JSON object") from None
    except RecursionError:
        raise HeaderError(f"{prefix}JSON nested too deeply") from None
    # int literal over the interpreter's digit limit (docs/security.md#caps)
    except ValueError as exc:
        raise HeaderError(f"{prefix}unreadable JSON value: {exc}") from None
    # The line's object is one level; a line with few brackets cannot nest deeply.
    if (text.count(b"[") + text.count(b"{") > MAX_NESTING + 1
            and nesting_depth(obj, MAX_NESTING + 1) > MAX_NESTING + 1):
        raise HeaderError(f"{prefix}JSON nested too deeply (more than {MAX_NESTING} levels "
                          "of lists and objects in a value)")
    return obj


def _readline(stream: IO[bytes], limit: int) -> bytes:
    """Up to ``limit`` bytes through the next ``\n`` (fewer only at EOF).

    Loops because a ``readline`` may legally return a short piece (pipes, sockets).
    """
    if limit <= 0:
        return b""
    pieces = []
    got = 0
    while got < limit:
        piece = stream.readline(limit - got)
        if piece is None:  # a non-blocking stream with nothing available: treat as EOF
            break
        if not isinstance(piece, bytes | bytearray | memoryview):
            raise TypeError(
                f"expected a binary file object, readline returned {type(piece).__name__}"
            )
        if not piece:
            break
        pieces.append(bytes(piece))
        got += len(piece)
        if pieces[-1].endswith(b"\n"):
            break
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def _show(raw: bytes) -> str:
    """A short printable rendering of what was found, for error messages."""
    raw = raw.strip()
    return repr(raw[:40] + (b"..." if len(raw) > 40 else b""))


def _check_magic(raw: bytes, truncated: bool, prefix: str) -> None:
    """docs/format.md#magic-line: the first line must be ``{"jnrrd": "0004"}`` (after an optional
    BOM)."""
    expected = f'expected the magic line {{"{MAGIC_KEY}": "{VERSION}"}}'
    text = raw.strip()
    if not text.startswith(b"{"):
        if not raw:
            raise FormatError(f"{prefix}empty input (0 bytes): not a JNRRD or NRRD file; "
                              f"{expected} (or a classic NRRD magic line NRRD0001 to "
                              "NRRD0005)")
        raise FormatError(f"{prefix}not a JNRRD file: first line is {_show(raw)}; {expected}")
    if truncated:
        raise FormatError(f"{prefix}not a JNRRD file: first line longer than {PROBE} bytes")
    try:
        obj = _decode(text, prefix)
    except (_Invalid, HeaderError):
        raise FormatError(
            f"{prefix}not a JNRRD file: first line {_show(raw)} is not valid JSON; {expected}"
        ) from None
    if list(obj) != [MAGIC_KEY]:
        raise FormatError(f"{prefix}not a JNRRD file: first line is {_show(raw)}; {expected}")
    version = obj[MAGIC_KEY]
    if not isinstance(version, str):
        raise FormatError(
            f"{prefix}{MAGIC_KEY}: expected the version string {VERSION!r}, found {version!r}"
        )
    if version != VERSION:
        raise VersionError(
            f"{prefix}{MAGIC_KEY}: version {version!r} is not supported; this library reads "
            f"{VERSION!r}"
        )


def _seekable(stream: IO[bytes]) -> bool:
    try:
        return bool(stream.seekable())
    except (AttributeError, OSError, ValueError):
        return False


def read_entries(
    stream: IO[bytes], policy: Policy, source: Any = None
) -> tuple[list[Entry], int | None]:
    """Read the header lines of ``stream`` (docs/format.md#the-header).

    Returns the entries after the magic line (in file order) and the absolute offset of the
    first data byte, or ``None`` when the header ended at EOF. On a seekable stream the
    position is left at that offset (or at EOF). On a non-seekable stream it is left there too,
    except when the header ended on a non-JSON line (a warned case): that line has been read.
    """
    if not callable(getattr(stream, "readline", None)):
        raise TypeError("expected a binary file object with read() and readline()")
    seekable = _seekable(stream)
    base = stream.tell() if seekable else 0
    max_line = policy.max_line_bytes
    max_header = policy.max_header_bytes

    offset = _read_magic(stream, base, source)
    # header bytes so far (docs/format.md#where-the-header-ends running header size)
    size = offset - base

    entries: list[Entry] = []
    lineno = 1
    while True:
        lineno += 1
        line_start = offset
        prefix = where(source, f"line {lineno}")
        # Bytes this line may hold, without its "\n" (>= 0, so readline always gets a bound).
        budget = max(0, min(max_line, max_header - size))
        piece = _readline(stream, min(PROBE, budget + 1))
        parts = [piece]
        length = len(piece)
        lead = _blank_run(piece)
        # A run of blanks longer than one probe: keep reading, still bounded by the budget.
        while lead == len(piece) and piece and not piece.endswith(b"\n") and length <= budget:
            piece = _readline(stream, min(PROBE, budget + 1 - length))
            parts.append(piece)
            length += len(piece)
            lead = _blank_run(piece)
        head = piece[lead : lead + 1]
        if head == b"\n":  # blank line: the data starts after it
            offset += length
            return entries, offset
        if not head:
            if length > budget:
                _too_long(prefix, length, size, policy)
            return entries, None  # EOF ends the header (docs/format.md#where-the-header-ends)
        if head != b"{":
            return _ended(stream, seekable, entries, line_start, prefix, "does not start with '{'")
        if not piece.endswith(b"\n") and length <= budget:
            rest = _readline(stream, budget + 1 - length)
            parts.append(rest)
            length += len(rest)
            piece = rest
        complete = parts[-1].endswith(b"\n")
        content = length - 1 if complete else length
        if content > budget:
            _too_long(prefix, content, size, policy)
        raw = b"".join(parts) if len(parts) > 1 else parts[0]
        offset += length
        size += length
        try:
            obj = _decode(raw.strip(), prefix)
        except _Invalid as exc:
            if not complete:  # a JSON line cut by the end of the file: a truncated header
                raise HeaderError(f"{prefix}the header is truncated: the file ends inside "
                                  f"this line ({exc}), and the blank line that ends the "
                                  "header was not found") from None
            return _ended(stream, seekable, entries, line_start, prefix, f"is not JSON ({exc})")
        if len(obj) != 1:
            found = "an empty object {}" if not obj else f"{len(obj)} keys {list(obj)[:5]}"
            raise HeaderError(f"{prefix}expected one key per header line, found {found}")
        ((key, value),) = obj.items()
        entries.append(Entry(key, value, lineno, line_start))
        if not complete:
            return entries, None  # the last line ran into EOF



def _read_magic(stream: IO[bytes], base: int, source: Any) -> int:
    """Read and check the magic line (a UTF-8 BOM before it warns); the offset after it."""
    first = _readline(stream, PROBE)
    offset = base + len(first)
    truncated = not first.endswith(b"\n") and len(first) >= PROBE
    if first.startswith(BOM):
        warnings.warn(
            f"{where(source)}header starts with a UTF-8 byte order mark; ignored",
            JnrrdWarning,
            stacklevel=4,  # the caller of parse_header (read_entries calls this)
        )
        first = first[len(BOM) :]
    try:
        _check_magic(first, truncated, where(source, "line 1"))
    except FormatError:
        _name_the_format(stream, base, first, source)
        raise
    return offset


def _name_the_format(stream: IO[bytes], base: int, first: bytes, source: Any) -> None:
    """A ``FormatError`` naming the format of a file that is not JNRRD when it is one that
    ``jnrrd convert`` reads (NIfTI, DICOM, .npy); nothing otherwise."""
    from .foreign import convert_hint, describe_bytes, sniff_stream

    path = getattr(stream, "name", None)
    name = describe_source(source) or (path if isinstance(path, str) else "")
    what = (sniff_stream(stream, base, name) if _seekable(stream) else None) or describe_bytes(
        first, name)
    if what is not None:
        raise FormatError(f"{where(source)}not a JNRRD file: it is {what}; "
                          f"{convert_hint(name or None, what)}") from None

def _too_long(prefix: str, length: int, size: int, policy: Policy) -> None:
    if size + length > policy.max_header_bytes and length <= policy.max_line_bytes:
        raise HeaderError(
            f"{prefix}header longer than the max_header_bytes cap ({policy.max_header_bytes}); "
            "pass max_header_bytes=... to allow it"
        )
    raise HeaderError(
        f"{prefix}header line too long (over the max_line_bytes cap, {policy.max_line_bytes}); "
        "pass max_line_bytes=... to allow it"
    )


def _ended(
    stream: IO[bytes],
    seekable: bool,
    entries: list[Entry],
    line_start: int,
    prefix: str,
    why: str,
) -> tuple[list[Entry], int]:
    """docs/format.md#where-the-header-ends: a line that is not a JSON object ends the header; data
    starts at it."""
    warnings.warn(
        f"{prefix}line {why}: header ends here without a blank line; data starts at byte "
        f"{line_start}",
        JnrrdWarning,
        stacklevel=4,
    )
    if seekable:
        stream.seek(line_start)
    return entries, line_start
