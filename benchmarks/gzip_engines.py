"""zlib against libdeflate (``deflate``) and ISA-L (``isal``): bare one-shot inflate with the
output size known, and level-6-class deflate (time and size), on the same bytes, interleaved;
then the inflate of every 64³ tile of the volume as jnrrd writes gzip tiles (one member each),
on one thread with nothing else: the decoders' own ratio on tiles, the ceiling of the
``gzip-tiles/read`` case of ``run_all.py``.

    python benchmarks/gzip_engines.py [--size 256] [--repeat 7] [--tiles-only]

The numbers chose libdeflate for jnrrd's gzip (docs/performance.md, "gzip (libdeflate)").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _volume


def _zlib_gzip(raw: bytes, level: int) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, 31)
    return c.compress(raw) + c.flush()


def _interleaved(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def inflaters(g: bytes, n: int) -> dict[str, Callable[[], object]]:
    """One-shot decoders of the gzip member ``g`` (``n`` bytes decoded)."""
    out: dict[str, Callable[[], object]] = {
        "zlib": lambda: zlib.decompressobj(31).decompress(g, n + 1)}
    try:
        import deflate

        out["libdeflate"] = lambda: deflate.gzip_decompress(g, n + 1)
    except ImportError:
        pass
    try:
        from isal import igzip_lib

        out["isal"] = lambda: igzip_lib.IgzipDecompressor(
            flag=igzip_lib.DECOMP_GZIP).decompress(g, n + 1)
    except ImportError:
        pass
    return out


def deflaters(raw: bytes) -> dict[str, Callable[[], bytes]]:
    """gzip compressors: zlib 6, libdeflate 1/4/6, ISA-L 1/2/3."""
    out: dict[str, Callable[[], bytes]] = {"zlib 6": lambda: _zlib_gzip(raw, 6)}
    try:
        import deflate

        for lv in (1, 4, 6):
            out[f"libdeflate {lv}"] = lambda lv=lv: bytes(deflate.gzip_compress(raw, lv))
    except ImportError:
        pass
    try:
        from isal import igzip_lib

        for lv in (1, 2, 3):
            out[f"isal {lv}"] = lambda lv=lv: igzip_lib.compress(raw, lv,
                                                                 flag=igzip_lib.COMP_GZIP)
    except ImportError:
        pass
    return out


def _each(fn: Callable[[bytes], object], members: list[bytes]) -> Callable[[], None]:
    """``fn`` over every member in turn, each result dropped before the next (no decoder
    pays for holding all the outputs at once)."""
    def run() -> None:
        for g in members:
            fn(g)
    return run


def tile_inflaters(members: list[bytes], n: int) -> dict[str, Callable[[], None]]:
    """Decoders of every tile member in turn (``n`` bytes each), one thread."""
    out = {"zlib": _each(lambda g: zlib.decompress(g, 31, n), members)}
    try:
        import deflate

        import jnrrd.codecs.gzip_fast as fast

        out["libdeflate"] = _each(lambda g: deflate.gzip_decompress(g, n), members)
        scratch = memoryview(bytearray(n))
        if fast.available:  # what jnrrd's tile decoder calls: into a reused buffer
            out["libdeflate, into a buffer"] = _each(lambda g: fast.inflate_into(g, scratch),
                                                     members)
    except ImportError:
        pass
    try:
        from isal import isal_zlib

        out["isal"] = _each(lambda g: isal_zlib.decompress(g, 31, n), members)
    except ImportError:
        pass
    return out


def tiles(size: int, repeat: int) -> None:
    """The tile table (module docstring)."""
    from jnrrd.codecs.gzip_fast import gzip_compress

    arr = _volume.ct_volume(size)
    t = 64
    raws = [arr[z:z + t, y:y + t, x:x + t].tobytes() for z in range(0, size, t)
            for y in range(0, size, t) for x in range(0, size, t)]
    n = len(raws[0])
    members = [gzip_compress(r, 6) or _zlib_gzip(r, 6) for r in raws]  # jnrrd's level 6
    assert all(zlib.decompress(g, 31, n) == r for g, r in zip(members, raws, strict=True))
    inf = tile_inflaters(members, n)
    times = _interleaved(inf, repeat)
    print(f"inflate {len(raws)} tiles of 64³ uint16 ({n >> 10} KiB each, stored at "
          f"{sum(map(len, members)) / (n * len(raws)):.3f} of raw, as jnrrd writes gzip level "
          f"6), one thread; medians of {repeat}, interleaved")
    for k, v in times.items():
        print(f"  {k:26s} {v * 1e3:8.1f} ms   {times['zlib'] / v:5.2f}× zlib")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=256)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--tiles-only", action="store_true", help="only the tile table")
    args = p.parse_args()
    if args.tiles_only:
        tiles(args.size, args.repeat)
        return 0
    raw = _volume.ct_volume(args.size).tobytes()
    g = _zlib_gzip(raw, 6)
    inf = inflaters(g, len(raw))
    for k, fn in inf.items():
        assert bytes(fn()) == raw, k
    t = _interleaved(inf, args.repeat)
    print(f"inflate, {len(raw) >> 20} MiB CT-like uint16 ({args.size}³), zlib-6 member of "
          f"{len(g) >> 10} KiB; medians of {args.repeat}, interleaved")
    for k, v in t.items():
        print(f"  {k:12s} {v * 1e3:9.1f} ms   {t['zlib'] / v:5.2f}× zlib")
    dfl = deflaters(raw)
    sizes = {k: len(fn()) for k, fn in dfl.items()}
    t = _interleaved(dfl, max(3, args.repeat // 2))
    print("deflate (gzip member)")
    for k, v in t.items():
        print(f"  {k:12s} {v * 1e3:9.1f} ms   {t['zlib 6'] / v:5.2f}× zlib 6   size "
              f"{sizes[k] / sizes['zlib 6']:.4f}× zlib 6")
    tiles(args.size, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
