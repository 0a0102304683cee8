"""What a source or target string is: a URL (``scheme://...``), a remote URL (read and
written through fsspec: any scheme but ``file://``), or a ``file://`` URL naming a local
path. These tests import nothing remote: deciding that a path is local costs no fsspec,
aiohttp or event loop (the remote modules load when a URL is first opened).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["is_remote", "is_url", "local_path"]

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def is_url(path: str) -> bool:
    """True for ``scheme://...`` strings."""
    return bool(_URL.match(path))


def is_remote(source: Any) -> bool:
    """True for a URL string served through fsspec (any scheme but ``file://``)."""
    if not isinstance(source, str):
        return False
    m = _URL.match(source)
    return m is not None and m.group(1).lower() != "file"


def local_path(source: Any) -> Any:
    """A ``file://`` URL as a local path; anything else unchanged."""
    if isinstance(source, str) and source[:7].lower() == "file://":
        from urllib.parse import unquote, urlsplit

        return unquote(urlsplit(source).path)
    return source
