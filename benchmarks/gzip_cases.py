"""The gzip cases of ``run_all.py`` (issue 18, part 1): libdeflate against zlib and pynrrd.

- ``untiled-read/gzip``: jnrrd reading its untiled gzip JNRRD, jnrrd reading pynrrd's gzip
  NRRD (the NRRD bridge, zlib-written bytes), pynrrd ``nrrd.read``, and a bare one-shot
  libdeflate decode of the same bytes jnrrd reads (file read + ``deflate.gzip_decompress``).
- ``gzip-tiles/read``: a full read of 64³ gzip tiles, libdeflate against the zlib path (the
  same file, with ``jnrrd.codecs.gzip_fast.available`` switched off for the second), and the
  bare two-thread loops (``peers.BareLoop``) inflating the same members (gzip level 6:
  libdeflate level 8) with libdeflate and with zlib: the ceiling of the jnrrd ratio.
- ``gzip-write/time`` and ``gzip-write/size``: jnrrd's untiled gzip write at pynrrd's level
  (``compression_level=6``) against pynrrd ``nrrd.write`` (zlib level 6; time, then output
  bytes), and jnrrd's own zlib path for reference.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import peers
from _harness import Case, Contender, Target

NAMES = ("untiled-read/gzip", "gzip-tiles/read", "gzip-write/time", "gzip-write/size")

TARGETS = {
    "untiled-read/gzip": [("pynrrd gzip", ">=", 2.2), ("bare libdeflate one-shot", ">=", 0.9)],
    "gzip-tiles/read": [("jnrrd zlib path", ">=", 2.0)],
    "gzip-write/time": [("pynrrd gzip", ">=", 2.0)],
    "gzip-write/size": [("pynrrd gzip", "<=", 1.0)],
}


def _targets(name: str) -> list[Target]:
    return [Target("jnrrd", *t) for t in TARGETS[name]]


def _zlib_only(fn: Callable[[], object]) -> Callable[[], object]:
    """``fn`` run with libdeflate switched off (jnrrd's fallback path)."""

    def run() -> object:
        from jnrrd.codecs import gzip_fast

        saved = gzip_fast.available
        gzip_fast.available = False
        try:
            return fn()
        finally:
            gzip_fast.available = saved

    return run


def _bare_oneshot(path: Path, nbytes: int) -> Callable[[], np.ndarray]:
    """Read the file's gzip data section and inflate it in one libdeflate call."""

    def run() -> np.ndarray:
        import deflate

        with open(path, "rb") as f:
            blob = f.read()
        start = blob.index(b"\n\n") + 2  # a JNRRD header ends with a blank line
        return np.frombuffer(deflate.gzip_decompress(memoryview(blob)[start:], nbytes),
                             np.uint16)

    return run


def untiled_read(bench) -> Case:
    """Whole-file untiled gzip reads."""
    jn = bench.read("jnrrd-untiled", "gzip")
    jn.system = "jnrrd"
    bridge = bench.read("jnrrd-untiled", "gzip")
    bridge.system = "jnrrd (pynrrd's file)"
    bridge.setup = lambda: bench.dataset("pynrrd", "gzip")
    bridge.paths = lambda: [bench.dataset("pynrrd", "gzip")]
    bridge.run = lambda: bench.system("jnrrd-untiled").read(bench.dataset("pynrrd", "gzip"))
    pyn = bench.read("pynrrd", "gzip")
    pyn.system = "pynrrd gzip"
    path = lambda: bench.dataset("jnrrd-untiled", "gzip")  # noqa: E731
    bare = Contender("bare libdeflate one-shot", setup=path, paths=lambda: [path()],
                     run=lambda: _bare_oneshot(path(), bench.arr.nbytes)(),
                     check=lambda out: np.array_equal(
                         out, np.ascontiguousarray(bench.arr).reshape(-1)))
    return Case("untiled-read/gzip", [jn, bridge, pyn, bare], bench.arr.nbytes,
                _targets("untiled-read/gzip"))


def tiles_read(bench) -> Case:
    """A full read of 64³ gzip tiles: libdeflate against the zlib path, and the bare
    two-thread loops of each decoder over the same tiles (their ratio is the target's
    ceiling)."""
    fast = bench.read("jnrrd", "gzip")
    slow = bench.read("jnrrd", "gzip")
    slow.system = "jnrrd zlib path"
    slow.run = _zlib_only(slow.run)
    bare = [bench.read("bare", codec) for codec in ("gzip", "gzip-zlib")]
    return Case("gzip-tiles/read", [fast, slow, *bare], bench.arr.nbytes,
                _targets("gzip-tiles/read"))


def _writers(bench) -> dict[str, tuple[Path, Callable[[], object]]]:
    jn = bench.system("jnrrd-untiled")
    pyn = bench.system("pynrrd")
    out = {}
    for name, system, run in (("jnrrd", jn, None), ("jnrrd zlib path", jn, _zlib_only),
                              ("pynrrd gzip", pyn, None)):
        path = bench.workdir / f"gzw-{name.replace(' ', '-')}{'.jnrrd' if system is jn else ''}"
        # jnrrd at pynrrd's level (6): the same work for both; the default level (1) is
        # measured against SimpleITK in gzip_write.py
        extra = {"compression_level": 6} if system is jn else {}

        def fn(s: object = system, p: Path = path, kw: dict = extra) -> None:
            s.write(p, bench.arr, "gzip", **kw)

        out[name] = (path, run(fn) if run else fn)
    return out


def write_time(bench) -> Case:
    """Untiled gzip writes: jnrrd (libdeflate), jnrrd's zlib path, pynrrd."""
    contenders = [Contender(name, before=lambda p=path: peers.remove(p), run=fn)
                  for name, (path, fn) in _writers(bench).items()]
    return Case("gzip-write/time", contenders, bench.arr.nbytes, _targets("gzip-write/time"),
                reads=False)


def write_size(bench) -> Case:
    """The bytes each untiled gzip write produces (written once)."""
    def size(path: Path, fn: Callable[[], object]) -> Callable[[], float]:
        def measure() -> float:
            if not path.exists():
                fn()
            return float(os.path.getsize(path))
        return measure

    contenders = [Contender(name, measure=size(path, fn))
                  for name, (path, fn) in _writers(bench).items()]
    return Case("gzip-write/size", contenders, bench.arr.nbytes, _targets("gzip-write/size"),
                reads=False, metric="bytes")


BUILDERS = {"untiled-read/gzip": untiled_read, "gzip-tiles/read": tiles_read,
            "gzip-write/time": write_time, "gzip-write/size": write_size}

__all__ = ["BUILDERS", "NAMES", "TARGETS"]
