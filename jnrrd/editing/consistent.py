"""Reading a committed header of a file that is rewritten in place (docs/editing.md).

An editable internal file commits by rewriting its header in place. Its second line is
``{"<tile prefix>:header_checksum": "crc32c:<8 hex>"}``: the CRC-32C of every other byte of
the header, the blank line included. The line has a fixed place and a fixed length, so a
header read while a commit rewrites it, or left torn by a crash, always holds one such line
and fails it. A reader then takes the header from the commit's journal
(:mod:`jnrrd.storage.journal`) or, when a commit was just finishing, reads it again.

:func:`consistent_stream` gives the readers (``open``, ``read_header``, ``validate``) a
stream whose header bytes are exactly the bytes that passed the check: the parser reads them
from memory, everything after them from the file.
"""

from __future__ import annotations

import io
import os
import re
import time
from typing import IO, Any

from ..errors import DataError, HeaderError
from ..storage import file_identity, read_journal

__all__ = ["CHECKSUM", "ROOM", "add_checksum", "consistent_stream", "header_end",
           "verify"]

#: the fields (under the tile prefix) an editable internal file carries
CHECKSUM = "header_checksum"
ROOM = "header_room"
_MAGIC_LINE = b'{"jnrrd": "0004"}\n'
_CHECK_LINE = re.compile(rb'\{"([^"\\\n]{1,256}):header_checksum": "crc32c:([0-9a-f]{8})"\}\n')


def _crc32c(data: bytes) -> int:
    import crc32c  # on first use: only files written for editing carry the check line

    return int(crc32c.crc32c(data)) & 0xFFFFFFFF
#: tries to read a header that a commit is rewriting (doubling waits from 1 ms, half a second
#: in all: a torn read with no journal left means the commit has just finished)
_TRIES = 9


def add_checksum(header: bytes, prefix: str) -> bytes:
    """``header`` (rendered, magic line first, no checksum line) with its checksum line
    inserted as the second line."""
    if not header.startswith(_MAGIC_LINE):
        raise HeaderError("an editable header must start with the magic line")
    value = _crc32c(header)
    line = f'{{"{prefix}:{CHECKSUM}": "crc32c:{value:08x}"}}\n'.encode()
    if not _CHECK_LINE.fullmatch(line):
        raise HeaderError(f"{prefix!r}: a tile prefix for an editable file must be plain text")
    return _MAGIC_LINE + line + header[len(_MAGIC_LINE):]


def _check_line(raw: bytes | memoryview) -> re.Match[bytes] | None:
    if bytes(raw[:len(_MAGIC_LINE)]) != _MAGIC_LINE:
        return None
    return _CHECK_LINE.match(bytes(raw[len(_MAGIC_LINE):len(_MAGIC_LINE) + 300]))


def header_end(raw: bytes) -> int:
    """Where the blank line that ends a header written by this library ends (-1: not
    found). JSON lines hold no raw newline, so the first ``\\n\\n`` is the end."""
    end = raw.find(b"\n\n")
    return -1 if end < 0 else end + 2


def verify(raw: bytes) -> bool | None:
    """Whether the header at the start of ``raw`` (ending at its blank line) matches its
    checksum line; ``None`` when it has none."""
    m = _check_line(raw)
    if m is None:
        return None
    end = header_end(raw)
    if end < 0:
        return False
    rest = raw[:len(_MAGIC_LINE)] + raw[len(_MAGIC_LINE) + m.end():end]
    return _crc32c(rest) == int(m.group(2), 16)


def consistent_stream(f: IO[bytes], path: str, max_header_bytes: int) -> IO[bytes]:
    """``f`` (at its start) when its header has no checksum line; otherwise a stream over
    the same file whose header bytes are a checked commit (the file's own, or the journal's
    of a commit that was interrupted), read again while a commit is being written.

    ``DataError`` when the header fails its checksum and no commit explains it.
    """
    first = _peek(f, len(_MAGIC_LINE) + 300)
    if _check_line(first) is None:
        return f
    try:
        identity = file_identity(f.fileno())
    except (AttributeError, OSError, io.UnsupportedOperation):
        identity = None
    for attempt in range(_TRIES):
        raw = _read_header(f, max_header_bytes, path)
        if verify(raw):
            return _Overlay.stream(f, raw)
        journal = read_journal(path, identity) if identity is not None else None
        if journal is not None and verify(journal):
            return _Overlay.stream(f, journal)
        time.sleep(0.001 * 2**attempt)
    raise DataError(f"{path}: the header does not match its {CHECKSUM} line and no "
                    "journal of an interrupted commit holds it: the header is damaged")


def _peek(f: IO[bytes], n: int) -> bytes:
    pos = f.tell()
    try:
        return f.read(n)
    finally:
        f.seek(pos)


def _read_header(f: IO[bytes], cap: int, path: str) -> bytes:
    """The bytes of ``f`` up to the end of its first blank line (the whole file when there
    is none), at most ``cap`` (a larger header is a ``HeaderError``)."""
    f.seek(0)
    parts: list[bytes] = []
    total = 0
    tail = b""
    while True:
        block = f.read(1 << 16)
        if not block:
            break
        i = (tail + block).find(b"\n\n")
        if i >= 0:
            keep = i + 2 - len(tail)
            parts.append(block[:keep])
            total += keep
            break
        parts.append(block)
        total += len(block)
        if total > cap:
            raise HeaderError(f"{path}: header longer than max_header_bytes ({cap})")
        tail = block[-1:]
    f.seek(0)
    return b"".join(parts)


class _Overlay(io.RawIOBase):
    """A file read with its first bytes replaced by ``head`` (seekable; ``fileno`` is the
    file's, for memory maps and positional reads of the tiles)."""

    def __init__(self, f: IO[bytes], head: bytes) -> None:
        super().__init__()
        self._f, self._head, self._pos = f, head, 0
        self.name: Any = getattr(f, "name", None)

    @classmethod
    def stream(cls, f: IO[bytes], head: bytes) -> IO[bytes]:
        return io.BufferedReader(cls(f, head))

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = len(b)
        if self._pos < len(self._head):
            chunk = self._head[self._pos:self._pos + n]
        else:
            self._f.seek(self._pos)
            chunk = self._f.read(n)
        b[:len(chunk)] = chunk
        self._pos += len(chunk)
        return len(chunk)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset += self._pos
        elif whence == io.SEEK_END:
            offset += max(len(self._head), os.fstat(self.fileno()).st_size)
        if offset < 0:
            raise OSError(22, "negative seek position")
        self._pos = offset
        return offset

    def tell(self) -> int:
        return self._pos

    def fileno(self) -> int:
        return self._f.fileno()

    def close(self) -> None:
        if not self.closed:
            self._f.close()
        super().close()
