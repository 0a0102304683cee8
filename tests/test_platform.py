"""jnrrd/_platform.py: every OS-specific call and its fallback, each tested both ways on this
machine (the fallback by hiding the function from the module, as the simulated platforms of
tests/conftest.py do for the whole suite). docs/portability.md lists which test covers which.
"""

from __future__ import annotations

import json
import mmap
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import jnrrd
from jnrrd import _platform, _threads
from jnrrd.storage import atomic, writeback


def _hide(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """As on a system without ``os.<names>`` (for _platform only)."""
    monkeypatch.setattr(_platform, "_hidden", (*_platform._hidden, *names))


@pytest.fixture
def fd(tmp_path):
    p = tmp_path / "f.bin"
    p.write_bytes(bytes(range(256)) * 4)
    fd = os.open(p, os.O_RDWR)
    yield fd
    os.close(fd)


# -- positional I/O ---------------------------------------------------------------------------

@pytest.mark.parametrize("native", [True, False], ids=["os", "fallback"])
def test_pread_and_pwrite_leave_the_position(fd, monkeypatch, native):
    if not native or not hasattr(os, "pread"):
        _hide(monkeypatch, "pread", "pwrite")
    os.lseek(fd, 17, os.SEEK_SET)
    assert _platform.pread(fd, 4, 300) == bytes([44, 45, 46, 47])
    assert _platform.pread(fd, 10, 1020) == bytes(range(252, 256))  # short at the end
    assert _platform.pwrite(fd, b"xyz", 5) == 3
    assert _platform.pwrite(fd, memoryview(np.arange(3, dtype=np.uint16)), 2000) == 6
    assert os.lseek(fd, 0, os.SEEK_CUR) == 17  # where it was
    assert _platform.pread(fd, 5, 4) == b"\x04xyz\x08"
    assert _platform.pread(fd, 6, 2000) == np.arange(3, dtype=np.uint16).tobytes()


@pytest.mark.parametrize("native", [True, False], ids=["os", "fallback"])
def test_pread_into_fills_the_view(fd, monkeypatch, native):
    """``os.preadv`` straight into the caller's buffer, else :func:`pread` and a copy; fewer
    bytes only at the end of the file, the descriptor's position untouched."""
    if not native or not hasattr(os, "preadv"):
        _hide(monkeypatch, "preadv", "pread")
    os.lseek(fd, 17, os.SEEK_SET)
    buf = bytearray(b"-" * 12)
    assert _platform.pread_into(fd, memoryview(buf)[2:10], 300) == 8
    assert buf == b"--" + bytes(range(44, 52)) + b"--"
    assert _platform.pread_into(fd, memoryview(buf), 1020) == 4  # short at the end
    assert buf[:4] == bytes(range(252, 256)) and buf[4:] == bytes(range(46, 52)) + b"--"
    assert _platform.pread_into(fd, memoryview(buf), 5000) == 0  # past the end
    assert os.lseek(fd, 0, os.SEEK_CUR) == 17


@pytest.mark.parametrize("hidden", [("preadv",), ("preadv", "pread")], ids=["pread", "seek"])
def test_the_pread_into_fallback_copies_in_bounded_steps(tmp_path, monkeypatch, hidden):
    """Without ``preadv`` a large read is not staged whole: one step (256 KiB) besides the
    buffer (a raw read costs about its output array: tests/test_io_errors.py)."""
    import tracemalloc

    _hide(monkeypatch, *hidden)
    data = np.arange(2 << 20, dtype=np.uint32)  # 8 MiB
    p = tmp_path / "big.bin"
    data.tofile(p)
    out = np.empty_like(data)
    fd = os.open(p, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        tracemalloc.start()
        got = _platform.pread_into(fd, memoryview(out).cast("B"), 0)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    finally:
        os.close(fd)
    assert got == data.nbytes and np.array_equal(out, data)
    assert peak < 1 << 20, peak


def test_the_pread_fallback_is_safe_from_threads(fd, monkeypatch):
    _hide(monkeypatch, "pread")
    errors = []

    def reader(k: int) -> None:
        for i in range(200):
            off = (k * 37 + i) % 1000
            if _platform.pread(fd, 8, off) != bytes((off + j) % 256 for j in range(8)):
                errors.append(off)

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# -- durability -------------------------------------------------------------------------------

@pytest.mark.parametrize("native", [True, False], ids=["os", "fallback"])
def test_fdatasync_falls_back_to_fsync(fd, monkeypatch, native):
    calls = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda f: (calls.append("fsync"), real_fsync(f)))
    if native and hasattr(os, "fdatasync"):
        real = os.fdatasync
        monkeypatch.setattr(os, "fdatasync", lambda f: (calls.append("fdatasync"), real(f)))
        expected = ["fdatasync"]
    else:
        _hide(monkeypatch, "fdatasync")
        expected = ["fsync"]
    _platform.fdatasync(fd)
    assert calls == expected


@pytest.mark.parametrize("system", ["linux", "windows"])
def test_directory_fsync_is_skipped_on_windows(tmp_path, monkeypatch, system):
    monkeypatch.setattr(_platform, "SYSTEM", system)
    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda p, *a, **k: (opened.append(p), real_open(p, *a, **k))[1])
    _platform.fsync_dir(str(tmp_path))
    _platform.fsync_dir(str(tmp_path / "missing"))  # best effort: no error
    assert opened == ([] if system == "windows" else [str(tmp_path), str(tmp_path / "missing")])


