"""Named regression tests for bugs the fuzzers found (one test per bug).

Each test reproduces the smallest input found. Bugs in files owned elsewhere are marked
``xfail(strict=True)`` with the file, line and cause, so the test starts failing (and must be
unmarked) the moment the fix lands.
"""

from __future__ import annotations

import json
import tracemalloc
import warnings

import numpy as np
import pytest

import jnrrd

SMALL = 16 << 20  # a read of a file of a few hundred bytes must stay far below this


def _peak(fn) -> int:
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def test_external_tile_read_reserves_only_the_file_size(tmp_path):
    """``ExternalSource.read`` called ``f.read(max_tile_bytes + 1 MiB)``; CPython reserves
    the whole count before reading, so every external tile cost 1 GiB of address space
    (found by test_fuzz_header_fields_all_kinds on external-files)."""
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, np.arange(120, dtype="u2").reshape(6, 5, 4), tile=(4, 3, 2),
                storage="external", compression="gzip")
    assert _peak(lambda: jnrrd.read(path)) < SMALL


def test_external_tile_read_still_capped_for_streams(tmp_path):
    """The bounded read also holds for openers that serve non-file streams."""
    import io

    from jnrrd.storage.fileobj import read_at_most

    assert read_at_most(io.BytesIO(b"x" * 100), 10) == b"x" * 10
    assert read_at_most(io.BytesIO(b"x" * 100), 1000) == b"x" * 100

    class Pipe(io.RawIOBase):  # no fileno(): read in pieces
        def __init__(self) -> None:
            self.left = 3 << 20

        def readable(self) -> bool:
            return True

        def readinto(self, b) -> int:
            n = min(len(b), self.left)
            b[:n] = b"y" * n
            self.left -= n
            return n

    assert len(read_at_most(io.BufferedReader(Pipe()), 5 << 20)) == 3 << 20
    assert len(read_at_most(io.BufferedReader(Pipe()), 1 << 20)) == 1 << 20


@pytest.mark.parametrize("encoding", [pytest.param("ascii", id="ascii"),
                                      pytest.param("hex", id="hex")])
def test_text_data_read_reserves_only_the_file_size(tmp_path, encoding):
    """Found by test_fuzz_untiled on attached-ascii (flip in the header)."""
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, np.arange(10, dtype="u2"), encoding=encoding)
    assert _peak(lambda: jnrrd.read(path)) < SMALL


def test_bad_offset_table_closes_the_file(tmp_path):
    """``InternalSource`` opened the file, then raised on a table running past the end of the
    file without closing it (a ResourceWarning per failed open; found by test_caps)."""
    import gc

    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, np.arange(24, dtype="u1").reshape(4, 6), tile=(2, 3))
    raw = path.read_bytes()
    h = jnrrd.read_header(path)
    table = h["tile:offset_table"]
    bad = raw.replace(json.dumps(table).encode(),
                      json.dumps([len(raw) * 10] * len(table)).encode())
    assert bad != raw
    path.write_bytes(bad)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        with pytest.raises(jnrrd.DataError, match="offset_table"):
            jnrrd.open(path)
        gc.collect()


def test_failed_read_leaves_no_decode_running(tmp_path, monkeypatch):
    """Found by test_fuzz_external_tiles: a read that fails on one tile returned while pool
    threads kept decoding the rest (under tracemalloc this crashed the interpreter)."""
    import threading
    import time

    from jnrrd.engine.tiles import TileDecoder

    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, np.zeros((64, 64), np.uint8), tile=(4, 4), compression="zstd")
    original = TileDecoder.decode
    raised = threading.Event()
    late = []

    def decode(self, level, coords, *args, **kwargs):
        if coords == (0, 0):
            raise jnrrd.DataError("tile 0: corrupt (injected)")
        time.sleep(0.002)
        if raised.is_set():
            late.append(coords)
        return original(self, level, coords, *args, **kwargs)

    monkeypatch.setattr(TileDecoder, "decode", decode)
    with jnrrd.open(path) as vol:
        with pytest.raises(jnrrd.DataError):
            vol[...]
        raised.set()
    time.sleep(0.5)
    assert late == []
