"""Where the time of a remote read goes: a benchmark read of ``remote.py`` (512³ uint16,
zstd-3 64³ tiles) next to its parts alone, interleaved, with wall, CPU and requests.

    python benchmarks/remote_floor.py [--case full|s3-regions] [--size 512] [--repeat 7]
                                      [--latency 0.02] [--dir DIR]

Rows (medians; CPU = ``time.process_time`` of this process, every thread; the server's CPU
from ``/proc``, Linux only, else blank; requests as the server counted them):

``--case full`` (default): the full read over HTTP at ``--latency`` per request.

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

``--case s3-regions``: the 50 random 32³ regions of ``remote.py`` through moto's S3 at 0 ms
(``_servers.S3Target``, a process of its own), one region after another.

- ``obstore alone``: per region, the byte ranges jnrrd asks for (the tiles the region touches,
  neighbours in the file joined) as concurrent ``obstore.get_range_async`` calls (if obstore is
  installed): those requests with no decoding and no Python of jnrrd;
- ``fetch only``: per region, the tiles' ranges through jnrrd's store seam, no decode;
- ``jnrrd``: ``jnrrd.open(url, cache_bytes=0, storage_options=...)`` reading the regions;
- ``tensorstore``: its ``zarr3`` driver on the ``s3`` kvstore, the same chunks (if installed).

The last lines give the server's CPU per request and ``obstore alone`` against tensorstore's
time: what any reader of these requests takes here, whatever it does with the bytes (the
issue 32 target for jnrrd is 0.9×).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
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
import remote
from _servers import HttpServer, S3Target
from peers import Unavailable
from remote import Datasets

TILE = 64
CASES = ("full", "s3-regions")
#: a sample: wall seconds, client CPU seconds, server CPU seconds (None: unknown), requests
Sample = tuple[float, float, float | None, float]


def _server_cpu(server: HttpServer | S3Target) -> float | None:
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


def _tiles(url: str, options: dict | None = None
           ) -> tuple[list[tuple[int, ...]], list[tuple[int, int]]]:
    """Coordinates and byte ranges of the level-0 tiles of the internal file."""
    import jnrrd

    with jnrrd.open(url, cache_bytes=0, storage_options=options) as vol:
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


def region_ranges(coords: list[tuple[int, ...]], ranges: list[tuple[int, int]],
                  regions: list) -> list[list[tuple[int, int]]]:
    """Per region, the byte ranges of the tiles it touches, in file order."""
    where = dict(zip(coords, ranges, strict=True))
    out = []
    for region in regions:
        spans = [range(s.start // TILE, (s.stop - 1) // TILE + 1) for s in region]
        out.append(sorted(where[c] for c in itertools.product(*spans) if c in where))
    return out


def joined(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` (sorted) with neighbours in the file joined: one request each."""
    out: list[tuple[int, int]] = []
    for a, b in spans:
        if out and out[-1][1] == a:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def obstore_alone(server: S3Target, key: str, per_region: list[list[tuple[int, int]]]
                  ) -> Callable[[], int] | None:
    """Each region's joined ranges as concurrent ``obstore.get_range_async`` calls."""
    try:
        import obstore
        from obstore.store import S3Store
    except ImportError:
        return None
    o = server.options
    store = S3Store(server.bucket, endpoint=o["endpoint_url"],
                    region=o["client_kwargs"]["region_name"], access_key_id=o["key"],
                    secret_access_key=o["secret"], client_options={"allow_http": True})
    requests = [joined(spans) for spans in per_region]

    async def regions() -> int:
        total = 0
        for spans in requests:
            got = await asyncio.gather(*[obstore.get_range_async(store, key, start=a, end=b)
                                         for a, b in spans])
            total += sum(len(g) for g in got)
        return total

    return lambda: asyncio.run(regions())


def fetch_regions(url: str, options: dict, per_region: list[list[tuple[int, int]]]
                  ) -> Callable[[], int]:
    """Each region's tile ranges through the store seam of a remote read."""
    import jnrrd
    from jnrrd.storage import RemoteStore, filesystem

    base, _, name = url.rpartition("/")

    def run() -> int:
        fs, root = filesystem(base, options)
        store = RemoteStore(fs, root, jnrrd.Policy())
        store.hold(name)
        try:
            total = 0
            for spans in per_region:
                total += sum(len(p.result()) for p in store.get_ranges(name, spans, wait=False))
            return total
        finally:
            store.release(name)
    return run


