"""A web view of a volume: a read-only Zarr v3 / OME-Zarr 0.5 store over HTTP (``jnrrd serve``,
:func:`serve`) and the neuroglancer client beside it (``jnrrd view``, ``serve(viewer=True)``).

- :mod:`.store` — the volume as Zarr keys: metadata documents, stored or re-encoded chunks;
- :mod:`.protocol` — the HTTP rules: request checks, ranges, validators, CORS;
- :mod:`.server` — the server: threads, connections, answers, the request log;
- :mod:`.viewer` — neuroglancer's bundled client and the state it opens with.

docs/web-view.md is the user's page.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ArgumentError, JnrrdWarning, where
from .protocol import REQUEST_LOG_SIZE, redact, without_query

if TYPE_CHECKING:
    from .server import Request, WebServer
    from .store import ZarrStore

__all__ = ["DEFAULT_CACHE_BYTES", "REQUEST_LOG_SIZE", "Request", "WebServer", "ZarrStore",
           "redact", "serve"]

#: the decoded-tile cache of a served volume (re-encoded chunks and virtual levels use it)
DEFAULT_CACHE_BYTES = 256 << 20



def serve(source: Any, *, port: int = 0, host: str = "127.0.0.1",
          cors: str | Sequence[str] | None = None, viewer: bool = False,
          layout: str = "4panel", storage_options: Mapping[str, Any] | None = None,
          cache_bytes: int | None = DEFAULT_CACHE_BYTES,
          on_request: Callable[[Request], None] | None = None,
          on_error: Callable[[str], None] | None = None,
          keep_requests: int = REQUEST_LOG_SIZE, **policy: Any) -> WebServer:
    """Serve ``source`` (a path or URL, as :func:`jnrrd.open` takes it) read-only as a Zarr v3
    group with OME-Zarr 0.5 metadata, one array per level, C-order axes; returns the running
    :class:`WebServer` (``.url``, ``.close()``, a context manager).

    ``port`` 0 picks a free port. ``host`` other than a loopback address warns
    (:class:`~jnrrd.JnrrdWarning`): anyone who can reach it can read the volume. ``cors``:
    ``"*"`` or the origin(s) whose pages may read the store. ``viewer=True`` also serves
    neuroglancer's client (``pip install neuroglancer``) at ``.viewer_url``, in the
    ``layout`` given. ``on_request`` is called with every answered :class:`Request`,
    ``on_error`` with the message of every failed one; ``.requests`` keeps the last
    ``keep_requests`` (0: none). The other keywords go to
    :func:`jnrrd.open` (``bfloat16`` defaults to ``"float32"``: Zarr readers have no
    bfloat16).
    """
    import numpy as np

    from ..api import open as jopen
    from .protocol import check_cors
    from .server import WebServer
    from .store import ZarrStore
    from .viewer import LAYOUTS

    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ArgumentError(f"port {port!r}: expected 0 to 65535 (0: a free port)")
    if not isinstance(host, str) or not host.strip() or host != host.strip():
        raise ArgumentError(f"host {host!r}: expected an address such as 127.0.0.1 (this "
                            "machine only) or 0.0.0.0 (all its addresses)")
    if layout not in LAYOUTS:
        raise ArgumentError(f"layout {layout!r}: expected one of {', '.join(LAYOUTS)}")
    origins = check_cors((cors,) if isinstance(cors, str) else tuple(cors or ()))
    policy.setdefault("bfloat16", "float32")
    vol = jopen(source, storage_options=dict(storage_options) if storage_options else None,
                cache_bytes=cache_bytes, **policy)
    try:
        name = _display_name(source)
        dtype = names = None
        if viewer:
            from ..integrations.ngff import axis_names
            from .viewer import VIEWER_TYPES, Viewer, dimension_names, viewer_state

            names = dimension_names(axis_names(vol))

            if np.dtype(vol.dtype).name not in VIEWER_TYPES:
                dtype = np.float32
                warnings.warn(JnrrdWarning(
                    f"{where(vol.name, 'type')}neuroglancer has no {np.dtype(vol.dtype).name} "
                    "images: the viewer's store serves the values as float32 (rounded); "
                    "jnrrd serve keeps the type"), stacklevel=2)
        store = ZarrStore(vol, name=name, dtype=dtype, axis_names=names)
        _warn_geometry(vol, viewer)
        view = Viewer(*viewer_state(store, name=name, layout=layout)) if viewer else None
        server = WebServer(store, host=host, port=port, cors=origins, viewer=view,
                           last_modified=_modified(source), token=_token(vol),
                           on_request=on_request, on_error=on_error,
                           keep_requests=keep_requests)
    except BaseException:
        vol.close()
        raise
    if not server.loopback:
        where_ = "every address of this machine" if server.all_addresses else host
        warnings.warn(JnrrdWarning(
            f"serving {name} on {where_}, not a loopback address: anyone who can reach "
            f"port {server.port} of this machine can read the volume (there is no "
            "authentication; for access from elsewhere, keep 127.0.0.1 and put a web server "
            "with authentication and TLS in front)"), stacklevel=2)
    return server


def _warn_geometry(vol: Any, viewer: bool) -> None:
    """Warn when the served metadata cannot carry the file's world frame or axis order."""
    from ..integrations.ngff import axis_types, is_oblique

    shown = "the viewer shows" if viewer else "the OME-Zarr metadata give"
    if is_oblique(vol):
        warnings.warn(JnrrdWarning(
            f"{where(vol.name, 'space_directions')}flipped, rotated or permuted axes: {shown} "
            "the volume axis-aligned (scale = each direction's length, translation = the "
            "origin along it), so its coordinates are not the file's world coordinates (a "
            "flipped axis' are negated); the 'jnrrd' group attribute keeps the header"),
            stacklevel=3)
    types = list(reversed(axis_types(vol)))  # C order, as served
    if not viewer and "space" in types and any(
            t != "space" for t in types[types.index("space"):]):
        warnings.warn(JnrrdWarning(
            f"{where(vol.name, 'kinds')}a channel or time axis is served after the space "
            "axes (the header's order, reversed): zarr-python and neuroglancer read the "
            "group, but it is not valid OME-Zarr 0.5 (space axes last), so OME-Zarr "
            "validators reject it; jnrrd convert to OME-Zarr reorders the axes"),
            stacklevel=3)


