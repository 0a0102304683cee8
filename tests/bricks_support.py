"""What the bricks tests share (tests/test_bricks*.py): whether this system gives the
decoded-tile cache bricks at all. Bricks are used on Linux, where the system grants
unreserved maps (not under ``vm.overcommit_memory=2``); elsewhere the cache keeps plain arrays
(tests/test_tile_cache.py). The ``fresh_spares`` fixture is in conftest.py."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from jnrrd.engine.bricks import Bricks
from jnrrd.tiling.grid import TileGrid

needs_bricks = pytest.mark.skipif(
    not sys.platform.startswith("linux")
    or Bricks.create(TileGrid((512,), (0,), (512,), (0,)), np.dtype(np.float64)) is None,
    reason="this system gives the cache no bricks")
