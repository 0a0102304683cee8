"""Cleanup removes only what the same target provably owns (issue 29 item 2,
docs/security.md "Cleanup owns only what it can prove"): its journal's claims or its previous
header's fresh files. Targets whose names differ by case or suffix are separate datasets
wherever the file system says they are separate files."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jnrrd
from jnrrd.storage.ownership import case_insensitive, referenced_names

A = np.arange(64 * 64, dtype=np.uint16).reshape(64, 64)

#: names that differ from ``V.jnrrd`` only by case or suffix, and how each is written
NAMES = ["V.jnrrd", "V.JNRRD", "V.Jnrrd", "v.jnrrd", "V.nhdr", "V.NHDR", "V.nrrd", "V",
         "V.jnrrd.jnrrd"]
KINDS = {
    "internal": {"tile": 32},
    "external": {"tile": 32, "storage": "external"},
    "detached": {"detached": True},
    "attached": {},
}


def _options(name: str, kind: str) -> dict:
    nrrd = name.lower().endswith((".nhdr", ".nrrd"))
    if nrrd:  # classic NRRD is untiled: detached or attached
        opts = {"detached": True} if kind in ("external", "detached") else {}
    else:
        opts = dict(KINDS[kind])
    if name == "V":
        opts["format"] = "jnrrd"
    return opts


def _age_all(d: Path, seconds: float = 3600) -> None:
    t = time.time() - seconds
    for root, dirs, files in os.walk(d):
        for n in dirs + files:
            os.utime(os.path.join(root, n), (t, t), follow_symlinks=False)


@pytest.mark.parametrize("second", ["V.JNRRD", "V.Jnrrd"])
@pytest.mark.parametrize("first_kind", ["external", "detached"])
def test_a_write_to_the_name_in_another_case_keeps_the_first_dataset(tmp_path, second,
                                                                     first_kind):
    """Regression: writing ``V.JNRRD`` (tiled) swept ``V.jnrrd``'s tile directory, whose
    stem matched case-insensitively: reading ``V.jnrrd`` then failed (tile missing)."""
    jnrrd.write(tmp_path / "V.jnrrd", A, **KINDS[first_kind])
    jnrrd.write(tmp_path / second, A + 1, tile=32)
    same = case_insensitive(str(tmp_path / "V.jnrrd"))
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "V.jnrrd")[0], A + 1 if same else A)
    np.testing.assert_array_equal(jnrrd.read(tmp_path / second)[0], A + 1)


def test_a_write_to_the_nhdr_keeps_the_jnrrd_data_of_the_same_stem(tmp_path):
    jnrrd.write(tmp_path / "V.jnrrd", A, detached=True)
    jnrrd.write(tmp_path / "V.nhdr", A + 2)
    jnrrd.write(tmp_path / "V.nhdr", A + 3)
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "V.jnrrd")[0], A)
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "V.nhdr")[0], A + 3)


def test_a_rewrite_removes_exactly_what_its_previous_header_named(tmp_path):
    jnrrd.write(tmp_path / "V.jnrrd", A, tile=32, storage="external")
    first = set(os.listdir(tmp_path))
    jnrrd.write(tmp_path / "V.jnrrd", A + 1, tile=32, storage="external")
    second = set(os.listdir(tmp_path))
    assert first & second == {"V.jnrrd"} and len(second) == 2
    # a name shaped like a leftover that no header of this target named is not its to take
    (tmp_path / "V.0a0b0c0d.tiles").mkdir()
    jnrrd.write(tmp_path / "V.jnrrd", A + 2, detached=True)
    assert (tmp_path / "V.0a0b0c0d.tiles").is_dir()
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "V.jnrrd")[0], A + 2)


def test_a_header_copied_under_another_name_does_not_give_away_its_files(tmp_path):
    jnrrd.write(tmp_path / "V.jnrrd", A, tile=32, storage="external")
    (tmp_path / "W.jnrrd").write_bytes((tmp_path / "V.jnrrd").read_bytes())
    jnrrd.write(tmp_path / "W.jnrrd", A + 1)  # W's previous header names V's tiles: not W's
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "V.jnrrd")[0], A)


def test_referenced_names_follow_the_file_systems_case_rule():
    head = b'{"jnrrd": "0004"}\n{"tile:base_dir": "V.1a2b3c4d.tiles"}\n'
    assert referenced_names(head, "V.jnrrd") == ["V.1a2b3c4d.tiles"]
    assert referenced_names(head, "V.JNRRD") == ["V.1a2b3c4d.tiles"]  # its stem is "V" too
    assert referenced_names(head, "v.jnrrd") == []
    assert referenced_names(head, "v.jnrrd", casefold=True) == ["V.1a2b3c4d.tiles"]
    assert referenced_names(head, "W.jnrrd") == []
    nrrd = b"NRRD0004\ntype: uint8\ndata file: V.1a2b3c4d.raw\n"
    assert referenced_names(nrrd, "V.nhdr") == ["V.1a2b3c4d.raw"]
    assert referenced_names(b"NRRD0004\ndata file: V.%08d.raw 1 2 1\n", "V.nhdr") == []
    assert referenced_names(b'{"jnrrd": "0004"}\n{"data_file": "../V.1a2b3c4d.raw"}\n',
                            "V.jnrrd") == []


def _check_all(d: Path, model: dict[str, int]) -> None:
    for name, k in model.items():
        got = jnrrd.read(d / name)[0]
        np.testing.assert_array_equal(got, A + k, err_msg=name)


@settings(max_examples=25)
@given(st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(sorted(KINDS))),
                min_size=2, max_size=6))
def test_writes_to_names_differing_by_case_or_suffix_never_break_another(writes):
    """Any sequence of writes to names that differ only by case or suffix leaves every
    dataset written earlier and still named readable, with its last written content."""
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        model: dict[str, int] = {}
        for k, (name, kind) in enumerate(writes):
            jnrrd.write(d / name, A + k, **_options(name, kind))
            for other in list(model):  # on a case-insensitive disk, the same file
                if os.path.samefile(d / other, d / name):
                    model[other] = k
            model[name] = k
            _check_all(d, model)


# -- interrupted writes: the journal claims what its write made --------------------------------

HERE = Path(__file__).resolve().parent
CRASH_IN_TIDY = """
import os, sys
import numpy as np
import jnrrd, jnrrd.storage.writes
real = jnrrd.storage.writes.remove_leftovers
def remove_leftovers(target, keep=(), patterns=()):
    if patterns:
        os._exit(9)  # killed after the new header replaced the old, before the old files go
    return real(target, keep, patterns)
