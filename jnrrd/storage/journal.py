"""A redo journal for rewriting the first bytes of a local file in place.

An editable internal file (docs/editing.md) commits by rewriting its header in place. A
crash or power loss in the middle of that write would leave a torn header, so the new bytes
are first written to a journal beside the file, ``.<name>.jnrrd-journal``, durably and
atomically (temporary file, ``fsync``, ``os.replace``, directory ``fsync``); only then is the
file overwritten, ``fsync``ed, and the journal removed.

The journal records which file it belongs to (device and inode of the open file, so a file
replaced since then never takes it) and a CRC-32 of its contents, so a journal cut short is
never used. Whoever reads the file and finds its first bytes inconsistent (the header's own
checksum, :mod:`jnrrd.editing.consistent`) reads them from the journal instead; the next
writer applies it for good. Nothing here knows what the bytes mean.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib

from .writes import atomic_file

__all__ = ["file_identity", "journal_path", "read_journal", "remove_journal",
           "write_journal"]

_MAGIC = b"JNRRD-J1"
_HEAD = struct.Struct("<IQQQ")  # crc32 of the rest, device, inode, length of the bytes
#: the largest journal read back (a header is capped well below this by the reader's policy)
_MAX_BYTES = 1 << 31


def journal_path(path: str) -> str:
    """The journal of the file ``path``: ``.<name>.jnrrd-journal`` beside it."""
    d, name = os.path.split(os.path.abspath(path))
    return os.path.join(d, f".{name}.jnrrd-journal")


def file_identity(fd: int) -> tuple[int, int]:
    """``(device, inode)`` of an open file (the file index on Windows)."""
    st = os.fstat(fd)
    return int(st.st_dev) & (2**64 - 1), int(st.st_ino) & (2**64 - 1)


def write_journal(path: str, identity: tuple[int, int], data: bytes) -> None:
    """Durably record that the file ``path`` (of ``identity``) is to start with ``data``."""
    body = struct.pack("<QQQ", identity[0], identity[1], len(data)) + data
    with atomic_file(journal_path(path)) as f:
        f.write(_MAGIC + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF) + body)


def read_journal(path: str, identity: tuple[int, int]) -> bytes | None:
    """The bytes the journal of ``path`` holds for the file of ``identity``; ``None`` when
    there is no journal, it belongs to another file, or it is incomplete."""
    try:
        with open(journal_path(path), "rb") as f:
            head = f.read(len(_MAGIC) + _HEAD.size)
            if len(head) < len(_MAGIC) + _HEAD.size or not head.startswith(_MAGIC):
                return None
            crc, dev, ino, n = _HEAD.unpack_from(head, len(_MAGIC))
            if (dev, ino) != identity or n > _MAX_BYTES:
                return None
            data = f.read(n + 1)
    except OSError:
        return None
    if len(data) != n or zlib.crc32(head[len(_MAGIC) + 4:] + data) & 0xFFFFFFFF != crc:
        return None
    return data


def remove_journal(path: str) -> None:
    """Remove the journal of ``path`` (absent is fine)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(journal_path(path))
