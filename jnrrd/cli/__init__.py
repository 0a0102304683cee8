"""The ``jnrrd`` command line (docs/cli.md): ``info``, ``validate``, ``convert``,
``cleanup``, ``compact``, ``refs``, ``preview``, ``serve`` and ``view``.

Exit codes: 0 success, 1 an invalid file or a failed command, 2 a usage error (also an
option value that parses but cannot apply: the commands raise :class:`.common.UsageError`).
Errors are one line on stderr (``jnrrd: error: <file>: <field>: <what>``), never a
traceback: the CLI catches :class:`jnrrd.JnrrdError` (bad input), ``OSError`` (missing or
unreadable files) and ``ValueError``.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence

from ..errors import JnrrdError, JnrrdWarning
from . import cleanup, compact, convert, info, preview, refs, serve, validate, view
from .common import UsageError, one_line, show_warning

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse: 2 for usage errors, 0 for --help/--version
        return e.code if isinstance(e.code, int) else 2
    if args.command is None:
        parser.print_usage(sys.stderr)
        print("jnrrd: error: a command is required (info, validate, convert, cleanup, compact, "
              "refs, preview, serve, view)",
              file=sys.stderr)
        return 2
    with warnings.catch_warnings():
        # A lenient read (e.g. a missing `encoding`) is worth one line, not a stack of them.
        warnings.showwarning = show_warning
        warnings.simplefilter("default", JnrrdWarning)
        try:
            return int(args.run(args))
        except UsageError as e:
            print(getattr(args, "usage", parser.format_usage)(), end="", file=sys.stderr)
            print(f"jnrrd: error: {e}", file=sys.stderr)
            return 2
        except BrokenPipeError:
            # `jnrrd info x | head`: the reader left; say nothing more (Python docs' recipe).
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return 1
        except (JnrrdError, OSError, ValueError) as e:
            print(f"jnrrd: error: {one_line(e)}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("jnrrd: interrupted", file=sys.stderr)
            return 130


def _parser() -> argparse.ArgumentParser:
    from .. import __version__

    p = argparse.ArgumentParser(
        prog="jnrrd",
        description="Inspect, validate and convert JNRRD volumes.",
        epilog="Exit codes: 0 ok, 1 invalid file or failure, 2 usage error.",
    )
    p.add_argument("--version", action="version", version=f"jnrrd {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    info.register(sub)
    validate.register(sub)
    convert.register(sub)
    cleanup.register(sub)
    compact.register(sub)
    refs.register(sub)
    preview.register(sub)
    serve.register(sub)
    view.register(sub)
    for command in sub.choices.values():  # a usage error shows the command's own usage
        command.set_defaults(usage=command.format_usage)
    return p
