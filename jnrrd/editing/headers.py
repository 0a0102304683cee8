"""The header a commit writes: the working header with the tile tables of the commit,
rendered, checksummed (internal files) and read back through the reader's own checks before
anything is published (docs/editing.md, "What a commit writes")."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from ..errors import JnrrdError, JnrrdWarning, where
from ..header import Header, parse_header_bytes, render_header
from ..policy import Policy
from .consistent import CHECKSUM, ROOM, add_checksum
from .tables import Tables

__all__ = ["ALIGN", "check_rendered", "render_external", "render_internal", "stale_fields"]

#: the header room of an editable internal file is a multiple of this many bytes
ALIGN = 4096
#: fields that describe the old tiles and cannot be carried over a commit unchanged: the
#: writer's informational ones go silently, ``level_quality`` (asked for by the user) with a
#: warning naming it
_DROPPED = ("level_offsets", "compression_levels")


def stale_fields(header: Header, prefix: str, source: Any) -> None:
    """Drop the fields an edit makes wrong (see ``_DROPPED``; ``level_quality`` warns)."""
    p = prefix + ":"
    for name in _DROPPED:
        header.pop(p + name, None)
    if header.pop(p + "level_quality", None) is not None:
        warnings.warn(f"{where(source, p + 'level_quality')}dropped: the edited levels are "
                      "no longer what it measured (jnrrd.write(..., quality=True) computes "
                      "it again)", JnrrdWarning, stacklevel=4)


def render_internal(header: Header, prefix: str, offsets: Sequence[int | None],
                    sizes: Sequence[int | None], metadata: list[Any] | None, room: int,
                    fmt: str) -> bytes:
    """The header of an internal editable file: its tables, ``header_room`` and, as its
    second line, ``header_checksum``."""
    p = prefix + ":"
    h = Header(header)
    h.pop(p + CHECKSUM, None)
    h[p + "storage"] = "internal"
    h[p + "format"] = fmt
    h[p + "offset_table"] = list(offsets)
    h[p + "size_table"] = list(sizes)
    for k in ("pattern", "files", "base_dir"):
        h.pop(p + k, None)
    _metadata(h, p, metadata)
    h[p + ROOM] = room
    return add_checksum(render_header(h), prefix)


def render_external(header: Header, prefix: str, tables: Tables, pattern: str | None,
                    base_dir: str) -> bytes:
    """The header of an external editable dataset: ``base_dir``, the pattern and every tile
    the pattern does not name as a ``tile:files`` entry."""
    p = prefix + ":"
    h = Header(header)
    for k in (CHECKSUM, ROOM, "offset_table", "size_table", "format"):
        h.pop(p + k, None)
    h[p + "storage"] = "external"
    if pattern is None:
        h.pop(p + "pattern", None)
    else:
        h[p + "pattern"] = pattern
    h[p + "base_dir"] = base_dir
    files = tables.files()
    if files:
        h[p + "files"] = files
    else:
        h.pop(p + "files", None)
    _metadata(h, p, tables.metadata())
    return render_header(h)


def _metadata(h: Header, p: str, metadata: list[Any] | None) -> None:
    if metadata is not None and any(metadata):
        h[p + "metadata"] = metadata
    else:
        h.pop(p + "metadata", None)


def check_rendered(data: bytes, policy: Policy, source: Any) -> Header:
    """Parse ``data`` back and run the reader's checks on it: a commit never publishes a
    header the reader would refuse (the error says what, naming the file)."""
    from ..api import check_header

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", JnrrdWarning)
            header, _ = parse_header_bytes(data, policy=policy, source=source)
            check_header(header, policy=policy, source=source)
    except JnrrdError as exc:
        raise type(exc)(f"{where(source)}the commit's header does not read back, nothing "
                        f"was committed: {exc}") from None
    return header
