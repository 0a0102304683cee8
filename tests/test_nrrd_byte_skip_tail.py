"""Classic NRRD ``byte skip: -1`` with gzip/bzip2 data: the data is the end of the decoded
stream (as teem and ITK read it), decoded once with bounded memory; and gzip NRRD output
from ``jnrrd convert --encoding gzip``."""

from __future__ import annotations

import bz2
import gzip
import io
import tracemalloc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import jnrrd
from jnrrd.codecs.compress_tail import decompress_tail_into, rotate_left
from jnrrd.errors import DataError, HeaderError, UnsupportedError
from jnrrd.nrrd.fields import NRRD_URI  # noqa: F401  (the bridge is importable)

A43 = np.arange(12, dtype=np.uint16).reshape(4, 3, order="F") * 257
RAW = A43.tobytes(order="F")  # little-endian on the test machines' byte order
if np.little_endian is False:  # pragma: no cover - big-endian hosts
    RAW = A43.astype("<u2").tobytes(order="F")
BASE = ["type: uint16", "dimension: 2", "sizes: 4 3", "endian: little"]
PACK = {"gzip": gzip.compress, "bzip2": bz2.compress}


def _nrrd(tmp_path, encoding, payload, extra=(), name="x.nrrd"):
    p = tmp_path / name
    head = "\n".join(["NRRD0005", *BASE, f"encoding: {encoding}", "byte skip: -1", *extra])
    p.write_bytes(head.encode() + b"\n\n" + payload)
    return p


@pytest.mark.parametrize("encoding", ["gzip", "bzip2"])
@pytest.mark.parametrize("prefix", [b"", b"junk before the data\n", bytes(range(256)) * 50])
def test_byte_skip_minus_one_compressed_reads_the_stream_end(tmp_path, encoding, prefix):
    """Regression: this was a HeaderError ('-1 only with encoding raw')."""
    p = _nrrd(tmp_path, encoding, PACK[encoding](prefix + RAW))
    data, header = jnrrd.read(p)
    np.testing.assert_array_equal(data, A43)
    assert header["byte_skip"] == -1
    with jnrrd.open(p) as vol:
        np.testing.assert_array_equal(vol[1:3, ::2], A43[1:3, ::2])


@pytest.mark.parametrize("encoding", ["gzip", "bzip2"])
def test_byte_skip_minus_one_across_concatenated_members(tmp_path, encoding):
    pack = PACK[encoding]
    payload = pack(b"x" * 1000 + RAW[:5]) + pack(RAW[5:17]) + pack(RAW[17:])
    np.testing.assert_array_equal(jnrrd.read(_nrrd(tmp_path, encoding, payload))[0], A43)


def test_byte_skip_minus_one_detached_with_line_skip(tmp_path):
    """Lines are skipped in the file, then the tail of the decoded stream is the data."""
    (tmp_path / "d.raw.gz").write_bytes(b"text line 1\nline 2\n" + gzip.compress(b"?" * 99 + RAW))
    p = tmp_path / "x.nhdr"
    p.write_text("\n".join(["NRRD0004", *BASE, "encoding: gzip", "line skip: 2",
                            "byte skip: -1", "data file: d.raw.gz"]) + "\n")
    np.testing.assert_array_equal(jnrrd.read(p)[0], A43)


def test_byte_skip_minus_one_as_pynrrd_reads_it(tmp_path):
    nrrd = pytest.importorskip("nrrd")
    p = _nrrd(tmp_path, "gzip", gzip.compress(b"\x00" * 33 + RAW))
    theirs, _ = nrrd.read(str(p))
    np.testing.assert_array_equal(jnrrd.read(p)[0], theirs)


@pytest.mark.parametrize("encoding", ["gzip", "bzip2"])
def test_byte_skip_minus_one_short_stream_is_a_data_error(tmp_path, encoding):
    p = _nrrd(tmp_path, encoding, PACK[encoding](RAW[:-1]))
    with pytest.raises(DataError, match="short.*needs at least 24"):
        jnrrd.read(p)


