"""``_threads.run_each`` (items taken from an iterator as threads come free) and what it buys
a tiled read: no task object per tile, so a read of thousands of tiles does not wake the
garbage collector."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import jnrrd
from jnrrd import _threads


def test_every_item_once_on_the_threads_asked_for():
    seen: list[int] = []
    threads: set[int] = set()
    lock = threading.Lock()

    def fn(i: int) -> None:
        with lock:
            seen.append(i)
            threads.add(threading.get_ident())

    _threads.run_each(iter(range(500)), fn, threads=2)
    assert sorted(seen) == list(range(500))
    seen.clear()
    threads.clear()
    _threads.run_each(range(50), fn, threads=1)
    assert seen == list(range(50)) and threads == {threading.get_ident()}


def test_one_item_runs_in_the_caller():
    where: list[int] = []
    _threads.run_each([7], lambda _: where.append(threading.get_ident()), threads=4)
    assert where == [threading.get_ident()]
    _threads.run_each([], lambda _: where.append(0))  # nothing to do
    assert where == [threading.get_ident()]


def test_the_first_failure_stops_taking_items():
    taken: list[int] = []

    def items():
        for i in range(10_000):
            taken.append(i)
            yield i

    def fn(i: int) -> None:
        if i == 3:
            raise ValueError("item 3")

    with pytest.raises(ValueError, match="item 3"):
        _threads.run_each(items(), fn, threads=2)
    assert len(taken) < 100  # the rest were never even produced


def test_a_failing_iterator_is_raised():
    def items():
        yield 1
        yield 2
        raise KeyError("listing failed")

    with pytest.raises(KeyError, match="listing failed"):
        _threads.run_each(items(), lambda _: None, threads=2)


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_a_read_of_many_tiles_builds_nothing_per_tile(tmp_path, compression):
    # 4096 tiles: one task object per tile (as a list of closures would hold) triggers dozens
    # of collections; taking the tiles one by one holds a few objects whatever the count
    a = np.arange(64**3, dtype=np.uint16).reshape(64, 64, 64)
    path = tmp_path / "many.jnrrd"
    jnrrd.write(path, a, tile=4, compression=compression)
    jnrrd.read(path)  # first use: imports, pools
    runs = [0, 0, 0]

    def count(phase: str, info: dict) -> None:
        if phase == "start":
            runs[info["generation"]] += 1

    gc.collect()
    gc.callbacks.append(count)
    try:
        with jnrrd.config(threads=2):
            out = jnrrd.read(path)[0]
    finally:
        gc.callbacks.remove(count)
    assert np.array_equal(out, a)
    assert sum(runs) <= 8, runs  # (one task per tile: over 50)
