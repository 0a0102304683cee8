"""Per-codec throughput on a 64³ uint16 tile, and the chain machinery's overhead.

Run: ``python benchmarks/codecs.py [--repeat 7]``. Prints encode/decode MB/s (of the raw tile
size) per codec chain, then the overhead of ``CodecChain`` over calling zstandard / lz4
directly on a 256 KiB tile (target: under 5 %). Medians over interleaved repetitions
(benchmarks/README.md#method).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import lz4.frame
import numpy as np
import zstandard

from jnrrd.codecs import CodecChain

LE = {"name": "bytes", "configuration": {"endian": "little"}}
CHAINS = {
    "bytes": [LE],
    "zstd-3": [LE, {"name": "zstd", "configuration": {"level": 3}}],
    "zstd-1+checksum": [LE, {"name": "zstd", "configuration": {"level": 1, "checksum": True}}],
    "gzip-5": [LE, {"name": "gzip", "configuration": {"level": 5}}],
    "lz4 (frame)": [LE, {"name": "lz4"}],
    "bz2-9": [LE, {"name": "bz2"}],
    "numcodecs.lz4": [LE, {"name": "numcodecs.lz4", "configuration": {"acceleration": 1}}],
    "numcodecs.zlib-1": [LE, {"name": "numcodecs.zlib", "configuration": {"level": 1}}],
    "shuffle+zstd-3": [LE, {"name": "numcodecs.shuffle", "configuration": {"elementsize": 2}},
                       {"name": "zstd", "configuration": {"level": 3}}],
    "crc32c": [LE, {"name": "crc32c"}],
    "transpose+bytes": [{"name": "transpose", "configuration": {"order": [2, 1, 0]}}, LE],
    "conditional(zstd-3)": [LE, {"name": "conditional", "configuration": {"codecs": [
        {"name": "zstd", "configuration": {"level": 3}}]}}],
}


def tile(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Smooth-ish uint16 data: a low-frequency field plus Poisson noise."""
    rng = np.random.default_rng(seed)
    axes = np.meshgrid(*(np.linspace(0, 2 * np.pi, n) for n in shape), indexing="ij")
    field = 2000 + 800 * np.sin(axes[0]) * np.cos(axes[1]) + 300 * np.sin(2 * axes[-1])
    return rng.poisson(field).astype(np.uint16)


def timeit(fn: Callable[[], object], min_time: float = 0.05) -> float:
    """Seconds per call (best loop count for ``min_time``)."""
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt >= min_time:
            return dt / n
        n *= 2


def throughput(repeat: int) -> None:
    data = tile((64, 64, 64))
    mb = data.nbytes / 1e6
    print(f"64^3 uint16 tile ({data.nbytes} bytes), median of {repeat} runs")
    print(f"{'chain':24} {'ratio':>6} {'encode MB/s':>12} {'decode MB/s':>12}")
    for name, codecs in CHAINS.items():
        chain = CodecChain.from_json(codecs, dtype="uint16", shape=data.shape,
                                     decision="compress_if_smaller")
        stored = chain.encode(data)
        assert np.array_equal(chain.decode(stored), data)
        enc = statistics.median(timeit(lambda c=chain: c.encode(data)) for _ in range(repeat))
        dec = statistics.median(
            timeit(lambda c=chain, s=stored: c.decode(s)) for _ in range(repeat)
        )
        print(f"{name:24} {data.nbytes / len(stored):6.2f} {mb / enc:12.0f} {mb / dec:12.0f}")


def overhead(repeat: int) -> None:
    # An F-ordered tile: its axis-0-fastest bytes are its memory, as for the bare loops, so
    # both sides compress the same buffer and only the machinery differs.
    data = np.asfortranarray(tile((64, 64, 32)))  # 256 KiB
    assert data.nbytes == 256 * 1024
    print(f"\nchain overhead on a {data.nbytes // 1024} KiB tile (median of {repeat} "
          "interleaved runs; positive = chain slower)")
    zc, zd = zstandard.ZstdCompressor(level=3), zstandard.ZstdDecompressor()
    raw = data.tobytes(order="F")
    cases = {
        "zstd-3": (
            [LE, {"name": "zstd", "configuration": {"level": 3}}],
            lambda: zc.compress(raw),
            lambda blob: (lambda: np.frombuffer(zd.decompress(blob), np.uint16)),
        ),
        "lz4": (
            [LE, {"name": "lz4"}],
            lambda: lz4.frame.compress(raw),
            lambda blob: (lambda: np.frombuffer(lz4.frame.decompress(blob), np.uint16)),
        ),
    }
    for name, (codecs, bare_enc, bare_dec_for) in cases.items():
        chain = CodecChain.from_json(codecs, dtype="uint16", shape=data.shape)
        stored = chain.encode(data)
        bare_dec = bare_dec_for(stored)
        t: dict[str, list[float]] = {"be": [], "ce": [], "bd": [], "cd": []}
        for _ in range(repeat):
            # Interleaved A B A B so drift affects both sides alike.
            t["be"].append(timeit(bare_enc))
            t["ce"].append(timeit(lambda ch=chain: ch.encode(data)))
            t["bd"].append(timeit(bare_dec))
            t["cd"].append(timeit(lambda ch=chain, s=stored: ch.decode(s)))
        for label, bare, mine in (("encode", "be", "ce"), ("decode", "bd", "cd")):
            med = statistics.median(c / b for b, c in zip(t[bare], t[mine], strict=True))
            best = min(t[mine]) / min(t[bare])
            print(f"{name:8} {label}: bare {1e6 * min(t[bare]):8.1f} us, chain "
                  f"{1e6 * min(t[mine]):8.1f} us; overhead best-of {100 * (best - 1):+6.1f} %, "
                  f"median ratio {100 * (med - 1):+6.1f} %")


def main() -> None:
    """Run both measurements."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    throughput(args.repeat)
    overhead(args.repeat)


if __name__ == "__main__":
    main()