jnrrd.storage.writes.remove_leftovers = remove_leftovers
a = np.arange(64 * 64, dtype=np.uint16).reshape(64, 64) + 1
jnrrd.write(sys.argv[1], a, tile=32, storage="external")
"""


def test_files_a_killed_rewrite_was_about_to_remove_go_with_the_next_cleanup(tmp_path):
    path = tmp_path / "V.jnrrd"
    jnrrd.write(path, A, tile=32, storage="external")
    old = jnrrd.read_header(path)["tile:base_dir"]
    r = subprocess.run([sys.executable, "-c", CRASH_IN_TIDY, str(path)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 9, r.stderr
    np.testing.assert_array_equal(jnrrd.read(path)[0], A + 1)  # the new header is in place
    assert (tmp_path / old).is_dir()
    _age_all(tmp_path)
    removed = {os.path.basename(p) for p in jnrrd.cleanup(tmp_path)}
    assert old in removed and not (tmp_path / old).exists()
    assert sorted(os.listdir(tmp_path)) == sorted(["V.jnrrd",
                                                   jnrrd.read_header(path)["tile:base_dir"]])
    np.testing.assert_array_equal(jnrrd.read(path)[0], A + 1)


def test_a_crashed_journal_takes_only_what_it_claims(tmp_path):
    """Regression: a left-over journal of ``scan.jnrrd`` took every unreferenced name of the
    stem ``scan`` modified after it, e.g. a user's ``scan.1a2b3c4d.data.raw``."""
    journal = tmp_path / ".scan.jnrrd.jnrrd-tmp-00c0ffee.pending"
    journal.write_bytes(b"")  # an earlier version's journal: it claims nothing
    _age_all(tmp_path, 7200)
    user = tmp_path / "scan.1a2b3c4d.data.raw"
    user.write_bytes(b"mine")
    os.utime(user, (time.time() - 3600,) * 2)  # newer than the journal, older than 10 min
    removed = {os.path.basename(p) for p in jnrrd.cleanup(tmp_path)}
    assert removed == {journal.name}
    assert user.read_bytes() == b"mine"


def test_a_journal_claims_the_fresh_names_of_its_own_write(tmp_path):
    from jnrrd.storage.leftovers import write_journal
    from jnrrd.storage.ownership import claim, claims

    target = tmp_path / "V.JNRRD"
    with write_journal(str(target)):
        claim(str(tmp_path / "V.1a2b3c4d.tiles"))
        claim(str(tmp_path / "V.JNRRD"))  # the target itself: never claimed
        claim(str(tmp_path / "notes.txt"))  # not a fresh name: never claimed
        claim(str(tmp_path / "sub" / "V.2a2b3c4d.tiles"))  # another directory
        (journal,) = [p for p in tmp_path.iterdir() if p.name.endswith(".pending")]
        assert claims(str(journal)) == ["V.1a2b3c4d.tiles"]


# -- object stores ----------------------------------------------------------------------------

def test_s3_write_to_the_name_in_another_case_keeps_the_first_dataset(s3):
    opts = s3.storage_options
    jnrrd.write(s3.url("d/V.jnrrd"), A, tile=32, storage="external", storage_options=opts)
    jnrrd.write(s3.url("d/V.JNRRD"), A + 1, tile=32, storage_options=opts)
    jnrrd.write(s3.url("d/V.Jnrrd"), A + 2, tile=32, storage="external",
                storage_options=opts)
    jnrrd.write(s3.url("d/V.Jnrrd"), A + 3, detached=True, storage_options=opts)
    for name, k in (("V.jnrrd", 0), ("V.JNRRD", 1), ("V.Jnrrd", 3)):
        np.testing.assert_array_equal(
            jnrrd.read(s3.url(f"d/{name}"), storage_options=opts)[0], A + k)


@pytest.mark.slow
@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(sorted(KINDS))),
                min_size=2, max_size=5))
def test_s3_writes_to_names_differing_by_case_or_suffix_never_break_another(s3, writes):
    opts = s3.storage_options
    prefix = f"p{time.monotonic_ns()}"
    model: dict[str, int] = {}
    for k, (name, kind) in enumerate(writes):
        jnrrd.write(s3.url(f"{prefix}/{name}"), A + k, storage_options=opts,
                    **_options(name, kind))
        model[name] = k  # object keys are case-sensitive: every name is its own dataset
        for other, j in model.items():
            got = jnrrd.read(s3.url(f"{prefix}/{other}"), storage_options=opts)[0]
            np.testing.assert_array_equal(got, A + j, err_msg=other)
