"""Every call that differs between operating systems, each with its fallback (the only place).

The rest of the package calls these instead of the ``os`` or ``mmap`` function, and never
asks which system it runs on. docs/portability.md lists each function, what it falls back to
and the test that covers it:

========================  ===============================  =================================
here                      where the system has it          elsewhere
========================  ===============================  =================================
:func:`pread`             ``os.pread``                     seek + read under a lock, the
:func:`pwrite`            ``os.pwrite``                    descriptor's position restored
:func:`fdatasync`         ``os.fdatasync``                 ``os.fsync`` (macOS, Windows)
:func:`fsync_dir`         ``fsync`` of the directory       nothing (Windows cannot open one)
:func:`copy_file_range`   ``os.copy_file_range`` (Linux)   ``None``: the caller copies
:func:`start_writeback`   ``sync_file_range`` (Linux)      ``False``: the caller syncs
:func:`drop_cached`       ``posix_fadvise(DONTNEED)``      nothing
:func:`map_readonly`      ``MAP_SHARED | MAP_POPULATE``    a plain read-only map
:func:`reserve_anonymous` a private unreserved map (Linux) ``None``: the caller uses NumPy
:func:`release_pages`     ``madvise(MADV_DONTNEED)``       (only with a reserved map)
:func:`register_at_fork`  ``os.register_at_fork``          nothing (no ``fork()``)
:func:`lock_shared`       ``flock(LOCK_SH)``               Windows: ``msvcrt.locking`` of
:func:`lock_taken`        ``flock(LOCK_EX | LOCK_NB)``     the first byte (per handle too)
:func:`lock_exclusive`    ``flock(LOCK_EX | LOCK_NB)``     (as above; ``ENOLCK`` without)
:func:`process_exists`    ``kill(pid, 0)`` (POSIX)         ``None``: unknown (Windows)
:func:`available_cpus`    affinity, cgroup CPU quota       ``os.cpu_count()``, else 1
:func:`physical_memory`   ``sysconf`` pages × page size    ``None``
:data:`REPLACE_WHILE_OPEN`  POSIX: replace a file while    Windows: close it first
                            a descriptor of it is open
========================  ===============================  =================================

Test mode: with the environment variable ``JNRRD_SIMULATE_PLATFORM`` set to ``windows`` or
``macos`` when this module is first imported, the functions that system lacks are removed
from ``os`` and ``mmap`` for the whole process (:func:`simulate`), and the decisions above
are made as on that system, so the whole test suite runs through the fallbacks
(``tests/conftest.py``; ``.ci/run`` runs the quick suite that way). It is never set in use.
"""

from __future__ import annotations

import ctypes
import errno
import math
import mmap
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

try:
    import fcntl as _fcntl
except ImportError:  # Windows
    _fcntl = None  # type: ignore[assignment]
try:
    import msvcrt as _msvcrt
except ImportError:  # POSIX
    _msvcrt = None  # type: ignore[assignment]

__all__ = ["FILE_LOCKS", "REPLACE_WHILE_OPEN", "SIMULATE_ENV", "SYSTEM", "available_cpus",
           "cgroup_cpu_limit", "copy_file_range", "drop_cached", "fdatasync", "fsync_dir",
           "lock_exclusive", "lock_shared", "lock_taken", "map_readonly", "physical_memory",
           "pread", "pread_into", "process_exists", "pwrite", "register_at_fork",
           "release_pages", "reserve_anonymous", "simulate", "start_writeback"]

SIMULATE_ENV = "JNRRD_SIMULATE_PLATFORM"

#: the ``mmap`` advice and flags macOS's Python has (the rest are removed when simulating it)
_MACOS_MMAP = {"MAP_SHARED", "MAP_PRIVATE", "MAP_ANON", "MAP_ANONYMOUS", "MADV_NORMAL",
               "MADV_RANDOM", "MADV_SEQUENTIAL", "MADV_WILLNEED", "MADV_DONTNEED",
               "MADV_FREE", "MADV_FREE_REUSABLE", "MADV_FREE_REUSE"}
