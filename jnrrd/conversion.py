"""``jnrrd.convert``: one call between JNRRD, classic NRRD, NumPy ``.npy`` and OME-Zarr.

The target's suffix picks the format, in any case: ``.jnrrd``; ``.nrrd`` / ``.nhdr``; ``.npy``;
``.ome.zarr`` / ``.zarr`` (``format=`` overrides). The source's format is its content for
JNRRD and NRRD, its suffix for ``.npy``, and a ``.zarr`` suffix or a directory holding a
``zarr.json`` for OME-Zarr. Data flow one slab, tile or chunk at a time (a ``.npy`` source is
memory-mapped), so memory stays bounded by a few tiles (chunks, shards) however large the
volume. The ``jnrrd convert`` command is a thin layer over :func:`write_converted`.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Mapping
from typing import Any, Unpack

import numpy as np

from ._config import config
from .errors import UnsupportedError, check_index_order
from .progress import Bar, Reporting, mib_progress
from .writing.options import ConvertOptions

__all__ = ["FORMATS", "LAYOUT_OPTIONS", "Source", "convert", "open_source", "source_format",
           "target_format", "write_converted"]

#: what ``format=`` accepts (``"zarr"`` is a spelling of ``"ome-zarr"``)
FORMATS = ("jnrrd", "nrrd", "npy", "ome-zarr", "nifti")
#: write options that ask for a new tile layout: the source's layout is then dropped
LAYOUT_OPTIONS = ("tile", "compression", "codecs", "levels", "downsample", "storage", "pattern")
#: options an OME-Zarr target takes
_ZARR_OPTIONS = ("chunks", "tile", "shards", "compression", "compression_level", "affine")
_SUFFIXES = ((".npy", "npy"), (".nrrd", "nrrd"), (".nhdr", "nrrd"), (".jnrrd", "jnrrd"),
             (".zarr", "ome-zarr"), (".nii", "nifti"), (".nii.gz", "nifti"))
# Fields the writer computes (or that describe the input's storage, not the data).
_COMPUTED = {"jnrrd", "dimension", "sizes", "type", "block_size", "data_file", "data_files",
             "data_file_pattern", "line_skip", "byte_skip"}
_ENCODINGS = (None, "raw", "gzip", "gz", "bzip2", "bz2", "zstd", "lz4", "ascii", "txt", "text",
              "hex")


def target_format(target: Any, format: str | None = None) -> str:
    """The output format: ``format`` (``jnrrd``, ``nrrd``, ``npy``, ``ome-zarr``/``zarr``) or
    the target's suffix (any case); ``UnsupportedError`` when neither says it."""
    if format is not None:
        fmt = "ome-zarr" if str(format).lower() in ("zarr", "ome-zarr", "omezarr") else format
        if fmt not in FORMATS:
            raise ValueError(f"format={format!r}: expected one of {', '.join(FORMATS)}")
        return fmt
    low = os.fspath(target).rstrip("/\\").lower() if isinstance(target, (str, os.PathLike)) \
        else ""
    for suffix, kind in _SUFFIXES:
        if low.endswith(suffix):
            return kind
    raise UnsupportedError(f"{target}: cannot tell the output format from its suffix; "
                           "expected .jnrrd, .nrrd, .nhdr, .npy, .ome.zarr, .zarr, .nii or "
                           ".nii.gz (any case), or pass format=")


def source_format(source: Any) -> str:
    """``"npy"`` (by suffix), ``"ome-zarr"`` (``.zarr`` suffix or a directory with a
    ``zarr.json``/``.zattrs``), ``"nifti"`` (``.nii``, ``.nii.gz``), ``"dicom"`` (another
    directory, a ``.dcm`` file or a file with the DICOM marker) or ``"jnrrd"`` (JNRRD or NRRD:
    the content decides)."""
    from .clinical.sources import clinical_format
    from .header.foreign import is_zarr_path

    if not isinstance(source, (str, os.PathLike)):
        return "jnrrd"
    low = os.fspath(source).lower()
    if low.endswith(".npy"):
        return "npy"
    if is_zarr_path(source) or (os.path.isdir(source) and any(
            os.path.exists(os.path.join(source, n)) for n in ("zarr.json", ".zattrs"))):
        return "ome-zarr"
    return clinical_format(source) or "jnrrd"


