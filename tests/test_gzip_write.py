"""gzip data sections deflated on every core into ONE gzip member (jnrrd.codecs.gzip_stream):
the stream is one member that zlib, pynrrd, SimpleITK and jnrrd read bit-exact, whole arrays
and streamed slabs alike; ``compression_level`` is checked per encoding; a big convert streams
with bounded memory."""

from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc
import zlib
from concurrent.futures import Future
from contextlib import nullcontext

import nrrd
import numpy as np
import pytest
import SimpleITK as sitk

import jnrrd
from jnrrd.codecs import gzip_fast, gzip_stream
from jnrrd.errors import UnsupportedError
from jnrrd.writing import stream


def _ct(shape: tuple[int, ...], seed: int = 3) -> np.ndarray:
    """Small CT-like int16 data: air, a body with noise, a bone ring (C order, z slowest)."""
    rng = np.random.default_rng(seed)
    z, y, x = np.indices(shape, dtype=np.float32)
    r = ((x - shape[2] / 2) / (0.4 * shape[2])) ** 2 + ((y - shape[1] / 2) / (0.3 * shape[1])) ** 2
    img = np.where(r < 1, 40.0, -1000.0) + np.where((r > 0.8) & (r < 0.9), 900.0, 0.0)
    img += rng.normal(0, 12, shape) * (r < 1) + 0.01 * z
    return img.astype(np.int16)


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 64 KiB, a tail of at most 256 KiB, three threads: small data takes every
    path (several zlib blocks with dictionaries, the libdeflate tail, uneven ends)."""
    monkeypatch.setattr(gzip_stream, "BLOCK_BYTES", 64 << 10)
    monkeypatch.setattr(gzip_stream, "TAIL_BYTES", 256 << 10)
    monkeypatch.setattr(stream, "thread_count", lambda threads=None: 3)


def _data_section(path: str) -> bytes:
    with open(path, "rb") as f:
        blob = f.read()
    return blob[blob.index(b"\n\n") + 2:]


def _one_member(gz: bytes, raw: bytes) -> None:
    """``gz`` is exactly one gzip member holding ``raw``: the decoder reaches its end at the
    last byte, with nothing unused; the trailer's size is the data's."""
    d = zlib.decompressobj(wbits=31)
    out = d.decompress(gz) + d.flush()
    assert d.eof and d.unused_data == b"" and d.unconsumed_tail == b""
    assert out == raw
    assert gz[:3] == b"\x1f\x8b\x08" and int.from_bytes(gz[-4:], "little") == len(raw) % 2**32


@pytest.mark.parametrize(("libdeflate", "zlib_ng"), [(True, True), (True, False),
                                                     (False, True), (False, False)],
                         ids=["zlib-ng+libdeflate", "zlib+libdeflate", "zlib-ng", "zlib"])
def test_whole_array_is_one_member_every_reader_reads(tmp_path, small_blocks, monkeypatch,
                                                      libdeflate, zlib_ng) -> None:
    monkeypatch.setattr(gzip_fast, "available", libdeflate)
    monkeypatch.setattr(gzip_stream, "zlib_ng_available", zlib_ng)
    assert gzip_stream.block_engine(1) == (("zlib-ng", 2) if zlib_ng else ("zlib", 1))
    a = _ct((20, 64, 96))  # 240 KiB: blocks, then a tail
    path = str(tmp_path / "ct.nrrd")
    jnrrd.write(path, a, encoding="gzip", index_order="C")
    _one_member(_data_section(path), a.tobytes())
    got, _ = nrrd.read(path, index_order="C")
    assert got.dtype == a.dtype and np.array_equal(got, a)
    img = sitk.ReadImage(path)
    assert np.array_equal(sitk.GetArrayFromImage(img), a)
    data, _ = jnrrd.read(path, index_order="C")
    assert np.array_equal(data, a)


@pytest.mark.parametrize("source", ["raw", "gzip"])
def test_convert_is_one_member_every_reader_reads(tmp_path, small_blocks, monkeypatch,
                                                  source) -> None:
    """``convert`` of a NRRD on disk (raw, or gzip as SimpleITK and 3D Slicer write it)
    streams slabs (smaller than the blocks, cut across them) with the tail read first; the
    result is one member that zlib, pynrrd, SimpleITK and jnrrd read bit-exact."""
    monkeypatch.setattr(stream, "_SLAB_BYTES", 100 << 10)
    a = _ct((40, 64, 64), seed=11)  # 320 KiB: several blocks, then the tail
    src = str(tmp_path / f"src-{source}.nrrd")
    sitk.WriteImage(sitk.GetImageFromArray(a), src, source == "gzip")
    out = str(tmp_path / "out.nrrd")
    jnrrd.convert(src, out, encoding="gzip")
    _one_member(_data_section(out), a.tobytes())
    assert np.array_equal(nrrd.read(out, index_order="C")[0], a)
    assert np.array_equal(sitk.GetArrayFromImage(sitk.ReadImage(out)), a)
    assert np.array_equal(jnrrd.read(out, index_order="C")[0], a)


def test_detached_nhdr_data_file_is_one_member(tmp_path, small_blocks) -> None:
    a = _ct((12, 50, 70), seed=5)
    path = str(tmp_path / "ct.nhdr")
    jnrrd.write(path, a, encoding="gzip", index_order="C", compression_level=6)
    head = (tmp_path / "ct.nhdr").read_text()
    name = next(line.split(": ", 1)[1] for line in head.splitlines()
                if line.startswith("data file: "))
    _one_member((tmp_path / name).read_bytes(), a.tobytes())
    assert np.array_equal(sitk.GetArrayFromImage(sitk.ReadImage(path)), a)
    assert np.array_equal(nrrd.read(path, index_order="C")[0], a)


def test_streamed_slabs_are_one_member(tmp_path, small_blocks, monkeypatch) -> None:
    # big-endian storage: the array's bytes are not the file's, so slabs are converted and
    # streamed (slabs of 100 KiB that do not line up with the 64 KiB blocks)
    monkeypatch.setattr(stream, "_SLAB_BYTES", 100 << 10)
    a = _ct((30, 40, 64), seed=7)
    path = str(tmp_path / "be.nrrd")
    jnrrd.write(path, a, {"endian": "big"}, encoding="gzip", index_order="C")
    _one_member(_data_section(path), a.astype(">i2").tobytes())
    assert np.array_equal(nrrd.read(path, index_order="C")[0], a)
    assert np.array_equal(sitk.GetArrayFromImage(sitk.ReadImage(path)), a)
    # JNRRD's untiled gzip takes the same path
    jpath = str(tmp_path / "be.jnrrd")
    jnrrd.write(jpath, a, {"endian": "big"}, encoding="gzip", index_order="C")
    assert np.array_equal(jnrrd.read(jpath, index_order="C")[0], a)


def test_levels_change_the_output(tmp_path) -> None:
    a = _ct((8, 64, 64))
    sizes = {}
    for level in (0, 1, 9):
        path = str(tmp_path / f"l{level}.nrrd")
        jnrrd.write(path, a, encoding="gzip", compression_level=level, index_order="C")
        gz = _data_section(path)
        _one_member(gz, a.tobytes())
        sizes[level] = len(gz)
    assert sizes[0] > a.nbytes > sizes[1] >= sizes[9]


def _now(fn):
    """A ``submit`` that runs ``fn`` at once (jobs run in the order they are submitted)."""
    done: Future = Future()
    done.set_result(fn())
    return done


def test_pieces_and_buffer_agree_with_zlib_for_any_cut() -> None:
    raw = _ct((6, 33, 47)).tobytes() + bytes(70000)
    out = b"".join(gzip_stream.gzip_buffer(raw, 1, threads=2, submit=_now))
    _one_member(out, raw)
    cuts = [raw[i:i + 9999] for i in range(0, len(raw), 9999)]
    for tail in (0, 5, 30000):
        body = raw[:len(raw) - tail]
        pieces = [body[i:i + 9999] for i in range(0, len(body), 9999)]
        streamed = b"".join(gzip_stream.gzip_pieces(iter(pieces), len(raw), 1, threads=2,
                                                    submit=_now, tail=raw[len(body):]))
        _one_member(streamed, raw)
    with pytest.raises(ValueError, match="shorter"):
        b"".join(gzip_stream.gzip_pieces(iter(cuts[:-1]), len(raw), 1, threads=2,
                                         submit=_now))
    with pytest.raises(ValueError, match="longer"):
        b"".join(gzip_stream.gzip_pieces(iter(cuts), len(raw) - 1, 1, threads=2,
                                         submit=_now))


def test_the_tail_job_runs_first(tmp_path, small_blocks, monkeypatch) -> None:
    """A streamed write reads the libdeflate tail first and submits its job before the
    blocks', so its thread deflates it beside them (not after them)."""
    monkeypatch.setattr(stream, "_SLAB_BYTES", 100 << 10)
    ran: list[bool] = []
    run = gzip_stream._run

    def spy(job, level):
        ran.append(job.tail)
        return run(job, level)

    monkeypatch.setattr(gzip_stream, "_run", spy)
    # jobs run as they are submitted
    monkeypatch.setattr(stream, "private_pool", lambda workers, name: nullcontext(_now))
    a = _ct((40, 64, 64), seed=2)
    path = str(tmp_path / "be.nrrd")
    jnrrd.write(path, a, {"endian": "big"}, encoding="gzip", index_order="C")
    assert ran[0] is True and ran.count(True) == 1 and len(ran) > 3
    _one_member(_data_section(path), a.astype(">i2").tobytes())


