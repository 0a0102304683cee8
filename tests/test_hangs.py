"""Reads that must never block: non-regular files named by a header, reads after ``fork()``.

Every test runs its read under a short alarm (or in a child waited for with a bound), so a
regression fails in seconds instead of hanging the suite.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from forking import env_with_this_directory

import jnrrd

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")

BOUND_S = 5.0


class Hung(BaseException):
    """Raised by the alarm: the read blocked (not a JnrrdError)."""


@contextlib.contextmanager
def alarm(seconds: float = BOUND_S) -> Iterator[None]:
    def on_alarm(signum: int, frame: Any) -> None:
        raise Hung(f"blocked for more than {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _replace_header(path: Any, **changes: Any) -> None:
    """Rewrite the JSON header lines of ``path`` with ``changes`` (None removes a key)."""
    raw = pathlib.Path(path).read_bytes()
    head, sep, tail = raw.partition(b"\n\n")
    lines = head.split(b"\n")
    out = [lines[0]]
    seen = set()
    for line in lines[1:]:
        (key, value), = json.loads(line).items()
        if key in changes:
            seen.add(key)
            if changes[key] is None:
                continue
            value = changes[key]
        out.append(json.dumps({key: value}).encode())
    out += [json.dumps({k: v}).encode() for k, v in changes.items()
            if k not in seen and v is not None]
    pathlib.Path(path).write_bytes(b"\n".join(out) + sep + tail)


def _to_fifo(path: str) -> None:
    os.remove(path)
    os.mkfifo(path)


def _to_socket(path: str) -> socket.socket:
    os.remove(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    return s


def _detached(tmp_path: Any) -> tuple[str, str]:
    path = str(tmp_path / "v.jnrrd")
    jnrrd.write(path, np.arange(24, dtype="u1").reshape(4, 6), detached=True)
    name = jnrrd.read_header(path)["data_file"]
    return path, str(tmp_path / name)


def _external(tmp_path: Any, files: bool) -> tuple[str, str]:
    path = str(tmp_path / "v.jnrrd")
    jnrrd.write(path, np.arange(24, dtype="u1").reshape(4, 6), tile=(2, 3),
                storage="external", compression="gzip", pattern="t_{i}.bin")
    h = jnrrd.read_header(path)
    base = h["tile:base_dir"]
    if files:
        entries = [{"level": 0, "indices": [i % 2, i // 2], "file": f"{base}/t_{i}.bin"}
                   for i in range(4)]
        _replace_header(path, **{"tile:files": entries, "tile:pattern": None,
                                 "tile:base_dir": None})
    return path, str(tmp_path / base / "t_2.bin")


def _nhdr(tmp_path: Any) -> tuple[str, str]:
    path = str(tmp_path / "v.nhdr")
    with open(path, "w") as f:
        f.write("NRRD0004\ntype: uint8\ndimension: 1\nsizes: 4\nencoding: raw\n"
                "data file: d.raw\n\n")
    data = str(tmp_path / "d.raw")
    pathlib.Path(data).write_bytes(b"\x01\x02\x03\x04")
    return path, data


def _data_files(tmp_path: Any) -> tuple[str, str]:
    path, data = _detached(tmp_path)
    _replace_header(path, data_file=None, data_files=[os.path.basename(data)])
    return path, data


DATASETS: dict[str, Callable[[Any], tuple[str, str]]] = {
    "data_file": _detached,
    "data_files": _data_files,
    "tile-pattern": lambda p: _external(p, files=False),
    "tile-files": lambda p: _external(p, files=True),
    "nhdr-data-file": _nhdr,
}


def _reads(path: str) -> list[Callable[[], Any]]:
    def sliced() -> Any:
        with jnrrd.open(path) as vol:
            return vol[...]

    return [lambda: jnrrd.read(path), sliced]


@pytest.mark.parametrize("kind", sorted(DATASETS))
def test_fifo_named_by_a_header_is_refused_not_opened(tmp_path, kind):
    """Regression: a FIFO named as a data or tile file blocked ``open()`` forever."""
    path, target = DATASETS[kind](tmp_path)
    _to_fifo(target)
    for fn in _reads(path):
        with alarm(), pytest.raises(jnrrd.DataError, match="not a regular file") as info:
            fn()
        assert os.path.basename(target) in str(info.value)


@pytest.mark.parametrize("kind", ["data_file", "tile-pattern"])
def test_socket_named_by_a_header_is_refused(tmp_path, kind):
    """A Unix socket cannot be opened at all (ENXIO): still a DataError naming the path."""
    path, target = DATASETS[kind](tmp_path)
    with _to_socket(target):
        for fn in _reads(path):
            with alarm(), pytest.raises(jnrrd.DataError, match="not a regular file"):
                fn()


def test_device_named_by_a_header_is_refused(tmp_path):
    """``/dev/zero`` (allowed by allow_absolute) is not data: refused, not read."""
    path, _ = _detached(tmp_path)
    _replace_header(path, data_file="/dev/zero")
    with alarm(), pytest.raises(jnrrd.DataError, match="not a regular file"):
        jnrrd.read(path, allow_absolute=True)


def test_validate_deep_refuses_a_fifo_tile(tmp_path):
    path, target = DATASETS["tile-pattern"](tmp_path)
    _to_fifo(target)
    with alarm():
        problems = jnrrd.validate(path, deep=True)
    assert any("not a regular file" in p.message for p in problems), problems


# -- fork ------------------------------------------------------------------------------------

# Run in a fresh interpreter: forking the test runner itself (napari, Qt and thousands of tests
# loaded) can fail with ENOMEM on a machine with strict overcommit, which says nothing about
# jnrrd. The script starts the shared decode pool with a tiled read, forks, reads in the child
# and exits 0 only if every child read returned the data within the bound.
_FORK_SCRIPT = """
import os, sys, warnings
import numpy as np
import jnrrd
from forking import wait_for_child

path, storage, bound = sys.argv[1], sys.argv[2], float(sys.argv[3])
data = (np.arange(64 * 64) % 251).astype("u1").reshape(64, 64)
jnrrd.write(path, data, tile=(8, 8), compression="zstd", storage=storage)
assert np.array_equal(jnrrd.read(path)[0], data)  # starts the pool


def whole_volume():
    with jnrrd.open(path) as vol:
        return vol[...]


for read in (whole_volume, lambda: jnrrd.read(path)[0]):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
        pid = os.fork()
    if pid == 0:  # the child
        code = 3
        try:
            code = 0 if np.array_equal(read(), data) else 2
        finally:
            os._exit(code)
    wait_for_child(pid, bound, "the forked child's read")
"""


@pytest.mark.parametrize("storage", ["internal", "external"])
def test_read_after_fork_does_not_hang(tmp_path, storage):
    """Regression: after a tiled read in the parent (which starts the shared decode pool), a
    forked child's read waited forever for pool threads that do not exist in the child."""
    script = tmp_path / "fork_read.py"
    script.write_text(_FORK_SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "v.jnrrd"), storage, "10"],
        capture_output=True, text=True, timeout=120, env=env_with_this_directory())
    assert proc.returncode == 0, proc.stderr[-2000:]
