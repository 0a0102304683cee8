"""``jnrrd validate``: check JNRRD and classic NRRD files against the format rules."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import add_storage_option, storage_options

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add the ``validate`` sub-command to the ``add_subparsers`` object ``sub``."""
    val = sub.add_parser("validate", help="check JNRRD and NRRD files against the format rules",
                         description="Validate files; exit 0 when every file is valid.")
    val.add_argument("files", metavar="FILE", nargs="+")
    val.add_argument("--json", action="store_true", help="print the problems as a JSON array")
    val.add_argument("--deep", action="store_true",
                     help="also decode every tile and check sizes and checksums")
    val.add_argument("--quiet", "-q", action="store_true",
                     help="no progress bar for --deep")
    add_storage_option(val)
    val.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Validate ``args.files``; return the exit code."""
    from ..progress import Bar
    from ..validation import run_validate

    # the bar goes to stderr, drawn only on a terminal
    bar = Bar(label="tiles") if args.deep and not args.quiet else None
    return int(run_validate(args.files, as_json=args.json, deep=args.deep, out=sys.stdout,
                            progress=bar, storage_options=storage_options(args.storage_option)))
