"""What a new user's trial of the docs found: the docs say what the code does (docs/cli.md,
docs/remote.md), and ``jnrrd info`` lays a NIfTI file out readably."""

from __future__ import annotations

import http.server
import json
import re
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

import jnrrd
from jnrrd.cli import main
from jnrrd.clinical.labels import mark_label_map

DOCS = Path(__file__).resolve().parents[1] / "docs"


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert main(list(args)) == 0
    return capsys.readouterr().out


# -- convert --downsample: the default the docs, --help and the code agree on ----------------
def test_the_downsample_default_is_mode_for_label_maps_everywhere(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seg = (np.arange(8 * 8 * 4) % 5).astype(np.uint8).reshape(8, 8, 4)
    jnrrd.write(tmp_path / "seg.jnrrd", seg, mark_label_map({}, [{"value": 1, "name": "a"}]))
    jnrrd.write(tmp_path / "img.jnrrd", seg)
    for name, method in (("seg", "mode"), ("img", "average")):
        out = tmp_path / f"{name}.out.jnrrd"
        run_cli(capsys, "convert", str(tmp_path / f"{name}.jnrrd"), str(out), "--tile", "4",
                "--levels", "2", "-q")
        assert jnrrd.read_header(out)["tile:downsample_method"] == method
    row = next(ln for ln in (DOCS / "cli.md").read_text().splitlines()
               if ln.startswith("| `--downsample"))
    assert "`average` (default" in row and "`mode` for a label map" in row, row
    assert "default average; mode for label maps" in " ".join(
        run_cli(capsys, "convert", "--help").split())


# -- docs/remote.md: python -m http.server answers no Range requests -------------------------
class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def plain_server(tmp_path: Path) -> Iterator[str]:
    """``python -m http.server``'s handler over ``tmp_path`` on 127.0.0.1 (no Range support)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             partial(_Quiet, directory=str(tmp_path)))
    server.timeout = 5
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_remote_md_says_what_python_http_server_does(tmp_path: Path, plain_server: str) -> None:
    arr = np.arange(16 * 16 * 8, dtype=np.uint8).reshape(16, 16, 8)
    jnrrd.write(tmp_path / "small.jnrrd", arr)
    jnrrd.write(tmp_path / "large.jnrrd", np.zeros((80, 80, 80), np.uint8))  # > 256 KiB
    # a file that fits the first request (256 KiB) comes whole and reads
    np.testing.assert_array_equal(jnrrd.read(f"{plain_server}/small.jnrrd")[0], arr)
    with pytest.raises(jnrrd.RemoteError, match="does not serve byte ranges") as info:
        jnrrd.read(f"{plain_server}/large.jnrrd")
    assert f"{plain_server}/large.jnrrd" in str(info.value)
    text = " ".join((DOCS / "remote.md").read_text().split())
    for needle in ("python -m http.server", "does not answer `Range` requests",
                   "256 KiB", "does not serve byte ranges", "RangeHTTPServer", "nginx"):
        assert needle in text, needle


# -- jnrrd info on NIfTI: long keys and --json ----------------------------------------------
@pytest.fixture
def nifti(tmp_path: Path) -> Path:
    aff = np.diag([0.5, 0.5, 2.0, 1.0])
    img = nib.Nifti1Image(np.arange(24, dtype=np.int16).reshape(2, 3, 4), aff)
    img.header["descrip"] = b"a test volume"
    path = tmp_path / "t.nii.gz"
    nib.save(img, path)
    return path


def test_info_on_nifti_keeps_keys_and_values_apart(
        nifti: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run_cli(capsys, "info", str(nifti))
    for line in out.splitlines():
        if not line.startswith(" "):
            assert re.match(r"^[\w :.-]+?: +\S", line), line  # "key:" then a space
    assert re.search(r"^space_directions: +\[\[-0\.5", out, re.M), out


def test_info_json_on_nifti_is_one_field_per_line(
        nifti: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run_cli(capsys, "info", str(nifti), "--json")
    doc = json.loads(out)
    assert doc["format"] == "nifti" and doc["shape"] == [2, 3, 4]
    assert doc["header"]["space_origin"] == [-0.0, -0.0, 0.0]
    fields = [ln for ln in out.splitlines() if ln.startswith("    ")]
    assert len(fields) == len(doc["header"]), out  # one line per header field
    for ln in fields:
        assert json.loads("{" + ln.strip().rstrip(",") + "}")  # each holds a whole value
    assert '  "shape": [2, 3, 4],' in out.splitlines()
