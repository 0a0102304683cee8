"""Naming what a file that is not JNRRD (nor classic NRRD) is, so that the error can say so
and point to ``jnrrd convert``: NIfTI (plain or gzip-compressed), DICOM, NumPy ``.npy``, and
folders (a DICOM series, a Zarr store). The readers call these only after the content failed
to parse, so a JNRRD file never pays for them.
"""

from __future__ import annotations

import os
import shlex
import zlib
from typing import IO, Any

__all__ = ["check_not_a_folder", "convert_hint", "describe_bytes", "describe_folder",
           "is_dicom_file", "is_nifti_path", "is_zarr_path", "sniff_stream"]

#: bytes read to tell the formats apart (a NIfTI-2 header is 540 bytes; gzip needs more)
_HEAD = 4096
_NIFTI = ((348, 344, (b"n+1\0", b"ni1\0"), "NIfTI-1"), (540, 4, (b"n+2\0", b"ni2\0"), "NIfTI-2"))


def is_nifti_path(path: Any) -> bool:
    """True for a ``.nii`` or ``.nii.gz`` path (any case)."""
    return isinstance(path, (str, os.PathLike)) and os.fspath(path).lower().endswith(
        (".nii", ".nii.gz"))


def is_zarr_path(path: Any) -> bool:
    """True for a ``.zarr``/``.ome.zarr`` path or URL (any case, a trailing ``/`` allowed)."""
    if not isinstance(path, (str, os.PathLike)):
        return False
    return os.fspath(path).rstrip("/\\").lower().endswith(".zarr")


def is_dicom_file(path: str) -> bool:
    """A ``.dcm``/``.dicom`` name, or the ``DICM`` marker at byte 128."""
    return path.lower().endswith((".dcm", ".dicom")) or _dicom_marker(path)


def describe_bytes(head: bytes, name: str = "") -> str | None:
    """What the first bytes ``head`` of a file named ``name`` are ("a NIfTI-1 file", ...),
    or ``None`` when they are none of the formats this module knows."""
    for size, at, magics, label in _NIFTI:
        if len(head) >= at + 4 and head[at:at + 4] in magics and size in (
                int.from_bytes(head[:4], "little"), int.from_bytes(head[:4], "big")):
            return f"a {label} file"
    if head[128:132] == b"DICM":
        return "a DICOM file"
    if head.startswith(b"\x93NUMPY"):
        return "a NumPy .npy file"
    if head.startswith(b"\x1f\x8b"):
        try:
            inner = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, 1024)
        except zlib.error:
            inner = b""
        what = describe_bytes(inner) if inner else None
        if what is None and name.lower().endswith((".nii.gz", ".nii.gz/")):
            what = "a NIfTI file"
        return f"{what} (gzip-compressed)" if what else None
    return None


def sniff_stream(stream: IO[bytes], base: int, name: str = "") -> str | None:
    """:func:`describe_bytes` of a seekable stream's first bytes from ``base`` (the position
    is restored); ``None`` when the stream cannot seek back."""
    try:
        pos = stream.tell()
        stream.seek(base)
        head = stream.read(_HEAD)
        stream.seek(pos)
    except (AttributeError, OSError, ValueError):
        return None
    return describe_bytes(bytes(head), name) if isinstance(head, (bytes, bytearray)) else None


def describe_folder(path: str) -> str:
    """What a folder given as a JNRRD file is: a Zarr store, a folder of DICOM files, or a
    folder (the first few entries are looked at, never the whole tree)."""
    if any(os.path.exists(os.path.join(path, n)) for n in ("zarr.json", ".zattrs", ".zgroup")):
        return "a Zarr store (OME-Zarr?)"
    try:
        with os.scandir(path) as entries:
            for k, entry in enumerate(entries):
                if k >= 64:
                    break
                if entry.is_file() and is_dicom_file(entry.path):
                    return "a folder of DICOM files"
    except OSError:
        pass
    return "a folder (a DICOM series?)"


def _dicom_marker(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            f.seek(128)
            return f.read(4) == b"DICM"
    except OSError:
        return False


def check_not_a_folder(source: Any) -> None:
    """A ``FormatError`` naming what a local folder given as a JNRRD file is (see
    :func:`describe_folder`) and how to convert it; nothing for anything else."""
    if not isinstance(source, (str, os.PathLike)):
        return
    path = os.fspath(source)
    if "://" in path or not os.path.isdir(path):
        return
    from ..errors import FormatError

    what = describe_folder(path)
    raise FormatError(f"{path}: not a JNRRD file: it is {what}; {convert_hint(path, what)}")


def convert_hint(name: Any, what: str) -> str:
    """The advice for a ``what`` file (or folder) at ``name``: the command that converts it
    (for one DICOM file, its folder: the file is usually one image of a series)."""
    path = os.fspath(name) if isinstance(name, (str, os.PathLike)) else "IN"
    if what == "a DICOM file":
        folder = shlex.quote(os.path.dirname(path) or ".")
        return (f"convert its series: jnrrd convert {folder} OUT.jnrrd ('jnrrd info {folder}' "
                "lists the series; a multi-frame or SEG file converts by itself), or "
                "jnrrd.convert() in Python")
    quoted = shlex.quote(path)
    extra = f" ('jnrrd info {quoted}' lists its series)" if "DICOM" in what else ""
    return (f"convert it first: jnrrd convert {quoted} OUT.jnrrd{extra}, or jnrrd.convert() "
            "in Python")
