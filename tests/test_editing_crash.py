"""Commits are atomic (docs/editing.md, "Commits and crashes"): a writer killed with SIGKILL
at a random moment of a commit leaves a file that opens, validates with ``deep=True`` and
equals, at every level, either the last commit or the one it was making. Local internal
files (in-place commits with their journal, and the rewrites of files written by
``jnrrd.write``), local external datasets, and both layouts on S3 (moto's server).

The writer is :func:`editing_worker.commit_loop` in a process forked from a server that has
imported jnrrd already (``multiprocessing``'s forkserver), so a kill costs tens of
milliseconds; it reports each commit's start and end, and the kill lands after a random
delay within about one commit. Every tenth round the file is first replaced by a fresh
``jnrrd.write`` of the current version, so the next commit is a whole-file rewrite.
``JNRRD_EDIT_KILLS`` sets the kills per case: 16 in the full suite (CI's time), 200 for the
long run that docs/editing.md reports (``JNRRD_EDIT_KILLS=200 python -m pytest
tests/test_editing_crash.py``).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import statistics
import time
from typing import Any

import editing_worker
import numpy as np
import pytest
from editing_worker import LEVELS, SHAPE, TILE, commit_loop, model

import jnrrd

KILLS = int(os.environ.get("JNRRD_EDIT_KILLS", "16"))

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600),
              pytest.mark.skipif(not hasattr(os, "fork"), reason="SIGKILL needs POSIX")]


def _context() -> Any:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["jnrrd", "editing_worker"])
    return ctx


def _levels(target: str, options: dict[str, Any]) -> list[np.ndarray]:
    """Every level of the file. An object store may still finish the killed writer's last
    request while it is read: that read is a ``DataError`` (a reader racing a commit), and
    it is read again."""
    for _ in range(20):
        try:
            with jnrrd.open(target, **options) as vol:
                return [lv[...] for lv in vol.levels]
        except jnrrd.DataError:
            if not options:
                raise
            time.sleep(0.1)
    raise AssertionError(f"{target} kept changing")


def _matches(got: list[np.ndarray], want: np.ndarray) -> bool:
    from editing_support import levels_of

    ref = levels_of(want, LEVELS)
    return len(got) == len(ref) and all(
        g.shape == r.shape and np.array_equal(g, r) for g, r in zip(got, ref, strict=True))


def _round(ctx: Any, target: str, so: dict[str, Any] | None, env: dict[str, str],
           rng: random.Random, durations: list[float]) -> tuple[int, int]:
    """One writer, killed during a commit; returns (last finished version, commits
    finished in this round)."""
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=commit_loop, args=(target, so, env, child))
    proc.start()
    child.close()
    last, finished = None, 0
    commits_before_kill = rng.randint(1, 3)
    starts = 0
    try:
        while True:
            if not parent.poll(120):
                raise AssertionError("the writer stopped answering")
            try:
                msg = parent.recv()
            except EOFError:
                proc.join(60)
                raise AssertionError(f"the writer died (exit code {proc.exitcode}) before "
                                     "it was killed") from None
            if msg[0] == "open":
                last = msg[1]
            elif msg[0] == "done":
                last, finished = msg[1], finished + 1
                durations.append(msg[2])
            elif msg[0] == "start":
                starts += 1
                if starts == commits_before_kill:
                    time.sleep(rng.uniform(0, 2.0 * statistics.median(durations[-20:])))
                    break
    finally:
        proc.kill()
        proc.join(60)
    while parent.poll(0.01):  # what the writer said before it died (poll is true at EOF)
        try:
            msg = parent.recv()
        except EOFError:
            break
        if msg[0] == "done":
            last, finished = msg[1], finished + 1
    parent.close()
    assert last is not None
    return last, finished


def _crash(target: str, storage: str, so: dict[str, Any] | None = None,
           tile: tuple[int, ...] = TILE) -> None:
    options = {"storage_options": so} if so else {}
    env = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    cache: dict[int, np.ndarray] = {}
    jnrrd.write(target, model(0, cache), tile=tile, levels=LEVELS, compression="zstd",
                storage=storage, **options)
    ctx = _context()
    rng = random.Random(f"{storage}-{bool(so)}")
    durations = [0.05]
    outcomes = {"last": 0, "new": 0}
    for k in range(KILLS):
        if k % 10 == 9:  # a file not written for editing: the next commit rewrites it
            v = int(_levels(target, options)[0][0, 0, 0])
            jnrrd.write(target, model(v, cache), tile=tile, levels=LEVELS,
                        compression="zstd", storage=storage, **options)
        last, _ = _round(ctx, target, so, env, rng, durations)
        got = _levels(target, options)
        if _matches(got, model(last, cache)):
            outcomes["last"] += 1
        else:
            assert _matches(got, model(last + 1, cache)), (
                f"kill {k}: the file is neither version {last} nor {last + 1}")
            outcomes["new"] += 1
        if so:
            time.sleep(0.05)  # as above: the killed writer's request may still land
        errors = [p for p in jnrrd.validate(target, deep=True, **options)
                  if p.severity == "error"]
        assert errors == [], f"kill {k}: {errors}"
    # kills landed on both sides of the commit point
    assert outcomes["last"] > 0 and outcomes["new"] > 0, outcomes
    _sweep(target, options, so)
    if storage == "external" and not so:
        h = jnrrd.read_header(target)
        base = os.path.join(os.path.dirname(target), h["tile:base_dir"])
        used = {e["file"].split("/")[0] for e in h.get("tile:files", []) if e["file"]}
        left = {n for n in os.listdir(base) if n.startswith("edit-")}
        assert left <= used


def _sweep(target: str, options: dict[str, Any], so: dict[str, Any] | None) -> None:
    """Open for writing once more: the next writer sweeps what the killed ones left. On an
    object store the last killed writer's lock object turns stale half a second after its
    last refresh, which may be later than now: wait for it (bounded)."""
    extra = {"stale_after": 0.5} if so else {}
    for _ in range(50):
        try:
            with jnrrd.open(target, mode="r+", **options, **extra):
                return
        except jnrrd.LockError:
            if not so:
                raise
            time.sleep(0.1)
    raise AssertionError("the killed writer's lock object never turned stale")


@pytest.mark.parametrize("storage", ["internal", "external"])
def test_sigkill_of_a_committing_writer_local(tmp_path, storage):
    _crash(str(tmp_path / "v.jnrrd"), storage)


@pytest.mark.parametrize("storage", ["internal", "external"])
def test_sigkill_of_a_committing_writer_s3(s3, storage):
    pytest.importorskip("s3fs")
    # larger tiles than locally: fewer objects to fetch for every check
    _crash(s3.url(f"crash/{storage}.jnrrd"), storage, s3.storage_options, (16, 12, 10))


def test_models_replay_the_worker(tmp_path):
    """The versions the test compares with are what the worker writes (a short replay)."""
    cache: dict[int, np.ndarray] = {}
    path = str(tmp_path / "v.jnrrd")
    jnrrd.write(path, model(0, cache), tile=TILE, levels=LEVELS, compression="zstd")
    with jnrrd.open(path, mode="r+") as vol:
        for v in range(1, 12):
            editing_worker.apply(vol, editing_worker.ops(v, vol.shape))
            vol.commit()
            assert _matches([lv[...] for lv in vol.levels], model(v, cache))
    assert SHAPE[2] != model(11, cache).shape[2]  # appends and shrinks happened
