"""The viewer's access pattern on the 512³ zstd-3 volume with 64³ tiles and a 3-level pyramid.

    python benchmarks/viewer.py [--size 512] [--repeat 5]

Two cases, also in ``run_all.py``'s table (issue 18, part 2):

- ``viewer/scroll-zoom``: open, then scroll through 100 consecutive whole slices along each
  axis (level 0, starting 50 before the middle), then zoom from level 2 to level 0 around a
  point (three viewports per level, 256, 192 and 128 voxels wide at 512³, on the plane through
  the point). Contenders: jnrrd with ``cache_bytes=256 MiB`` (the subject), jnrrd with
  ``cache_bytes=0``, tensorstore with a ``cache_pool`` of 256 MiB shared by its three level
  arrays, and zarr-python (no decoded-chunk cache). Every repetition opens the data again: the
  decoded caches start empty, the page cache is warm. Targets (issue 18): ≤ 0.15× jnrrd's own
  uncached time, ≤ 1.0× tensorstore's cached time.
- ``viewer/cached-slice-{x,y,z}``: slice reads that hit only cached tiles (16 consecutive
  whole slices across file axis 0, 1 or 2 inside one tile row, all their tiles decoded
  beforehand) against copying the same slices out of a NumPy array
  (``np.array(view[sel], order="K")``: the same memory layout as jnrrd's result, the cheapest
  copy; across axis 0, the fastest, NumPy gathers 2-byte elements, elsewhere it copies rows).
  Target: ≤ 2×.

The peers store the same level arrays (jnrrd's own levels read back) with the same 64³ chunks
and zstd-3, in C order (axes reversed, docs/format.md#zarr-axis-order), as in the rest of the table.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peers
from _harness import Case, Contender, Target

CACHE = 256 << 20
LEVELS = 3
SUBJECT = "jnrrd cache 256 MiB"


def scroll_zoom_path(size: int) -> list[tuple[int, tuple]]:
    """``(level, selection in file axes)`` of the scroll-then-zoom session."""
    count = min(100, size)
    start = max(0, size // 2 - count // 2)
    path: list[tuple[int, tuple]] = []
    for axis in range(3):
        for i in range(start, start + count):
            sel = [slice(None)] * 3
            sel[axis] = i
            path.append((0, tuple(sel)))
    point = (int(0.45 * size), int(0.55 * size), size // 2)
    for level in range(LEVELS - 1, -1, -1):
        n = max(1, size >> level)
        centre = [p >> level for p in point]
        for edge in (256, 192, 128):
            half = max(4, edge * size // 512) // 2
            sel = tuple(slice(max(0, c - half), min(n, c + half)) for c in centre[:2])
            path.append((level, (*sel, min(centre[2], n - 1))))
    return path


def cached_slices(size: int, axis: int) -> list[tuple]:
    """16 consecutive whole slices along ``axis``, inside the tile row at the middle."""
    first = (size // 2) // peers.TILE * peers.TILE
    out = []
    for i in range(first, min(size, first + 16)):
        sel = [slice(None)] * 3
        sel[axis] = i
        out.append(tuple(sel))
    return out


class _Pyramid:
    """The datasets of the viewer cases, written once: the jnrrd pyramid and the peers'
    copies of its levels."""

    def __init__(self, bench) -> None:
        self.bench = bench
        self.levels: list[np.ndarray] | None = None  # file axes, F order
        self._paths: dict[str, object] = {}

    def jnrrd(self) -> Path:
        return self._get("jnrrd", self._write_jnrrd)

    def peer(self, key: str) -> list[Path]:
        return self._get(key, lambda: self._write_peer(key))

    def _get(self, key: str, make):
        if key not in self._paths:
            try:
                self._paths[key] = make()
            except Exception as exc:  # the harness reports it as n/a
                self._paths[key] = exc
        got = self._paths[key]
        if isinstance(got, Exception):
            raise got
        return got

    def _write_jnrrd(self) -> Path:
        import jnrrd

        path = self.bench.workdir / "viewer.jnrrd"
        data = self.bench.arr.T
        tile = (peers.TILE,) * 3
        try:
            jnrrd.write(path, data, tile=tile, compression="zstd", compression_level=3,
                        levels=LEVELS)
        except TypeError:
            jnrrd.write(path, data, tile=tile, codecs=peers.Jnrrd.ZSTD3, levels=LEVELS)
        self.levels = [jnrrd.read(path, level=k)[0] for k in range(LEVELS)]
        return path

    def _write_peer(self, key: str) -> list[Path]:
        self.jnrrd()
        assert self.levels is not None
        system = peers.make(key)
        out = []
        for k, level in enumerate(self.levels):
            path = self.bench.workdir / f"viewer-{key}-{k}"
            system.write(path, np.ascontiguousarray(level.T), "zstd")
            out.append(path)
        return out

    def files(self, key: str) -> list[Path]:
        return [self.jnrrd()] if key == "jnrrd" else self.peer(key)


def _reversed(sel: tuple) -> tuple:
    return tuple(reversed(sel))


def _jnrrd_session(pyr: _Pyramid, path: list, cache_bytes: int):
    def run() -> list[np.ndarray]:
        import jnrrd

        with jnrrd.open(pyr.jnrrd(), cache_bytes=cache_bytes) as vol:
            return [vol.levels[k][sel] for k, sel in path]
    return run


def _tensorstore_session(pyr: _Pyramid, path: list):
    def run() -> list[np.ndarray]:
        ts = peers._import("tensorstore")
        context = ts.Context({"cache_pool": {"total_bytes_limit": CACHE}})
        stores = [ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(p)}},
                          read=True, context=context).result()
                  for p in pyr.peer("tensorstore")]
        return [stores[k][_reversed(sel)].read().result() for k, sel in path]
    return run


def _zarr_session(pyr: _Pyramid, path: list):
    def run() -> list[np.ndarray]:
        zarr = peers._import("zarr")
        arrays = [zarr.open_array(str(p), mode="r") for p in pyr.peer("zarr")]
        return [arrays[k][_reversed(sel)] for k, sel in path]
    return run


def _check(pyr: _Pyramid, path: list, c_order: bool):
    def check(outs: list[np.ndarray]) -> bool:
        assert pyr.levels is not None
        return len(outs) == len(path) and all(
            np.array_equal(o.T if c_order else o, pyr.levels[k][sel])
            for o, (k, sel) in zip(outs, path, strict=True))
    return check


_PYRAMIDS: dict[int, _Pyramid] = {}


def _pyramid(bench) -> _Pyramid:
    key = id(bench)
    if key not in _PYRAMIDS:
        _PYRAMIDS[key] = _Pyramid(bench)
    return _PYRAMIDS[key]


def scroll_zoom_case(bench) -> Case:
    """``viewer/scroll-zoom`` (module docstring)."""
    pyr = _pyramid(bench)
    path = scroll_zoom_path(bench.size)
    item = bench.arr.itemsize
    nbytes = 0
    for k, sel in path:
        n = max(1, bench.size >> k)
        nbytes += item * int(np.prod([len(range(n)[s]) for s in sel if isinstance(s, slice)]))
    contenders = [
        Contender(SUBJECT, setup=pyr.jnrrd, paths=lambda: pyr.files("jnrrd"),
                  run=_jnrrd_session(pyr, path, CACHE), check=_check(pyr, path, False)),
        Contender("jnrrd cache_bytes=0", setup=pyr.jnrrd, paths=lambda: pyr.files("jnrrd"),
                  run=_jnrrd_session(pyr, path, 0), check=_check(pyr, path, False)),
        Contender("tensorstore cache_pool", setup=lambda: pyr.peer("tensorstore"),
                  paths=lambda: pyr.files("tensorstore"), run=_tensorstore_session(pyr, path),
                  check=_check(pyr, path, True)),
        Contender("zarr-python", setup=lambda: pyr.peer("zarr"),
                  paths=lambda: pyr.files("zarr"), run=_zarr_session(pyr, path),
                  check=_check(pyr, path, True)),
    ]
    return Case("viewer/scroll-zoom", contenders, nbytes,
                [Target(SUBJECT, "jnrrd cache_bytes=0", "<=", 0.15),
                 Target(SUBJECT, "tensorstore cache_pool", "<=", 1.0)], subject=SUBJECT)


def cached_slice_case(bench, axis: int) -> Case:
    """``viewer/cached-slice-{x,y,z}`` (module docstring)."""
    import jnrrd

    pyr = _pyramid(bench)
    slices = cached_slices(bench.size, axis)
    view = bench.arr.T  # file axes, like jnrrd's result
    state: dict[str, object] = {}

    def setup() -> None:
        vol = jnrrd.open(pyr.jnrrd(), cache_bytes=CACHE)
        for sel in slices:  # decode every tile the slices touch
            vol[sel]
        state["vol"] = vol

    def run() -> list[np.ndarray]:
        vol = state["vol"]
        return [vol[sel] for sel in slices]

    def check(outs: list[np.ndarray]) -> bool:
        info = state["vol"].cache_info()
        return info.evictions == 0 and all(
            np.array_equal(o, view[s]) for o, s in zip(outs, slices, strict=True))

    nbytes = sum(view[s].nbytes for s in slices[:1]) * len(slices)
    return Case(f"viewer/cached-slice-{'xyz'[axis]}", [
        Contender("jnrrd cached tiles", setup=setup, run=run, check=check),
        Contender("numpy copy", run=lambda: [np.array(view[s], order="K") for s in slices]),
    ], nbytes, [Target("jnrrd cached tiles", "numpy copy", "<=", 2.0)],
        subject="jnrrd cached tiles", reads=False)


CASES = {"viewer/scroll-zoom": scroll_zoom_case,
         **{f"viewer/cached-slice-{name}": (lambda b, axis=axis: cached_slice_case(b, axis))
            for axis, name in enumerate("xyz")}}


def main() -> int:
    """Command-line entry point: the viewer cases alone, in the table format of run_all."""
    import run_all

    p = run_all.parser(__doc__)
    p.add_argument("--only", help="comma-separated case names or patterns")
    return run_all.run(dict(CASES), p.parse_args(), "jnrrd viewer benchmark")


if __name__ == "__main__":
    sys.exit(main())
