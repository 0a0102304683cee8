"""``jnrrd.validate`` of URLs: detached data and tile files next to a remote header are checked
through its store (sizes, presence, listing), and ``deep=True`` reads the tiles through the
remote reader (merged, concurrent requests). HTTP server, moto S3 and ``memory://``."""

from __future__ import annotations

import os

import numpy as np
import pytest
from remote_cases import io_settings, put_to_s3, random_volume

import jnrrd

pytest.importorskip("fsspec")
#: (and every test here runs through both backends of remote reads: tests/conftest.py)
pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("remote_backend")]


def _volume(shape=(40, 30, 20), seed=5):
    return random_volume(shape, seed)


def _errors(problems):
    return [p for p in problems if p.severity == "error"]


def _tiles_dir(root):
    return next(n for n in os.listdir(root) if n.endswith(".tiles"))


def _s3fs(s3):
    import fsspec

    return fsspec.filesystem("s3", **s3.storage_options)


_put = put_to_s3


# -- HTTP -------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["internal", "external", "pyramid", "nhdr", "nrrd"])
def test_valid_files_over_http(http_server, kind):
    a = _volume()
    name = {"nhdr": "v.nhdr", "nrrd": "v.nrrd"}.get(kind, "v.jnrrd")
    kw = {"internal": {"tile": 16, "compression": "zstd"},
          "external": {"tile": 16, "compression": "zstd", "storage": "external"},
          "pyramid": {"tile": 16, "compression": "gzip", "levels": 3},
          "nhdr": {}, "nrrd": {"encoding": "gzip"}}[kind]
    jnrrd.write(http_server.root / name, a, **kw)
    url = http_server.url_for(name)
    assert jnrrd.validate(url) == []
    assert jnrrd.validate(url, deep=True) == []


def test_deep_reads_merged_ranges(http_server):
    """Deep validation of a remote internal file fetches batches of tiles in few requests,
    not one request per tile."""
    a = _volume((64, 64, 64))
    jnrrd.write(http_server.root / "v.jnrrd", a, tile=8, compression="zstd")
    url = http_server.url_for("v.jnrrd")
    with jnrrd.open(url) as vol:
        ntiles = vol.tiling.nstored
    assert os.path.getsize(http_server.root / "v.jnrrd") > 300_000  # past the first block
    http_server.reset()
    seen = []
    assert jnrrd.validate(url, deep=True, progress=lambda d, t: seen.append((d, t))) == []
    assert seen[-1] == (ntiles, ntiles)
    assert ntiles == 512
    assert http_server.requests <= 4, http_server.requests  # not one per tile, nor per batch


def test_missing_and_corrupt_tiles_over_http(http_server):
    a = _volume()
    jnrrd.write(http_server.root / "v.jnrrd", a, tile=16, compression="zstd",
                storage="external")
    tiles = http_server.root / _tiles_dir(http_server.root)
    names = sorted(os.listdir(tiles))
    os.remove(tiles / names[0])
    raw = bytearray((tiles / names[1]).read_bytes())
    raw[len(raw) // 2:] = b"\x00" * (len(raw) - len(raw) // 2)
    (tiles / names[1]).write_bytes(bytes(raw))
    url = http_server.url_for("v.jnrrd")
    errors = _errors(jnrrd.validate(url))
    assert len(errors) == 1 and "is missing" in errors[0].message
    assert names[0] in errors[0].message
    deep = _errors(jnrrd.validate(url, deep=True))
    text = " | ".join(p.message for p in deep)
    assert "is missing" in text and "does not decode" in text


def test_truncated_internal_file_over_http(http_server):
    a = _volume()
    path = http_server.root / "v.jnrrd"
    jnrrd.write(path, a, tile=16, compression="zstd")
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size - 100)
    problems = jnrrd.validate(http_server.url_for("v.jnrrd"), deep=True)
    assert any("truncated" in p.message for p in _errors(problems)), problems


