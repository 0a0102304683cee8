"""``jnrrd preview``: a PNG picture of a volume (mid-slices or maximum projections)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from .common import UsageError, add_storage_option, options_for, storage_options

__all__ = ["register"]


def _size(text: str) -> int:
    from ..preview.plan import MAX_SIZE

    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_SIZE:
        raise argparse.ArgumentTypeError(f"expected an integer from 1 to {MAX_SIZE}, got "
                                         f"{text!r}")
    return n


def _level(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a level number (0, 1, ...), got {text!r}")
    return n


def register(sub: Any) -> None:
    """Add the ``preview`` sub-command to the ``add_subparsers`` object ``sub``."""
    p = sub.add_parser(
        "preview", help="write a PNG picture: three mid-slices or maximum projections",
        description="Write a PNG picture of a JNRRD or NRRD volume: three orthogonal "
                    "mid-slices side by side (one view for 2-D), read from the coarsest level "
                    "that gives the requested size.")
    p.add_argument("file", metavar="IN")
    p.add_argument("-o", "--output", metavar="OUT.png", required=True,
                   help="the PNG file to write")
    p.add_argument("--mip", action="store_true",
                   help="maximum-intensity projections instead of mid-slices")
    p.add_argument("--size", type=_size, default=256, metavar="N",
                   help="pixels on the longest side of a view (default 256)")
    p.add_argument("--level", type=_level, default=None, metavar="K",
                   help="read level K instead of the coarsest level that gives the size")
    p.add_argument("--labels", action=argparse.BooleanOptionalAction, default=None,
                   help="show values as label colours (default: automatic, docs/cli.md)")
    add_storage_option(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Write the preview of ``args.file`` to ``args.output``; return the exit code."""
    from ..api import open as jopen
    from ..preview import render_preview, write_png

    suffix = os.path.splitext(str(args.output))[1]
    if suffix and suffix.lower() != ".png":
        raise UsageError(f"-o {args.output}: jnrrd preview writes PNG pictures only; name the "
                         "output *.png")
    with jopen(args.file, **options_for(args.file, storage_options(args.storage_option))
               ) as vol:
        if args.level is not None and args.level >= len(vol.levels):
            raise UsageError(f"--level {args.level}: {args.file} has {len(vol.levels)} "
                             f"level(s), 0 to {len(vol.levels) - 1}")
        picture = render_preview(vol, args.size, mip=args.mip, level=args.level,
                                 labels=args.labels)
    write_png(args.output, picture)
    return 0
