"""Tiny inputs that must not cost seconds or gigabytes (reader side).

Each test bounds its read by an alarm (time) and/or a tracemalloc peak (memory), both set so
the quadratic or eager version fails fast instead of running for minutes.
"""

from __future__ import annotations

import contextlib
import io
import json
import signal
import time
import tracemalloc
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import jnrrd
from jnrrd.codecs import compress, compress_stream

MiB = 1 << 20


class Overran(BaseException):
    """Raised by the alarm: the call ran past its time bound (not a JnrrdError)."""


@contextlib.contextmanager
def alarm(seconds: float) -> Iterator[None]:
    def on_alarm(signum: int, frame: Any) -> None:
        raise Overran(f"ran longer than {seconds} s")

    if not hasattr(signal, "setitimer"):  # Windows: no alarm; the bound is checked after
        start = time.monotonic()
        yield
        if time.monotonic() - start > seconds:
            raise Overran(f"ran longer than {seconds} s")
        return
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def peak_of(fn: Callable[[], Any]) -> tuple[Any, int]:
    """``(result or JnrrdError, tracemalloc peak)`` of ``fn()``."""
    from fuzz_strategies import quiesce_pool

    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                result: Any = fn()
            except jnrrd.JnrrdError as exc:
                result = exc
    finally:
        quiesce_pool()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return result, peak


def open_all(path: Any, **kw: Any) -> np.ndarray:
    with jnrrd.open(path, **kw) as vol:
        return vol[...]


def header_lines(fields: list[tuple[str, Any]]) -> bytes:
    items = [("jnrrd", "0004"), *fields]
    return b"".join(json.dumps({k: v}).encode() + b"\n" for k, v in items) + b"\n"


# -- member floods ----------------------------------------------------------------------------

PAYLOAD = (np.arange(3000) % 251).astype(np.uint8).tobytes()


def flood(name: str, members: int) -> bytes:
    """``members`` empty members/streams/frames, then one holding PAYLOAD."""
    return compress.compress(name, b"") * members + compress.compress(name, PAYLOAD)


@pytest.fixture
def fed(monkeypatch):
    """Counts the compressed bytes handed to member decoders."""
    counter = {"bytes": 0}
    real = compress._factory

    def factory(name, zlib_stream):
        make = real(name, zlib_stream)

        def counted():
            d = make()
            feed = d.feed

            def feed_counted(data, max_length):
                counter["bytes"] += len(data)
                return feed(data, max_length)

            d.feed = feed_counted
            return d
        return counted

    monkeypatch.setattr(compress, "_factory", factory)
    monkeypatch.setattr(compress_stream, "_factory", factory)
    return counter


@pytest.mark.parametrize("name", ["gzip", "bz2", "lz4"])
def test_member_flood_is_decoded_in_linear_time(name, fed):
    """Regression: every member was fed all the input left (and copied it back as
    ``unused_data``): 80k empty gzip members (1.6 MB) took 4.6 s, 160k 17 s."""
    members = 5000
    blob = flood(name, members)
    bound = 3 * len(blob) + 64 * members  # linear: quadratic feeding is ~members·len/2
    assert compress.decompress(name, blob, len(PAYLOAD)) == PAYLOAD
    assert fed["bytes"] <= bound, (fed["bytes"], len(blob))
    fed["bytes"] = 0
    out = bytearray(len(PAYLOAD))
    compress_stream.decompress_stream_into(name, io.BytesIO(blob), memoryview(out),
                                           chunk_size=1 << 16)
    assert bytes(out) == PAYLOAD
    assert fed["bytes"] <= bound, (fed["bytes"], len(blob))


def test_member_flood_in_an_attached_file_reads_in_bounded_time(tmp_path):
    """The end-to-end example: 160k empty gzip members before the data of a 3000-byte
    volume (a 3.2 MB file) read in about a second (17 s before)."""
    path = tmp_path / "flood.jnrrd"
    path.write_bytes(header_lines([("type", "uint8"), ("dimension", 1), ("sizes", [3000]),
                                   ("encoding", "gzip")]) + flood("gzip", 160_000))
    with alarm(10.0):
        data, _ = jnrrd.read(path)
    assert data.tobytes() == PAYLOAD


# -- short compressed streams claiming gigabytes -----------------------------------------------

NOISE = np.random.default_rng(19).integers(0, 256, 300_000, dtype=np.uint8).tobytes()