@pytest.mark.parametrize("native", [True, False], ids=["sync_file_range", "none"])
def test_start_writeback(fd, monkeypatch, native):
    if not native:
        monkeypatch.setattr(_platform, "_SYNC_FILE_RANGE", None)
    elif _platform._SYNC_FILE_RANGE is None:
        pytest.skip("no sync_file_range here (Linux only)")
    os.write(fd, b"more")
    assert _platform.start_writeback(fd) is native


def test_drop_cached_is_advice_only(fd, monkeypatch):
    _platform.drop_cached(fd, 0, 1024)  # posix_fadvise where there is one
    _hide(monkeypatch, "posix_fadvise")
    _platform.drop_cached(fd, 0, 1024)
    _platform.drop_cached(-1, 0, 1)  # a bad descriptor: advice, never an error
    assert _platform.pread(fd, 4, 0) == bytes(range(4))  # the file is untouched


@pytest.mark.parametrize("native", [True, False], ids=["copy_file_range", "user-space"])
def test_copy_range_copies_exactly_size_bytes(tmp_path, monkeypatch, native):
    """``writeback.copy_range`` appends the first ``size`` bytes of a longer source, in the
    kernel where it can, through user space elsewhere (the fallback copied all of it)."""
    if not native:
        _hide(monkeypatch, "copy_file_range")
        assert _platform.copy_file_range(0, 1, 1, 0, 0) is None
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.write_bytes(bytes(range(256)) * 100)
    with open(src, "rb") as s, open(dst, "w+b") as d:
        d.write(b"head")
        writeback.copy_range(s, d, 1000)
        assert d.tell() == 1004
        d.write(b"tail")
    assert dst.read_bytes() == b"head" + (bytes(range(256)) * 4)[:1000] + b"tail"


# -- memory maps ------------------------------------------------------------------------------

@pytest.mark.parametrize("populate", [True, False])
def test_map_readonly(tmp_path, monkeypatch, populate):
    if not populate:
        monkeypatch.delattr(mmap, "MAP_POPULATE", raising=False)
    p = tmp_path / "m"
    p.write_bytes(b"abc" * 1000)
    with open(p, "rb") as f:
        m = _platform.map_readonly(f.fileno())
    try:
        assert m[:6] == b"abcabc" and len(m) == 3000
        with pytest.raises(TypeError):
            m[0] = 1  # read-only
    finally:
        m.close()


def test_reserve_anonymous_only_where_pages_can_be_given_back(monkeypatch):
    m = _platform.reserve_anonymous(1 << 20)
    if _platform.SYSTEM == "linux" and m is not None:
        m[:4] = b"abcd"
        _platform.release_pages(m, 0, mmap.PAGESIZE)
        assert m[:4] == b"\0\0\0\0"  # given back: reads as zeros
        m.close()
    for system in ("macos", "windows"):
        monkeypatch.setattr(_platform, "SYSTEM", system)
        assert _platform.reserve_anonymous(1 << 20) is None


# -- processes --------------------------------------------------------------------------------

def test_register_at_fork_without_fork(monkeypatch):
    _hide(monkeypatch, "register_at_fork")
    _platform.register_at_fork(lambda: None)  # nothing to register with: no error


def test_physical_memory(monkeypatch):
    n = _platform.physical_memory()
    assert n is None or n > 1 << 20
    _hide(monkeypatch, "sysconf")
    assert _platform.physical_memory() is None


