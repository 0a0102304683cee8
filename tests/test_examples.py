"""Every script in ``examples/`` runs, exits 0 and prints what it promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_example(name: str, *args: str, env: dict[str, str] | None = None,
                cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(EXAMPLES / name), *args], text=True,
                          capture_output=True, timeout=300, check=False, cwd=cwd,
                          env=env if env is not None else dict(os.environ))


# (script, extra args, substrings the output must contain)
CASES = [
    pytest.param("quickstart.py", [], ["wrote ", "level 2: shape (32, 32, 32) scale (4, 4, 4)",
                                      "read region (32, 32, 10) lazily", "identical"],
                 id="quickstart"),
    pytest.param("nrrd_to_pyramid.py", [], ["generated ", "level 2: shape (24, 20, 16)",
                                            "identical data and geometry"],
                 id="nrrd_to_pyramid"),
    pytest.param("quantize.py", [], ["max abs error", "NaN samples preserved",
                                     "decodes to float32"], id="quantize"),
    pytest.param("tiff_tiles.py", [], ["6 TIFF tiles", "tifffile opened all 6 tiles"],
                 id="tiff_tiles"),
    pytest.param("lazy_region.py", ["--size", "128"],
                 ["4 of 64 tiles", "exactly the touched tiles"], id="lazy_region"),
    pytest.param("ecosystem.py", [], ["identical to jnrrd.read(level=2)",
                                      "OME-Zarr round trip: 3 levels, data identical",
                                      "oindex (3, 8, 10): identical to NumPy",
                                      "pickled level 1 re-opened", "preview 371x128 written"],
                 id="ecosystem"),
    # 55 frames, a commit every 10: the last commit (5 frames) comes at the end of the block
    pytest.param("acquisition.py", ["--frames", "55", "--every", "10"],
                 ["writer: 55 frames", "last 55 frames; every frame whole, levels consistent",
                  "valid: True"], id="acquisition"),
    pytest.param("dicom_series.py", [], ["DICOM series: 96 files",
                                         "4 levels [(160, 160, 96), (80, 80, 48)",
                                         "50 mm box at 2 mm: level 1 (voxels [1.6, 1.6, 2.0] mm)",
                                         "preview 392x128 written"], id="dicom_series"),
    pytest.param("dask_volume.py", [], ["dask array (96, 64, 48) uint8, chunks (32, 32, 32)",
                                        "identical to the NumPy computation"],
                 id="dask_volume", marks=pytest.mark.slow),
]


@pytest.mark.slow
@pytest.mark.parametrize(("script", "args", "needles"), CASES)
def test_example_runs(tmp_path: Path, script: str, args: list[str], needles: list[str]
                      ) -> None:
    proc = run_example(script, *args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for needle in needles:
        assert needle in proc.stdout, (needle, proc.stdout)
    assert proc.stderr == "", proc.stderr


def test_every_example_is_tested() -> None:
    # _runner.py is the examples' shared --out handling, not an example
    scripts = {p.name for p in EXAMPLES.glob("*.py") if not p.name.startswith("_")}
    assert scripts == {c.values[0] for c in CASES}
    readme = (EXAMPLES / "README.md").read_text()
    for name in scripts:
        assert f"`{name}" in readme, f"{name} is not described in examples/README.md"


@pytest.mark.slow
def test_quickstart_leaves_its_file_and_the_info_command(tmp_path: Path) -> None:
    """The README's first command ends with a file the user can inspect, and says how."""
    proc = run_example("quickstart.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["quickstart.jnrrd"]
    last = proc.stdout.splitlines()[-1].split()
    assert last == ["jnrrd", "info", "quickstart.jnrrd"], proc.stdout
    info = subprocess.run([sys.executable, "-m", "jnrrd", *last[1:]], cwd=tmp_path, text=True,
                          capture_output=True, timeout=120, check=False)
    assert info.returncode == 0 and "levels:" in info.stdout, info.stderr
    out = tmp_path / "elsewhere"
    proc = run_example("quickstart.py", "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 0 and (out / "quickstart.jnrrd").is_file()
    assert proc.stdout.splitlines()[-1].split() == ["jnrrd", "info",
                                                    "elsewhere/quickstart.jnrrd"]


@pytest.mark.slow
def test_examples_write_into_out_dir_only(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_example("quantize.py", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert (out / "quantized.jnrrd").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


@pytest.mark.slow
def test_nrrd_to_pyramid_takes_an_input_file(tmp_path: Path) -> None:
    import numpy as np

    import jnrrd

    src = tmp_path / "given.nhdr"
    jnrrd.write(src, np.arange(40 * 36 * 8, dtype=np.float32).reshape(40, 36, 8),
                {"space": "right_anterior_superior", "space_origin": [0.0, 0.0, 0.0],
                 "space_directions": [[1.0, 0, 0], [0, 1.0, 0], [0, 0, 2.0]]})
    proc = run_example("nrrd_to_pyramid.py", str(src), "--out", str(tmp_path / "o"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "generated" not in proc.stdout and f"read {src}" in proc.stdout
    assert (tmp_path / "o" / "pyramid.jnrrd").is_file()


def test_dask_example_skips_without_dask(tmp_path: Path) -> None:
    # A package named `dask` that fails to import hides the real one.
    fake = tmp_path / "dask"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('dask hidden for this test')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    proc = run_example("dask_volume.py", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "dask is not installed" in proc.stdout
