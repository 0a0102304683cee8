"""The web view's documented commands work as written (docs/web-view.md, docs/cli.md,
docs/api.md): install hints pip can follow, the extras the Zarr example needs, and the
``--codecs`` example of docs/cli.md on a multi-byte type."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import jnrrd

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_install_hints_are_commands_pip_can_follow() -> None:
    for page in ("web-view.md", "cli.md", "api.md"):
        text = (DOCS / page).read_text()
        # jnrrd is not on PyPI: no `pip install "jnrrd[...]"` for the web view's extras
        assert not re.search(r"pip install [\"']?jnrrd\[(viewer|zarr|remote)", text), page


def test_the_zarr_example_names_the_packages_it_needs() -> None:
    for page, anchor in (("web-view.md", "zarr.open_group(server.url"),
                         ("cli.md", "zarr.open_group(\"http://127.0.0.1:8000/\""),
                         ("api.md", "jnrrd.serve(source")):
        text = (DOCS / page).read_text()
        at = text.index(anchor)
        near = text[max(0, at - 1500):at + 1500]
        # zarr-python reads http:// through fsspec's HTTP file system: aiohttp and requests
        assert "aiohttp" in near and "requests" in near and "zarr" in near, page


def test_the_cli_codecs_example_works_for_a_multi_byte_type(tmp_path: Path) -> None:
    from jnrrd.cli import main

    text = (DOCS / "cli.md").read_text()
    line = next(s for s in text.splitlines() if s.startswith("| `--codecs JSON`"))
    example = re.search(r"`'(\[.*?\])'`", line)
    assert example is not None
    src = tmp_path / "in.jnrrd"
    jnrrd.write(src, np.arange(4096, dtype=np.uint16).reshape(16, 16, 16), tile=8)
    out = tmp_path / "out.jnrrd"
    assert main(["convert", str(src), str(out), "--tile", "8", "--codecs",
                 example.group(1)]) == 0
    np.testing.assert_array_equal(jnrrd.read(out)[0], jnrrd.read(src)[0])


@pytest.mark.parametrize("page", ["web-view.md"])
def test_the_web_page_says_what_the_new_user_found(page: str) -> None:
    text = " ".join((DOCS / page).read_text().split())
    for phrase in ("not valid OME-Zarr 0.5", "segmentation", "volume rendering",
                   "flipped", "REQUEST_LOG_SIZE", "level 0's chunk at the centre", "?…",
                   "listens on all addresses", "/v/jnrrd` redirect"):
        assert phrase in text, phrase