def _cgroup(tmp_path, membership: str, files: dict[str, str]) -> float | None:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    (tmp_path / "cgroup").write_text(membership)
    return _platform.cgroup_cpu_limit(str(tmp_path / "fs"), str(tmp_path / "cgroup"))


@pytest.mark.parametrize("membership,files,expected", [
    ("0::/a/b\n", {"fs/a/b/cpu.max": "150000 100000\n"}, 1.5),  # v2
    ("0::/a/b\n", {"fs/a/cpu.max": "50000 100000\n", "fs/a/b/cpu.max": "max 100000\n"},
     0.5),  # v2: an ancestor's quota applies
    ("0::/\n", {"fs/cpu.max": "max 100000\n"}, None),  # v2: no limit
    ("4:memory:/x\n2:cpu,cpuacct:/x\n0::/\n",
     {"fs/cpu,cpuacct/x/cpu.cfs_quota_us": "300000\n",
      "fs/cpu,cpuacct/x/cpu.cfs_period_us": "100000\n"}, 3.0),  # v1
    ("1:cpu:/\n", {"fs/cpu/cpu.cfs_quota_us": "-1\n",
                   "fs/cpu/cpu.cfs_period_us": "100000\n"}, None),  # v1: no limit
    ("0::/gone\n", {}, None),  # nothing readable
    ("garbage", {"fs/cpu.max": "lots 0"}, None),
])
def test_cgroup_cpu_limit(tmp_path, membership, files, expected):
    assert _cgroup(tmp_path, membership, files) == expected


def test_no_cgroup_file_no_limit(tmp_path):
    assert _platform.cgroup_cpu_limit(str(tmp_path), str(tmp_path / "missing")) is None


def test_available_cpus_follow_affinity_and_quota(monkeypatch):
    monkeypatch.setattr(_platform, "cgroup_cpu_limit", lambda: None)
    assert 1 <= _platform.available_cpus() <= (os.cpu_count() or 1)
    monkeypatch.setattr(os, "process_cpu_count", lambda: 3, raising=False)
    assert _platform.available_cpus() == 3
    monkeypatch.setattr(os, "process_cpu_count", lambda: None)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 5}, raising=False)
    assert _platform.available_cpus() == 2
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    _hide(monkeypatch, "sched_getaffinity")
    assert _platform.available_cpus() == 8  # the machine's count, the last resort
    monkeypatch.setattr(_platform, "SYSTEM", "linux")
    monkeypatch.setattr(_platform, "cgroup_cpu_limit", lambda: 2.5)
    assert _platform.available_cpus() == 3  # a quota of 2.5 CPUs: 3 threads
    monkeypatch.setattr(_platform, "cgroup_cpu_limit", lambda: 0.2)
    assert _platform.available_cpus() == 1
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    monkeypatch.setattr(_platform, "cgroup_cpu_limit", lambda: None)
    assert _platform.available_cpus() == 1


def test_the_pool_works_with_the_cpus_it_may_use(monkeypatch):
    monkeypatch.setattr(_threads, "_THREADS", 1)
    seen = set()
    _threads.run_parallel([lambda: seen.add(threading.get_ident()) for _ in range(50)])
    assert seen == {threading.get_ident()}  # one CPU: the caller alone
    monkeypatch.setattr(_threads, "_THREADS", None)
    assert _threads.default_threads() == _platform.available_cpus()


# -- locks and replacing ----------------------------------------------------------------------

def test_a_lock_is_seen_through_another_descriptor(tmp_path):
    p = tmp_path / "journal"
    p.write_bytes(b"")
    holder = os.open(p, os.O_RDWR)
    _platform.lock_shared(holder)
    probe = os.open(p, os.O_RDONLY)
    try:
        assert _platform.lock_taken(probe)
    finally:
        os.close(probe)
    os.close(holder)  # the lock goes with its descriptor
    probe = os.open(p, os.O_RDONLY)
    try:
        assert not _platform.lock_taken(probe)
    finally:
        os.close(probe)


@pytest.mark.parametrize("while_open", [True, False], ids=["posix", "windows"])
def test_replace_holds_the_old_file_only_where_the_system_allows(tmp_path, monkeypatch,
                                                                 while_open):
    """POSIX: the old file is held across ``os.replace`` (its blocks are freed on a background
    thread). Windows cannot replace an open file: nothing may hold it then."""
    monkeypatch.setattr(_platform, "REPLACE_WHILE_OPEN", while_open)
    target, tmp = tmp_path / "t", tmp_path / "t.tmp"
    target.write_bytes(b"old")
    tmp.write_bytes(b"new")
    opened: list[str] = []
    real_open, real_replace = os.open, os.replace
    monkeypatch.setattr(os, "open", lambda p, *a, **k: (opened.append(os.fspath(p)),
                                                        real_open(p, *a, **k))[1])

    def replace(src, dst):
        assert (str(target) in opened) == while_open
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    atomic.replace(str(tmp), str(target))
    assert target.read_bytes() == b"new"


