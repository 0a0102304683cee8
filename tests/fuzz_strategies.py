"""Shared hypothesis strategies for fuzzing jnrrd readers with hostile files.

A *seed* is a small, valid dataset of one storage kind (attached or detached untiled data in
every encoding; internal tiles contiguous, chunked and sparse; external tiles by pattern and by
``tile:files``; pyramids with stored and virtual levels; every codec chain). A *mutation* turns
a seed into hostile bytes: byte flips, truncations, insertions and deletions in any of its
files, or a **field mutation** that replaces one header value (sizes, offsets, size tables,
patterns, codec configurations, levels, overlap, tile sizes, dtypes, ...) by a nearby or
extreme value and renders the header again.

:func:`exercise` reads a dataset every way a user can (``read_header``, ``read`` of each
level, ``open`` + slicing, ``read_tile``) and :func:`bounded` runs it under a wall-clock
deadline and a tracemalloc peak limit. Only ``jnrrd.JnrrdError`` may escape.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st
from memory_peak import measured

import jnrrd

HEADER = "v.jnrrd"

# -- seeds ----------------------------------------------------------------------------------

_CONDITIONAL = [
    {"name": "bytes", "configuration": {"endian": "little"}},
    {"name": "conditional", "configuration": {"codecs": [
        {"name": "zstd", "configuration": {"level": 1}},
        {"name": "gzip", "configuration": {"level": 1}},
    ]}},
]
_QUANTIZE = [
    {"name": "scale_offset", "configuration": {"offset": 0.5, "scale": 10.0}},
    {"name": "cast_value", "configuration": {"data_type": "int16", "out_of_range": "clamp"}},
    {"name": "bytes", "configuration": {"endian": "little"}},
    {"name": "zstd", "configuration": {"level": 1}},
]
_PAD_CRC = [
    {"name": "bytes", "configuration": {"endian": "little"}},
    {"name": "lz4"},
    {"name": "crc32c"},
    {"name": "pad", "configuration": {"location": "start", "nbytes": 8}},
]


def _volume(dtype: str = "uint16", shape: tuple[int, ...] = (6, 5, 4)) -> np.ndarray:
    n = int(np.prod(shape))
    return (np.arange(n) % 251).astype(dtype).reshape(shape, order="F")


def _untiled(encoding: str, detached: bool = False) -> Callable[[str], None]:
    def make(path: str) -> None:
        jnrrd.write(path, _volume(), encoding=encoding, detached=detached)
    return make


def _tiled(dtype: str = "uint16", **kw: Any) -> Callable[[str], None]:
    def make(path: str) -> None:
        # align=4096 keeps the tiles at fixed offsets when a field mutation changes the
        # header's length, so mutated tables still point at real tile bytes.
        extra = {} if kw.get("storage") == "external" else {"align": 4096}
        jnrrd.write(path, _volume(dtype), **{"tile": (4, 3, 2), **extra, **kw})
    return make


def _external_files(path: str) -> None:
    """An external dataset whose tiles are listed one by one in ``tile:files``."""
    jnrrd.write(path, _volume(), tile=(4, 3, 2), storage="external", compression="gzip",
                pattern="t_{i}.bin")
    h = jnrrd.read_header(path)
    base = h["tile:base_dir"]
    vol = jnrrd.open(path)
    files = [{"level": 0, "indices": list(c), "file": f"{base}/t_{i}.bin"}
             for i, c in enumerate(vol.iter_tiles())]
    vol.close()
    h.pop("tile:pattern")
    h.pop("tile:base_dir")
    h["tile:files"] = files
    _rewrite_header(path, h)


def _rewrite_header(path: str, header: dict[str, Any]) -> None:
    with open(path, "rb") as f:
        raw = f.read()
    _, tail = split_header(raw)
    with open(path, "wb") as f:
        f.write(render(list(header.items())) + tail)


SEEDS: dict[str, Callable[[str], None]] = {
    "attached-raw": _untiled("raw"),
    "attached-gzip": _untiled("gzip"),
    "attached-zstd": _untiled("zstd"),
    "attached-lz4": _untiled("lz4"),
    "attached-bzip2": _untiled("bzip2"),
    "attached-ascii": _untiled("ascii"),
    "attached-hex": _untiled("hex"),
    "detached-raw": _untiled("raw", detached=True),
    "detached-zstd": _untiled("zstd", detached=True),
    "internal-contiguous-raw": _tiled(),
    "internal-chunked-zstd": _tiled(compression="zstd", tile_format="chunked"),
    "internal-sparse-gzip": _tiled(compression="gzip", sparse=True),
    "internal-overlap-variable": _tiled(overlap=1, edge="variable", compression="bzip2"),
    "internal-pyramid-stored": _tiled(levels=3, compression="lz4", tile=(2, 2, 2)),
    "internal-pyramid-virtual": _tiled(levels=3, tile=(2, 2, 2), compression="zstd",
                                      header={"tile:levels_stored": [0, 2]}),
    "internal-conditional": _tiled(codecs=_CONDITIONAL, decision="always"),
    "internal-quantize": _tiled("float32", codecs=_QUANTIZE),
    "internal-pad-crc32c": _tiled(codecs=_PAD_CRC, checksum="crc32"),
    "external-pattern": _tiled(storage="external", compression="zstd", levels=2,
                               tile_stats=True, checksum="crc32c"),
    "external-sparse": _tiled(storage="external", sparse=True),
    "external-files": _external_files,
}


class SeedCache:
    """Builds each seed once into a private directory; hands out its files as bytes."""

    def __init__(self) -> None:
        self._root = tempfile.mkdtemp(prefix="jnrrd-fuzz-seeds-")
        self._files: dict[str, dict[str, bytes]] = {}

    def files(self, kind: str) -> dict[str, bytes]:
        """{relative path: bytes} of the seed dataset ``kind`` (header at :data:`HEADER`)."""
        if kind not in self._files:
            d = os.path.join(self._root, kind)
            os.makedirs(d)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                SEEDS[kind](os.path.join(d, HEADER))
            out = {}
            for root, _, names in os.walk(d):
                for n in names:
                    full = os.path.join(root, n)
                    with open(full, "rb") as f:
                        out[os.path.relpath(full, d)] = f.read()
            self._files[kind] = out
        return dict(self._files[kind])

    def close(self) -> None:
        shutil.rmtree(self._root, ignore_errors=True)


# -- header text ----------------------------------------------------------------------------

def split_header(raw: bytes) -> tuple[list[tuple[str, Any]], bytes]:
    """(header fields in order, bytes after the blank line) of a seed written by jnrrd."""
    end = raw.index(b"\n\n") + 2
    fields = []
    for line in raw[:end].decode().splitlines():
        if line.strip():
            (k, v), = json.loads(line).items()
            fields.append((k, v))
    return fields, raw[end:]


def render(fields: list[tuple[str, Any]]) -> bytes:
    """Header lines (one single-key JSON object each) and the closing blank line; a
    :class:`RawJSON` value is written as its text."""
    return b"".join(_line(k, v) for k, v in fields) + b"\n"


def _line(key: str, value: Any) -> bytes:
    if isinstance(value, RawJSON):
        return b"{" + json.dumps(key).encode() + b": " + value.text.encode() + b"}\n"
    return json.dumps({key: value}).encode() + b"\n"


# -- value mutations ------------------------------------------------------------------------

HUGE_INTS = [-(2**63), -(2**31), -1, 0, 1, 2, 3, 255, 4095, 4096, 65535, 2**31 - 1, 2**32,
             2**40, 2**53 + 1, 2**63 - 1, 2**64, 10**15, 10**30]
ODD_VALUES: list[Any] = [None, True, False, 0.5, -0.0, 1e308, "", "x", "../../etc/passwd",
                         "/etc/passwd", "http://example.com/x", "{x}{y}{z}{l}{i}", "%d%n",
                         "a\u0000b", [], {}, [None], {"name": "bytes"}, "uint8", "float64",
                         "int64", "block", "zstd", "gzip", "contiguous", "chunked",
                         "external", "internal", "pad", "variable", "average", "mode"]


@st.composite
def mutate_value(draw: st.DrawFn, value: Any, depth: int = 0) -> Any:
    """A value near ``value`` (one element or key changed) or an extreme/odd replacement."""
    choice = draw(st.integers(0, 9))
    if choice == 0 or depth > 4:
        return draw(st.sampled_from(ODD_VALUES + HUGE_INTS))
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return draw(st.one_of(st.sampled_from(HUGE_INTS), st.integers(value - 3, value + 3),
                              st.just(value * 1000), st.just(float(value))))
    if isinstance(value, float):
        return draw(st.sampled_from([0.0, -1.0, 1e-300, 1e300, float(2**64), 3, "NaN"]))
    if isinstance(value, str):
        return draw(st.one_of(st.sampled_from(ODD_VALUES),
                              st.just(value[: draw(st.integers(0, len(value)))]),
                              st.just(value + draw(st.sampled_from(["/..", "{q}", "x", "%d"]))),
                              st.text(max_size=8)))
    if isinstance(value, list):
        op = draw(st.integers(0, 4))
        if not value or op == 0:
            return value + [draw(st.sampled_from(HUGE_INTS + ODD_VALUES[:6]))]
        if op == 1:
            return value[:-1]
        if op == 2:
            return value * draw(st.integers(2, 3))
        i = draw(st.integers(0, len(value) - 1))
        out = list(value)
        out[i] = draw(mutate_value(out[i], depth + 1))
        return out
    if isinstance(value, dict):
        if not value:
            return {"name": draw(st.sampled_from(["gzip", "zstd", "bogus"]))}
        keys = sorted(value)
        k = draw(st.sampled_from(keys))
        out = dict(value)
        op = draw(st.integers(0, 5))
        if op == 0:
            del out[k]
        elif op == 1:
            out["unknown_key"] = 1
        else:
            out[k] = draw(mutate_value(value[k], depth + 1))
        return out
    return draw(st.sampled_from(HUGE_INTS + ODD_VALUES))


# -- dataset mutations ----------------------------------------------------------------------

@dataclass
class Case:
    """One hostile dataset: its files and a description of what was changed."""

    kind: str
    files: dict[str, bytes]
    what: str
    #: symlinks to create beside the files: {relative path: target}
    links: dict[str, str] = field(default_factory=dict)


@st.composite
def byte_mutation(draw: st.DrawFn, files: dict[str, bytes]) -> tuple[dict[str, bytes], str]:
    """Flip, truncate, insert, delete or overwrite bytes in one file of the dataset."""
    name = draw(st.sampled_from(sorted(files)))
    data = bytearray(files[name])
    n = len(data)
    op = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "overwrite", "empty"]))
    # Bias positions towards the header and the first bytes of a stream: most structure
    # lives there, and a random offset into a big tile mostly hits plain sample values.
    pos = draw(st.one_of(st.integers(0, max(0, min(n, 256) - 1)), st.integers(0, max(0, n - 1))))
    if op == "flip" and n:
        for _ in range(draw(st.integers(1, 4))):
            p = min(n - 1, pos + draw(st.integers(0, 16)))
            data[p] ^= 1 << draw(st.integers(0, 7))
    elif op == "truncate":
        del data[pos:]
    elif op == "insert":
        data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
    elif op == "delete":
        del data[pos : pos + draw(st.integers(1, 16))]
    elif op == "overwrite":
        chunk = draw(st.binary(min_size=1, max_size=16))
        data[pos : pos + len(chunk)] = chunk
    else:
        data = bytearray()
    out = dict(files)
    out[name] = bytes(data)
    return out, f"{op} {name}@{pos}"


@st.composite
def field_mutation(draw: st.DrawFn, files: dict[str, bytes]) -> tuple[dict[str, bytes], str]:
    """Replace one header field's value (or drop, duplicate or add a field)."""
    fields, tail = split_header(files[HEADER])
    i = draw(st.integers(0, len(fields) - 1))
    key, value = fields[i]
    op = draw(st.integers(0, 9))
    if op == 0:
        del fields[i]
        what = f"drop {key}"
    elif op == 1:
        fields.insert(i, (key, value))
        what = f"duplicate {key}"
    elif op == 2:
        extra = draw(st.sampled_from([
            "tile:files", "tile:base_dir", "tile:pattern", "data_file", "data_files",
            "tile:levels_stored", "tile:overlap", "tile:level_tile_sizes", "byte_skip",
            "line_skip", "block_size", "tile:padding_value", "tile:metadata",
        ]))
        new = draw(mutate_value(value))
        fields.append((extra, new))
        what = f"add {extra}={new!r:.80}"
    else:
        new = draw(mutate_value(value))
        fields[i] = (key, new)
        what = f"{key}={new!r:.80}"
    head = render(fields)
    old_head = len(files[HEADER]) - len(tail)
    # Keep the tile bytes where the tables say they are when the header got shorter
    # (tiled seeds are written with their tiles aligned past a zero-filled gap).
    if tail[:1] == b"\0" and len(head) < old_head:
        head += b"\0" * (old_head - len(head))
    out = dict(files)
    out[HEADER] = head + tail
    return out, what


