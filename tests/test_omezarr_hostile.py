"""Issue 29 item 6: the OME-Zarr importer reads a store as hostile input. Each example of the
issue is a test here: a ``JnrrdError`` (or correct data) in bounded time and memory, the same
caps and path policy as JNRRD reads (docs/security.md, docs/reliability.md)."""

from __future__ import annotations

import gzip
import json
import os
import sys
import time
import warnings
import zlib

import fuzz_strategies as fz
import numpy as np
import pytest
import zarr_strategies as zs
import zstandard
from hypothesis import given
from hypothesis import strategies as st

import jnrrd
from jnrrd.header.wire import nesting_depth
from jnrrd.integrations.zarr_read import json_depth

pytest.importorskip("zarr")

SEED = "v3-zstd-pyramid"  # two levels, zstd, shape (6, 10, 12) (zyx), chunks (3, 4, 4)
BOUND_S, BOUND_PEAK = 10.0, 128 << 20


@pytest.fixture(scope="module")
def zseeds():
    cache = zs.ZSeedCache()
    yield cache
    cache.close()


def _convert(files, tmp_path, special=None, seconds=BOUND_S, peak=BOUND_PEAK):
    """Convert the store made of ``files`` (and ``special`` entries) under the fuzzers' time
    and memory bounds; return what it raised (a JnrrdError), or None."""
    store = zs.materialize(zs.ZCase(SEED, files, "", dict(special or {})), str(tmp_path))
    with fz.bounded(seconds, peak), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            jnrrd.convert(store, str(tmp_path / "out.jnrrd"))
        except jnrrd.JnrrdError as exc:
            return exc
    return None


def _edit(files, name, fn):
    doc = json.loads(files[name])
    fn(doc)
    return {**files, name: json.dumps(doc).encode()}


def _ms(doc):
    return doc["attributes"]["ome"]["multiscales"][0]


def test_a_zero_scale_is_a_format_error(zseeds, tmp_path):
    """Was ``OverflowError`` (a division by the zero scale)."""
    def zero(doc):
        _ms(doc)["datasets"][0]["coordinateTransformations"][0]["scale"] = [0, 0, 0]
    exc = _convert(_edit(zseeds.files(SEED), "zarr.json", zero), tmp_path)
    assert isinstance(exc, jnrrd.FormatError) and "scale" in str(exc)


def test_deeply_nested_attributes_are_refused(zseeds, tmp_path):
    """Was ``RecursionError`` from the JSON parser."""
    files = zseeds.files(SEED)
    text = files["zarr.json"].decode()
    head, tail = text.split('"attributes": {', 1)
    files["zarr.json"] = (head + '"attributes": {"deep": ' + "[" * 100_000 + "]" * 100_000
                          + ", " + tail).encode()
    exc = _convert(files, tmp_path)
    assert isinstance(exc, jnrrd.JnrrdError) and "zarr.json" in str(exc)


def _bomb(kind):
    zeros = bytes(1 << 20)
    if kind == "zstd":
        c = zstandard.ZstdCompressor(level=1).compressobj()
        return b"".join(c.compress(zeros) for _ in range(64)) + c.flush()
    z = zlib.compressobj(1, zlib.DEFLATED, 31)
    return b"".join(z.compress(zeros) for _ in range(64)) + z.flush()


@pytest.mark.parametrize("kind", ["zstd", "gzip"])
def test_a_decompression_bomb_in_one_chunk_stops_at_the_chunk_size(zseeds, tmp_path, kind):
    """Was ``ValueError`` after expanding the whole chunk (1.1 GB for a 1 GiB bomb)."""
    files = zseeds.files(SEED)
    if kind == "gzip":
        files = _edit(files, "0/zarr.json", lambda d: d.update(
            codecs=[{"name": "bytes", "configuration": {"endian": "little"}},
                    {"name": "gzip", "configuration": {"level": 1}}]))
    files["0/c/0/0/0"] = _bomb(kind)  # 64 MiB of zeros; the chunk holds 96 bytes
    exc = _convert(files, tmp_path, peak=16 << 20)
    assert isinstance(exc, jnrrd.CodecError | jnrrd.DataError), exc
    assert "chunk c/0/0/0" in str(exc)


def _not_gzip(files):
    return _edit(files, "0/zarr.json", lambda d: d.update(
        codecs=[{"name": "bytes", "configuration": {"endian": "little"}},
                {"name": "gzip", "configuration": {"level": 1}}]))


