"""The settings are typed for users: mypy accepts the documented spellings of the policy,
the I/O settings, ``jnrrd.config`` and the write options, and names a misspelt keyword or a
wrong type (the signatures name every keyword through ``Unpack``; docs/api.md,
"Configuration"). mypy runs on a user's file, not on the package (``follow_imports=silent``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow

GOOD = """
    import numpy as np

    import jnrrd

    pol = jnrrd.Policy(max_bytes=1 << 30, allow_parent=True)
    io = jnrrd.IOSettings(threads=2, request_timeout=5.0, cache_bytes=None)
    data, header = jnrrd.read("a.jnrrd", policy=pol, io=io, max_tiles=10, threads=1)
    vol = jnrrd.open("a.jnrrd", cache_bytes=0, allowed_roots=["/data"], follow_redirects=False)
    head = jnrrd.read_header("a.jnrrd", max_header_bytes=1 << 20)
    problems = jnrrd.validate("a.jnrrd", deep=True, threads=2, io=io)
    jnrrd.write("b.jnrrd", np.zeros(3), tile=4, sparse=True, checksum="crc32", threads=2)
    jnrrd.convert("a.jnrrd", "c.jnrrd", tile=8, compression="zstd", shards=2, threads=1)
    with jnrrd.config(threads=1, max_bytes=1 << 20) as now:
        threads: int | None = now.io.threads
    jnrrd.config.set(io=io, policy=pol, request_retries=0)
"""

BAD = {
    'jnrrd.read("a.jnrrd", max_byte=1)': 'Unexpected keyword argument "max_byte"',
    'jnrrd.open("a.jnrrd", io=jnrrd.Policy())': 'Argument "io" to "open"',
    'jnrrd.write("b.jnrrd", np.zeros(3), sparse="yes")': 'Argument "sparse" to "write"',
    'jnrrd.IOSettings(threads="2")': 'Argument "threads" to "IOSettings"',
    "jnrrd.Policy().max_bytes = 3": 'Property "max_bytes"',
    "jnrrd.config(thread=1)": 'Unexpected keyword argument "thread"',
    'jnrrd.validate("a.jnrrd", max_tiles="many")': 'Argument "max_tiles" to "validate"',
}


def _mypy(tmp_path, body: str) -> tuple[str, int]:
    path = tmp_path / "user.py"
    path.write_text(textwrap.dedent(body))
    # a process of its own, outside the simulated platform (docs/portability.md): mypy is a
    # Linux tool here and asks this system's os module, which the simulation trims
    env = {k: v for k, v in os.environ.items() if k != "JNRRD_SIMULATE_PLATFORM"}
    done = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent",
                           "--no-incremental", "--check-untyped-defs",
                           "--cache-dir", str(tmp_path / "c"), str(path)],
                          capture_output=True, text=True, timeout=600, env=env)
    return done.stdout + done.stderr, done.returncode


def test_documented_spellings_type_check(tmp_path):
    out, status = _mypy(tmp_path, GOOD)
    assert status == 0, out


def test_misspellings_and_wrong_types_are_named(tmp_path):
    lines = list(BAD)
    out, status = _mypy(tmp_path, "import numpy as np\nimport jnrrd\n" + "\n".join(lines))
    assert status == 1
    for k, (line, want) in enumerate(BAD.items(), start=3):
        assert f"user.py:{k}: error: {want}" in out, (line, out)
