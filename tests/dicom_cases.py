"""DICOM objects the clinical tests build with pydicom: CT series (oblique, shuffled file
names, rescale, several series in one folder), enhanced multi-frame CT and SEG.

Each builder returns what the file(s) should read as: the stored values in JNRRD axis order
(x fastest: columns, rows, slices) and the LPS geometry (origin, 3 direction columns).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.sequence import Sequence
from pydicom.uid import (
    PYDICOM_IMPLEMENTATION_UID,
    ExplicitVRLittleEndian,
    RLELossless,
    generate_uid,
)

CT_IMAGE = "1.2.840.10008.5.1.4.1.1.2"
ENHANCED_CT = "1.2.840.10008.5.1.4.1.1.2.1"
SEGMENTATION = "1.2.840.10008.5.1.4.1.1.66.4"


def rotation(ax: float, ay: float, az: float) -> np.ndarray:
    """A rotation matrix (x, then y, then z)."""
    cx, sx, cy, sy, cz, sz = (np.cos(ax), np.sin(ax), np.cos(ay), np.sin(ay), np.cos(az),
                              np.sin(az))
    rx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    ry = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    rz = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    return rz @ ry @ rx


@dataclass
class Geometry:
    """The LPS geometry of a volume: ``origin`` and ``directions`` (3x3, column d is the step
    along JNRRD axis d: columns, rows, slices)."""

    origin: np.ndarray
    directions: np.ndarray

    @classmethod
    def make(cls, rotation_matrix: np.ndarray, spacing: tuple[float, float, float],
             origin: tuple[float, float, float]) -> Geometry:
        return cls(np.asarray(origin, float), rotation_matrix @ np.diag(spacing))

    def position(self, k: int) -> list[float]:
        return [float(v) for v in self.origin + self.directions[:, 2] * k]

    @property
    def iop(self) -> list[float]:
        r = self.directions[:, 0] / np.linalg.norm(self.directions[:, 0])
        c = self.directions[:, 1] / np.linalg.norm(self.directions[:, 1])
        return [float(v) for v in (*r, *c)]

    @property
    def pixel_spacing(self) -> list[float]:
        """DICOM PixelSpacing: row spacing (along a column), column spacing (along a row)."""
        return [float(np.linalg.norm(self.directions[:, 1])),
                float(np.linalg.norm(self.directions[:, 0]))]


def _meta(sop_class: str, sop_uid: str, syntax: str) -> FileMetaDataset:
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = sop_class
    meta.MediaStorageSOPInstanceUID = sop_uid
    meta.TransferSyntaxUID = syntax
    meta.ImplementationClassUID = PYDICOM_IMPLEMENTATION_UID
    return meta


def _common(ds: Dataset, sop_class: str, study: str, series: str, modality: str) -> None:
    ds.SOPClassUID = sop_class
    ds.StudyInstanceUID = study
    ds.SeriesInstanceUID = series
    ds.FrameOfReferenceUID = generate_uid(entropy_srcs=[study, "frame of reference"])
    ds.Modality = modality
    ds.PatientName = "Test^Phantom"
    ds.PatientID = "PHANTOM"
    ds.StudyDate = "20240101"
    ds.SeriesNumber = 1
    ds.Manufacturer = "jnrrd tests"


def _pixels(ds: Dataset, plane: np.ndarray, signed: bool, bits_stored: int) -> None:
    """``plane`` in JNRRD order (columns, rows) as PixelData (rows, columns)."""
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME2"
    ds.Rows, ds.Columns = plane.shape[1], plane.shape[0]
    ds.BitsAllocated = 16
    ds.BitsStored = bits_stored
    ds.HighBit = bits_stored - 1
    ds.PixelRepresentation = 1 if signed else 0
    ds.PixelData = np.ascontiguousarray(plane.T).astype("<i2" if signed else "<u2").tobytes()


def ct_series(folder: Path, stored: np.ndarray, geometry: Geometry, *,
              slope: float = 1.0, intercept: float = -1024.0, series_uid: str | None = None,
              study_uid: str | None = None, shuffle: bool = True, bits_stored: int = 12,
              syntax: str = ExplicitVRLittleEndian, positions: list[list[float]] | None = None,
              per_slice_rescale: list[tuple[float, float]] | None = None,
              description: str = "phantom", seed: int = 0, decimals: int | None = None,
              prefix: str = "") -> str:
    """Write ``stored`` (columns, rows, slices; uint16 or int16) as a classic CT series into
    ``folder``, one file per slice under a random name (``prefix`` first); returns the
    SeriesInstanceUID. ``decimals`` writes ImageOrientationPatient, ImagePositionPatient and
    PixelSpacing with that many decimals, as scanners do (the direction cosines are then not
    quite unit vectors)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    series_uid = series_uid or generate_uid()
    study_uid = study_uid or generate_uid()
    signed = stored.dtype.kind == "i"
    order = list(range(stored.shape[2]))
    if shuffle:
        rng.shuffle(order)
    for n, k in enumerate(order):
        sop = generate_uid()
        ds = Dataset()
        ds.file_meta = _meta(CT_IMAGE, sop, ExplicitVRLittleEndian)
        _common(ds, CT_IMAGE, study_uid, series_uid, "CT")
        ds.SOPInstanceUID = sop
        ds.SeriesDescription = description
        ds.ImageType = ["ORIGINAL", "PRIMARY", "AXIAL"]
        ds.InstanceNumber = n + 1  # deliberately not the slice order
        position = positions[k] if positions is not None else geometry.position(k)
        ds.ImagePositionPatient = _rounded(position, decimals)
        ds.ImageOrientationPatient = _rounded(geometry.iop, decimals)
        ds.PixelSpacing = _rounded(geometry.pixel_spacing, decimals)
        ds.SliceThickness = float(np.linalg.norm(geometry.directions[:, 2]))
        s, i = per_slice_rescale[k] if per_slice_rescale is not None else (slope, intercept)
        ds.RescaleSlope = f"{s:.10g}"
        ds.RescaleIntercept = f"{i:.10g}"
        ds.RescaleType = "HU"
        _pixels(ds, stored[:, :, k], signed, bits_stored)
        if syntax == RLELossless:
            ds.compress(RLELossless, encoding_plugin="pydicom")
        name = prefix + f"{rng.getrandbits(48):012x}" + (".dcm" if n % 2 else "")
        ds.save_as(folder / name, enforce_file_format=True)
    return series_uid


