"""A file cut inside its header says so: ``HeaderError`` naming the file and the missing blank
line that ends the header (docs/format.md#where-the-header-ends), not a data-size error as if
the cut header were a complete one."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import jnrrd


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    d = tmp_path_factory.mktemp("cut")
    arr = (np.arange(32 * 24 * 16) % 251).astype(np.uint16).reshape(32, 24, 16)
    jnrrd.write(d / "t.jnrrd", arr, tile=16, compression="zstd", levels=2)
    jnrrd.write(d / "u.jnrrd", arr)
    return {k: (d / f"{k}.jnrrd").read_bytes() for k in ("t", "u")}


def cuts(data: bytes) -> list[int]:
    """Every line end of the header, and a cut in the middle of every line after the magic."""
    end = data.index(b"\n\n")
    ends = [i + 1 for i in range(end) if data[i] == 0x0A]
    return sorted({*ends, *(e - 5 for e in ends[1:]), end + 1, 300})


@pytest.mark.parametrize("kind", ["t", "u"])
def test_every_cut_inside_the_header_is_a_truncated_header(
        written: dict[str, bytes], tmp_path: Path, kind: str) -> None:
    data = written[kind]
    path = tmp_path / "cut.jnrrd"
    for cut in cuts(data):
        if cut >= data.index(b"\n\n") + 2:
            continue
        path.write_bytes(data[:cut])
        for call in (lambda: jnrrd.read(path), lambda: jnrrd.open(path),
                     lambda: jnrrd.read_header(path)):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                with pytest.raises(jnrrd.HeaderError) as info:
                    call()
            msg = str(info.value)
            assert str(path) in msg and "truncated" in msg and "blank line" in msg, (cut, msg)


def test_headers_that_need_no_attached_data_may_still_end_at_the_end_of_the_file(
        tmp_path: Path) -> None:
    arr = np.arange(24, dtype=np.uint8).reshape(4, 6)
    for name, opts in (("d.jnrrd", {"detached": True}),
                       ("x.jnrrd", {"tile": 2, "storage": "external"})):
        path = tmp_path / name
        jnrrd.write(path, arr, **opts)  # type: ignore[arg-type]
        head = path.read_bytes()
        assert head.endswith(b"\n\n")
        path.write_bytes(head[:-1])  # no blank line: the header ends at the end of the file
        np.testing.assert_array_equal(jnrrd.read(path)[0], arr)
        assert jnrrd.read_header(path)["sizes"] == [4, 6]
