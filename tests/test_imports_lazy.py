"""Local reads and writes load no remote machinery: ``jnrrd.read(path)``,
``jnrrd.write(path, ...)`` (and ``open``, an in-place edit, ``validate``, ``convert``,
``cleanup`` of local files) import neither aiohttp, fsspec, asyncio nor ssl, nor jnrrd's remote
modules; those load when a URL is first opened (docs/architecture.md, "The storage face").
Each probe runs in a fresh interpreter, so nothing an earlier test imported can hide a load."""

from __future__ import annotations

import json
import subprocess
import sys

_PROBE = """
import json, sys
import numpy as np
import jnrrd
x = np.arange(16 * 12 * 10, dtype=np.uint16).reshape(16, 12, 10)
jnrrd.write({tiled!r}, x, tile=(8, 8, 8), compression="zstd")
jnrrd.write({plain!r}, x)
data, header = jnrrd.read({tiled!r})
assert (data == x).all()
with jnrrd.open({plain!r}) as vol:
    assert (vol[2:5, 1:3, 4] == x[2:5, 1:3, 4]).all()
jnrrd.read_header({tiled!r})
with jnrrd.open({tiled!r}, mode="r+") as vol:  # an in-place edit: lock, journal, commit
    vol[0:2, 0:2, 0:2] = 7
assert jnrrd.validate({tiled!r}) == []
jnrrd.convert({plain!r}, {plain!r} + ".nrrd")
jnrrd.cleanup({tmp!r})
print(json.dumps(sorted(sys.modules)))
"""

#: what only a URL needs: the event loop and TLS (asyncio pulls ssl in), the HTTP client,
#: fsspec, and jnrrd's remote modules
REMOTE_ONLY = {"asyncio", "ssl", "aiohttp", "fsspec", "yarl", "obstore",
               "jnrrd.storage.aio", "jnrrd.storage.remote", "jnrrd.storage.remote_fetch",
               "jnrrd.storage.remote_http", "jnrrd.storage.remote_stream",
               "jnrrd.storage.remote_writes", "jnrrd.storage.remote_obstore",
               "jnrrd.storage.version_check", "jnrrd.storage.bodies",
               "jnrrd.storage.validators", "jnrrd.storage.keys"}


def _modules_after(code: str) -> set[str]:
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    return set(json.loads(run.stdout.strip().splitlines()[-1]))


def test_local_reads_and_writes_load_no_remote_machinery(tmp_path):
    loaded = _modules_after(_PROBE.format(tiled=str(tmp_path / "t.jnrrd"),
                                          plain=str(tmp_path / "p.jnrrd"), tmp=str(tmp_path)))
    assert "jnrrd.storage.local" in loaded  # the probe did read through the storage face
    assert not loaded & REMOTE_ONLY, sorted(loaded & REMOTE_ONLY)


_FACE = """
import importlib, json, sys
import jnrrd.storage as face
before = sorted(m for m in sys.modules if m.startswith("jnrrd.storage.remote"))
homes = {}
for name in face.__all__:
    value = getattr(face, name)
    if callable(value):
        homes[name] = (value.__module__, value.__name__)
same = all(getattr(importlib.import_module(home), home_name) is getattr(face, name)
           for name, (home, home_name) in homes.items())
try:
    face.no_such_name
    missing = "no error"
except AttributeError as e:
    missing = str(e)
from jnrrd.storage import locks  # a submodule is still imported by name
print(json.dumps([before, same, missing, locks.__name__,
                  sorted(set(face.__all__) - set(dir(face)))]))
"""


def test_the_face_gives_remote_names_on_first_use():
    run = subprocess.run([sys.executable, "-c", _FACE], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    before, same, missing, locks, undir = json.loads(run.stdout.strip().splitlines()[-1])
    assert before == []  # importing the face loads no remote module
    assert same  # each name is its home module's object (the remote ones loaded on use)
    assert "no_such_name" in missing and locks == "jnrrd.storage.locks" and undir == []
