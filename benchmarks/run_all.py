"""Run every benchmark case and print ONE table of medians, MB/s and ratios against targets.

    python benchmarks/run_all.py [--size 512] [--repeat 5] [--only CASE[,CASE...]] [--cold]
                                 [--modes warm,kept,fresh]

Cases (``--only`` takes names or shell patterns, e.g. ``read/*``): write/{raw,zstd,lz4},
read/{raw,zstd,lz4}, region/{raw,zstd,lz4}, regions32/{raw,zstd,lz4}, header/1e6-tiles,
untiled-read/{raw,zstd,gzip}, untiled-region/raw, gzip-tiles/read, gzip-write/{time,size},
gzip-nrrd-write/{time,size} (``gzip_write.py``, against SimpleITK),
pyramid/{average,mode}, memory/read-zstd,
viewer/{scroll-zoom,cached-slice-x,cached-slice-y,cached-slice-z} (``viewer.py``),
remote/{open,full,region,regions50,level2}/{0,20}ms, remote/header-1e6/{requests,bytes},
remote/region/bytes, remote/cpu/full/20ms, remote-s3/{open,full,region,regions50,level2}/0ms,
remote-s3/cpu/full/0ms (``remote.py``), patches/{96,128}/{local,s3} (``patches.py``).
Datasets go to a scratch directory under ``~/.cache/jnrrd-bench/`` (removed afterwards), the
JSON results to ``~/.cache/jnrrd-bench/results-<size>.json``; nothing is written in the repo.
``--modes``: ``warm`` (default: results dropped one by one), ``kept`` (results held, so every
read needs fresh memory) and ``fresh`` (each read in a new process) for the read and region
cases (benchmarks/_harness.py).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as h
import _volume
import gzip_cases
import gzip_write
import patches
import peers
import remote
import viewer
from _harness import Case, Contender, Target

LABELS = {"jnrrd": "jnrrd", "jnrrd-untiled": "jnrrd", "jnrrd-nosync": "jnrrd durable=False",
          "zarr": "zarr-python",
          "tensorstore": "tensorstore", "pynrrd": "pynrrd", "numpy": "numpy"}
CODECS = ("raw", "zstd", "lz4")
TILED_PEERS = ("zarr", "tensorstore")


def label(key: str, codec: str | None = None) -> str:
    """Display name of a system (``bare zstd loop`` for the bare loops)."""
    if key == "bare":
        return peers.BareLoop.NAMES.get(codec or "", f"bare {codec} loop")
    return LABELS[key]


class Bench:
    """Shared state of a run: the volumes, the systems and the datasets written once."""

    def __init__(self, size: int, workdir: Path) -> None:
        self.size = size
        self.workdir = workdir
        self.arr = _volume.ct_volume(size)
        self._labels: np.ndarray | None = None
        self._systems: dict[tuple[str, str | None], object] = {}
        self._data: dict[tuple[str, str], object] = {}

    @property
    def labels(self) -> np.ndarray:
        """The label volume (loaded on first use)."""
        if self._labels is None:
            self._labels = _volume.label_volume(self.size)
        return self._labels

    def system(self, key: str, codec: str | None = None) -> peers.System:
        """The system ``key``; a construction error is kept and raised again on each use."""
        k = (key, codec if key == "bare" else None)
        if k not in self._systems:
            try:
                self._systems[k] = peers.make(key, codec)
            except Exception as exc:
                self._systems[k] = exc
        got = self._systems[k]
        if isinstance(got, Exception):
            raise got
        return got

    def dataset(self, key: str, codec: str) -> Path:
        """The path of ``self.arr`` stored by ``key`` with ``codec``, written on first use."""
        k = (key, codec)
        if k not in self._data:
            path = self.workdir / f"{key}-{codec}{'.jnrrd' if 'jnrrd' in key else ''}"
            try:
                self.system(key, codec).write(path, self.arr, codec)
                self._data[k] = path
            except Exception as exc:
                self._data[k] = exc
        got = self._data[k]
        if isinstance(got, Exception):
            raise got
        return got

    # --- contenders ---------------------------------------------------------------------------

    def expected(self, key: str, codec: str | None, region=None) -> np.ndarray:
        """What ``key`` must return for ``region`` (file axes) of the volume."""
        system = self.system(key, codec)
        view = system.view(self.arr)
        return view if region is None else view[system.region(region)]

    def write(self, key: str, codec: str) -> Contender:
        """Write the whole volume (the previous output is removed first, untimed)."""
        path = self.workdir / f"w-{key}-{codec}{'.jnrrd' if 'jnrrd' in key else ''}"
        return Contender(
            label(key, codec),
            setup=lambda: self.system(key, codec).check_codec(codec),
            before=lambda: peers.remove(path),
            run=lambda: self.system(key, codec).write(path, self.arr, codec))

    def read(self, key: str, codec: str) -> Contender:
        """Open and read the whole volume."""
        return Contender(
            label(key, codec),
            setup=lambda: self.dataset(key, codec),
            paths=lambda: [self.dataset(key, codec)],
            run=lambda: self.system(key, codec).read(self.dataset(key, codec)),
            check=lambda out: np.array_equal(out, self.expected(key, codec)),
            fresh=lambda: h.fresh_time(key, codec, self.dataset(key, codec)))

    def region(self, key: str, codec: str) -> Contender:
        """Open and read the 200³ region at (37, 111, 203) (scaled with the size)."""
        region = _volume.scaled_region(self.size)
        return Contender(
            label(key, codec),
            setup=lambda: self.dataset(key, codec),
            paths=lambda: [self.dataset(key, codec)],
            run=lambda: self.system(key, codec).read_region(self.dataset(key, codec), region),
            check=lambda out: np.array_equal(out, self.expected(key, codec, region)),
            fresh=lambda: h.fresh_time(key, codec, self.dataset(key, codec), region))

    def regions(self, key: str, codec: str) -> Contender:
        """Open once and read 200 seeded random 32³ regions one after the other."""
        regions = _volume.random_regions(self.size)

        def check(outs: list) -> bool:
            return len(outs) == len(regions) and all(
                np.array_equal(o, self.expected(key, codec, r))
                for o, r in zip(outs, regions, strict=True))

        return Contender(
            label(key, codec),
            setup=lambda: self.dataset(key, codec),
            paths=lambda: [self.dataset(key, codec)],
            run=lambda: self.system(key, codec).read_regions(self.dataset(key, codec), regions),
            check=check)

    def memory(self, key: str, codec: str) -> Contender:
        """Peak RSS growth of a full read in a fresh process."""
        return Contender(
            label(key, codec),
            setup=lambda: self.dataset(key, codec),
            measure=lambda: h.peak_memory(key, codec, self.dataset(key, codec)))

    def pyramid(self, method: str) -> list[Contender]:
        """jnrrd's 3-level raw pyramid write against the NumPy baseline (levels + tofile)."""
        data = self.arr if method == "average" else self.labels
        jpath = self.workdir / f"pyramid-{method}.jnrrd"
        npath = self.workdir / f"pyramid-{method}.raw"

        def baseline() -> None:
            levels = h.numpy_pyramid(method)(data, 3)
            with open(npath, "wb") as f:
                for level in [data, *levels]:
                    level.tofile(f)

        jnrrd = peers.Jnrrd
        return [
            Contender("jnrrd", before=lambda: peers.remove(jpath),
                      run=lambda: jnrrd().write_pyramid(jpath, data, method)),
            Contender("numpy baseline", before=lambda: peers.remove(npath), run=baseline),
        ]


