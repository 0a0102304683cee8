"""The only place the package starts threads; everything else submits work here.

- the shared pool (one thread per CPU the process may use, :func:`default_threads`, or
  more when ``threads`` asks for more) runs tile tasks: :class:`Running`,
  :func:`run_parallel`, :func:`run_each` (items taken from an iterator as threads come
  free), each using :func:`thread_count` threads at once (the ``threads``
  setting in force, docs/api.md "Configuration"); a one-thread helper serves
  :func:`fork_join` and :func:`background`. Both are created on first use, and again in a
  child after ``fork()``;
- :func:`ordered_map`: a private pool of a given size mapping a function in order (deep
  validation, the frame-parallel zstd decoder); :func:`private_pool`: such a pool's
  ``submit`` for a block of code (the parallel gzip writer);
- :class:`OrderedQueue`: callables run in order on one background thread (a tiled write
  stores a row of tiles while the next is encoded);
- :func:`io_submit`: blocking I/O (a remote store's requests on filesystems without an event
  loop, uploads) on a pool of :data:`IO_THREADS` threads, created on first use;
- :func:`request_submit`: blocking range requests (the obstore backend's, each waiting
  outside the GIL) on a pool of up to :data:`REQUEST_THREADS` threads, created as requests
  are in flight at once;
- :func:`start_daemon`: one background daemon thread (the write-back flusher, the release of
  an old file's blocks after an atomic replace).
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from itertools import chain
from typing import Any

from ._config import current
from ._platform import available_cpus, register_at_fork

__all__ = ["IO_THREADS", "REQUEST_THREADS", "OrderedQueue", "Running", "background",
           "default_threads", "exiting", "fork_join", "in_request_thread", "io_submit",
           "ordered_map", "private_pool", "request_submit", "run_each", "run_parallel",
           "start_daemon", "thread_count", "zstd_frame_map"]

#: threads of the I/O pool: requests in flight to a remote store without an event loop
IO_THREADS = 16
#: the most threads of the request pool: blocking range requests in flight at once
REQUEST_THREADS = 64

_POOL: ThreadPoolExecutor | None = None
_HELPER: ThreadPoolExecutor | None = None
_IO: ThreadPoolExecutor | None = None
_REQUESTS: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()
_THREADS: int | None = None
_POOL_SIZE = 0


def _after_fork_in_child() -> None:
    """A forked child inherits the pool objects but none of their threads: work submitted to
    them would wait forever (and a lock held by another parent thread at the fork stays
    held). Start afresh; the child builds its own pools on first use."""
    global _POOL, _HELPER, _IO, _REQUESTS, _POOL_LOCK, _THREADS, _POOL_SIZE
    _POOL = None
    _POOL_SIZE = 0
    _THREADS = None  # (a child may be given other CPUs)
    _HELPER = None
    _IO = None
    _REQUESTS = None
    _POOL_LOCK = threading.Lock()


register_at_fork(_after_fork_in_child)


def default_threads() -> int:
    """The threads that decode or encode tiles at once: the CPUs this process may use (its
    affinity mask and a Linux control group's CPU quota, not the machine's count;
    :func:`jnrrd._platform.available_cpus`), found on first use."""
    global _THREADS
    if _THREADS is None:
        _THREADS = available_cpus()
    return _THREADS


def thread_count(threads: int | None = None) -> int:
    """The threads a task list may use at once: ``threads`` when given, else the
    ``threads`` setting in force here (``jnrrd.config``), else :func:`default_threads`."""
    n = threads if threads is not None else current().io.threads
    return n if n is not None else default_threads()


def _pool(threads: int = 0) -> ThreadPoolExecutor:
    """The shared pool, with at least ``threads`` threads (a larger pool replaces a smaller
    one; the old one finishes what it was given)."""
    global _POOL, _POOL_SIZE
    with _POOL_LOCK:
        # at least two threads: work submitted from a pool thread still finds one free
        size = max(2, default_threads(), threads)
        if _POOL is None or size > _POOL_SIZE:
            old, _POOL, _POOL_SIZE = _POOL, ThreadPoolExecutor(
                max_workers=size, thread_name_prefix="jnrrd"), size
            if old is not None:
                old.shutdown(wait=False)
        pool = _POOL
    return pool


def io_submit(fn: Callable[..., Any], *args: Any) -> Future[Any]:
    """Run ``fn(*args)`` on the I/O pool (blocking calls that wait on the network)."""
    global _IO
    with _POOL_LOCK:
        if _IO is None:
            _IO = ThreadPoolExecutor(max_workers=IO_THREADS, thread_name_prefix="jnrrd-io")
        pool = _IO
    return _submit(pool, fn, *args)


#: set when the interpreter begins to exit (before its pools' threads are joined)
_EXITING = threading.Event()
# (threading's hook for the pools' own exit handling, as concurrent.futures uses; it runs
# before their threads are joined, and handlers registered later run first)
_register_exit = getattr(threading, "_register_atexit", None)
if _register_exit is not None:
    _register_exit(_EXITING.set)
_REQUEST_THREAD = threading.local()


def exiting() -> bool:
    """Whether the interpreter has begun to exit: the main thread ended (it returned, or a
    Ctrl-C ended it) and the threads are being joined."""
    return _EXITING.is_set()


def in_request_thread() -> bool:
    """Whether the calling thread is one of the request pool's (:func:`request_submit`)."""
    return getattr(_REQUEST_THREAD, "yes", False)


