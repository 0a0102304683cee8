"""Benchmark machinery: interleaved medians, page-cache control, targets and one table.

Absolute times on the shared 2-core machines are noise, so every case runs all its contenders
interleaved over ``repeat`` repetitions with the order rotated (A B C, B C A, C A B, …: no
contender is always first), and reports medians and ratios; the page cache is reclaimed within
20–60 s, so each measurement reads its files once (untimed) right before (a cold measurement
evicts them instead: ``posix_fadvise(DONTNEED)``).

Modes (docs/performance.md, "Method"): ``warm`` times one operation at a time in this process,
its result dropped before the next (memory a system freed may serve the next result);
``kept`` times :data:`KEPT` operations in a row whose results are all held, so each result
needs fresh memory; ``fresh`` times one operation in a new process (imports, and the garbage
collection they leave due, untimed), as a script that reads one volume does; ``cold`` is
``warm`` with the files evicted.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

_BUFFER = bytearray(16 << 20)


# --- page cache ------------------------------------------------------------------------------

def _files(paths: Iterable[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            out.extend(q for q in sorted(p.rglob("*")) if q.is_file())
        elif p.exists():
            out.append(p)
    return out


def warm(paths: Iterable[Path]) -> None:
    """Read every file under ``paths`` once so that it sits in the page cache."""
    view = memoryview(_BUFFER)
    for p in _files(paths):
        with open(p, "rb", buffering=0) as f:
            while f.readinto(view):
                pass


def evict(paths: Iterable[Path]) -> None:
    """Drop every file under ``paths`` from the page cache (flushed first; clean pages only)."""
    for p in _files(paths):
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


# --- cases -----------------------------------------------------------------------------------

@dataclass
class Contender:
    """One system's way of doing a case's operation.

    ``setup`` runs once, untimed (e.g. writing the dataset to read); an exception there or in
    ``run`` marks the contender "n/a" with the error. ``before`` runs untimed before every
    repetition (e.g. removing the previous output), and in the ``kept`` mode before each of
    its operations (a server's counters then count one operation). ``paths`` are warmed (or
    evicted) before each repetition. ``check`` validates the first result. ``measure``
    replaces wall time by another metric (e.g. peak bytes) when given. ``counters`` runs
    right after each timed operation (untimed) and returns named figures of it (e.g. a
    server's ``requests`` and ``bytes``), whose medians the table shows beside the time.
    """

    system: str
    run: Callable[[], object] | None = None
    setup: Callable[[], None] | None = None
    before: Callable[[], None] | None = None
    paths: Callable[[], Sequence[Path]] = lambda: ()
    check: Callable[[object], bool] | None = None
    measure: Callable[[], float] | None = None
    counters: Callable[[], dict[str, float]] | None = None
    #: the operation once in a fresh process, its time in seconds (the ``fresh`` mode)
    fresh: Callable[[], float] | None = None


#: operations per repetition in the ``kept`` mode (results held; the first is not counted)
KEPT = 3
MODES = ("warm", "kept", "fresh", "cold")


@dataclass(frozen=True)
class Target:
    """``subject`` against ``reference``: ``">="`` on the speed ratio t_ref / t_subject, or
    ``"<="`` on the time (or bytes) ratio t_subject / t_ref, compared with ``bound``."""

    subject: str
    reference: str
    op: str
    bound: float

    def ratio(self, subject: float, reference: float) -> float:
        """The ratio this target is stated in."""
        return reference / subject if self.op == ">=" else subject / reference

    def met(self, ratio: float) -> bool:
        """Whether ``ratio`` satisfies the target."""
        return ratio >= self.bound if self.op == ">=" else ratio <= self.bound

    def text(self, metric: str) -> str:
        """Human-readable target, e.g. ``jnrrd ≥ 0.9× speed``."""
        what = "speed" if self.op == ">=" else {"bytes": "bytes", "count": "count",
                                                "cpu": "CPU s/GiB"}.get(metric, "time")
        bound = f"{self.bound:g}"
        bound = bound if "." in bound else f"{bound}.0"
        return f"{self.subject} {'≥' if self.op == '>=' else '≤'} {bound}× {what}"


@dataclass
class Case:
    """An operation timed for several contenders on the same data."""

    name: str
    contenders: list[Contender]
    nbytes: int
    targets: list[Target] = field(default_factory=list)
    subject: str = "jnrrd"
    reads: bool = True  # has a cold variant
    #: "time" (seconds), "bytes", "count" (e.g. requests) or "cpu" (client CPU s per GiB)
    metric: str = "time"


@dataclass
class Result:
    """Samples of one contender in one mode, or why it could not run."""

    case: str
    mode: str
    system: str
    samples: list[float] = field(default_factory=list)
    error: str | None = None
    #: what ``Contender.counters`` returned after each repetition
    counters: list[dict[str, float]] = field(default_factory=list)
    #: CPU seconds of each timed sample (all threads of the process that did the work)
    cpu: list[float] = field(default_factory=list)

    def counter(self, name: str) -> float | None:
        """Median of the counter ``name`` over the repetitions, ``None`` without one."""
        values = [c[name] for c in self.counters if name in c]
        return statistics.median(values) if values and not self.error else None

    @property
    def cpu_median(self) -> float | None:
        """Median CPU seconds of the samples, ``None`` when not measured."""
        return statistics.median(self.cpu) if self.cpu and not self.error else None

    @property
    def median(self) -> float | None:
        """Median of the samples, ``None`` when it did not run."""
        return statistics.median(self.samples) if self.samples and not self.error else None


def _describe(exc: BaseException) -> str:
    name = type(exc).__name__
    if name == "Unavailable":
        text = str(exc)
    else:
        text = f"not available: {name}: {exc}" if isinstance(exc, (AttributeError, ImportError,
                                                                   TypeError)) else f"{name}: {exc}"
    text = text.strip().replace("\n", " ")
    return text if len(text) <= 110 else text[:107] + "..."


def run_case(case: Case, repeat: int, cold: bool = False,
             modes: Sequence[str] = ("warm",)) -> list[Result]:
    """Run ``case`` interleaved over ``repeat`` repetitions in each of ``modes`` (and cold if
    asked; ``kept``, ``fresh`` and ``cold`` only for cases that read)."""
    modes = [m for m in modes if m == "warm" or case.reads]
    if cold and case.reads and "cold" not in modes:
        modes.append("cold")
    results = {(m, c.system): Result(case.name, m, c.system)
               for m in modes for c in case.contenders}
    live: list[Contender] = []
    for c in case.contenders:
        try:
            if c.setup is not None:
                c.setup()
            live.append(c)
        except Exception as exc:  # any failure of an optional system becomes "n/a"
            for m in modes:
                results[(m, c.system)].error = _describe(exc)
    for mode in modes:
        for c in live:
            if mode == "fresh" and c.fresh is None and c.measure is None:
                results[(mode, c.system)].error = "no fresh-process variant"
        for rep in range(repeat):
            # Rotate the order (repetition r starts with contender r mod n): whoever runs
            # first in a repetition pays for what the previous one left behind (e.g. a fresh
            # 256 MiB output after the last contender freed its own), so no one always does.
            k = rep % len(live) if live else 0
            for c in live[k:] + live[:k]:
                res = results[(mode, c.system)]
                if res.error:
                    continue
                try:
                    _one(c, res, mode, first=rep == 0 and mode == modes[0])
                except Exception as exc:
                    res.error = _describe(exc)
    return list(results.values())


def _one(c: Contender, res: Result, mode: str, first: bool) -> None:
    """One repetition of contender ``c`` in ``mode``; samples into ``res``."""
    if c.before is not None:
        c.before()
    (evict if mode == "cold" else warm)(c.paths())
    if c.measure is not None:
        res.samples.append(c.measure())
        return
    if mode == "fresh":
        assert c.fresh is not None
        got = c.fresh()
        seconds, cpu = got if isinstance(got, tuple) else (got, None)
        res.samples.append(seconds)
        if cpu is not None:
            res.cpu.append(cpu)
        return
    held = []
    for i in range(KEPT if mode == "kept" else 1):
        if i and c.before is not None:  # each operation's counters start from zero
            c.before()
        c0 = time.process_time()
        t0 = time.perf_counter()
        out = c.run()
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - c0
        if mode != "kept" or i > 0:  # kept: counted while earlier results are held
            res.samples.append(elapsed)
            res.cpu.append(cpu)
            if c.counters is not None:
                res.counters.append(c.counters())
        if first and i == 0 and c.check is not None and not c.check(out):
            res.error = "wrong result"
        if mode == "kept":
            held.append(out)
        del out
    del held


# --- one operation in a fresh process ----------------------------------------------------------

_FRESH = r"""
import gc, json, sys, time
sys.path.insert(0, {bench!r})
import peers
system = peers.make({system!r}, {codec!r})
system.preload()
# The imports leave the garbage collector a full collection to do (tens of thousands of new
# objects); untimed like the imports themselves, or the first operation that creates a few
# hundred Python objects would pay it for them (one that creates none never would).
gc.collect()
region = {region!r}
path = {path!r}
c0 = time.process_time()
t0 = time.perf_counter()
if region is None:
    out = system.read(path)
else:
    out = system.read_region(path, tuple(slice(a, b) for a, b in region))
elapsed = time.perf_counter() - t0
cpu = time.process_time() - c0
print(json.dumps({{"seconds": elapsed, "cpu": cpu, "nbytes": int(out.nbytes)}}))
"""


def fresh_time(system: str, codec: str | None, path: Path,
               region: Sequence[slice] | None = None) -> tuple[float, float]:
    """Seconds and CPU seconds of ``peers.make(system, codec).read(path)`` (or
    ``read_region``) in a fresh process, the system's modules imported beforehand
    (untimed)."""
    code = _FRESH.format(bench=str(Path(__file__).parent), system=system, codec=codec,
                         path=str(path),
                         region=None if region is None else [(s.start, s.stop) for s in region])
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600, check=False)
    if proc.returncode != 0:
        lines = (proc.stderr.strip() or "no output").splitlines()
        raise RuntimeError(f"child failed: {lines[-1]}")
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    return float(got["seconds"]), float(got["cpu"])


# --- the table -------------------------------------------------------------------------------

def _fmt_value(value: float | None, metric: str) -> str:
    if value is None:
        return "n/a"
    if metric == "bytes":
        return f"{value / 2**20:.1f} MiB"
    if metric == "count":
        return f"{value:.0f}"
    if metric == "cpu":
        return f"{value:.2f} s/GiB"
    return f"{value * 1e3:.2f} ms" if value < 1 else f"{value:.3f} s"


def table_rows(case: Case, results: list[Result]) -> list[dict]:
    """One row per (mode, system) with median, MB/s, and the subject's ratio against it."""
    rows = []
    by = {(r.mode, r.system): r for r in results}
    for (mode, system), res in by.items():
        med = res.median
        row = {"case": case.name, "mode": mode, "system": system, "median": med,
               "metric": case.metric, "error": res.error, "samples": res.samples,
               "mbps": (case.nbytes / med / 1e6) if med and case.metric == "time" else None,
               "ratios": [], "requests": res.counter("requests"),
               "bytes": res.counter("bytes"), "cpu_per_gib": res.counter("cpu_per_gib"),
               "cpu": res.cpu_median, "cpu_ratio": None}
        subject = by.get((mode, case.subject))
        if system != case.subject and subject is not None and subject.cpu_median \
                and res.cpu_median:
            # the subject's CPU time against this system's: less sensitive than the wall
            # time to other work on the machine
            row["cpu_ratio"] = subject.cpu_median / res.cpu_median
        targets = [t for t in case.targets if t.reference == system]
        subjects = {case.subject} | {t.subject for t in case.targets}
        if not targets and system not in subjects:
            # informational: the subject's speed (or size) against this system
            op = "<=" if case.metric in ("bytes", "cpu") else ">="
            targets = [Target(case.subject, system, op, float("nan"))]
        for t in targets:
            subj = by.get((mode, t.subject))
            ratio = status = None
            if subj is not None and subj.median is not None and med is not None:
                ratio = t.ratio(subj.median, med)
                status = None if np.isnan(t.bound) else ("met" if t.met(ratio) else "not met")
            elif not np.isnan(t.bound):
                why = subj.error if subj is not None and subj.error else res.error
                status = f"n/a ({why})" if why else "n/a"
            row["ratios"].append({"target": None if np.isnan(t.bound) else t.text(case.metric),
                                  "subject": t.subject, "ratio": ratio, "status": status})
        rows.append(row)
    return rows


def print_table(rows: list[dict], file=sys.stdout) -> None:
    """Print rows as one aligned table (case, mode, system, median, MB/s, CPU, ratio,
    target); a column of requests, bytes received and client CPU s/GiB when some row
    counted them. CPU: the median CPU time of the process that did the work (every thread;
    in brackets the subject's CPU time against this row's)."""
    counted = any(row.get("requests") is not None for row in rows)
    head = ("case", "mode", "system", "median", "MB/s", "CPU", "ratio", "target", "status")
    if counted:
        head = (*head[:6], "requests / MiB / CPU", *head[6:])
    lines = []
    last_case = None
    for row in rows:
        case = row["case"] if (row["case"], row["mode"]) != last_case else ""
        last_case = (row["case"], row["mode"])
        med = "n/a" if row["error"] else _fmt_value(row["median"], row["metric"])
        mbps = f"{row['mbps']:.0f}" if row["mbps"] and not row["error"] else ""
        entries = row["ratios"] or [None]
        for k, r in enumerate(entries):
            ratio = target = status = ""
            if r is not None:
                if r["ratio"] is not None:
                    ratio = f"{r['ratio']:.2f}×"
                    if r["target"] is None and r["subject"] != "jnrrd":
                        ratio = f"{ratio} ({r['subject']})"
                target = r["target"] or ""
                status = r["status"] or ""
                if status.startswith("n/a"):
                    status = "n/a"  # the reason is on the row of the system that failed
            if row["error"] and k == len(entries) - 1:
                note = f"({row['error']})"
                status = f"{status} {note}" if status else note
            first = k == 0
            line = (case if first else "", row["mode"] if first else "",
                    row["system"] if first else "", med if first else "",
                    mbps if first else "", _fmt_cpu(row) if first else "", ratio, target,
                    status)
            if counted:
                line = (*line[:6], _fmt_counters(row) if first else "", *line[6:])
            lines.append(line)
    widths = [max(len(str(x[i])) for x in [head, *lines]) for i in range(len(head) - 1)]
    right = {3, 4, 5, 6, 7} if counted else {3, 4, 5, 6}
    fmt = "  ".join(f"{{:>{w}}}" if i in right else f"{{:<{w}}}"
                    for i, w in enumerate(widths)) + "  {}"
    print(fmt.format(*head), file=file)
    print("-" * (sum(widths) + 2 * len(widths) + 8), file=file)
    for line in lines:
        print(fmt.format(*line).rstrip(), file=file)


def _fmt_cpu(row: dict) -> str:
    if row["error"] or row.get("cpu") is None:
        return ""
    text = _fmt_value(row["cpu"], "time")
    if row.get("cpu_ratio") is not None:
        text += f" ({row['cpu_ratio']:.2f}×)"
    return text


def _fmt_counters(row: dict) -> str:
    if row["error"] or row.get("requests") is None:
        return ""
    text = f"{row['requests']:.0f}"
    if row.get("bytes") is not None:
        text += f" / {row['bytes'] / 2**20:.2f} MiB"
    if row.get("cpu_per_gib") is not None:
        text += f" / {row['cpu_per_gib']:.2f} CPU s/GiB"
    return text


def summary(rows: list[dict]) -> tuple[int, int, int]:
    """Counts of targets (met, not met, n/a) over ``rows``."""
    met = not_met = na = 0
    for row in rows:
        for r in row["ratios"]:
            if r["target"] is None:
                continue
            if r["status"] == "met":
                met += 1
            elif r["status"] == "not met":
                not_met += 1
            else:
                na += 1
    return met, not_met, na


def save_json(rows: list[dict], meta: dict, path: Path) -> None:
    """Write the rows and run metadata as JSON (outside the repository)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1, default=str))


# --- peak memory in a child process ------------------------------------------------------------

_CHILD = r"""
import json, os, resource, sys
sys.path.insert(0, {bench!r})
import peers
system = peers.make({system!r}, {codec!r})
system.preload()
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
    raise RuntimeError(key)
import pathlib
path = pathlib.Path({path!r})
base = status("VmRSS:")
try:  # reset the peak-RSS watermark to the current RSS (Linux >= 4.0)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    reset = True
except OSError:
    reset = False
out = system.read(path)
peak = status("VmHWM:") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({{"delta": peak - base, "nbytes": int(out.nbytes)}}))
"""


def peak_memory(system: str, codec: str | None, path: Path) -> float:
    """Peak RSS growth (bytes) of ``peers.make(system).read(path)`` in a fresh process.

    The system's modules are imported before the baseline RSS is taken, so the figure is the
    read's own working memory (output array included), not import cost.
    """
    code = _CHILD.format(bench=str(Path(__file__).parent), system=system, codec=codec,
                         path=str(path))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600, check=False)
    if proc.returncode != 0:
        lines = (proc.stderr.strip() or "no output").splitlines()
        raise RuntimeError(f"child failed: {lines[-1]}")
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["delta"])


# --- NumPy pyramid baselines (docs/pyramids.md#methods) ---------------------------------

def _blocks(a: np.ndarray, s: int) -> np.ndarray:
    """View of the floor-cropped ``a`` as ``(*out_shape, s**ndim)`` blocks (copied)."""
    out = tuple(n // s for n in a.shape)
    a = a[tuple(slice(0, o * s) for o in out)]
    shaped = a.reshape(sum(((o, s) for o in out), ()))
    nd = a.ndim
    order = tuple(range(0, 2 * nd, 2)) + tuple(range(1, 2 * nd, 2))
    return shaped.transpose(order).reshape(*out, s**nd)


def _round_half_even_div(total: np.ndarray, n: int) -> np.ndarray:
    q, r = np.divmod(total, n)
    up = (2 * r > n) | ((2 * r == n) & (q % 2 == 1))
    return q + up


def average_pyramid(a: np.ndarray, levels: int = 3) -> list[np.ndarray]:
    """Levels 1..levels-1 of the exact integer average (strided pairwise sums in uint32)."""
    if a.dtype.itemsize > 2 or a.dtype.kind not in "ui":
        raise ValueError("the uint32-sum baseline is for 8/16-bit integers")
    out = []
    sums = a.astype(np.uint32)
    for level in range(1, levels):
        crop = tuple(slice(0, (n // 2) * 2) for n in sums.shape)
        s = sums[crop]
        # one strided view per corner of the 2×2×… block, summed pairwise
        acc = None
        for corner in np.ndindex(*(2,) * s.ndim):
            part = s[tuple(slice(c, None, 2) for c in corner)]
            acc = part.copy() if acc is None else np.add(acc, part, out=acc)
        sums = acc  # unrounded sums carry exactly to the next level
        out.append(_round_half_even_div(sums, 2 ** (s.ndim * level)).astype(a.dtype))
    return out


def mode_pyramid(a: np.ndarray, levels: int = 3) -> list[np.ndarray]:
    """Levels 1..levels-1 of the block mode (ties to the smallest), by pairwise equality counts
    over level-0 blocks."""
    out = []
    big = np.iinfo(a.dtype).max if a.dtype.kind in "ui" else np.inf
    for level in range(1, levels):
        s = 2**level
        shape = tuple(n // s for n in a.shape)
        res = np.empty(shape, dtype=a.dtype)
        step = max(1, (1 << 22) // max(1, int(np.prod(shape[1:])) * s**a.ndim))
        for i0 in range(0, shape[0], step):
            i1 = min(shape[0], i0 + step)
            blk = _blocks(a[i0 * s : i1 * s], s)
            # one contiguous row per position inside the block
            v = np.ascontiguousarray(blk.reshape(-1, blk.shape[-1]).T)
            k = v.shape[0]
            counts = np.ones(v.shape, dtype=np.uint16)
            for i in range(k):
                for j in range(i + 1, k):
                    eq = v[i] == v[j]
                    counts[i] += eq
                    counts[j] += eq
            best = counts.max(axis=0, keepdims=True)
            res[i0:i1] = np.where(counts == best, v, big).min(axis=0).reshape(blk.shape[:-1])
        out.append(res)
    return out


def numpy_pyramid(method: str) -> Callable[[np.ndarray, int], list[np.ndarray]]:
    """The NumPy baseline for ``method``, from ``benchmarks/pyramid.py`` when it provides one."""
    try:
        import pyramid  # benchmarks/pyramid.py, when present

        fn = getattr(pyramid, f"{method}_baseline", None) or getattr(
            pyramid, f"numpy_{method}", None)
        if callable(fn):
            return fn
    except ImportError:
        pass
    return {"average": average_pyramid, "mode": mode_pyramid}[method]