# --- the 10⁶-tile header -------------------------------------------------------------------------

def write_many_tiles(path: Path, grid: int = 100, tile: int = 10) -> tuple[bytes, bytes]:
    """A valid internal-tiled uint8 file with ``grid``³ zstd tiles of ``tile``³ zeros.

    Written directly (not through jnrrd) so the case needs only the reader. Offsets are
    absolute and found by the fixed point of docs/format.md#tile-offsets. Returns the offset_table
    and size_table lines.
    """
    import zstandard

    frame = zstandard.ZstdCompressor(level=3).compress(bytes(tile**3))
    n = grid**3
    head = [{"jnrrd": "0004"}, {"type": "uint8"}, {"dimension": 3},
            {"sizes": [grid * tile] * 3}, {"encoding": "raw"},
            {"extensions": {"tile": "https://jnrrd.org/extensions/tile/v1.0.0"}},
            {"tile:enabled": True}, {"tile:dimensions": [0, 1, 2]},
            {"tile:sizes": [tile] * 3}, {"tile:storage": "internal"},
            {"tile:format": "contiguous"}, {"tile:compression": "zstd"}]
    prefix = "".join(json.dumps(f) + "\n" for f in head).encode()
    sizes = json.dumps({"tile:size_table": [len(frame)] * n}).encode()
    start = 0
    while True:
        offsets = json.dumps({"tile:offset_table": list(range(start, start + n * len(frame),
                                                               len(frame)))}).encode()
        header = prefix + offsets + b"\n" + sizes + b"\n\n"
        if len(header) <= start:
            break
        start = len(header)
    with open(path, "wb") as f:
        # the gap is never read (docs/format.md#tile-offsets)
        f.write(header + bytes(start - len(header)))
        f.write(frame * n)
    return offsets, sizes


