"""``jnrrd cleanup``: remove what interrupted writes left in a directory."""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Any

from .common import UsageError

__all__ = ["register"]


def _seconds(text: str) -> float:
    """argparse type: a number of seconds >= 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not v >= 0 or math.isinf(v):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds >= 0, "
                                         f"got {text!r}")
    return v


def register(sub: Any) -> None:
    """Add the ``cleanup`` sub-command to the ``add_subparsers`` object ``sub``."""
    from ..storage import STALE_AFTER

    p = sub.add_parser(
        "cleanup", help="remove leftovers of interrupted writes",
        description="Remove temporary files, and the unreferenced data files and tile "
                    "directories of interrupted writes, from each DIR. Only names this "
                    "library creates are touched, never a file a header references, and "
                    "nothing a running write holds.")
    p.add_argument("dirs", metavar="DIR", nargs="+")
    p.add_argument("--older-than", type=_seconds, default=STALE_AFTER, metavar="SECONDS",
                   help=f"only remove leftovers older than this (default {STALE_AFTER:g})")
    p.add_argument("--dry-run", action="store_true",
                   help="print what would be removed, remove nothing")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Clean ``args.dirs``; print one removed path per line; return the exit code."""
    from ..storage import cleanup

    for d in args.dirs:
        if not os.path.isdir(d):
            raise UsageError(f"{d}: not a directory")
    total = 0
    for d in args.dirs:
        for path in cleanup(d, older_than=args.older_than, dry_run=args.dry_run):
            print(path)
            total += 1
    verb = "would remove" if args.dry_run else "removed"
    print(f"{verb} {total} leftover{'s' if total != 1 else ''}", file=sys.stderr)
    return 0
