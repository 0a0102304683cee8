"""Resource caps (docs/security.md#caps): claims checked before allocating, decompression
bombs stopped at the expected size, header caps, and every cap keyword configurable.

Files here are crafted by hand (header lines + bytes), so the tests do not depend on the
writer producing such files.
"""

from __future__ import annotations

import bz2
import io
import json
import struct
import time
import tracemalloc
import warnings
import zlib
from collections.abc import Callable
from typing import Any

import lz4.block
import lz4.frame
import numpy as np
import pytest
import zstandard
from fuzz_strategies import quiesce_pool

import jnrrd
from jnrrd.policy import GiB, MiB, Policy
from jnrrd.tiling.spec import TILE_URI

TIME_BOUND = 30.0  # generous: tracemalloc slows Python several-fold, and CI cores are shared
SMALL_PEAK = 32 << 20


def lines(fields: list[tuple[str, Any]]) -> bytes:
    """A JNRRD header: magic, one JSON object per line, blank line."""
    head = [{"jnrrd": "0004"}, *({k: v} for k, v in fields)]
    return b"".join(json.dumps(o).encode() + b"\n" for o in head) + b"\n"


def core(sizes: list[int], type_: str = "uint8", encoding: str = "raw") -> list[tuple[str, Any]]:
    return [("type", type_), ("dimension", len(sizes)), ("sizes", sizes),
            ("encoding", encoding)]


def internal_file(sizes: list[int], tile: list[int], tiles: list[bytes], *,
                  type_: str = "uint8", compression: str | None = None,
                  codecs: list[Any] | None = None, fmt: str = "chunked",
                  extra: list[tuple[str, Any]] = ()) -> bytes:
    """An internal tiled file with the given stored tile bytes (tables computed)."""
    fields = [*core(sizes, type_), ("extensions", {"tile": TILE_URI}), ("tile:enabled", True),
              ("tile:dimensions", list(range(len(sizes)))), ("tile:sizes", tile),
              ("tile:storage", "internal"), ("tile:format", fmt)]
    if compression is not None:
        fields.append(("tile:compression", compression))
    if codecs is not None:
        fields.append(("tile:codecs", codecs))
    fields += list(extra)
    offsets = [0] * len(tiles)
    for _ in range(4):  # fixed point: offsets depend on the header's own length
        head = lines([*fields, ("tile:offset_table", offsets),
                      ("tile:size_table", [len(t) for t in tiles])])
        pos, new = len(head), []
        for t in tiles:
            new.append(pos)
            pos += len(t)
        if new == offsets:
            break
        offsets = new
    return head + b"".join(tiles)


