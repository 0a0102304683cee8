"""zlib against libdeflate (``deflate``) and ISA-L (``isal``): bare one-shot inflate with the
output size known, and level-6-class deflate (time and size), on the same bytes, interleaved.

    python benchmarks/gzip_engines.py [--size 256] [--repeat 7]

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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=256)
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