@st.composite
def hostile_case(draw: st.DrawFn, seeds: SeedCache, kinds: list[str],
                 hostile: float = 0.25, mutations: tuple[int, int] = (1, 3)) -> Case:
    """A seed of one of ``kinds`` with ``mutations`` (a range) mutations applied, then (with
    probability about ``hostile``) one :func:`hostile_value_mutation` of a header field."""
    kind = draw(st.sampled_from(kinds))
    files = seeds.files(kind)
    notes = []
    for _ in range(draw(st.integers(*mutations))):
        strat = draw(st.sampled_from([byte_mutation, field_mutation, field_mutation]))
        if strat is field_mutation and not _parsable(files):
            strat = byte_mutation
        files, note = draw(strat(files))
        notes.append(note)
    links: dict[str, str] = {}
    if hostile and draw(st.integers(0, 99)) < 100 * hostile:
        if files[HEADER].startswith(b"NRRD"):
            files, note, links = draw(nrrd_value_mutation(files))
            notes.append(note)
        elif _parsable(files):
            files, note, links = draw(hostile_value_mutation(files))
            notes.append(note)
    return Case(kind, files, "; ".join(notes), links)


def _parsable(files: dict[str, bytes]) -> bool:
    try:
        fields, _ = split_header(files[HEADER])
    except (ValueError, UnicodeDecodeError, RecursionError, AttributeError):
        return False  # not lines of single-key JSON objects any more (a line "[1]" has no items)
    return bool(fields)  # a field mutation needs a field to change


