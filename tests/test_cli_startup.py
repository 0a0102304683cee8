"""The command line starts without importing what it does not use: ``import jnrrd`` and
``jnrrd --help`` load neither NumPy nor the readers, ``jnrrd convert`` loads neither the web
server, the validator, the optional packages nor the integrations it does not need. (The
times are measured in benchmarks, not here: these tests look at which modules load.)"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

import jnrrd

_PROBE = """
import json, sys
{setup}
print(json.dumps(sorted(sys.modules)))
"""


def _modules_after(setup: str, cwd=None) -> set[str]:
    run = subprocess.run([sys.executable, "-c", _PROBE.format(setup=setup)], cwd=cwd,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    return set(json.loads(run.stdout.strip().splitlines()[-1]))


def test_import_jnrrd_loads_only_the_errors():
    loaded = _modules_after("import jnrrd")
    assert {m for m in loaded if m.startswith("jnrrd")} == {"jnrrd", "jnrrd.errors"}
    assert "numpy" not in loaded


def test_the_help_loads_no_reader_and_no_numpy():
    loaded = _modules_after(
        "import contextlib, io\nfrom jnrrd.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n    main(['--help'])")
    assert not loaded & {"numpy", "jnrrd.api", "jnrrd.conversion", "jnrrd.web.server",
                         "asyncio", "jnrrd.pyramid.methods", "jnrrd.codecs"}


def test_convert_loads_only_what_it_uses(tmp_path):
    jnrrd.write(tmp_path / "a.jnrrd", np.zeros((8, 8, 4), np.int16))
    loaded = _modules_after(
        "from jnrrd.cli import main\n"
        "assert main(['convert', 'a.jnrrd', 'a.nrrd', '--quiet']) == 0", cwd=tmp_path)
    assert "jnrrd.writing.dispatch" in loaded and (tmp_path / "a.nrrd").is_file()
    unused = {"jnrrd.web.server", "jnrrd.web.store", "jnrrd.validation.api", "jnrrd.clinical.sitk",
              "jnrrd.clinical.nifti", "jnrrd.integrations.omezarr",
              "jnrrd.integrations.dask", "jnrrd.integrations.xarray", "SimpleITK", "pydicom",
              "nibabel", "zarr", "dask", "http.server", "crc32c", "scipy"}
    assert not loaded & unused, loaded & unused


def test_lazy_names_are_the_same_objects():
    from jnrrd.opening import open as public_open  # mode "r" (jnrrd.api) and "r+"
    from jnrrd.validation import validate

    assert jnrrd.open is public_open and jnrrd.validate is validate  # the function, not the module
    assert set(jnrrd.__all__) <= set(dir(jnrrd))
    from jnrrd import Volume, convert, to_sitk  # noqa: F401
