"""Patch sampling, the access pattern of training on 3-D medical volumes: seeded random 96³ and
128³ patches of the 512³ zstd-3 volume (64³ tiles), locally and through S3 (moto, 0 ms),
jnrrd against tensorstore and zarr-python on the same chunks, and nnU-Net-style whole-array
readers (blosc2, NumPy memmap).

    python benchmarks/patches.py [--size 512] [--repeat 5] [--count 24] [--only 'patches/*']

Also in ``run_all.py``'s table (issue 32, item 5). Cases ``patches/<edge>/local`` and
``patches/<edge>/s3``: every repetition opens the data afresh and reads ``--count`` patches
(seeded random origins, the same for every system; the edge scales with ``--size``: 96 and
128 at 512³). The table's times are for all the patches; patches/s = count / time (this script
prints them after the table).

Datasets (written once, shared with ``remote.py``): ``int.jnrrd`` (internal 64³ zstd-3 tiles)
and ``zarr-c`` (zarr v3, the same chunks and codec, written by zarr-python; tensorstore's
``zarr3`` driver reads the same array). Contenders:

- ``jnrrd``: ``jnrrd.open(path)`` (a local file: no tile cache) and ``jnrrd cache 256 MiB``
  (``cache_bytes=256 MiB``: tiles shared by overlapping patches are decoded once);
- ``tensorstore`` (no cache) and ``tensorstore cache_pool 256 MiB``; ``zarr-python`` (no
  chunk cache of its own);
- ``blosc2 (nnU-Net)``: the C-order array as one blosc2 NDArray (``.b2nd``) the way nnU-Net
  v2 stores preprocessed cases: ZSTD level 8 with the shuffle filter, blocks that fit 80 % of a
  32 KiB L1 cache and chunks that fit 80 % of a 1.4 MiB L3 share, opened with
  ``mmap_mode="r"`` (blosc2's own threads: its default);
- ``numpy mmap``: an uncompressed ``.npy`` read through ``np.load(mmap_mode="r")`` and copied
  (nnU-Net v1's unpacked data): the ceiling with no decoding (it stores 1/0.707 the bytes).
- ``zstandard alone``: the decoder's floor, no jnrrd: for every patch, each tile it touches is
  read from ``int.jnrrd`` (``os.pread``; on Windows a seek and a read) and decoded by
  python-zstandard (jnrrd's decoder) up to the last plane the patch needs, as jnrrd decodes
  it, on as many threads as jnrrd uses; the pieces are dropped (no patch is assembled). jnrrd
  cannot be faster than this row.

S3 (``tests/s3_server.py`` in a child process, ``_servers.py``): ``jnrrd.open(url)`` (its
default 256 MiB cache) and ``cache_bytes=0``, tensorstore's ``s3`` kvstore with and without a
256 MiB ``cache_pool``, zarr-python's ``FsspecStore``; requests, MiB and client CPU s/GiB as in
``remote.py``.

Target (issue 32): locally, jnrrd's patches/s ≥ 1.2× tensorstore's (both without a cache, as
each opens by default).
"""

from __future__ import annotations

import functools
import math
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _volume
import peers
import remote
from _harness import Case, Contender, Target

EDGES = (96, 128)
COUNT = 24
SEED = 96
CACHE = remote.CACHE
TARGETS = {"local": [Target("jnrrd", "tensorstore", ">=", 1.2)]}
#: the S3 contenders kept (the sharded and external variants are in ``remote.py``)
S3_SYSTEMS = ("jnrrd", f"jnrrd cache {CACHE >> 20} MiB", "tensorstore",
              f"tensorstore cache_pool {CACHE >> 20} MiB", "zarr-python")


