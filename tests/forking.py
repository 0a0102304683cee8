"""The parent's side of a fork test, shared by the scripts that fork in a fresh interpreter
(tests/test_hangs.py, tests/test_obstore.py): wait for the child within a bound."""

from __future__ import annotations

import os
import sys
import time


def env_with_this_directory() -> dict[str, str]:
    """The environment for a script that imports this module: this directory on PYTHONPATH."""
    here = os.path.dirname(os.path.abspath(__file__))
    return {**os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))}


def wait_for_child(pid: int, bound: float, what: str) -> None:
    """Wait up to ``bound`` seconds for child ``pid``; kill it and exit 1 naming ``what`` if it
    runs longer, exit 1 if it fails, return if it exits 0."""
    t0 = time.monotonic()
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() - t0 > bound:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            sys.exit(f"{what} took more than {bound} s")
        time.sleep(0.02)
    if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
        sys.exit(f"{what} failed: wait status {status}")