# -- the simulated platforms ------------------------------------------------------------------

_PROBE = """
import json, mmap, os
import jnrrd, jnrrd._platform as p
m = mmap.mmap(-1, 4096)
try:
    mmap.mmap(-1, 4096, flags=getattr(mmap, "MAP_PRIVATE", 2) | getattr(mmap, "MAP_ANON", 32))
    flags = True
except TypeError:
    flags = False
print(json.dumps({"system": p.SYSTEM, "pread": hasattr(os, "pread"),
                  "fdatasync": hasattr(os, "fdatasync"), "fork": hasattr(os, "register_at_fork"),
                  "shared": hasattr(mmap, "MAP_SHARED"), "populate": hasattr(mmap, "MAP_POPULATE"),
                  "madvise": hasattr(mmap.mmap, "madvise"), "flags": flags,
                  "replace_open": p.REPLACE_WHILE_OPEN, "memory": p.physical_memory(),
                  "bricks": p.reserve_anonymous(1 << 20) is not None}))
"""


@pytest.mark.parametrize("system", ["windows", "macos"])
def test_simulated_platforms_remove_what_the_system_lacks(system):
    env = {**os.environ, _platform.SIMULATE_ENV: system}
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    got = json.loads(out)
    assert got["system"] == system and not got["fdatasync"] and not got["bricks"]
    if system == "windows":
        assert got == {**got, "pread": False, "fork": False, "shared": False, "populate": False,
                       "madvise": False, "flags": False, "replace_open": False, "memory": None}
    else:
        assert got == {**got, "pread": True, "fork": True, "shared": True, "populate": False,
                       "madvise": True, "flags": True, "replace_open": True}


def test_a_simulated_system_must_be_known():
    with pytest.raises(ValueError, match="windows"):
        _platform.simulate("plan9")


def test_reads_and_writes_through_every_fallback(tmp_path):
    """A subprocess as on Windows writes and reads every storage kind (the whole suite runs
    that way in .ci/run; this keeps one check of it in every run)."""
    script = (
        "import numpy as np, jnrrd\n"
        "a = np.arange(40 * 30 * 20, dtype=np.uint16).reshape(40, 30, 20)\n"
        "for kw in ({}, {'encoding': 'gzip'}, {'encoding': 'zstd'}, {'tile': 16},\n"
        "           {'tile': 16, 'compression': 'zstd', 'levels': 2},\n"
        "           {'tile': 16, 'storage': 'external'}):\n"
        f"    p = {str(tmp_path)!r} + '/v.jnrrd'\n"
        "    jnrrd.write(p, a, **kw)\n"
        "    jnrrd.write(p, a + 1, **kw)  # over an existing file\n"
        "    assert (jnrrd.read(p)[0] == a + 1).all(), kw\n"
        "    with jnrrd.open(p) as v:\n"
        "        assert (v[3:17, ::-2, 5] == (a + 1)[3:17, ::-2, 5]).all(), kw\n"
        "    assert jnrrd.validate(p, deep=True) == [], kw\n"
        "print('ok')\n")
    env = {**os.environ, _platform.SIMULATE_ENV: "windows"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_this_module_is_the_only_caller(tmp_path):
    """The suite's guard: jnrrd/_platform.py alone names the OS-specific functions."""
    import re
    from pathlib import Path

    pattern = re.compile(
        r"os\.(pread|preadv|pwrite|pwritev|fdatasync|copy_file_range|posix_fadvise|"
        r"sched_getaffinity|process_cpu_count|cpu_count|register_at_fork|sysconf|fork)\b|"
        r"mmap\.(MAP_|MADV_|PROT_)|\.madvise\(|import (fcntl|msvcrt)|sys\.platform|"
        r"/proc/|/sys/fs/")
    root = Path(jnrrd.__file__).parent
    bad = [f"{p.relative_to(root)}:{k}" for p in root.rglob("*.py")
           if p.name != "_platform.py"
           for k, line in enumerate(p.read_text().splitlines(), 1)
           if pattern.search(line.split("#", 1)[0])]
    assert bad == []
