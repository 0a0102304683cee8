"""The benchmark harness (benchmarks/_harness.py): what its table reports beside the times."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import _harness
from _harness import Case, Contender, run_case


def _counting(system: str) -> Contender:
    """A contender whose counters, like a test server's, count since the last reset."""
    state = {"requests": 0}

    def run() -> bytes:
        state["requests"] += 1
        return b"x"

    return Contender(system, run=run, before=lambda: state.update(requests=0),
                     counters=lambda: dict(state))


def test_kept_counters_are_per_operation() -> None:
    # kept mode times several operations in a row: each one's counters start from zero, and
    # the uncounted first operation adds no counters (the table would show 2 requests)
    results = run_case(Case("c", [_counting("a")], 1), repeat=3, modes=("warm", "kept"))
    by_mode = {r.mode: r for r in results}
    assert by_mode["warm"].counter("requests") == 1
    assert by_mode["kept"].counter("requests") == 1
    assert len(by_mode["kept"].counters) == 3 * (_harness.KEPT - 1)
    assert len(by_mode["kept"].counters) == len(by_mode["kept"].samples)
