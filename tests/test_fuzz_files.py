"""Fuzzing whole datasets: only ``JnrrdError`` (or correct data) within time and memory bounds.

Every example takes a small valid dataset of one kind (see ``fuzz_strategies.SEEDS``),
applies one to three mutations (byte flips, truncations, insertions, deletions, field
mutations) and reads the result through ``read_header``, ``read`` of each level, ``open`` +
slicing and ``read_tile`` under a 5 s alarm and a 64 MiB tracemalloc peak: a file of a few
KiB must never make the library allocate more. Warnings are fine; any exception that is not a
``JnrrdError`` fails with the mutation that caused it. Run the long profile by hand with
``HYPOTHESIS_PROFILE=long python -m pytest tests/test_fuzz_*.py``.
"""

from __future__ import annotations

import collections
import json
import os
import tempfile
import time

import fuzz_strategies as fz
import pytest
from hypothesis import given
from hypothesis import strategies as st

# per example, generous: tracemalloc runs alongside on shared cores (env overrides for runs
# that should hold the documented bounds, e.g. JNRRD_FUZZ_DEADLINE_S=2)
DEADLINE_S = float(os.environ.get("JNRRD_FUZZ_DEADLINE_S", "20"))
MAX_PEAK = int(os.environ.get("JNRRD_FUZZ_MAX_PEAK", str(64 << 20)))

UNTILED = [k for k in fz.SEEDS if k.startswith(("attached", "detached"))]
INTERNAL = [k for k in fz.SEEDS if k.startswith("internal")]
EXTERNAL = [k for k in fz.SEEDS if k.startswith("external")]

#: examples run and reads that returned data, per test (printed at the end of the module)
COUNTS: collections.Counter[str] = collections.Counter()
#: slowest example (s) and largest tracemalloc peak (bytes), per test; also written after
#: every example to the JSON file named by JNRRD_FUZZ_STATS, so a long run cut short by a
#: time budget still reports its figures
SLOWEST: dict[str, float] = collections.defaultdict(float)
PEAKS: dict[str, int] = collections.defaultdict(int)


@pytest.fixture(scope="module")
def seeds():
    cache = fz.SeedCache()
    yield cache
    cache.close()
    if COUNTS:
        print("\nfuzz examples:", dict(sorted(COUNTS.items())))
        print("slowest example (s):", {k: round(v, 3) for k, v in sorted(SLOWEST.items())})
        print("largest peak (MiB):", {k: round(v / 2**20, 1) for k, v in sorted(PEAKS.items())})


#: the case behind each slowest time and largest peak (kind and mutations), per test
WORST: dict[str, str] = {}


def _record(counter: str, seconds: float, peak: int, case: fz.Case) -> None:
    if seconds > 2.0:  # the documented per-example bound (docs/reliability.md)
        COUNTS[counter + ":over-2s"] += 1
        WORST[f"{counter}:over-2s:{COUNTS[counter + ':over-2s']}"] = \
            f"{seconds:.2f} s: {case.kind} after [{case.what}]"
    if seconds > SLOWEST[counter]:
        SLOWEST[counter] = seconds
        WORST[counter + ":slowest"] = f"{case.kind} after [{case.what}]"
    if peak > PEAKS[counter]:
        PEAKS[counter] = peak
        WORST[counter + ":peak"] = f"{case.kind} after [{case.what}]"
    out = os.environ.get("JNRRD_FUZZ_STATS")
    if out:
        with open(out, "w") as f:
            json.dump({"examples": COUNTS, "slowest_s": SLOWEST, "peak_bytes": PEAKS,
                       "worst": WORST}, f, indent=1)


def _run(case: fz.Case, counter: str) -> None:
    COUNTS[counter] += 1
    with tempfile.TemporaryDirectory(prefix="jnrrd-fuzz-") as d:
        path = fz.materialize(case, d)
        t0 = time.perf_counter()
        stats: dict[str, int] = {}
        try:
            with fz.bounded(DEADLINE_S, MAX_PEAK) as stats:
                done = fz.exercise(path)
        except fz.Deadline as exc:
            raise AssertionError(f"{case.kind} after [{case.what}]: {exc}") from None
        except BaseException as exc:  # anything that is not a JnrrdError is a bug
            fz.check_exception(exc, case)
            raise
        finally:
            _record(counter, time.perf_counter() - t0, stats.get("peak", 0), case)
        if done:
            COUNTS[counter + ":read-ok"] += 1


@pytest.mark.parametrize("kinds", [
    pytest.param(UNTILED, id="untiled"),
    pytest.param(INTERNAL, id="internal"),
    pytest.param(EXTERNAL, id="external"),
])
def test_seeds_read_back(seeds, kinds):
    """The unmutated seeds are valid: every read step succeeds (the fuzzer starts from data)."""
    for kind in kinds:
        with tempfile.TemporaryDirectory() as d:
            path = fz.materialize(fz.Case(kind, seeds.files(kind), "none"), d)
            done = fz.exercise(path)
            assert "read" in done and "level0" in done, (kind, done)


@given(data=st.data())
def test_fuzz_header_fields_all_kinds(seeds, data):
    """Field mutations only (one to three), across every kind of dataset."""
    kind = data.draw(st.sampled_from(sorted(set(fz.SEEDS) - set(fz.NRRD_SEEDS))), label="kind")
    files = seeds.files(kind)
    notes = []
    for _ in range(data.draw(st.integers(1, 3))):
        files, note = data.draw(fz.field_mutation(files))
        notes.append(note)
    _run(fz.Case(kind, files, "; ".join(notes)), "header-fields")


@given(data=st.data())
def test_fuzz_untiled(seeds, data):
    """Attached (every encoding) and detached data sections, bytes and fields mutated."""
    _run(data.draw(fz.hostile_case(seeds, UNTILED)), "untiled")


@given(data=st.data())
def test_fuzz_internal_tiles(seeds, data):
    """Internal tiles: contiguous, chunked, sparse, overlap, pyramids, every codec chain."""
    _run(data.draw(fz.hostile_case(seeds, INTERNAL)), "internal")


@given(data=st.data())
def test_fuzz_external_tiles(seeds, data):
    """External tiles by pattern and by tile:files, sparse, with checksums and levels."""
    _run(data.draw(fz.hostile_case(seeds, EXTERNAL)), "external")


@given(data=st.data())
def test_fuzz_every_kind(seeds, data):
    """Every kind of dataset in one stream of cases, a hostile value class in half of them:
    the test the long profile runs for the documented figures (docs/reliability.md)."""
    _run(data.draw(fz.hostile_case(seeds, sorted(fz.SEEDS), hostile=0.5)), "every-kind")
