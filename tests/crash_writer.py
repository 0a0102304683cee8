"""A writer the crash and concurrency tests run in a subprocess (and import for references).

``python crash_writer.py TARGET KIND VERSION [REPEAT]`` builds version ``VERSION`` of the test
volume, prints ``ready``, writes it to ``TARGET`` as ``KIND`` (``internal``, ``external``,
``detached`` or ``attached``) ``REPEAT`` times (default 1; later repeats alternate with
``VERSION + 1`` so a reader sees the file change), then prints ``done``. The crash test kills it
with SIGKILL somewhere in between.
"""

from __future__ import annotations

import sys

import numpy as np

import jnrrd

KINDS = ("internal", "external", "detached", "attached")
SHAPE = (48, 40, 36)


def volume(version: int) -> np.ndarray:
    """Version ``version`` of the test volume: every voxel differs between versions, and
    ``data.flat[0] == version`` identifies it."""
    base = np.arange(np.prod(SHAPE), dtype=np.uint32).reshape(SHAPE, order="F")
    return (base * 7 + version).astype(np.uint32)


def version_of(data: np.ndarray) -> int:
    return int(np.asarray(data).flat[0])


def write(target: str, kind: str, version: int) -> None:
    """Write version ``version`` to ``target`` as ``kind`` (a 3-level pyramid when tiled)."""
    data = volume(version)
    if kind == "internal":
        jnrrd.write(target, data, tile=(16, 16, 16), levels=3, compression="zstd")
    elif kind == "external":
        jnrrd.write(target, data, tile=(16, 16, 16), levels=3, compression="zstd",
                    storage="external")
    elif kind == "detached":
        jnrrd.write(target, data, detached=True, encoding="gzip")
    elif kind == "attached":
        jnrrd.write(target, data, encoding="raw")
    else:
        raise SystemExit(f"unknown kind {kind!r}; expected one of {KINDS}")


def main(argv: list[str]) -> None:
    target, kind, version = argv[0], argv[1], int(argv[2])
    repeat = int(argv[3]) if len(argv) > 3 else 1
    volume(version)  # warm up NumPy before announcing readiness
    print("ready", flush=True)
    for k in range(repeat):
        write(target, kind, version + (k % 2))
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
