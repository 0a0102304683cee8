"""Before/after: run ``run_all.py`` on two jnrrd source trees, alternately, and compare.

    python benchmarks/compare.py --before ../jnrrd-old --after . [--rounds 2] [-- RUN_ALL_ARGS]

Each round runs the whole table once per tree (before, then after), with that tree first on
``PYTHONPATH``; every jnrrd row is compared by the median of its per-round medians. The peers'
rows (zarr-python, tensorstore, ...) run the same code in both trees, so their before/after
ratio is the noise of the machine during the run: a jnrrd case is flagged only when it is more
than ``--threshold`` (10 %) slower AND slower than the peers' noise.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run_table(tree: Path, args: list[str], out: Path) -> list[dict]:
    """One ``run_all.py`` run against ``tree``; its result rows."""
    env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
    cmd = [sys.executable, str(HERE / "run_all.py"), "--json", str(out), *args]
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())["rows"]


def medians(runs: list[list[dict]]) -> dict[tuple[str, str, str], float]:
    """(case, mode, system) -> median over the runs of each run's median."""
    got: dict[tuple[str, str, str], list[float]] = {}
    for rows in runs:
        for r in rows:
            if r.get("median") is not None and not r.get("error"):
                got.setdefault((r["case"], r["mode"], r["system"]), []).append(r["median"])
    return {k: statistics.median(v) for k, v in got.items()}


def report(before: dict, after: dict, threshold: float) -> int:
    """Print the comparison table; the number of jnrrd regressions."""
    noise = [after[k] / before[k] for k in before
             if k in after and not k[2].startswith("jnrrd") and before[k] > 0]
    gauge = max(noise, default=1.0)
    print(f"peers' after/before ratios (machine noise): median "
          f"{statistics.median(noise) if noise else 1:.3f}, worst {gauge:.3f}")
    print(f"{'case':<22}{'system':<24}{'before':>12}{'after':>12}{'after/before':>14}")
    bad = 0
    for k in sorted(before):
        if not k[2].startswith("jnrrd") or k not in after:
            continue
        b, a = before[k], after[k]
        ratio = a / b if b else float("nan")
        slower = ratio > 1 + threshold and ratio > gauge
        bad += slower
        if k[0].startswith("memory"):
            shown = f"{b / 2**20:>9.1f}MiB{a / 2**20:>9.1f}MiB"
        else:
            shown = f"{b * 1e3:>10.2f}ms{a * 1e3:>10.2f}ms"
        print(f"{k[0]:<22}{k[2]:<24}{shown}{ratio:>14.3f}"
              f"{'  SLOWER' if slower else ''}")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, required=True, help="jnrrd source tree (old)")
    ap.add_argument("--after", type=Path, required=True, help="jnrrd source tree (new)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threshold", type=float, default=0.10)
    ap.add_argument("--json-dir", type=Path, default=None,
                    help="keep each run's run_all.py JSON here (before0.json, after0.json, ...)")
    ap.add_argument("rest", nargs=argparse.REMAINDER, help="-- then run_all.py arguments")
    ns = ap.parse_args()
    rest = ns.rest[1:] if ns.rest[:1] == ["--"] else ns.rest
    runs: dict[str, list[list[dict]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        out = ns.json_dir or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        for k in range(ns.rounds):
            for name in ("before", "after"):
                tree = ns.before if name == "before" else ns.after
                print(f"[round {k + 1}: {name}]", file=sys.stderr, flush=True)
                runs[name].append(run_table(tree, rest, out / f"{name}{k}.json"))
    return 1 if report(medians(runs["before"]), medians(runs["after"]), ns.threshold) else 0


if __name__ == "__main__":
    sys.exit(main())