def materialize(case: Case, directory: str) -> str:
    """Write the case's files under ``directory``; returns the header path."""
    for rel, data in case.files.items():
        full = os.path.join(directory, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
    for rel, target in case.links.items():
        full = os.path.join(directory, rel)
        if not os.path.lexists(full):
            os.symlink(target, full)
    return os.path.join(directory, HEADER)


# -- hostile value classes ------------------------------------------------------------------
# Each class of bare exception the reliability campaign found (docs/reliability.md) has a
# generator here, so the fuzzers keep it closed: ragged and overflowing tile tables, integers
# past 64 bits / float64 / NumPy's item size / the interpreter's digit limit, nesting past
# the recursion limit, paths the OS refuses, and tiny arrays with many dimensions (seeds).

@dataclass(frozen=True)
class RawJSON:
    """JSON text written into a header line verbatim: values ``json.dumps`` cannot build
    (integers past the interpreter's digit limit, nesting past its recursion limit)."""

    text: str

    def __repr__(self) -> str:
        return f"RawJSON({self.text[:40]!r}{'...' if len(self.text) > 40 else ''}, " \
               f"{len(self.text)} chars)"


def _nested(depth: int, leaf: str = "1", objects: bool = False) -> RawJSON:
    if objects:
        return RawJSON('{"a": ' * depth + leaf + "}" * depth)
    return RawJSON("[" * depth + leaf + "]" * depth)


#: integers at every boundary a header number can cross
BOUNDARY_INTS: list[Any] = [
    2**31 - 1, 2**31, 2**32, 2**53 + 1, 2**62, 2**63 - 2, 2**63 - 1, 2**63, 2**64 - 1, 2**64,
    -(2**63), -(2**63) - 1, 10**400, -(10**400),
    RawJSON("9" * 5000), RawJSON("-" + "9" * 4400), RawJSON("0" * 5000 + "7"),
    RawJSON("1e999"), RawJSON("-1e999"), 1e308, -0.0,
]
#: fields whose values are counts, sizes, offsets or numbers a reader computes with
NUMERIC_FIELDS = ["sizes", "dimension", "block_size", "byte_skip", "line_skip",
                  "space_dimension", "tile:sizes", "tile:dimensions", "tile:padding_value",
                  "tile:levels", "tile:level_scales", "tile:overlap", "tile:level_tile_sizes",
                  "tile:levels_stored", "tile:offset_table", "tile:size_table"]


@st.composite
def huge_integer(draw: st.DrawFn, value: Any) -> Any:
    """``value`` (an int or a list of them) with one number replaced by a boundary value."""
    big = draw(st.sampled_from(BOUNDARY_INTS))
    if isinstance(value, list) and value and not any(isinstance(v, RawJSON) for v in value):
        i = draw(st.integers(0, len(value) - 1))
        if isinstance(big, RawJSON):
            items = [json.dumps(v) for v in value]
            items[i] = big.text
            return RawJSON("[" + ", ".join(items) + "]")
        out = list(value)
        out[i] = big
        return out
    return big


@st.composite
def hostile_table(draw: st.DrawFn, table: Any) -> Any:
    """A tile table made ragged, nested, mixed, or overflowing in offset + size arithmetic."""
    t = list(table) if isinstance(table, list) and table else [0]
    op = draw(st.sampled_from(["ragged", "nested", "mixed", "wrap", "edge", "huge"]))
    i = draw(st.integers(0, len(t) - 1))
    out: list[Any] = list(t)
    if op == "ragged":
        return [[t[0], t[0]], [t[-1]], *t[2:]]
    if op == "nested":
        return [[x] if isinstance(x, int) else x for x in t]
    if op == "mixed":
        out[i] = draw(st.sampled_from(["1", 1.5, True, [], {}, [[1], 2], None]))
    elif op == "wrap":
        # with the seed's offset near i, offset + this size passes 2**63 by a little
        base = t[i] if isinstance(t[i], int) and not isinstance(t[i], bool) else 0
        out[i] = 2**63 - max(0, min(base, 2**62)) + draw(st.integers(0, 4096))
    elif op == "edge":
        out[i] = draw(st.sampled_from([2**63 - 1, 2**63 - 4096, 2**62, 2**31, 2**32 + 1]))
    else:
        return draw(huge_integer(t))
    return out


@st.composite
def deep_value(draw: st.DrawFn) -> Any:
    """Lists or objects nested around the reader's limit and past the recursion limit."""
    depth = draw(st.sampled_from([63, 64, 65, 66, 200, 700, 1200, 3000]))
    leaf = draw(st.sampled_from(["1", "\"x\"", "null", "[]", "{}"]))
    return _nested(depth, leaf, objects=draw(st.booleans()))


def nested_conditional(depth: int) -> RawJSON:
    """A codec chain whose ``conditional`` codecs nest ``depth`` levels."""
    inner = '{"name": "zstd", "configuration": {"level": 1}}'
    for _ in range(depth):
        inner = '{"name": "conditional", "configuration": {"codecs": [' + inner + "]}}"
    return RawJSON('[{"name": "bytes", "configuration": {"endian": "little"}}, ' + inner + "]")


#: names the OS refuses: too long for a component or a path, through a regular file
#: (the header itself), a symlink loop (made by the mutation), NUL, a directory
OS_PATHS = ["a" * 300, ("d" * 200 + "/") * 30 + "x", HEADER + "/x", "loop1", "loop1/x", ".",
            "a\u0000b", "", "/", "tiles/" + "b" * 256 + "/{x}"]


@st.composite
def hostile_value_mutation(draw: st.DrawFn, files: dict[str, bytes]
                           ) -> tuple[dict[str, bytes], str, dict[str, str]]:
    """Give one header field a value of a hostile class (see the section comment); returns
    (files, what was done, symlinks to create)."""
    fields, tail = split_header(files[HEADER])
    present = {k: n for n, (k, _) in enumerate(fields)}
    cls = draw(st.sampled_from(["table", "huge", "huge", "deep", "path", "codecs"]))
    links: dict[str, str] = {}
    if cls == "table":
        key = draw(st.sampled_from(["tile:offset_table", "tile:size_table"]))
        new = draw(hostile_table(fields[present[key]][1] if key in present else None))
    elif cls == "huge":
        key = draw(st.sampled_from(NUMERIC_FIELDS + ["data_file_pattern"]))
        old = fields[present[key]][1] if key in present else 0
        if isinstance(old, dict):
            sub = draw(st.sampled_from(["min", "max", "step"]))
            big = draw(st.sampled_from([b for b in BOUNDARY_INTS if isinstance(b, int)]))
            new = {**old, sub: big}
        else:
            new = draw(huge_integer(old))
    elif cls == "deep":
        key = draw(st.sampled_from(["sizes", "meta:x", "tile:codecs", "tile:metadata",
                                    "space_directions", "meta:" + ".".join(["a"] * 80),
                                    "meta:a" + "[0]" * 70]))
        new = (nested_conditional(draw(st.sampled_from([2, 20, 70, 250])))
               if key == "tile:codecs" else draw(deep_value()) if "." not in key
               and "[" not in key else 1)
    elif cls == "path":
        key = draw(st.sampled_from(["data_file", "tile:pattern", "tile:base_dir",
                                    "data_files"]))
        name = draw(st.sampled_from(OS_PATHS))
        if name.startswith("loop1"):
            links = {"loop1": "loop2", "loop2": "loop1"}
        if key == "tile:pattern" and "{" not in name:
            name += "/{i}_{l}"
        new = [name] if key == "data_files" else name
    else:
        key = "tile:codecs"
        entry = draw(st.sampled_from([5, ["bytes"], "zstd", None, {"configuration": {}},
                                      {"name": "bytes", "configuration": 7},
                                      {"name": "conditional", "configuration": {"codecs": [7]}},
                                      {"name": 1}]))
        new = [{"name": "bytes", "configuration": {"endian": "little"}}, entry] \
            if draw(st.booleans()) else [entry]
    if key in present:
        fields[present[key]] = (key, new)
    else:
        fields.append((key, new))
    head = render(fields)
    old_head = len(files[HEADER]) - len(tail)
    if tail[:1] == b"\0" and len(head) < old_head:
        head += b"\0" * (old_head - len(head))
    out = dict(files)
    out[HEADER] = head + tail
    return out, f"hostile {cls}: {key}={new!r:.100}", links


def _tiny(shape: tuple[int, ...], **kw: Any) -> Callable[[str], None]:
    def make(path: str) -> None:
        n = int(np.prod(shape))
        data = (np.arange(n) % 7).astype("uint8").reshape(shape, order="F")
        jnrrd.write(path, data, **kw)
    return make


#: tiny arrays with many dimensions: a mutated size multiplies across every axis
TINY_SEEDS: dict[str, Callable[[str], None]] = {
    "attached-tiny-16d": _tiny((2,) + (1,) * 14 + (2,)),
    "internal-tiny-7d-zstd": _tiny((2, 1, 1, 1, 1, 1, 2), tile=(1,) * 7, compression="zstd"),
    "external-tiny-6d": _tiny((2, 1, 1, 1, 1, 2), tile=(1,) * 6, storage="external"),
}
SEEDS.update(TINY_SEEDS)


def _nrrd(suffix: str, encoding: str) -> Callable[[str], None]:
    """A classic NRRD seed (``.nrrd`` attached, ``.nhdr`` + data file) stored under the
    header name: the readers recognise NRRD by its magic, not by the suffix."""
    def make(path: str) -> None:
        src = os.path.join(os.path.dirname(path), "v" + suffix)
        jnrrd.write(src, _volume(), encoding=encoding)
        os.replace(src, path)
    return make


#: classic NRRD headers, mutated by bytes and by :func:`nrrd_value_mutation`
NRRD_SEEDS: dict[str, Callable[[str], None]] = {
    "attached-nrrd-raw": _nrrd(".nrrd", "raw"),
    "detached-nhdr-gzip": _nrrd(".nhdr", "gzip"),
}
SEEDS.update(NRRD_SEEDS)

NRRD_FIELDS = [b"sizes", b"dimension", b"byte skip", b"line skip", b"block size", b"type",
               b"space dimension", b"data file", b"encoding", b"kinds"]
NRRD_VALUES = [b"4611686018427387904", b"9223372036854775807", b"9223372036854775808",
               b"18446744073709551616", b"-1", b"-9223372036854775809", b"9" * 5000,
               b"0" * 5000 + b"3", b"1e999", b"6 5 4 " + b"9" * 30, b"block",
               b"LIST 1 9223372036854775807 1", *(p.encode() for p in OS_PATHS if p)]


@st.composite
def nrrd_value_mutation(draw: st.DrawFn, files: dict[str, bytes]
                        ) -> tuple[dict[str, bytes], str, dict[str, str]]:
    """Give one classic NRRD header field a boundary integer, a 5,000-digit number or a path
    the OS refuses (the field is added when absent)."""
    raw = files[HEADER]
    end = raw.find(b"\n\n")
    head, tail = (raw, b"") if end < 0 else (raw[:end], raw[end:])
    lines = head.split(b"\n")
    key = draw(st.sampled_from(NRRD_FIELDS))
    value = draw(st.sampled_from(NRRD_VALUES))
    line = key + b": " + value
    at = next((i for i, ln in enumerate(lines) if ln.startswith(key + b":")), None)
    if at is None:
        lines.append(line)
    else:
        lines[at] = line
    links = {"loop1": "loop2", "loop2": "loop1"} if value.startswith(b"loop1") else {}
    out = dict(files)
    out[HEADER] = b"\n".join(lines) + tail
    return out, f"nrrd {key.decode()}: {value[:40]!r}", links


# -- running a read under bounds ------------------------------------------------------------

class Deadline(BaseException):
    """Raised by the alarm when a read overruns its time bound (not a JnrrdError)."""


def quiesce_pool() -> None:
    """Wait until the shared decode pool has finished every task it was given.

    A read that fails on one tile returns while the pool still decodes the others (see
    test_fuzz_regressions.test_failed_read_leaves_no_decode_running); they must be done
    before tracemalloc stops, which races with allocations in other threads on CPython 3.11.
    """
    from jnrrd import _threads as pools

    pool = pools._POOL
    if pool is None:
        return
    n = pool._max_workers
    barrier = threading.Barrier(n + 1)
    for _ in range(n):
        pool.submit(barrier.wait, 30)
    barrier.wait(30)


@contextlib.contextmanager
def bounded(seconds: float, max_peak: int) -> Iterator[dict[str, int]]:
    """Run the body with a wall-clock alarm and measure its memory peak (tests/memory_peak.py).

    Yields a dict that receives ``peak`` (bytes) when the body ends; raises
    :class:`Deadline` from inside the body when it runs longer than ``seconds``.
    """
    def on_alarm(signum: int, frame: Any) -> None:
        raise Deadline(f"read took longer than {seconds} s")

    stats: dict[str, int] = {}
    timed = hasattr(signal, "setitimer")  # (Windows: no alarm; the bound is checked after)
    old = signal.signal(signal.SIGALRM, on_alarm) if timed else None
    if timed:
        signal.setitimer(signal.ITIMER_REAL, seconds)
    start = time.monotonic()
    with measured(stats):  # tracemalloc's peak (or, under obstore, the resident set's)
        try:
            yield stats
            if not timed and time.monotonic() - start > seconds:
                raise Deadline(f"read took longer than {seconds} s")
        finally:
            if timed:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)
            quiesce_pool()
    if stats["peak"] > max_peak:
        raise AssertionError(f"the read allocated {stats['peak']} bytes at its peak, over the "
                             f"{max_peak} byte bound for a small file")


