"""Fresh output pages mapped in by a helper thread ahead of the decoder
(jnrrd/engine/prefault.py): pages become resident without their contents changing, the
helper stops when the block ends, a kernel that refuses is not asked again, and a whole-file
untiled read populates its output while the data comes out exactly as written.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import sys
import threading

import numpy as np
import pytest

import jnrrd
from jnrrd.engine import prefault

MIB = 1 << 20


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * mmap.PAGESIZE


@pytest.fixture
def entered(monkeypatch):
    """The reader's ``populating`` replaced by one that records the (address, bytes) of each
    array it is given and calls the real one. (Whether the helper gets to map anything in
    before a small read ends is a race; that it is asked, for the output, is not.)"""
    from jnrrd.engine import untiled

    arrays: list[tuple[int, int]] = []
    real = untiled.populating

    def record(arr: np.ndarray):
        arrays.append((arr.ctypes.data, arr.nbytes))
        return real(arr)

    monkeypatch.setattr(untiled, "populating", record)
    monkeypatch.setattr(prefault, "MIN_BYTES", MIB)
    return arrays


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="MADV_POPULATE_WRITE is Linux's")


@linux_only
def test_this_linux_supports_populate_write():
    assert prefault.supported, "MADV_POPULATE_WRITE refused: Linux 5.14 or newer expected"


@linux_only
def test_populate_maps_pages_without_changing_them():
    buf = mmap.mmap(-1, 64 * MIB)  # fresh anonymous memory: nothing of it is resident yet
    arr = np.frombuffer(buf, np.uint8)
    arr[: 8 * MIB] = np.arange(8 * MIB, dtype=np.uint64).astype(np.uint8)
    before = _resident_bytes()
    asked = prefault.populate(arr)
    assert asked >= arr.nbytes - 2 * mmap.PAGESIZE
    assert _resident_bytes() - before >= 50 * MIB  # the 56 MiB never written are in memory
    assert np.array_equal(arr[: 8 * MIB], np.arange(8 * MIB, dtype=np.uint64).astype(np.uint8))
    assert not arr[8 * MIB :].any()  # fresh anonymous memory stays zero
    del arr
    buf.close()


def test_the_helper_stops_when_the_block_ends(monkeypatch):
    started, calls = threading.Event(), []

    def slow(addr: int, n: int, advice: int) -> int:
        calls.append(n)
        started.set()
        threading.Event().wait(0.002)
        return 0

    monkeypatch.setattr(prefault, "_madvise", slow)
    monkeypatch.setattr(prefault, "supported", True)
    arr = np.empty(256 * MIB, np.uint8)  # 64 chunks of 4 MiB
    with prefault.populating(arr):
        assert started.wait(10)
    count = len(calls)
    threading.Event().wait(0.05)
    assert len(calls) == count < 64  # nothing asked after the block ended


def test_a_kernel_that_refuses_is_not_asked_again(monkeypatch):
    calls = []

    def refuse(addr: int, n: int, advice: int) -> int:
        calls.append(n)
        ctypes.set_errno(errno.EINVAL)
        return -1

    monkeypatch.setattr(prefault, "_madvise", refuse)
    monkeypatch.setattr(prefault, "supported", True)
    arr = np.empty(64 * MIB, np.uint8)
    assert prefault.populate(arr) == 0
    assert prefault.populate(arr) == 0
    assert calls == [4 * MIB] and prefault.supported is False


def test_other_failures_stop_one_call_only(monkeypatch):
    def busy(addr: int, n: int, advice: int) -> int:
        ctypes.set_errno(errno.ENOMEM)
        return -1

    monkeypatch.setattr(prefault, "_madvise", busy)
    monkeypatch.setattr(prefault, "supported", True)
    assert prefault.populate(np.empty(8 * MIB, np.uint8)) == 0
    assert prefault.supported is True


def test_small_arrays_get_no_helper(monkeypatch):
    monkeypatch.setattr(prefault, "background",
                        lambda fn: pytest.fail("a helper started for a small array"))
    arr = np.empty(prefault.MIN_BYTES - 1, np.uint8)
    with prefault.populating(arr):
        arr[:] = 1
    assert arr.all()


@pytest.mark.parametrize("encoding", ["gzip", "raw", "zstd"])
def test_a_whole_untiled_read_populates_its_output(tmp_path, entered, encoding):
    rng = np.random.default_rng(7)
    data = rng.integers(0, 4000, size=(128, 128, 64), dtype=np.uint16)  # 2 MiB
    path = tmp_path / f"v-{encoding}.jnrrd"
    jnrrd.write(path, data, encoding=encoding)
    out, _ = jnrrd.read(path)
    assert np.array_equal(out, data)
    assert entered == [(out.ctypes.data, out.nbytes)]


def test_reads_through_the_memory_map_populate_their_output(tmp_path, entered):
    data = np.arange(128 * 128 * 64, dtype=np.uint16).reshape(128, 128, 64)
    path = tmp_path / "raw.jnrrd"
    jnrrd.write(path, data, detached=True)
    with jnrrd.open(path) as vol:
        whole, region = vol[:], vol[:, :, 1:]
    assert np.array_equal(whole, data) and np.array_equal(region, data[:, :, 1:])
    assert entered == [(out.ctypes.data, out.nbytes) for out in (whole, region)]