def header_case(bench: Bench) -> Case:
    """``jnrrd.read_header`` / ``jnrrd.open`` of a 10⁶-tile header vs ``json.loads``."""
    path = bench.workdir / "tiles-1e6.jnrrd"
    lines: list[bytes] = []

    def setup() -> None:
        if not lines:
            lines.extend(write_many_tiles(path))

    def jnrrd_open() -> None:
        import jnrrd

        vol = jnrrd.open(path)
        vol.close()

    def jnrrd_header() -> object:
        import jnrrd

        return jnrrd.read_header(path)

    setup()
    return Case(
        "header/1e6-tiles",
        [Contender("jnrrd read_header", setup=setup, paths=lambda: [path], run=jnrrd_header,
                   check=lambda hd: len(hd["tile:offset_table"]) == 10**6),
         Contender("jnrrd open", setup=setup, paths=lambda: [path], run=jnrrd_open),
         Contender("json.loads", setup=setup,
                   run=lambda: [json.loads(line) for line in lines])],
        nbytes=sum(len(x) for x in lines),
        targets=[Target("jnrrd read_header", "json.loads", "<=", 2.0),
                 Target("jnrrd open", "json.loads", "<=", 2.0)],
        subject="jnrrd read_header")


# --- the case list ---------------------------------------------------------------------------

TARGETS: dict[str, list[tuple]] = {
    # (reference, op, bound) for the subject "jnrrd" (from the performance issue)
    # (tensorstore ≥ 1.0× in every mode: the portable core's issue; 1.3× the first one's)
    "read/zstd": [("bare zstd loop", ">=", 0.9), ("tensorstore", ">=", 1.0),
                  ("tensorstore", ">=", 1.3), ("zarr-python", ">=", 2.0)],
    "read/raw": [("numpy", ">=", 0.5), ("tensorstore", ">=", 2.0)],
    "region/zstd": [("tensorstore", ">=", 1.2)],
    "region/raw": [("tensorstore", ">=", 1.0)],
    "regions32/zstd": [("tensorstore", "<=", 0.8)],
    "regions32/raw": [("tensorstore", "<=", 1.0)],
    "write/zstd": [("bare zstd loop", ">=", 0.9), ("tensorstore", ">=", 1.2),
                   ("jnrrd durable=False", "tensorstore", ">=", 1.2)],
    "write/raw": [("tensorstore", ">=", 1.5),
                  ("jnrrd durable=False", "tensorstore", ">=", 1.5)],
    "untiled-read/raw": [("numpy", ">=", 0.9)],
    "untiled-region/raw": [("numpy", ">=", 0.9)],
    "untiled-read/zstd": [("pynrrd gzip", ">=", 5.0)],
    "pyramid/average": [("numpy baseline", ">=", 0.8)],
    "pyramid/mode": [("numpy baseline", ">=", 2.0)],
    "memory/read-zstd": [("output array", "<=", 1.15)],
}


