"""The writer's lock (jnrrd.storage.locks; docs/editing.md, "Locking") on each of its paths:
the system's advisory lock (``flock``; ``msvcrt.locking`` through a stand-in with Windows'
errors), the lock file alone where a file system has no advisory locks (stale after
``stale_after`` seconds or when its process is gone, broken once, a broken holder told at
its next refresh), and the lock file never taken for a leftover by ``jnrrd.cleanup``."""

from __future__ import annotations

import errno
import json
import os
import time

import numpy as np
import pytest

import jnrrd
from jnrrd import _platform
from jnrrd.errors import LockError
from jnrrd.storage.locks import FileLock


def _owner(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


@pytest.fixture
def target(tmp_path):
    return str(tmp_path / "v.jnrrd")


def test_os_locks_exclude_and_go_with_release(target):
    first = FileLock(target)
    assert os.path.exists(first.path)
    with pytest.raises(LockError, match=f"process {os.getpid()}"):
        FileLock(target)
    first.release()
    first.release()  # idempotent
    assert not os.path.exists(first.path)
    FileLock(target).release()


class _FakeMsvcrt:
    """``msvcrt.locking`` as Windows answers it: EACCES for a byte another handle holds."""

    LK_NBLCK = 2

    def __init__(self) -> None:
        self.held: dict[tuple[int, int], int] = {}

    def locking(self, fd: int, mode: int, nbytes: int) -> None:
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        if key in self.held and self.held[key] != fd:
            raise OSError(errno.EACCES, "Permission denied")
        self.held[key] = fd


def test_the_windows_lock_path(target, monkeypatch):
    monkeypatch.setattr(_platform, "_fcntl", None)
    monkeypatch.setattr(_platform, "_msvcrt", _FakeMsvcrt())
    first = FileLock(target)
    assert first._os
    with pytest.raises(LockError, match="another writer"):
        FileLock(target)
    first.release()


def test_a_system_without_advisory_locks_uses_lock_files(target, monkeypatch):
    monkeypatch.setattr(_platform, "_fcntl", None)
    monkeypatch.setattr(_platform, "_msvcrt", None)
    first = FileLock(target)
    assert not first._os and _owner(first.path)["token"] == first.token
    with pytest.raises(LockError):
        FileLock(target)
    first.release()


def test_lock_files_alone_exclude_and_go_with_release(target):
    first = FileLock(target, os_locks=False)
    body = _owner(first.path)
    assert body["pid"] == os.getpid() and body["token"] == first.token
    with pytest.raises(LockError, match="counts as stale"):
        FileLock(target, os_locks=False)
    first.refresh()
    first.release()
    assert not os.path.exists(first.path)


def test_a_stale_lock_file_is_broken_and_its_holder_told(target):
    old = FileLock(target, os_locks=False, stale_after=0.2)
    time.sleep(0.4)
    new = FileLock(target, os_locks=False, stale_after=0.2)  # breaks the stale one
    with pytest.raises(LockError, match="broken"):
        old.refresh()
    old.release()  # not its lock any more: left alone
    assert os.path.exists(new.path)
    new.refresh()
    new.release()


@pytest.mark.skipif(os.name != "posix", reason="Windows cannot ask (the next test)")
def test_a_lock_file_of_a_dead_process_on_this_host_is_stale_at_once(target, monkeypatch):
    monkeypatch.setattr(_platform, "SYSTEM", "linux")  # (also under the simulated Windows)
    dead = FileLock(target, os_locks=False)
    body = _owner(dead.path)
    body["pid"] = 2**22 + 12345  # no such process
    with open(dead.path, "w") as f:
        json.dump(body, f)
    FileLock(target, os_locks=False).release()


def test_where_processes_cannot_be_asked_only_the_timeout_breaks_a_lock(target, monkeypatch):
    """Windows: ``os.kill(pid, 0)`` would end the process, so its existence is unknown and
    a lock file of a process that may be gone waits for ``stale_after``."""
    monkeypatch.setattr(_platform, "SYSTEM", "windows")
    assert _platform.process_exists(os.getpid()) is None
    dead = FileLock(target, os_locks=False)
    body = _owner(dead.path)
    body["pid"] = 2**22 + 12345
    with open(dead.path, "w") as f:
        json.dump(body, f)
    with pytest.raises(LockError, match="counts as stale"):
        FileLock(target, os_locks=False)
    dead.release()


def test_a_file_system_without_advisory_locks_falls_back(target, monkeypatch):
    class NoLocks:
        LOCK_EX, LOCK_NB = 2, 4

        @staticmethod
        def flock(fd: int, op: int) -> None:
            raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(_platform, "_fcntl", NoLocks)
    lock = FileLock(target)
    assert not lock._os
    with pytest.raises(LockError):
        FileLock(target)
    lock.release()


def test_a_missing_directory_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="v.jnrrd"):
        FileLock(str(tmp_path / "no" / "v.jnrrd"))


def test_cleanup_leaves_a_held_lock_alone(tmp_path):
    path = tmp_path / "v.jnrrd"
    vol = jnrrd.create(path, (8, 8), "uint8", tile=4)
    vol[...] = 1
    assert jnrrd.cleanup(tmp_path, older_than=0) == []
    vol.commit()
    vol.close()
    assert np.array_equal(jnrrd.read(path)[0], np.ones((8, 8), np.uint8))
