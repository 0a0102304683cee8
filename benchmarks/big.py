"""Larger than memory: write a 32 GiB uint16 volume block by block, then read parts of it.

    python benchmarks/big.py [--gib 32] [--regions 16] [--repeat 1] [--dir DIR] [--keep]

Issue 18, part 3. Not part of CI (at the default size it writes ~20 GB and takes minutes).

The volume (header axis order, axis 0 fastest) is 2048 x 2048 x (128·G) uint16 voxels, G GiB
(``--gib``; 32 gives 2048 x 2048 x 4096). It is never held whole: :class:`Field` is an
array-like (``shape``, ``dtype``, ``__getitem__``) whose every z-plane is computed on demand
from a seeded function: a smooth 2-D field plus a z ramp plus 6 bits of noise from a
seeded pool entered at a seeded offset per plane, so any region always has the same values
and zstd has realistic work (64³ zstd-3 tiles store ~0.70 of raw, like the CT-like volume of
``_volume.py``). The user's API for such data is the plain ``jnrrd.write(path, field,
tile=64, compression="zstd", compression_level=3, levels=4)`` (average pyramid): the writer
reads the source one row of tiles (64 planes) at a time.

Phases (the timed ones each in a fresh interpreter, so all start from the same clean memory):

1. **bare loops** (the references): the same 64-plane slabs taken from the same ``Field``,
   every 64³ tile cut out in file order and zstd-3 encoded (``zstandard.ZstdCompressor(level=3,
   write_content_size=True)``, one per thread, what the writer's tile encoder uses) by a plain
   two-thread ``ThreadPoolExecutor``; no file, no tables. ``bare`` encodes level 0 only;
   ``bare-all`` encodes every tile the file holds: level 0 and levels 1-3, each level's planes
   the rounded 2×2×2 means of the level above (``downsample``, computed in the main thread
   while the pool encodes), padded to 64³ at the end as the writer pads. Source generation
   alone is timed first, in the same process.
2. **write**: ``jnrrd.write`` as above (durable: ``fsync`` before the rename). Peak RSS: the
   kernel's watermark ``VmHWM`` of ``/proc/self/status`` (reset right before the write through
   ``/proc/self/clear_refs``), cross-checked by a sampler thread reading ``VmRSS`` every
   20 ms. The ratio is of the medians (per-repetition ratios are printed too).
3. **regions**: the file is evicted from the page cache (``posix_fadvise(DONTNEED)``), then
   ``--regions`` seeded random 128³ regions are read through one ``jnrrd.open`` (cold), then
   read again (warm); every region is compared with the ``Field``.
4. **coarsest level**: evicted again, ``jnrrd.read(path, level=3)``; the bytes it touched are
   the process's ``rchar`` of ``/proc/self/io`` (what jnrrd asked ``read``/``pread`` for: it
   reads the header, then ``pread``s each tile), its ``read_bytes`` (what the disk delivered,
   the kernel's read-ahead included), and the file's pages resident afterwards (``mincore``
   over a map of the file), split into the header, the kernel's read-ahead window just past
   it (``read_ahead_kb`` of the device: the header is read sequentially), the coarsest level's
   byte span (from ``tile_locations()``) and everything else. "Only that level's bytes" is
   met when nothing else is resident, ``rchar`` is at most the header plus the span (+64 KiB
   for other files read meanwhile) and ``read_bytes`` at most that plus the window. A
   16³ corner of the level is compared with ``jnrrd.pyramid.region.downsample`` of the field.

Targets (printed met / not met): peak RSS ≤ 2 GiB during the write; write throughput ≥ 0.85×
the bare loop's on the same tiles (``bare-all``: the file's tiles, the pyramid's included; the
level-0 loop's ratio is printed too); the coarsest-level read touches only that level's bytes.
Throughputs are MB/s of raw level-0 input. With ``--repeat R`` the three phases run R times
each, rotating which goes first.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import mmap
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import zstandard

import jnrrd
from jnrrd.pyramid.region import downsample

XY = 2048
TILE = 64
LEVELS = 4
ZSTD_LEVEL = 3
#: the bare loops (phase name → levels encoded): level 0 only; every tile the file holds
BARE = {"bare": 1, "bare-all": LEVELS}
NOISE_MASK = 63


# --- the source --------------------------------------------------------------------------------

class Field:
    """A seeded uint16 volume of shape ``(XY, XY, nz)`` (header order), computed on demand.

    Voxel ``(x, y, z) = base(x, y) + ramp(z) + noise[offset(z) + x + XY·y]``: ``base`` a smooth
    2-D field, ``ramp`` a slow function of z, ``noise`` a seeded pool of 24 Mi 6-bit values
    (``PCG64(seed)``) entered at a seeded random offset per plane (no two planes of a tile share
    a run of noise). Every plane is reproducible alone and costs two passes over its memory.
    """

    POOL = 24 << 20

    def __init__(self, nz: int, seed: int = 7, xy: int = XY) -> None:
        self.shape = (xy, xy, nz)
        self.dtype = np.dtype(np.uint16)
        self.ndim = 3
        self.nbytes = xy * xy * nz * 2
        self.seed = seed
        x = np.arange(xy, dtype=np.float32)[:, None]
        y = np.arange(xy, dtype=np.float32)[None, :]
        base = (20000 + 2250 * np.sin(x / 157.0) * np.cos(y / 211.0)
                + 1500 * np.sin((x + 2 * y) / 523.0) + 750 * np.cos((3 * x - y) / 97.0))
        self.base = np.asfortranarray(base.astype(np.uint16))
        z = np.arange(nz, dtype=np.float64)
        self.ramp = (4000 + 3000 * np.sin(z / 300.0)).astype(np.uint16)
        rng = np.random.Generator(np.random.PCG64(seed))
        self.noise = rng.bit_generator.random_raw(self.POOL // 4).view(np.uint16) & NOISE_MASK
        self.offsets = rng.integers(0, self.POOL - xy * xy, size=nz)

    def plane(self, z: int, out: np.ndarray) -> None:
        """Compute plane ``z`` into ``out`` (an F-contiguous ``(xy, xy)`` uint16 array)."""
        n = self.shape[0] * self.shape[1]
        o = int(self.offsets[z])
        noise = self.noise[o:o + n].reshape(self.shape[:2], order="F")
        np.add(noise, self.base, out=out)
        out += self.ramp[z]

    def __getitem__(self, key: tuple[slice, ...]) -> np.ndarray:
        key = key if isinstance(key, tuple) else (key,)
        key = key + (slice(None),) * (3 - len(key))
        (x0, x1, _), (y0, y1, _), (z0, z1, _) = (k.indices(n) for k, n in zip(key, self.shape,
                                                                              strict=True))
        full = (x0, x1, y0, y1) == (0, self.shape[0], 0, self.shape[1])
        out = np.empty((x1 - x0, y1 - y0, z1 - z0), self.dtype, order="F")
        scratch = None if full else np.empty(self.shape[:2], self.dtype, order="F")
        for k, z in enumerate(range(z0, z1)):
            if full:
                self.plane(z, out[:, :, k])
            else:
                self.plane(z, scratch)
                out[:, :, k] = scratch[x0:x1, y0:y1]
        return out

    def slabs(self) -> list[tuple[int, int]]:
        """The rows of tiles along z, as the writer reads them."""
        nz = self.shape[2]
        return [(z, min(z + TILE, nz)) for z in range(0, nz, TILE)]


# --- memory and I/O counters -------------------------------------------------------------------

def _status(field: str) -> int:
    """A ``kB`` field of ``/proc/self/status``, in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def reset_peak() -> bool:
    """Reset the peak-RSS watermark (``VmHWM``) to the current RSS; False if not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def io_counters() -> dict[str, int]:
    """``/proc/self/io``: ``rchar`` (bytes the process asked ``read``/``pread`` for) and
    ``read_bytes`` (bytes it caused to be fetched from storage, read-ahead included)."""
    with open("/proc/self/io") as f:
        return {k: int(v) for k, v in (line.split(":") for line in f)}


def read_ahead(path: Path) -> int:
    """The kernel's read-ahead window for ``path``'s device, in bytes (128 KiB if unknown)."""
    dev = path.stat().st_dev
    try:
        kb = Path(f"/sys/class/bdi/{os.major(dev)}:{os.minor(dev)}/read_ahead_kb").read_text()
        return int(kb) * 1024
    except (OSError, ValueError):
        return 128 << 10


class RssSampler:
    """A thread reading ``VmRSS`` every ``interval`` seconds; ``peak`` is the largest seen."""

    def __init__(self, interval: float = 0.02) -> None:
        self.interval, self.peak = interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _status("VmRSS"))
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def evict(path: Path) -> None:
    """Drop ``path`` from the page cache (flushed first)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def resident_pages(path: Path) -> np.ndarray:
    """Per page of ``path``: whether it is in the page cache (``mincore(2)`` over a shared
    read-only map made through libc, which touches no page), as a bool array."""
    size = path.stat().st_size
    page = mmap.PAGESIZE
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    vec = np.zeros((size + page - 1) // page, np.uint8)
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap")
        try:
            if libc.mincore(ctypes.c_void_p(addr), size, vec.ctypes.data) != 0:
                raise OSError(ctypes.get_errno(), "mincore")
        finally:
            libc.munmap(ctypes.c_void_p(addr), size)
    finally:
        os.close(fd)
    return (vec & 1).astype(bool)


# --- phases ------------------------------------------------------------------------------------

def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def generate_only(field: Field) -> float:
    """Seconds to produce every slab of ``field`` (what both writers pay for the source)."""
    t0 = time.perf_counter()
    for z0, z1 in field.slabs():
        field[:, :, z0:z1]
    return time.perf_counter() - t0


def _tiles(a: np.ndarray):
    """The 64³ tiles of an F-ordered (x, y, z) block, in file order; tiles past the block's
    end padded with zeros to 64³, as the writer stores them."""
    nx, ny, nz = a.shape
    for z in range(0, nz, TILE):
        for y in range(0, ny, TILE):
            for x in range(0, nx, TILE):
                tile = a[x:x + TILE, y:y + TILE, z:z + TILE]
                if tile.shape != (TILE,) * 3:
                    padded = np.zeros((TILE,) * 3, a.dtype, order="F")
                    padded[tuple(slice(0, n) for n in tile.shape)] = tile
                    tile = padded
                yield tile


def bare_loop(field: Field, threads: int = 2, levels: int = 1) -> tuple[float, int]:
    """The reference: every 64³ tile of every slab, in file order, zstd-3 encoded by a plain
    two-thread pool (one compressor per thread); nothing stored. With ``levels`` > 1 also
    every tile of levels 1 .. levels-1, the pyramid the file holds: each level's planes are
    the rounded 2×2×2 means of the level above (``jnrrd.pyramid.region.downsample``), cut
    into tiles once a row of 64 planes (or the volume's last) is there. (seconds, encoded
    bytes)"""
    local = threading.local()

    def encode(tile: np.ndarray) -> int:
        c = getattr(local, "c", None)
        if c is None:
            c = local.c = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_content_size=True)
        return len(c.compress(memoryview(np.asfortranarray(tile).T).cast("B")))

    total = 0
    slabs = field.slabs()
    carry: list[np.ndarray | None] = [None] * levels  # level-k planes waiting for a row
    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        for i, (z0, z1) in enumerate(slabs):
            slab = field[:, :, z0:z1]
            jobs = [pool.map(encode, _tiles(slab))]  # submitted: the pyramid overlaps them
            below = slab
            for k in range(1, levels):
                below = downsample(below, (2, 2, 2))
                got = carry[k]
                carry[k] = below if got is None else np.concatenate((got, below), axis=2)
                if carry[k].shape[2] >= TILE or i == len(slabs) - 1:
                    jobs.append(pool.map(encode, _tiles(carry[k])))
                    carry[k] = None
            total += sum(sum(job) for job in jobs)
            del slab, below, jobs
            if (i + 1) * 10 // len(slabs) > i * 10 // len(slabs):  # a line per tenth
                t = time.perf_counter() - t0
                _log(f"bare (levels {levels}): {i + 1}/{len(slabs)} slabs, {t:.0f} s, "
                     f"~{(i + 1) / len(slabs) * field.nbytes / t / 1e6:.0f} MB/s")
    return time.perf_counter() - t0, total


