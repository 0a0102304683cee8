"""Leftovers of interrupted writes: ``jnrrd.cleanup``, the sweep every write runs in its
directory, and ``jnrrd cleanup`` (issue 19 §4)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

import jnrrd
from jnrrd.cli import main
from jnrrd.storage.leftovers import write_journal
from jnrrd.storage.ownership import claim

HERE = Path(__file__).resolve().parent
A = np.arange(12 * 10 * 8, dtype=np.uint16).reshape(12, 10, 8)
B = A + 1

# Crash a write in a subprocess: the n-th atomic replace (1: the first file, 2: the header
# of a detached/external dataset) kills the process instead, as a SIGKILL would.
CRASH = """
import os, sys
import numpy as np
import jnrrd, jnrrd.storage.atomic, jnrrd.storage.writes
target, kind, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
real, calls = jnrrd.storage.atomic.replace, [0]
def replace(tmp, dst):
    calls[0] += 1
    if calls[0] == n:
        os._exit(9)
    real(tmp, dst)
jnrrd.storage.atomic.replace = jnrrd.storage.writes.replace = replace
a = np.arange(12 * 10 * 8, dtype=np.uint16).reshape(12, 10, 8) + 1
jnrrd.write(target, a, **OPTS[kind])
"""

KINDS = {"internal": ("v.jnrrd", 1), "external": ("v.jnrrd", 1),
         "detached": ("v.jnrrd", 2), "nhdr": ("v.nhdr", 2)}
OPTS = {"internal": {"tile": 4, "levels": 2, "compression": "zstd"},
        "external": {"tile": 4, "levels": 2, "storage": "external"},
        "detached": {"detached": True, "encoding": "gzip"},
        "nhdr": {"detached": True}}


def first_write(path: Path, kind: str) -> None:
    jnrrd.write(path, A, **OPTS[kind])


def crash(path: Path, kind: str) -> None:
    n = KINDS[kind][1]
    code = f"OPTS = {OPTS!r}\n{CRASH}"
    r = subprocess.run([sys.executable, "-c", code, str(path), kind, str(n)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 9, r.stderr


def age(path: Path, seconds: float = 3600) -> None:
    """Make ``path`` (and everything under it) ``seconds`` old."""
    t = time.time() - seconds
    if path.is_dir() and not path.is_symlink():
        for root, dirs, files in os.walk(path):
            for n in dirs + files:
                os.utime(os.path.join(root, n), (t, t), follow_symlinks=False)
    os.utime(path, (t, t), follow_symlinks=False)


def age_all(d: Path, seconds: float = 3600) -> None:
    for p in d.iterdir():
        age(p, seconds)


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(KINDS))
def test_cleanup_removes_stale_leftovers_of_a_crashed_write(tmp_path, kind):
    path = tmp_path / KINDS[kind][0]
    first_write(path, kind)
    before = set(os.listdir(tmp_path))
    crash(path, kind)
    left = set(os.listdir(tmp_path)) - before
    assert left, "the crash left nothing to clean"
    assert jnrrd.cleanup(tmp_path) == []  # fresh: a write may still be running
    assert set(os.listdir(tmp_path)) - before == left
    age_all(tmp_path)
    removed = jnrrd.cleanup(tmp_path)
    assert sorted(os.path.basename(p) for p in removed) == sorted(left)
    assert set(os.listdir(tmp_path)) == before
    np.testing.assert_array_equal(jnrrd.read(path)[0], A)  # the dataset is intact


@pytest.mark.parametrize("kind", [k if k == "external" else pytest.param(k, marks=pytest.mark.slow)
                                  for k in KINDS])
def test_a_write_sweeps_stale_leftovers_of_another_target(tmp_path, kind):
    path = tmp_path / KINDS[kind][0]
    first_write(path, kind)
    before = set(os.listdir(tmp_path))
    crash(path, kind)
    age_all(tmp_path)
    jnrrd.write(tmp_path / "other.jnrrd", B)
    assert set(os.listdir(tmp_path)) == before | {"other.jnrrd"}
    np.testing.assert_array_equal(jnrrd.read(path)[0], A)


def test_fresh_leftovers_are_kept_by_a_write(tmp_path):
    path = tmp_path / "v.jnrrd"
    first_write(path, "external")
    before = set(os.listdir(tmp_path))
    crash(path, "external")
    left = set(os.listdir(tmp_path)) - before
    jnrrd.write(tmp_path / "other.jnrrd", B)
    assert set(os.listdir(tmp_path)) == before | left | {"other.jnrrd"}


def test_a_running_write_keeps_its_files_however_old(tmp_path):
    target = tmp_path / "run.jnrrd"
    tmp = tmp_path / ".run.jnrrd.jnrrd-tmp-0123abcd"
    spool = tmp_path / ".run.jnrrd.jnrrd-tmp-0123abcd.level1"
    tiles = tmp_path / "run.89abcdef.tiles"
    data_tmp = tmp_path / ".run.0badf00d.data.raw.jnrrd-tmp-00000000"
    with write_journal(str(target)):
        tmp.write_bytes(b"x")
        spool.write_bytes(b"x")
        claim(str(tiles))  # a write claims its fresh names in its journal before making them
        tiles.mkdir()
        (tiles / "0").write_bytes(b"t")
        claim(str(tmp_path / "run.0badf00d.data.raw"))
        data_tmp.write_bytes(b"d")
        age_all(tmp_path)
        assert jnrrd.cleanup(tmp_path, older_than=0) == []
        jnrrd.write(tmp_path / "other.jnrrd", B)  # a write in the same directory
        assert tmp.exists() and spool.exists() and tiles.exists() and data_tmp.exists()
    # The write ended without cleaning up after itself (as if its own cleanup failed): its
    # temporary files are leftovers now; the tile directory has no journal any more to prove
    # it is ours, so it stays.
    removed = {os.path.basename(p) for p in jnrrd.cleanup(tmp_path, older_than=0)}
    assert removed == {tmp.name, spool.name, data_tmp.name}
    assert tiles.exists()


def test_referenced_files_are_never_removed(tmp_path):
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, A, tile=4, storage="external")
    jnrrd.write(tmp_path / "d.jnrrd", A, detached=True)
    # a header by another name that uses a data file named like a leftover of v.jnrrd
    data_name = next(n for n in os.listdir(tmp_path) if n.startswith("d.") and ".data" in n)
    alias = f"v.{'f' * 8}.data.raw"
    os.rename(tmp_path / data_name, tmp_path / alias)
    text = (tmp_path / "d.jnrrd").read_text().replace(data_name, alias)
    (tmp_path / "d.jnrrd").write_text(text)
    journal = tmp_path / ".v.jnrrd.jnrrd-tmp-00c0ffee.pending"  # a crashed write of v.jnrrd
    journal.write_bytes(b"")
    before = set(os.listdir(tmp_path))
    age_all(tmp_path)
    removed = {os.path.basename(p) for p in jnrrd.cleanup(tmp_path, older_than=60)}
    assert removed == {journal.name}
    assert set(os.listdir(tmp_path)) == before - {journal.name}
    np.testing.assert_array_equal(jnrrd.read(path)[0], A)
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "d.jnrrd")[0], A)


def test_names_like_leftovers_without_a_journal_are_user_files(tmp_path):
    user = ["scan.20231105.raw", "scan.0a0b0c0d.tiles", "x.12345678.data.raw", "notes.txt",
            ".hidden", "y.jnrrd-tmp-1234abcd"]
    for n in user:
        if n.endswith(".tiles"):
            (tmp_path / n).mkdir()
        else:
            (tmp_path / n).write_bytes(b"mine")
    age_all(tmp_path)
    assert jnrrd.cleanup(tmp_path, older_than=0) == []
    (tmp_path / ".scan.nhdr.jnrrd-tmp-00c0ffee.pending").write_bytes(b"")  # a crashed write
    age(tmp_path / ".scan.nhdr.jnrrd-tmp-00c0ffee.pending", 60)  # newer than the user files
    jnrrd.write(tmp_path / "other.nhdr", A, detached=True)
    assert set(user) <= set(os.listdir(tmp_path))


def test_a_header_naming_files_by_pattern_keeps_every_candidate(tmp_path):
    (tmp_path / "p.00000001.raw").write_bytes(A[..., :4].tobytes(order="F"))
    (tmp_path / "p.00000002.raw").write_bytes(A[..., 4:].tobytes(order="F"))
    (tmp_path / "p.nhdr").write_text(
        "NRRD0004\ntype: uint16\ndimension: 3\nsizes: 12 10 8\nencoding: raw\n"
        "endian: little\ndata file: p.%08d.raw 1 2 1 3\n")
    (tmp_path / ".p.nhdr.jnrrd-tmp-00c0ffee.pending").write_bytes(b"")
    age_all(tmp_path)
    removed = jnrrd.cleanup(tmp_path, older_than=0)
    assert {os.path.basename(p) for p in removed} <= {".p.nhdr.jnrrd-tmp-00c0ffee.pending"}
    assert (tmp_path / "p.00000001.raw").exists() and (tmp_path / "p.00000002.raw").exists()
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "p.nhdr")[0], A)


def test_cleanup_dry_run_and_timedelta(tmp_path):
    leftover = tmp_path / ".x.jnrrd.jnrrd-tmp-deadbeef"
    leftover.write_bytes(b"x")
    age(leftover, 120)
    assert jnrrd.cleanup(tmp_path) == []  # the default waits 10 minutes
    assert jnrrd.cleanup(tmp_path, older_than=timedelta(minutes=1), dry_run=True) == [
        str(leftover)]
    assert leftover.exists()
    assert jnrrd.cleanup(tmp_path, older_than=60.0) == [str(leftover)]
    assert not leftover.exists()


def test_cleanup_argument_errors(tmp_path):
    with pytest.raises(ValueError, match="older_than"):
        jnrrd.cleanup(tmp_path, older_than=-1)
    with pytest.raises(TypeError, match="older_than"):
        jnrrd.cleanup(tmp_path, older_than="10")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a directory"):
        jnrrd.cleanup(tmp_path / "missing")


def test_a_hostile_header_in_the_directory_keeps_candidates(tmp_path):
    (tmp_path / "bad.jnrrd").write_text('{"jnrrd": "0004"}\n' + "[" * 100000 + "\n\n")
    (tmp_path / "v.0123abcd.data.raw").write_bytes(b"x")
    (tmp_path / ".v.jnrrd.jnrrd-tmp-00c0ffee.pending").write_bytes(b"")
    age_all(tmp_path)
    removed = jnrrd.cleanup(tmp_path, older_than=0)
    assert (tmp_path / "v.0123abcd.data.raw").exists()
    assert {os.path.basename(p) for p in removed} <= {".v.jnrrd.jnrrd-tmp-00c0ffee.pending"}


def test_cli_cleanup(tmp_path, capsys):
    leftover = tmp_path / ".x.jnrrd.jnrrd-tmp-deadbeef.level1"
    leftover.write_bytes(b"x")
    age(leftover)
    assert main(["cleanup", "--dry-run", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [str(leftover)]
    assert "would remove 1 leftover" in err and leftover.exists()
    assert main(["cleanup", "--older-than", "-5", str(tmp_path)]) == 2
    assert main(["cleanup", str(tmp_path / "missing")]) == 2
    assert "not a directory" in capsys.readouterr().err
    r = subprocess.run([sys.executable, "-m", "jnrrd", "cleanup", "--older-than", "30",
                        str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [str(leftover)] and "removed 1 leftover" in r.stderr
    assert not leftover.exists()
    assert main(["cleanup", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert out == "" and "removed 0 leftovers" in err


@pytest.mark.parametrize("target", ["scan.nhdr", "scan.jnrrd"])
def test_a_date_named_user_file_survives_a_write_to_the_same_target(tmp_path, target):
    """Tokens always hold a letter, so ``<stem>.<8 digits>.<ext>`` (a date, a frame number)
    is never taken for a data file of an earlier write; the one the previous header names
    goes."""
    user = ["scan.20231105.raw", "scan.20231105.data.raw", "scan.00000001.tiles"]
    for n in user:
        if n.endswith(".tiles"):
            (tmp_path / n).mkdir()
        else:
            (tmp_path / n).write_bytes(b"mine")
    jnrrd.write(tmp_path / target, A, detached=True)
    stale = tmp_path / ("scan.2023110a.raw" if target.endswith(".nhdr")
                        else "scan.2023110a.data.raw")
    _rename_data(tmp_path / target, stale.name)
    np.testing.assert_array_equal(jnrrd.read(tmp_path / target)[0], A)
    jnrrd.write(tmp_path / target, B, detached=True)
    names = set(os.listdir(tmp_path))
    assert set(user) <= names and stale.name not in names


def _rename_data(header: Path, new: str) -> None:
    """Give the detached data file of ``header`` the name ``new`` (header updated)."""
    text = header.read_bytes()
    old = next(n for n in os.listdir(header.parent) if n.encode() in text and n != header.name)
    os.rename(header.parent / old, header.parent / new)
    header.write_bytes(text.replace(old.encode(), new.encode()))


def test_fresh_tokens_always_hold_a_letter(monkeypatch):
    from jnrrd.storage import names

    words = iter(["20231105", "00000000", "1234567a"])
    monkeypatch.setattr(names.secrets, "token_hex", lambda n: next(words))
    assert names.fresh_token() == "1234567a"


@pytest.mark.parametrize("options", [{"detached": True},
                                     {"tile": 4, "storage": "external"}],
                         ids=["detached", "external"])
def test_rewrites_of_an_upper_case_target_leave_one_generation(tmp_path, options):
    # ".JNRRD" is a JNRRD target in any case; its fresh names and its sweep must agree
    target = tmp_path / "V.JNRRD"
    for k in range(3):
        jnrrd.write(target, np.full((8, 8), k, np.uint8), **options)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "V.JNRRD") == [
        next(p.name for p in tmp_path.iterdir() if p.name != "V.JNRRD")]
    assert int(jnrrd.read(target)[0][0, 0]) == 2


def test_a_rewrite_removes_a_tile_directory_named_after_the_whole_upper_case_name(tmp_path):
    # earlier versions kept the upper-case suffix in the stem: V.JNRRD.<token>.tiles; the
    # previous header names it, so a rewrite of the same target removes it
    target = tmp_path / "V.JNRRD"
    jnrrd.write(target, np.zeros((8, 8), np.uint8), tile=4, storage="external")
    base = jnrrd.read_header(target)["tile:base_dir"]
    old = tmp_path / "V.JNRRD.1a2b3c4d.tiles"
    os.rename(tmp_path / base, old)
    target.write_bytes(target.read_bytes().replace(base.encode(), old.name.encode()))
    assert int(jnrrd.read(target)[0].sum()) == 0
    jnrrd.write(target, np.ones((8, 8), np.uint8), tile=4, storage="external")
    assert not old.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["V.JNRRD", jnrrd.read_header(target)["tile:base_dir"]])
