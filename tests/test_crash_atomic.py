"""Crash safety (docs/format.md#writer-layout-and-atomicity, writer layout and atomicity): a writer
killed with SIGKILL at a random point while it overwrites a dataset leaves the old dataset (or, once
the header was replaced, the complete new one) readable in full, and the next write to the same
target removes every leftover of the interrupted one.

The writer runs in a subprocess (``tests/crash_writer.py``); delays are drawn from a seeded
generator over the measured duration of one write, so the kills land in every phase (tile
encoding, spooling, header replacement, removal of the old files).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time

import crash_writer
import numpy as np
import pytest

import jnrrd

HERE = os.path.dirname(os.path.abspath(__file__))
REPEATS = 10


def _read_all_levels(path: str) -> list[np.ndarray]:
    with jnrrd.open(path) as vol:
        return [np.asarray(lv[...]) for lv in vol.levels]


def _referenced(path: str) -> set[str]:
    """Names in the target's directory that the current header needs."""
    h = jnrrd.read_header(path)
    names = {os.path.basename(path)}
    for key in ("data_file", "tile:base_dir"):
        if h.get(key):
            names.add(os.path.normpath(h[key]).split(os.sep)[0])
    return names


def _leftovers(path: str) -> list[str]:
    d = os.path.dirname(path)
    return sorted(set(os.listdir(d)) - _referenced(path))


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """All levels of every version the test writes, per kind (read from a clean write)."""
    cache: dict[tuple[str, int], list[np.ndarray]] = {}

    def get(kind: str, version: int) -> list[np.ndarray]:
        if (kind, version) not in cache:
            d = tmp_path_factory.mktemp(f"ref-{kind}-{version}")
            p = str(d / "ref.jnrrd")
            crash_writer.write(p, kind, version)
            cache[kind, version] = _read_all_levels(p)
        return cache[kind, version]

    return get


def _spawn(target: str, kind: str, version: int) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [HERE, os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "crash_writer.py"), target,
                             kind, str(version)], stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"ready"
    return proc


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["internal", "external", "detached"])
def test_sigkill_during_overwrite_keeps_a_complete_dataset(tmp_path, references, kind):
    os.makedirs(tmp_path / "data")
    target = str(tmp_path / "data" / "v.jnrrd")
    # The duration of one write in a fresh writer process (lazy imports included), measured
    # on a scratch target, to spread the kills over every phase of the write.
    scratch = str(tmp_path / "scratch" / "v.jnrrd")
    os.makedirs(os.path.dirname(scratch))
    proc = _spawn(scratch, kind, 0)
    t0 = time.perf_counter()
    assert proc.stdout.readline().strip() == b"done"
    duration = time.perf_counter() - t0
    proc.wait()
    proc.stdout.close()
    crash_writer.write(target, kind, 1)
    rng = random.Random(f"crash-{kind}")
    current = 1
    outcomes = {"old": 0, "new": 0, "with-leftovers": 0}
    for k in range(REPEATS):
        new = current + 1
        proc = _spawn(target, kind, new)
        time.sleep(rng.uniform(0, 2.0 * duration))
        proc.kill()  # SIGKILL (TerminateProcess on Windows)
        proc.wait()
        proc.stdout.close()
        # The dataset is complete: every level equals one whole version, never a mix.
        levels = _read_all_levels(target)
        seen = crash_writer.version_of(levels[0])
        assert seen in (current, new), f"repeat {k}: version {seen}"
        for got, want in zip(levels, references(kind, seen), strict=True):
            np.testing.assert_array_equal(got, want)
        outcomes["new" if seen == new else "old"] += 1
        outcomes["with-leftovers"] += bool(_leftovers(target))
        # The next write to the same target removes the interrupted write's leftovers.
        current = new + 1
        crash_writer.write(target, kind, current)
        assert _leftovers(target) == [], f"repeat {k}: leftovers after the next write"
        for got, want in zip(_read_all_levels(target), references(kind, current), strict=True):
            np.testing.assert_array_equal(got, want)
    print(f"\n{kind}: {REPEATS} kills over {duration:.2f} s writes: {outcomes}")


@pytest.mark.parametrize("kind", ["internal", "external", "detached", "attached"])
def test_a_completed_overwrite_leaves_nothing_behind(tmp_path, references, kind):
    """Quick: repeated overwrites keep only what the current header references."""
    target = str(tmp_path / "v.jnrrd")
    for version in range(3):
        crash_writer.write(target, kind, version)
        assert _leftovers(target) == []
    for got, want in zip(_read_all_levels(target), references(kind, 2), strict=True):
        np.testing.assert_array_equal(got, want)