def measured(fn: Callable[[], Any]) -> tuple[Any, BaseException | None, float, int]:
    """(result, exception, seconds, tracemalloc peak) of ``fn()`` with warnings ignored."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    t0 = time.perf_counter()
    result, error = None, None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = fn()
    except jnrrd.JnrrdError as exc:
        error = exc
    finally:
        elapsed = time.perf_counter() - t0
        quiesce_pool()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return result, error, elapsed, peak


def open_all(path: Any, **kw: Any) -> np.ndarray:
    """``open`` + ``[...]``, closing the volume."""
    with jnrrd.open(path, **kw) as vol:
        return vol[...]


# -- 1. claims checked before any allocation --------------------------------------------------

HUGE = [10**5, 10**5, 10**5]  # 10^15 voxels


@pytest.mark.parametrize("fields, error", [
    pytest.param(core(HUGE), jnrrd.UnsupportedError, id="raw-attached-1e15"),
    pytest.param(core(HUGE, encoding="gzip"), jnrrd.UnsupportedError, id="gzip-attached-1e15"),
    pytest.param(core([2**20, 2**10, 2**3]), jnrrd.DataError, id="raw-attached-8GiB-short"),
    pytest.param(core([2**20, 2**10, 2**3], encoding="zstd"), jnrrd.DataError,
                 id="zstd-attached-8GiB-short"),
    pytest.param(core([2**20, 2**10, 2**3], encoding="gzip"), jnrrd.DataError,
                 id="gzip-attached-8GiB-short"),
    pytest.param([*core(HUGE), ("extensions", {"tile": TILE_URI}), ("tile:enabled", True),
                  ("tile:dimensions", [0, 1, 2]), ("tile:sizes", [64, 64, 64]),
                  ("tile:storage", "internal")], jnrrd.UnsupportedError, id="tiled-1e15"),
    pytest.param([*core([64, 64, 64]), ("extensions", {"tile": TILE_URI}),
                  ("tile:enabled", True), ("tile:dimensions", [0, 1, 2]),
                  ("tile:sizes", [2**12, 2**12, 2**12]), ("tile:storage", "internal")],
                 jnrrd.UnsupportedError, id="tile-of-64GiB"),
    pytest.param([*core([2**20, 2**10, 2**3]), ("extensions", {"tile": TILE_URI}),
                  ("tile:enabled", True), ("tile:dimensions", [0, 1, 2]),
                  ("tile:sizes", [2**20, 2**10, 1]), ("tile:storage", "internal"),
                  ("tile:offset_table", [10**6] * 8), ("tile:size_table", [2**30] * 8)],
                 jnrrd.DataError, id="tiled-tables-past-eof"),
])
def test_small_file_claiming_huge_data_fails_at_once(tmp_path, fields, error):
    """A ~300-byte file claiming 10^15 voxels (or gigabytes of tiles it does not hold) fails
    before any buffer of the claimed size: in milliseconds, with a small memory peak."""
    path = tmp_path / "claim.jnrrd"
    path.write_bytes(lines(fields) + b"\x01" * 64)
    for fn in (lambda: jnrrd.read(path), lambda: open_all(path)):
        _, exc, elapsed, peak = measured(fn)
        assert isinstance(exc, error), exc
        assert elapsed < TIME_BOUND and peak < SMALL_PEAK, (elapsed, peak)


# -- 2. decompression bombs -------------------------------------------------------------------

BOMB_OUT = 1 << 30  # every bomb below expands to at least 1 GiB
_MiB0 = b"\0" * MiB


def gzip_bomb() -> bytes:
    """One gzip member whose deflate blocks expand to 1 GiB (the trailer is never reached:
    a sync-flushed block of zeros repeated; distances stay inside the zeros)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = c.compress(_MiB0) + c.flush(zlib.Z_SYNC_FLUSH)
    block = c.compress(_MiB0) + c.flush(zlib.Z_SYNC_FLUSH)
    return head + block * (BOMB_OUT // MiB) + c.flush()


def zlib_bomb() -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 15)
    head = c.compress(_MiB0) + c.flush(zlib.Z_SYNC_FLUSH)
    block = c.compress(_MiB0) + c.flush(zlib.Z_SYNC_FLUSH)
    return head + block * (BOMB_OUT // MiB) + c.flush()


def bz2_bomb() -> bytes:
    """Concatenated bzip2 streams (decoders loop over streams), 1 GiB in all."""
    return bz2.compress(_MiB0 * 16) * (BOMB_OUT // (16 * MiB))


def zstd_bomb() -> bytes:
    """One zstd frame without a content size: 8192 RLE blocks of 128 KiB (32 KiB on disk)."""
    frame = bytearray(b"\x28\xb5\x2f\xfd\x00\x38")  # magic, FHD (no FCS), window 128 KiB
    n = BOMB_OUT // (128 << 10)
    for i in range(n):
        last = 1 if i == n - 1 else 0
        hdr = last | (1 << 1) | ((128 << 10) << 3)  # RLE block of 128 KiB
        frame += hdr.to_bytes(3, "little") + b"\0"
    return bytes(frame)


def lz4_bomb() -> bytes:
    """Concatenated LZ4 frames, 1 GiB in all."""
    return lz4.frame.compress(_MiB0 * 64) * (BOMB_OUT // (64 * MiB))


def numcodecs_lz4_bomb() -> bytes:
    """numcodecs LZ4: a size prefix claiming 1 GiB, then a block."""
    return struct.pack("<I", BOMB_OUT) + lz4.block.compress(_MiB0, store_size=False)


BOMBS = {"gzip": gzip_bomb, "zlib": zlib_bomb, "bz2": bz2_bomb, "zstd": zstd_bomb,
         "lz4": lz4_bomb, "numcodecs.lz4": numcodecs_lz4_bomb}
_CACHE: dict[str, bytes] = {}


def bomb(name: str) -> bytes:
    if name not in _CACHE:
        _CACHE[name] = BOMBS[name]()
    return _CACHE[name]


@pytest.mark.slow
def test_bombs_really_expand():
    """The crafted bombs are what they claim (checked with the plain stdlib decoders)."""
    assert len(zstandard.ZstdDecompressor().decompressobj().decompress(bomb("zstd"))) \
        == BOMB_OUT
    d = zlib.decompressobj(31)
    assert len(d.decompress(bomb("gzip"), BOMB_OUT)) == BOMB_OUT
    assert len(bomb("zstd")) < MiB and len(bomb("gzip")) < 2 * MiB
    assert len(bz2.BZ2Decompressor().decompress(bomb("bz2")[:100])) == 16 * MiB


def _expect_bounded(path: Any, expected: np.ndarray | None, **kw: Any) -> None:
    """Reading must stop near the expected size: DataError, or (untiled data, which ignores
    what follows the data) the expected zeros; never the bomb's full output."""
    for fn in (lambda: jnrrd.read(path, **kw)[0], lambda: open_all(path, **kw)):
        result, exc, elapsed, peak = measured(fn)
        assert elapsed < TIME_BOUND, elapsed
        assert peak < SMALL_PEAK, peak
        if exc is None:
            assert expected is not None, "the bomb was accepted as tile data"
            np.testing.assert_array_equal(result, expected)
        else:
            assert isinstance(exc, jnrrd.DataError), exc


@pytest.mark.parametrize("encoding, name", [
    pytest.param("gzip", "gzip", id="gzip"),
    pytest.param("gzip", "zlib", id="gzip-zlib-stream"),
    pytest.param("bzip2", "bz2", id="bzip2"),
    pytest.param("zstd", "zstd", id="zstd"),
    pytest.param("lz4", "lz4", id="lz4"),
])
def test_bomb_in_untiled_data_section(tmp_path, encoding, name):
    path = tmp_path / "bomb.jnrrd"
    path.write_bytes(lines(core([64, 64], encoding=encoding)) + bomb(name))
    _expect_bounded(path, np.zeros((64, 64), np.uint8))


@pytest.mark.parametrize("encoding, name", [
    pytest.param("gzip", "gzip", id="gzip"),
    pytest.param("zstd", "zstd", id="zstd"),
    pytest.param("bzip2", "bz2", id="bzip2"),
])
def test_bomb_in_detached_data_files(tmp_path, encoding, name):
    for k in range(2):
        (tmp_path / f"part{k}.bin").write_bytes(bomb(name))
    path = tmp_path / "bomb.jnrrd"
    path.write_bytes(lines([*core([64, 64], encoding=encoding),
                            ("data_files", ["part0.bin", "part1.bin"])]))
    _expect_bounded(path, np.zeros((64, 64), np.uint8))


@pytest.mark.parametrize("compression, codecs, name", [
    pytest.param("gzip", None, "gzip", id="shorthand-gzip"),
    pytest.param("gzip", None, "zlib", id="shorthand-gzip-zlib"),
    pytest.param("bzip2", None, "bz2", id="shorthand-bzip2"),
    pytest.param("zstd", None, "zstd", id="shorthand-zstd"),
    pytest.param("lz4", None, "lz4", id="shorthand-lz4"),
    pytest.param(None, [{"name": "bytes"}, {"name": "gzip", "configuration": {"level": 1}}],
                 "gzip", id="chain-gzip"),
    pytest.param(None, [{"name": "bytes"}, {"name": "zstd", "configuration": {"level": 1}}],
                 "zstd", id="chain-zstd"),
    pytest.param(None, [{"name": "bytes"}, {"name": "numcodecs.zlib"}], "zlib",
                 id="chain-numcodecs-zlib"),
    pytest.param(None, [{"name": "bytes"}, {"name": "numcodecs.bz2"}], "bz2",
                 id="chain-numcodecs-bz2"),
    pytest.param(None, [{"name": "bytes"}, {"name": "numcodecs.lz4"}], "numcodecs.lz4",
                 id="chain-numcodecs-lz4"),
    pytest.param(None, [{"name": "bytes"}, {"name": "lz4"}], "lz4", id="chain-lz4-frame"),
    pytest.param(None, [{"name": "bytes"}, {"name": "conditional", "configuration": {
        "codecs": [{"name": "zstd", "configuration": {"level": 1}}]}}], "conditional-zstd",
        id="chain-conditional-zstd"),
])
@pytest.mark.parametrize("storage", ["internal", "external"])
def test_bomb_in_a_tile(tmp_path, compression, codecs, name, storage):
    """A 64x64 uint8 tile (4 KiB) whose stored bytes expand to 1 GiB: DataError, bounded."""
    data = b"\x01" + bomb("zstd") if name == "conditional-zstd" else bomb(name)
    good = np.zeros((64, 64), np.uint8)
    path = tmp_path / "bomb.jnrrd"
    if storage == "internal":
        path.write_bytes(internal_file([64, 128], [64, 64], [data, data],
                                       compression=compression, codecs=codecs))
    else:
        (tmp_path / "t0.bin").write_bytes(data)
        (tmp_path / "t1.bin").write_bytes(data)
        fields = [*core([64, 128]), ("extensions", {"tile": TILE_URI}),
                  ("tile:enabled", True), ("tile:dimensions", [0, 1]), ("tile:sizes", [64, 64]),
                  ("tile:storage", "external"), ("tile:pattern", "t{y}.bin")]
        fields.append(("tile:compression", compression) if compression
                      else ("tile:codecs", codecs))
        path.write_bytes(lines(fields))
    _expect_bounded(path, None)
    del good


# -- 3. header caps ---------------------------------------------------------------------------

def test_header_line_cap_stops_an_endless_line():
    """A stream that never ends its second line: HeaderError at max_line_bytes, without
    reading (or holding) more than the cap."""
    class Endless(io.RawIOBase):
        def __init__(self) -> None:
            self.sent = 0
            self.head = b'{"jnrrd": "0004"}\n{"a:x": "'

        def readable(self) -> bool:
            return True

        def readinto(self, b) -> int:
            n = len(b)
            chunk = (self.head + b"a" * n)[:n]
            self.head = self.head[n:]
            b[:n] = chunk
            self.sent += n
            return n

    raw = Endless()
    _, exc, elapsed, peak = measured(lambda: jnrrd.read_header(io.BufferedReader(raw),
                                                               max_line_bytes=4 * MiB))
    assert isinstance(exc, jnrrd.HeaderError) and "max_line_bytes" in str(exc)
    assert raw.sent < 8 * MiB and peak < 24 * MiB and elapsed < TIME_BOUND


@pytest.mark.slow
def test_header_total_cap_stops_endless_lines():
    """Many short lines: HeaderError at max_header_bytes, the stream read no further."""
    body = b"".join(b'{"a:k%d": 0}\n' % k for k in range(200_000))
    f = io.BytesIO(b'{"jnrrd": "0004"}\n' + body + b"\n")
    _, exc, elapsed, _ = measured(lambda: jnrrd.read_header(f, max_header_bytes=256 << 10))
    assert isinstance(exc, jnrrd.HeaderError) and "max_header_bytes" in str(exc)
    assert f.tell() <= (256 << 10) + (64 << 10) and elapsed < TIME_BOUND


@pytest.mark.parametrize("line", [
    pytest.param(b'{"a:x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", id="deep-list"),
    pytest.param(b'{"a:x": ' + b'{"k": ' * 50_000 + b"0" + b"}" * 50_000 + b"}",
                 id="deep-object"),
    pytest.param(b'{"sizes": [' + b"9" * 100_000 + b"]}", id="huge-int-literal"),
])
def test_hostile_json_lines_are_header_errors(tmp_path, line):
    path = tmp_path / "h.jnrrd"
    path.write_bytes(b'{"jnrrd": "0004"}\n' + line + b"\n\n")
    _, exc, elapsed, _ = measured(lambda: jnrrd.read(path))
    assert isinstance(exc, jnrrd.HeaderError), exc
    assert elapsed < TIME_BOUND


# -- 4. every cap keyword: the default applies, lowering refuses, raising admits ---------------

DEFAULTS = {"max_bytes": 16 * GiB, "max_header_bytes": GiB, "max_line_bytes": 256 * MiB,
            "max_tiles": 10**7, "max_tile_bytes": GiB, "max_files": 10**5, "max_levels": 1024,
            "max_pad": 65536}


def test_documented_defaults():
    p = Policy.from_kwargs()
    assert {k: getattr(p, k) for k in DEFAULTS} == DEFAULTS


def _legit(tmp_path, kind: str) -> tuple[Any, int, type[jnrrd.JnrrdError]]:
    """(a legitimate file, the exact amount of the resource it needs, error when capped)."""
    x = np.arange(4 * 6 * 8, dtype="u2").reshape(4, 6, 8)
    path = tmp_path / f"{kind}.jnrrd"
    if kind == "max_bytes":
        jnrrd.write(path, x)
        return path, x.nbytes, jnrrd.UnsupportedError
    if kind == "max_header_bytes":
        jnrrd.write(path, x)
        raw = path.read_bytes()
        return path, raw.index(b"\n\n"), jnrrd.HeaderError
    if kind == "max_line_bytes":
        jnrrd.write(path, x, {"a:note": "n" * 5000})
        longest = max(len(s) for s in path.read_bytes().split(b"\n\n")[0].split(b"\n"))
        return path, longest, jnrrd.HeaderError
    if kind == "max_tiles":
        jnrrd.write(path, x, tile=(2, 3, 4))
        return path, 2 * 2 * 2, jnrrd.UnsupportedError
    if kind == "max_tile_bytes":
        jnrrd.write(path, x, tile=(2, 3, 4))
        return path, 2 * 3 * 4 * 2, jnrrd.UnsupportedError
    if kind == "max_files":
        for k in range(4):
            (tmp_path / f"d{k}.raw").write_bytes(x[..., 2 * k : 2 * k + 2].tobytes(order="F"))
        path.write_bytes(lines([*core([4, 6, 8], "uint16"), ("endian", "little"),
                                ("data_files", [f"d{k}.raw" for k in range(4)])]))
        return path, 4, jnrrd.UnsupportedError
    if kind == "max_levels":
        jnrrd.write(path, x, tile=(2, 3, 4), levels=3)
        return path, 3, jnrrd.UnsupportedError
    if kind == "max_pad":
        (tmp_path / "d.raw").write_bytes(x.tobytes(order="F"))
        path.write_bytes(lines([*core([4, 6, 8], "uint16"), ("endian", "little"),
                                ("data_file", "d.raw"), ("extensions", {"a": "urn:a"}),
                                ("a:list[9].v", 1)]))
        return path, 9, jnrrd.HeaderError
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", list(DEFAULTS))
def test_each_cap_keyword(tmp_path, kind):
    """Without the keyword the default applies (the file reads); a cap one below the file's
    need refuses it with the documented error naming the keyword; the exact need admits it."""
    path, need, error = _legit(tmp_path, kind)
    expected, _ = jnrrd.read(path)
    with pytest.raises(error, match=kind):
        jnrrd.read(path, **{kind: need - 1})
    data, _ = jnrrd.read(path, **{kind: need})
    np.testing.assert_array_equal(data, expected)
    with jnrrd.open(path, **{kind: need}) as vol:
        np.testing.assert_array_equal(vol[...], expected)


def _over_default(tmp_path, kind: str) -> Any:
    """A small file whose claim is over the default cap (cheap to refuse)."""
    tiled = [("extensions", {"tile": TILE_URI}), ("tile:enabled", True),
             ("tile:storage", "internal")]
    if kind == "max_bytes":
        fields = core([2**20, 2**14, 2**3], "uint16")  # 256 GiB raw
    elif kind == "max_tiles":
        fields = [*core([2**12, 2**12, 2**10]), *tiled, ("tile:dimensions", [0, 1, 2]),
                  ("tile:sizes", [2, 2, 2])]  # 2^31 tiles
    elif kind == "max_tile_bytes":
        fields = [*core([2**11, 2**11, 2**9]), *tiled, ("tile:dimensions", [0, 1, 2]),
                  ("tile:sizes", [2**11, 2**11, 2**9])]  # one 2 GiB tile
    elif kind == "max_files":
        fields = [*core([10**5 + 1]), ("data_file_pattern",
                                           {"format": "d%d.raw", "min": 0, "max": 10**5,
                                            "step": 1})]
    elif kind == "max_pad":
        fields = [*core([1]), ("extensions", {"a": "urn:a"}), ("a:list[70000].v", 1)]
    elif kind == "max_levels":  # 10^5 virtual levels in a 400 KB header (10^6 took 19 s)
        n = 10**5
        fields = [*core([4, 4]), ("extensions", {"tile": TILE_URI}), ("tile:enabled", True),
                  ("tile:storage", "external"), ("tile:dimensions", [0, 1]),
                  ("tile:sizes", [4, 4]), ("tile:pattern", "t{l}.bin"), ("tile:levels", n),
                  ("tile:level_scales", [1] + [2] * (n - 1)), ("tile:levels_stored", [0]),
                  ("tile:levels_virtual", list(range(1, n)))]
    else:
        raise AssertionError(kind)
    path = tmp_path / "over.jnrrd"
    path.write_bytes(lines(fields) + b"\0")
    return path


@pytest.mark.parametrize("kind", ["max_bytes", "max_tiles", "max_tile_bytes", "max_files",
                                  "max_pad", "max_levels"])
def test_claims_over_the_default_cap_are_refused(tmp_path, kind):
    """Without a keyword the default refuses the claim; raising the cap moves the read past
    the cap check (to the next problem of this hostile file, never to an allocation)."""
    path = _over_default(tmp_path, kind)
    _, exc, elapsed, peak = measured(lambda: jnrrd.read(path))
    assert isinstance(exc, (jnrrd.UnsupportedError, jnrrd.HeaderError)), exc
    assert kind in str(exc) and elapsed < TIME_BOUND and peak < SMALL_PEAK
    if kind in ("max_tiles", "max_tile_bytes", "max_files", "max_levels"):
        return  # raising these admits work proportional to the claim: the caller's choice
    big = {kind: DEFAULTS[kind] * 1000}
    _, exc, elapsed, peak = measured(lambda: jnrrd.read(path, **big))
    assert exc is None or kind not in str(exc), exc
    assert elapsed < TIME_BOUND and peak < SMALL_PEAK


@pytest.mark.slow
def test_many_data_files_resolve_in_bounded_time(tmp_path):
    """Regression: 10^5 data file names (the default max_files) used to take ~0.3 ms each to
    resolve (two full realpath walks per name): half a minute for a 200-byte header. The
    directory part is now resolved once per read."""
    n = 10**5
    path = tmp_path / "many.jnrrd"
    path.write_bytes(lines([*core([n]), ("data_file_pattern", {
        "format": "d%d.raw", "min": 0, "max": n - 1, "step": 1})]))
    t0 = time.perf_counter()
    with pytest.raises(jnrrd.DataError, match="d0.raw"):
        jnrrd.read(path)
    assert time.perf_counter() - t0 < 2 * TIME_BOUND


@pytest.mark.slow
@pytest.mark.parametrize("encoding", ["zstd", "gzip", "lz4", "bzip2"])
def test_the_most_compressible_data_is_not_mistaken_for_a_short_file(tmp_path, encoding):
    """The expansion bounds of the compressed-size pre-check hold for real data at each
    format's best ratio (128 MiB of zeros: zstd ~31000:1, bzip2 ~570000:1)."""
    z = np.zeros((512, 512, 256), np.uint16)
    path = tmp_path / "zeros.jnrrd"
    jnrrd.write(path, z, encoding=encoding)
    data, _ = jnrrd.read(path)
    assert data.shape == z.shape and not data.any()