def test_byte_skip_minus_one_truncated_stream_is_a_data_error(tmp_path):
    p = _nrrd(tmp_path, "gzip", gzip.compress(b"a" * 5000 + RAW)[:-12])
    with pytest.raises(DataError, match="truncated|corrupt"):
        jnrrd.read(p)


def test_byte_skip_minus_one_decoded_size_is_capped(tmp_path):
    p = _nrrd(tmp_path, "gzip", gzip.compress(bytes(1 << 20) + RAW))
    with pytest.raises(UnsupportedError, match="max_bytes"):
        jnrrd.read(p, max_bytes=1 << 16)
    np.testing.assert_array_equal(jnrrd.read(p, max_bytes=2 << 20)[0], A43)


@pytest.mark.parametrize("encoding", ["hex", "ascii"])
def test_byte_skip_minus_one_text_encodings_still_refused(tmp_path, encoding):
    with pytest.raises(HeaderError, match="byte_skip"):
        jnrrd.read(_nrrd(tmp_path, encoding, b"00"))


def test_jnrrd_files_keep_the_raw_only_rule(tmp_path):
    p = tmp_path / "x.jnrrd"
    p.write_bytes(b'{"jnrrd": "0004"}\n{"type": "uint8"}\n{"dimension": 1}\n{"sizes": [3]}\n'
                  b'{"encoding": "gzip"}\n{"byte_skip": -1}\n\n' + gzip.compress(b"abc"))
    with pytest.raises(HeaderError, match="byte_skip"):
        jnrrd.read(p)


def test_tail_decoding_memory_is_bounded_by_the_output():
    """Decoding 44 MiB to keep the last 4 MiB allocates a few 1 MiB chunks besides the
    (preallocated) output, not the decoded stream (tracemalloc sees NumPy's allocations)."""
    rng = np.random.default_rng(5)
    tail = rng.integers(0, 255, 4 << 20, dtype=np.uint8).tobytes()
    payload = gzip.compress(bytes(40 << 20) + tail, compresslevel=1)
    out = bytearray(len(tail))
    tracemalloc.start()
    try:
        decompress_tail_into("gzip", io.BytesIO(payload), memoryview(out), max_total=1 << 30)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert bytes(out) == tail
    assert peak < 8 << 20, peak


@given(n=st.integers(0, 300), s=st.integers(0, 600), scratch=st.integers(1, 40))
def test_rotate_left_in_place_equals_roll(n, s, scratch):
    a = np.arange(n, dtype=np.int64) * 7 % 251
    want = np.roll(a, -s) if n else a.copy()
    rotate_left(a, s, scratch=scratch)
    np.testing.assert_array_equal(a, want)


@given(prefix=st.integers(0, 3000), size=st.integers(0, 700), chunk=st.integers(1, 512),
       members=st.integers(1, 3))
def test_tail_of_random_streams(prefix, size, chunk, members):
    rng = np.random.default_rng(prefix * 1000 + size)
    stream = rng.integers(0, 255, prefix + size, dtype=np.uint8).tobytes()
    cuts = sorted(rng.integers(0, len(stream) + 1, members - 1).tolist())
    parts = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    payload = b"".join(gzip.compress(p) for p in parts)
    out = bytearray(size)
    decompress_tail_into("gzip", io.BytesIO(payload), memoryview(out), max_total=1 << 20,
                         chunk_size=chunk)
    assert bytes(out) == stream[len(stream) - size:]


# -- gzip-encoded NRRD output ---------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".nrrd", ".nhdr"])
def test_write_gzip_nrrd(tmp_path, suffix):
    data = np.arange(4000, dtype=np.int16).reshape(10, 20, 20) % 7
    out = tmp_path / f"g{suffix}"
    jnrrd.write(out, data, encoding="gzip", compression_level=9)
    assert "encoding: gzip" in out.read_bytes()[:400].decode("latin-1")
    back, header = jnrrd.read(out)
    np.testing.assert_array_equal(back, data)
    assert header["encoding"] == "gzip"


