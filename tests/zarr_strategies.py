"""Hostile OME-Zarr stores for fuzzing the importer (``jnrrd.convert(store.ome.zarr, ...)``).

A *seed* is a small valid OME-Zarr image group written by zarr-python (or by jnrrd's own
exporter): Zarr v3 with zstd, gzip, blosc, sharding, a transpose + crc32c chain, v2 chunk
keys, absent chunks and a fill value; Zarr v2 (OME-NGFF 0.4) with blosc, zlib in Fortran
order and no compressor; pyramids of one to three levels. A case is a seed's files (paths
relative to the store, ``/``-separated) after one to three mutations:

- **JSON mutations** of any metadata document (``zarr.json``, ``.zarray``, ``.zattrs``,
  ``.zgroup``): one value anywhere in the tree replaced by a nearby or hostile one (boundary
  and 5 000-digit integers, NaN and infinities, traversing and over-long paths, deep
  nesting, wrong types), or an **issue class**: scales of zero, 10 000 datasets, dataset
  paths leaving the store, 100 000 nested brackets, shapes multiplied into huge absent grids,
  codecs swapped or unknown, odd fill values and data types;
- **chunk mutations**: bytes flipped, cut, appended; a chunk replaced by a decompression
  bomb (zstd, gzip, bzip2 and a blosc header claiming gigabytes);
- **file-system mutations**: a chunk or a metadata document replaced by a FIFO or a
  directory; a chunk or a whole level folder replaced by a symbolic link to a copy outside
  the store; every chunk removed.

:func:`materialize` writes a case to disk (FIFOs, links and the outside copies included).
"""

from __future__ import annotations

import bz2
import json
import os
import shutil
import struct
import tempfile
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import zstandard
from hypothesis import strategies as st

import jnrrd

STORE = "s.ome.zarr"
OUTSIDE = "outside"
META_NAMES = ("zarr.json", ".zarray", ".zattrs", ".zgroup")


@dataclass
class ZCase:
    """A store's files (relative path -> bytes), the special entries made on disk (relative
    path -> ``"fifo"``, ``"dir"`` or ``"link"`` to its copy outside), and what was done."""

    kind: str
    files: dict[str, bytes]
    what: str
    special: dict[str, str] = field(default_factory=dict)


# -- seeds ----------------------------------------------------------------------------------

