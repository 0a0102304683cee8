"""Local write targets and the leftovers cleanup against hostile names (issue 29 item 12):
a NUL byte or an over-long name is a ``JnrrdError`` before anything is created; ``jnrrd
cleanup`` never follows a planted symbolic link, never opens a planted FIFO, and lists,
reads and removes nothing outside its directory."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import jnrrd
from jnrrd.cli import main

A = np.arange(8 * 6, dtype=np.uint8).reshape(8, 6)
WAYS = {
    "attached": {},
    "detached": {"detached": True},
    "internal": {"tile": 4},
    "external": {"tile": 4, "storage": "external"},
}


def _name_max(d: Path) -> int:
    try:
        return int(os.pathconf(d, "PC_NAME_MAX"))
    except (OSError, ValueError, AttributeError):
        return 255


@pytest.mark.parametrize("suffix", [".jnrrd", ".nhdr", ".nrrd"])
@pytest.mark.parametrize("way", list(WAYS))
def test_a_nul_byte_in_a_write_target_is_a_security_error(tmp_path, way, suffix):
    """Regression: a target with a NUL byte raised a bare ``ValueError`` (embedded null
    byte)."""
    opts = WAYS[way] if suffix == ".jnrrd" or way in ("attached", "detached") else {}
    with pytest.raises(jnrrd.SecurityError, match="NUL"):
        jnrrd.write(str(tmp_path / f"a\0b{suffix}"), A, **opts)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("suffix", [".jnrrd", ".nhdr"])
@pytest.mark.parametrize("way", list(WAYS))
def test_a_name_too_long_for_the_file_system_is_unsupported(tmp_path, way, suffix):
    """Regression: a name too long raised a bare ``OSError`` (ENAMETOOLONG)."""
    opts = WAYS[way] if suffix == ".jnrrd" or way in ("attached", "detached") else {}
    name = "x" * (_name_max(tmp_path) + 1 - len(suffix)) + suffix
    with pytest.raises(jnrrd.UnsupportedError, match="too long|bytes"):
        jnrrd.write(str(tmp_path / name), A, **opts)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("way", list(WAYS))
def test_the_longest_name_the_rule_admits_is_written_or_refused_cleanly(tmp_path, way):
    from jnrrd.storage.targets import SUFFIX_BYTES

    name = "y" * (_name_max(tmp_path) - SUFFIX_BYTES - len(".jnrrd")) + ".jnrrd"
    try:
        jnrrd.write(tmp_path / name, A, **WAYS[way])
    except jnrrd.UnsupportedError as exc:  # a data file named from it would not fit
        assert "too long" in str(exc)
        assert list(tmp_path.iterdir()) == []
    else:
        np.testing.assert_array_equal(jnrrd.read(tmp_path / name)[0], A)
        with pytest.raises(jnrrd.UnsupportedError):
            jnrrd.write(tmp_path / ("y" + name), A, **WAYS[way])


def test_convert_and_preview_targets_get_the_same_checks(tmp_path):
    src = tmp_path / "src.jnrrd"
    jnrrd.write(src, A)
    long = "x" * _name_max(tmp_path)
    for target in ("a\0b.jnrrd", "a\0b.npy", f"{long}.jnrrd", f"{long}.npy",
                   f"{long}.ome.zarr"):
        with pytest.raises(jnrrd.JnrrdError):
            jnrrd.convert(src, str(tmp_path / target))
    assert main(["preview", str(src), "-o", str(tmp_path / f"{long}.png")]) == 1
    assert main(["convert", "-q", str(src), str(tmp_path / f"{long}.nrrd")]) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src.jnrrd"]


# -- jnrrd cleanup and planted links ---------------------------------------------------------

def _age(root: Path, seconds: float = 7200) -> None:
    t = time.time() - seconds
    for dirpath, dirs, files in os.walk(root):
        for n in dirs + files:
            os.utime(os.path.join(dirpath, n), (t, t), follow_symlinks=False)


@contextlib.contextmanager
def _outside_touches(outside: Path) -> Iterator[list[tuple[str, Any]]]:
    """Every file-system event (open, listing, removal, rename) on a path under
    ``outside``, while the block runs (an audit hook stays installed, but is idle after)."""
    seen: list[tuple[str, Any]] = []
    active = [True]
    real_outside = os.path.realpath(outside)
    events = {"open", "os.listdir", "os.scandir", "os.remove", "os.rmdir", "shutil.rmtree",
              "os.rename", "os.chmod", "os.utime"}

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if not active[0] or event not in events or not args:
            return
        a = args[0]
        nofollow = getattr(os, "O_NOFOLLOW", 0)
        if event == "open" and len(args) > 2 and isinstance(args[2], int) and nofollow \
                and args[2] & nofollow:
            return  # opened without following a link: a link fails, is not followed
        if isinstance(a, (str, bytes, os.PathLike)):
            p = os.fsdecode(os.fspath(a))
            if event == "os.remove":  # unlink removes a link itself, never what it points at
                p = os.path.join(os.path.realpath(os.path.dirname(p)), os.path.basename(p))
            else:
                p = os.path.realpath(p)
            if p.startswith(real_outside):
                seen.append((event, p))

    sys.addaudithook(hook)
    try:
        yield seen
    finally:
        active[0] = False


def _planted(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    (outside / "secret").mkdir(parents=True)
    (outside / "secret" / "f").write_bytes(b"keep me")
    (outside / "h.jnrrd").write_bytes(b'{"jnrrd": "0004"}\n{"data_file": "v.1a2b3c4d.raw"}\n\n')
    jnrrd.write(root / "v.jnrrd", A, tile=4, storage="external")
    # links named like every kind of leftover, and like a header
    os.symlink(outside / "secret", root / ".a.jnrrd-tmp-deadbeef.tiles")
    os.symlink(outside / "secret", root / "a.1a2b3c4d.tiles")
    os.symlink(outside / "secret" / "f", root / ".b.jnrrd-tmp-deadbeef")
    os.symlink(outside / "h.jnrrd", root / "evil.jnrrd")
    os.symlink(outside / "secret", root / ".c.jnrrd-tmp-deadbeef.pending")
    tiles = root / "w.2a2b3c4d.tiles"
    tiles.mkdir()
    os.symlink(outside / "secret", tiles / "inner")
    (root / ".w.jnrrd.jnrrd-tmp-00c0ffee.pending").write_text(
        '"w.2a2b3c4d.tiles"\n"a.1a2b3c4d.tiles"\n')
    _age(root)
    return root, outside


def test_cleanup_never_follows_a_planted_link(tmp_path, capsys):
    """Regression: ``jnrrd cleanup`` read a header through a planted link (and a write's
    sweep did the same); links are now removed as links and never followed."""
    root, outside = _planted(tmp_path)
    with _outside_touches(outside) as seen:
        assert main(["cleanup", "--dry-run", str(root)]) == 0
        listed = capsys.readouterr().out.split()
        removed = jnrrd.cleanup(root, older_than=60)
        jnrrd.write(root / "v.jnrrd", A + 1, tile=4, storage="external")  # its sweep too
    assert seen == []
    assert all(os.path.dirname(p) == str(root) for p in listed + removed)
    assert (outside / "secret" / "f").read_bytes() == b"keep me"
    assert sorted(p.name for p in outside.rglob("*")) == ["f", "h.jnrrd", "secret"]
    np.testing.assert_array_equal(jnrrd.read(root / "v.jnrrd")[0], A + 1)


def test_cleanup_removes_planted_links_as_links(tmp_path):
    root, outside = _planted(tmp_path)
    (root / "evil.jnrrd").unlink()  # a linked header keeps every candidate: drop it here
    removed = {os.path.basename(p) for p in jnrrd.cleanup(root, older_than=60)}
    assert {".a.jnrrd-tmp-deadbeef.tiles", ".b.jnrrd-tmp-deadbeef", "a.1a2b3c4d.tiles",
            "w.2a2b3c4d.tiles", ".c.jnrrd-tmp-deadbeef.pending"} <= removed
    assert (outside / "secret" / "f").read_bytes() == b"keep me"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_planted_fifo_journal_or_header_never_blocks_cleanup(tmp_path):
    """Regression: a FIFO named like a journal blocked ``jnrrd cleanup`` (and every write in
    its directory) in ``open()`` forever."""
    os.mkfifo(tmp_path / ".v.jnrrd.jnrrd-tmp-00c0ffee.pending")
    os.mkfifo(tmp_path / "x.jnrrd")
    os.mkfifo(tmp_path / "v.1a2b3c4d.tiles")
    (tmp_path / ".w.jnrrd.jnrrd-tmp-00c0ffee.pending").write_text('"w.3a2b3c4d.raw"\n')
    (tmp_path / "w.3a2b3c4d.raw").write_bytes(b"x")
    _age(tmp_path)

    def on_alarm(signum: int, frame: Any) -> None:
        raise TimeoutError("cleanup blocked")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, 10.0)
    try:
        removed = {os.path.basename(p) for p in jnrrd.cleanup(tmp_path, older_than=60)}
        jnrrd.write(tmp_path / "v.jnrrd", A)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert {".v.jnrrd.jnrrd-tmp-00c0ffee.pending", "w.3a2b3c4d.raw"} <= removed
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "v.jnrrd")[0], A)
