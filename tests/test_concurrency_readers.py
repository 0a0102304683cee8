"""Concurrency: many threads reading one ``Volume``; processes reading one file while another
process atomically replaces it (docs/format.md#atomic-writes, docs/api.md#volumes "Safe to read from
many threads at once")."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import crash_writer
import numpy as np
import pytest
from thread_runner import run_threads

import jnrrd

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.parametrize("kind", ["internal", "external", "detached", "attached"])
def test_many_threads_read_one_volume(tmp_path, kind):
    """16 threads slice one open Volume (every level) at once; every result is exact."""
    path = str(tmp_path / "v.jnrrd")
    crash_writer.write(path, kind, 3)
    with jnrrd.open(path) as ref:
        expected = [np.asarray(lv[...]) for lv in ref.levels]
    with jnrrd.open(path) as vol:
        def work(seed: int) -> None:
            rng = np.random.default_rng(seed)
            for _ in range(20):
                k = int(rng.integers(len(vol.levels)))
                lv, want = vol.levels[k], expected[k]
                key = tuple(slice(int(a), int(a) + int(b) + 1, int(s)) for a, b, s in zip(
                    rng.integers(0, lv.shape), rng.integers(0, lv.shape),
                    rng.integers(1, 3, size=lv.ndim)))
                np.testing.assert_array_equal(lv[key], want[key])

        run_threads(work, 16)


_READER = r"""
import sys, time, warnings
import numpy as np
import jnrrd, crash_writer
path, seconds = sys.argv[1], float(sys.argv[2])
seen, end = {}, time.monotonic() + seconds
while time.monotonic() < end:
    data, _ = jnrrd.read(path)
    v = crash_writer.version_of(data)
    if not np.array_equal(data, crash_writer.volume(v)):
        print("MIX", v, flush=True)
        sys.exit(1)
    with jnrrd.open(path) as vol:
        sl = vol[5:40, ::3, 7]
        v = crash_writer.version_of(vol[0, 0, 0])
        if not np.array_equal(sl, crash_writer.volume(v)[5:40, ::3, 7]):
            print("MIX-SLICE", v, flush=True)
            sys.exit(1)
    seen[v] = seen.get(v, 0) + 1
print("SEEN", sorted(seen.items()), flush=True)
"""


def test_open_reads_tiles_from_the_file_whose_header_it_parsed(tmp_path, monkeypatch):
    """Regression (found by the replacing-writer test below): ``open`` must read the tiles
    from the same file (inode) as the header, even if the path is replaced in between."""
    import jnrrd.api

    path = str(tmp_path / "v.jnrrd")
    other = str(tmp_path / "other.jnrrd")
    crash_writer.write(path, "internal", 10)
    jnrrd.write(other, crash_writer.volume(11)[:, :, :20], tile=(8, 8, 8), compression="gzip")
    parse = jnrrd.api.parse_header

    def parse_then_replace(*args, **kwargs):
        out = parse(*args, **kwargs)
        os.replace(other, path)  # an atomic replace by another process, right now
        return out

    monkeypatch.setattr(jnrrd.api, "parse_header", parse_then_replace)
    with jnrrd.open(path) as vol:
        data = vol[...]
    np.testing.assert_array_equal(data, crash_writer.volume(10))


@pytest.mark.slow
@pytest.mark.parametrize("kind", [
    pytest.param("internal", id="internal"),
    pytest.param("attached", id="attached"),
])
def test_readers_see_whole_versions_while_a_writer_replaces_the_file(tmp_path, kind):
    """Two reader processes loop over one file while a writer process replaces it 30 times
    (alternating versions): every read is one whole version, never a mix, never an error."""
    path = str(tmp_path / "v.jnrrd")
    crash_writer.write(path, kind, 10)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [HERE, os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")]))
    readers = [subprocess.Popen([sys.executable, "-c", _READER, path, "12"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
               for _ in range(2)]
    try:
        time.sleep(1.0)
        writer = subprocess.run([sys.executable, os.path.join(HERE, "crash_writer.py"), path,
                                 kind, "10", "30"], env=env, capture_output=True, timeout=300)
        assert writer.returncode == 0, writer.stderr.decode()[-2000:]
        for r in readers:
            out, err = r.communicate(timeout=300)
            assert r.returncode == 0, (out + err).decode()[-2000:]
            assert b"SEEN" in out
            seen = dict(eval(out.split(b"SEEN", 1)[1].strip()))  # [(version, count), ...]
            assert set(seen) <= {10, 11}
    finally:
        for r in readers:
            if r.poll() is None:
                r.kill()
            r.communicate()


_READ_AT_EXIT = """
import atexit, sys
import numpy as np
import jnrrd

io = jnrrd.IOSettings(remote_backend="obstore") if "://" in sys.argv[1] else None
vol = jnrrd.open(sys.argv[1], io=io, follow_redirects=True, cache_bytes=0)
print("first", int(vol[0, 0, 0]), flush=True)
atexit.register(lambda: print("at exit", int(np.asarray(vol[:]).sum(dtype=np.int64)),
                              flush=True))
"""


def read_at_exit(where: str) -> str:
    """The output of a program that reads ``where`` in an ``atexit`` handler, after the
    interpreter's thread pools stopped taking work (the read runs in the calling thread)."""
    done = subprocess.run([sys.executable, "-c", _READ_AT_EXIT, where], capture_output=True,
                          text=True, timeout=60, cwd=HERE)
    assert done.returncode == 0 and not done.stderr, done.stderr[-2000:]
    return done.stdout


def test_a_read_in_an_atexit_handler_works(tmp_path):
    a = np.random.default_rng(0).integers(0, 255, (64, 64, 40), np.uint8)
    jnrrd.write(tmp_path / "v.jnrrd", a, tile=16, compression="zstd")
    assert read_at_exit(str(tmp_path / "v.jnrrd")) == (
        f"first {a[0, 0, 0]}\nat exit {a.sum(dtype=np.int64)}\n")
