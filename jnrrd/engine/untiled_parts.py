"""The untiled data section's parts: the files that hold it (attached, or detached keys of
the header directory's store), each opened and positioned at its data (line and byte skips,
docs/format.md#encodings-and-endianness, #where-the-data-is), and the room each must have before
anything is allocated. Reading them is :mod:`jnrrd.engine.untiled`.
"""

from __future__ import annotations

import io
import os
from typing import IO, TYPE_CHECKING, Any

from ..codecs.encodings import COMPRESSED
from ..errors import DataError, HeaderError, UnsupportedError, where
from ..policy import Policy
from ..storage import LocalStore, open_resolved

if TYPE_CHECKING:
    from ..storage import RemoteStore


__all__ = ["MAX_RATIO", "Part", "check_room", "data_names", "data_paths", "open_data", "remaining",
           "skip_bytes", "skip_lines"]


def data_names(core: Any, policy: Policy, source: Any = None
               ) -> tuple[list[str], str] | None:
    """``(names, field)`` of the detached data files, in order, as the header names them
    (keys of the header directory's store); ``None`` for attached data."""
    names: list[str]
    if core.data_file is not None:
        names, field = [core.data_file], "data_file"
    elif core.data_files is not None:
        names, field = list(core.data_files), "data_files"
    elif core.data_file_pattern is not None:
        names = core.data_file_pattern.file_names(max_files=policy.max_files, source=source)
        field = "data_file_pattern"
    else:
        return None
    if len(names) > policy.max_files:
        raise UnsupportedError(f"{where(source, field)}{len(names)} files exceed the "
                               f"max_files cap ({policy.max_files})")
    if not names:
        raise HeaderError(f"{where(source, field)}names no data file")
    return names, field


def data_paths(core: Any, store: LocalStore | RemoteStore | None, policy: Policy, source: Any = None
               ) -> list[str] | None:
    """Detached data files, in order, resolved as keys of ``store`` (the header's directory;
    ``None`` when the header came from a stream without a path). ``None`` for attached data."""
    found = data_names(core, policy, source)
    if found is None:
        return None
    names, field = found
    if store is None:
        raise UnsupportedError(f"{where(source, field)}detached data needs the header's path; "
                               "open the file by path, not through a file object")
    paths = [store.path(n, field=field) for n in names]
    if getattr(store, "remote", False):  # URLs, opened through the policy's opener
        remote: Any = store
        paths = [remote.url(p) for p in paths]
    return paths


def open_data(path: str, core: Any, policy: Policy, source: Any) -> IO[bytes]:
    """Open one detached data file; a missing one is a ``DataError`` naming the field (as a
    missing external tile is, docs/format.md#sparse-tiles)."""
    field = ("data_file" if core.data_file is not None
             else "data_files" if core.data_files is not None else "data_file_pattern")
    try:
        return open_resolved(path, policy, what=f"{where(source, field)}data file ")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
        raise DataError(f"{where(source, field)}data file {path!r} cannot be read: "
                        f"{exc.strerror or exc}") from None


def skip_lines(f: IO[bytes], n: int, what: str) -> None:
    """Skip ``n`` LF-terminated lines (CRLF counts as one), reading in bounded pieces."""
    while n > 0:
        line = f.readline(1 << 20)
        if not line:
            raise DataError(f"{what}line_skip: the file ended after fewer lines than it skips")
        if line.endswith(b"\n"):
            n -= 1


def remaining(f: IO[bytes]) -> int | None:
    try:
        return os.fstat(f.fileno()).st_size - f.tell()
    except (AttributeError, OSError, io.UnsupportedOperation):
        try:
            pos = f.tell()
            end = f.seek(0, io.SEEK_END)
            f.seek(pos)
            return end - pos
        except (OSError, io.UnsupportedOperation):
            return None


class Part:
    """One data stream: the attached section or one detached file, positioned at its data."""

    def __init__(self, core: Any, f: IO[bytes], nbytes: int, what: str) -> None:
        self.f, self.nbytes, self.what = f, nbytes, what
        self.type_name = core.type_name
        self.encoding = core.encoding
        skip = core.byte_skip
        if skip != -1 or self.encoding in COMPRESSED:
            # with raw byte_skip -1 the data ends the file: line_skip is moot
            # (docs/format.md#line-and-byte-skips); NRRD's compressed -1 skips the lines in the
            # file, then takes the end of the stream
            skip_lines(f, core.line_skip, what)
        if self.encoding in ("raw", "ascii", "hex"):
            if skip == -1:
                left = remaining(f)
                if left is None or left < nbytes:
                    raise DataError(f"{what}byte_skip -1: the data needs {nbytes} bytes, the "
                                    f"file holds {left}")
                # The data is the last nbytes of the file (NRRD byte skip -1, raw only).
                f.seek(-nbytes if nbytes else 0, io.SEEK_END)
            elif skip:
                skip_bytes(f, skip, what)
            self.skip = 0
        else:
            self.skip = skip


def skip_bytes(f: IO[bytes], n: int, what: str) -> None:
    rem = remaining(f)
    if rem is not None and n > rem:  # compared in Python: n may be near 2**63
        raise DataError(f"{what}byte_skip: {n} bytes to skip, the file holds {max(rem, 0)} "
                        "after the header")
    try:
        if f.seekable():
            f.seek(n, io.SEEK_CUR)
            return
    except (AttributeError, OSError):
        pass
    while n > 0:
        chunk = f.read(min(n, 1 << 20))
        if not chunk:
            raise DataError(f"{what}byte_skip: the file ended inside the skipped bytes")
        n -= len(chunk)


#: generous upper bounds of how many output bytes one input byte can become: deflate 1032:1;
#: a zstd RLE block is 4 bytes for 128 KiB; an LZ4 byte copies at most 255 more; bzip2's
#: run-length stages reach millions to one
MAX_RATIO = {"gzip": 1100, "zstd": 40_000, "lz4": 300, "bzip2": 50_000_000}


def check_room(encoding: str, f: IO[bytes], count: int, itemsize: int, what: str) -> None:
    """Refuse a part too short for its data before anything is allocated (docs/security.md#caps).

    raw needs ``count·itemsize`` bytes; hex two digits per byte; ascii at least one character
    and one separator per value. A compressed stream cannot expand beyond its format's largest
    ratio (:data:`MAX_RATIO`), so a few bytes claiming gigabytes fail here too; within that
    bound the decoders stop at the expected size.
    """
    if encoding == "raw":
        need, unit = count * itemsize, "bytes"
    elif encoding == "hex":
        need, unit = 2 * count * itemsize, "hex digits"
    elif encoding == "ascii":
        need, unit = 2 * count - 1, "characters (one value and a separator each)"
    elif encoding in MAX_RATIO:
        need = -(-count * itemsize // MAX_RATIO[encoding])
        unit = f"bytes of {encoding} data (its largest expansion is {MAX_RATIO[encoding]}:1)"
    else:
        return
    rem = remaining(f)
    if rem is not None and rem < need:
        raise DataError(f"{what}the data needs at least {need} {unit}, the file holds {rem} "
                        "bytes after the header and skips")