def _full_case(root: Path, args: argparse.Namespace, cpus: int
               ) -> tuple[HttpServer, dict[str, Callable[[], object]]]:
    server = HttpServer(root)
    server.set_latency(args.latency)
    url = f"{server.url}/int.jnrrd"
    coords, ranges = _tiles(url)
    with open(root / "int.jnrrd", "rb") as f:
        blob = f.read()
    blobs = [blob[a:b] for a, b in ranges]
    runs: dict[str, Callable[[], object]] = {
        "fetch only": fetch_only(url, ranges),
        "decode only": decode_only(blobs, coords, (args.size,) * 3, cpus),
        "jnrrd": jnrrd_full(url)}
    ts_run = tensorstore_full(f"{server.url}/zarr-c")
    if ts_run is not None:
        runs["tensorstore"] = ts_run
    return server, runs


def _s3_regions_case(root: Path, args: argparse.Namespace, cpus: int
                     ) -> tuple[S3Target, dict[str, Callable[[], object]]]:
    server = S3Target(root)
    url, options = f"{server.url}/int.jnrrd", server.options
    regions = _volume.random_regions(args.size, count=remote.REGIONS)
    per_region = region_ranges(*_tiles(url, options), regions)
    runs: dict[str, Callable[[], object]] = {}
    alone = obstore_alone(server, "int.jnrrd", per_region)
    if alone is not None:
        runs["obstore alone"] = alone
    runs["fetch only"] = fetch_regions(url, options, per_region)
    runs["jnrrd"] = remote._jnrrd_run(url, "regions50", regions, 0,
                                      {"storage_options": options})
    try:
        runs["tensorstore"] = remote._ts_run(f"{server.url}/zarr-c", "regions50", regions,
                                             False, options)
    except Unavailable:
        pass
    return server, runs


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", choices=CASES, default="full")
    p.add_argument("--size", type=int, default=512)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--latency", type=float, default=0.02,
                   help="seconds per request (--case full)")
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
        build = _full_case if args.case == "full" else _s3_regions_case
        server, runs = build(root, args, cpus)
        try:
            for run in runs.values():  # imports, connections, first allocations
                run()
            got = _measure(runs, server, args.repeat)
        finally:
            server.close()
    med = _table(got)
    if args.case == "full":
        _full_summary(med, cpus)
    else:
        _s3_summary(med)
    return 0


def _measure(runs: dict[str, Callable[[], object]], server: HttpServer | S3Target,
             repeat: int) -> dict[str, list[Sample]]:
    got: dict[str, list[Sample]] = {k: [] for k in runs}
    names = list(runs)
    for rep in range(repeat):
        for name in names[rep % len(names):] + names[:rep % len(names)]:
            server.reset()
            s0 = _server_cpu(server)
            c0, t0 = time.process_time(), time.perf_counter()
            runs[name]()
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            s1 = _server_cpu(server)
            requests = server.counters()["requests"]
            got[name].append((wall, cpu, None if s0 is None or s1 is None else s1 - s0,
                              requests))
    return got


def _table(got: dict[str, list[Sample]]) -> dict[str, Sample]:
    """Prints the medians; returns them."""
    med: dict[str, Sample] = {}
    print(f"{'':14}{'wall':>10}{'client CPU':>12}{'server CPU':>12}{'requests':>10}")
    for name, samples in got.items():
        wall = statistics.median(s[0] for s in samples)
        cpu = statistics.median(s[1] for s in samples)
        srv = [s[2] for s in samples if s[2] is not None]
        server = statistics.median(srv) if srv else None
        requests = statistics.median(s[3] for s in samples)
        med[name] = (wall, cpu, server, requests)
        print(f"{name:14}{wall * 1e3:8.0f} ms{cpu:10.2f} s"
              + (f"{server:10.2f} s" if server is not None else " " * 12)
              + f"{requests:10.0f}")
    return med


def _full_summary(med: dict[str, Sample], cpus: int) -> None:
    if "tensorstore" not in med:
        return
    ts_wall = med["tensorstore"][0]
    parts = max(med["fetch only"][0], med["decode only"][0])
    print(f"longer part alone / tensorstore: {parts / ts_wall:.2f}×")
    cpu, server = med["jnrrd"][1], med["jnrrd"][2] or 0.0
    print(f"(jnrrd client + server CPU) / {cpus} CPUs / tensorstore: "
          f"{(cpu + server) / cpus / ts_wall:.2f}×; jnrrd / tensorstore: "
          f"{med['jnrrd'][0] / ts_wall:.2f}×")


def _s3_summary(med: dict[str, Sample]) -> None:
    per = [f"{name} {m[2] / m[3] * 1e3:.1f} ms" for name, m in med.items()
           if m[2] is not None and m[3]]
    if per:
        print("server CPU per request: " + ", ".join(per))
    if "tensorstore" not in med:
        return
    ts_wall = med["tensorstore"][0]
    if "obstore alone" in med:
        print(f"obstore alone / tensorstore: {med['obstore alone'][0] / ts_wall:.2f}×")
    print(f"jnrrd / tensorstore: {med['jnrrd'][0] / ts_wall:.2f}×")


if __name__ == "__main__":
    sys.exit(main())
