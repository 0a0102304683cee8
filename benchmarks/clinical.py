"""DICOM series → tiled zstd JNRRD with 4 levels, against SimpleITK reading the same series
(``ImageSeriesReader``, GDCM) and writing a compressed NRRD (``WriteImage(..., useCompression=
True)``): the conversion a clinical user runs first.

The series is generated once with pydicom (``examples/dicom_series.py``'s generator: a CT
ball phantom, 12-bit stored values with RescaleIntercept -1024, slightly oblique, one file per
slice). Both contenders start from the files (warm page cache: read once, untimed, before each
repetition) and end with a complete file on disk; they alternate (A B, B A, …) and the medians
are compared. Target: jnrrd's time ≤ 1.25 × SimpleITK's (speed ≥ 0.8×).

    python benchmarks/clinical.py                     # 512 x 512 x 200 slices, 5 repetitions
    python benchmarks/clinical.py --size 256 --slices 80 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import warm  # noqa: E402
from dicom_series import make_series  # noqa: E402

TARGET = 1.25  # jnrrd time / SimpleITK time


def run_jnrrd(series: Path, out: Path) -> None:
    import jnrrd

    jnrrd.convert(series, out / "ct.jnrrd", tile=64, levels=4, compression="zstd")


def run_sitk(series: Path, out: Path) -> None:
    import SimpleITK as sitk

    reader = sitk.ImageSeriesReader()
    reader.SetFileNames(reader.GetGDCMSeriesFileNames(str(series)))
    sitk.WriteImage(reader.Execute(), str(out / "ct.nrrd"), useCompression=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=512, help="columns and rows (default 512)")
    p.add_argument("--slices", type=int, default=200, help="slices (default 200)")
    p.add_argument("--repeat", type=int, default=5, help="repetitions (default 5)")
    p.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    args = p.parse_args()
    work = Path(args.dir or tempfile.mkdtemp(prefix="jnrrd-clinical-"))
    series = work / "series"
    try:
        if not series.exists():
            t0 = time.perf_counter()
            make_series(str(series), (args.size, args.size, args.slices), (0.7, 0.7, 1.0))
            print(f"generated {args.slices} slices of {args.size}x{args.size} in "
                  f"{time.perf_counter() - t0:.1f} s")
        times: dict[str, list[float]] = {"jnrrd": [], "SimpleITK": []}
        runs = {"jnrrd": run_jnrrd, "SimpleITK": run_sitk}
        sizes: dict[str, int] = {}
        for r in range(args.repeat):
            order = ["jnrrd", "SimpleITK"] if r % 2 == 0 else ["SimpleITK", "jnrrd"]
            for name in order:
                out = work / f"out-{name}"
                shutil.rmtree(out, ignore_errors=True)
                out.mkdir()
                warm([series])
                t0 = time.perf_counter()
                runs[name](series, out)
                times[name].append(time.perf_counter() - t0)
                sizes[name] = sum(f.stat().st_size for f in out.iterdir())
        med = {k: statistics.median(v) for k, v in times.items()}
        raw = args.size * args.size * args.slices * 2
        print(f"series {args.size}x{args.size}x{args.slices} int16 ({raw / 2**20:.0f} MiB), "
              f"median of {args.repeat}:")
        for name in ("jnrrd", "SimpleITK"):
            what = ("tiled zstd JNRRD, 4 levels" if name == "jnrrd"
                    else "ImageSeriesReader + WriteImage(.nrrd, compressed)")
            print(f"  {name:<10} {med[name]:7.2f} s  {sizes[name] / 2**20:7.1f} MiB  {what}")
        ratio = med["jnrrd"] / med["SimpleITK"]
        verdict = "met" if ratio <= TARGET else "NOT met"
        print(f"jnrrd / SimpleITK time: {ratio:.2f} (speed {1 / ratio:.2f}x; target time <= "
              f"{TARGET}x: {verdict})")
        return 0
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    raise SystemExit(main())
