"""``jnrrd validate`` on a tiled file cut inside its header reports the truncated header (as
reading it does: docs/format.md#where-the-header-ends), not what the cut header lacks."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

import jnrrd
from jnrrd.validation import run_validate


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("cut") / "whole.jnrrd"
    jnrrd.write(path, np.zeros((16, 12, 8), np.uint8), tile=8, levels=2)
    return path.read_bytes()


@pytest.mark.parametrize("where", ["line end", "after the tables", "300 bytes"])
def test_a_header_cut_is_one_problem_naming_the_blank_line(
        whole: bytes, tmp_path: Path, where: str) -> None:
    if where == "line end":  # a complete line, the last before the tile tables
        size = whole.index(b'{"tile:offset_table"')
    elif where == "after the tables":
        size = whole.index(b"\n", whole.index(b'{"tile:size_table"')) + 1
    else:
        size = 300
    cut = tmp_path / "cut.jnrrd"
    cut.write_bytes(whole[:size])
    with pytest.raises(jnrrd.HeaderError, match="header is truncated"):
        jnrrd.open(cut)
    problems = jnrrd.validate(cut)
    errors = [p for p in problems if p.severity == "error"]
    assert len(errors) == 1, problems
    assert "the header is truncated" in errors[0].message
    assert "blank line that ends the header was not found" in errors[0].message
    assert not [p for p in problems if p.field.startswith(("tile:", "/tile:"))], problems
    with pytest.raises(jnrrd.ValidationError, match=r"cut\.jnrrd: 1 error.*truncated"):
        jnrrd.validate(cut, strict=True)
    out = io.StringIO()
    assert run_validate([str(cut)], as_json=False, deep=False, out=out) == 1
    assert f"{cut}: error" in out.getvalue() and "header is truncated" in out.getvalue()
