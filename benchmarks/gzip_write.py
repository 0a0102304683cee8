"""gzip NRRD writing against SimpleITK (issue 32, item 4): time and output size, same run.

Data: CT-like int16 volumes, 512 x 512 x Z (Z = 256: 128 MiB; Z = 720: 360 MiB): air at
-1000 with faint noise, an elliptic body (soft tissue 40 HU, fat, an organ, a lung, a bone
ring at 900 HU) with noise of 12 HU, and the constant -3024 padding outside the scanner's
field of view that CT scanners write; deterministic, not random noise, not zeros.

Three operations, each by jnrrd and by SimpleITK, all six interleaved (order rotated),
medians:
- ``write``: the array in memory to a gzip NRRD: ``jnrrd.write("x.nrrd", arr,
  encoding="gzip")`` against ``sitk.WriteImage(img, "x.nrrd", useCompression=True)`` of an
  image built untimed;
- ``convert raw``: a raw NRRD on disk to a gzip NRRD: ``jnrrd.convert(src, "x.nrrd",
  encoding="gzip")`` (the streamed path, bounded memory) against
  ``sitk.WriteImage(sitk.ReadImage(src), "x.nrrd", True)``; the source read is in both times;
- ``convert gzip``: the same from a gzip NRRD (SimpleITK's own, as 3D Slicer saves): its
  inflate is in both times.

The sources are written once by SimpleITK. Both sides use their default level: jnrrd's
``compression_level`` 1 runs zlib-ng's level 2 for the blocks (and libdeflate's level 1, as
small, for the tail: docs/nrrd.md "gzip writing"); SimpleITK's default is zlib-ng's level 2
(ITK's bundled zlib-ng; its level 1 is a quick mode about 40 % larger). The size bound keeps
the comparison honest whatever the levels are called. Every output is read back bit-exact.

    python benchmarks/gzip_write.py [--sizes 256,720] [--repeat 3]

Targets: each jnrrd operation ≤ 0.6× the time of SimpleITK's same operation, output ≤ 1.02×
SimpleITK's bytes; the table also gives each convert against SimpleITK's write alone (its
in-memory image, no source read). ``run_all.py`` runs the 128 MiB volume as
``gzip-nrrd-write/{time,size}``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import Case, Contender, Target

NAMES = ("gzip-nrrd-write/time", "gzip-nrrd-write/size")
TARGETS = {"time": 0.6, "size": 1.02}
#: (jnrrd's, SimpleITK's) name of each operation
PAIRS = (("jnrrd write", "SimpleITK write"), ("jnrrd convert raw", "SimpleITK convert raw"),
         ("jnrrd convert gzip", "SimpleITK convert gzip"))
SYSTEMS = tuple(name for pair in PAIRS for name in pair)


def ct_volume(nz: int, n: int = 512, seed: int = 7) -> np.ndarray:
    """The CT-like int16 volume, C order ``(nz, n, n)`` (z slowest)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:n, 0:n].astype(np.float32) - np.float32(n / 2)
    fov = x * x + y * y > (0.49 * n) ** 2
    out = np.empty((nz, n, n), np.int16)
    for z in range(nz):
        s = np.float32(1 + 0.08 * np.sin(z / 50))
        r = (x / (0.42 * n * s)) ** 2 + (y / (0.3 * n * s)) ** 2
        img = np.where(r < 1, np.float32(40), np.float32(-1000))
        img[r > 0.9] = np.where(r[r > 0.9] < 1, np.float32(-90), img[r > 0.9])  # fat
        img[((x + 0.12 * n) / (0.1 * n)) ** 2 + (y / (0.12 * n)) ** 2 < 1] = 60  # organ
        img[((x - 0.15 * n) / (0.09 * n)) ** 2 + ((y + 0.05 * n) / (0.1 * n)) ** 2 < 1] = -800
        img[(r > 0.8) & (r < 0.86)] = 900  # bone
        noise = rng.normal(0, 12, (n, n)).astype(np.float32)
        img += np.where(img > -950, noise, noise * np.float32(0.25))
        img[fov] = -3024
        out[z] = np.rint(img).astype(np.int16)
    return out


