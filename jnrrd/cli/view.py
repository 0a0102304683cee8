"""``jnrrd view``: serve a volume and open it in neuroglancer (docs/web-view.md)."""

from __future__ import annotations

import argparse
from typing import Any

from .common import options_for, storage_options
from .serve import _say, add_server_options, callbacks, listening, run_server

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    """Add the ``view`` sub-command to the ``add_subparsers`` object ``sub``."""
    from ..web.viewer import LAYOUTS

    p = sub.add_parser(
        "view", help="serve a volume and open it in neuroglancer (a web browser)",
        description="Serve a JNRRD or NRRD volume (a file or a URL) as 'jnrrd serve' does, "
                    "together with the neuroglancer web viewer (pip install "
                    "neuroglancer), and open it in the browser: voxel size and units "
                    "from the file, the pyramid as its resolutions. Prints the viewer's URL; "
                    "Ctrl-C stops.")
    add_server_options(p)
    p.add_argument("--no-browser", action="store_true",
                   help="only print the URL (on a server, or to open it elsewhere)")
    p.add_argument("--layout", choices=LAYOUTS, default="4panel",
                   help="neuroglancer's panel layout (default 4panel)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Serve ``args.file`` with the viewer until interrupted; return the exit code."""
    from ..web import serve

    server = serve(args.file, port=args.port, host=args.host, cors=args.cors, viewer=True,
                   layout=args.layout, **callbacks(args),
                   **options_for(args.file, storage_options(args.storage_option)))
    url = str(server.viewer_url)

    def announce() -> None:
        print(url, flush=True)
        _say(f"neuroglancer at {url}, the store at {server.url}{listening(server)} "
             "(Ctrl-C stops)")
        if not args.no_browser:
            import webbrowser

            if not webbrowser.open(url):
                _say("no web browser found here: open the URL above in one")
    return run_server(server, announce)