#: what each simulated system's ``os`` lacks of what this package (or a fallback) might call
_OS_LACKS = {
    "windows": ("pread", "pwrite", "preadv", "pwritev", "fdatasync", "copy_file_range",
                "posix_fadvise", "posix_fallocate", "sched_getaffinity", "register_at_fork",
                "fork", "mkfifo", "mknod", "sync"),
    "macos": ("fdatasync", "copy_file_range", "posix_fadvise", "posix_fallocate",
              "sched_getaffinity", "O_DIRECT"),
}


#: what each simulated system lacks but is left in ``os`` for other libraries' Linux code
#: (psutil, through Dask, reads ``sysconf`` when imported): hidden from this module only. (The
#: ``O_*`` flags Windows lacks stay too: the standard library's Linux code, ``shutil.rmtree``
#: on 3.13, uses them, and the package only asks for them with ``getattr``.)
_OS_HIDDEN = {"windows": ("sysconf",), "macos": ()}
_hidden: tuple[str, ...] = ()


def _os(name: str) -> Any:
    """``os.<name>``, or None where the system (or the simulated one) lacks it."""
    return None if name in _hidden else getattr(os, name, None)


class _Missing:
    """A class attribute that is not there (``hasattr`` is False on the class and instances)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        raise AttributeError(self.name)


class _WindowsMap(mmap.mmap):
    """``mmap.mmap`` as Windows has it: ``(fileno, length, tagname, access, offset)``, no
    ``flags`` or ``prot``, no ``madvise``."""

    madvise = _Missing()

    def __new__(cls, fileno: int, length: int, tagname: str | None = None,
                access: int = mmap.ACCESS_DEFAULT, offset: int = 0) -> _WindowsMap:
        return super().__new__(cls, fileno, length, access=access, offset=offset)


def simulate(system: str) -> None:
    """Remove from ``os`` and ``mmap``, for the whole process, what ``system`` ("windows" or
    "macos") lacks, and decide as on it from now on (test mode only: see the module
    docstring). Call it before the rest of the package is imported."""
    global SYSTEM, REPLACE_WHILE_OPEN, _hidden
    if system not in _OS_LACKS:
        raise ValueError(f"{SIMULATE_ENV}: expected 'windows' or 'macos', got {system!r}")
    _hidden = _OS_HIDDEN[system]
    for name in _OS_LACKS[system]:
        if hasattr(os, name):
            delattr(os, name)
    if hasattr(os, "process_cpu_count"):  # (3.13: os.py's version calls sched_getaffinity)
        os.process_cpu_count = os.cpu_count
    for name in list(vars(mmap)):
        if name.startswith(("MAP_", "MADV_", "PROT_")) and (
                system == "windows" or name not in _MACOS_MMAP):
            delattr(mmap, name)
    if system == "windows":
        mmap.mmap = _WindowsMap  # type: ignore[misc,assignment]
    SYSTEM = system
    REPLACE_WHILE_OPEN = system != "windows"


def _system() -> str:
    if sys.platform.startswith("linux"):
        return "linux"
    if sys.platform == "darwin":
        return "macos"
    if sys.platform in ("win32", "cygwin"):
        return "windows"
    return sys.platform


#: "linux", "macos", "windows", or ``sys.platform`` for the rest
SYSTEM = _system()
#: whether a file may be replaced (``os.replace``) while a descriptor of it is open: POSIX
#: yes; on Windows that fails, so nothing may hold the old file across a replace
REPLACE_WHILE_OPEN = SYSTEM != "windows"
#: whether a listening socket may take a port still in TIME_WAIT (``SO_REUSEADDR``): on
#: Windows that option lets another process share a bound port, so it stays off there
REUSE_ADDRESS = SYSTEM != "windows"

#: whether the system has file locks that :func:`lock_taken` can see (``fcntl.flock`` on
#: POSIX, ``msvcrt.locking`` on Windows; both belong to the open file, not the process, so a
#: lock taken through one descriptor is seen through another in the same process). The
#: simulated Windows keeps ``flock``: the same meaning, and the only one this machine has.
FILE_LOCKS = _fcntl is not None or _msvcrt is not None

# -- positional I/O -----------------------------------------------------------------------
#: serialises the seek-based fallbacks of pread and pwrite (one descriptor position each)
_SEEK_LOCK = threading.Lock()


def pread(fd: int, size: int, offset: int) -> bytes:
    """Up to ``size`` bytes of ``fd`` at ``offset`` (short only at the end of the file),
    without moving its position: ``os.pread``, else seek + read under a lock with the
    position restored (callers must not read the descriptor's position meanwhile)."""
    fn = _os("pread")
    if fn is not None:
        return fn(fd, size, offset)  # type: ignore[no-any-return]
    with _SEEK_LOCK:
        pos = os.lseek(fd, 0, os.SEEK_CUR)
        try:
            os.lseek(fd, offset, os.SEEK_SET)
            parts, got = [], 0
            while got < size:
                chunk = os.read(fd, size - got)
                if not chunk:
                    break
                parts.append(chunk)
                got += len(chunk)
            return b"".join(parts)
        finally:
            os.lseek(fd, pos, os.SEEK_SET)


#: the step of :func:`pread_into`'s fallback: what it holds besides the caller's buffer
_PREAD_STEP = 256 << 10


def pread_into(fd: int, view: memoryview, offset: int) -> int:
    """Fill ``view`` (bytes) from ``offset`` of ``fd``; the bytes read (fewer only at the end
    of the file): ``os.preadv`` straight into it, else :func:`pread` and a copy, in steps of
    256 KiB (a large read is never staged whole: it costs its buffer and one step)."""
    fn = _os("preadv")
    n, got = len(view), 0
    if fn is None:
        while got < n:
            data = pread(fd, min(_PREAD_STEP, n - got), offset + got)
            k = len(data)
            view[got : got + k] = data
            del data  # one step held at a time
            got += k
            if not k:
                break
        return got
    while got < n:
        k = fn(fd, [view[got:]], offset + got)
        if k <= 0:
            break
        got += k
    return got


def pwrite(fd: int, data: Any, offset: int) -> int:
    """Write ``data`` (a bytes-like object) at ``offset`` of ``fd``; the bytes written (all of
    them in the fallback): ``os.pwrite``, else seek + write under a lock, position restored."""
    fn = _os("pwrite")
    if fn is not None:
        return fn(fd, data, offset)  # type: ignore[no-any-return]
    view = memoryview(data).cast("B")
    with _SEEK_LOCK:
        pos = os.lseek(fd, 0, os.SEEK_CUR)
        try:
            os.lseek(fd, offset, os.SEEK_SET)
            done = 0
            while done < len(view):
                done += os.write(fd, view[done:])
            return done
        finally:
            os.lseek(fd, pos, os.SEEK_SET)


# -- durability ---------------------------------------------------------------------------
def fdatasync(fd: int) -> None:
    """Flush ``fd``'s data to disk: ``os.fdatasync``, else ``os.fsync`` (which also flushes
    metadata that ``fdatasync`` may leave)."""
    sync = _os("fdatasync")
    (sync or os.fsync)(fd)


def fsync_dir(path: str) -> None:
    """Flush a change to the entries of directory ``path`` (a rename, a new file) to disk;
    nothing on Windows, which cannot open a directory (its file system journals renames), or
    where opening or syncing it fails (best effort: the files themselves were synced)."""
    if SYSTEM == "windows":
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _bind_sync_file_range() -> Any:
    if SYSTEM != "linux":
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_SYNC_FILE_RANGE = _bind_sync_file_range()
_SYNC_FILE_RANGE_WRITE = 2  # <linux/fs.h>


def start_writeback(fd: int) -> bool:
    """Start writing ``fd``'s dirty pages to disk without waiting (Linux
    ``sync_file_range(SYNC_FILE_RANGE_WRITE)``): True when started, False where the system
    cannot (the caller may run :func:`fdatasync` on a background thread instead)."""
    fn = _SYNC_FILE_RANGE
    return fn is not None and fn(fd, 0, 0, _SYNC_FILE_RANGE_WRITE) == 0


def drop_cached(fd: int, offset: int, length: int) -> None:
    """Advise the kernel to drop ``fd``'s pages ``[offset, offset + length)`` from the page
    cache (``posix_fadvise(POSIX_FADV_DONTNEED)``; advice only, nothing elsewhere)."""
    fadvise = _os("posix_fadvise")
    if fadvise is None:
        return
    try:
        fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
    except OSError:
        pass


def copy_file_range(src: int, dst: int, count: int, src_offset: int, dst_offset: int
                    ) -> int | None:
    """Copy up to ``count`` bytes in the kernel (``os.copy_file_range``, Linux): the bytes
    copied (0 at the end of ``src``), or None where the system or file system cannot (the
    caller copies through user space)."""
    fn = _os("copy_file_range")
    if fn is None:
        return None
    try:
        return int(fn(src, dst, count, src_offset, dst_offset))
    except OSError:
        return None


# -- memory maps --------------------------------------------------------------------------
def map_readonly(fd: int) -> mmap.mmap:
    """A read-only map of the whole file ``fd``, its page tables filled at once where the
    system can (``MAP_POPULATE``, Linux: no page fault per 4 KiB while it is read).
    ``OSError``/``ValueError`` as ``mmap.mmap`` raises them (an empty file)."""
    populate = getattr(mmap, "MAP_POPULATE", 0)
    if populate and hasattr(mmap, "MAP_SHARED") and hasattr(mmap, "PROT_READ"):
        return mmap.mmap(fd, 0, flags=mmap.MAP_SHARED | populate, prot=mmap.PROT_READ)
    return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)