class Source:
    """An opened conversion source: ``data`` (array-like in the caller's ``index_order``),
    ``header`` (JNRRD fields), ``kind`` (``jnrrd``, ``npy``, ``ome-zarr``), ``volume`` (a
    ``Volume`` for JNRRD/NRRD sources), ``zarr`` (the ``OmeZarrSource``) and ``defaults``
    (write keywords that keep an OME-Zarr source's layout, caller order)."""

    def __init__(self, kind: str, data: Any, header: Mapping[str, Any], *, volume: Any = None,
                 zarr: Any = None, defaults: Mapping[str, Any] | None = None,
                 clinical: Any = None) -> None:
        self.kind, self.data, self.header = kind, data, dict(header)
        self.volume, self.zarr, self.defaults = volume, zarr, dict(defaults or {})
        #: the :class:`jnrrd.clinical.loaded.Loaded` of a DICOM or NIfTI source
        self.clinical = clinical

    def close(self) -> None:
        """Release the source's file handles."""
        if self.volume is not None:
            self.volume.close()
        if self.clinical is not None:
            self.clinical.close()

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_source(source: Any, *, index_order: str = "F",
                storage_options: Mapping[str, Any] | None = None,
                **reader_options: Any) -> Source:
    """Open ``source`` for conversion (see :class:`Source`); ``reader_options`` go to the
    DICOM reader (``series``, ``resample``)."""
    check_index_order(index_order, source)
    kind = source_format(source)
    if kind in ("dicom", "nifti"):
        from .clinical.loaded import Reversed
        from .clinical.sources import open_clinical

        loaded = open_clinical(source, kind, **reader_options)
        data = Reversed(loaded.data) if index_order == "C" else loaded.data
        return Source(kind, data, loaded.header, clinical=loaded)
    if reader_options:
        raise TypeError(f"{', '.join(sorted(reader_options))}: options of DICOM sources; "
                        f"{source} is not one")
    if kind == "npy":
        # A memory map keeps memory bounded by the writer's slabs, not the array.
        return Source(kind, np.load(source, mmap_mode="r", allow_pickle=False), {})
    if kind == "ome-zarr":
        from .integrations.omezarr_read import OmeZarrSource

        oz = OmeZarrSource(source, storage_options=storage_options)
        data = oz.data.array if index_order == "C" else oz.data
        return Source(kind, data, oz.header, zarr=oz,
                      defaults=_caller_order(oz.defaults, index_order))
    from .api import open as jopen

    # storage_options go with a URL (a local source's options are the target's)
    extra: dict[str, Any] = {"storage_options": dict(storage_options)} if (
        storage_options and _is_url(source)) else {}
    vol = jopen(source, index_order=index_order, **extra)
    return Source(kind, vol, vol.header, volume=vol)


def _is_url(path: Any) -> bool:
    return isinstance(path, str) and "://" in path and not path.startswith("file://")


def _caller_order(defaults: dict[str, Any], index_order: str) -> dict[str, Any]:
    """Per-axis defaults (header order) in the caller's order."""
    if index_order == "F":
        return defaults
    out = dict(defaults)
    if "tile" in out:
        out["tile"] = tuple(out["tile"])[::-1]
    if "levels" in out:
        out["levels"] = [list(s)[::-1] for s in out["levels"]]
    return out


def convert(source: Any, target: Any, *, storage_options: Mapping[str, Any] | None = None,
            format: str | None = None, index_order: str = "F", progress: Any = None,
            series: str | None = None, resample: bool = False, threads: int | None = None,
            **write_options: Unpack[ConvertOptions]) -> None:
    """Convert ``source`` to ``target``; the target's suffix (any case) or ``format`` picks
    the output format: ``.jnrrd``, ``.nrrd``/``.nhdr``, ``.npy``, ``.ome.zarr``/``.zarr``,
    ``.nii``/``.nii.gz``.

    Sources are also DICOM (a folder of series, or one multi-frame or SEG file; ``series``
    picks a SeriesInstanceUID, ``resample=True`` resamples irregular slice spacing) and
    NIfTI (docs/clinical.md).

    Metadata (geometry, labels, units, kinds, extension fields) goes along. A tiled source
    keeps its layout (tiles, codecs, levels) unless ``write_options`` ask for a new one
    (``tile``, ``compression``, ``codecs``, ``levels``, ``downsample``, ``storage``,
    ``pattern``); other ``write_options`` go to :func:`jnrrd.write`. An OME-Zarr target takes
    ``chunks`` (or ``tile``), ``shards``, ``compression`` (``"zstd"``/``"gzip"``),
    ``compression_level`` and ``affine`` (RFC-5 transforms); an OME-Zarr source gives its
    chunks, levels and compressor as the defaults of a JNRRD target. ``storage_options`` go
    to fsspec for URLs. ``index_order`` maps ``.npy`` axes (and per-axis options) onto header
    axes, as in :func:`jnrrd.write`.
    ``progress``: ``True`` draws a bar on a terminal, or a callable ``(done, total)``.
    ``threads``: tiles decoded and encoded at once (``None``: the ``jnrrd.config`` setting,
    else the CPUs the process may use).
    """
    out = target_format(target, format)
    if series is not None and not isinstance(series, str):
        raise TypeError(f"series= takes one SeriesInstanceUID (a str), not "
                        f"{type(series).__name__}: convert one series per call")
    if (isinstance(source, (str, os.PathLike)) and isinstance(target, (str, os.PathLike))
            and os.path.abspath(source) == os.path.abspath(target)):
        raise ValueError(f"{target}: the source and the target are the same file")
    from .storage import local_target
    from .writing.dispatch import write

    # OME-Zarr and NIfTI targets are written from header-order data; index_order only maps
    # options
    order = "F" if out in ("ome-zarr", "nifti") else index_order
    reader = {k: v for k, v in (("series", series), ("resample", resample)) if v}
    io = config(threads=threads) if threads is not None else contextlib.nullcontext()
    with io, local_target(target), open_source(source, index_order=order,
                                                storage_options=storage_options,
                                                **reader) as src:
        write_converted(src, target, out, write=write, index_order=index_order,
                        progress=progress, storage_options=storage_options, **write_options)