def test_detached_data_checked_over_http(http_server):
    a = _volume()
    jnrrd.write(http_server.root / "v.nhdr", a)
    raw = next(n for n in os.listdir(http_server.root) if n.endswith(".raw"))
    url = http_server.url_for("v.nhdr")
    assert jnrrd.validate(url) == []
    with open(http_server.root / raw, "r+b") as f:
        f.truncate(1000)
    errors = _errors(jnrrd.validate(url))
    assert len(errors) == 1 and "holds 1000 data bytes" in errors[0].message
    assert errors[0].message.count("http://127.0.0.1") == 1  # named by its URL
    os.remove(http_server.root / raw)
    errors = _errors(jnrrd.validate(url))
    assert len(errors) == 1 and "is missing" in errors[0].message


def test_remote_paths_stay_under_the_header(http_server):
    (http_server.root / "d").mkdir()
    jnrrd.write(http_server.root / "d" / "v.nhdr", np.arange(4, dtype=np.uint8))
    text = (http_server.root / "d" / "v.nhdr").read_text().splitlines()
    text = [("data file: ../secret.raw" if t.startswith("data file:") else t) for t in text]
    (http_server.root / "d" / "v.nhdr").write_text("\n".join(text) + "\n")
    (http_server.root / "secret.raw").write_bytes(b"abcd")
    http_server.reset()
    errors = _errors(jnrrd.validate(http_server.url_for("d/v.nhdr")))
    assert len(errors) == 1 and "leaves the header's directory" in errors[0].message
    assert not any("secret" in r.path for r in http_server.records)


def test_validate_strict_names_the_url(http_server):
    from jnrrd.errors import ValidationError

    jnrrd.write(http_server.root / "v.nhdr", _volume())
    raw = next(n for n in os.listdir(http_server.root) if n.endswith(".raw"))
    os.remove(http_server.root / raw)
    url = http_server.url_for("v.nhdr")
    with pytest.raises(ValidationError, match=url):
        jnrrd.validate(url, strict=True)


# -- S3 (moto) ----------------------------------------------------------------------------------

def test_external_tiles_on_s3_listed_once(s3, tmp_path):
    a = _volume()
    jnrrd.write(tmp_path / "v.jnrrd", a, tile=8, compression="zstd", storage="external",
                levels=2)
    tiles = _tiles_dir(tmp_path)
    _put(s3, tmp_path / "v.jnrrd", "d/v.jnrrd")
    _put(s3, tmp_path / tiles, f"d/{tiles}")
    url = s3.url("d/v.jnrrd")
    opts = s3.storage_options
    ntiles = sum(len(files) for _, _, files in os.walk(tmp_path / tiles))
    assert ntiles > 60
    s3.server.reset()
    assert jnrrd.validate(url, storage_options=opts) == []
    assert s3.server.requests < 12  # the header and one listing, not a request per tile
    fs = _s3fs(s3)
    gone = sorted(fs.find(s3.path(f"d/{tiles}")))[3]
    fs.rm(gone)
    fs.invalidate_cache()
    errors = _errors(jnrrd.validate(url, storage_options=opts))
    assert len(errors) == 1 and os.path.basename(gone) in errors[0].message
    assert "is missing" in errors[0].message
    assert jnrrd.validate(url, storage_options=opts, deep=True) != []


def test_deep_internal_on_s3(s3, tmp_path):
    a = _volume()
    jnrrd.write(tmp_path / "v.jnrrd", a, tile=16, compression="zstd", levels=2)
    _put(s3, tmp_path / "v.jnrrd", "v.jnrrd")
    assert jnrrd.validate(s3.url("v.jnrrd"), storage_options=s3.storage_options,
                          deep=True) == []


def test_detached_on_s3(s3, tmp_path):
    a = _volume()
    jnrrd.write(tmp_path / "v.nhdr", a)
    raw = next(n for n in os.listdir(tmp_path) if n.endswith(".raw"))
    _put(s3, tmp_path / "v.nhdr", "x/v.nhdr")
    url = s3.url("x/v.nhdr")
    errors = _errors(jnrrd.validate(url, storage_options=s3.storage_options))
    assert len(errors) == 1 and "is missing" in errors[0].message and raw in errors[0].message
    _put(s3, tmp_path / raw, f"x/{raw}")
    assert jnrrd.validate(url, storage_options=s3.storage_options, deep=True) == []