def _volume(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    return (np.arange(int(np.prod(shape))) % 97).astype(dtype).reshape(shape)


def _group(path: str, zarr_format: int, levels: list[np.ndarray], axes: str,
           **array_kw: Any) -> None:
    import zarr

    g = zarr.open_group(path, mode="w", zarr_format=zarr_format)
    datasets = []
    for k, a in enumerate(levels):
        g.create_array(str(k), data=a, **array_kw)
        f = 2 ** k
        datasets.append({"path": str(k), "coordinateTransformations": [
            {"type": "scale", "scale": [1.0] * (a.ndim - 2) + [0.5 * f, 0.5 * f]},
            {"type": "translation", "translation": [0.0] * (a.ndim - 2) + [0.25 * (f - 1)] * 2}]})
    kinds = {"c": "channel", "t": "time"}
    ms = {"axes": [{"name": n, "type": kinds.get(n, "space")} for n in axes],
          "datasets": datasets}
    if zarr_format == 3:
        g.attrs["ome"] = {"version": "0.5", "multiscales": [ms]}
    else:
        g.attrs["multiscales"] = [{**ms, "version": "0.4"}]


def _pyramid(a: np.ndarray, n: int) -> list[np.ndarray]:
    out = [a]
    for _ in range(n - 1):
        b = out[-1]
        out.append(b[..., : b.shape[-2] // 2 * 2:2, : b.shape[-1] // 2 * 2:2].copy())
    return out


def _seed_builders() -> dict[str, Any]:
    from zarr.codecs import (
        BloscCodec,
        BytesCodec,
        Crc32cCodec,
        GzipCodec,
        TransposeCodec,
        ZstdCodec,
    )

    def v3(levels: int, shape: tuple[int, ...], dtype: str, axes: str, **kw: Any) -> Any:
        return lambda p: _group(p, 3, _pyramid(_volume(shape, dtype), levels), axes, **kw)

    def v2(levels: int, shape: tuple[int, ...], dtype: str, axes: str, **kw: Any) -> Any:
        return lambda p: _group(p, 2, _pyramid(_volume(shape, dtype), levels), axes, **kw)

    def sparse(p: str) -> None:  # absent chunks and a fill value
        import zarr

        a = _volume((2, 9, 10), "int16")
        _group(p, 3, [a], "cyx", chunks=(1, 4, 4), fill_value=-7)
        arr = zarr.open_array(os.path.join(p, "0"), mode="r+")
        arr[:, 4:, :] = -7  # those chunks hold only the fill value: zarr leaves them out

    def exported(p: str) -> None:
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "v.jnrrd")
            jnrrd.write(src, _volume((10, 8, 6), "uint16").T, tile=4, levels=2)
            jnrrd.convert(src, p, shards=2)

    return {
        "v3-zstd-pyramid": v3(2, (6, 10, 12), "uint16", "zyx", chunks=(3, 4, 4)),
        "v3-gzip-float": v3(1, (9, 7), "float32", "yx", chunks=(4, 4),
                            compressors=GzipCodec(level=1), fill_value=float("nan")),
        "v3-sharded": v3(2, (4, 8, 8), "uint8", "zyx", chunks=(2, 2, 2), shards=(4, 4, 4)),
        "v3-blosc": v3(1, (5, 6, 7), "int32", "zyx", chunks=(5, 3, 4),
                       compressors=BloscCodec(cname="lz4", clevel=3)),
        "v3-transpose-crc": v3(1, (5, 6, 4), "uint16", "zyx", chunks=(3, 3, 4),
                               filters=[TransposeCodec(order=(2, 0, 1))],
                               serializer=BytesCodec(), compressors=[Crc32cCodec()]),
        "v3-v2keys-3lv": v3(3, (3, 12, 12), "float64", "cyx", chunks=(1, 5, 5),
                            chunk_key_encoding={"name": "v2", "separator": "."},
                            compressors=ZstdCodec(level=1)),
        "v3-sparse-fill": sparse,
        "v2-blosc-pyramid": v2(2, (2, 6, 8, 8), "uint16", "tzyx", chunks=(1, 3, 4, 4)),
        "v2-zlib-F": v2(1, (5, 6), "int8", "yx", chunks=(2, 4), order="F",
                        compressors=_numcodec("Zlib", level=2)),
        "v2-none-slash": v2(1, (4, 5, 3), "uint32", "zyx", chunks=(2, 2, 3),
                            compressors=None,
                            chunk_key_encoding={"name": "v2", "separator": "/"}),
        "jnrrd-export-sharded": exported,
    }


def _numcodec(name: str, **kw: Any) -> Any:
    import numcodecs

    return getattr(numcodecs, name)(**kw)


class ZSeedCache:
    """Each seed's files, built once (by zarr-python or jnrrd's exporter)."""

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="jnrrd-zseeds-")
        self._files: dict[str, dict[str, bytes]] = {}
        self._builders = _seed_builders()

    @property
    def kinds(self) -> list[str]:
        return sorted(self._builders)

    def files(self, kind: str) -> dict[str, bytes]:
        if kind not in self._files:
            root = os.path.join(self._dir, kind + ".ome.zarr")
            self._builders[kind](root)
            out = {}
            for top, _, names in os.walk(root):
                for n in names:
                    full = os.path.join(top, n)
                    with open(full, "rb") as f:
                        out[os.path.relpath(full, root).replace(os.sep, "/")] = f.read()
            self._files[kind] = out
        return dict(self._files[kind])

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)


# -- hostile values -------------------------------------------------------------------------

class Raw:
    """JSON text spliced in as it is (values json.dumps cannot make)."""

    def __init__(self, text: str) -> None:
        self.text = text


def _nested(depth: int) -> Raw:
    return Raw("[" * depth + "1" + "]" * depth)


HOSTILE = [0, -1, 1, 2, 255, 2**31, 2**53 + 1, 2**63, -(2**63), 10**30, Raw("9" * 5000),
           0.0, -1.0, 1e308, 5e-324, Raw("NaN"), Raw("Infinity"), Raw("-Infinity"),
           "", "..", "../..", "/etc/passwd", "x/../../y", "a" * 300, "\u0000", "NaN",
           "0x7fc00000", "sharding_indexed", [], [0, 0, 0], [1] * 20, [-1, 5], [[1]], {},
           {"name": "blosc"}, None, True, False, _nested(70), _nested(100000)]


def _paths(obj: Any, limit: int = 400) -> list[tuple[Any, ...]]:
    """Paths to every value in a JSON tree (breadth first, at most ``limit``)."""
    out: list[tuple[Any, ...]] = []
    todo: list[tuple[tuple[Any, ...], Any]] = [((), obj)]
    while todo and len(out) < limit:
        path, v = todo.pop(0)
        if path:
            out.append(path)
        if isinstance(v, dict):
            todo.extend(((*path, k), x) for k, x in v.items())
        elif isinstance(v, list):
            todo.extend(((*path, i), x) for i, x in enumerate(v[:32]))
    return out


