"""The systems under comparison: jnrrd itself and its peers, behind one small interface.

Every system stores the same logical volume with 64³ chunks. ``arr`` is the C-contiguous
generated array; systems with ``order == "F"`` (jnrrd, pynrrd) are handed ``arr.T`` (indexed like
the file's axes, axis 0 fastest), the C-order peers ``arr`` itself, so every system stores the
same bytes per chunk (docs/format.md#zarr-axis-order: a jnrrd tile is the zarr C-order chunk of the
reversed shape). Regions are given in jnrrd (file) axes and reversed for the C-order peers.

A missing optional package raises :class:`Unavailable`, which the harness reports as "n/a".
"""

from __future__ import annotations

import itertools
import json
import math
import os
import shutil
import threading
import zlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

TILE = 64
Region = tuple[slice, ...]


class Unavailable(RuntimeError):
    """A system or codec that cannot run here (package missing, codec unsupported)."""


def _import(name: str):
    try:
        return __import__(name, fromlist=["_"])
    except ImportError as exc:
        raise Unavailable(f"not installed: {name}") from exc


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def tile_grid(shape: Sequence[int], tile: int = TILE) -> list[Region]:
    """The chunk regions of a C-order array, in C order of the chunk grid."""
    starts = [range(0, n, tile) for n in shape]
    return [tuple(slice(s, min(s + tile, n)) for s, n in zip(st, shape, strict=True))
            for st in itertools.product(*starts)]


class System:
    """One storage system: writes a dataset once, then reads it whole or in regions."""

    name = "?"
    #: "F": handed ``arr.T`` and file-axis regions; "C": ``arr`` and reversed regions.
    order = "C"
    codecs: tuple[str, ...] = ()

    def view(self, arr: np.ndarray) -> np.ndarray:
        """The array this system is given for ``arr`` (see module docstring)."""
        return arr.T if self.order == "F" else arr

    def region(self, region: Region) -> Region:
        """``region`` (file axes) in this system's axes."""
        return region if self.order == "F" else tuple(reversed(region))

    def preload(self) -> None:
        """Import everything a read may import lazily (so peak-memory runs exclude imports)."""

    def check_codec(self, codec: str) -> None:
        """Raise :class:`Unavailable` when this system cannot store ``codec`` tiles."""
        if codec not in self.codecs:
            raise Unavailable(f"{self.name} has no {codec} codec")

    def write(self, path: Path, arr: np.ndarray, codec: str) -> None:
        """Store ``arr`` (C order, as generated) at ``path`` with 64³ chunks and ``codec``."""
        raise Unavailable(f"{self.name} cannot write")

    def read(self, path: Path) -> np.ndarray:
        """Open ``path`` and read everything."""
        raise Unavailable(f"{self.name} cannot read")

    def read_region(self, path: Path, region: Region) -> np.ndarray:
        """Open ``path`` and read one region (file axes)."""
        raise Unavailable(f"{self.name} cannot read regions")

    def read_regions(self, path: Path, regions: Sequence[Region]) -> list[np.ndarray]:
        """Open ``path`` once and read many regions (file axes), one after the other."""
        raise Unavailable(f"{self.name} cannot read regions")


