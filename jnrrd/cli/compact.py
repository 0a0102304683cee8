"""``jnrrd compact``: rewrite a tiled file without the tile bytes no header names any more
(superseded versions of edited tiles, tiles of aborted or interrupted commits;
docs/editing.md)."""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_storage_option, options_for, storage_options

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add the ``compact`` sub-command to the ``add_subparsers`` object ``sub``."""
    p = sub.add_parser(
        "compact", help="rewrite a tiled file without superseded tile bytes",
        description="Rewrite a tiled JNRRD file (or external dataset) with its tiles back to "
                    "back and a fresh header room for in-place commits; the dead bytes of "
                    "earlier edits go. Atomic, and it waits for no writer: a file open for "
                    "writing elsewhere is an error.")
    p.add_argument("file", metavar="FILE")
    add_storage_option(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Compact ``args.file``; print what it freed; return the exit code."""
    from ..editing.entry import compact
    from ..editing.info import format_bytes

    options = options_for(args.file, storage_options(args.storage_option))
    freed = compact(args.file, **options)
    print(f"{args.file}: compacted, {format_bytes(freed)} freed")
    return 0