def write_converted(src: Source, target: Any, out: str, *, write: Callable[..., None],
                    index_order: str = "F", progress: Any = None,
                    storage_options: Mapping[str, Any] | None = None,
                    **options: Any) -> None:
    """Write the opened ``src`` to ``target`` in format ``out`` through ``write`` (a function
    with :func:`jnrrd.write`'s signature; the CLI passes one that turns option errors into
    usage errors)."""
    if out == "ome-zarr":
        _to_omezarr(src, target, index_order, progress, storage_options, options)
        return
    if out == "nifti":
        _to_nifti(src, target, progress, storage_options, options)
        return
    data = src.data
    if out == "npy":
        if options:
            raise TypeError(f"convert() to .npy takes no write options: {sorted(options)}")
        bar = _bar(progress)
        write_npy(target, data, fortran=index_order == "F",
                  report=mib_progress(bar, int(np.dtype(data.dtype).itemsize
                                               * math.prod(data.shape))))
        return
    asked = [o for o in LAYOUT_OPTIONS if options.get(o) is not None]
    defaults = src.defaults if out == "jnrrd" and not asked else {}
    options = {**defaults, **options}
    header = carried_header(src.header, rewrite_tiling=bool(asked))
    if out == "jnrrd":
        options = _clinical_options(src, header, options, index_order, bool(asked))
    elif out == "nrrd":
        header = _slicer_fields(header, target, data, index_order)
    if options.get("encoding") is not None:
        header.pop("encoding", None)  # the option replaces the input's encoding
    if options.get("codecs") is not None:
        # The chain's `bytes` codec decides the byte order (docs/format.md#codec-chain): the input's
        # `endian` must not contradict it.
        header.pop("endian", None)
    if asked:
        # `write` tiles when asked for tiles, compression, codecs or levels; an explicit
        # `tile:enabled` makes storage/downsample alone tile with the default sizes.
        header["tile:enabled"] = True
    tiled = bool(asked) or any(str(k).endswith(":enabled") and v is True
                               for k, v in header.items()) or bool(defaults)
    if tiled and out == "jnrrd":
        if progress not in (None, False):
            options["progress"] = progress
    elif progress not in (None, False):
        report = mib_progress(_bar(progress), int(np.dtype(data.dtype).itemsize
                                                  * math.prod(data.shape)))
        if report is not None:
            data = Reporting(data, report)
    if storage_options and _is_url(target):
        options["storage_options"] = dict(storage_options)
    write(target, data, header or None, index_order=index_order, format=out, **options)
    if src.zarr is not None and out == "jnrrd" and len(src.zarr.levels) > 1:
        from .api import open as jopen

        again: dict[str, Any] = ({"storage_options": dict(storage_options)}
                                 if storage_options and _is_url(target) else {})
        with jopen(target, **again) as vol:
            src.zarr.compare_levels(vol)


def _clinical_options(src: Source, header: dict[str, Any], options: dict[str, Any],
                      index_order: str, asked: bool) -> dict[str, Any]:
    """Time axes out of the pyramid; the stored integers of a rescaled clinical source kept
    by its codecs when the target is tiled (:mod:`jnrrd.clinical.sources`)."""
    from .clinical.sources import layout_options, storage_codecs

    shape = tuple(int(n) for n in src.data.shape)
    options = layout_options(header, shape[::-1] if index_order == "C" else shape, options,
                             index_order)
    loaded = src.clinical
    if loaded is not None and loaded.codecs and asked:
        options = storage_codecs(loaded.codecs, options)
        if options.get("codecs") is not None and "padding_value" not in options:
            options["padding_value"] = loaded.padding_value
    return options


