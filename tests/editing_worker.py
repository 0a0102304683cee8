"""Writers the editing concurrency and crash tests run in other processes.

- :func:`commit_loop` (the crash test, under ``multiprocessing``): opens a volume for writing
  and commits version after version of :func:`ops` forever, reporting ``("start", v)``
  before each commit and ``("done", v)`` after it; the test kills it with SIGKILL at a
  random moment. Voxel ``(0, 0, 0)`` holds the version, so a new writer knows where the
  file is.
- ``python editing_worker.py hold PATH [fallback]``: try to open PATH for writing, print
  ``locked`` or ``LockError``, hold it until its standard input ends (``fallback``: lock
  files without the system's advisory locks).
- ``python editing_worker.py frames PATH N EVERY``: append N frames of :func:`frame`, one
  at a time, committing every EVERY frames; print ``ready`` first and ``done`` last.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import numpy as np

import jnrrd

#: the crash test's volume: shape, tile, levels
SHAPE = (40, 36, 30)
TILE = (8, 8, 6)
LEVELS = 3
FRAME = (24, 20)


def frame(t: int) -> np.ndarray:
    """Frame ``t`` of the streaming test: every voxel tells its frame and place."""
    y, x = np.meshgrid(np.arange(FRAME[1]), np.arange(FRAME[0]))
    return ((x + 7 * y + 131 * t) % 65521).astype(np.uint16)


def ops(v: int, shape: tuple[int, ...]) -> list[tuple[Any, ...]]:
    """The changes of version ``v`` of the crash test's volume (of ``shape`` before them):
    region writes, now and then an append or a shrink, then the version in voxel 0."""
    rng = np.random.default_rng(v)
    out: list[tuple[Any, ...]] = []
    kind = v % 5
    if kind == 3 and shape[2] < 60:
        n = int(rng.integers(1, 9))
        out.append(("append", n, int(rng.integers(0, 1000))))
        shape = (*shape[:2], shape[2] + n)
    elif kind == 4 and shape[2] > 12:
        shape = (*shape[:2], shape[2] - int(rng.integers(1, 7)))
        out.append(("resize", shape))
    for _ in range(int(rng.integers(1, 4))):
        lo = [int(rng.integers(1, n)) for n in shape]
        hi = [min(n, a + int(rng.integers(1, 14))) for a, n in zip(lo, shape)]
        out.append(("write", tuple(zip(lo, hi)), int(rng.integers(0, 60000))))
    out.append(("version", v))
    return out


def apply(target: Any, changes: list[tuple[Any, ...]]) -> Any:
    """Apply ``changes`` to a NumPy array (returned, maybe a new one) or a volume."""
    for op in changes:
        if op[0] == "write":
            key = tuple(slice(a, b) for a, b in op[1])
            if isinstance(target, np.ndarray):
                shape = target[key].shape
            else:
                shape = tuple(b - a for a, b in op[1])
            values = (np.arange(int(np.prod(shape)), dtype=np.uint32).reshape(shape)
                      + op[2]) % 65000
            target[key] = values.astype(np.uint16)
        elif op[0] == "append":
            shape = (*SHAPE[:2], op[1])
            values = np.full(shape, op[2], np.uint16)
            if isinstance(target, np.ndarray):
                target = np.concatenate([target, values], axis=2)
            else:
                target.append(values)
        elif op[0] == "resize":
            if isinstance(target, np.ndarray):
                target = target[:, :, :op[1][2]].copy()
            else:
                target.resize(op[1])
        else:
            target[0, 0, 0] = op[1]
    return target


def model(v: int, cache: dict[int, np.ndarray]) -> np.ndarray:
    """Version ``v`` of the crash test's volume (every earlier one cached on the way)."""
    if v not in cache:
        prev = model(v - 1, cache) if v > 0 else None
        if prev is None:
            cache[0] = np.zeros(SHAPE, np.uint16)
        else:
            cache[v] = apply(prev.copy(), ops(v, prev.shape))
    return cache[v]


def commit_loop(target: str, storage_options: dict[str, Any] | None, env: dict[str, str],
                conn: Any) -> None:
    """Commit version after version until killed (see the module doc). On an object store
    the killed writer's lock object stays: a lock older than half a second is stale here."""
    os.environ.update(env)
    options: dict[str, Any] = {"storage_options": storage_options,
                               "stale_after": 0.5} if storage_options else {}
    for _ in range(100):  # the killed writer's lock object: stale after half a second
        try:
            vol = jnrrd.open(target, mode="r+", **options)
            break
        except jnrrd.LockError:
            time.sleep(0.1)
    else:
        raise SystemExit("the lock stayed held")
    with vol:
        v = int(vol[0, 0, 0])
        conn.send(("open", v))
        while True:
            v += 1
            apply(vol, ops(v, vol.shape))
            conn.send(("start", v))
            t = time.perf_counter()
            vol.commit()
            took = time.perf_counter() - t
            # a pause after the commit point before "done": a kill in it finds the new
            # version on disk while the parent still counts the last one, so kills land on
            # both sides of the commit point however short the post-commit steps are
            time.sleep(took / 2)
            conn.send(("done", v, took))


def _hold(path: str, fallback: bool) -> None:
    if fallback:
        from jnrrd.storage import locks

        locks.fcntl = None  # type: ignore[assignment]
        locks.msvcrt = None  # type: ignore[assignment]
    try:
        vol = jnrrd.open(path, mode="r+")
    except jnrrd.LockError:
        print("LockError", flush=True)
        return
    print("locked", flush=True)
    sys.stdin.read()
    vol.close()


def _frames(path: str, n: int, every: int) -> None:
    with jnrrd.open(path, mode="r+") as vol:
        print("ready", flush=True)
        for t in range(n):
            vol.append(frame(t))
            if (t + 1) % every == 0:
                vol.commit()
    print("done", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "hold":
        _hold(sys.argv[2], len(sys.argv) > 3)
    elif sys.argv[1] == "frames":
        _frames(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        raise SystemExit(f"unknown command {sys.argv[1]!r}")
