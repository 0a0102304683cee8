"""``jnrrd convert``: convert between ``.jnrrd``, ``.nrrd``/``.nhdr``, ``.npy`` and OME-Zarr
(``.ome.zarr``/``.zarr``); the work is :mod:`jnrrd.conversion`'s, this module checks options."""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Callable
from typing import Any

from .common import (
    JNRRD,
    NPY,
    NRRD,
    LazyChoices,
    UsageError,
    add_storage_option,
    codecs_arg,
    int_list,
    positive_int,
    storage_options,
    tile_list,
)

__all__ = ["register"]



def _compressions() -> tuple[str, ...]:
    from ..tiling.codec_fields import SHORTHAND

    return tuple(SHORTHAND)


def _methods() -> tuple[str, ...]:
    from ..pyramid.methods import METHODS

    return tuple(METHODS)


_ENCODINGS = ("raw", "gzip", "gz", "bzip2", "bz2", "zstd", "lz4", "ascii", "hex")
OME_ZARR = "ome-zarr"
NIFTI = "nifti"
_FORMATS = (JNRRD, NRRD, NPY, OME_ZARR, "zarr", NIFTI)


def register(sub: Any) -> None:
    """Add the ``convert`` sub-command to the ``add_subparsers`` object ``sub``."""
    conv = sub.add_parser(
        "convert", help="convert between .jnrrd, .nrrd/.nhdr, .npy, OME-Zarr and NIfTI; read "
                        "DICOM",
        description="Convert IN to OUT; the output format follows OUT's suffix (.jnrrd, "
                    ".nrrd, .nhdr, .npy, .ome.zarr, .zarr, .nii, .nii.gz, any case) or "
                    "--format. IN may also be a DICOM folder (one series: --series UID; "
                    "'jnrrd info FOLDER' lists them) or a DICOM file. Tiling options apply to "
                    "JNRRD output; --tile, --compression zstd|gzip and --shards to OME-Zarr "
                    "output.")
    conv.add_argument("input", metavar="IN")
    conv.add_argument("output", metavar="OUT")
    conv.add_argument("--format", choices=_FORMATS, dest="out_format",
                      help="output file format: jnrrd, nrrd, npy, ome-zarr (zarr is the same), "
                           "nifti (default: by OUT's suffix; needed for other suffixes)")
    conv.add_argument("--encoding", choices=_ENCODINGS,
                      help="untiled data encoding, e.g. gzip for a compressed NRRD (default: "
                           "the input's; zstd and lz4 are JNRRD only)")
    conv.add_argument("--compression-level", type=int, metavar="N",
                      help="compression level of the data (--encoding) or the tiles "
                           "(--compression): gzip 0-9 (default 1 for a data section, 6 for "
                           "tiles), bzip2 1-9, zstd -131072..22 (default 3), lz4 -65536..16")
    conv.add_argument("--tile", type=tile_list, metavar="N[,N...]",
                      help="tile sizes, one per axis, e.g. 64,64,64 ('none' leaves an axis "
                           "untiled: none,64,64); one number tiles every domain axis (not "
                           "vector/colour/list axes), capped at each axis length")
    conv.add_argument("--compression", choices=LazyChoices(_compressions), metavar="NAME",
                      help="tile compression (shorthand for a codec chain): %(choices)s")
    conv.add_argument("--codecs", type=codecs_arg, metavar="JSON",
                      help="tile codec list as Zarr v3 JSON (or @FILE holding it)")
    conv.add_argument("--levels", type=positive_int, metavar="N",
                      help="pyramid levels (scales 1, 2, 4, ... on every tiled axis but time "
                           "axes, which keep every sample and are tiled 1 by 1)")
    conv.add_argument("--downsample", choices=LazyChoices(_methods), metavar="METHOD",
                      help="pyramid method: %(choices)s (default average; mode for label "
                           "maps)")
    conv.add_argument("--external", nargs="?", const="", metavar="PATTERN",
                      help="store tiles as separate files named by PATTERN "
                           "(e.g. '{z}/{y}_{x}.tile'); without PATTERN the default pattern")
    conv.add_argument("--index-order", choices=("F", "C"), default="F",
                      help="how .npy array axes map onto file axes: F (default) keeps "
                           "shape == sizes, C reverses them")
    conv.add_argument("--shards", type=int_list, metavar="N[,N...]",
                      help="OME-Zarr output: chunks per shard along every axis (one number), "
                           "or the shard shape in voxels per axis")
    conv.add_argument("--series", metavar="UID",
                      help="DICOM input: the SeriesInstanceUID to convert (needed when the "
                           "folder holds several series)")
    conv.add_argument("--resample", action="store_true",
                      help="DICOM input: resample slices with irregular spacing onto a "
                           "regular grid (linear along the slice normal) instead of refusing")
    add_storage_option(conv)
    conv.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    conv.set_defaults(run=run)


_TILING_OPTIONS = ("tile", "compression", "codecs", "levels", "downsample", "external")


