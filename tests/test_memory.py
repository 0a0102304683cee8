"""Predictable memory: the library keeps nothing of a result once the caller drops it.

Each measurement runs in a fresh subprocess (its resident set is its own): a sequence of
whole reads and region reads, each result deleted and collected, against plain NumPy
allocating and filling arrays of the same sizes in the same order. The resident set after
the loop may exceed NumPy's by at most 64 MiB (docs/api.md, "Memory"). A Dask worker's
resident set after a ``to_dask`` compute comes back to where it started, within 64 MiB
(the worker's volumes are opened with no decoded-tile cache: local files default to 0).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import jnrrd

pytest.importorskip("psutil")  # (installed with distributed, in the test extra)

SLACK = 64 << 20

_LOOP = r"""
import gc, json, sys
import numpy as np, psutil
import jnrrd

mode, plan = sys.argv[1], json.loads(sys.argv[2])
proc = psutil.Process()


def rss():
    gc.collect()
    return proc.memory_info().rss


def one(path, key, shape):
    if mode == "numpy":
        a = np.empty(shape, np.uint16)
        a.fill(1)
        return a
    if key is None:
        return jnrrd.read(path)[0]
    with jnrrd.open(path) as vol:
        return vol[tuple(slice(*k) for k in key)]


one(*plan[0])  # the first use: imports, pools, NumPy's own caches
start = rss()
for step in plan:
    a = one(*step)
    base = a
    while isinstance(base.base, np.ndarray):
        base = base.base
    assert a.shape == tuple(step[2]) and base.flags.owndata, (a.shape, step)  # NumPy's memory
    del a, base
    gc.collect()
print(json.dumps({"growth": rss() - start}))
"""


def _files(tmp_path, sizes_mib: list[int]) -> list[tuple[str, tuple[int, ...]]]:
    """One file per size: untiled raw, untiled zstd, 64³ raw tiles, 64³ zstd tiles in turn."""
    kinds = [{}, {"encoding": "zstd"}, {"tile": 64}, {"tile": 64, "compression": "zstd"}]
    out = []
    for k, mib in enumerate(sizes_mib):
        shape = (256, 256, mib * 8)  # uint16: 1 MiB per 8 planes
        a = (np.arange(np.prod(shape), dtype=np.uint32) % 4093).astype(np.uint16)
        p = tmp_path / f"v{k}.jnrrd"
        jnrrd.write(p, a.reshape(shape, order="F"), **kinds[k % len(kinds)])
        out.append((str(p), shape))
    return out


def _plan(files, reads: int) -> list:
    """``reads`` steps cycling over the files: whole reads, and a region of each every
    third step."""
    plan = []
    for i in range(reads):
        path, shape = files[i % len(files)]
        if i % 3 == 2:
            key = [[0, 200], [16, 216], [0, min(shape[2], 100)]]
            plan.append((path, key, [200, 200, min(shape[2], 100)]))
        else:
            plan.append((path, None, list(shape)))
    return plan


def _growth(mode: str, plan: list) -> int:
    out = subprocess.run([sys.executable, "-c", _LOOP, mode, json.dumps(plan)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return int(json.loads(out.stdout)["growth"])


def _check(tmp_path, sizes_mib: list[int], reads: int) -> None:
    plan = _plan(_files(tmp_path, sizes_mib), reads)
    grown, numpy = _growth("jnrrd", plan), _growth("numpy", plan)
    assert grown <= numpy + SLACK, (f"jnrrd kept {grown >> 20} MiB after {reads} reads, "
                                    f"NumPy {numpy >> 20} MiB")


@pytest.mark.slow
def test_reads_keep_no_memory(tmp_path):
    _check(tmp_path, [48, 8, 36, 64], reads=12)


@pytest.mark.slow
def test_many_large_reads_keep_no_memory(tmp_path):
    """The measurement of the issue that removed the kept maps: 48 reads of 5–128 MiB
    (the kept maps held 500 MiB and more after them; plain NumPy about 30 MiB)."""
    _check(tmp_path, [5, 128, 24, 64, 96, 9, 40, 16], reads=48)


_WORKER = r"""
import gc, json, sys
import psutil
from dask.distributed import Client, LocalCluster
import jnrrd


def rss():
    gc.collect()
    return psutil.Process().memory_info().rss


path = sys.argv[1]
with LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None,
                  host="127.0.0.1") as cluster, Client(cluster) as client:
    with jnrrd.open(path) as vol:
        arr = vol.to_dask()
        client.submit(lambda: 0).result()  # the worker is up
        small = client.compute(arr[:64, :64, :64].sum()).result()  # imports, pools
        (start,) = client.run(rss).values()
        total = client.compute(arr.sum()).result()
        again = client.compute(arr.mean(axis=2)).result()
        (end,) = client.run(rss).values()
print(json.dumps({"start": start, "end": end, "ok": bool(total > 0 and again.size)}))
"""


@pytest.mark.slow
def test_a_dask_worker_gives_its_memory_back(tmp_path):
    pytest.importorskip("distributed")
    (path, _), = _files(tmp_path, [96])  # 96 MiB of 64³ raw tiles: 96 MiB per compute
    p = tmp_path / "z.jnrrd"
    jnrrd.write(p, jnrrd.read(path)[0], tile=64, compression="zstd")
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    out = subprocess.run([sys.executable, "-c", _WORKER, str(p)], capture_output=True,
                         text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["ok"]
    assert got["end"] <= got["start"] + SLACK, (got["start"] >> 20, got["end"] >> 20)