def reserve_anonymous(size: int) -> mmap.mmap | None:
    """A private anonymous map of ``size`` bytes that reserves address space, not memory
    (pages become resident when first written and go back with :func:`release_pages`): Linux
    only (``MAP_NORESERVE`` where ``mmap`` names it; the kernel's overcommit decides
    otherwise). None elsewhere, without ``madvise``, or when the system refuses the map."""
    if SYSTEM != "linux" or not hasattr(mmap.mmap, "madvise") \
            or not hasattr(mmap, "MADV_DONTNEED") or not hasattr(mmap, "MAP_ANONYMOUS"):
        return None
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0)
    try:
        return mmap.mmap(-1, size, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    except (OSError, ValueError, OverflowError):
        return None


def release_pages(buffer: mmap.mmap, start: int, length: int) -> None:
    """Give the pages of ``buffer[start:start + length]`` (page-aligned) back to the system at
    once; they read as zeros after (a map from :func:`reserve_anonymous`)."""
    buffer.madvise(mmap.MADV_DONTNEED, start, length)


# -- processes ----------------------------------------------------------------------------
def register_at_fork(after_in_child: Callable[[], None]) -> None:
    """Call ``after_in_child`` in a child after ``fork()``; nothing where there is no fork."""
    register = _os("register_at_fork")
    if register is not None:
        register(after_in_child=after_in_child)


def lock_shared(fd: int) -> None:
    """Hold a lock on ``fd``'s file until ``fd`` is closed, for :func:`lock_taken` to see
    (best effort: nothing where the file system refuses, or without :data:`FILE_LOCKS`)."""
    try:
        if _fcntl is not None:
            _fcntl.flock(fd, _fcntl.LOCK_SH)
        elif _msvcrt is not None:
            os.lseek(fd, 0, os.SEEK_SET)
            _msvcrt.locking(fd, _msvcrt.LK_NBLCK, 1)  # (its first byte; the file may be empty)
    except OSError:
        pass


def lock_taken(fd: int) -> bool:
    """Whether another open file holds a lock on ``fd``'s file (:func:`lock_shared`): an
    exclusive lock cannot be taken at once (one taken is let go, or goes when ``fd`` is
    closed). False without :data:`FILE_LOCKS`."""
    try:
        if _fcntl is not None:
            _fcntl.flock(fd, _fcntl.LOCK_EX | _fcntl.LOCK_NB)
        elif _msvcrt is not None:
            os.lseek(fd, 0, os.SEEK_SET)
            _msvcrt.locking(fd, _msvcrt.LK_NBLCK, 1)
            _msvcrt.locking(fd, _msvcrt.LK_UNLCK, 1)
    except OSError:
        return True
    return False


def lock_exclusive(fd: int) -> None:
    """Take an exclusive lock on ``fd``'s file without waiting, held until it is closed:
    ``flock(LOCK_EX | LOCK_NB)``; Windows: ``msvcrt.locking`` of the first byte. Raises
    ``BlockingIOError`` when another open file holds it, ``OSError`` with ``ENOLCK`` (or
    ``EOPNOTSUPP``) when the file system has no such locks or the system none at all."""
    if _fcntl is not None:
        _fcntl.flock(fd, _fcntl.LOCK_EX | _fcntl.LOCK_NB)
        return
    if _msvcrt is None:
        raise OSError(errno.ENOLCK, "no advisory file locks on this system")
    os.lseek(fd, 0, os.SEEK_SET)
    try:
        _msvcrt.locking(fd, _msvcrt.LK_NBLCK, 1)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EDEADLK):
            raise BlockingIOError(exc.errno, "locked") from None
        raise


