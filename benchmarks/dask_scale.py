"""Dask scaling: read and write throughput with 1 and 2 worker processes vs one process.

    python benchmarks/dask_scale.py [--size 512] [--repeat 5] [--compression zstd]
                                    [--levels 1] [--workers 1,2]

The CT-like uint16 volume (``size``³, 64³ tiles) is written once as the source file. Contenders,
interleaved A B A B … over ``repeat`` repetitions (benchmarks/README.md#method), medians reported:

- read: ``jnrrd.read`` (one process, the shared decode thread pool) against
  ``Volume.to_dask().compute()`` (tiles decoded on the workers, gathered by the client) and
  ``Volume.to_dask().sum().compute()`` (decoded and reduced on the workers: no array moves);
- write: ``jnrrd.write`` of the in-memory NumPy array and of the lazily opened source file
  (``jnrrd.write(dst, jnrrd.open(src))``, file to file in one process) against
  ``jnrrd.write(dst, Volume.to_dask())`` (workers read the source tiles, encode and write the
  new tiles; internal storage gathers nothing but sizes, the client concatenates the spools).

A "floor" row per cluster times ``da.zeros(shape, chunks=64).compute()``: the same number of
chunks and bytes gathered by the client with no file access, i.e. what Dask itself costs.

Each cluster is a ``LocalCluster(n_workers=w, processes=True, threads_per_worker=1)``. The source
file is warmed before every read repetition. Ratios are speed ratios against ``jnrrd.read``
(reads) and the file-to-file ``jnrrd.write`` (writes): above 1 means faster.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from _harness import warm
from _volume import ct_volume

import jnrrd


def _clusters(counts: list[int]) -> dict[int, object]:
    from distributed import Client, LocalCluster

    out = {}
    for n in counts:
        cluster = LocalCluster(n_workers=n, processes=True, threads_per_worker=1,
                               dashboard_address=":0", silence_logs=logging.WARNING)
        out[n] = Client(cluster, set_as_default=False)
    return out


def _on(client: object, fn: Callable[[], object]) -> Callable[[], object]:
    import dask

    def run() -> object:
        with dask.config.set(scheduler=client):
            return fn()
    return run


def main() -> int:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--compression", default="zstd")
    ap.add_argument("--levels", type=int, default=1, help="pyramid levels of the written file")
    ap.add_argument("--workers", default="1,2")
    args = ap.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    data = ct_volume(args.size)
    nbytes = data.nbytes
    tmp = Path(tempfile.mkdtemp(prefix="jnrrd-dask-scale-"))
    src, dst = tmp / "src.jnrrd", tmp / "dst.jnrrd"
    opts = {"tile": 64, "compression": args.compression}
    jnrrd.write(src, data, **opts)
    wopts = {**opts, "levels": args.levels}
    clients = _clusters(counts)
    import dask.array as da
    try:
        vol = jnrrd.open(src)
        total = int(data.sum(dtype=np.int64))

        def read_np() -> object:
            return jnrrd.read(src)[0]

        def write_np() -> None:
            jnrrd.write(dst, data, **wopts)

        def write_file() -> None:
            with jnrrd.open(src) as v:
                jnrrd.write(dst, v, **wopts)

        reads: dict[str, Callable[[], object]] = {"jnrrd.read (1 process)": read_np}
        writes: dict[str, Callable[[], object]] = {
            "jnrrd.write numpy (1 process)": write_np,
            "jnrrd.write file->file (1 process)": write_file,
        }
        for n, client in clients.items():
            reads[f"to_dask().compute() {n} worker(s)"] = _on(
                client, lambda: vol.to_dask().compute())
            reads[f"to_dask().sum() {n} worker(s)"] = _on(
                client, lambda: vol.to_dask().sum(dtype=np.int64).compute())
            # The floor: the same chunks made from nothing and gathered (Dask's own cost).
            reads[f"floor: da.zeros().compute() {n} worker(s)"] = _on(
                client, lambda: da.zeros(data.shape, data.dtype, chunks=64).compute())
            writes[f"write(to_dask()) {n} worker(s)"] = _on(
                client, lambda: jnrrd.write(dst, vol.to_dask(), **wopts))
        # Untimed first runs: worker imports, caches; and a correctness check of each path.
        for name, fn in reads.items():
            out = fn()
            if name.startswith("floor"):
                continue
            ok = int(out) == total if np.ndim(out) == 0 else np.array_equal(out, data)
            if not ok:
                raise SystemExit(f"{name}: wrong result")
        for fn in writes.values():
            fn()
            if not np.array_equal(jnrrd.read(dst)[0], data):
                raise SystemExit("write: wrong result")
        samples: dict[str, list[float]] = {k: [] for k in (*reads, *writes)}
        for _ in range(args.repeat):
            for name, fn in reads.items():
                warm([src])
                t0 = time.perf_counter()
                fn()
                samples[name].append(time.perf_counter() - t0)
            for name, fn in writes.items():
                t0 = time.perf_counter()
                fn()
                samples[name].append(time.perf_counter() - t0)
        vol.close()
    finally:
        for c in clients.values():
            cluster = c.cluster
            c.close()
            cluster.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"dask scaling: {args.size}^3 uint16 ({nbytes / 2**20:.0f} MiB), 64^3 tiles, "
          f"{args.compression}, write levels={args.levels}, {os.cpu_count()} cores, "
          f"median of {args.repeat}")
    print(f"{'case':44} {'median s':>9} {'GB/s':>7} {'speed vs 1 process':>19}")
    for group, ref in ((reads, "jnrrd.read (1 process)"),
                       (writes, "jnrrd.write file->file (1 process)")):
        ref_t = statistics.median(samples[ref])
        for name in group:
            t = statistics.median(samples[name])
            print(f"{name:44} {t:9.3f} {nbytes / t / 1e9:7.3f} {ref_t / t:18.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
