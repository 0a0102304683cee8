"""Peak resident memory of whole-file reads (issue: foundation; performance: zstd read).

Each measurement runs in a fresh subprocess and reports the peak resident set (``VmHWM``,
reset at the start) of ``jnrrd.read`` on a 1 GiB uint16 file (raw, zstd and gzip) against
the size of the output array.
Run: ``python benchmarks/memory.py [--gib 1.0] [--dir /tmp]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap

CHILD = textwrap.dedent("""
    import sys, time
    import jnrrd

    def hwm():
        # VmHWM: this process's peak resident set (reset below, so a parent's memory that
        # Linux carries over fork+exec into ru_maxrss does not count)
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024

    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    path = sys.argv[1]
    base = hwm()
    t = time.perf_counter()
    data, header = jnrrd.read(path)
    dt = time.perf_counter() - t
    print(base, hwm(), data.nbytes, dt)
""")


def make(path: str, nbytes: int, encoding: str) -> None:
    import numpy as np

    import jnrrd

    n = int(round((nbytes / 2) ** (1 / 3)))
    shape = (n, n, nbytes // 2 // (n * n))
    src = np.lib.format.open_memmap(path + ".npy", mode="w+", dtype=np.uint16, shape=shape,
                                    fortran_order=True)
    rng = np.random.default_rng(0)
    for k in range(0, shape[2], 64):
        depth = min(64, shape[2] - k)
        src[:, :, k : k + depth] = rng.poisson(1000, size=(n, n, depth)).astype(np.uint16)
    src.flush()
    jnrrd.write(path, src, encoding=encoding)
    del src
    os.unlink(path + ".npy")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--make", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.make:  # data generation runs in its own process, away from the measurement
        make(args.make[0], int(args.make[1]), args.make[2])
        return
    nbytes = int(args.gib * 2**30)
    print(f"{'case':<8}{'output MiB':>12}{'start RSS MiB':>15}{'peak RSS MiB':>14}"
          f"{'(peak-start)/output':>21}{'s':>8}")
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        for enc in ("raw", "zstd", "gzip"):
            path = os.path.join(d, f"mem-{enc}.jnrrd")
            subprocess.run([sys.executable, __file__, "--make", path, str(nbytes), enc],
                           check=True)
            out = subprocess.run([sys.executable, "-c", CHILD, path], check=True,
                                 capture_output=True, text=True).stdout.split()
            base, peak, size, dt = int(out[0]), int(out[1]), int(out[2]), float(out[3])
            print(f"{enc:<8}{size / 2**20:>12.0f}{base / 2**20:>15.0f}{peak / 2**20:>14.0f}"
                  f"{(peak - base) / size:>21.3f}{dt:>8.2f}")
            os.unlink(path)


if __name__ == "__main__":
    main()