def run(args: argparse.Namespace) -> int:
    """Convert ``args.input`` to ``args.output``; return the exit code."""
    from ..conversion import open_source, write_converted
    from ..writing.dispatch import write
    from .output import check_codecs, check_output_dir, write_output

    dst_kind = args.out_format or _out_kind(args.output)
    if dst_kind == "zarr":
        dst_kind = OME_ZARR
    asked = [o for o in _TILING_OPTIONS if getattr(args, o) is not None]
    _check_options(args, dst_kind, asked)
    if os.path.abspath(args.input) == os.path.abspath(args.output):
        raise UsageError("IN and OUT are the same file")
    check_output_dir(args.output, directory_ok=dst_kind == OME_ZARR)
    order = args.index_order
    options = storage_options(args.storage_option)
    reader = {k: v for k, v in (("series", args.series), ("resample", args.resample)) if v}
    _check_dicom_options(args.input, reader)
    src = open_source(args.input, index_order="F" if dst_kind in (OME_ZARR, NIFTI) else order,
                      storage_options=options, **reader)
    with src:
        if args.codecs is not None:
            check_codecs(args.codecs, src.data.dtype, len(src.data.shape))
        kw = _write_keywords(args, dst_kind)
        written: Callable[..., None] = functools.partial(write_output, write,
                                                         tiling_asked=bool(asked))
        if dst_kind in (OME_ZARR, NIFTI):
            written = write
        write_converted(src, args.output, dst_kind, write=written, index_order=order,
                        progress=None if args.quiet else True,
                        storage_options=options, **kw)
    return 0


def _check_dicom_options(source: str, reader: dict[str, Any]) -> None:
    """``--series``/``--resample`` apply to DICOM input only: a usage error otherwise."""
    if not reader:
        return
    from ..conversion import source_format

    kind = source_format(source)
    if kind != "dicom":
        name = {"jnrrd": "JNRRD or NRRD", "nifti": "NIfTI", "npy": ".npy",
                "ome-zarr": "OME-Zarr"}.get(kind, kind)
        raise UsageError(f"{', '.join('--' + k for k in reader)}: an option of DICOM input (a "
                         f"folder of a series, or a DICOM file); {source} is {name}")


def _check_options(args: argparse.Namespace, dst_kind: str, asked: list[str]) -> None:
    """Options that parse but cannot apply to this output: usage errors (exit 2)."""
    if dst_kind == OME_ZARR:
        bad = [o for o in asked if o not in ("tile", "compression")]
        bad += ["encoding"] if args.encoding is not None else []
        if bad:
            raise UsageError(f"{', '.join('--' + o for o in bad)}: an OME-Zarr output takes "
                             "--tile (chunks), --compression zstd|gzip and --shards")
        if args.compression not in (None, "zstd", "gzip", "gz"):
            raise UsageError(f"--compression {args.compression}: OME-Zarr output takes zstd "
                             "or gzip")
        return
    if args.compression_level is not None and dst_kind in (NPY, NIFTI):
        raise UsageError(f"--compression-level: {args.output} is not compressed by jnrrd "
                         "(a .npy or NIfTI output takes no level)")
    if args.shards is not None:
        raise UsageError("--shards: only for an OME-Zarr output")
    if dst_kind == NIFTI and (asked or args.encoding is not None):
        names = ", ".join("--" + o for o in [*asked, *(["encoding"] if args.encoding else [])])
        raise UsageError(f"{names}: a NIfTI output takes no tiling or encoding options")
    if asked and dst_kind != JNRRD:
        names = ", ".join("--" + o for o in asked)
        raise UsageError(f"{names}: tiling options need a JNRRD output, not {args.output}")
    if args.encoding is not None and dst_kind == NPY:
        raise UsageError("--encoding: .npy output has no encoding")
    if args.encoding in ("zstd", "lz4") and dst_kind == NRRD:
        raise UsageError(f"--encoding {args.encoding}: NRRD has no {args.encoding} encoding "
                         "(raw, gzip, bzip2, ascii, hex)")
    from ..tiling.codec_fields import CANONICAL_COMPRESSION

    enc = {"gz": "gzip", "bz2": "bzip2"}.get(args.encoding, args.encoding)
    comp = CANONICAL_COMPRESSION.get(args.compression, args.compression)
    if enc not in (None, "raw") and (args.codecs is not None
                                     or comp not in (None, enc)):
        raise UsageError(f"--encoding {args.encoding}: with tiles, --compression or --codecs "
                         "already say how the tiles are stored; give one of them")
    if args.compression is not None and args.codecs is not None:
        raise UsageError("--compression and --codecs exclude each other (a compression name "
                          "is shorthand for a codec list)")


def _write_keywords(args: argparse.Namespace, dst_kind: str) -> dict[str, Any]:
    """The ``write_converted`` keywords the command line asks for."""
    kw: dict[str, Any] = {}
    if args.compression_level is not None:
        kw["compression_level"] = args.compression_level
    if args.tile is not None:
        tile = args.tile[0] if len(args.tile) == 1 else tuple(args.tile)
        kw["chunks" if dst_kind == OME_ZARR else "tile"] = tile
    if dst_kind == OME_ZARR:
        if args.compression is not None:
            kw["compression"] = {"gz": "gzip"}.get(args.compression, args.compression)
        if args.shards is not None:
            kw["shards"] = args.shards[0] if len(args.shards) == 1 else tuple(args.shards)
        return kw
    if args.encoding is not None:
        kw["encoding"] = args.encoding
    for name in ("compression", "codecs", "levels", "downsample"):
        if getattr(args, name) is not None:
            kw[name] = getattr(args, name)
    if args.external is not None:
        kw["storage"] = "external"
        if args.external:
            kw["pattern"] = args.external
    return kw


def _out_kind(path: str) -> str:
    """The output format by suffix (any case); other suffixes need ``--format``."""
    low = path.rstrip("/\\").lower()
    for suffix, kind in ((".npy", NPY), (".nrrd", NRRD), (".nhdr", NRRD), (".jnrrd", JNRRD),
                         (".zarr", OME_ZARR), (".nii", NIFTI), (".nii.gz", NIFTI)):
        if low.endswith(suffix):
            return kind
    raise UsageError(f"{path}: cannot tell the output format from its suffix; expected "
                     ".jnrrd, .nrrd, .nhdr, .npy, .ome.zarr, .zarr, .nii or .nii.gz (any "
                     "case), or pass --format jnrrd|nrrd|npy|ome-zarr|nifti")
