"""Hypothesis generators for tiny inputs that used to cost seconds, gigabytes or a hang.

Each strategy draws a small dataset (a ``Case`` of :mod:`fuzz_strategies`, plus the files
to turn into FIFOs or sockets) of one class:

- :func:`non_regular_case`: a detached or external dataset with one referenced data or tile
  file replaced by a FIFO or a Unix socket;
- :func:`member_flood_case`: an attached gzip/bzip2/LZ4 data section with up to 10⁵ empty
  members (and optional zero padding) before, between or after the data;
- :func:`extreme_scale_case`: a tiny volume with a virtual level of any method at scales up
  to 2⁶² per axis;
- :func:`many_tiles_case`: external or internal tiling declaring up to 10⁵ tiles (mostly
  missing) or up to 10⁵ levels.

:func:`materialize` writes a case, creating the special files.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass, field
from typing import Any

import fuzz_strategies as fz
import numpy as np
from hypothesis import strategies as st

from jnrrd.codecs import compress

TILE_EXT = {"tile": "https://jnrrd.org/extensions/tile/v1.0.0"}
METHODS = ["average", "gaussian", "lanczos", "max", "min", "mode"]


@dataclass
class CostCase:
    """A dataset plus the paths (relative) to replace by FIFOs or sockets."""

    case: fz.Case
    fifos: list[str] = field(default_factory=list)
    sockets: list[str] = field(default_factory=list)


def header(fields: list[tuple[str, Any]]) -> bytes:
    items = [("jnrrd", "0004"), *fields]
    return b"".join(json.dumps({k: v}).encode() + b"\n" for k, v in items) + b"\n"


def materialize(cc: CostCase, directory: str) -> tuple[str, list[socket.socket]]:
    """Write the case; returns the header path and the bound sockets (close them after)."""
    path = fz.materialize(cc.case, directory)
    held = []
    for rel in cc.fifos + cc.sockets:
        full = os.path.join(directory, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if os.path.lexists(full):
            os.remove(full)
        if rel in cc.fifos:
            os.mkfifo(full)
        else:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(full)
            held.append(s)
    return path, held


# -- non-regular files -----------------------------------------------------------------------

NON_REGULAR_KINDS = ["detached-raw", "detached-zstd", "external-pattern", "external-files"]


@st.composite
def non_regular_case(draw: st.DrawFn, seeds: fz.SeedCache) -> CostCase:
    kind = draw(st.sampled_from(NON_REGULAR_KINDS), label="kind")
    files = seeds.files(kind)
    others = sorted(k for k in files if k != fz.HEADER)
    targets = draw(st.lists(st.sampled_from(others), min_size=1, max_size=3, unique=True))
    as_socket = draw(st.booleans(), label="socket") and len(os.path.join(
        "/tmp/jnrrd-fuzz-xxxxxxxx", max(targets, key=len))) < 100  # AF_UNIX path limit
    cc = CostCase(fz.Case(kind, files, f"{'socket' if as_socket else 'fifo'}: {targets}"))
    (cc.sockets if as_socket else cc.fifos).extend(targets)
    return cc


# -- member floods ---------------------------------------------------------------------------

@st.composite
def member_flood_case(draw: st.DrawFn) -> CostCase:
    enc = draw(st.sampled_from(["gzip", "bzip2", "lz4"]), label="encoding")
    name = {"gzip": "gzip", "bzip2": "bz2", "lz4": "lz4"}[enc]
    n = draw(st.integers(1, 4096), label="voxels")
    data = (np.arange(n) % 251).astype(np.uint8).tobytes()
    empty = compress.compress(name, b"")
    before = draw(st.integers(0, 100_000), label="empty members before")
    after = draw(st.integers(0, 1000), label="empty members after")
    split = draw(st.integers(0, n), label="split")
    between = draw(st.integers(0, 10_000), label="empty members between")
    zeros = draw(st.sampled_from([0, 1, 7, 4096]), label="trailing zeros")
    body = (empty * before + compress.compress(name, data[:split]) + empty * between
            + compress.compress(name, data[split:]) + empty * after + b"\0" * zeros)
    claim = draw(st.sampled_from([n, n + 1, max(1, n - 1), n * 1000]), label="claimed voxels")
    raw = header([("type", "uint8"), ("dimension", 1), ("sizes", [claim]), ("encoding", enc)])
    return CostCase(fz.Case(f"flood-{enc}", {fz.HEADER: raw + body},
                            f"{before}+{between}+{after} empty members, claim {claim}"))


# -- virtual levels at extreme scales ---------------------------------------------------------

def _scale(draw: st.DrawFn) -> int:
    return draw(st.one_of(st.integers(1, 64), st.integers(0, 62).map(lambda k: 2**k),
                          st.integers(1, 2**62)))


@st.composite
def extreme_scale_case(draw: st.DrawFn) -> CostCase:
    shape = draw(st.lists(st.integers(1, 6), min_size=1, max_size=3), label="shape")
    method = draw(st.sampled_from(METHODS), label="method")
    nlev = draw(st.integers(2, 4), label="levels")
    scales = [[1] * len(shape)] + [[_scale(draw) for _ in shape] for _ in range(nlev - 1)]
    dtype = draw(st.sampled_from(["uint8", "int16", "float32", "float64"]), label="dtype")
    a = (np.arange(int(np.prod(shape))) % 97).astype(dtype)  # F order: the file's order
    fields: list[tuple[str, Any]] = [
        ("type", {"uint8": "uint8", "int16": "int16", "float32": "float",
                  "float64": "double"}[dtype]),
        ("dimension", len(shape)), ("sizes", shape), ("encoding", "raw"),
        ("endian", "little"), ("extensions", TILE_EXT), ("tile:enabled", True),
        ("tile:dimensions", list(range(len(shape)))), ("tile:sizes", shape),
        ("tile:storage", "external"), ("tile:pattern", "t{i}.bin"), ("tile:levels", nlev),
        ("tile:level_scales", scales), ("tile:levels_stored", [0]),
        ("tile:levels_virtual", list(range(1, nlev))), ("tile:downsample_method", method)]
    files = {fz.HEADER: header(fields), "t0.bin": a.astype(a.dtype.newbyteorder("<")).tobytes()}
    return CostCase(fz.Case("virtual-extreme", files, f"{method} {shape} scales {scales}"))


# -- huge tile and level counts --------------------------------------------------------------

@st.composite
def many_tiles_case(draw: st.DrawFn) -> CostCase:
    ntiles = draw(st.one_of(st.integers(1, 1000), st.integers(1000, 100_000)), label="tiles")
    levels = draw(st.one_of(st.just(1), st.integers(2, 8), st.integers(1000, 100_000)),
                  label="levels")
    storage = draw(st.sampled_from(["external", "internal"]), label="storage")
    fields: list[tuple[str, Any]] = [
        ("type", "uint8"), ("dimension", 1), ("sizes", [ntiles]), ("encoding", "raw"),
        ("extensions", TILE_EXT), ("tile:enabled", True), ("tile:dimensions", [0]),
        ("tile:sizes", [1]), ("tile:storage", storage)]
    if storage == "external":
        fields.append(("tile:pattern", draw(st.sampled_from(
            ["t/{x}.bin", "t/{l}_{i}.bin", "{l}/{x}"]), label="pattern")))
    else:
        fields.append(("tile:offset_table", [-1] * min(ntiles, 10)))
    if levels > 1:
        fields += [("tile:levels", levels), ("tile:level_scales", [2**min(k, 62)
                                                                   for k in range(levels)]),
                   ("tile:levels_stored", [0]), ("tile:levels_virtual",
                                                 list(range(1, levels)))]
    files = {fz.HEADER: header(fields)}
    present = draw(st.integers(0, 3), label="tile files present")
    for k in range(min(present, ntiles)):
        files[f"t/{k}.bin"] = bytes([k % 256])
    return CostCase(fz.Case("many-tiles", files, f"{ntiles} tiles, {levels} levels, "
                                                 f"{storage}, {present} present"))