def test_cli_convert_encoding_gzip_writes_gzip_nrrd(tmp_path):
    from jnrrd.cli import main

    data = np.zeros((32, 32, 32), np.uint16)
    data[8:24, 8:24, 8:24] = 1000
    jnrrd.write(tmp_path / "in.jnrrd", data, {"space_origin": [1.0, 2.0, 3.0],
                                              "space_directions": np.eye(3).tolist()})
    assert main(["convert", str(tmp_path / "in.jnrrd"), str(tmp_path / "o.nrrd"),
                 "--encoding", "gzip", "-q"]) == 0
    raw_size = data.nbytes
    assert (tmp_path / "o.nrrd").stat().st_size < raw_size // 20
    back, header = jnrrd.read(tmp_path / "o.nrrd")
    np.testing.assert_array_equal(back, data)
    assert header["encoding"] == "gzip" and header["space_origin"] == [1.0, 2.0, 3.0]
    nrrd = pytest.importorskip("nrrd")
    theirs, their_header = nrrd.read(str(tmp_path / "o.nrrd"))
    np.testing.assert_array_equal(theirs, data)
    assert their_header["encoding"] == "gzip"


def test_cli_convert_encoding_with_tiles_is_the_tile_compression(tmp_path):
    from jnrrd.cli import main

    data = np.arange(60, dtype=np.uint8).reshape(3, 4, 5)
    jnrrd.write(tmp_path / "in.jnrrd", data)
    for extra in ([], ["--compression", "gz"]):
        assert main(["convert", str(tmp_path / "in.jnrrd"), str(tmp_path / "o.jnrrd"),
                     "--encoding", "gzip", "--tile", "2", "-q", *extra]) == 0
        assert jnrrd.read_header(tmp_path / "o.jnrrd")["tile:compression"] == "gzip"
        np.testing.assert_array_equal(jnrrd.read(tmp_path / "o.jnrrd")[0], data)


def test_cli_convert_encoding_replaces_the_input_encoding(tmp_path):
    from jnrrd.cli import main

    data = np.arange(60, dtype=np.uint8).reshape(3, 4, 5)
    jnrrd.write(tmp_path / "in.nrrd", data, encoding="gzip")
    assert main(["convert", str(tmp_path / "in.nrrd"), str(tmp_path / "o.nrrd"),
                 "--encoding", "raw", "-q"]) == 0
    assert jnrrd.read_header(tmp_path / "o.nrrd")["encoding"] == "raw"
    assert main(["convert", str(tmp_path / "in.nrrd"), str(tmp_path / "o.jnrrd"),
                 "--encoding", "bz2", "-q"]) == 0
    assert jnrrd.read_header(tmp_path / "o.jnrrd")["encoding"] == "bzip2"
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "o.jnrrd")[0], data)


@pytest.mark.parametrize("args, needle", [
    (["o.nrrd", "--encoding", "zstd"], "NRRD has no zstd"),
    (["o.npy", "--encoding", "gzip"], ".npy output has no encoding"),
    (["o.nrrd", "--encoding", "brotli"], "invalid choice"),
    (["o.jnrrd", "--encoding", "gzip", "--compression", "zstd"], "already say"),
    (["o.jnrrd", "--encoding", "gz", "--codecs", '[{"name": "bytes"}]'], "already say"),
])
def test_cli_convert_encoding_usage_errors(tmp_path, capsys, args, needle):
    from jnrrd.cli import main

    jnrrd.write(tmp_path / "in.jnrrd", np.zeros((2, 2), np.uint8))
    capsys.readouterr()
    code = main(["convert", str(tmp_path / "in.jnrrd"), str(tmp_path / args[0]), *args[1:]])
    assert code == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / args[0]).exists()
