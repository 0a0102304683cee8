"""Running a test's work on several threads at once, every thread's failure reaching the test."""

from __future__ import annotations

import threading
from collections.abc import Callable


def run_threads(work: Callable[[int], None], count: int) -> None:
    """Run ``work(k)`` for ``k`` in ``range(count)``, each on its own thread, all at once; wait
    for all of them and raise the first failure (an assertion in a thread fails the test)."""
    errors: list[BaseException] = []

    def run(k: int) -> None:
        try:
            work(k)
        except BaseException as exc:  # raised below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
