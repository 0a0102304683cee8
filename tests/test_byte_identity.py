"""Byte-identical output across refactors: sha256 of the files a matrix of writes produces.

The expected hashes in ``data/byte_identity.json`` were recorded before the storage-layer move
(issue 15) by ``python tests/test_byte_identity.py --record``; a change of any output byte
fails here. A deliberate format change re-records them and says why in its commit.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import jnrrd

HASHES = Path(__file__).parent / "data" / "byte_identity.json"


def _ct(shape: tuple[int, ...], dtype: str = "uint16") -> np.ndarray:
    """A smooth field plus seeded noise: compressible, but not trivially."""
    rng = np.random.default_rng(20261124)
    grids = np.meshgrid(*[np.linspace(0, 3, n) for n in shape], indexing="ij")
    base = sum(np.sin(g * (k + 1)) for k, g in enumerate(grids)) * 300 + 1000
    return (base + rng.normal(0, 20, shape)).astype(dtype)


def _labels(shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(7)
    return (rng.integers(0, 4, shape) * (rng.random(shape) < 0.7)).astype(np.uint8)


_GEOM = {"space": "RAS", "space_origin": [1.5, -2.0, 3.25],
         "space_directions": [[0.5, 0, 0], [0, 0.75, 0], [0, 0, 1.25]],
         "kinds": ["space", "space", "space"]}


def _cases() -> dict[str, Callable[[Path], None]]:
    a = _ct((37, 29, 21))
    f4 = _ct((20, 18, 9), "float32") / 7
    lab = _labels((40, 36, 20))
    w = jnrrd.write
    c: dict[str, Callable[[Path], None]] = {}
    for enc in ("raw", "gzip", "bzip2", "zstd", "ascii", "hex"):
        c[f"untiled-{enc}"] = lambda d, e=enc: w(d / "a.jnrrd", a[:9, :7, :5], dict(_GEOM),
                                                 encoding=e)
    c["untiled-float-big-endian"] = lambda d: w(d / "a.jnrrd", f4, {"endian": "big"})
    c["untiled-detached"] = lambda d: w(d / "a.jnrrd", a, dict(_GEOM), detached=True)
    c["untiled-detached-gzip"] = lambda d: w(d / "a.jnrrd", a, encoding="gzip", detached=True)
    c["untiled-C-order"] = lambda d: w(d / "a.jnrrd", a, index_order="C")
    c["internal-contiguous-raw"] = lambda d: w(d / "a.jnrrd", a, dict(_GEOM), tile=16)
    c["internal-chunked-raw"] = lambda d: w(d / "a.jnrrd", a, tile=16, tile_format="chunked")
    for comp in ("gzip", "bzip2", "zstd", "lz4"):
        c[f"internal-chunked-{comp}"] = lambda d, k=comp: w(d / "a.jnrrd", a, tile=16,
                                                            compression=k)
        c[f"internal-contiguous-{comp}"] = lambda d, k=comp: w(
            d / "a.jnrrd", a, tile=(16, 16, 8), compression=k, tile_format="contiguous")
    c["internal-zstd-level-9-checksum"] = lambda d: w(d / "a.jnrrd", a, tile=16,
                                                      compression="zstd",
                                                      compression_level=9, checksum="crc32c")
    c["internal-aligned-stats"] = lambda d: w(d / "a.jnrrd", a, tile=16, compression="lz4",
                                              align=4096, tile_stats=True)
    c["external-zstd"] = lambda d: w(d / "a.jnrrd", a, tile=16, compression="zstd",
                                     storage="external")
    c["external-raw-pattern-levels"] = lambda d: w(d / "a.jnrrd", a, tile=16, levels=2,
                                                   storage="external",
                                                   pattern="t/{l}/{z}_{y}_{x}.bin")
    c["codecs-chain"] = lambda d: w(d / "a.jnrrd", f4, tile=8, codecs=[
        {"name": "scale_offset", "configuration": {"offset": 1.0, "scale": 4.0}},
        {"name": "cast_value", "configuration": {"data_type": "int16",
                                                 "rounding": "nearest-even",
                                                 "out_of_range": "clamp"}},
        {"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "numcodecs.shuffle", "configuration": {"elementsize": 2}},
        {"name": "zstd", "configuration": {"level": 3}},
        {"name": "crc32c"}])
    c["sparse"] = lambda d: w(d / "a.jnrrd", np.pad(a, ((0, 30), (0, 0), (0, 0))), tile=16,
                              compression="zstd", sparse=True)
    c["overlap"] = lambda d: w(d / "a.jnrrd", a, tile=16, compression="zstd", overlap=2)
    c["edge-variable"] = lambda d: w(d / "a.jnrrd", a, tile=16, compression="zstd",
                                     edge="variable")
    c["padding-value"] = lambda d: w(d / "a.jnrrd", a, tile=16, padding_value=7)
    for method in ("average", "gaussian", "lanczos", "max", "min"):
        c[f"pyramid-{method}"] = lambda d, m=method: w(d / "a.jnrrd", a, dict(_GEOM), tile=16,
                                                       compression="zstd", levels=3,
                                                       downsample=m)
    c["pyramid-mode"] = lambda d: w(d / "a.jnrrd", lab, tile=16, compression="zstd", levels=3,
                                    downsample="mode")
    c["pyramid-quality"] = lambda d: w(d / "a.jnrrd", a, tile=16, levels=2, quality=True)
    c["nrrd-raw"] = lambda d: w(d / "a.nrrd", a, dict(_GEOM))
    c["nrrd-gzip"] = lambda d: w(d / "a.nrrd", a, dict(_GEOM), encoding="gzip")
    c["nhdr-detached"] = lambda d: w(d / "a.nhdr", a, encoding="gzip")
    c["nrrd-pynrrd-header"] = lambda d: w(d / "a.nrrd", a, {
        "type": "uint16", "space": "left-posterior-superior",
        "space directions": np.diag([0.5, 0.5, 2.0]), "space origin": np.array([1.0, 2, 3]),
        "kinds": ["domain"] * 3, "encoding": "gzip"})
    c["rgb-channel-axis"] = lambda d: w(d / "a.jnrrd", _ct((3, 30, 20), "uint8"),
                                        {"kinds": ["RGB-color", "space", "space"]}, tile=16,
                                        compression="zstd", levels=2)
    c["dask-tiled"] = _dask_case(a)
    c["dask-pyramid-external"] = _dask_case(a, storage="external", levels=2)
    return c


def _dask_case(a: np.ndarray, **kw: object) -> Callable[[Path], None]:
    def run(d: Path) -> None:
        da = pytest.importorskip("dask.array")
        import dask

        with dask.config.set(scheduler="synchronous"):
            jnrrd.write(d / "a.jnrrd", da.from_array(a, chunks=(20, 15, 11)), tile=16,
                        compression="zstd", **kw)
    return run


CASES = _cases()


_TOKEN = re.compile(r"\.([0-9a-f]{8})\.")


def digest(root: Path) -> str:
    """sha256 over the sorted relative paths and contents of every file under ``root``.

    Multi-file datasets name their generation with a random 8-hex token (``a.1f2e3d4c.tiles``,
    docs/format.md#atomic-writes): each token found in a path is replaced by ``TOKEN`` in paths and
    bytes.
    """
    files = sorted(p for p in root.rglob("*") if p.is_file())
    rels = [p.relative_to(root).as_posix() for p in files]
    tokens = {m.group(1).encode() for r in rels for m in _TOKEN.finditer(r)}
    h = hashlib.sha256()
    for p, rel in sorted(zip(files, rels, strict=True), key=lambda fr: _norm(fr[1], tokens)):
        data = p.read_bytes()
        for t in tokens:
            data = data.replace(t, b"TOKEN")
        h.update(_norm(rel, tokens).encode() + b"\0")
        h.update(hashlib.sha256(data).digest())
    return h.hexdigest()


def _norm(rel: str, tokens: set[bytes]) -> str:
    for t in tokens:
        rel = rel.replace(t.decode(), "TOKEN")
    return rel


def _produce(name: str, root: Path) -> str:
    d = root / name
    d.mkdir(parents=True)
    CASES[name](d)
    return digest(d)


#: gzip writes: recorded with libdeflate (a core dependency; zlib alone writes other bytes).
#: The untiled and NRRD gzip cases were re-recorded when data sections moved to one stream of
#: independent blocks at level 1 (docs/nrrd.md#gzip-writing); tiles stay at level 6.
GZIP_CASES = {"internal-chunked-gzip", "internal-contiguous-gzip", "nhdr-detached", "nrrd-gzip",
              "nrrd-pynrrd-header", "untiled-detached-gzip", "untiled-gzip"}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_output_bytes_unchanged(name: str, tmp_path: Path) -> None:
    from jnrrd.codecs import gzip_fast

    if name in GZIP_CASES and not gzip_fast.available:
        pytest.skip("gzip bytes are recorded with libdeflate (the deflate package)")
    expected = json.loads(HASHES.read_text())
    assert name in expected, f"no recorded hash for {name}: run this file with --record"
    assert _produce(name, tmp_path) == expected[name]


def test_every_recorded_case_still_runs() -> None:
    assert sorted(json.loads(HASHES.read_text())) == sorted(CASES)


if __name__ == "__main__":  # python tests/test_byte_identity.py --record
    import tempfile

    if "--record" not in sys.argv:
        sys.exit("usage: python tests/test_byte_identity.py --record")
    with tempfile.TemporaryDirectory() as tmp:
        out = {n: _produce(n, Path(tmp)) for n in sorted(CASES)}
    HASHES.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"recorded {len(out)} cases in {HASHES}")