@pytest.mark.parametrize("encoding, sizes", [
    pytest.param("zstd", [2**20, 2**10, 2**3], id="zstd-8GiB"),
    pytest.param("gzip", [2**20, 300], id="gzip-300MiB"),
    pytest.param("lz4", [2**20, 85], id="lz4-85MiB"),
])
def test_short_stream_claiming_gigabytes_allocates_only_what_it_produces(tmp_path, encoding,
                                                                          sizes):
    """Regression (a known issue): a 300 KB stream whose header claims 8 GiB (zstd; within
    each format's largest expansion, so not refused up front) allocated the whole claim before
    finding the stream short. The output now grows with the bytes the stream produces."""
    name = {"zstd": "zstd", "gzip": "gzip", "lz4": "lz4"}[encoding]
    path = tmp_path / "claim.jnrrd"
    path.write_bytes(header_lines([("type", "uint8"), ("dimension", len(sizes)),
                                   ("sizes", sizes), ("encoding", encoding)])
                     + compress.compress(name, NOISE))
    for fn in (lambda: jnrrd.read(path), lambda: open_all(path)):
        with alarm(10.0):
            result, peak = peak_of(fn)
        assert isinstance(result, jnrrd.DataError) and "short" in str(result), result
        assert peak < 16 * MiB, peak


@pytest.fixture
def growth(monkeypatch):
    """Small eager limit; records whether the growing output was used."""
    from jnrrd.engine import untiled as datasection

    monkeypatch.setattr(datasection, "_EAGER_BYTES", 1 << 16)
    grown: list[int] = []
    real = datasection._grow
    monkeypatch.setattr(datasection, "_grow", lambda *a: grown.append(1) or real(*a))
    return grown


def _constant_volume() -> np.ndarray:
    a = np.full((300, 200, 40), 7, dtype=np.uint16)
    a[::7, ::5, ::3] = 9
    return a


@pytest.mark.parametrize("stream", ["gzip", "zstd-without-content-size"])
def test_highly_compressible_large_volume_reads_through_the_growing_output(tmp_path, growth,
                                                                          stream):
    """A claim beyond the plausible ratio that is true (a nearly constant volume) reads
    exactly through the growing output."""
    import zstandard

    a = _constant_volume()
    path = tmp_path / "v.jnrrd"
    if stream == "gzip":
        jnrrd.write(path, a, encoding="gzip")
    else:
        c = zstandard.ZstdCompressor().compressobj()
        body = c.compress(a.tobytes(order="F")) + c.flush()
        path.write_bytes(header_lines([("type", "uint16"), ("dimension", 3),
                                       ("sizes", list(a.shape)), ("endian", "little"),
                                       ("encoding", "zstd")]) + body)
    np.testing.assert_array_equal(jnrrd.read(path)[0], a)
    assert growth


def test_highly_compressible_zstd_written_by_jnrrd_keeps_the_eager_path(tmp_path, growth):
    """Frames with content sizes whose block headers can produce them are allocated at once
    (and decoded frame-parallel): no growing output, no extra copy."""
    a = _constant_volume()
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, a, encoding="zstd")
    np.testing.assert_array_equal(jnrrd.read(path)[0], a)
    assert not growth


# -- virtual levels at extreme scales ----------------------------------------------------------

def rewrite_header(path: Any, **changes: Any) -> None:
    """Set (or, with None, remove) header keys of a written file, keeping its data."""
    raw = path.read_bytes()
    head, sep, tail = raw.partition(b"\n\n")
    items = [next(iter(json.loads(line).items())) for line in head.split(b"\n")]
    keys = [k for k, _ in items]
    items = [(k, changes.get(k, v)) for k, v in items if changes.get(k, v) is not None]
    items += [(k, v) for k, v in changes.items() if k not in keys and v is not None]
    body = b"\n".join(json.dumps({k: v}).encode() for k, v in items)
    if b"tile:offset_table" in body:
        raise AssertionError("internal tables would move; use external storage")
    path.write_bytes(body + sep + tail)


def virtual_level(tmp_path: Any, method: str, scale: Any, data: np.ndarray) -> Any:
    """A 2-level external dataset whose level 1 (``scale``) is virtual."""
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, data, tile=data.shape, storage="external")
    rewrite_header(path, **{"tile:levels": 2, "tile:level_scales": [1, scale],
                            "tile:levels_stored": [0], "tile:levels_virtual": [1],
                            "tile:downsample_method": method})
    return path


SQUARE = np.array([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, 16]], np.float64)