class Jnrrd(System):
    """jnrrd through its public API (docs/api.md), internal 64³ tiles."""

    name = "jnrrd"
    order = "F"
    codecs = ("raw", "zstd", "lz4", "gzip")
    ZSTD3 = [{"name": "bytes", "configuration": {"endian": "little"}},
             {"name": "zstd", "configuration": {"level": 3}}]

    def __init__(self, tiled: bool = True, durable: bool = True) -> None:
        self.tiled = tiled
        self.jnrrd = _import("jnrrd")
        # durable=False: no fsync before the atomic replace (what zarr and tensorstore do)
        self.options = {} if durable else {"durable": False}
        if tiled:
            self.name = "jnrrd" if durable else "jnrrd durable=False"
        else:
            self.name = "jnrrd untiled"
            self.codecs = ("raw", "zstd", "gzip")

    def preload(self) -> None:
        import importlib
        import pkgutil

        for mod in pkgutil.walk_packages(self.jnrrd.__path__, "jnrrd."):
            if mod.name.endswith("__main__"):  # importing it would run the command line
                continue
            try:
                importlib.import_module(mod.name)
            except Exception:  # optional parts (xarray backend, ...) may be absent
                continue

    def write(self, path: Path, arr: np.ndarray, codec: str, **options) -> None:
        """Write with ``tile=(64,)*3`` (or untiled with ``encoding=codec``)."""
        self.check_codec(codec)
        data = self.view(arr)
        options = {**self.options, **options}
        if not self.tiled:
            self.jnrrd.write(path, data, encoding=codec, **options)
            return
        tile = (TILE,) * arr.ndim
        if codec != "zstd":
            self.jnrrd.write(path, data, tile=tile,
                             compression=None if codec == "raw" else codec, **options)
            return
        # zstd level 3 as for the peers; the codec list is the fallback spelling (task brief).
        try:
            self.jnrrd.write(path, data, tile=tile, compression="zstd", compression_level=3,
                             **options)
        except TypeError:
            self.jnrrd.write(path, data, tile=tile, codecs=self.ZSTD3, **options)

    def write_pyramid(self, path: Path, arr: np.ndarray, method: str, levels: int = 3) -> None:
        """Write a raw 64³-tiled pyramid of ``levels`` levels with ``downsample=method``."""
        self.jnrrd.write(path, self.view(arr), tile=(TILE,) * arr.ndim, levels=levels,
                         downsample=method)

    def read(self, path: Path) -> np.ndarray:
        return self.jnrrd.read(path)[0]

    def read_region(self, path: Path, region: Region) -> np.ndarray:
        with self.jnrrd.open(path) as vol:
            return np.asarray(vol[self.region(region)])

    def read_regions(self, path: Path, regions: Sequence[Region]) -> list[np.ndarray]:
        with self.jnrrd.open(path) as vol:
            return [np.asarray(vol[self.region(r)]) for r in regions]


class ZarrPython(System):
    """zarr-python v3 (``zarr.create_array``), 64³ chunks; lz4 is numcodecs' LZ4 block codec."""

    name = "zarr-python"
    codecs = ("raw", "zstd", "lz4")

    def __init__(self) -> None:
        self.zarr = _import("zarr")

    def preload(self) -> None:
        for name in ("zarr.codecs", "zarr.storage", "numcodecs", "numcodecs.zstd",
                     "numcodecs.lz4"):
            _import(name)

    def _compressors(self, codec: str):
        codecs = _import("zarr.codecs")
        if codec == "raw":
            return None
        if codec == "zstd":
            return [codecs.ZstdCodec(level=3)]
        lz4 = getattr(codecs, "LZ4", None)
        if lz4 is None:
            try:
                lz4 = _import("numcodecs.zarr3").LZ4
            except AttributeError as exc:
                raise Unavailable("zarr-python: no numcodecs LZ4 codec") from exc
        return [lz4()]

    def write(self, path: Path, arr: np.ndarray, codec: str) -> None:
        self.check_codec(codec)
        z = self.zarr.create_array(str(path), shape=arr.shape, chunks=(TILE,) * arr.ndim,
                                   dtype=arr.dtype, compressors=self._compressors(codec),
                                   fill_value=0, overwrite=True)
        z[...] = arr

    def read(self, path: Path) -> np.ndarray:
        return self.zarr.open_array(str(path), mode="r")[...]

    def read_region(self, path: Path, region: Region) -> np.ndarray:
        return self.zarr.open_array(str(path), mode="r")[self.region(region)]

    def read_regions(self, path: Path, regions: Sequence[Region]) -> list[np.ndarray]:
        z = self.zarr.open_array(str(path), mode="r")
        return [z[self.region(r)] for r in regions]


