"""``jnrrd convert``: convert between ``.jnrrd``, ``.nrrd``/``.nhdr`` and ``.npy``."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from ..progress import Bar
from ..pyramid.methods import METHODS
from ..tiling.codec_fields import CANONICAL_COMPRESSION, SHORTHAND
from .common import (
    JNRRD,
    NPY,
    NRRD,
    UsageError,
    codecs_arg,
    file_kind,
    positive_int,
    tile_list,
)
from .output import Reporting, check_codecs, check_output_dir, mib_progress, write_output

__all__ = ["register"]

_COMPRESSIONS = tuple(SHORTHAND)
_ENCODINGS = ("raw", "gzip", "gz", "bzip2", "bz2", "zstd", "lz4", "ascii", "hex")
_FORMATS = (JNRRD, NRRD, NPY)


def register(sub: Any) -> None:
    """Add the ``convert`` sub-command to the ``add_subparsers`` object ``sub``."""
    conv = sub.add_parser(
        "convert", help="convert between .jnrrd, .nrrd/.nhdr and .npy",
        description="Convert IN to OUT; the output format follows OUT's suffix (.jnrrd, "
                    ".nrrd, .nhdr, .npy, any case) or --format. Tiling options apply to "
                    "JNRRD output.")
    conv.add_argument("input", metavar="IN")
    conv.add_argument("output", metavar="OUT")
    conv.add_argument("--format", choices=_FORMATS, dest="out_format",
                      help="output file format (default: by OUT's suffix; needed for other "
                           "suffixes)")
    conv.add_argument("--encoding", choices=_ENCODINGS,
                      help="untiled data encoding, e.g. gzip for a compressed NRRD (default: "
                           "the input's; zstd and lz4 are JNRRD only)")
    conv.add_argument("--tile", type=tile_list, metavar="N[,N...]",
                      help="tile sizes, one per axis, e.g. 64,64,64 ('none' leaves an axis "
                           "untiled: none,64,64); one number tiles every domain axis (not "
                           "vector/colour/list axes), capped at each axis length")
    conv.add_argument("--compression", choices=_COMPRESSIONS,
                      help="tile compression (shorthand for a codec chain)")
    conv.add_argument("--codecs", type=codecs_arg, metavar="JSON",
                      help="tile codec list as Zarr v3 JSON (or @FILE holding it)")
    conv.add_argument("--levels", type=positive_int, metavar="N",
                      help="pyramid levels (scales 1, 2, 4, ... on every tiled axis)")
    conv.add_argument("--downsample", choices=METHODS, help="pyramid method (default average)")
    conv.add_argument("--external", nargs="?", const="", metavar="PATTERN",
                      help="store tiles as separate files named by PATTERN "
                           "(e.g. '{z}/{y}_{x}.tile'); without PATTERN the default pattern")
    conv.add_argument("--index-order", choices=("F", "C"), default="F",
                      help="how .npy array axes map onto file axes: F (default) keeps "
                           "shape == sizes, C reverses them")
    conv.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    conv.set_defaults(run=run)


_TILING_OPTIONS = ("tile", "compression", "codecs", "levels", "downsample", "external")


def run(args: argparse.Namespace) -> int:
    """Convert ``args.input`` to ``args.output``; return the exit code."""
    from ..api import open as jopen
    from ..writing.dispatch import write

    src_kind, dst_kind = file_kind(args.input), args.out_format or _out_kind(args.output)
    asked = [o for o in _TILING_OPTIONS if getattr(args, o) is not None]
    if asked and dst_kind != JNRRD:
        names = ", ".join("--" + o for o in asked)
        raise UsageError(f"{names}: tiling options need a JNRRD output, not {args.output}")
    if args.encoding is not None and dst_kind == NPY:
        raise UsageError("--encoding: .npy output has no encoding")
    if args.encoding in ("zstd", "lz4") and dst_kind == NRRD:
        raise UsageError(f"--encoding {args.encoding}: NRRD has no {args.encoding} encoding "
                         "(raw, gzip, bzip2, ascii, hex)")
    enc = {"gz": "gzip", "bz2": "bzip2"}.get(args.encoding, args.encoding)
    comp = CANONICAL_COMPRESSION.get(args.compression, args.compression)
    if enc not in (None, "raw") and (args.codecs is not None
                                     or comp not in (None, enc)):
        raise UsageError(f"--encoding {args.encoding}: with tiles, --compression or --codecs "
                         "already say how the tiles are stored; give one of them")
    if args.compression is not None and args.codecs is not None:
        raise UsageError("--compression and --codecs exclude each other (a compression name "
                          "is shorthand for a codec list)")
    if os.path.abspath(args.input) == os.path.abspath(args.output):
        raise UsageError("IN and OUT are the same file")
    check_output_dir(args.output)
    order = args.index_order
    if src_kind == NPY:
        # A memory map keeps memory bounded by the writer's slabs, not the array.
        data: Any = np.load(args.input, mmap_mode="r", allow_pickle=False)
        header: dict[str, Any] = {}
        vol = None
    else:
        vol = jopen(args.input, index_order=order)
        data, header = vol, dict(vol.header)
    try:
        if args.codecs is not None:
            check_codecs(args.codecs, data.dtype, len(data.shape))
        bar = None if args.quiet else Bar(label="MiB")
        if dst_kind == NPY:
            _write_npy(args.output, data, fortran=order == "F",
                       report=mib_progress(bar, int(data.nbytes)))
            return 0
        header = _carried_header(header, rewrite_tiling=bool(asked))
        kw: dict[str, Any] = {"format": dst_kind}
        if args.encoding is not None:
            header.pop("encoding", None)  # the option replaces the input's encoding
            kw["encoding"] = args.encoding
        if args.tile is not None:
            kw["tile"] = args.tile[0] if len(args.tile) == 1 else tuple(args.tile)
        for name in ("compression", "codecs", "levels", "downsample"):
            if getattr(args, name) is not None:
                kw[name] = getattr(args, name)
        if args.external is not None:
            kw["storage"] = "external"
            if args.external:
                kw["pattern"] = args.external
        if args.codecs is not None:
            # The chain's `bytes` codec decides the byte order (CONVENTIONS §1.2): the
            # input's `endian` must not contradict it.
            header.pop("endian", None)
        if asked:
            # `write` tiles when asked for tiles, compression, codecs or levels; an explicit
            # `tile:enabled` makes --external/--downsample alone tile with the default sizes.
            header["tile:enabled"] = True
        tiled = bool(asked) or any(str(k).endswith(":enabled") and v is True
                                   for k, v in header.items())
        if tiled and dst_kind == JNRRD and not args.quiet:
            kw["progress"] = True  # the bar itself stays quiet when stderr is not a terminal
        elif bar is not None:  # NRRD and untiled outputs: progress as the input is read
            data = Reporting(data, mib_progress(bar, int(np.dtype(data.dtype).itemsize
                                                         * math.prod(data.shape))))
        write_output(write, args.output, data, header or None, tiling_asked=bool(asked),
                     index_order=order, **kw)
    finally:
        if vol is not None:
            vol.close()
    return 0


# Fields the writer computes (or that describe the input's storage, not the data).
_COMPUTED = {"jnrrd", "dimension", "sizes", "type", "block_size", "data_file", "data_files",
             "data_file_pattern", "line_skip", "byte_skip"}


def _out_kind(path: str) -> str:
    """The output format by suffix (any case); other suffixes need ``--format``."""
    low = path.lower()
    for suffix, kind in ((".npy", NPY), (".nrrd", NRRD), (".nhdr", NRRD), (".jnrrd", JNRRD)):
        if low.endswith(suffix):
            return kind
    raise UsageError(f"{path}: cannot tell the output format from its suffix; expected "
                     ".jnrrd, .nrrd, .nhdr or .npy (any case), or pass --format "
                     "jnrrd|nrrd|npy")


def _carried_header(header: dict[str, Any], *, rewrite_tiling: bool) -> dict[str, Any]:
    """The input's header as ``write`` input: data-location fields dropped; tiling fields
    dropped too when the command line asks for a new layout (so they cannot override it)."""
    out = {k: v for k, v in header.items() if k not in _COMPUTED}
    if rewrite_tiling or not any(str(k).endswith(":enabled") for k in out):
        tile_prefixes = {p for p, uri in (out.get("extensions") or {}).items()
                         if isinstance(uri, str) and uri.startswith("https://jnrrd.org/"
                                                                    "extensions/tile/")}
        tile_prefixes.add("tile")
        out = {k: v for k, v in out.items() if str(k).split(":", 1)[0] not in tile_prefixes
               or ":" not in str(k)}
        if isinstance(out.get("extensions"), dict):
            ext = {p: u for p, u in out["extensions"].items() if p not in tile_prefixes}
            if ext:
                out["extensions"] = ext
            else:
                out.pop("extensions")
    if out.get("encoding") not in (None, "raw", "gzip", "gz", "bzip2", "bz2", "zstd", "lz4",
                                   "ascii", "txt", "text", "hex"):
        out.pop("encoding")
    return out


def _write_npy(path: str, data: Any, *, fortran: bool,
               report: Callable[[int], None] | None = None) -> None:
    """Write ``data`` (caller axis order) to ``.npy`` one slab at a time.

    Slabs run along the file's slowest axis (the caller's last axis under ``index_order="F"``,
    its first under ``"C"``), and the ``.npy`` is stored in the matching memory order, so each
    slab is contiguous, touches each tile once, and memory stays bounded by one slab.
    """
    shape = tuple(int(n) for n in data.shape)
    dtype = np.dtype(data.dtype)
    fortran = fortran and len(shape) > 1
    tmp = f"{path}.partial"
    try:
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=shape,
                                        fortran_order=fortran)
    except OSError as e:  # name the output, not the temporary file
        raise type(e)(e.errno, e.strerror, path) from None
    try:
        axis = len(shape) - 1 if fortran else 0
        n = shape[axis] if shape else 1
        row = max(1, dtype.itemsize * math.prod(shape) // max(n, 1))
        step = max(1, (64 << 20) // row)  # ~64 MiB slabs
        chunk = getattr(data, "chunks", None)
        if isinstance(chunk, tuple) and len(chunk) == len(shape) and chunk:
            step = max(step // chunk[axis], 1) * chunk[axis]
        for lo in range(0, n, step):
            key = tuple(slice(lo, min(n, lo + step)) if a == axis else slice(None)
                        for a in range(len(shape)))
            out[key] = np.asarray(data[key])
            if report is not None:
                report(min(n, lo + step) * row)
        out.flush()
        del out
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise

