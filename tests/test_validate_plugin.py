"""The ``validate_written`` test plugin: writes are validated, bad files fail the test."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from plugins.validate_written import check_written

import jnrrd
import jnrrd.writing.dispatch
from jnrrd.validation import validate


def test_write_is_wrapped_everywhere() -> None:
    for write in (jnrrd.write, jnrrd.writing.dispatch.write):
        assert getattr(write, "__validates_written__", False)


def test_a_clean_write_passes(tmp_path: Path) -> None:
    path = tmp_path / "a.jnrrd"
    jnrrd.write(path, np.zeros((4, 4), np.uint8), tile=(2, 2), compression="zstd")
    check_written(path)


def test_an_invalid_file_fails_the_test(tmp_path: Path) -> None:
    path = tmp_path / "a.jnrrd"
    path.write_bytes(b'{"jnrrd": "0004"}\n{"type": "uint8"}\n{"dimension": 2}\n'
                     b'{"sizes": [4]}\n{"encoding": "raw"}\n\n\x00\x00\x00\x00')
    with pytest.raises(pytest.fail.Exception, match=r"does not validate.*\n  sizes: "):
        check_written(path)


def test_damage_after_writing_is_not_checked(tmp_path: Path) -> None:
    # Validation runs inside write(), before a test damages the file on purpose.
    path = tmp_path / "a.jnrrd"
    jnrrd.write(path, np.arange(16, dtype=np.uint8).reshape(4, 4))
    path.write_bytes(path.read_bytes()[:-4])
    assert [(p.severity, p.field) for p in validate(path)] == [("error", "sizes")]


@pytest.mark.parametrize("target", [pytest.param("x.nrrd", id="nrrd-path"),
                                    pytest.param(io.BytesIO(), id="file-object")])
def test_other_targets_are_skipped(target: object) -> None:
    check_written(target)  # neither a .jnrrd path nor readable here: nothing to check