def _slicer_fields(header: dict[str, Any], target: Any, data: Any, index_order: str
                   ) -> dict[str, Any]:
    """A NRRD target of a label map: its ``label:segments`` (for a ``.seg.nrrd`` target, else
    the labels found in the data) as 3D Slicer's segment key/value pairs, which NRRD carries
    and which mark the file as a label map when it is read again; the ``label:`` fields they
    replace are not written."""
    from .clinical.labels import (
        has_slicer_fields,
        is_label_map,
        label_prefix,
        slicer_key_values,
        slicer_segments_of,
    )
    from .nrrd.fields import NRRD_PREFIX, NRRD_URI

    if not is_label_map(header, data.dtype) or has_slicer_fields(header):
        return header
    sizes = list(data.shape)[::-1] if index_order == "C" else list(data.shape)
    prefix = label_prefix(header)
    seg_nrrd = str(target).lower().endswith(".seg.nrrd")
    if seg_nrrd and not header.get(f"{prefix}:segments"):
        header = {**header, f"{prefix}:segments": slicer_segments_of(data)}
    kv = slicer_key_values(header, sizes[-3:])
    if not kv:
        return header
    out = {k: v for k, v in header.items() if not str(k).startswith(prefix + ":")}
    ext = {p: u for p, u in (out.get("extensions") or {}).items() if p != prefix}
    out["extensions"] = {**ext, NRRD_PREFIX: NRRD_URI}
    key = f"{NRRD_PREFIX}:key_values"
    out[key] = {**(out.get(key) or {}), **kv}
    return out


def _to_nifti(src: Source, target: Any, progress: Any,
              storage_options: Mapping[str, Any] | None, options: dict[str, Any]) -> None:
    from .clinical.nifti_write import write_nifti

    if options:
        raise TypeError(f"convert() to NIfTI takes no write options: {sorted(options)}")
    data = src.data
    total = int(np.dtype(data.dtype).itemsize * math.prod(data.shape))
    write_nifti(target, data, src.header, progress=mib_progress(_bar(progress), total),
                storage_options=dict(storage_options) if storage_options and _is_url(
                    target) else None)


def _bar(progress: Any) -> Callable[[int, int], None] | None:
    if progress in (None, False):
        return None
    return Bar(label="MiB") if progress is True else progress


def _to_omezarr(src: Source, target: Any, index_order: str, progress: Any,
                storage_options: Mapping[str, Any] | None, options: dict[str, Any]) -> None:
    from .integrations.omezarr import write_omezarr

    if src.volume is None:
        raise UnsupportedError(f"{target}: an OME-Zarr target needs a JNRRD or NRRD source "
                               f"(got {src.kind}): convert it to .jnrrd first")
    unknown = sorted(set(options) - set(_ZARR_OPTIONS))
    if unknown:
        raise TypeError(f"convert() to OME-Zarr takes {', '.join(_ZARR_OPTIONS)}; "
                        f"not {', '.join(unknown)}")
    chunks = options.get("chunks", options.get("tile"))
    shards = options.get("shards")
    if index_order == "C":
        chunks = None if chunks is None or isinstance(chunks, int) else tuple(chunks)[::-1]
        shards = shards if shards is None or isinstance(shards, int) else tuple(shards)[::-1]
    vol = src.volume
    if vol.index_order != "F":
        raise ValueError("an OME-Zarr target is written from a source opened with "
                         "index_order='F' (index_order maps only the chunks/shards options)")
    if isinstance(chunks, int):
        kinds = vol.core.kinds or (None,) * vol.ndim
        chunks = [min(chunks, n) if k in (None, "domain", "space", "time", "none", "???")
                  else n for k, n in zip(kinds, vol.shape, strict=True)]
    mib = mib_progress(_bar(progress), sum(lv.nbytes for lv in vol.levels))
    report = None if mib is None else (lambda done, total: mib(done))
    write_omezarr(vol, target, storage_options=storage_options, chunks=chunks, shards=shards,
                  compression=options.get("compression"),
                  compression_level=options.get("compression_level"), progress=report,
                  affine=bool(options.get("affine", False)))


def carried_header(header: Mapping[str, Any], *, rewrite_tiling: bool) -> dict[str, Any]:
    """The input's header as ``write`` input: data-location fields dropped; tiling fields
    dropped too when the caller asks for a new layout (so they cannot override it)."""
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
    if out.get("encoding") not in _ENCODINGS:
        out.pop("encoding")
    return out


def write_npy(path: Any, data: Any, *, fortran: bool,
              report: Callable[[int], None] | None = None) -> None:
    """Write ``data`` (caller axis order) to ``.npy`` one slab at a time.

    Slabs run along the file's slowest axis (the caller's last axis under ``index_order="F"``,
    its first under ``"C"``), and the ``.npy`` is stored in the matching memory order, so each
    slab is contiguous, touches each tile once, and memory stays bounded by one slab.
    """
    path = os.fspath(path)
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
