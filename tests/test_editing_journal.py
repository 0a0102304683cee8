"""In-place commits of internal files (docs/editing.md, "Commits and crashes"): a header torn
by a writer that died while rewriting it is read from the commit's journal by every reader
(open, read, read_header, validate) and applied for good by the next writer; a journal is
used only for its own file and only when that file's header fails its checksum; a header that
fails with no journal is a ``DataError``; and readers racing a writer's in-place commits read
one commit or another, never a torn header."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from editing_support import assert_file_equals

import jnrrd
from jnrrd.editing.consistent import verify
from jnrrd.storage.journal import file_identity, journal_path, read_journal, write_journal

HERE = os.path.dirname(os.path.abspath(__file__))

#: a writer that dies (``os._exit``) halfway through the in-place rewrite of the header
_DIE_IN_HEADER = """
import os, sys
import numpy as np
import jnrrd
from jnrrd.editing import internal

real = internal.pwrite_all

def torn(fd, data, offset):
    if offset == 0:  # the header: half of it, then death
        real(fd, data[: len(data) // 2], 0)
        os._exit(3)
    real(fd, data, offset)

internal.pwrite_all = torn
with jnrrd.open(sys.argv[1], mode="r+") as vol:
    vol[...] = 2
"""


def _volume(path) -> np.ndarray:
    data = np.ones((40, 40, 24), np.uint16)
    with jnrrd.create(path, data.shape, "uint16", tile=4, levels=2) as vol:  # a long header
        vol[...] = data
    return data


def _die_in_header(path) -> None:
    proc = subprocess.run([sys.executable, "-c", _DIE_IN_HEADER, str(path)],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=os.path.dirname(HERE)))
    assert proc.returncode == 3, proc.stderr


def test_a_header_torn_by_a_dead_writer_reads_from_the_journal(tmp_path):
    path = tmp_path / "v.jnrrd"
    old = _volume(path)
    _die_in_header(path)
    with open(path, "rb") as f:
        assert verify(f.read(1 << 20)) is False  # the file's own header is torn
    assert os.path.exists(journal_path(str(path)))
    new = np.full_like(old, 2)
    assert_file_equals(path, new, 2)  # open, read, validate(deep=True): the new commit
    assert jnrrd.read_header(path)["sizes"] == [40, 40, 24]
    with jnrrd.open(path, mode="r+") as vol:  # the next writer applies the journal
        assert (vol[...] == 2).all()
    assert not os.path.exists(journal_path(str(path)))
    with open(path, "rb") as f:
        assert verify(f.read(1 << 20)) is True
    assert_file_equals(path, new, 2)


def test_a_torn_header_without_a_journal_is_a_data_error(tmp_path):
    path = tmp_path / "v.jnrrd"
    _volume(path)
    _die_in_header(path)
    os.unlink(journal_path(str(path)))
    with pytest.raises(jnrrd.DataError, match="header_checksum"):
        jnrrd.open(path)
    problems = jnrrd.validate(path)
    assert any("header_checksum" in p.message for p in problems if p.severity == "error")


def test_a_journal_is_used_only_for_its_own_torn_file(tmp_path):
    path = tmp_path / "v.jnrrd"
    data = _volume(path)
    with open(path, "r+b") as f:
        identity = file_identity(f.fileno())
        head = f.read(1 << 16)
    # a journal of another file: never used
    write_journal(str(path), (identity[0], identity[1] + 1), b"garbage")
    assert read_journal(str(path), identity) is None
    assert_file_equals(path, data, 2)
    # a journal of this file whose header is consistent (a commit that finished but died
    # before removing its journal): readers need not look, the writer removes it
    write_journal(str(path), identity, head)
    assert_file_equals(path, data, 2)
    jnrrd.open(path, mode="r+").close()
    assert not os.path.exists(journal_path(str(path)))
    # a cut-short journal is never used
    write_journal(str(path), identity, head)
    with open(journal_path(str(path)), "r+b") as f:
        f.truncate(100)
    assert read_journal(str(path), identity) is None


def test_readers_racing_in_place_commits_read_whole_commits(tmp_path):
    path = tmp_path / "v.jnrrd"
    with jnrrd.create(path, (32, 32, 24), "uint8", tile=4, compression="raw") as vol:
        vol[...] = 0  # 384 tiles: a header of several pages
    stop = threading.Event()
    seen: set[int] = set()
    errors: list[BaseException] = []

    def read() -> None:
        try:
            while not stop.is_set():
                with jnrrd.open(path) as vol:
                    a = vol[...]
                v = int(a[0, 0, 0])
                assert (a == v).all(), "a mix of two commits"
                seen.add(v)
        except BaseException as exc:
            errors.append(exc)

    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in readers:
        t.start()
    try:
        with jnrrd.open(path, mode="r+") as vol:
            for v in range(1, 13):
                vol[...] = v
                vol.commit()
    finally:
        stop.set()
        for t in readers:
            t.join(60)
    assert errors == []
    assert len(seen) > 1