def test_crc_combine_and_size_modulo_2_32() -> None:
    rng = np.random.default_rng(1)
    for n1, n2 in ((0, 0), (1, 0), (0, 5), (1000, 3), (70000, 123457)):
        a, b = rng.bytes(n1), rng.bytes(n2)
        assert gzip_stream.crc32_combine(zlib.crc32(a), zlib.crc32(b), n2) == zlib.crc32(a + b)
    tail = list(gzip_stream._member([], 2**32 + 5))[-1]
    assert int.from_bytes(tail[4:], "little") == 5


@pytest.mark.parametrize(("encoding", "level", "suffix"), [
    ("gzip", 10, ".nrrd"), ("gzip", -1, ".jnrrd"), ("bzip2", 0, ".nrrd"), ("zstd", 23, ".jnrrd"),
    ("lz4", 17, ".jnrrd"), ("raw", 3, ".nrrd")])
def test_level_out_of_range_names_the_field(tmp_path, encoding, level, suffix) -> None:
    path = tmp_path / f"x{suffix}"
    with pytest.raises(UnsupportedError, match=r"compression_level: .*(from|not compressed)"):
        jnrrd.write(path, np.zeros((4, 4), np.int16), encoding=encoding,
                    compression_level=level)
    assert not path.exists()


@pytest.mark.parametrize("level", [2.5, True, "3"])
def test_level_of_another_type_is_a_type_error(tmp_path, level) -> None:
    with pytest.raises(TypeError, match="compression_level must be an integer"):
        jnrrd.write(tmp_path / "x.nrrd", np.zeros((4, 4), np.int16), encoding="gzip",
                    compression_level=level)


