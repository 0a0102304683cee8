"""What the kept-map tests share (tests/test_spare_maps*.py, tests/test_bricks_spares.py):
the lease under a result, and the lazily freed bytes of a mapping."""

from __future__ import annotations

import numpy as np

from jnrrd.engine import spare_maps


def lease(arr: np.ndarray) -> spare_maps._Lease | None:
    """The kept-map lease under ``arr`` (through its views), or None."""
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr.base if isinstance(arr.base, spare_maps._Lease) else None


def lazy_free(address: int) -> int:
    """The ``LazyFree`` bytes of this process's mapping that starts at ``address``."""
    with open("/proc/self/smaps") as f:
        inside = False
        for line in f:
            head = line.split(None, 1)[0]
            if "-" in head and ":" not in head:
                inside = int(head.split("-")[0], 16) == address
            elif inside and head == "LazyFree:":
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no mapping at {address:#x}")
