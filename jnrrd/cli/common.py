"""Shared pieces of the command line: the usage error, one-line messages, argument types
and the file kind by suffix."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

__all__ = ["JNRRD", "NPY", "NRRD", "LazyChoices", "UsageError", "add_storage_option", "codecs_arg",
           "file_kind", "int_list", "one_line", "options_for", "positive_int", "show_warning",
           "storage_options", "tile_list"]

#: Output/input kinds recognised by ``convert``, by file suffix.
JNRRD, NRRD, NPY = "jnrrd", "nrrd", "npy"


class UsageError(Exception):
    """A command line that parses but asks for something impossible (exit 2)."""


def show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: TextIO | None = None, line: str | None = None) -> None:
    """``warnings.showwarning`` replacement: one ``jnrrd: warning:`` line on stderr."""
    print(f"jnrrd: warning: {one_line(message)}", file=sys.stderr)


def one_line(e: object) -> str:
    """An exception (or warning) as one line of text."""
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        return f"{e.filename}: {e.strerror}"
    text = " ".join(str(e).split())
    return text or type(e).__name__


class LazyChoices:
    """argparse ``choices`` read from a module when first needed (checking a value, printing
    a command's help), so that building the parser imports nothing heavy: give the argument a
    ``metavar`` (argparse would list the choices to make one) and ``%(choices)s`` in its
    help."""

    def __init__(self, load: Any) -> None:
        self._load = load
        self._values: tuple[str, ...] | None = None

    def _all(self) -> tuple[str, ...]:
        if self._values is None:
            self._values = tuple(self._load())
        return self._values

    def __iter__(self) -> Any:
        return iter(self._all())

    def __contains__(self, value: object) -> bool:
        return value in self._all()

    def __len__(self) -> int:
        return len(self._all())


# -- argument types ------------------------------------------------------------------------
def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return n


def int_list(text: str) -> list[int]:
    """argparse type: comma-separated positive integers."""
    return [positive_int(t.strip()) for t in text.split(",")]


def tile_list(text: str) -> list[int | None]:
    """argparse type: comma-separated tile sizes; ``none`` leaves that axis untiled."""
    out: list[int | None] = []
    for t in text.split(","):
        t = t.strip()
        out.append(None if t.lower() == "none" else positive_int(t))
    if all(v is None for v in out):
        raise argparse.ArgumentTypeError(f"at least one axis must be tiled, got {text!r}")
    return out


def codecs_arg(text: str) -> list[dict[str, Any]]:
    """argparse type: a Zarr v3 codec list as JSON text, or ``@FILE`` holding it."""
    if text.startswith("@"):
        try:
            with open(text[1:], encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise argparse.ArgumentTypeError(f"cannot read {text[1:]}: {e.strerror}") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON ({e.msg} at {e.pos})") from None
    if not isinstance(value, list) or not all(
        isinstance(c, dict) and isinstance(c.get("name"), str) for c in value
    ):
        raise argparse.ArgumentTypeError(
            'expected a JSON list of codec objects, e.g. [{"name": "bytes"}, {"name": "zstd"}]')
    return value


def file_kind(path: str) -> str:
    """``"npy"``, ``"nrrd"`` (``.nrrd``/``.nhdr``) or ``"jnrrd"`` (anything else)."""
    low = path.lower()
    if low.endswith(".npy"):
        return NPY
    if low.endswith((".nrrd", ".nhdr")):
        return NRRD
    return JNRRD


# -- URLs ----------------------------------------------------------------------------------
def add_storage_option(parser: argparse.ArgumentParser, targets: bool = True) -> None:
    """Add ``--storage-option KEY=VALUE`` (repeatable) to a sub-command that reads files
    (``targets=False``: one that writes none)."""
    what = "URL sources and targets" if targets else "URL sources"
    parser.add_argument("--storage-option", action="append", metavar="KEY=VALUE",
                        help=f"passed to fsspec for {what} (s3://, https://, "
                             "...; repeatable; VALUE is parsed as JSON when it is JSON, e.g. "
                             "anon=true, client_kwargs='{\"endpoint_url\": \"http://...\"}')")


def storage_options(items: list[str] | None) -> dict[str, Any] | None:
    """``--storage-option KEY=VALUE`` pairs (values parsed as JSON when they are JSON, else
    kept as text); ``None`` when there are none."""
    if not items:
        return None
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--storage-option {item!r}: expected KEY=VALUE")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


def options_for(path: str, options: dict[str, Any] | None) -> dict[str, Any]:
    """``{"storage_options": options}`` when ``path`` is a URL and there are options, else
    ``{}`` (local files take none)."""
    from ..storage import is_remote, local_path

    if options and is_remote(local_path(path)):
        return {"storage_options": options}
    return {}