def patches(size: int, edge: int, count: int = COUNT) -> list:
    """``count`` seeded random patches (file axes) of ``edge`` scaled to a ``size``³ volume."""
    return _volume.random_regions(size, count=count, edge=max(8, edge * size // 512),
                                  seed=SEED + edge)


def _nbytes(regions: list, itemsize: int) -> int:
    return sum(math.prod(s.stop - s.start for s in r) for r in regions) * itemsize


# --- nnU-Net-style whole-array files ---------------------------------------------------------

def nnunet_blosc2_layout(shape: tuple[int, ...], itemsize: int, l1: int = 32768,
                         l3: int = 1441792, safety: float = 0.8
                         ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(chunks, blocks) in nnU-Net v2's manner: power-of-two blocks halved along their longest
    axis until they fit ``safety`` × L1, chunks doubled from the block along their shortest axis
    while they fit ``safety`` × L3 (each at most the array's extent)."""
    cap = [1 << max(0, math.ceil(math.log2(n))) for n in shape]
    blocks = list(cap)
    while math.prod(blocks) * itemsize > l1 * safety and max(blocks) > 1:
        i = blocks.index(max(blocks))
        blocks[i] //= 2
    chunks = list(blocks)
    while True:
        order = sorted((c, i) for i, c in enumerate(chunks) if c < cap[i])
        if not order:
            break
        i = order[0][1]
        if math.prod(chunks) * 2 * itemsize > l3 * safety:
            break
        chunks[i] *= 2
    return tuple(min(c, n) for c, n in zip(chunks, shape, strict=True)), tuple(
        min(b, n) for b, n in zip(blocks, shape, strict=True))


class WholeArrays:
    """The ``.b2nd`` and ``.npy`` copies of the C-order volume (written on first use)."""

    def __init__(self, arr: np.ndarray, root: Path) -> None:
        self.arr = arr
        self.b2nd = root / "ct.b2nd"
        self.npy = root / "ct.npy"
        self._done: dict[str, object] = {}

    def ensure(self, kind: str) -> Path:
        """The path of ``kind`` ("blosc2" or "npy"); a failure raises every time."""
        if kind not in self._done:
            try:
                self.npy.parent.mkdir(parents=True, exist_ok=True)
                (self._blosc2 if kind == "blosc2" else self._npy)()
                self._done[kind] = True
            except Exception as exc:  # the harness reports it as n/a
                self._done[kind] = exc
        if isinstance(self._done[kind], Exception):
            raise self._done[kind]  # type: ignore[misc]
        return self.b2nd if kind == "blosc2" else self.npy

    def _blosc2(self) -> None:
        blosc2 = peers._import("blosc2")
        chunks, blocks = nnunet_blosc2_layout(self.arr.shape, self.arr.itemsize)
        peers.remove(self.b2nd)
        blosc2.asarray(np.ascontiguousarray(self.arr), urlpath=str(self.b2nd), mode="w",
                       chunks=chunks, blocks=blocks,
                       cparams={"codec": blosc2.Codec.ZSTD, "clevel": 8})

    def _npy(self) -> None:
        np.save(self.npy, self.arr)


# --- readers (open afresh, read every patch) -------------------------------------------------

def _jnrrd(path: Path, regions: list, cache_bytes: int) -> Callable[[], list]:
    import jnrrd

    def run() -> list:
        with jnrrd.open(path, cache_bytes=cache_bytes) as vol:
            return [np.asarray(vol[r]) for r in regions]
    return run


def _ts(path: Path, regions: list, cached: bool) -> Callable[[], list]:
    ts = peers._import("tensorstore")

    def run() -> list:
        context = ts.Context({"cache_pool": {"total_bytes_limit": CACHE}}) if cached else None
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}
        store = ts.open(spec, read=True, context=context).result()
        return [store[_volume.c_order(r)].read().result() for r in regions]
    return run


def _zarr(path: Path, regions: list) -> Callable[[], list]:
    zarr = peers._import("zarr")

    def run() -> list:
        z = zarr.open_array(str(path), mode="r", zarr_format=3)
        return [z[_volume.c_order(r)] for r in regions]
    return run


def _blosc2(path: Path, regions: list) -> Callable[[], list]:
    blosc2 = peers._import("blosc2")

    def run() -> list:
        b = blosc2.open(str(path), mode="r", mmap_mode="r")
        return [b[_volume.c_order(r)] for r in regions]
    return run


def _npy(path: Path, regions: list) -> Callable[[], list]:
    def run() -> list:
        m = np.load(path, mmap_mode="r")
        return [np.array(m[_volume.c_order(r)]) for r in regions]
    return run


def _tile_jobs(path: Path, regions: list) -> list[list[tuple[int, int, int]]]:
    """Per patch, (offset, size, bytes needed) of each level-0 tile it touches: tiles in the
    file's order (first axis fastest), decoded up to the patch's last plane along the last."""
    import jnrrd

    h = jnrrd.read_header(path)
    tile, sizes = h["tile:sizes"], h["sizes"]
    counts = [-(-n // t) for n, t in zip(sizes, tile, strict=True)]
    offsets, nbytes = h["tile:offset_table"], h["tile:size_table"]
    plane = math.prod(tile[:-1]) * np.dtype(h["type"]).itemsize
    jobs = []
    for r in regions:
        spans = [range(s.start // t, (s.stop - 1) // t + 1) for s, t in zip(r, tile, strict=True)]
        one = []
        for tz in spans[2]:
            need = plane * min(tile[2], r[2].stop - tz * tile[2])
            for ty in spans[1]:
                for tx in spans[0]:
                    i = tx + counts[0] * (ty + counts[1] * tz)
                    one.append((offsets[i], nbytes[i], need))
        jobs.append(one)
    return jobs


def _stored_bytes(f: Any) -> Callable[[int, int], bytes]:
    """``read(offset, size)`` of the open binary file ``f`` from any thread: ``os.pread``
    where there is one (POSIX), else a seek and a read under a lock (Windows)."""
    if hasattr(os, "pread"):
        fd, pread = f.fileno(), os.pread
        return lambda offset, size: pread(fd, size, offset)
    lock = threading.Lock()

    def read(offset: int, size: int) -> bytes:
        with lock:
            f.seek(offset)
            return f.read(size)
    return read


def _zstd_alone(path: Path, regions: list) -> Callable[[], list]:
    """The ``zstandard alone`` row (module docstring): per patch, the count of tiles decoded."""
    from concurrent.futures import ThreadPoolExecutor

    import zstandard

    from jnrrd._platform import available_cpus

    jobs = _tile_jobs(path, regions)
    threads = available_cpus()  # jnrrd's default: IOSettings(threads=None)
    local = threading.local()  # one decompressor per thread, as jnrrd keeps

    def decode(read: Callable[[int, int], bytes], job: tuple[int, int, int]) -> bytearray:
        offset, size, need = job
        out = bytearray(need)
        view, got = memoryview(out), 0
        if not hasattr(local, "dctx"):
            local.dctx = zstandard.ZstdDecompressor()
        reader = local.dctx.stream_reader(read(offset, size))
        while got < need and (k := reader.readinto(view[got:])):
            got += k
        return out

    def run() -> list:
        with open(path, "rb") as f, ThreadPoolExecutor(threads) as pool:
            one_job = functools.partial(decode, _stored_bytes(f))
            return [len(list(pool.map(one_job, one))) for one in jobs]
    return run


# --- the cases -------------------------------------------------------------------------------

_WHOLE: dict[int, WholeArrays] = {}


def local_case(bench, edge: int, count: int = COUNT) -> Case:
    """``patches/<edge>/local``: every local reader on the same patches."""
    data = remote._datasets(bench)
    if id(bench) not in _WHOLE:
        _WHOLE[id(bench)] = WholeArrays(bench.arr, bench.workdir / "whole")
    whole = _WHOLE[id(bench)]
    regions = patches(bench.size, edge, count)

    def one(system: str, key: str, make: Callable[[Path], Callable[[], list]],
            checked: bool = True) -> Contender:
        runner: list[Callable[[], list]] = []
        where = {"jnrrd": lambda: data.root / "int.jnrrd", "zarr": lambda: data.root / "zarr-c",
                 "blosc2": lambda: whole.ensure("blosc2"), "npy": lambda: whole.ensure("npy")}

        def setup() -> None:
            if key in ("jnrrd", "zarr"):
                data.ensure(key)
            runner.append(make(where[key]()))

        check = remote._checker(data, "patches", regions, key != "jnrrd") if checked else None
        return Contender(system, setup=setup, run=lambda: runner[0](),
                         paths=lambda: [where[key]()], check=check)

    contenders = [
        one("jnrrd", "jnrrd", lambda p: _jnrrd(p, regions, 0)),
        one(f"jnrrd cache {CACHE >> 20} MiB", "jnrrd", lambda p: _jnrrd(p, regions, CACHE)),
        one("tensorstore", "zarr", lambda p: _ts(p, regions, False)),
        one(f"tensorstore cache_pool {CACHE >> 20} MiB", "zarr", lambda p: _ts(p, regions, True)),
        one("zarr-python", "zarr", lambda p: _zarr(p, regions)),
        one("blosc2 (nnU-Net)", "blosc2", lambda p: _blosc2(p, regions)),
        one("numpy mmap", "npy", lambda p: _npy(p, regions)),
        one("zstandard alone", "jnrrd", lambda p: _zstd_alone(p, regions), checked=False),
    ]
    return Case(f"patches/{edge}/local", contenders, _nbytes(regions, bench.arr.itemsize),
                TARGETS["local"])


def s3_case(bench, edge: int, count: int = COUNT) -> Case:
    """``patches/<edge>/s3``: the same patches through moto's S3 at 0 ms."""
    size = min(bench.size, remote.S3_MAX_SIZE)
    regions = patches(size, edge, count)
    _, contenders = remote.s3_contenders(bench, "patches", regions=regions,
                                         systems=lambda name: name in S3_SYSTEMS)
    return Case(f"patches/{edge}/s3", contenders, _nbytes(regions, bench.arr.itemsize), [],
                subject=f"jnrrd cache {CACHE >> 20} MiB")


def case_builders(count: int = COUNT) -> dict[str, Callable[[Any], Case]]:
    """Every patch case name with the function that builds it."""
    out: dict[str, Callable[[Any], Case]] = {}
    for edge in EDGES:
        out[f"patches/{edge}/local"] = functools.partial(local_case, edge=edge, count=count)
        out[f"patches/{edge}/s3"] = functools.partial(s3_case, edge=edge, count=count)
    return out


CASES = case_builders()


def main() -> int:
    """Command-line entry point: the patch cases alone, then patches/s per system."""
    import json

    import run_all

    p = run_all.parser(__doc__)
    p.add_argument("--only", help="comma-separated case names or patterns")
    p.add_argument("--count", type=int, default=COUNT, help="patches per repetition")
    args = p.parse_args()
    status = run_all.run(case_builders(args.count), args, "jnrrd patch sampling")
    out = Path(args.json) if args.json else _volume.CACHE_DIR / f"results-{args.size}.json"
    print(f"patches/s ({args.count} patches per repetition):")
    for row in json.loads(out.read_text())["rows"]:
        if row["median"] and not row["error"]:
            print(f"  {row['case']:<20} {row['system']:<34} {args.count / row['median']:8.1f}")
    return status


if __name__ == "__main__":
    sys.exit(main())
