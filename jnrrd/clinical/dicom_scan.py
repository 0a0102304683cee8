"""Finding DICOM series in a folder and decoding pixel data with clear errors (pydicom).

:func:`scan` reads every file's header (not its pixels) under a folder, recursively, and
groups the images by SeriesInstanceUID (:class:`Series`); files that are not DICOM (or hold
no image: DICOMDIR, reports) are skipped. :func:`pixels` decodes one dataset's pixel data;
a compressed transfer syntax whose decoder is missing is a
:class:`~jnrrd.errors.MissingDependencyError` naming the packages that decode it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import DataError, MissingDependencyError, UnsupportedError, where
from ..optional import require

__all__ = ["SEG_SOP_CLASS", "Series", "choose", "fast_plane", "pixels", "pydicom", "read_file",
           "scan"]

SEG_SOP_CLASS = "1.2.840.10008.5.1.4.1.1.66.4"
#: the most files a folder scan reads (a cap, like the readers' other caps)
MAX_FILES = 200_000


def pydicom() -> Any:
    """The ``pydicom`` module, or ``MissingDependencyError`` naming ``jnrrd[dicom]``."""
    return require("pydicom", extra="dicom", feature="DICOM")


@dataclass
class Series:
    """One SeriesInstanceUID of a folder: its image files (with their headers) and what
    ``jnrrd info FOLDER`` shows."""

    uid: str
    files: list[str] = field(default_factory=list)
    datasets: list[Any] = field(default_factory=list)
    #: (file offset, length) of each file's PixelData value when it was left unread
    pixel_at: list[tuple[int, int] | None] = field(default_factory=list)

    def _first(self, name: str, default: Any = "") -> Any:
        return getattr(self.datasets[0], name, default) if self.datasets else default

    @property
    def modality(self) -> str:
        return str(self._first("Modality"))

    @property
    def description(self) -> str:
        return str(self._first("SeriesDescription"))

    @property
    def sop_class(self) -> str:
        return str(self._first("SOPClassUID"))

    @property
    def frames(self) -> int:
        """Images in the series: files, or frames of multi-frame files."""
        return sum(int(getattr(d, "NumberOfFrames", 1) or 1) for d in self.datasets)

    @property
    def size(self) -> tuple[int, int]:
        """(columns, rows) of the first image."""
        return int(self._first("Columns", 0)), int(self._first("Rows", 0))

    def describe(self) -> dict[str, Any]:
        """What ``jnrrd info FOLDER --json`` lists for the series."""
        return {"series_uid": self.uid, "modality": self.modality,
                "description": self.description, "sop_class": self.sop_class,
                "files": len(self.files), "images": self.frames,
                "columns": self.size[0], "rows": self.size[1]}


def read_file(path: str, *, pixels_too: bool = False) -> Any:
    """One DICOM file's dataset (without pixel data unless asked); ``DataError`` naming the
    file when it is not DICOM or is damaged."""
    pd = pydicom()
    try:
        return pd.dcmread(path, stop_before_pixels=not pixels_too)
    except (pd.errors.InvalidDicomError, EOFError, ValueError, KeyError, TypeError) as e:
        raise DataError(f"{where(path)}not a readable DICOM file: {e}") from None


def _files(folder: str) -> Iterator[str]:
    count = 0
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        for n in sorted(names):
            count += 1
            if count > MAX_FILES:
                raise UnsupportedError(f"{where(folder)}more than {MAX_FILES} files; point "
                                       "at the series' own folder")
            yield os.path.join(root, n)


def scan(folder: Any) -> dict[str, Series]:
    """The image series under ``folder`` (recursively), by SeriesInstanceUID, in the order
    first met; ``UnsupportedError`` when there are none."""
    pd = pydicom()
    folder = os.fspath(folder)
    found: dict[str, Series] = {}
    for path in _files(folder):
        try:
            # the pixel data (and any other large value) is left unread; its place is kept
            ds = pd.dcmread(path, defer_size=4096)
        except (pd.errors.InvalidDicomError, EOFError, ValueError, KeyError, TypeError,
                OSError):
            continue  # not DICOM (or not readable as it): skipped, as DICOM viewers do
        uid = getattr(ds, "SeriesInstanceUID", None)
        if uid is None or "Rows" not in ds or "Columns" not in ds:
            continue  # no image (DICOMDIR, structured reports, presentation states)
        series = found.setdefault(str(uid), Series(str(uid)))
        series.files.append(path)
        series.datasets.append(ds)
        series.pixel_at.append(_pixel_place(ds))
    if not found:
        raise UnsupportedError(f"{where(folder)}no DICOM images found (files are read "
                               "recursively; non-DICOM files are skipped)")
    return found


def choose(found: dict[str, Series], series: str | None, source: Any) -> Series:
    """The series asked for, or the only one; else ``UnsupportedError`` listing them."""
    if series is not None:
        if series not in found:
            raise UnsupportedError(f"{where(source, 'series')}no series {series!r}; found "
                                   f"{_listing(found)}")
        return found[series]
    if len(found) > 1:
        raise UnsupportedError(f"{where(source)}{len(found)} series: pass series=UID (the "
                               f"command line: --series UID; 'jnrrd info FOLDER' lists them): "
                               f"{_listing(found)}")
    return next(iter(found.values()))


def _listing(found: dict[str, Series]) -> str:
    return "; ".join(f"{s.uid} ({s.modality} {s.description!r}, {s.frames} images)"
                     for s in found.values())


_PLAIN_SYNTAXES = ("1.2.840.10008.1.2", "1.2.840.10008.1.2.1")  # implicit/explicit VR LE


def _pixel_place(ds: Any) -> tuple[int, int] | None:
    """Where the unread PixelData value is in the file (offset, length), if it is so."""
    try:
        el = ds.get_item(0x7FE00010, keep_deferred=True)
    except (KeyError, AttributeError, TypeError):
        return None
    tell, length = getattr(el, "value_tell", None), getattr(el, "length", None)
    if getattr(el, "value", 0) is not None or tell is None or not length or length < 0:
        return None
    return int(tell), int(length)


def fast_plane(ds: Any, path: str, at: tuple[int, int] | None) -> np.ndarray | None:
    """The pixels of a single-frame, single-sample, uncompressed little-endian image read
    straight from the file (rows, columns), with the bits above ``BitsStored`` handled as
    pydicom does (masked, or the sign extended); ``None`` when another path must decode."""
    meta = getattr(ds, "file_meta", None)
    syntax = str(getattr(meta, "TransferSyntaxUID", "")) if meta is not None else ""
    if at is None or syntax not in _PLAIN_SYNTAXES:
        return None
    if int(getattr(ds, "SamplesPerPixel", 1) or 1) != 1 or int(
            getattr(ds, "NumberOfFrames", 1) or 1) != 1:
        return None
    bits = int(getattr(ds, "BitsAllocated", 0) or 0)
    if bits not in (8, 16, 32):
        return None
    signed = int(getattr(ds, "PixelRepresentation", 0) or 0) == 1
    rows, cols = int(ds.Rows), int(ds.Columns)
    dtype = np.dtype(f"<{'i' if signed else 'u'}{bits // 8}")
    if at[1] < rows * cols * dtype.itemsize:
        return None
    try:
        arr = np.fromfile(path, dtype=dtype, count=rows * cols, offset=at[0])
    except (OSError, ValueError):
        return None
    if arr.size != rows * cols:
        return None
    stored = int(getattr(ds, "BitsStored", bits) or bits)
    if stored < bits:
        shift = bits - stored
        if signed:
            arr = (arr << shift) >> shift
        elif int(arr.max(initial=0)) >> stored:
            arr &= (1 << stored) - 1
    return arr.reshape(rows, cols).astype(dtype.newbyteorder("="), copy=False)


def pixels(ds: Any, path: str) -> np.ndarray:
    """The decoded pixel data of ``ds`` (rows, columns[, samples]), or (frames, rows,
    columns[, samples]); a missing decoder names the packages to install."""
    pd = pydicom()
    syntax = ds.file_meta.TransferSyntaxUID if "TransferSyntaxUID" in getattr(
        ds, "file_meta", {}) else None
    if syntax is not None and syntax.is_compressed:
        from pydicom.pixels import get_decoder

        try:
            decoder = get_decoder(syntax)
        except NotImplementedError:
            raise UnsupportedError(f"{where(path, 'TransferSyntaxUID')}{syntax.name} "
                                   f"({syntax}): pydicom has no decoder for it") from None
        if not decoder.is_available:
            need = "; or ".join(decoder.missing_dependencies) or "a pixel data plugin"
            raise MissingDependencyError(
                f"{where(path, 'TransferSyntaxUID')}{syntax.name} ({syntax}) needs a pydicom "
                f"decoder, none is installed: {need} (e.g. pip install pylibjpeg "
                "pylibjpeg-libjpeg pylibjpeg-openjpeg, or python-gdcm, or pyjpegls)")
    try:
        return np.asarray(ds.pixel_array)
    except (pd.errors.InvalidDicomError, ValueError, RuntimeError, AttributeError,
            KeyError) as e:
        raise DataError(f"{where(path, 'PixelData')}cannot decode the pixel data: {e}") from None