class Writers:
    """The six writers of one volume, each to its own file in ``workdir``."""

    def __init__(self, arr: np.ndarray, workdir: Path) -> None:
        import SimpleITK

        self.arr = arr
        self.workdir = workdir
        self.img = SimpleITK.GetImageFromArray(arr)
        self.src = {"raw": workdir / "source-raw.nrrd", "gzip": workdir / "source-gzip.nrrd"}
        SimpleITK.WriteImage(self.img, str(self.src["raw"]), False)
        SimpleITK.WriteImage(self.img, str(self.src["gzip"]), True)
        self.out = {name: workdir / f"out-{name.replace(' ', '-')}.nrrd" for name in SYSTEMS}

    def run(self, name: str) -> Callable[[], None]:
        import SimpleITK

        import jnrrd

        out = str(self.out[name])
        src = str(self.src[name.rsplit(" ", 1)[-1]]) if "convert" in name else ""
        if name == "jnrrd write":
            return lambda: jnrrd.write(out, self.arr, encoding="gzip", index_order="C")
        if name == "SimpleITK write":
            return lambda: SimpleITK.WriteImage(self.img, out, True)
        if name.startswith("jnrrd"):
            return lambda: jnrrd.convert(src, out, encoding="gzip")
        return lambda: SimpleITK.WriteImage(SimpleITK.ReadImage(src), out, True)

    def before(self, name: str) -> Callable[[], None]:
        def remove() -> None:
            for p in self.workdir.glob(f"out-{name.replace(' ', '-')}*"):
                p.unlink()
        return remove

    def size(self, name: str) -> float:
        if not self.out[name].exists():
            self.run(name)()
        return float(os.path.getsize(self.out[name]))


def _targets(metric: str) -> list[Target]:
    return [Target(j, sitk, "<=", TARGETS[metric]) for j, sitk in PAIRS]


def _writers(bench) -> Writers:
    w = getattr(bench, "_gzip_nrrd_writers", None)
    if w is None:
        d = bench.workdir / "gzip-nrrd"
        d.mkdir(exist_ok=True)
        w = bench._gzip_nrrd_writers = Writers(ct_volume(256), d)
    return w


def write_time(bench) -> Case:
    """The 128 MiB CT-like volume to gzip NRRD by jnrrd and SimpleITK: the array in memory,
    a raw NRRD and a gzip NRRD converted; time."""
    w = _writers(bench)
    cs = [Contender(n, run=w.run(n), before=w.before(n)) for n in SYSTEMS]
    return Case("gzip-nrrd-write/time", cs, w.arr.nbytes, _targets("time"),
                subject=SYSTEMS[0], reads=False)


def write_size(bench) -> Case:
    """The same writes' output bytes."""
    w = _writers(bench)
    cs = [Contender(n, measure=lambda n=n: w.size(n)) for n in SYSTEMS]
    return Case("gzip-nrrd-write/size", cs, w.arr.nbytes, _targets("size"),
                subject=SYSTEMS[0], reads=False, metric="bytes")


BUILDERS = {"gzip-nrrd-write/time": write_time, "gzip-nrrd-write/size": write_size}


def _one(nz: int, repeat: int, workdir: Path) -> None:
    arr = ct_volume(nz)
    w = Writers(arr, workdir)
    times: dict[str, list[float]] = {n: [] for n in SYSTEMS}
    for rep in range(repeat):
        k = rep % len(SYSTEMS)
        for name in SYSTEMS[k:] + SYSTEMS[:k]:
            w.before(name)()
            t0 = time.perf_counter()
            w.run(name)()
            times[name].append(time.perf_counter() - t0)
    med = {n: statistics.median(v) for n, v in times.items()}
    size = {n: w.size(n) for n in SYSTEMS}
    print(f"\n{arr.nbytes / 2**20:.0f} MiB int16 CT-like ({nz} x 512 x 512), "
          f"{repeat} interleaved runs, medians")
    for j, ref in PAIRS:
        tr, sr = med[j] / med[ref], size[j] / size[ref]
        ok = "met" if tr <= TARGETS["time"] and sr <= TARGETS["size"] else "NOT met"
        line = (f"  {j:19s} {med[j]:6.2f} s  {ref:23s} {med[ref]:6.2f} s   time {tr:.2f}x  "
                f"size {sr:.3f}x ({size[j] / 2**20:.1f} MiB)  {ok}")
        if ref != "SimpleITK write":
            line += f"   [vs SimpleITK write alone: {med[j] / med['SimpleITK write']:.2f}x]"
        print(line)
    import jnrrd

    for n in SYSTEMS:
        data, _ = jnrrd.read(str(w.out[n]), index_order="C")
        assert np.array_equal(data, arr), f"{n}: the file does not read back"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="256,720", help="slice counts (512 x 512 each)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    for nz in (int(s) for s in args.sizes.split(",")):
        workdir = Path(tempfile.mkdtemp(prefix="jnrrd-gzw-"))
        try:
            _one(nz, args.repeat, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
