"""Bytes ⇄ :class:`Header`: the JNRRD header wire format, typed core fields, extension paths.

The story of a header read: :mod:`.wire` splits the bytes into single-key JSON lines and finds
where the data starts (docs/format.md#the-header); :mod:`.model` turns the lines into a
:class:`Header` (docs/format.md#duplicates-and-unknown-fields), merging hierarchical extension paths
with :mod:`.paths` (docs/format.md#hierarchical-extension-paths); :mod:`.fields` checks the core
fields (docs/format.md#core-fields, #types, #encodings-and-endianness, #where-the-data-is; space and
per-axis fields in :mod:`.geometry_fields`, detached data in :mod:`.detached_fields`);
:mod:`.render` writes a header back in canonical order (docs/format.md#header-line-order).
"""

from __future__ import annotations

import io
import os
from typing import IO, Any

from ..errors import HeaderError, where
from ..policy import Policy
from .detached_fields import DataFilePattern
from .fields import CoreFields, core_fields
from .model import TILE_FIELDS, TILE_URI, TILE_URI_PREFIX, Header, build_header
from .paths import parse_path
from .render import render_header
from .wire import read_entries

__all__ = [
    "TILE_FIELDS",
    "TILE_URI",
    "TILE_URI_PREFIX",
    "CoreFields",
    "DataFilePattern",
    "Header",
    "check_header_end",
    "core_fields",
    "parse_header",
    "parse_header_bytes",
    "parse_path",
    "render_header",
]


def parse_header(
    stream: IO[bytes], *, policy: Policy | None = None, source: Any = None
) -> tuple[Header, int | None]:
    """Read the header from a binary file object positioned at the start of the file.

    Returns the :class:`Header` and the absolute offset of the first data byte (``None`` when
    the header ended at EOF). The stream is read line by line with bounded ``readline`` calls
    and is left at that offset, so non-seekable streams work too; the one exception is a
    header that ends on a non-JSON line (warned): that line has been consumed, and a seekable
    stream is moved back to it.

    Raises ``FormatError`` (not a JNRRD file, including a classic ``NRRD000x`` magic),
    ``VersionError`` (another JNRRD version) or ``HeaderError`` (malformed lines, duplicate
    fields, caps of ``policy`` exceeded).
    """
    policy = policy if policy is not None else Policy()
    if source is None:
        name = getattr(stream, "name", None)
        source = name if isinstance(name, str | os.PathLike) else None
    entries, data_start = read_entries(stream, policy, source)
    return build_header(entries, policy, source), data_start


def check_header_end(header: Header, data_start: int | None, source: Any = None) -> None:
    """A header that ended at the end of the file (``data_start`` None, no blank line) is
    legal only when no attached data is needed (docs/format.md#where-the-header-ends):
    detached data files, external tiles, or internal tiles that are all sparse. Otherwise
    the file was cut inside its header: ``HeaderError`` naming it."""
    if data_start is not None or any(
            k in header for k in ("data_file", "data_files", "data_file_pattern")):
        return
    p = (header.prefix_for(TILE_URI_PREFIX) or "tile") + ":"
    if header.get(p + "enabled") is True:
        offsets = header.get(p + "offset_table")
        if header.get(p + "storage") == "external" or (
                isinstance(offsets, list) and all(o is None for o in offsets)):
            return
    raise HeaderError(f"{where(source)}the header is truncated: the file ends after its "
                      "last complete header line, the blank line that ends the header was "
                      "not found, and the data the header describes is not there")


def parse_header_bytes(
    data: bytes, *, policy: Policy | None = None, source: Any = None
) -> tuple[Header, int | None]:
    """:func:`parse_header` over bytes (``data_start`` is an offset into ``data``)."""
    return parse_header(io.BytesIO(data), policy=policy, source=source)