class TensorStore(System):
    """tensorstore ``zarr3`` driver on the local file kvstore, 64³ chunks (no lz4 codec)."""

    name = "tensorstore"
    codecs = ("raw", "zstd")

    def __init__(self) -> None:
        self.ts = _import("tensorstore")

    @staticmethod
    def _spec(path: Path) -> dict:
        return {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}

    def write(self, path: Path, arr: np.ndarray, codec: str) -> None:
        self.check_codec(codec)
        chain = [{"name": "bytes", "configuration": {"endian": "little"}}]
        if codec == "zstd":
            chain.append({"name": "zstd", "configuration": {"level": 3}})
        spec = self._spec(path)
        spec["metadata"] = {
            "shape": list(arr.shape), "data_type": arr.dtype.name, "codecs": chain,
            "chunk_grid": {"name": "regular",
                           "configuration": {"chunk_shape": [TILE] * arr.ndim}},
        }
        store = self.ts.open(spec, create=True, delete_existing=True).result()
        store.write(arr).result()

    def _open(self, path: Path):
        return self.ts.open(self._spec(path), read=True).result()

    def read(self, path: Path) -> np.ndarray:
        return self._open(path).read().result()

    def read_region(self, path: Path, region: Region) -> np.ndarray:
        return self._open(path)[self.region(region)].read().result()

    def read_regions(self, path: Path, regions: Sequence[Region]) -> list[np.ndarray]:
        store = self._open(path)
        return [store[self.region(r)].read().result() for r in regions]


class PyNrrd(System):
    """pynrrd, untiled whole-file raw or gzip (``index_order="F"``, like jnrrd)."""

    name = "pynrrd"
    order = "F"
    codecs = ("raw", "gzip")

    def __init__(self) -> None:
        self.nrrd = _import("nrrd")

    def write(self, path: Path, arr: np.ndarray, codec: str) -> None:
        self.check_codec(codec)
        self.nrrd.write(str(path), self.view(arr), {"encoding": codec}, index_order="F")

    def read(self, path: Path) -> np.ndarray:
        return self.nrrd.read(str(path), index_order="F")[0]


class NumpyFile(System):
    """Plain NumPy on the raw bytes: ``np.fromfile`` and ``np.memmap`` slicing."""

    name = "numpy"
    codecs = ("raw",)

    def __init__(self) -> None:
        self.meta: dict[Path, tuple[tuple[int, ...], np.dtype]] = {}

    def write(self, path: Path, arr: np.ndarray, codec: str) -> None:
        self.check_codec(codec)
        arr.tofile(path)
        self.meta[path] = (arr.shape, arr.dtype)
        # A sidecar so that another process (the fresh-process mode) can read it too.
        Path(f"{path}.json").write_text(json.dumps({"shape": arr.shape,
                                                    "dtype": arr.dtype.str}))

    def _meta(self, path: Path) -> tuple[tuple[int, ...], np.dtype]:
        if path not in self.meta:
            meta = json.loads(Path(f"{path}.json").read_text())
            self.meta[path] = (tuple(meta["shape"]), np.dtype(meta["dtype"]))
        return self.meta[path]

    def read(self, path: Path) -> np.ndarray:
        shape, dtype = self._meta(path)
        return np.fromfile(path, dtype=dtype).reshape(shape)

    def read_region(self, path: Path, region: Region) -> np.ndarray:
        shape, dtype = self._meta(path)
        mm = np.memmap(path, dtype=dtype, mode="r", shape=shape)
        out = np.array(mm[self.region(region)])
        del mm
        return out

    def read_regions(self, path: Path, regions: Sequence[Region]) -> list[np.ndarray]:
        shape, dtype = self._meta(path)
        mm = np.memmap(path, dtype=dtype, mode="r", shape=shape)
        out = [np.array(mm[self.region(r)]) for r in regions]
        del mm
        return out