def exercise(path: str, **policy: Any) -> list[str]:
    """Read ``path`` every way a user can; returns the names of the steps that succeeded.

    Each step may fail with a ``JnrrdError`` (recorded, the next step still runs); anything
    else propagates.
    """
    done = []

    def step(name: str, fn: Callable[[], Any]) -> None:
        try:
            fn()
            done.append(name)
        except jnrrd.JnrrdError:
            pass

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        step("read_header", lambda: jnrrd.read_header(path, **policy))
        step("read", lambda: jnrrd.read(path, **policy))
        try:
            vol = jnrrd.open(path, **policy)
        except jnrrd.JnrrdError:
            return done
        try:
            for lv in vol.levels:
                step(f"level{lv.index}", lambda lv=lv: lv[...])
                step(f"slice{lv.index}", lambda lv=lv: lv[tuple(
                    slice(None, None, -2) if k % 2 else slice(1, None)
                    for k in range(lv.ndim))])
                step(f"point{lv.index}", lambda lv=lv: lv[tuple(n - 1 for n in lv.shape)]
                     if all(lv.shape) else None)
                if vol.tiled:
                    step(f"tile{lv.index}", lambda lv=lv: lv.read_tile(
                        (0,) * len(vol.tiling.levels[lv.index].grid.grid)))
        finally:
            vol.close()
    return done


def check_exception(exc: BaseException, case: Case) -> None:
    """Re-raise anything that is not a ``JnrrdError`` with the case described."""
    if isinstance(exc, jnrrd.JnrrdError):
        return
    raise AssertionError(
        f"{type(exc).__name__} escaped on {case.kind} after [{case.what}]: {exc}"
    ) from exc