@pytest.mark.parametrize("method, scale", [
    pytest.param("gaussian", 2**30, id="gaussian-2^30"),  # MemoryError before
    pytest.param("gaussian", 2**26, id="gaussian-2^26"),  # 20 s and 4 GB before
    pytest.param("lanczos", 2**16, id="lanczos-2^16"),  # 14 s before
])
def test_virtual_level_at_extreme_scale_costs_what_the_axis_costs(tmp_path, method, scale):
    """Regression: a 4×4 volume's virtual level at a huge scale built (and applied) the whole
    kernel: the work is now bounded by the axis length (taps past an edge are folded)."""
    path = virtual_level(tmp_path, method, scale, SQUARE)
    with alarm(20.0):
        (level, _), peak = peak_of(lambda: jnrrd.read(path, level=1))
    assert peak < 64 * MiB, peak  # the fuzzers' bound (lanczos weights: ~40 MB at 2^16)
    assert level.shape == (1, 1) and SQUARE.min() <= level[0, 0] <= SQUARE.max()
    # the same kernel shape relative to s as at scale 2^12, which test_pyramid checks
    # against an independent reference
    from jnrrd.pyramid import downsample

    np.testing.assert_allclose(level, downsample(SQUARE, (2**12, 2**12), method), rtol=1e-3)


@pytest.mark.slow
def test_virtual_gaussian_wider_than_a_long_axis_is_not_quadratic(tmp_path):
    """A 100 KB volume (10^5 voxels) at scale 2^20: the folded kernel is a dense 10^5 × 10^5
    filter, applied by FFT (about 40 s directly)."""
    line = (np.arange(10**5) % 251).astype(np.uint8)
    path = virtual_level(tmp_path, "gaussian", [2**20], line)
    with alarm(20.0):
        level, _ = jnrrd.read(path, level=1)
    assert level.shape == (1,) and line.min() <= level[0] <= line.max()


def test_lanczos_beyond_the_tap_limit_is_refused(tmp_path):
    path = virtual_level(tmp_path, "lanczos", 2**26, SQUARE)
    with alarm(5.0):
        result, peak = peak_of(lambda: jnrrd.read(path, level=1))
    assert isinstance(result, jnrrd.UnsupportedError) and "taps" in str(result), result
    assert peak < 16 * MiB, peak


# -- huge tile and level counts ------------------------------------------------------------------

TILE_EXT = {"tile": "https://jnrrd.org/extensions/tile/v1.0.0"}


def many_tiles_header(n: int) -> bytes:
    """About 290 bytes: ``n`` one-voxel external tiles, none of which exists."""
    return header_lines([("type", "uint8"), ("dimension", 1), ("sizes", [n]),
                         ("encoding", "raw"), ("extensions", TILE_EXT), ("tile:enabled", True),
                         ("tile:dimensions", [0]), ("tile:sizes", [1]),
                         ("tile:storage", "external"), ("tile:pattern", "t/{x}.bin")])


@pytest.mark.slow
def test_many_missing_external_tiles_fail_at_the_first_one(tmp_path):
    """Regression: a 288-byte header declaring 10^7 missing tiles listed every tile task
    before reading any (38 s, then MemoryError at 2.9 GB). Tasks are now listed in bounded
    batches: the first missing tile ends the read."""
    path = tmp_path / "many.jnrrd"
    path.write_bytes(many_tiles_header(10**6))
    for fn in (lambda: jnrrd.read(path), lambda: open_all(path)):
        with alarm(10.0):
            result, peak = peak_of(fn)
        assert isinstance(result, jnrrd.DataError) and "missing" in str(result), result
        assert peak < 64 * MiB, peak


@pytest.mark.parametrize("pattern", ["tiles/{l}/{y}_{x}.bin", "t_{l}_{i}", "{l}/{x}/{y}.t"])
def test_stored_bytes_of_many_external_tiles_lists_the_files_present(tmp_path, pattern):
    """Over max_files tiles, a level's stored bytes come from listing the files present and
    matching them back to tiles: the same sum as stat-ing every tile's name."""
    a = (np.arange(24 * 18) % 251).astype(np.uint16).reshape(24, 18)
    a[:8, :6] = 0
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, a, tile=(4, 3), storage="external", pattern=pattern, levels=2,
                sparse=True, compression="gzip")
    base = jnrrd.read_header(path).get("tile:base_dir", ".")
    (tmp_path / base / "unrelated.bin").write_bytes(b"x" * 100)  # matches no tile
    with jnrrd.open(path) as vol:
        expected = [lv.stored_bytes for lv in vol.levels]
    assert expected[0] > 0
    with jnrrd.open(path, max_files=8) as vol:  # both levels (36, 9 tiles) over it: listing
        assert [lv.stored_bytes for lv in vol.levels] == expected


def test_info_json_of_many_missing_external_tiles_is_fast(tmp_path, capsys):
    """Regression: ``info --json`` on a 290-byte header declaring 10^7 missing tiles stat-ed
    every tile name (246 s). The files present are listed instead."""
    from jnrrd.cli import main

    path = tmp_path / "many.jnrrd"
    path.write_bytes(many_tiles_header(10**6))
    with alarm(10.0):
        assert main(["info", "--json", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["levels"][0]["stored_bytes"] == 0