def _targets(name: str) -> list[Target]:
    # (reference, op, bound) for jnrrd, or (subject, reference, op, bound)
    return [Target(*t) if len(t) == 4 else Target("jnrrd", *t) for t in TARGETS.get(name, [])]


def tiled_case(bench: Bench, op: str, codec: str, systems: tuple[str, ...]) -> Case:
    """``op`` (write, read, region, regions32) on 64³ tiles with ``codec`` for ``systems``."""
    make = {"write": bench.write, "read": bench.read, "region": bench.region,
            "regions32": bench.regions}[op]
    keys = [k for k in systems if k != "numpy" or codec == "raw"]
    if op == "write" and "jnrrd" in keys:
        # the peers never fsync: jnrrd is also timed with the same guarantee
        keys.insert(keys.index("jnrrd") + 1, "jnrrd-nosync")
    if codec != "raw" and "bare" in systems:
        keys = [k for k in keys if k != "bare"] + ["bare"]
    # the bare loops have no format, hence no region access
    keys = [k for k in keys if k != "bare" or (codec != "raw" and op in ("write", "read"))]
    if op == "regions32":
        nbytes = sum(int(np.prod([s.stop - s.start for s in r]))
                     for r in _volume.random_regions(bench.size)) * bench.arr.itemsize
    elif op == "region":
        r = _volume.scaled_region(bench.size)
        nbytes = int(np.prod([s.stop - s.start for s in r])) * bench.arr.itemsize
    else:
        nbytes = bench.arr.nbytes
    return Case(f"{op}/{codec}", [make(k, codec) for k in keys], nbytes,
                _targets(f"{op}/{codec}"), reads=op != "write")


def untiled_case(bench: Bench, name: str) -> Case:
    """Untiled whole-file reads and the untiled region read."""
    op, codec = name.split("/")

    def renamed(c: Contender, system: str) -> Contender:
        c.system = system
        return c

    if op == "untiled-region":
        contenders = [bench.region("jnrrd-untiled", "raw"), bench.region("numpy", "raw")]
        r = _volume.scaled_region(bench.size)
        nbytes = int(np.prod([s.stop - s.start for s in r])) * bench.arr.itemsize
    elif codec == "raw":
        contenders = [bench.read("jnrrd-untiled", "raw"), bench.read("numpy", "raw"),
                      renamed(bench.read("pynrrd", "raw"), "pynrrd raw")]
        nbytes = bench.arr.nbytes
    else:
        contenders = [bench.read("jnrrd-untiled", codec),
                      renamed(bench.read("pynrrd", "gzip"), "pynrrd gzip")]
        nbytes = bench.arr.nbytes
    return Case(name, contenders, nbytes, _targets(name))


def memory_case(bench: Bench) -> Case:
    """Peak memory of a full zstd read against the output array's size."""
    contenders = [bench.memory(k, "zstd") for k in ("jnrrd", "tensorstore", "zarr", "bare")]
    contenders.append(Contender("output array", measure=lambda: float(bench.arr.nbytes)))
    return Case("memory/read-zstd", contenders, bench.arr.nbytes,
                _targets("memory/read-zstd"), reads=False, metric="bytes")


ALL_SYSTEMS = ("jnrrd", "zarr", "tensorstore", "numpy", "bare")


def case_builders(systems: tuple[str, ...] = ALL_SYSTEMS) -> dict[str, Callable[[Bench], Case]]:
    """Every case name with the function that builds it (lazily, so ``--only`` stays cheap)."""
    out: dict[str, Callable[[Bench], Case]] = {}
    for op in ("write", "read", "region", "regions32"):
        for codec in CODECS:
            out[f"{op}/{codec}"] = (lambda b, op=op, codec=codec:
                                    tiled_case(b, op, codec, systems))
    out["header/1e6-tiles"] = header_case
    for name in ("untiled-read/raw", "untiled-read/zstd", "untiled-region/raw"):
        out[name] = lambda b, name=name: untiled_case(b, name)
    out.update(gzip_cases.BUILDERS)  # untiled-read/gzip, gzip-tiles/read, gzip-write/*
    out.update(gzip_write.BUILDERS)  # gzip-nrrd-write/{time,size} against SimpleITK
    for method in ("average", "mode"):
        out[f"pyramid/{method}"] = (lambda b, m=method: Case(
            f"pyramid/{m}", b.pyramid(m), b.arr.nbytes, _targets(f"pyramid/{m}"), reads=False))
    out["memory/read-zstd"] = memory_case
    out.update(viewer.CASES)
    out.update(remote.CASES)
    out.update(patches.CASES)
    return out