def _rounded(values: list[float], decimals: int | None) -> list[Any]:
    """DICOM decimal strings with ``decimals`` decimals (the values as they are if None)."""
    if decimals is None:
        return list(values)
    return [f"{v:.{decimals}f}" for v in values]


def _frame_groups(geometry: Geometry, k: int) -> Dataset:
    g = Dataset()
    pos = Dataset()
    pos.ImagePositionPatient = geometry.position(k)
    g.PlanePositionSequence = Sequence([pos])
    return g


def _shared(geometry: Geometry, slope: float | None, intercept: float | None) -> Dataset:
    shared = Dataset()
    orient = Dataset()
    orient.ImageOrientationPatient = geometry.iop
    shared.PlaneOrientationSequence = Sequence([orient])
    measures = Dataset()
    measures.PixelSpacing = geometry.pixel_spacing
    measures.SliceThickness = float(np.linalg.norm(geometry.directions[:, 2]))
    measures.SpacingBetweenSlices = float(np.linalg.norm(geometry.directions[:, 2]))
    shared.PixelMeasuresSequence = Sequence([measures])
    if slope is not None:
        tr = Dataset()
        tr.RescaleSlope = f"{slope:.10g}"
        tr.RescaleIntercept = f"{intercept:.10g}"
        tr.RescaleType = "HU"
        shared.PixelValueTransformationSequence = Sequence([tr])
    return shared


def enhanced_ct(path: Path, stored: np.ndarray, geometry: Geometry, *, slope: float = 1.0,
                intercept: float = -1024.0, frame_order: list[int] | None = None) -> str:
    """Write ``stored`` (columns, rows, frames) as one enhanced CT file; frames in
    ``frame_order`` (default reversed); returns the SeriesInstanceUID."""
    order = frame_order if frame_order is not None else list(range(stored.shape[2]))[::-1]
    sop = generate_uid()
    ds = Dataset()
    ds.file_meta = _meta(ENHANCED_CT, sop, ExplicitVRLittleEndian)
    _common(ds, ENHANCED_CT, generate_uid(), generate_uid(), "CT")
    ds.SOPInstanceUID = sop
    ds.ImageType = ["ORIGINAL", "PRIMARY", "VOLUME", "NONE"]
    ds.NumberOfFrames = len(order)
    ds.SharedFunctionalGroupsSequence = Sequence([_shared(geometry, slope, intercept)])
    ds.PerFrameFunctionalGroupsSequence = Sequence([_frame_groups(geometry, k) for k in order])
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME2"
    ds.Rows, ds.Columns = stored.shape[1], stored.shape[0]
    ds.BitsAllocated, ds.BitsStored, ds.HighBit = 16, 12, 11
    ds.PixelRepresentation = 1 if stored.dtype.kind == "i" else 0
    frames = np.stack([stored[:, :, k].T for k in order])
    ds.PixelData = frames.astype("<i2" if stored.dtype.kind == "i" else "<u2").tobytes()
    ds.save_as(path, enforce_file_format=True)
    return str(ds.SeriesInstanceUID)


