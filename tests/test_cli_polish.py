"""Command-line polish (issue 14 item 8), through the real entry point in a subprocess:
option errors exit 2, messages name the user's files, progress everywhere, NRRD validation,
summarized per-tile errors, and what ``info`` shows."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from test_cli import _run_on_terminal, assert_clean_error, run

import jnrrd

TMP_NAME = re.compile(r"jnrrd-tmp|\.partial|\.[0-9a-f]{8}\.")


@pytest.fixture
def npy(tmp_path: Path) -> Path:
    path = tmp_path / "a.npy"
    np.save(path, np.arange(8 * 8 * 8, dtype=np.uint16).reshape(8, 8, 8))
    return path


# -- bad option values exit 2 ------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(("args", "needle"), [
    (["--tile", "4,4"], "tile"),
    (["--codecs", '[{"name": "blosc"}]'], "--codecs: unknown codec"),
    (["--external=tiles/{q}.bin"], "unknown placeholder {q}"),
], ids=["tile-count", "unknown-codec", "pattern"])
def test_bad_option_values_exit_2(tmp_path: Path, npy: Path, args: list[str],
                                  needle: str) -> None:
    """More cases run in process in test_cli.py; these go through the entry point."""
    proc = run("convert", str(npy), str(tmp_path / "o.jnrrd"), *args)
    assert_clean_error(proc, 2, "usage: ", needle)
    assert not (tmp_path / "o.jnrrd").exists()


# -- no temporary names in messages ------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("args", [["missing/o.nhdr"], ["missing/o.jnrrd", "--tile", "4"],
                                  ["adir.jnrrd", "--tile", "4"]],
                         ids=["nhdr", "tiled", "directory"])
def test_errors_name_the_output_not_temporary_files(tmp_path: Path, npy: Path,
                                                    args: list[str]) -> None:
    (tmp_path / "adir.jnrrd").mkdir()
    proc = run("convert", str(npy), *args, cwd=tmp_path)
    assert_clean_error(proc, 1, args[0])
    assert not TMP_NAME.search(proc.stderr), proc.stderr


def test_atomic_write_errors_name_the_target(tmp_path: Path) -> None:
    """The library too: an unwritable target is reported under its own name."""
    target = tmp_path / "gone" / "x.jnrrd"
    for kw in ({}, {"tile": 4}):
        with pytest.raises(FileNotFoundError) as info:
            jnrrd.write(target, np.zeros((4, 4), np.uint8), **kw)
        assert info.value.filename == str(target), info.value
    (tmp_path / "d.nrrd").mkdir()
    with pytest.raises(IsADirectoryError) as info:
        jnrrd.write(tmp_path / "d.nrrd", np.zeros((4, 4), np.uint8))
    assert info.value.filename == str(tmp_path / "d.nrrd") and info.value.filename2 is None


# -- progress -----------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("out", ["o.nrrd", "o.npy", "flat.jnrrd"])
def test_progress_for_untiled_outputs(tmp_path: Path, npy: Path, out: str) -> None:
    """NRRD, .npy and untiled JNRRD outputs draw a bar too (MiB of the input read)."""
    code, drawn = _run_on_terminal(["convert", str(npy), out], tmp_path)
    assert code == 0 and "100%" in drawn and "1/1 MiB" in drawn, (out, drawn)
    back = np.load(tmp_path / out) if out.endswith(".npy") else jnrrd.read(tmp_path / out)[0]
    np.testing.assert_array_equal(back, np.load(npy))


def test_no_progress_when_quiet(tmp_path: Path, npy: Path) -> None:
    code, drawn = _run_on_terminal(["convert", str(npy), "q.nhdr", "-q"], tmp_path)
    assert code == 0 and drawn == ""


# -- validate ---------------------------------------------------------------------------------
def test_validate_accepts_classic_nrrd_and_says_valid(tmp_path: Path) -> None:
    good, short = tmp_path / "g.nrrd", tmp_path / "s.nrrd"
    jnrrd.write(good, np.arange(24, dtype=np.int16).reshape(2, 3, 4), encoding="gzip")
    short.write_bytes(b"NRRD0004\ntype: uint8\ndimension: 1\nsizes: 3\nencoding: raw\n\n\x01")
    proc = run("validate", "--deep", str(good))
    assert proc.returncode == 0 and proc.stdout == f"{good}: valid\n", proc
    proc = run("validate", str(good), str(short))
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [
        f"{good}: valid",
        f"{short}: error: sizes: the data section holds 1 bytes, the header needs 3 "
        "(3 elements of 1 bytes)"]


@pytest.fixture
def truncated(tmp_path: Path) -> Path:
    path = tmp_path / "t.jnrrd"
    jnrrd.write(path, np.arange(32 ** 3, dtype=np.uint16).reshape(32, 32, 32), tile=8,
                compression="zstd")
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    return path


@pytest.mark.slow
@pytest.mark.parametrize("deep", [False, True])
def test_truncated_tiled_file_is_one_summarized_error(truncated: Path, deep: bool) -> None:
    """The 64 tiles of 8^3 lose their second half: one line names the first three and the
    count (the deep check's second problem per tile joins the same line)."""
    proc = run("validate", str(truncated), *(["--deep"] if deep else []))
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, lines
    m = re.fullmatch(re.escape(f"{truncated}: error: /tile:offset_table: ") + r"(\d+) tiles "
                     r"with errors \((\d+), (\d+), (\d+), \.\.\. 63\); the first: tile \2 .*"
                     r"past the end of the file .*\(--json lists every problem\)", lines[0])
    assert m, lines[0]
    first = int(m.group(2))
    assert int(m.group(1)) == 64 - first and [int(m.group(k)) for k in (3, 4)] == [
        first + 1, first + 2]
    rows = json.loads(run("validate", str(truncated), "--json").stdout)
    assert len(rows) == 64 - first  # JSON keeps every problem


def test_validate_deep_draws_progress(tmp_path: Path) -> None:
    path = tmp_path / "p.jnrrd"
    jnrrd.write(path, np.zeros((16, 16, 16), np.uint8), tile=4)
    code, drawn = _run_on_terminal(["validate", "--deep", str(path)], tmp_path)
    assert code == 0 and "100%" in drawn and "64/64 tiles" in drawn, drawn
    code, drawn = _run_on_terminal(["validate", "--deep", "-q", str(path)], tmp_path)
    assert code == 0 and drawn == ""


# -- info ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_info_shows_measurement_frame_and_key_values(tmp_path: Path) -> None:
    path = tmp_path / "dwi.nrrd"
    path.write_bytes(
        b"NRRD0005\ntype: int16\ndimension: 4\nsizes: 3 4 5 2\n"
        b"kinds: space space space list\nspace: left-posterior-superior\n"
        b"space directions: (1,0,0) (0,1,0) (0,0,1) none\n"
        b"measurement frame: (1,0,0) (0,0,-1) (0,1,0)\ncontent: brain\n"
        b"modality:=DWMRI\nDWMRI_b-value:=1000\nDWMRI_gradient_0001:=0 0.7071 0.7071\n"
        b"encoding: raw\nendian: little\n\n" + bytes(2 * 3 * 4 * 5 * 2))
    tiled = tmp_path / "dwi.jnrrd"
    data, header = jnrrd.read(path)
    header["extensions"] = {**header["extensions"], "meta": "https://example.org/meta"}
    header["meta:scanner"] = {"vendor": "ACME"}
    jnrrd.write(tiled, data, header, tile=(2, 2, 2, 2))
    for file in (path, tiled):
        proc = run("info", str(file))
        assert proc.returncode == 0, proc.stderr
        out = proc.stdout.splitlines()
        at = out.index("measurement frame:")
        # inner list i of the field is column i of the matrix
        assert out[at + 1: at + 4] == ["  [1, 0, 0]", "  [0, 0, 1]", "  [0, -1, 0]"]
        at = out.index("key/values:")
        assert out[at + 1: at + 4] == ["  modality: DWMRI", "  DWMRI_b-value: 1000",
                                       "  DWMRI_gradient_0001: 0 0.7071 0.7071"]
        assert "content:     brain" in out
    assert '  meta:scanner: {"vendor": "ACME"}' in run("info", str(tiled)).stdout
