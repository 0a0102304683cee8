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

from ..errors import JnrrdWarning, where

if TYPE_CHECKING:
    from .server import Request, WebServer
    from .store import ZarrStore

__all__ = ["DEFAULT_CACHE_BYTES", "Request", "WebServer", "ZarrStore", "serve"]

#: the decoded-tile cache of a served volume (re-encoded chunks and virtual levels use it)
DEFAULT_CACHE_BYTES = 256 << 20


def serve(source: Any, *, port: int = 0, host: str = "127.0.0.1",
          cors: str | Sequence[str] | None = None, viewer: bool = False,
          layout: str = "4panel", storage_options: Mapping[str, Any] | None = None,
          cache_bytes: int | None = DEFAULT_CACHE_BYTES,
          on_request: Callable[[Request], None] | None = None,
          on_error: Callable[[str], None] | None = None, **policy: Any) -> WebServer:
    """Serve ``source`` (a path or URL, as :func:`jnrrd.open` takes it) read-only as a Zarr v3
    group with OME-Zarr 0.5 metadata, one array per level, C-order axes; returns the running
    :class:`WebServer` (``.url``, ``.close()``, a context manager).

    ``port`` 0 picks a free port. ``host`` other than a loopback address warns
    (:class:`~jnrrd.JnrrdWarning`): anyone who can reach it can read the volume. ``cors``:
    ``"*"`` or the origin(s) whose pages may read the store. ``viewer=True`` also serves
    neuroglancer's client (``pip install neuroglancer``) at ``.viewer_url``, in the
    ``layout`` given. ``on_request`` is called with every answered :class:`Request`,
    ``on_error`` with the message of every failed one. The other keywords go to
    :func:`jnrrd.open` (``bfloat16`` defaults to ``"float32"``: Zarr readers have no
    bfloat16).
    """
    import numpy as np

    from ..api import open as jopen
    from .server import WebServer
    from .store import ZarrStore

    policy.setdefault("bfloat16", "float32")
    origins = (cors,) if isinstance(cors, str) else tuple(cors or ())
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
        view = Viewer(*viewer_state(store, name=name, layout=layout)) if viewer else None
        server = WebServer(store, host=host, port=port, cors=origins, viewer=view,
                           last_modified=_modified(source), token=_token(vol),
                           on_request=on_request, on_error=on_error)
    except BaseException:
        vol.close()
        raise
    if not server.loopback:
        warnings.warn(JnrrdWarning(
            f"serving {name} on {host}, not a loopback address: anyone who can reach "
            f"port {server.port} of this machine can read the volume (docs/web-view.md)"),
            stacklevel=2)
    return server


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