def __getattr__(name: str) -> Any:
    """The server and store classes, imported on first use (the package stays light for the
    command line's start)."""
    if name in ("Request", "WebServer"):
        from . import server

        return getattr(server, name)
    if name == "ZarrStore":
        from .store import ZarrStore

        return ZarrStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _display_name(source: Any) -> str:
    text = os.fspath(source) if isinstance(source, (str, os.PathLike)) else str(
        getattr(source, "name", "volume"))
    text = without_query(text)
    base = text.rstrip("/").rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
    for suffix in (".jnrrd", ".nrrd", ".nhdr"):
        if base.lower().endswith(suffix):
            return base[: -len(suffix)] or "volume"
    return base or "volume"


def _modified(source: Any) -> float:
    """The file's modification time for a local path, else now (the server's start)."""
    if isinstance(source, (str, os.PathLike)):
        try:
            return os.stat(source).st_mtime
        except (OSError, ValueError):
            pass
    return time.time()


def _token(vol: Any) -> str:
    """The volume's version in the chunks' ETags: its header (which holds the tile tables)
    and the opened file's version (inode, size and mtime, or the remote object's ETag)."""
    version = getattr(vol.reopen, "version", None) if vol.reopen is not None else None
    text = json.dumps(dict(vol.header), sort_keys=True, default=str) + repr(version)
    return hashlib.sha256(text.encode()).hexdigest()[:20]
