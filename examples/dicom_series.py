"""A DICOM CT series to a 4-level JNRRD pyramid, a 50 mm box queried at 2 mm, a preview PNG.

The series is generated here with pydicom (a ball phantom, slightly oblique, one file per
slice under a random name, stored values with RescaleIntercept -1024), then:

1. ``jnrrd.convert(folder, "ct.jnrrd", tile=64, levels=4, compression="zstd")`` sorts the
   slices along the slice normal, checks the spacing, applies the rescale and writes the
   LPS geometry;
2. ``vol.query(lower, upper, spacing=2.0)`` reads the 50 mm box around the centre from the
   coarsest level whose voxel steps are all at most 2 mm (0.8 x 0.8 x 1 mm voxels: level 1,
   1.6 x 1.6 x 2 mm; only the tiles under the box are read);
3. ``vol.preview()`` draws three mid-slices, written as ``ct.png``.

Needs pydicom (``pip install pydicom``).
"""

from __future__ import annotations

import os
import random
import sys
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _runner import run

CT_IMAGE = "1.2.840.10008.5.1.4.1.1.2"


def make_series(folder: str, shape: tuple[int, int, int] = (160, 160, 96),
                spacing: tuple[float, float, float] = (0.8, 0.8, 1.0),
                seed: int = 0) -> str:
    """Write a CT series of ``shape`` (columns, rows, slices) into ``folder``; returns its
    SeriesInstanceUID."""
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid

    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    names = random.Random(seed)
    angle = np.deg2rad(8.0)  # a little oblique: rows tilted about the x axis
    row = np.array([1.0, 0.0, 0.0])
    col = np.array([0.0, np.cos(angle), np.sin(angle)])
    normal = np.cross(row, col)
    origin = np.array([-64.0, -64.0, -60.0])
    x, y = np.meshgrid(np.linspace(-1, 1, shape[0]), np.linspace(-1, 1, shape[1]),
                       indexing="ij")
    study, series = generate_uid(), generate_uid()
    for k in range(shape[2]):
        z = 2 * k / (shape[2] - 1) - 1
        ball = x**2 + y**2 + z**2 < 0.7
        plane = np.where(ball, 1064, 24) + rng.integers(0, 40, shape[:2])
        ds = Dataset()
        sop = generate_uid()
        ds.file_meta = FileMetaDataset()
        ds.file_meta.MediaStorageSOPClassUID = CT_IMAGE
        ds.file_meta.MediaStorageSOPInstanceUID = sop
        ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
        ds.SOPClassUID, ds.SOPInstanceUID = CT_IMAGE, sop
        ds.StudyInstanceUID, ds.SeriesInstanceUID = study, series
        ds.Modality, ds.SeriesDescription = "CT", "phantom"
        ds.InstanceNumber = shape[2] - k  # not the slice order
        ds.ImagePositionPatient = [float(v) for v in origin + normal * spacing[2] * k]
        ds.ImageOrientationPatient = [float(v) for v in (*row, *col)]
        ds.PixelSpacing = [spacing[1], spacing[0]]
        ds.SliceThickness = spacing[2]
        ds.RescaleSlope, ds.RescaleIntercept = 1, -1024
        ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
        ds.Rows, ds.Columns = shape[1], shape[0]
        ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 0
        ds.PixelData = np.ascontiguousarray(plane.T).astype("<u2").tobytes()
        ds.save_as(os.path.join(folder, f"{names.getrandbits(40):010x}.dcm"),
                   enforce_file_format=True)
    return str(series)


def main(out: str, args: Any) -> None:
    import jnrrd
    from jnrrd.preview import write_png

    try:
        import pydicom  # noqa: F401
    except ImportError:
        print("this example needs pydicom: pip install pydicom")
        return
    folder = os.path.join(out, "series")
    make_series(folder)
    print(f"DICOM series: {len(os.listdir(folder))} files in {folder}")
    target = os.path.join(out, "ct.jnrrd")
    jnrrd.convert(folder, target, tile=64, levels=4, compression="zstd")
    with jnrrd.open(target) as vol:
        print(f"wrote {target}: {vol.dtype} {vol.shape}, {len(vol.levels)} levels "
              f"{[lv.shape for lv in vol.levels]}")
        print(f"origin (LPS mm) {np.round(vol.header['space_origin'], 3).tolist()}")
        first, last = vol.world_bounds()  # the voxel centres' extent, in LPS mm
        centre = (first + last) / 2
        lower, upper = centre - 25.0, centre + 25.0
        region = vol.query(lower, upper, spacing=2.0)
        steps = np.linalg.norm(region.affine[:3, :3], axis=0)
        print(f"50 mm box at 2 mm: level {region.level} (voxels "
              f"{np.round(steps, 2).tolist()} mm), region {region.data.shape}, "
              f"mean {region.data.mean():.1f} HU")
        picture = vol.preview(size=128)
    write_png(os.path.join(out, "ct.png"), picture)
    print(f"preview {picture.shape[1]}x{picture.shape[0]} written to "
          f"{os.path.join(out, 'ct.png')}")


if __name__ == "__main__":
    run(main, __doc__)