def process_exists(pid: int) -> bool | None:
    """Whether process ``pid`` exists on this machine (POSIX: signal 0, which checks without
    sending), or None where that cannot be asked safely (Windows: ``os.kill`` would end it)."""
    if SYSTEM == "windows" or os.name != "posix":
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, owned by another user
        return True
    return True


def physical_memory() -> int | None:
    """The machine's memory in bytes, or None when the system does not say."""
    sysconf = _os("sysconf")
    try:
        return int(sysconf("SC_PHYS_PAGES") * sysconf("SC_PAGE_SIZE")) if sysconf else None
    except (ValueError, OSError):
        return None


def cgroup_cpu_limit(root: str = "/sys/fs/cgroup", membership: str = "/proc/self/cgroup"
                     ) -> float | None:
    """The CPUs this process's Linux control group may use (quota / period, the tightest of
    the group and its ancestors: cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``), or None:
    no limit, not Linux, or nothing readable."""
    try:
        with open(membership) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    limits = []
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        files: list[tuple[str, str | None]]
        if controllers == "":
            files = [("cpu.max", None)]
            base = root
        elif "cpu" in controllers.split(","):
            files = [("cpu.cfs_quota_us", "cpu.cfs_period_us")]
            base = os.path.join(root, controllers)
        else:
            continue
        parts = [p for p in path.split("/") if p and p != ".."]
        for depth in range(len(parts), -1, -1):
            group = os.path.join(base, *parts[:depth])
            limits += [x for x in (_read_quota(group, *fs) for fs in files) if x is not None]
    return min(limits) if limits else None


