"""``jnrrd refs``: a kerchunk reference set describing a tiled file as a Zarr v3 group."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .common import add_storage_option, options_for, storage_options

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add the ``refs`` sub-command to the ``add_subparsers`` object ``sub``."""
    refs = sub.add_parser(
        "refs", help="write a kerchunk reference set: the file as a Zarr v3 group, no copy",
        description="Describe a tiled JNRRD file as a Zarr v3 group (kerchunk references "
                    "version 1, one array per level, chunks pointing into the unchanged "
                    "file); open it with fsspec's reference filesystem and zarr-python.")
    refs.add_argument("file", metavar="IN")
    refs.add_argument("-o", "--output", metavar="OUT.json",
                      help="write the JSON here (default: print it)")
    add_storage_option(refs)
    refs.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print or write the references of ``args.file``; return the exit code."""
    from ..integrations.zarr_refs import kerchunk_refs

    refs = kerchunk_refs(args.file,
                         **options_for(args.file, storage_options(args.storage_option)))
    text = json.dumps(refs, indent=None, separators=(",", ":"))
    if args.output is None:
        sys.stdout.write(text + "\n")
        return 0
    from ..storage import atomic_file

    with atomic_file(args.output) as f:  # never a half-written reference file
        f.write((text + "\n").encode())
    return 0