class BareLoop(System):
    """The physical limit: a two-thread pool running the codec over the same 64³ tiles.

    No format around it: the tiles are concatenated in one file and their offsets kept in
    memory; decoding preads each tile and copies it into a preallocated output array.
    """

    #: ``gzip``: libdeflate (the ``deflate`` package) both ways, members as jnrrd writes them;
    #: ``gzip-zlib``: the same members inflated by zlib (the decoder is the only difference)
    codecs = ("zstd", "lz4", "gzip", "gzip-zlib")
    NAMES = {"gzip": "bare libdeflate loop", "gzip-zlib": "bare zlib loop"}
    THREADS = 2

    def __init__(self, codec: str) -> None:
        if codec not in self.codecs:
            raise Unavailable(f"no bare loop for {codec}")
        self.codec = codec
        self.name = self.NAMES.get(codec, f"bare {codec} loop")
        module = {"zstd": "zstandard", "lz4": "lz4.frame"}.get(codec, "deflate")
        self.lib = _import(module)
        self.local = threading.local()
        self.index: dict[Path, tuple[tuple[int, ...], np.dtype, list[tuple[int, int]]]] = {}

    def _compress(self, data: bytes) -> bytes:
        if self.codec == "lz4":
            return self.lib.compress(data)
        if self.codec.startswith("gzip"):
            from jnrrd.codecs.gzip_fast import gzip_compress

            return gzip_compress(data, 6)  # the members jnrrd writes for gzip level 6
        ctx = getattr(self.local, "c", None)
        if ctx is None:
            ctx = self.local.c = self.lib.ZstdCompressor(level=3)
        return ctx.compress(data)

    def _decompress(self, data: bytes, size: int) -> bytes:
        if self.codec == "lz4":
            return self.lib.decompress(data)
        if self.codec == "gzip":
            return self.lib.gzip_decompress(data)
        if self.codec == "gzip-zlib":
            return zlib.decompress(data, 31, bufsize=size)  # one output buffer, as libdeflate
        ctx = getattr(self.local, "d", None)
        if ctx is None:
            ctx = self.local.d = self.lib.ZstdDecompressor()
        return ctx.decompress(data)

    def write(self, path: Path, arr: np.ndarray, codec: str) -> None:
        self.check_codec(codec)
        regions = tile_grid(arr.shape)

        def encode(region: Region) -> bytes:
            return self._compress(np.ascontiguousarray(arr[region]).tobytes())

        spans, pos = [], 0
        with ThreadPoolExecutor(self.THREADS) as pool, open(path, "wb") as f:
            for blob in pool.map(encode, regions):
                f.write(blob)
                spans.append((pos, len(blob)))
                pos += len(blob)
        self.index[path] = (arr.shape, arr.dtype, spans)
        # A sidecar so that another process (the memory measurement) can read it too.
        meta = {"shape": arr.shape, "dtype": arr.dtype.str, "spans": spans}
        Path(f"{path}.json").write_text(json.dumps(meta))

    def read(self, path: Path) -> np.ndarray:
        if path not in self.index:
            meta = json.loads(Path(f"{path}.json").read_text())
            self.index[path] = (tuple(meta["shape"]), np.dtype(meta["dtype"]),
                                [tuple(s) for s in meta["spans"]])
        shape, dtype, spans = self.index[path]
        out = np.empty(shape, dtype=dtype)
        regions = tile_grid(shape)
        fd = os.open(path, os.O_RDONLY)
        try:
            def decode(k: int) -> None:
                offset, size = spans[k]
                region = regions[k]
                ext = tuple(s.stop - s.start for s in region)
                raw = self._decompress(os.pread(fd, size, offset), math.prod(ext) * dtype.itemsize)
                out[region] = np.frombuffer(raw, dtype=dtype).reshape(ext)

            with ThreadPoolExecutor(self.THREADS) as pool:
                for _ in pool.map(decode, range(len(regions))):
                    pass
        finally:
            os.close(fd)
        return out


def make(name: str, codec: str | None = None) -> System:
    """Construct a system by name: jnrrd, jnrrd-untiled, zarr, tensorstore, pynrrd, numpy, bare."""
    factories = {
        "jnrrd": lambda: Jnrrd(tiled=True),
        "jnrrd-untiled": lambda: Jnrrd(tiled=False),
        "jnrrd-nosync": lambda: Jnrrd(tiled=True, durable=False),
        "zarr": ZarrPython,
        "tensorstore": TensorStore,
        "pynrrd": PyNrrd,
        "numpy": NumpyFile,
        "bare": lambda: BareLoop(codec or "zstd"),
    }
    if name not in factories:
        raise KeyError(f"unknown system {name!r}; expected one of {sorted(factories)}")
    return factories[name]()


def remove(path: Path) -> None:
    """Delete a dataset (a file or a directory store)."""
    _remove(path)


def versions() -> dict[str, str]:
    """Installed versions of every system's package ("n/a" when missing)."""
    from importlib import metadata

    out = {}
    for dist in ("jnrrd", "numpy", "scipy", "zarr", "tensorstore", "numcodecs", "pynrrd",
                 "zstandard", "lz4"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "n/a"
    return out
