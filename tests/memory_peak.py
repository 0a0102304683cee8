"""The peak memory of a block of code, for the tests that bound what a read may allocate.

:func:`measured` takes tracemalloc's traced peak, except while the obstore backend is the
configured one (the obstore half of the remote suite: tests/conftest.py): then it samples the
process's resident set size (psutil, every 2 ms) instead, for two reasons. obstore's buffers
are Rust's, which tracemalloc does not see; and stopping tracemalloc while one of obstore's
native threads attaches to the interpreter crashes CPython before 3.12.9 / 3.13.2
(python/cpython#128679, a race in tracemalloc: it happens with a well-behaved server too).
"""

from __future__ import annotations

import contextlib
import threading
import tracemalloc
from collections.abc import Iterator

import jnrrd

__all__ = ["measured", "native_threads"]


def native_threads() -> bool:
    """Whether remote reads run on obstore's native threads (the configured backend)."""
    return jnrrd.config.current().io.remote_backend == "obstore"


@contextlib.contextmanager
def measured(stats: dict[str, int]) -> Iterator[dict[str, int]]:
    """Set ``stats["peak"]`` to the bytes the block allocated at its peak (also when it
    raises)."""
    if not native_threads():
        tracemalloc.start()
        tracemalloc.reset_peak()
        try:
            yield stats
        finally:
            stats["peak"] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        return
    import psutil  # (installed with distributed, in the test extra)

    proc = psutil.Process()
    base = proc.memory_info().rss
    top = [base]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.002):
            top[0] = max(top[0], proc.memory_info().rss)

    sampler = threading.Thread(target=sample, name="rss-sampler", daemon=True)
    sampler.start()
    try:
        yield stats
    finally:
        done.set()
        sampler.join(5.0)
        stats["peak"] = max(top[0], proc.memory_info().rss) - base
