"""Where the time of a remote full read goes: the full read of ``remote.py`` (512³ uint16,
zstd-3 64³ tiles, HTTP at 20 ms) next to its two parts alone, interleaved, with wall and CPU.

    python benchmarks/remote_floor.py [--size 512] [--repeat 7] [--latency 0.02] [--dir DIR]

Rows (medians; CPU = ``time.process_time`` of this process, every thread; the server's CPU
from ``/proc``, Linux only, else blank):

- ``fetch only``: every level-0 tile's bytes through jnrrd's store seam
  (``RemoteStore.get_ranges`` of the held file, the plan and requests of a read), no decode;
- ``decode only``: the same tiles decoded from memory and copied into a fresh F-order output by
  a bare loop on as many threads as jnrrd decodes with (zstandard one-shot, NumPy copy): the
  decode and copy a read cannot avoid, with no format, no network and no Python of jnrrd;
- ``jnrrd``: ``jnrrd.open(url, cache_bytes=0)[...]``, the benchmark's full read;
- ``tensorstore``: its ``zarr3`` driver on the ``http`` kvstore, the same chunks (if installed).

A full read cannot take less than the longer of its two parts, nor, when the CPUs are the
bound, less than (client CPU + server CPU) / CPUs; the last lines state both against
tensorstore's time (the issue 32 target is 0.75×). The HTTP server (``tests/http_server.py``)
runs in a process of its own, as in ``remote.py``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _volume
from _servers import HttpServer
from remote import Datasets

TILE = 64


def _server_cpu(server: HttpServer) -> float | None:
    """CPU seconds of the server process so far (Linux), else None."""
    proc = getattr(server, "proc", None)
    if proc is None:
        return None
    try:
        with open(f"/proc/{proc.pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _tiles(url: str) -> tuple[list[tuple[int, ...]], list[tuple[int, int]]]:
    """Coordinates and byte ranges of the level-0 tiles of the internal file."""
    import jnrrd

    with jnrrd.open(url, cache_bytes=0) as vol:
        found = [(c, (loc.offset, loc.offset + loc.size))
                 for c, loc in vol.levels[0].tile_locations() if loc is not None]
    return [c for c, _ in found], [r for _, r in found]


def fetch_only(url: str, ranges: list[tuple[int, int]]) -> Callable[[], int]:
    """Every tile's bytes through the store seam of a remote read (held object, planned and
    merged requests, buffers as they arrive)."""
    import jnrrd
    from jnrrd.storage import RemoteStore, filesystem

    base, _, name = url.rpartition("/")

    def run() -> int:
        fs, root = filesystem(base)
        store = RemoteStore(fs, root, jnrrd.Policy())
        store.hold(name)
        try:
            pending = store.get_ranges(name, ranges, wait=False)
            return sum(len(p.result()) for p in pending)
        finally:
            store.release(name)
    return run


def decode_only(blobs: list[bytes], coords: list[tuple[int, ...]], shape: tuple[int, ...],
                threads: int) -> Callable[[], np.ndarray]:
    """The bare decode-and-copy loop over tiles held in memory."""
    import threading

    import zstandard

    local = threading.local()
    pool = ThreadPoolExecutor(threads)

    def run() -> np.ndarray:
        out = np.empty(shape, np.uint16, order="F")

        def one(i: int) -> None:
            d = getattr(local, "d", None)
            if d is None:
                d = local.d = zstandard.ZstdDecompressor()
            tile = np.frombuffer(d.decompress(blobs[i]), np.uint16).reshape((TILE,) * 3,
                                                                             order="F")
            x, y, z = (c * TILE for c in coords[i])
            out[x:x + TILE, y:y + TILE, z:z + TILE] = tile
        list(pool.map(one, range(len(blobs))))
        return out
    return run


def jnrrd_full(url: str) -> Callable[[], np.ndarray]:
    import jnrrd

    def run() -> np.ndarray:
        with jnrrd.open(url, cache_bytes=0) as vol:
            return np.asarray(vol[...])
    return run


def tensorstore_full(url: str) -> Callable[[], object] | None:
    try:
        import tensorstore as ts
    except ImportError:
        return None

    def run() -> object:
        store = ts.open({"driver": "zarr3", "kvstore": {"driver": "http", "base_url": url + "/"}},
                        read=True).result()
        return store.read().result()
    return run


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=512)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--latency", type=float, default=0.02, help="seconds per request")
    p.add_argument("--dir", help="dataset directory, kept and reused (default: a temporary "
                   "one); its int.jnrrd and zarr-c must be of --size")
    args = p.parse_args()
    warnings.simplefilter("ignore")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cpus = cpus or 1

    with tempfile.TemporaryDirectory(prefix="jnrrd-floor-") as tmp:
        root = Path(args.dir or tmp)
        if not ((root / "int.jnrrd").exists() and (root / "zarr-c").exists()):
            data = Datasets(_volume.ct_volume(args.size), root)
            data.ensure("jnrrd")
            data.ensure("zarr")
        server = HttpServer(root)
        try:
            server.set_latency(args.latency)
            url = f"{server.url}/int.jnrrd"
            coords, ranges = _tiles(url)
            with open(root / "int.jnrrd", "rb") as f:
                blob = f.read()
            blobs = [blob[a:b] for a, b in ranges]
            shape = (args.size,) * 3
            runs = {"fetch only": fetch_only(url, ranges),
                    "decode only": decode_only(blobs, coords, shape, cpus),
                    "jnrrd": jnrrd_full(url)}
            ts_run = tensorstore_full(f"{server.url}/zarr-c")
            if ts_run is not None:
                runs["tensorstore"] = ts_run
            for run in runs.values():  # imports, connections, first allocations
                run()
            got = _measure(runs, server, args.repeat)
        finally:
            server.close()
    _print(got, cpus)
    return 0


def _measure(runs: dict[str, Callable[[], object]], server: HttpServer, repeat: int
             ) -> dict[str, list[tuple[float, float, float | None]]]:
    got: dict[str, list[tuple[float, float, float | None]]] = {k: [] for k in runs}
    names = list(runs)
    for rep in range(repeat):
        for name in names[rep % len(names):] + names[:rep % len(names)]:
            s0 = _server_cpu(server)
            c0, t0 = time.process_time(), time.perf_counter()
            runs[name]()
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            s1 = _server_cpu(server)
            got[name].append((wall, cpu, None if s0 is None or s1 is None else s1 - s0))
    return got


def _print(got: dict[str, list[tuple[float, float, float | None]]], cpus: int) -> None:
    med: dict[str, tuple[float, float, float | None]] = {}
    print(f"{'':14}{'wall':>10}{'client CPU':>12}{'server CPU':>12}")
    for name, samples in got.items():
        wall = statistics.median(s[0] for s in samples)
        cpu = statistics.median(s[1] for s in samples)
        srv = [s[2] for s in samples if s[2] is not None]
        server = statistics.median(srv) if srv else None
        med[name] = (wall, cpu, server)
        print(f"{name:14}{wall * 1e3:8.0f} ms{cpu:10.2f} s"
              + (f"{server:10.2f} s" if server is not None else ""))
    if "tensorstore" not in med:
        return
    ts_wall = med["tensorstore"][0]
    parts = max(med["fetch only"][0], med["decode only"][0])
    print(f"longer part alone / tensorstore: {parts / ts_wall:.2f}×")
    cpu, server = med["jnrrd"][1], med["jnrrd"][2] or 0.0
    print(f"(jnrrd client + server CPU) / {cpus} CPUs / tensorstore: "
          f"{(cpu + server) / cpus / ts_wall:.2f}×; jnrrd / tensorstore: "
          f"{med['jnrrd'][0] / ts_wall:.2f}×")


if __name__ == "__main__":
    sys.exit(main())
