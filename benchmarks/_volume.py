"""The benchmark data: a deterministic "CT-like" uint16 volume and a label volume.

Both are cached as ``.npy`` under ``~/.cache/jnrrd-bench/`` (outside the repository) and
regenerated only when missing. ``size=`` makes small variants (e.g. 128³) for quick runs.

Axis convention (see README): generation produces one C-contiguous array ``arr`` of shape
``(n, n, n)``. The C-order peers (zarr, tensorstore, NumPy files) store ``arr`` itself; jnrrd
gets ``arr.T`` (an F-contiguous view, axis 0 fastest, ``index_order="F"``). A jnrrd tile with
axis 0 fastest is then byte-for-byte the zarr C-order chunk of the reversed shape
(docs/format.md#zarr-axis-order), so every system stores the same bytes per 64³ chunk.

Run ``python benchmarks/_volume.py [--size N]`` to build the cache and print the zstd-3 ratio.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

import numpy as np

CACHE_DIR = Path(os.environ.get("JNRRD_BENCH_CACHE", Path.home() / ".cache" / "jnrrd-bench"))
SEED = 12345
# (zoom factor, weight) of the two smooth noise components.
COMPONENTS = ((32, 0.7), (8, 0.3))
LABEL_BLOCK = 128


def _field(size: int, rng: np.random.Generator) -> np.ndarray:
    """The smooth field f in [0, 1] (float32, C order, shape ``(size,) * 3``)."""
    from scipy import ndimage

    total = np.zeros((size,) * 3, dtype=np.float32)
    for factor, weight in COMPONENTS:
        n = math.ceil(size / factor) + 2
        grid = rng.standard_normal((n, n, n), dtype=np.float32)
        grid = ndimage.gaussian_filter(grid, sigma=1, mode="wrap")
        zoomed = ndimage.zoom(grid, factor, order=1)[:size, :size, :size]
        total += zoomed * np.float32(weight / float(zoomed.std()))
        del zoomed
    lo, hi = float(total.min()), float(total.max())
    total -= np.float32(lo)
    total *= np.float32(1.0 / (hi - lo))
    return total


def _generate(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Build (ct, labels) from scratch; both C-contiguous of shape ``(size,) * 3``."""
    rng = np.random.default_rng(SEED)
    f = _field(size, rng)
    # Poisson draws go slab by slab to bound memory (float64 lam + int64 draws per slab); the
    # generator consumes its stream element by element, so slabs give the same values.
    ct = np.empty(f.shape, dtype=np.uint16)
    for i in range(size):
        lam = 4000.0 * f[i].astype(np.float64) ** 2
        ct[i] = rng.poisson(lam).clip(0, 65535).astype(np.uint16)
    nb = max(1, math.ceil(size / LABEL_BLOCK))
    idx = np.arange(size) // LABEL_BLOCK
    # block_index is the linear index of the 128³ block, in the C order of ``arr``.
    block = (idx[:, None, None] * nb + idx[None, :, None]) * nb + idx[None, None, :]
    top = 1 + 16 + 16 * (nb**3 - 1)
    dtype = np.uint16 if top <= np.iinfo(np.uint16).max else np.uint32
    labels = (1 + np.floor(f * 16).astype(dtype) + (16 * block).astype(dtype)).astype(dtype)
    return ct, labels


def _cached(kind: str, size: int) -> np.ndarray:
    path = CACHE_DIR / f"{kind}-{size}.npy"
    if not path.exists():
        ct, labels = _generate(size)
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        for name, arr in (("ct", ct), ("labels", labels)):
            tmp = CACHE_DIR / f".{name}-{size}.{os.getpid()}.npy"
            np.save(tmp, arr)
            os.replace(tmp, CACHE_DIR / f"{name}-{size}.npy")
    return np.load(path)


def ct_volume(size: int = 512) -> np.ndarray:
    """The CT-like uint16 volume, C-contiguous, shape ``(size,) * 3`` (cached)."""
    return _cached("ct", size)


def label_volume(size: int = 512) -> np.ndarray:
    """Labels ``1 + floor(16 f) + 16 * block_index`` over 128³ blocks (uint16/uint32, cached)."""
    return _cached("labels", size)


def scaled_region(size: int) -> tuple[slice, slice, slice]:
    """The 200³ region at offset (37, 111, 203) in jnrrd (file) axes, scaled to ``size``."""
    ext = max(1, 200 * size // 512)
    return tuple(slice(o * size // 512, o * size // 512 + ext) for o in (37, 111, 203))


def random_regions(size: int, count: int = 200, edge: int = 32, seed: int = 7) -> list:
    """``count`` seeded random ``edge``³ regions (file axes) inside a ``size``³ volume."""
    edge = min(edge, size)
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, size - edge + 1, size=(count, 3))
    return [tuple(slice(int(s), int(s) + edge) for s in row) for row in starts]


def c_order(region: tuple[slice, ...]) -> tuple[slice, ...]:
    """The same region for the C-order peers, which index ``arr = jnrrd_view.T``."""
    return tuple(reversed(region))


def zstd_ratio(arr: np.ndarray, tile: int = 64, level: int = 3) -> float:
    """Stored/raw size of ``arr`` compressed with zstd ``level`` in independent ``tile``³ chunks."""
    import zstandard

    cctx = zstandard.ZstdCompressor(level=level)
    stored = 0
    n0, n1, n2 = arr.shape
    for i in range(0, n0, tile):
        for j in range(0, n1, tile):
            for k in range(0, n2, tile):
                chunk = np.ascontiguousarray(arr[i : i + tile, j : j + tile, k : k + tile])
                stored += len(cctx.compress(chunk.tobytes()))
    return stored / arr.nbytes


def main() -> None:
    """Build the cached volumes and print their summary and the zstd-3 ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512)
    args = parser.parse_args()
    ct = ct_volume(args.size)
    labels = label_volume(args.size)
    print(f"ct     {ct.shape} {ct.dtype} min {ct.min()} max {ct.max()} mean {ct.mean():.1f}")
    print(f"labels {labels.shape} {labels.dtype} min {labels.min()} max {labels.max()}")
    print(f"zstd-3 on 64^3 chunks stores {zstd_ratio(ct):.3f} of raw (expected about 0.71)")


if __name__ == "__main__":
    main()