def test_tile_compression_level_is_checked_too(tmp_path) -> None:
    with pytest.raises(UnsupportedError, match="compression_level: zstd takes"):
        jnrrd.write(tmp_path / "t.jnrrd", np.zeros((8, 8), np.int16), compression="zstd",
                    compression_level=40)


def test_cli_compression_level(tmp_path) -> None:
    a = _ct((4, 32, 32))
    src = str(tmp_path / "in.nrrd")
    nrrd.write(src, a, index_order="C")
    run = [sys.executable, "-m", "jnrrd", "convert", "-q", src]
    out = str(tmp_path / "out.nrrd")
    done = subprocess.run([*run, out, "--encoding", "gzip", "--compression-level", "9"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    _one_member(_data_section(out), a.tobytes())
    bad = subprocess.run([*run, str(tmp_path / "bad.nrrd"), "--encoding", "gzip",
                          "--compression-level", "12"], capture_output=True, text=True)
    assert bad.returncode == 2 and "compression_level: gzip takes an integer from 0 to 9" \
        in bad.stderr
    assert not os.path.exists(tmp_path / "bad.nrrd")


def test_big_convert_streams_with_bounded_memory(tmp_path, monkeypatch) -> None:
    """A raw NRRD of 24 MiB converted to gzip with slabs of 1 MiB: Python's peak allocation
    stays a few slabs and blocks, far below the volume (a whole-volume copy would be 24 MiB,
    its compressed copy about half of that)."""
    monkeypatch.setattr(stream, "_SLAB_BYTES", 1 << 20)
    monkeypatch.setattr(gzip_stream, "BLOCK_BYTES", 256 << 10)
    monkeypatch.setattr(gzip_stream, "TAIL_BYTES", 1 << 20)
    shape = (96, 256, 512)  # int16, C order: 24 MiB
    src = str(tmp_path / "big.nrrd")
    with open(src, "wb") as f:
        f.write(b"NRRD0004\ntype: int16\ndimension: 3\nsizes: 512 256 96\nendian: little\n"
                b"encoding: raw\n\n")
        for k in range(shape[0]):
            f.write(_ct((1, *shape[1:]), seed=k).tobytes())
    out = str(tmp_path / "big-gz.nrrd")
    tracemalloc.start()
    try:
        jnrrd.convert(src, out, encoding="gzip")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10 << 20, f"peak {peak / 2**20:.1f} MiB"
    _one_member(_data_section(out), _data_section(src))