def _code(value: str, scheme: str, meaning: str) -> Dataset:
    c = Dataset()
    c.CodeValue, c.CodingSchemeDesignator, c.CodeMeaning = value, scheme, meaning
    return c


def segmentation(path: Path, labels: np.ndarray, geometry: Geometry,
                 segments: list[dict[str, Any]], *, fractional: bool = False,
                 overlap: tuple[int, int, int] | None = None) -> None:
    """Write the label map ``labels`` (columns, rows, slices; 0 = background) as a BINARY
    DICOM SEG: one frame per (segment, slice) where the segment is present. ``overlap``
    (segment, x, y... as (segment, slice, _)) adds a frame that overlaps another segment."""
    from pydicom.pixels import pack_bits

    sop = generate_uid()
    ds = Dataset()
    ds.file_meta = _meta(SEGMENTATION, sop, ExplicitVRLittleEndian)
    _common(ds, SEGMENTATION, generate_uid(), generate_uid(), "SEG")
    ds.SOPInstanceUID = sop
    ds.SegmentationType = "FRACTIONAL" if fractional else "BINARY"
    if fractional:
        ds.SegmentationFractionalType = "PROBABILITY"
        ds.MaximumFractionalValue = 255
    seq = []
    for seg in segments:
        item = Dataset()
        item.SegmentNumber = seg["value"]
        item.SegmentLabel = seg["name"]
        item.SegmentAlgorithmType = "MANUAL"
        item.SegmentedPropertyCategoryCodeSequence = Sequence([_code("123037004", "SCT",
                                                                     "Anatomical Structure")])
        item.SegmentedPropertyTypeCodeSequence = Sequence([_code(*seg["code"])])
        if "lab" in seg:
            item.RecommendedDisplayCIELabValue = list(seg["lab"])
        seq.append(item)
    ds.SegmentSequence = Sequence(seq)
    frames, groups = [], []
    for seg in segments:
        for k in range(labels.shape[2]):
            mask = labels[:, :, k] == seg["value"]
            if overlap is not None and overlap[0] == seg["value"] and overlap[1] == k:
                mask = mask | (labels[:, :, k] != 0)
            if not mask.any():
                continue
            g = _frame_groups(geometry, k)
            ident = Dataset()
            ident.ReferencedSegmentNumber = seg["value"]
            g.SegmentIdentificationSequence = Sequence([ident])
            groups.append(g)
            frames.append(mask.T.astype(np.uint8) * (255 if fractional else 1))
    ds.NumberOfFrames = len(frames)
    ds.SharedFunctionalGroupsSequence = Sequence([_shared(geometry, None, None)])
    ds.PerFrameFunctionalGroupsSequence = Sequence(groups)
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME2"
    ds.Rows, ds.Columns = labels.shape[1], labels.shape[0]
    ds.BitsAllocated = ds.BitsStored = 8 if fractional else 1
    ds.HighBit = ds.BitsStored - 1
    ds.PixelRepresentation = 0
    stack = np.stack(frames)
    ds.PixelData = stack.tobytes() if fractional else pack_bits(stack)
    ds.save_as(path, enforce_file_format=True)


def phantom(shape: tuple[int, int, int], seed: int = 0) -> np.ndarray:
    """Stored CT values (uint16, 12 bits): a ball of 'tissue' in 'air' with noise."""
    rng = np.random.default_rng(seed)
    x, y, z = np.meshgrid(*[np.linspace(-1, 1, n) for n in shape], indexing="ij")
    ball = (x**2 + y**2 + z**2) < 0.6
    out = np.where(ball, 1100, 24) + rng.integers(0, 60, shape)
    return out.astype(np.uint16)


#: an oblique CT geometry (0.7 x 0.8 mm pixels, 2.5 mm slices)
OBLIQUE_CT = Geometry.make(rotation(0.2, -0.1, 0.3), (0.7, 0.8, 2.5), (-100.0, 20.0, -30.0))
