"""libdeflate's one-shot gzip path (jnrrd[gzip]) against zlib's streaming path.

Every case runs with libdeflate through ctypes (the member's end known), through the
``deflate`` package's own API (the trailer stands in for the member's end), and with zlib
alone; results and error messages must be identical.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np
import pytest

import jnrrd
from jnrrd.codecs import compress as cc
from jnrrd.codecs import compress_stream as cs
from jnrrd.codecs import gzip_fast
from jnrrd.errors import DataError

pytestmark = pytest.mark.skipif(not gzip_fast.available, reason="needs jnrrd[gzip]")

ENGINES = ("ctypes", "package", "zlib")


def _engine(monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    if engine == "ctypes" and gzip_fast._lib is None:
        pytest.skip("libdeflate's symbols are not reachable here")
    if engine == "package":
        monkeypatch.setattr(gzip_fast, "_lib", None)
    if engine == "zlib":
        monkeypatch.setattr(gzip_fast, "available", False)


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def _volume() -> np.ndarray:
    rng = np.random.default_rng(7)
    return (rng.poisson(300, (40, 30, 20)) + np.arange(20)).astype(np.uint16)


def _outcome(fn, *args, **kw) -> tuple[str, object]:
    try:
        out = fn(*args, **kw)
    except DataError as exc:
        return "error", str(exc)
    return "ok", bytes(out)


DATA = bytes(range(256)) * 500
G = _gz(DATA)
STREAMS = {
    "one": (G, len(DATA)),
    "two-members": (_gz(DATA[:1000]) + _gz(DATA[1000:]), len(DATA)),
    "same-member-twice": (G + G, len(DATA)),
    "empty-second-member": (G + _gz(b""), len(DATA)),
    "zero-padding": (G + bytes(64), len(DATA)),
    "trailing-garbage": (G + b"garbage!" * 4, len(DATA)),
    "truncated": (G[:-5], len(DATA)),
    "truncated-body": (G[: len(G) // 2], len(DATA)),
    "corrupt": (G[:40] + bytes(b ^ 0x55 for b in G[40:60]) + G[60:], len(DATA)),
    "oversized": (G, len(DATA) - 1),
    "short": (G, len(DATA) + 1),
    "zlib-stream": (zlib.compress(DATA), len(DATA)),
}


@pytest.mark.parametrize("exact", [True, False])
@pytest.mark.parametrize("case", sorted(STREAMS))
def test_decompress_same_result_or_error(case: str, exact: bool,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    data, expected = STREAMS[case]
    results = {}
    for engine in ENGINES:
        with monkeypatch.context() as m:
            _engine(m, engine)
            results[engine] = _outcome(cc.decompress, "gzip", data, expected, exact=exact,
                                       what="t: ")
    assert results["ctypes"] == results["zlib"]
    if case != "same-member-twice":  # the trailer cannot tell an identical second member
        assert results["package"] == results["zlib"]


def test_fast_path_is_taken(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A tile and an untiled section decode through libdeflate (not a silent fallback)."""
    calls: list[bool] = []
    real = gzip_fast.inflate_into

    def spy(data, out):
        res = real(data, out)
        calls.append(res is not None)
        return res

    monkeypatch.setattr(gzip_fast, "inflate_into", spy)
    assert bytes(cc.decompress("gzip", G, len(DATA))) == DATA
    a = _volume()
    jnrrd.write(tmp_path / "u.jnrrd", a, encoding="gzip")
    jnrrd.write(tmp_path / "t.jnrrd", a, tile=16, compression="gzip")
    calls.clear()
    assert np.array_equal(jnrrd.read(tmp_path / "u.jnrrd")[0], a)
    assert calls == [True]
    calls.clear()
    assert np.array_equal(jnrrd.read(tmp_path / "t.jnrrd")[0], a)
    assert calls and all(calls)


def _into(f, buf: bytearray) -> bytearray:
    cs.decompress_stream_into("gzip", f, buf, what="u: ")
    return buf


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", ["one", "two-members", "same-member-twice", "zero-padding",
                                  "trailing-garbage", "truncated", "corrupt", "short"])
def test_untiled_section_same_result_or_error(case: str, engine: str, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    data, expected = STREAMS[case]
    out = {}
    for eng in (engine, "zlib"):
        path = tmp_path / f"{eng}.bin"
        path.write_bytes(b"head" + data)
        buf = bytearray(expected)
        with monkeypatch.context() as m, open(path, "rb") as f:
            _engine(m, eng)
            f.seek(4)
            out[eng] = _outcome(_into, f, buf)
    assert out[engine] == out["zlib"]


@pytest.mark.parametrize("engine", ENGINES)
def test_pynrrd_gzip_nrrd_reads_identically(engine: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    nrrd = pytest.importorskip("nrrd")
    a = _volume()
    path = tmp_path / "p.nrrd"
    nrrd.write(str(path), a, {"encoding": "gzip"}, index_order="F")
    _engine(monkeypatch, engine)
    b, _ = jnrrd.read(path)
    assert np.array_equal(b, a)


@pytest.mark.parametrize("engine", ENGINES)
def test_detached_and_tiled_gzip_round_trip(engine: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _engine(monkeypatch, engine)
    a = _volume()
    jnrrd.write(tmp_path / "d.nhdr", a, encoding="gzip")
    jnrrd.write(tmp_path / "t.jnrrd", a, tile=16, compression="gzip")
    assert np.array_equal(jnrrd.read(tmp_path / "d.nhdr")[0], a)
    assert np.array_equal(jnrrd.read(tmp_path / "t.jnrrd")[0], a)


def test_writer_output_is_one_member_no_larger_than_zlib(tmp_path: Path) -> None:
    """libdeflate level 6 writes one gzip member that zlib reads, not larger than zlib's."""
    a = _volume()
    raw = a.tobytes(order="F")
    fast = cc.compress("gzip", raw)
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    assert zlib.decompress(fast, 31) == raw
    assert len(fast) <= len(c.compress(raw) + c.flush())
