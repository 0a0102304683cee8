"""Shared cases of the remote-data tests (test_remote_http.py, test_remote_s3.py): the kinds
of file every remote reader must read, their arrays, random selections, tile byte ranges and
a cheap 10⁶-tile file."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np

import jnrrd

RNG_SEED = 16
SHAPE = (96, 80, 64)  # uint16: 983 040 bytes, well past the first block a reader fetches
#: name -> write keywords; "sparse" files hold the array with a zero corner
KINDS = {
    "untiled.jnrrd": {},
    "untiled-gzip.jnrrd": {"compression": "gzip"},
    "detached.jnrrd": {"detached": True},
    "contiguous.jnrrd": {"tile": 32, "compression": "zstd"},
    "chunked.jnrrd": {"tile": (32, 16, 64), "compression": "zstd", "tile_format": "chunked"},
    "sparse.jnrrd": {"tile": 16, "compression": "lz4", "sparse": True},
    "pyramid.jnrrd": {"tile": 32, "compression": "zstd", "levels": 3},
    "external.jnrrd": {"tile": 32, "compression": "zstd", "storage": "external", "levels": 2},
    "plain.nrrd": {},
    "gzip.nrrd": {"encoding": "gzip"},
    "detached.nhdr": {},
}
LEVELS = {"pyramid.jnrrd": 3, "external.jnrrd": 2}


def volume_data() -> np.ndarray:
    """The array of every kind (seeded noise, incompressible enough to pass the first block)."""
    rng = np.random.default_rng(RNG_SEED)
    return rng.integers(0, 4000, size=SHAPE, dtype=np.uint16)


def data_of(name: str) -> np.ndarray:
    """The array written to the file ``name`` of :data:`KINDS`."""
    a = volume_data()
    if name.startswith("sparse"):
        a[:48, :40] = 0  # 3 × 2.5 × 4 tiles of 16³ all zero: sparse
    return a


#: 256³ uint16 with 32³ tiles: the geometry of 512³ with 64³ tiles (issue 16), 8× smaller
BIG = 256
BIG_TILE = 32


def big_volume(path: Any, n: int = BIG, tile: int = BIG_TILE) -> np.ndarray:
    """Write an ``n``³ uint16 zstd volume with ``tile``³ tiles and 3 levels to ``path`` (256³:
    ~19 MB); return its array (noise over a ramp along axis 0: tiles compress differently).
    The region ``[n/5, 3n/5)`` on every axis touches tiles 1..4 on each: 64 tiles."""
    rng = np.random.default_rng(RNG_SEED)
    a = rng.integers(0, 64, size=(n,) * 3, dtype=np.uint16)
    a += np.arange(n, dtype=np.uint16)[:, None, None]
    jnrrd.write(path, a, tile=tile, compression="zstd", levels=3)
    return a


def values(got: Any) -> np.ndarray:
    """The array of a ``jnrrd.read`` result (``(data, header)``) or the array itself."""
    return got[0] if isinstance(got, tuple) else got


def random_selection(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple:
    """A basic-indexing selection: per axis an int (maybe negative), ``:``, or a slice with
    random bounds and maybe a step."""
    sel = []
    for n in shape:
        kind = rng.integers(4)
        if kind == 0:
            sel.append(int(rng.integers(-n, n)))
        elif kind == 1:
            sel.append(slice(None))
        else:
            a, b = sorted(int(x) for x in rng.integers(0, n + 1, size=2))
            step = int(rng.integers(1, 4)) if kind == 3 else None
            sel.append(slice(a, b, step))
    return tuple(sel)


def tile_ranges(vol: Any, level: int, lo: int | None = None, hi: int | None = None
                ) -> list[tuple[int, int]]:
    """The byte ranges of the stored tiles of ``level`` whose coords lie in [lo, hi] on
    every axis (all tiles by default)."""
    out = []
    for coords, loc in vol.levels[level].tile_locations():
        if loc is None or (lo is not None and not all(lo <= c <= hi for c in coords)):
            continue
        out.append((loc.offset, loc.offset + loc.size))
    return sorted(out)


def covered(ranges: list[tuple[int, int]], by: list[tuple[int, int]]) -> bool:
    """Whether each ``(start, stop)`` of ``ranges`` lies inside one range of ``by``."""
    return all(any(a <= s and e <= b for a, b in by) for s, e in ranges)


def many_tiles_file(n: int) -> bytes:
    """A 1-D uint8 JNRRD of ``n`` one-voxel zstd tiles (internal, chunked): its header holds
    two tables of ``n`` numbers (about 14 MB for 10⁶). Written directly: jnrrd.write would
    compress 10⁶ tiles one by one (about a minute)."""
    import zstandard

    frames = [zstandard.ZstdCompressor().compress(bytes([v])) for v in range(251)]
    size = len(frames[0])
    assert all(len(f) == size for f in frames)

    def header(start: int) -> bytes:
        fields = [{"jnrrd": "0004"}, {"type": "uint8"}, {"dimension": 1}, {"sizes": [n]},
                  {"encoding": "raw"},
                  {"extensions": {"tile": "https://jnrrd.org/extensions/tile/v1.0.0"}},
                  {"tile:enabled": True}, {"tile:dimensions": [0]}, {"tile:sizes": [1]},
                  {"tile:storage": "internal"}, {"tile:format": "chunked"},
                  {"tile:offset_table": list(range(start, start + n * size, size))},
                  {"tile:size_table": [size] * n}, {"tile:compression": "zstd"}]
        return "".join(json.dumps(f) + "\n" for f in fields).encode() + b"\n"

    start = 0
    while len(head := header(start)) > start:  # the offsets' digits grow with the header
        start = len(head) + 16
    return head + bytes(start - len(head)) + b"".join(frames[i % 251] for i in range(n))


def random_volume(shape: tuple[int, ...] = (40, 30, 20), seed: int = 0) -> np.ndarray:
    """A seeded random uint16 volume (values below 4000)."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 4000, shape).astype(np.uint16)


def io_settings(**knobs: Any) -> jnrrd.IOSettings:
    """The ``io=`` of a remote test: the configured I/O settings (so the backend the
    ``remote_backend`` fixture chose, tests/conftest.py) with ``knobs``."""
    return dataclasses.replace(jnrrd.config.current().io, **knobs)


def put_to_s3(s3: Any, local: Any, key: str) -> None:
    """Upload a local file or directory to ``key`` of the test bucket ``s3`` (the fixture)."""
    import os

    import fsspec

    fs = fsspec.filesystem("s3", **s3.storage_options)
    fs.put(str(local), s3.path(key), recursive=os.path.isdir(local))
    fs.invalidate_cache()
