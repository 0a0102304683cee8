"""``jnrrd serve``: a volume as a read-only Zarr v3 / OME-Zarr 0.5 store over HTTP
(docs/web-view.md). Also the serving loop ``jnrrd view`` shares (:func:`run_server`)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from .common import add_storage_option, options_for, storage_options

__all__ = ["add_server_options", "register", "run", "run_server"]


def _port(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {text!r}")
    return n


def _origin(text: str) -> str:
    from ..web.protocol import check_cors

    try:
        return check_cors([text], "--cors")[0]
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix(f"--cors {text!r}: ")) from None


def _host(text: str) -> str:
    if not text.strip() or text != text.strip():
        raise argparse.ArgumentTypeError(
            f"expected an address such as 127.0.0.1 (this machine only) or 0.0.0.0 (all its "
            f"addresses), got {text!r}")
    return text


def add_server_options(p: argparse.ArgumentParser) -> None:
    """The options ``serve`` and ``view`` share."""
    p.add_argument("file", metavar="FILE_OR_URL")
    p.add_argument("--port", type=_port, default=0, metavar="P",
                   help="the port to listen on (default 0: a free one, printed)")
    p.add_argument("--host", default="127.0.0.1", metavar="H", type=_host,
                   help="the address to listen on (default 127.0.0.1, this machine only; "
                        "another address warns: anyone who reaches it reads the volume)")
    p.add_argument("--cors", action="append", default=[], metavar="ORIGIN", type=_origin,
                   help="let web pages from ORIGIN read the store (e.g. "
                        "https://neuroglancer-demo.appspot.com, or '*'; repeatable)")
    p.add_argument("--log", action="store_true",
                   help="print one line per request on stderr")
    add_storage_option(p, targets=False)


def register(sub: Any) -> None:
    """Add the ``serve`` sub-command to the ``add_subparsers`` object ``sub``."""
    p = sub.add_parser(
        "serve", help="serve a volume read-only over HTTP as a Zarr v3 / OME-Zarr store",
        description="Serve a JNRRD or NRRD volume (a file or a URL) read-only over HTTP as a "
                    "Zarr v3 group with OME-Zarr 0.5 metadata, one array per pyramid level, "
                    "for zarr-python, neuroglancer, vizarr and other Zarr readers. Prints the "
                    "store's URL; Ctrl-C stops.")
    add_server_options(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Serve ``args.file`` until interrupted; return the exit code."""
    from ..web import redact, serve

    server = serve(args.file, port=args.port, host=args.host, cors=args.cors,
                   **callbacks(args), **options_for(args.file,
                                                    storage_options(args.storage_option)))

    def announce() -> None:
        print(server.url, flush=True)
        _say(f"serving {redact(args.file)} read-only as a Zarr v3 / OME-Zarr 0.5 group at "
             f"{server.url}{listening(server)} (Ctrl-C stops)")
    return run_server(server, announce)


def listening(server: Any) -> str:
    """`` (listening on ...)`` when the URL's host is not the address listened on."""
    if server.all_addresses:
        return f" (listening on all addresses of this machine, {server.host})"
    return ""


def callbacks(args: argparse.Namespace) -> dict[str, Any]:
    """``on_request`` (with ``--log``) and ``on_error`` printing to stderr; no request log
    kept in memory (``keep_requests=0``: a long-running server would only grow it)."""
    out: dict[str, Any] = {"on_error": lambda message: _say(f"error: {message}"),
                           "keep_requests": 0}
    if args.log:
        def log(r: Any) -> None:
            flag = " stored" if r.stored else ""
            rng = f" [{r.range}]" if r.range else ""
            _say(f"{r.method} {r.path}{rng} {r.status} {r.sent}{flag}")
        out["on_request"] = log
    return out


_PRINT = threading.Lock()


def _say(text: str) -> None:
    with _PRINT:  # one whole line per call, whichever thread prints
        sys.stderr.write(f"jnrrd: {text}\n")
        sys.stderr.flush()


def run_server(server: Any, announce: Any = None) -> int:
    """Call ``announce()`` (which prints the URL), then wait until Ctrl-C or SIGTERM, then
    close ``server``; exit code 0. The handlers are in place before the URL is printed: a
    caller that stops the server as soon as it reads the URL gets a clean stop."""
    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = None
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGTERM"):
        previous = signal.signal(signal.SIGTERM, stop)
    try:
        if announce is not None:
            announce()
        while not server.wait(0.5):  # a timed wait: Ctrl-C reaches it on Windows too
            pass
    except KeyboardInterrupt:
        _say("stopped")
    finally:
        server.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0