def _read_quota(group: str, quota_file: str, period_file: str | None) -> float | None:
    try:
        with open(os.path.join(group, quota_file)) as f:
            words = f.read().split()
        if period_file is not None:
            with open(os.path.join(group, period_file)) as f:
                words += f.read().split()
        quota, period = words[0], float(words[1])
    except (OSError, ValueError, IndexError):
        return None
    if quota == "max" or quota.startswith("-") or period <= 0:
        return None
    try:
        return float(quota) / period
    except ValueError:
        return None


def available_cpus() -> int:
    """The CPUs this process may use: its affinity mask (``os.process_cpu_count`` on Python
    3.13, ``sched_getaffinity`` on Linux), else ``os.cpu_count()``, capped by a Linux control
    group's CPU quota (rounded up); at least 1."""
    count = None
    process_count, affinity = _os("process_cpu_count"), _os("sched_getaffinity")
    if process_count is not None:
        count = process_count()
    if count is None and affinity is not None:
        try:
            count = len(affinity(0))
        except OSError:
            count = None
    if count is None:
        count = os.cpu_count()
    n = count or 1
    quota = cgroup_cpu_limit() if SYSTEM == "linux" else None
    if quota is not None:
        n = min(n, max(1, math.ceil(quota)))
    return max(1, n)


_requested = os.environ.get(SIMULATE_ENV)
if _requested:
    simulate(_requested)
