"""libdeflate is a core dependency (pyproject.toml): after ``pip install -e .`` a gzip NRRD,
as 3D Slicer writes them, is read through libdeflate, not zlib (jnrrd/codecs/gzip_fast.py,
``engine``). zlib stays the fallback where ``deflate`` cannot be installed
(tests/conftest.py's ``gzip_engine`` fixture runs the gzip tests both ways)."""

from __future__ import annotations

import importlib.metadata

import numpy as np
import pytest
from packaging.requirements import Requirement

import jnrrd
from jnrrd.codecs import gzip_fast


def test_deflate_is_a_core_requirement():
    reqs = [Requirement(r) for r in importlib.metadata.requires("jnrrd") or []]
    core = [r for r in reqs if r.marker is None]
    assert "deflate" in {r.name for r in core}


def test_a_gzip_nrrd_is_read_through_libdeflate(tmp_path, monkeypatch):
    nrrd = pytest.importorskip("nrrd")
    data = (np.arange(64 * 48 * 40, dtype=np.uint32) % 3001).astype(np.int16).reshape(64, 48, 40)
    p = tmp_path / "slicer.nrrd"
    nrrd.write(str(p), data, {"encoding": "gzip"}, index_order="F")  # (pynrrd: zlib's gzip)
    assert gzip_fast.engine() == "libdeflate"  # straight into the output, no copy
    calls = []
    real = gzip_fast.inflate_into

    def spy(src, out):
        result = real(src, out)
        calls.append(result)
        return result

    monkeypatch.setattr(gzip_fast, "inflate_into", spy)
    got, _ = jnrrd.read(p)
    np.testing.assert_array_equal(got, data)
    assert calls and all(c is not None and c[1] == data.nbytes for c in calls)


def test_zlib_reads_the_same_without_libdeflate(tmp_path, monkeypatch):
    data = np.arange(1000, dtype=np.uint16)
    p = tmp_path / "g.nrrd"
    jnrrd.write(p, data, encoding="gzip")
    monkeypatch.setattr(gzip_fast, "available", False)
    assert gzip_fast.engine() == "zlib"
    np.testing.assert_array_equal(jnrrd.read(p)[0], data)