def _get(obj: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        obj = obj[p]
    return obj


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> None:
    _get(obj, path[:-1])[path[-1]] = value


def _dumps(obj: Any) -> bytes:
    """JSON text with :class:`Raw` values spliced in."""
    raws: list[str] = []

    def default(o: Any) -> Any:
        if isinstance(o, Raw):
            raws.append(o.text)
            return f"\x00RAW{len(raws) - 1}\x00"
        raise TypeError(type(o).__name__)

    text = json.dumps(obj, default=default)
    for i, r in enumerate(raws):
        text = text.replace(json.dumps(f"\x00RAW{i}\x00"), r)
    return text.encode()


@st.composite
def _nearby(draw: st.DrawFn, value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return draw(st.sampled_from([0, -1, value + 1, value - 1, value * 2, value * 1000,
                                     value * 10**6, 2**62, 1 << 40]))
    if isinstance(value, float):
        return draw(st.sampled_from([0.0, -value, value * 1e300, Raw("NaN"), 1e-300]))
    if isinstance(value, list):
        op = draw(st.sampled_from(["drop", "dup", "rev", "empty", "grow"]))
        if op == "drop" and value:
            return value[:-1]
        if op == "dup" and value:
            return [*value, value[-1]]
        if op == "rev":
            return value[::-1]
        if op == "grow":
            return [v * 1000 if isinstance(v, int) and not isinstance(v, bool) else v
                    for v in value]
        return []
    if isinstance(value, str):
        return draw(st.sampled_from(["", value + "x", value.upper(), "../" + value,
                                     value * 50]))
    return draw(st.sampled_from(HOSTILE))


def _docs(files: dict[str, bytes]) -> list[str]:
    return sorted(k for k in files if k.rsplit("/", 1)[-1] in META_NAMES)


@st.composite
def json_mutation(draw: st.DrawFn, files: dict[str, bytes]) -> tuple[dict[str, bytes], str]:
    """One value of one metadata document replaced (nearby or hostile)."""
    key = draw(st.sampled_from(_docs(files)))
    try:
        obj = json.loads(files[key])
    except (ValueError, RecursionError):
        return files, f"{key}: (not JSON already)"
    paths = _paths(obj)
    if not paths:
        return files, f"{key}: (empty)"
    path = draw(st.sampled_from(paths))
    old = _get(obj, path)
    new = draw(st.one_of(_nearby(old), st.sampled_from(HOSTILE)))
    _set(obj, path, new)
    shown = new.text[:30] if isinstance(new, Raw) else repr(new)[:40]
    return {**files, key: _dumps(obj)}, f"{key}:{'/'.join(map(str, path))}={shown}"


def _ome(obj: dict[str, Any]) -> dict[str, Any] | None:
    attrs = obj.get("attributes", obj)
    ome = attrs.get("ome", attrs) if isinstance(attrs, dict) else None
    ms = ome.get("multiscales") if isinstance(ome, dict) else None
    return ms[0] if isinstance(ms, list) and ms and isinstance(ms[0], dict) else None


def _group_doc(files: dict[str, bytes]) -> str:
    return "zarr.json" if "zarr.json" in files else ".zattrs"


def _array_docs(files: dict[str, bytes]) -> list[str]:
    return [k for k in _docs(files) if k != "zarr.json" and k.endswith(("zarr.json",
                                                                        ".zarray"))]


ISSUE_CLASSES = ["scale-zero", "scale-nan", "scale-huge", "translation-inf", "many-levels",
                 "path-escape", "path-absolute", "axes-mismatch", "deep-attrs",
                 "huge-shape", "tiny-chunks", "codec-unknown", "codec-swap", "fill-odd",
                 "dtype-odd", "sharding-index-start", "no-multiscales", "ragged-shape"]


@st.composite
def issue_mutation(draw: st.DrawFn, files: dict[str, bytes]) -> tuple[dict[str, bytes], str]:
    """One of the issue's classes (and its neighbours) applied to the group or an array."""
    what = draw(st.sampled_from(ISSUE_CLASSES))
    gkey = _group_doc(files)
    arrays = _array_docs(files)
    if gkey not in files or not arrays:
        return files, f"{what}: (no metadata left)"
    akey = draw(st.sampled_from(arrays))
    try:
        group, arr = json.loads(files[gkey]), json.loads(files[akey])
        ms = _ome(group) if isinstance(group, dict) else None
        n = len(arr.get("shape", [])) or 3
    except (ValueError, TypeError, AttributeError, RecursionError):  # broken earlier
        return files, f"{what}: (metadata already broken)"
    try:
        return _issue(draw, what, files, gkey, group, ms, akey, arr, n)
    except (TypeError, KeyError, AttributeError, IndexError, ValueError, RecursionError):
        return files, f"{what}: (does not apply after earlier mutations)"


def _issue(draw: st.DrawFn, what: str, files: dict[str, bytes], gkey: str, group: Any,
           ms: dict[str, Any] | None, akey: str, arr: dict[str, Any], n: int
           ) -> tuple[dict[str, bytes], str]:
    if ms is not None and what.startswith(("scale", "translation")):
        kind, value = {"scale-zero": ("scale", [0] * n), "scale-nan": ("scale", [Raw("NaN")] * n),
                       "scale-huge": ("scale", [1e308] * n),
                       "translation-inf": ("translation", [Raw("Infinity")] * n)}[what]
        ds = draw(st.sampled_from(ms["datasets"]))
        ds["coordinateTransformations"] = [{"type": kind, kind: value}]
    elif ms is not None and what == "many-levels":
        ms["datasets"] = ms["datasets"][:1] * draw(st.sampled_from([1025, 10000]))
    elif ms is not None and what in ("path-escape", "path-absolute"):
        ds = draw(st.sampled_from(ms["datasets"]))
        ds["path"] = ("../" + STORE + "/" + ds["path"] if what == "path-escape"
                      else "/" + ds["path"])
    elif ms is not None and what == "axes-mismatch":
        ms["axes"] = ms["axes"][1:] if draw(st.booleans()) else ms["axes"] * 2
    elif what == "deep-attrs":
        attrs = group["attributes"] if isinstance(group.get("attributes"), dict) else group
        attrs["deep"] = _nested(draw(st.sampled_from([66, 1000, 100000])))
    elif what == "no-multiscales":
        group.pop("attributes", None)
        group.pop("multiscales", None)
    else:
        _array_mutation(draw, arr, what, n)
        return {**files, akey: _dumps(arr)}, f"{what} in {akey}"
    return {**files, gkey: _dumps(group)}, what


def _array_mutation(draw: st.DrawFn, arr: dict[str, Any], what: str, n: int) -> None:
    v3 = arr.get("zarr_format") == 3
    if what == "huge-shape":
        axis = draw(st.integers(0, max(0, n - 1)))
        arr["shape"][axis] *= draw(st.sampled_from([10, 1000, 10**6, 2**40]))
    elif what == "ragged-shape":
        arr["shape"] = arr["shape"][:-1]
    elif what == "tiny-chunks":
        if v3:
            arr["chunk_grid"]["configuration"]["chunk_shape"] = [1] * n
        else:
            arr["chunks"] = [1] * n
    elif what == "codec-unknown":
        bad = {"name": draw(st.sampled_from(["numcodecs.delta", "vlen-utf8", "x" * 200]))}
        if v3:
            arr["codecs"] = [*arr.get("codecs", []), bad]
        else:
            arr["compressor"] = {"id": bad["name"]}
    elif what == "codec-swap":
        if v3:
            arr["codecs"] = draw(st.sampled_from([
                [{"name": "bytes", "configuration": {"endian": "little"}},
                 {"name": "gzip", "configuration": {"level": 1}}],
                [{"name": "bytes", "configuration": {"endian": "big"}}],
                [{"name": "sharding_indexed", "configuration": {
                    "chunk_shape": [1] * n, "codecs": [{"name": "bytes"}]}}],
                [{"name": "blosc"}], [], [{"name": "zstd", "configuration": {"level": 1}}]]))
        else:
            arr["compressor"] = draw(st.sampled_from([{"id": "gzip"}, {"id": "zstd"},
                                                      {"id": "lz4"}, None, {"id": "bz2"}]))
    elif what == "fill-odd":
        arr["fill_value"] = draw(st.sampled_from(
            ["NaN", "0xffff", "0x7ff8000000000000", [1, 2], 1e300, -1, 2**64, "abc", True]))
    elif what == "dtype-odd":
        if v3:
            arr["data_type"] = draw(st.sampled_from(["bool", "int64", "float16", "string",
                                                     "r16", "complex64", {"name": "x"}]))
        else:
            arr["dtype"] = draw(st.sampled_from(["|b1", ">u2", "<M8[ns]", "|O", "<c16", "<f2",
                                                 "x"]))
    elif what == "sharding-index-start" and v3:
        for c in arr.get("codecs", []):
            if isinstance(c, dict) and c.get("name") == "sharding_indexed":
                c["configuration"]["index_location"] = "start"


# -- chunk and file-system mutations ----------------------------------------------------------

def _chunks(files: dict[str, bytes]) -> list[str]:
    return sorted(k for k in files if k.rsplit("/", 1)[-1] not in META_NAMES)


_BOMBS: dict[str, bytes] = {}


def bomb(kind: str) -> bytes:
    """A small stream that expands to 256 MiB of zeros (built once, streaming)."""
    if kind not in _BOMBS:
        piece, n = b"\0" * (1 << 20), 256
        if kind == "zstd":
            c = zstandard.ZstdCompressor(level=3).compressobj()
            _BOMBS[kind] = b"".join(c.compress(piece) for _ in range(n)) + c.flush()
        elif kind in ("gzip", "zlib"):
            z = zlib.compressobj(9, zlib.DEFLATED, 31 if kind == "gzip" else 15)
            _BOMBS[kind] = b"".join(z.compress(piece) for _ in range(n)) + z.flush()
        elif kind == "bz2":
            b = bz2.BZ2Compressor(9)
            _BOMBS[kind] = b"".join(b.compress(piece) for _ in range(n)) + b.flush()
        elif kind == "blosc":  # a header claiming 2 GiB, then nothing much
            _BOMBS[kind] = struct.pack("<BBBBIII", 2, 1, 1, 1, 2**31, 1 << 16, 64) + b"\0" * 48
        else:
            raise ValueError(kind)
    return _BOMBS[kind]


@st.composite
def chunk_mutation(draw: st.DrawFn, files: dict[str, bytes]) -> tuple[dict[str, bytes], str]:
    chunks = _chunks(files)
    if not chunks:
        return files, "(no chunks)"
    key = draw(st.sampled_from(chunks))
    data = bytearray(files[key])
    op = draw(st.sampled_from(["flip", "cut", "append", "empty", "bomb"]))
    if op == "flip" and data:
        i = draw(st.integers(0, len(data) - 1))
        data[i] ^= draw(st.integers(1, 255))
    elif op == "cut":
        data = data[:draw(st.integers(0, max(0, len(data) - 1)))]
    elif op == "append":
        data += bytes(draw(st.integers(1, 4096)))
    elif op == "empty":
        data = bytearray()
    else:
        kind = draw(st.sampled_from(["zstd", "gzip", "zlib", "bz2", "blosc"]))
        data = bytearray(bomb(kind))
        op = f"bomb:{kind}"
    return {**files, key: bytes(data)}, f"{op} {key}"


FS_CLASSES = ["fifo-chunk", "fifo-meta", "dir-chunk", "dir-meta", "link-chunk", "link-level",
              "no-chunks"]
if not hasattr(os, "mkfifo"):  # Windows (and the simulated Windows): no FIFOs to plant
    FS_CLASSES = [c for c in FS_CLASSES if not c.startswith("fifo")]


@st.composite
def fs_mutation(draw: st.DrawFn, case: ZCase) -> ZCase:
    what = draw(st.sampled_from(FS_CLASSES))
    files, special = dict(case.files), dict(case.special)
    chunks = _chunks(files)
    if what.endswith("chunk") and chunks:
        key = draw(st.sampled_from(chunks))
        special[key] = {"fifo-chunk": "fifo", "dir-chunk": "dir", "link-chunk": "link"}[what]
    elif what.endswith("meta"):
        key = draw(st.sampled_from(_docs(files)))
        special[key] = "fifo" if what == "fifo-meta" else "dir"
    elif what == "link-level":
        levels = sorted({k.split("/", 1)[0] for k in chunks + _array_docs(files) if "/" in k})
        if levels:
            key = draw(st.sampled_from(levels))
            special[key] = "link"
    elif what == "no-chunks":
        files = {k: v for k, v in files.items() if k not in chunks}
        key = "*"
    else:
        key = "-"
    return ZCase(case.kind, files, f"{case.what}; {what} {key}", special)


@st.composite
def hostile_store(draw: st.DrawFn, seeds: ZSeedCache, mutations: tuple[int, int] = (1, 3)
                  ) -> ZCase:
    """A seed after ``mutations`` mutations of any class."""
    kind = draw(st.sampled_from(seeds.kinds), label="seed")
    case = ZCase(kind, seeds.files(kind), "")
    notes = []
    for _ in range(draw(st.integers(*mutations))):
        cls = draw(st.sampled_from(["json", "issue", "chunk", "fs"]))
        if cls == "fs":
            case = draw(fs_mutation(case))
            continue
        strategy = {"json": json_mutation, "issue": issue_mutation,
                    "chunk": chunk_mutation}[cls]
        case.files, note = draw(strategy(case.files))
        notes.append(note)
    case.what = "; ".join(n for n in [*notes, case.what.strip("; ")] if n)
    return case


def materialize(case: ZCase, directory: str) -> str:
    """Write ``case`` under ``directory``; return the store's path."""
    root = os.path.join(directory, STORE)
    outside = os.path.join(directory, OUTSIDE)
    for rel, data in case.files.items():
        for base in (root, outside):  # the outside copy: what a planted link points at
            path = os.path.join(base, *rel.split("/"))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
    os.makedirs(root, exist_ok=True)
    for rel, how in case.special.items():
        path = os.path.join(root, *rel.split("/"))
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if how == "fifo":
            os.mkfifo(path)
        elif how == "dir":
            os.makedirs(path)
        else:
            os.symlink(os.path.join(outside, *rel.split("/")), path)
    return root