def write(field: Field, path: Path) -> dict:
    """``jnrrd.write`` of ``field``; seconds, peak RSS (watermark and sampled), file size."""
    if path.exists():
        path.unlink()
    before = _status("VmRSS")
    exact = reset_peak()
    step = [0.1]

    def progress(done: int, total: int) -> None:
        # partial figures in the log (a run cut short still tells how far it got, how fast)
        if done >= step[0] * total:
            step[0] = (done * 10 // total + 1) / 10
            t = time.perf_counter() - t0
            rate = done / total * field.nbytes / t / 1e6
            _log(f"write: {done}/{total} tiles (all levels), {t:.0f} s, ~{rate:.0f} MB/s, "
                 f"peak RSS so far {_gib(sampler.peak)}")

    with RssSampler() as sampler:
        t0 = time.perf_counter()
        jnrrd.write(path, field, tile=TILE, compression="zstd", compression_level=ZSTD_LEVEL,
                    levels=LEVELS, progress=progress)
        seconds = time.perf_counter() - t0
    return {"seconds": seconds, "hwm": _status("VmHWM") if exact else None,
            "sampled": sampler.peak, "before": before, "size": path.stat().st_size}


def level_spans(path: Path) -> tuple[int, list[dict]]:
    """(end of the header, per level: byte span and stored bytes of its tiles)."""
    out = []
    with jnrrd.open(path) as vol:
        for k, lv in enumerate(vol.levels):
            locs = [loc for _, loc in lv.tile_locations() if loc is not None]
            lo = min(loc.offset for loc in locs)
            hi = max(loc.offset + loc.size for loc in locs)
            out.append({"level": k, "shape": tuple(lv.shape), "lo": lo, "hi": hi,
                        "stored": sum(loc.size for loc in locs), "tiles": len(locs)})
    return min(s["lo"] for s in out), out


def read_regions(field: Field, path: Path, n: int, seed: int, size: int = 128) -> dict:
    """Cold then warm reads of ``n`` seeded random ``size``³ regions; each checked."""
    rng = np.random.default_rng(seed)
    size = min(size, *field.shape)
    shape = np.array(field.shape)
    origins = [tuple(int(v) for v in rng.integers(0, shape - size + 1)) for _ in range(n)]
    keys = [tuple(slice(o, o + size) for o in origin) for origin in origins]
    evict(path)
    times: dict[str, list[float]] = {"cold": [], "warm": []}
    wrong = 0
    with jnrrd.open(path) as vol:
        for mode in ("cold", "warm"):
            for key in keys:
                t0 = time.perf_counter()
                got = vol[key]
                times[mode].append(time.perf_counter() - t0)
                if mode == "cold" and not np.array_equal(got, field[key]):
                    wrong += 1
    return {"times": times, "wrong": wrong, "nbytes": size ** 3 * 2, "edge": size,
            "origins": origins}


def read_coarsest(field: Field, path: Path) -> dict:
    """Cold ``jnrrd.read(path, level=coarsest)``: time, bytes fetched, pages touched."""
    header_end, spans = level_spans(path)
    top = spans[-1]
    ra = read_ahead(path)
    evict(path)
    io0 = io_counters()
    t0 = time.perf_counter()
    arr, _ = jnrrd.read(path, level=top["level"])
    seconds = time.perf_counter() - t0
    io1 = io_counters()
    pages = resident_pages(path)
    page = mmap.PAGESIZE
    starts = np.arange(pages.size, dtype=np.int64) * page
    in_header = starts < header_end
    # the header is read sequentially: the kernel reads up to its window beyond it
    in_ahead = ~in_header & (starts < header_end + ra)
    in_level = (starts + page > top["lo"]) & (starts < top["hi"])
    outside = pages & ~in_header & ~in_level & ~in_ahead
    scale = 2 ** (LEVELS - 1)
    n = min(16, *arr.shape)
    expect = downsample(field[:n * scale, :n * scale, :n * scale], (scale,) * 3, "average")
    return {"seconds": seconds, "shape": arr.shape, "nbytes": arr.nbytes,
            "asked": io1["rchar"] - io0["rchar"], "fetched": io1["read_bytes"] - io0["read_bytes"],
            "header_end": header_end, "spans": spans, "read_ahead": ra,
            "resident_header": int((pages & in_header).sum()) * page,
            "resident_ahead": int((pages & in_ahead & ~in_level).sum()) * page,
            "resident_level": int((pages & in_level).sum()) * page,
            "resident_outside": int(outside.sum()) * page,
            "outside_ranges": _ranges(np.flatnonzero(outside), page)[:5],
            "correct": bool(np.array_equal(arr[:n, :n, :n], expect))}


def _ranges(idx: np.ndarray, page: int) -> list[tuple[int, int]]:
    """Consecutive page indices as byte ranges."""
    if not idx.size:
        return []
    cuts = np.flatnonzero(np.diff(idx) != 1) + 1
    return [(int(g[0]) * page, (int(g[-1]) + 1) * page) for g in np.split(idx, cuts)]


# --- report ------------------------------------------------------------------------------------

def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def _status_line(name: str, ok: bool, detail: str) -> str:
    return f"  {name:<66} {'met' if ok else 'not met':<8} {detail}"


def report(args: argparse.Namespace, field: Field, runs: dict[str, list[dict]], regions: dict,
           top: dict) -> int:
    """Print the results and the targets; the number of targets not met."""
    raw = field.nbytes
    bare, bare_all, writes = runs["bare"], runs["bare-all"], runs["write"]
    gen_s = statistics.median(b["gen"] for b in bare)
    bare_s = statistics.median(b["seconds"] for b in bare)
    all_s = statistics.median(b["seconds"] for b in bare_all)
    write_s = statistics.median(w["seconds"] for w in writes)
    pairs = [b["seconds"] / w["seconds"] for b, w in zip(bare_all, writes, strict=True)]
    hwm = max((w["hwm"] or w["sampled"]) for w in writes)
    sampled = max(w["sampled"] for w in writes)
    size = writes[-1]["size"]
    print(f"volume: {field.shape} uint16 (header order), {_gib(raw)} raw; 64³ zstd-{ZSTD_LEVEL} "
          f"tiles, {LEVELS}-level average pyramid; file {_gib(size)} "
          f"({size / raw:.3f} of raw, all levels); bare loop encoded level 0 to "
          f"{bare[-1]['encoded'] / raw:.3f} of raw")
    print(f"cpus: {os.cpu_count()}, load average before: {args.load}, "
          f"repetitions: {len(writes)} (medians; each phase in a fresh process)")
    print(f"source generation alone   {gen_s:8.2f} s  {raw / gen_s / 1e6:8.1f} MB/s")
    print(f"bare 2-thread encode loop {bare_s:8.2f} s  {raw / bare_s / 1e6:8.1f} MB/s  "
          f"(generation + zstd-{ZSTD_LEVEL} of every level-0 tile, no file; peak RSS "
          f"{_gib(max(b['hwm'] for b in bare))})")
    print(f"bare loop, every tile     {all_s:8.2f} s  {raw / all_s / 1e6:8.1f} MB/s  "
          f"(the same and levels 1-{LEVELS - 1} as 2×2×2 means, every tile the file holds, "
          f"{bare_all[-1]['encoded'] / raw:.3f} of raw; peak RSS "
          f"{_gib(max(b['hwm'] for b in bare_all))})")
    samples = ", ".join(f"{w['seconds']:.2f}" for w in writes)
    print(f"jnrrd.write               {write_s:8.2f} s  {raw / write_s / 1e6:8.1f} MB/s  "
          f"(all samples: {samples} s)")
    print(f"peak RSS during the write: VmHWM {_gib(hwm)} (sampled VmRSS max {_gib(sampled)}; "
          f"RSS before {_gib(writes[-1]['before'])})")
    cold, warm = regions["times"]["cold"], regions["times"]["warm"]
    verdict = (f"{regions['wrong']} WRONG" if regions["wrong"]
               else "all equal to the source")
    print(f"{len(cold)} random {regions['edge']}³ regions: cold median "
          f"{statistics.median(cold) * 1e3:.1f} ms "
          f"(min {min(cold) * 1e3:.1f}, max {max(cold) * 1e3:.1f}), warm median "
          f"{statistics.median(warm) * 1e3:.1f} ms; "
          f"{verdict}")
    lv = top["spans"][-1]
    print(f"coarsest level {lv['level']} {top['shape']}: cold jnrrd.read "
          f"{top['seconds'] * 1e3:.1f} ms; level stored {_mb(lv['stored'])} in {lv['tiles']} "
          f"tiles at "
          f"[{lv['lo']}, {lv['hi']}) of a {_mb(size)} file; header {_mb(top['header_end'])}")
    print(f"  asked for (rchar: read/pread) {_mb(top['asked'])}; fetched from disk (read_bytes)"
          f" {_mb(top['fetched'])}; resident afterwards: header {_mb(top['resident_header'])}, "
          f"kernel read-ahead past it {_mb(top['resident_ahead'])} (window "
          f"{top['read_ahead'] >> 10} KiB), level span {_mb(top['resident_level'])}, elsewhere "
          f"{_mb(top['resident_outside'])} {top['outside_ranges'] or ''}; 16³ corner "
          f"{'equals' if top['correct'] else 'DIFFERS from'} downsample(source)")
    for s in top["spans"][:-1]:
        print(f"  (level {s['level']} {s['shape']}: {_mb(s['stored'])} at [{s['lo']}, {s['hi']}))")
    span = top["header_end"] + lv["hi"] - lv["lo"]
    slack = 64 << 10  # rchar also counts reads of other files (e.g. /sys) during the call
    only = (top["resident_outside"] == 0 and top["asked"] <= span + slack
            and top["fetched"] <= span + top["read_ahead"])
    ratio = all_s / write_s
    print(f"write / bare loop speed: {ratio:.2f}x the loop over every tile the file holds (ratio "
          f"of medians; per repetition {', '.join(f'{p:.2f}' for p in pairs)}); "
          f"{bare_s / write_s:.2f}x the level-0 loop")
    if all("cpu" in r for r in bare + bare_all + writes):
        cpu = {k: statistics.median(r["cpu"] for r in v) for k, v in runs.items()}
        print(f"CPU seconds (all threads): level-0 loop {cpu['bare']:.1f}, every-tile loop "
              f"{cpu['bare-all']:.1f}, write {cpu['write']:.1f}: the write needs "
              f"{cpu['write'] / cpu['bare-all']:.2f}x the every-tile loop's CPU (on 2 saturated "
              f"cores that bounds the speed ratio at {cpu['bare-all'] / cpu['write']:.2f}x)")
    checks = [
        ("peak RSS <= 2 GiB during the write", hwm <= 2 * 2**30, _gib(hwm)),
        ("write throughput >= 0.85x the bare encode loop on the same tiles", ratio >= 0.85,
         f"{ratio:.2f}x"),
        ("coarsest-level read touches only that level's bytes", only,
         f"asked {_mb(top['asked'])}, fetched {_mb(top['fetched'])} vs header + level span "
         f"{_mb(span)}; resident elsewhere {_mb(top['resident_outside'])}"),
        ("results correct (regions, coarsest level)", not regions["wrong"] and top["correct"],
         ""),
    ]
    print("targets:")
    for name, ok, detail in checks:
        print(_status_line(name, ok, detail))
    return sum(not ok for _, ok, _ in checks)


def _phase(args: argparse.Namespace, path: Path) -> dict:
    """Run one timed phase in this (fresh) process; what the parent gets as JSON (with the
    CPU seconds of the timed part, all threads: a figure less sensitive than wall time to
    what other processes on the machine do meanwhile)."""
    field = Field(_nz(args.gib), seed=args.seed)
    if args.phase in BARE:
        gen = generate_only(field)
        reset_peak()
        cpu = time.process_time()
        seconds, encoded = bare_loop(field, levels=BARE[args.phase])
        return {"gen": gen, "seconds": seconds, "encoded": encoded, "hwm": _status("VmHWM"),
                "cpu": time.process_time() - cpu}
    cpu = time.process_time()
    out = write(field, path)
    return {**out, "cpu": time.process_time() - cpu}


def _child(phase: str, args: argparse.Namespace, path: Path) -> dict:
    """``_phase`` in a fresh interpreter (each starts from the same clean memory)."""
    cmd = [sys.executable, __file__, "--phase", phase, "--gib", str(args.gib),
           "--seed", str(args.seed), "--dir", str(path.parent)]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _nz(gib: float) -> int:
    return max(TILE, round(gib * 128 / TILE) * TILE)


def main() -> int:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=32.0,
                    help="raw size in GiB (2048 x 2048 x 128·G voxels, z a multiple of 64)")
    ap.add_argument("--regions", type=int, default=16, help="random 128³ regions to read")
    ap.add_argument("--repeat", type=int, default=1,
                    help="the bare loops and the write this many times each, rotating (medians)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--dir", type=Path, default=None,
                    help="where the file goes (default: a temporary directory under the "
                         "current one, removed at the end)")
    ap.add_argument("--keep", action="store_true", help="keep the file (and the directory)")
    ap.add_argument("--first", choices=("bare", "bare-all", "write"), default="write",
                    help="the phase that goes first in the first repetition (default write)")
    ap.add_argument("--phase", choices=("bare", "bare-all", "write"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phase:
        print(json.dumps(_phase(args, args.dir / "big.jnrrd")))
        return 0
    field = Field(_nz(args.gib), seed=args.seed)
    made = args.dir is None
    where = Path(tempfile.mkdtemp(prefix="jnrrd-big-", dir=".")) if made else args.dir
    where.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(where).free
    if free < field.nbytes * 1.2:
        print(f"not enough space in {where}: {_gib(free)} free, up to "
              f"{_gib(field.nbytes * 1.2)} needed", file=sys.stderr)
        return 2
    args.load = " ".join(f"{v:.1f}" for v in os.getloadavg())
    path = where / "big.jnrrd"
    try:
        _log(f"{field.shape} = {_gib(field.nbytes)} into {path} ({_gib(free)} free)")
        runs: dict[str, list[dict]] = {"bare": [], "bare-all": [], "write": []}
        order = list(runs)
        order = order[order.index(args.first):] + order[:order.index(args.first)]
        for r in range(args.repeat):
            # rotate which phase goes first (none always pays for another's leftovers)
            for phase in order[r % len(order):] + order[:r % len(order)]:
                res = _child(phase, args, path)
                runs[phase].append(res)
                _log(f"{phase} {res['seconds']:.2f} s, peak RSS {_gib(res['hwm'] or 0)}")
        regions = read_regions(field, path, args.regions, args.seed)
        _log("regions read")
        top = read_coarsest(field, path)
        _log("coarsest level read")
        return 1 if report(args, field, runs, regions, top) else 0
    finally:
        if not args.keep:
            if made:
                shutil.rmtree(where, ignore_errors=True)
            elif path.exists():
                path.unlink()


if __name__ == "__main__":
    sys.exit(main())
