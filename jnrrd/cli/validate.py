"""``jnrrd validate``: check files against the format rules."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add the ``validate`` sub-command to the ``add_subparsers`` object ``sub``."""
    val = sub.add_parser("validate", help="check files against the format rules",
                         description="Validate files; exit 0 when every file is valid.")
    val.add_argument("files", metavar="FILE", nargs="+")
    val.add_argument("--json", action="store_true", help="print the problems as a JSON array")
    val.add_argument("--deep", action="store_true",
                     help="also decode every tile and check sizes and checksums")
    val.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Validate ``args.files``; return the exit code."""
    from ..validate import run_validate

    return int(run_validate(args.files, as_json=args.json, deep=args.deep, out=sys.stdout))