def _mark_request_thread() -> None:
    _REQUEST_THREAD.yes = True


def request_submit(fn: Callable[..., Any], *args: Any) -> Future[Any]:
    """Run ``fn(*args)`` on the request pool (blocking range requests; a thread is started
    only when none is idle). Like every pool here its threads are joined at interpreter
    exit, before finalization: a request in flight ends first (within its timeouts)."""
    global _REQUESTS
    with _POOL_LOCK:
        if _REQUESTS is None:
            _REQUESTS = ThreadPoolExecutor(max_workers=REQUEST_THREADS,
                                           thread_name_prefix="jnrrd-request",
                                           initializer=_mark_request_thread)
        pool = _REQUESTS
    return _submit(pool, fn, *args)


def _submit(pool: ThreadPoolExecutor, fn: Callable[..., Any], *args: Any) -> Future[Any]:
    """``pool.submit(fn, *args)``; once the interpreter is exiting (its pools take no more
    work: a read in an ``atexit`` handler) ``fn`` runs here and its future is returned done.
    Only for work that needs no other thread to make progress."""
    try:
        return pool.submit(fn, *args)
    except RuntimeError:  # "cannot schedule new futures after (interpreter) shutdown"
        done: Future[Any] = Future()
        done.set_running_or_notify_cancel()
        try:
            done.set_result(fn(*args))
        except BaseException as exc:
            done.set_exception(exc)
        return done


class Running:
    """Closures started on the shared pool, :func:`thread_count` of them at once (``threads``
    when given); :meth:`wait` joins them (the first failure stops what has not started and is
    raised once everything else has stopped)."""

    def __init__(self, tasks: Sequence[Callable[[], None]], *,
                 threads: int | None = None) -> None:
        n = min(thread_count(threads), len(tasks))
        self._inline = list(tasks) if n <= 1 else []
        self._lock = threading.Lock()
        self._todo = [] if self._inline else list(reversed(tasks))
        self._failed = False
        pool = _pool(n) if n > 1 else None
        self._futures = [_submit(pool, self._drain) for _ in range(n)] if pool else []

    def _drain(self) -> None:
        while True:
            with self._lock:
                if self._failed or not self._todo:
                    return
                task = self._todo.pop()
            try:
                task()
            except BaseException:
                with self._lock:
                    self._failed = True
                raise

    def wait(self, *, raise_errors: bool = True) -> None:
        for t in self._inline:
            t()
        self._inline = []
        if not self._futures:
            return
        futures, self._futures = self._futures, []
        wait(futures)
        if raise_errors:
            for f in futures:
                f.result()


def run_parallel(tasks: Sequence[Callable[[], None]], *, helpers: int | None = None,
                 threads: int | None = None) -> None:
    """Run small closures on the shared pool and in the calling thread.

    The calling thread and up to ``helpers`` pool threads (default: :func:`thread_count`
    minus one: ``threads`` when given, else the setting in force) take tasks from one
    shared list until it is empty: a task costs no hand-off of its own (so by default as
    many threads work as the process may use CPUs). On the first failure no further task
    starts; the running ones finish, then that failure is raised.
    """
    if len(tasks) <= 1:
        for t in tasks:
            t()
        return
    lock = threading.Lock()
    state = {"next": 0}
    errors: list[BaseException] = []

    def drain() -> None:
        while True:
            with lock:
                i = state["next"]
                if errors or i >= len(tasks):
                    return
                state["next"] = i + 1
            try:
                tasks[i]()
            except BaseException as exc:
                with lock:
                    errors.append(exc)
                return

    n = thread_count(threads) - 1 if helpers is None else helpers
    pool = _pool(n)
    futures = [_submit(pool, drain) for _ in range(max(0, min(n, len(tasks) - 1)))]
    drain()
    wait(futures)
    if errors:
        raise errors[0]


