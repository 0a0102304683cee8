"""``jnrrd info`` shows what the file stores, never a default presented as fact
(docs/cli.md#info)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import jnrrd
from jnrrd.cli import main


def info(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert main(["info", *args]) == 0
    return capsys.readouterr().out


def codecs_line(out: str) -> str:
    return next(ln for ln in out.splitlines() if ln.startswith("codecs:"))


@pytest.mark.parametrize("comp", ["zstd", "gzip"])
def test_a_level_the_file_does_not_store_is_not_shown(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], comp: str) -> None:
    path = tmp_path / "a.jnrrd"
    jnrrd.write(path, np.zeros((8, 8, 8), np.uint8), tile=4, compression=comp,
                compression_level=1)
    line = codecs_line(info(capsys, str(path)))
    assert "level" not in line.replace("level not stored", ""), line
    assert f"-> {comp}" in line and "level not stored" in line, line
    doc = json.loads(info(capsys, str(path), "--json"))
    assert "level" not in json.dumps(doc["header"]), doc["header"]


def test_a_level_in_tile_codecs_is_shown(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.jnrrd"
    jnrrd.write(path, np.zeros((8, 8, 8), np.uint8), tile=4,
                codecs=[{"name": "bytes"}, {"name": "zstd", "configuration": {"level": 9}}])
    assert codecs_line(info(capsys, str(path))).endswith("bytes -> zstd(level=9)")


def test_per_tile_levels_the_file_records_are_shown(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # tile:compression_levels (docs/format.md#contiguous-and-chunked: informational, one
    # entry per tile) comes from other writers; external tiles let the test add it in place
    path = tmp_path / "l.jnrrd"
    jnrrd.write(path, np.zeros((8, 8, 4), np.uint8), tile=4, compression="gzip",
                storage="external")
    head, rest = path.read_bytes().split(b"\n\n", 1)
    for levels, shown in (([9, 9, 9, 9], "gzip(level=9)"),
                          ([1, 9, 4, 4], "gzip(level=1..9, per tile)")):
        line = json.dumps({"tile:compression_levels": levels}).encode()
        path.write_bytes(head + b"\n" + line + b"\n\n" + rest)
        assert codecs_line(info(capsys, str(path))).endswith(shown)
