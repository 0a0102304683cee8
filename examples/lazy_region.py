"""Open a large volume lazily and read a region: only the tiles it touches are read.

    python examples/lazy_region.py [--out DIR] [--size N]

The file is opened through a small reader that counts the bytes it hands out, so the example
can show that a region read costs exactly the stored bytes of the tiles under it.
"""

from __future__ import annotations

import io
import itertools
import os
import time

import numpy as np
from _runner import run  # examples/_runner.py: the shared --out handling

import jnrrd


class CountingReader(io.RawIOBase):
    """A read-only file that counts the bytes read through it (no ``fileno``: so jnrrd
    reads through ``seek``/``read`` rather than a memory map, and every byte is counted)."""

    def __init__(self, path: str) -> None:
        self._f = open(path, "rb", buffering=0)
        self.name = path
        self.bytes_read = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buf: bytearray) -> int:
        n = self._f.readinto(buf)
        self.bytes_read += n or 0
        return n

    def seek(self, pos: int, whence: int = 0) -> int:
        return self._f.seek(pos, whence)

    def tell(self) -> int:
        return self._f.tell()

    def close(self) -> None:
        self._f.close()
        super().close()


def main(out_dir: str, n: int) -> None:
    tile = 32
    path = os.path.join(out_dir, "large.jnrrd")
    # Write slab by slab from a memory map: the writer never needs the whole volume in memory.
    src = np.lib.format.open_memmap(os.path.join(out_dir, "source.npy"), mode="w+",
                                    dtype=np.uint16, shape=(n, n, n), fortran_order=True)
    for k in range(n):
        src[:, :, k] = (np.arange(n)[:, None] + 2 * np.arange(n)[None, :] + 3 * k) % 1000
    src.flush()
    jnrrd.write(path, src, tile=tile, compression="zstd")
    header = jnrrd.read_header(path)
    total = sum(header["tile:size_table"])
    print(f"volume {n}^3 uint16 ({src.nbytes / 2**20:.0f} MiB), {len(header['tile:size_table'])} "
          f"tiles of {tile}^3, {total:,} stored bytes")

    region = (slice(n // 2 + 4, n // 2 + 44), slice(60, 70), slice(n - 20, n))
    with CountingReader(path) as raw, jnrrd.open(raw) as vol:
        after_open = raw.bytes_read  # the header only
        t0 = time.perf_counter()
        block = vol[region]
        dt = time.perf_counter() - t0
        read = raw.bytes_read - after_open
    assert np.array_equal(block, src[region])
    # The tiles under the region, and their stored sizes from the header's size_table.
    grid = [-(-n // tile)] * 3
    ranges = [range(s.start // tile, (s.stop - 1) // tile + 1) for s in region]
    touched = [x + grid[0] * (y + grid[1] * z) for x, y, z in itertools.product(*ranges)]
    expected = sum(header["tile:size_table"][i] for i in touched)
    print(f"opened: read {after_open:,} header bytes")
    print(f"region {block.shape}: {len(touched)} of {len(header['tile:size_table'])} tiles, "
          f"{read:,} bytes read ({100 * read / total:.2f} % of the stored data) "
          f"in {dt * 1000:.1f} ms")
    assert read == expected, (read, expected)
    print("bytes read == the stored sizes of exactly the touched tiles")


if __name__ == "__main__":
    run(lambda out, args: main(out, args.size), __doc__,
        lambda p: p.add_argument("--size", type=int, default=192,
                                 help="edge length N (default 192)"))