def select(names: list[str], only: str | None) -> list[str]:
    """Case names matching the comma-separated names or patterns in ``only``."""
    if not only:
        return names
    pats = [p.strip() for p in only.split(",") if p.strip()]
    chosen = [n for n in names if any(fnmatch.fnmatch(n, p) or n.startswith(p) for p in pats)]
    if not chosen:
        raise SystemExit(f"--only {only!r} matches no case; cases: {', '.join(names)}")
    return chosen


def run(builders: dict[str, Callable[[Bench], Case]], args: argparse.Namespace,
        title: str) -> int:
    """Build and run the selected cases, print the table, save JSON; exit status 0."""
    names = select(list(builders), getattr(args, "only", None))
    root = _volume.CACHE_DIR
    root.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="run-", dir=root))
    modes = [m.strip() for m in getattr(args, "modes", "warm").split(",") if m.strip()]
    if unknown := [m for m in modes if m not in h.MODES]:
        raise SystemExit(f"--modes: unknown {unknown}; modes: {', '.join(h.MODES)}")
    meta = {"title": title, "size": args.size, "repeat": args.repeat, "cold": args.cold,
            "modes": modes,
            "python": platform.python_version(), "cpus": os.cpu_count(),
            "versions": peers.versions(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    rows: list[dict] = []
    try:
        bench = Bench(args.size, workdir)
        for name in names:
            t0 = time.perf_counter()
            case = builders[name](bench)
            results = h.run_case(case, args.repeat, cold=args.cold, modes=modes)
            rows.extend(h.table_rows(case, results))
            print(f"[{name}: {time.perf_counter() - t0:.1f} s]", file=sys.stderr, flush=True)
    finally:
        if not getattr(args, "keep", False):
            shutil.rmtree(workdir, ignore_errors=True)
    vers = ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
    print(f"{title}: size {args.size}^3 uint16, {args.repeat} interleaved repetitions, "
          f"medians; modes {', '.join(modes)}; Python {meta['python']}, {meta['cpus']} CPUs")
    print(f"versions: {vers}")
    print("ratio: speed ratio t_ref/t_jnrrd for ≥ targets (and info rows), "
          "t_jnrrd/t_ref for ≤ targets")
    h.print_table(rows)
    met, not_met, na = h.summary(rows)
    print(f"targets: {met} met, {not_met} not met, {na} n/a")
    out = Path(args.json) if args.json else root / f"results-{args.size}.json"
    h.save_json(rows, meta, out)
    print(f"results: {out}")
    return 0


def parser(doc: str) -> argparse.ArgumentParser:
    """The common command line of the benchmark scripts."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--size", type=int, default=512, help="volume edge (default 512)")
    p.add_argument("--repeat", type=int, default=5, help="interleaved repetitions (≥ 5)")
    p.add_argument("--cold", action="store_true", help="also time reads with files evicted")
    p.add_argument("--modes", default="warm",
                   help="comma-separated: warm (default), kept (results held), fresh (a new "
                        "process per read), cold")
    p.add_argument("--json", help="results file (default ~/.cache/jnrrd-bench/results-N.json)")
    p.add_argument("--keep", action="store_true", help="keep the scratch datasets")
    return p


def main() -> int:
    """Command-line entry point."""
    p = parser(__doc__)
    p.add_argument("--only", help="comma-separated case names or patterns (e.g. 'read/*')")
    return run(case_builders(), p.parse_args(), "jnrrd benchmarks")


if __name__ == "__main__":
    sys.exit(main())
