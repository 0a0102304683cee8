"""The wheel carries every schema and py.typed; an installed (non-editable) copy loads them."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _source_schemas() -> list[str]:
    return sorted(p.relative_to(ROOT / "schemas").as_posix()
                  for p in (ROOT / "schemas").rglob("*.json"))


@pytest.mark.slow
def test_wheel_ships_and_loads_every_schema(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    # An isolated build: pip provides hatchling (from its cache once fetched).
    subprocess.run([sys.executable, "-m", "build", "--wheel",
                    "--outdir", str(dist), str(ROOT)], check=True, capture_output=True,
                   timeout=300)
    (wheel,) = dist.glob("jnrrd-*.whl")
    expected = _source_schemas()
    assert {"jnrrd.schema.json", "tile.schema.json"} <= set(expected)
    with zipfile.ZipFile(wheel) as z:
        packed = sorted(n.removeprefix("jnrrd/schemas/") for n in z.namelist()
                        if n.startswith("jnrrd/schemas/") and n.endswith(".json"))
        entry_points = z.read(next(n for n in z.namelist()
                                   if n.endswith(".dist-info/entry_points.txt"))).decode()
        metadata = z.read(next(n for n in z.namelist()
                                if n.endswith(".dist-info/METADATA"))).decode()
        napari_manifest = "jnrrd/napari.yaml" in z.namelist()
        typed = "jnrrd/py.typed" in z.namelist()
    assert packed == expected
    # libdeflate is a core requirement (gzip through zlib only where it cannot be installed)
    assert "Requires-Dist: deflate>=0.7\n" in metadata
    # the napari plugin: its manifest inside the package, found through its entry point
    assert napari_manifest
    assert "[napari.manifest]\njnrrd = jnrrd:napari.yaml" in entry_points
    assert typed  # PEP 561: type checkers read the package's hints

    # A fresh venv that sees the current environment's dependencies (a path entry to its
    # site-packages: .pth files there, such as the editable install's, are not processed)
    # but not the editable install: the schemas must come from the installed package data.
    env = tmp_path / "venv"
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; "
                              "print(sysconfig.get_paths()['purelib'])"], check=True,
                             capture_output=True, text=True).stdout.strip()
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(purelib, "current_env.pth").write_text("\n".join(sorted(deps)) + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-index",
                    "--force-reinstall", str(wheel)], check=True, capture_output=True,
                   timeout=300)
    script = (
        "import json, jnrrd, jnrrd.schemas as s\n"
        "from jsonschema import Draft7Validator\n"
        "names = s.schema_names()\n"
        "for n in names: Draft7Validator.check_schema(s.load_schema(n))\n"
        "print(json.dumps({'file': jnrrd.__file__, 'root': str(s._root()), 'names': names}))\n"
    )
    out = subprocess.run([str(python), "-I", "-c", script], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["names"] == expected
    installed = Path(info["file"]).resolve()
    assert installed.is_relative_to(env.resolve()), installed
    assert Path(info["root"]).resolve() == installed.parent / "schemas"
