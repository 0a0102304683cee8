"""The command line every example shares: ``--out DIR`` (default: a temporary directory)."""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable
from typing import Any


def run(main: Callable[..., Any], doc: str,
        add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
        default_out: str | None = None) -> Any:
    """Parse ``--out`` (and the example's own arguments), then call
    ``main(out_dir, args)`` with a directory that exists for the whole call (without
    ``--out``: ``default_out`` when given, else a temporary directory removed afterwards)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", default=default_out,
                        help="directory to write into (default: "
                             + (repr(default_out) if default_out else "a temporary one") + ")")
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args()
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        return main(args.out, args)
    with tempfile.TemporaryDirectory() as tmp:
        return main(tmp, args)