BROKEN = {
    # what each raised before: ValueError, TypeError, AttributeError, zarr's own errors,
    # gzip.BadGzipFile, zstd's RuntimeError
    "zstd-garbage": lambda f: {**f, "0/c/0/0/0": b"\x28\xb5\x2f\xfd" + b"\xff" * 40},
    "gzip-garbage": lambda f: {**_not_gzip(f), "0/c/0/0/0": b"\x1f\x8b" + b"\x00" * 30},
    "not-gzip": lambda f: {**_not_gzip(f), "0/c/0/0/0": gzip.compress(b"\0" * 7)},
    "data-type": lambda f: _edit(f, "0/zarr.json", lambda d: d.update(data_type="uint9")),
    "data-type-object": lambda f: _edit(f, "0/zarr.json",
                                        lambda d: d.update(data_type={"x": 1})),
    "shape-string": lambda f: _edit(f, "0/zarr.json", lambda d: d.update(shape="6,10,12")),
    "codecs-object": lambda f: _edit(f, "0/zarr.json", lambda d: d.update(codecs={})),
    "codec-unknown": lambda f: _edit(f, "0/zarr.json", lambda d: d.update(
        codecs=[{"name": "bytes"}, {"name": "no-such-codec"}])),
    "chunk-grid": lambda f: _edit(f, "0/zarr.json", lambda d: d.update(
        chunk_grid={"name": "regular", "configuration": {"chunk_shape": [0, 4, 4]}})),
    "axes-missing": lambda f: _edit(f, "zarr.json", lambda d: _ms(d).pop("axes")),
    "datasets-paths": lambda f: _edit(f, "zarr.json",
                                      lambda d: _ms(d)["datasets"][0].update(path=7)),
    "multiscales-null": lambda f: _edit(f, "zarr.json", lambda d: d["attributes"]["ome"]
                                        .update(multiscales=None)),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_stores_are_jnrrd_errors(zseeds, tmp_path, case):
    assert isinstance(_convert(BROKEN[case](zseeds.files(SEED)), tmp_path), jnrrd.JnrrdError)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are a POSIX file type")
@pytest.mark.parametrize("entry", ["0/c/0/0/0", "0/zarr.json"])
def test_a_fifo_in_the_store_is_refused_without_blocking(zseeds, tmp_path, entry):
    """A chunk replaced by a FIFO blocked forever: only regular files are read."""
    exc = _convert(zseeds.files(SEED), tmp_path, {entry: "fifo"}, seconds=5.0)
    assert isinstance(exc, jnrrd.JnrrdError) and entry.split("/")[-1] in str(exc)


def test_a_huge_shape_without_chunks_costs_what_the_store_holds(zseeds, tmp_path):
    """A shape of [1024, 2048, 2048] with no chunks started writing 8 GiB of fill."""
    files = {k: v for k, v in zseeds.files(SEED).items() if not k.startswith("1/")}
    files = _edit(files, "zarr.json", lambda d: _ms(d)["datasets"].pop())
    files = _edit(files, "0/zarr.json", lambda d: d.update(shape=[1024, 2048, 2048], chunk_grid={
        "name": "regular", "configuration": {"chunk_shape": [64, 64, 64]}}))
    files = {k: v for k, v in files.items() if "/c/" not in k}
    t0 = time.perf_counter()
    exc = _convert(files, tmp_path)
    assert time.perf_counter() - t0 < BOUND_S
    out = tmp_path / "out.jnrrd"
    if exc is None:  # a sparse file recording absent tiles, not gigabytes of fill
        assert out.stat().st_size < 64 << 20
        vol = jnrrd.open(str(out))
        assert vol.shape == (2048, 2048, 1024)
        assert np.all(vol[:8, :8, :2] == 0)
    else:
        assert not out.exists() and isinstance(exc, jnrrd.JnrrdError)


def test_ten_thousand_levels_are_refused_before_any_is_opened(zseeds, tmp_path):
    """10,000 datasets took 11 s: ``max_levels`` is checked before any level is opened (the
    paths name no arrays: opening one first would be a different error)."""
    def many(doc):
        _ms(doc)["datasets"] = [{"path": f"none{k}"} for k in range(10_000)]
    exc = _convert(_edit(zseeds.files(SEED), "zarr.json", many), tmp_path)
    assert isinstance(exc, jnrrd.UnsupportedError) and "max_levels" in str(exc)


def test_the_level_cap_is_the_policy_of_the_readers(zseeds, tmp_path):
    """The cap is jnrrd's ``max_levels`` (two levels pass at the default, not at 1)."""
    store = zs.materialize(zs.ZCase(SEED, zseeds.files(SEED), ""), str(tmp_path))
    from jnrrd.integrations.omezarr_read import OmeZarrSource
    from jnrrd.policy import Policy

    assert len(OmeZarrSource(store).levels) == 2
    with pytest.raises(jnrrd.UnsupportedError, match="max_levels"):
        OmeZarrSource(store, policy=Policy(max_levels=1))


@pytest.mark.skipif(sys.platform == "win32", reason="symbolic links need privileges there")
@pytest.mark.parametrize("entry", ["1", "0/c/0/0/0"])
def test_a_level_or_chunk_linked_outside_the_store_is_not_read(zseeds, tmp_path, entry):
    """A level folder symlinked outside the store was read: the store is confined as a
    JNRRD file's data files are (no outward links)."""
    exc = _convert(zseeds.files(SEED), tmp_path, {entry: "link"})
    assert isinstance(exc, jnrrd.SecurityError), exc
    assert not (tmp_path / "out.jnrrd").exists()


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(alphabet='[]{}"\\\\ab\n\u005c', max_size=8),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(alphabet='[]{}"\\\\a', max_size=4), inner, max_size=4),
    max_leaves=40)


@given(value=JSON_VALUES, indent=st.sampled_from([None, 1]), ascii_=st.booleans())
def test_the_text_depth_of_zarr_metadata_is_the_nesting_depth(value, indent, ascii_):
    """The importer measures a metadata document's nesting from its text (brackets inside
    strings, escaped quotes and backslashes included) as the header reader does from the
    parsed value."""
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_).encode()
    assert json_depth(text) == nesting_depth(value, 10**6)
