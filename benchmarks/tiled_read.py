"""Tiled reads: full read and the 200³ region read of 64³ raw and zstd-3 tiles.

    python benchmarks/tiled_read.py [--size 512] [--repeat 5] [--cold]

jnrrd against zarr-python v3, tensorstore (zarr3 driver) and NumPy on the raw bytes
(``np.fromfile`` for the full read, an ``np.memmap`` slice for the region), with the same
targets as ``run_all.py``. A subset of ``run_all.py`` sharing its harness.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run_all

CASES = ("read/raw", "read/zstd", "region/raw", "region/zstd")
SYSTEMS = ("jnrrd", "zarr", "tensorstore", "numpy")


def main() -> int:
    """Command-line entry point."""
    args = run_all.parser(__doc__).parse_args()
    builders = run_all.case_builders(SYSTEMS)
    return run_all.run({name: builders[name] for name in CASES}, args, "jnrrd tiled reads")


if __name__ == "__main__":
    sys.exit(main())