def test_storage_options_reach_the_backend(s3, tmp_path, remote_backend):
    """Without the endpoint the bucket is not found (never a request to AWS: the
    options name a closed local port)."""
    jnrrd.write(tmp_path / "v.jnrrd", _volume(), tile=16)
    _put(s3, tmp_path / "v.jnrrd", "v.jnrrd")
    bad = {**s3.storage_options, "client_kwargs": {"endpoint_url": "http://127.0.0.1:9"},
           "endpoint_url": "http://127.0.0.1:9"}
    if remote_backend == "fsspec":
        bad["retries"] = 0  # s3fs's own retries (obstore's are off)
    with pytest.raises(OSError):
        jnrrd.validate(s3.url("v.jnrrd"), storage_options=bad,
                       io=io_settings(request_retries=0, request_timeout=5))


# -- memory:// ----------------------------------------------------------------------------------

def test_memory_filesystem(tmp_path):
    import fsspec

    a = _volume()
    jnrrd.write(tmp_path / "v.jnrrd", a, tile=16, compression="zstd", storage="external")
    fs = fsspec.filesystem("memory")
    fs.put(str(tmp_path) + "/", "/rplumb-validate/", recursive=True)
    try:
        url = "memory://rplumb-validate/v.jnrrd"
        assert jnrrd.validate(url) == []
        assert jnrrd.validate(url, deep=True) == []
        tiles = _tiles_dir(tmp_path)
        victim = sorted(fs.find(f"/rplumb-validate/{tiles}"))[0]
        fs.rm(victim)
        errors = _errors(jnrrd.validate(url))
        assert len(errors) == 1 and "is missing" in errors[0].message
    finally:
        fs.rm("/rplumb-validate", recursive=True)


def test_deep_windows_keep_order_and_find_a_bad_tile(http_server, monkeypatch):
    """Many windows (each requested while the previous one decodes): every tile checked
    once, in order, and a corrupt tile late in the file reported by its index."""
    from jnrrd.validation import deep

    monkeypatch.setattr(deep, "_WINDOW_TILES", 40)
    a = _volume((64, 64, 32))
    path = http_server.root / "v.jnrrd"
    jnrrd.write(path, a, tile=8, compression="zstd")
    with jnrrd.open(path) as vol:
        offsets = vol.tiling.offset_table
        sizes = vol.tiling.size_table
    bad = 200
    with open(path, "r+b") as f:
        f.seek(int(offsets[bad]))
        f.write(b"\xff" * int(sizes[bad]))
    seen = []
    problems = _errors(jnrrd.validate(http_server.url_for("v.jnrrd"), deep=True,
                                      progress=lambda d, t: seen.append(d)))
    assert len(problems) == 1 and f"tile {bad} " in problems[0].message
    assert seen == sorted(seen) and seen[-1] == 256


def test_sparse_external_on_memory(tmp_path):
    """Sparse tiles (recorded as having no file) cost no request and are no problem."""
    import fsspec

    a = _volume()
    a[:16, :16, :] = 0
    jnrrd.write(tmp_path / "v.jnrrd", a, tile=16, compression="zstd", storage="external",
                sparse=True)
    with jnrrd.open(tmp_path / "v.jnrrd") as vol:
        stored = sum(1 for _, loc in vol.levels[0].tile_locations() if loc is not None)
        assert stored < vol.tiling.nstored
    fs = fsspec.filesystem("memory")
    fs.put(str(tmp_path) + "/", "/rplumb-sparse/", recursive=True)
    try:
        url = "memory://rplumb-sparse/v.jnrrd"
        assert jnrrd.validate(url) == []
        assert jnrrd.validate(url, deep=True) == []
    finally:
        fs.rm("/rplumb-sparse", recursive=True)


def test_unlisted_tile_files_capped_by_max_files(http_server):
    """HTTP cannot list: each tile file is one request, at most max_files of them."""
    a = _volume()
    jnrrd.write(http_server.root / "v.jnrrd", a, tile=8, compression="zstd", storage="external")
    url = http_server.url_for("v.jnrrd")
    with jnrrd.open(url) as vol:
        ntiles = vol.tiling.nstored
    http_server.reset()
    problems = jnrrd.validate(url, max_files=10)
    assert [p.severity for p in problems] == ["note"] and "max_files" in problems[0].message
    assert http_server.requests <= 1 + 10 < ntiles