def run_each(items: Iterable[Any], fn: Callable[[Any], None], *,
             threads: int | None = None) -> None:
    """``fn(item)`` for every item of ``items``, on the shared pool and in the calling thread.

    Like :func:`run_parallel`, but the items are taken one at a time from the iterator (under
    a lock) as threads come free: nothing is built per item ahead of its call, so a read of
    many tiles holds a few Python objects, not one task per tile (they would also wake the
    garbage collector). A single item runs in the calling thread. On the first failure
    (of ``fn`` or of the iterator) no further item is taken; the running calls finish, then
    that failure is raised.
    """
    it = iter(items)
    first = next(it, _END)
    second = next(it, _END) if first is not _END else _END
    if second is _END:
        if first is not _END:
            fn(first)
        return
    it = chain((first, second), it)
    lock = threading.Lock()
    errors: list[BaseException] = []

    def drain() -> None:
        while True:
            with lock:
                if errors:
                    return
                try:
                    item = next(it, _END)
                except BaseException as exc:
                    errors.append(exc)
                    return
            if item is _END:
                return
            try:
                fn(item)
            except BaseException as exc:
                with lock:
                    errors.append(exc)
                return

    n = thread_count(threads) - 1
    futures = [_submit(_pool(n), drain) for _ in range(max(0, n))]
    drain()
    wait(futures)
    if errors:
        raise errors[0]


_END = object()


def _helper() -> ThreadPoolExecutor:
    global _HELPER
    with _POOL_LOCK:
        if _HELPER is None:
            _HELPER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jnrrd-helper")
        return _HELPER


def fork_join(first: Callable[[], Any], second: Callable[[], Any]) -> tuple[Any, Any]:
    """``(first(), second())`` with ``second`` offered to a helper thread meanwhile.

    The calling thread runs ``first``; if the helper has not picked ``second`` up by then,
    the caller runs it too (it never waits for a queued task). The helper is not the shared
    pool, so tile encoding queued there does not hold ``second`` back.
    """
    future = _helper().submit(second)
    try:
        a = first()
    except BaseException:
        if not future.cancel():
            wait([future])
        raise
    if future.cancel():
        return a, second()
    return a, future.result()


def background(fn: Callable[[], Any]) -> Future[Any]:
    """``fn()`` offered to the one helper thread; the caller cancels or waits for the future
    (an editable volume encodes a changed tile ahead of its commit this way). While ``fn``
    runs, a ``fork_join`` half offered to the helper runs on its caller's thread: keep ``fn``
    to the length of the caller's own block."""
    return _helper().submit(fn)


def ordered_map(fn: Callable[[Any], Any], items: Iterable[Any], *, workers: int, name: str,
                ahead: int | None = None) -> Iterator[Any]:
    """``fn`` over ``items`` on a fresh pool of ``workers`` threads named ``name``; results in
    the order of ``items`` as they come (the first failure in that order is raised).
    ``ahead``: at most this many items taken from ``items`` and not yet yielded (a streamed
    write's memory bound); ``None`` takes them all at once."""
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name) as pool:
        if ahead is None:
            yield from pool.map(fn, items)
            return
        pending: deque[Future[Any]] = deque()
        try:
            for item in items:
                pending.append(pool.submit(fn, item))
                if len(pending) >= max(1, ahead):
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for f in pending:
                f.cancel()


@contextlib.contextmanager
def private_pool(workers: int, name: str) -> Iterator[Callable[..., Future[Any]]]:
    """A fresh pool of ``workers`` threads named ``name`` for the ``with`` block, as its
    ``submit``; on leaving, work not started is cancelled and running work waited for."""
    pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix=name)
    try:
        yield pool.submit
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def zstd_frame_map(fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Any]:
    """The frame-parallel zstd decoder's map: two threads (decoding releases the GIL), one
    when the ``threads`` setting in force is 1."""
    return ordered_map(fn, items, workers=min(2, thread_count()), name="jnrrd-zstd")


class OrderedQueue:
    """Runs callables in order on one background thread, at most ``depth`` waiting.

    The writer stores a finished row of tiles here while the calling thread goes on with the
    next row (and its pyramid). :meth:`drain` waits for everything and raises the first error;
    :meth:`close` also stops the thread (pending work is dropped when ``failed``).
    """

    def __init__(self, depth: int = 1) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="jnrrd-store")
        self._pending: list[Any] = []
        self._depth = depth

    def submit(self, fn: Callable[[], None]) -> None:
        """Queue ``fn`` (first waiting while more than ``depth`` are pending)."""
        while len(self._pending) > self._depth:
            self._pending.pop(0).result()
        self._pending.append(self._pool.submit(fn))

    def drain(self) -> None:
        """Wait for everything queued; raise the first error."""
        while self._pending:
            self._pending.pop(0).result()

    def close(self, *, failed: bool) -> None:
        """Stop the thread (pending work dropped when ``failed``)."""
        if failed:
            for f in self._pending:
                f.cancel()
        self._pool.shutdown(wait=True)
        self._pending = []


def start_daemon(target: Callable[..., Any], *args: Any, name: str) -> threading.Thread:
    """Start ``target(*args)`` on a new daemon thread named ``name`` and return the thread."""
    thread = threading.Thread(target=target, args=args, name=name, daemon=True)
    thread.start()
    return thread
