"""Editing volumes: appending frames and updating regions, jnrrd against tensorstore and
zarr-python (docs/editing.md).

    python benchmarks/editing.py [--size 512] [--frames 500] [--repeat 5]

Cases (same data, same 64-voxel chunking, zstd level 3 everywhere, C axis order for all):

- ``append/frames``: an empty volume grows by ``--frames`` frames of 256 x 256 uint16 (CT
  slices), appended one at a time, with a commit every 50 frames. jnrrd: ``jnrrd.create``,
  ``vol.append(frame)``, ``vol.commit()`` every 50 (tiles 16 x 64 x 64 in C order), durable
  (``fsync``ed) commits (and, for information, ``durable=False``: no ``fsync``, as the
  peers). tensorstore: a resizable zarr3 array (chunks 16 x 64 x 64), one ``resize`` per
  frame, the frame written in a transaction committed every 50 frames; and
  without transactions (every write stored at once). zarr-python: ``Array.append`` per frame
  (no commits: every append is stored). Target: jnrrd ≤ 1.0x tensorstore's time.
- ``update/regions``: 100 random 32³ regions (a new seed each repetition) of a ``--size``³
  uint16 zstd volume (64³ chunks) overwritten with random values. jnrrd: ``jnrrd.open(path,
  mode="r+")``, 100 region writes, one commit (the file made editable once, untimed, by
  ``jnrrd.compact``). tensorstore: the 100 writes in one transaction; and without.
  zarr-python: 100 ``z[region] = values``. Targets: jnrrd ≤ 1.0x tensorstore and ≤ 0.5x
  zarr-python.

Repetitions are interleaved (the order rotates) and the table shows medians
(benchmarks/_harness.py); times on a shared machine are noisy, ratios less so.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _volume
import run_all
from _harness import Case, Contender, Target

FRAME = 256
EVERY = 50
CHUNK = 64
DEPTH = 16  # frames per chunk along the appended axis
ZSTD = [{"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "zstd", "configuration": {"level": 3}}]


def _frames(bench: run_all.Bench, n: int) -> list[np.ndarray]:
    """``n`` frames of ``FRAME`` x ``FRAME`` uint16: slices of the CT-like volume."""
    edge = min(FRAME, bench.size)
    arr = bench.arr
    return [np.ascontiguousarray(arr[k % arr.shape[0], :edge, :edge]) for k in range(n)]


def append_case(bench: run_all.Bench, frames: int) -> Case:
    import jnrrd

    data = _frames(bench, frames)
    edge = data[0].shape[0]
    work = bench.workdir / "append"

    def fresh(name: str) -> Path:
        path = work / name
        shutil.rmtree(path, ignore_errors=True)
        if path.exists():
            path.unlink()
        work.mkdir(parents=True, exist_ok=True)
        return path

    def run_jnrrd(durable: bool = True) -> object:
        path = fresh("j.jnrrd")
        vol = jnrrd.create(path, (1, edge, edge), "uint16", tile=(DEPTH, CHUNK, CHUNK),
                           compression="zstd", compression_level=3, index_order="C",
                           durable=durable)
        vol[0] = data[0]
        for k in range(1, frames):
            vol.append(data[k], axis=0)
            if (k + 1) % EVERY == 0:
                vol.commit()
        vol.commit()
        vol.close()
        return path

    def run_ts(transactions: bool) -> object:
        import tensorstore as ts

        path = fresh(f"ts{int(transactions)}")
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)},
                "metadata": {"shape": [0, edge, edge], "data_type": "uint16", "codecs": ZSTD,
                             "chunk_grid": {"name": "regular", "configuration": {
                                 "chunk_shape": [DEPTH, CHUNK, CHUNK]}}}}
        arr = ts.open(spec, create=True, delete_existing=True).result()
        txn = ts.Transaction() if transactions else None
        for k in range(frames):
            arr = arr.resize(exclusive_max=[k + 1, edge, edge], expand_only=True).result()
            if txn is None:
                arr[k].write(data[k]).result()
                continue
            arr.with_transaction(txn)[k].write(data[k]).result()
            if (k + 1) % EVERY == 0:
                txn.commit_sync()
                txn = ts.Transaction()
        if txn is not None:
            txn.commit_sync()
        return path

    def run_zarr() -> object:
        import zarr

        path = fresh("z")
        z = zarr.create_array(str(path), shape=(0, edge, edge), dtype="uint16",
                              chunks=(DEPTH, CHUNK, CHUNK),
                              compressors=zarr.codecs.ZstdCodec(level=3))
        for k in range(frames):
            z.append(data[k][None], axis=0)
        return path

    want = np.stack(data)

    def check_jnrrd(path: object) -> bool:
        return bool(np.array_equal(jnrrd.read(path, index_order="C")[0], want))

    return Case(
        name="append/frames",
        contenders=[Contender("jnrrd", run_jnrrd, check=check_jnrrd),
                    Contender("jnrrd durable=False", lambda: run_jnrrd(False)),
                    Contender("tensorstore", lambda: run_ts(True)),
                    Contender("tensorstore (no transaction)", lambda: run_ts(False)),
                    Contender("zarr", run_zarr)],
        nbytes=int(want.nbytes),
        targets=[Target("jnrrd", "tensorstore", "<=", 1.0)],
    )


def update_case(bench: run_all.Bench, count: int = 100, edge: int = 32) -> Case:
    import jnrrd

    values = np.random.default_rng(3).integers(0, 4000, (edge,) * 3, dtype=np.uint16)
    rounds = [0]

    def regions() -> list[tuple[slice, ...]]:
        rounds[0] += 1  # a new set of regions for every repetition (of every system)
        return _volume.random_regions(bench.size, count, edge, seed=rounds[0] // 5)

    paths: dict[str, Path] = {}

    def setup(key: str) -> None:
        paths[key] = bench.dataset(key, "zstd")
        if key == "jnrrd":
            jnrrd.compact(paths[key])  # header room: commits happen in place from now on

    def run_jnrrd(durable: bool = True) -> None:
        with jnrrd.open(paths["jnrrd"], mode="r+", durable=durable) as vol:
            for r in regions():
                vol[r] = values

    def run_ts(transactions: bool) -> None:
        import tensorstore as ts

        arr = ts.open({"driver": "zarr3", "kvstore": {"driver": "file",
                                                      "path": str(paths["tensorstore"])}}
                      ).result()
        todo = [_volume.c_order(r) for r in regions()]
        if transactions:
            txn = ts.Transaction()
            view = arr.with_transaction(txn)
            for r in todo:
                view[r].write(values).result()
            txn.commit_sync()
        else:
            for f in [arr[r].write(values) for r in todo]:
                f.result()

    def run_zarr() -> None:
        import zarr

        z = zarr.open_array(str(paths["zarr"]), mode="r+")
        for r in regions():
            z[_volume.c_order(r)] = values

    return Case(
        name="update/regions",
        contenders=[Contender("jnrrd", run_jnrrd, setup=lambda: setup("jnrrd")),
                    Contender("jnrrd durable=False", lambda: run_jnrrd(False),
                              setup=lambda: setup("jnrrd")),
                    Contender("tensorstore", lambda: run_ts(True),
                              setup=lambda: setup("tensorstore")),
                    Contender("tensorstore (no transaction)", lambda: run_ts(False),
                              setup=lambda: setup("tensorstore")),
                    Contender("zarr", run_zarr, setup=lambda: setup("zarr"))],
        nbytes=count * edge**3 * 2,
        targets=[Target("jnrrd", "tensorstore", "<=", 1.0),
                 Target("jnrrd", "zarr", "<=", 0.5)],
    )


def main() -> int:
    """Command-line entry point."""
    p = run_all.parser(__doc__)
    p.add_argument("--frames", type=int, default=500, help="frames to append (default 500)")
    p.add_argument("--only", help="append, update (default both)")
    args = p.parse_args()
    builders = {"append/frames": lambda b: append_case(b, args.frames),
                "update/regions": update_case}
    return run_all.run(builders, args, "jnrrd editing")


if __name__ == "__main__":
    sys.exit(main())
