"""URL sources for ``jnrrd.convert`` and ``jnrrd.kerchunk_refs``, and the command line on
URLs (``jnrrd info|validate|convert|refs|preview URL --storage-option KEY=VALUE``): the test
HTTP server and moto's S3 server (127.0.0.1 only)."""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest
from remote_cases import put_to_s3, random_volume

import jnrrd
from jnrrd.cli import main

pytest.importorskip("fsspec")
#: (and every test here runs through both backends of remote reads: tests/conftest.py)
pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("remote_backend")]


def _volume(shape=(40, 30, 20), seed=7):
    return random_volume(shape, seed)


_put = put_to_s3


def _tiles_dir(root):
    return next(n for n in os.listdir(root) if n.endswith(".tiles"))


def _s3_volume(s3, tmp_path, key="d/v.jnrrd", **kw):
    a = _volume()
    local = tmp_path / "src" / os.path.basename(key)
    local.parent.mkdir(exist_ok=True)
    jnrrd.write(local, a, {"labels": ["x", "y", "z"]}, **kw)
    folder = os.path.dirname(key)
    for name in os.listdir(local.parent):
        _put(s3, local.parent / name, f"{folder}/{name}" if folder else name)
    return a, s3.url(key)


def _options_args(options):
    """``--storage-option`` arguments for a storage_options dict (JSON values)."""
    out = []
    for k, v in options.items():
        out += ["--storage-option", f"{k}={v if isinstance(v, str) else json.dumps(v)}"]
    return out


# -- convert ------------------------------------------------------------------------------------

@pytest.mark.parametrize("target", ["out.jnrrd", "out.nrrd", "out.npy", "out.ome.zarr"])
def test_convert_http_source(http_server, tmp_path, target):
    a = _volume()
    jnrrd.write(http_server.root / "v.jnrrd", a, tile=16, compression="zstd", levels=2)
    out = tmp_path / target
    if target.endswith(".zarr"):
        pytest.importorskip("zarr")
    jnrrd.convert(http_server.url_for("v.jnrrd"), out)
    if target.endswith(".npy"):
        np.testing.assert_array_equal(np.load(out), a)
    elif target.endswith(".zarr"):
        back = tmp_path / "back.jnrrd"
        jnrrd.convert(out, back)
        np.testing.assert_array_equal(jnrrd.read(back)[0], a)
    else:
        np.testing.assert_array_equal(jnrrd.read(out)[0], a)
    if target == "out.jnrrd":  # the tiled source keeps its layout
        with jnrrd.open(out) as vol:
            assert len(vol.levels) == 2 and vol.tiling.levels[0].grid.tile[0] == 16


@pytest.mark.slow
def test_convert_s3_external_source_with_options(s3, tmp_path):
    a, url = _s3_volume(s3, tmp_path, tile=16, compression="zstd", storage="external")
    out = tmp_path / "out.jnrrd"
    jnrrd.convert(url, out, storage_options=s3.storage_options, tile=8, compression="gzip")
    np.testing.assert_array_equal(jnrrd.read(out)[0], a)
    assert jnrrd.read_header(out)["labels"] == ["x", "y", "z"]
    # the options are needed: without them the client has no endpoint here (and the
    # session's loopback guard refuses the real service at once)
    with pytest.raises((OSError, jnrrd.JnrrdError)):
        with jnrrd.config(request_retries=0):
            jnrrd.convert(url, tmp_path / "again.jnrrd")


def test_convert_s3_detached_nhdr(s3, tmp_path):
    a, url = _s3_volume(s3, tmp_path, key="n/v.nhdr")
    out = tmp_path / "out.nrrd"
    jnrrd.convert(url, out, storage_options=s3.storage_options)
    np.testing.assert_array_equal(jnrrd.read(out)[0], a)


def test_convert_memory_source(tmp_path):
    import fsspec

    a = _volume()
    jnrrd.write(tmp_path / "v.jnrrd", a, tile=16, compression="zstd")
    fs = fsspec.filesystem("memory")
    fs.put(str(tmp_path / "v.jnrrd"), "/rplumb-convert/v.jnrrd")
    try:
        jnrrd.convert("memory://rplumb-convert/v.jnrrd", tmp_path / "o.npy")
        np.testing.assert_array_equal(np.load(tmp_path / "o.npy"), a)
    finally:
        fs.rm("/rplumb-convert", recursive=True)


# -- kerchunk references ------------------------------------------------------------------------

def _zarr_group(refs, **fs_options):
    zarr = pytest.importorskip("zarr")
    import fsspec

    fs = fsspec.filesystem("reference", fo=refs, asynchronous=True, **fs_options)
    return zarr.open_group(zarr.storage.FsspecStore(fs, read_only=True), mode="r")


@pytest.mark.parametrize("storage", ["internal", "external"])
def test_refs_of_s3_url_point_at_the_objects(s3, tmp_path, storage):
    a, url = _s3_volume(s3, tmp_path, tile=16, compression="zstd", levels=2, storage=storage)
    refs = jnrrd.kerchunk_refs(url, storage_options=s3.storage_options)
    chunks = [v for k, v in refs["refs"].items() if "/c/" in k]
    assert chunks and all(v[0].startswith(s3.url("d/")) for v in chunks)
    if storage == "internal":
        assert {v[0] for v in chunks} == {url}
    else:
        assert all(v[0] != url and v[1] == 0 for v in chunks)
    # the reference filesystem takes the same options (zarr needs it asynchronous)
    import fsspec

    fs = fsspec.filesystem("reference", fo=refs, remote_protocol="s3",
                           remote_options=s3.storage_options)
    key, (_, _, size) = next((k, v) for k, v in refs["refs"].items() if "/c/" in k)
    assert len(fs.cat_file(key)) == size
    group = _zarr_group(refs, remote_protocol="s3",
                        remote_options={**s3.storage_options, "asynchronous": True})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(group["0"][...], a.T)
        with jnrrd.open(url, storage_options=s3.storage_options, index_order="C") as vol:
            np.testing.assert_array_equal(group["1"][...], vol.levels[1][...])


def test_refs_of_http_url_read_back_through_reference_filesystem(http_server):
    import fsspec

    a = _volume()
    jnrrd.write(http_server.root / "v.jnrrd", a, tile=16, compression="zstd")
    url = http_server.url_for("v.jnrrd")
    refs = jnrrd.kerchunk_refs(url)
    key, (where, offset, size) = next((k, v) for k, v in refs["refs"].items() if "/c/" in k)
    assert where == url
    fs = fsspec.filesystem("reference", fo=refs, remote_protocol="http")
    with open(http_server.root / "v.jnrrd", "rb") as f:
        f.seek(offset)
        assert fs.cat_file(key) == f.read(size)


# -- the command line ---------------------------------------------------------------------------

@pytest.fixture
def cli(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")

    def call(*args):
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return call


def test_cli_info_http(http_server, cli):
    jnrrd.write(http_server.root / "v.jnrrd", _volume(), tile=16, compression="zstd", levels=2)
    url = http_server.url_for("v.jnrrd")
    code, out, err = cli("info", url)
    assert code == 0, err
    assert "40 x 30 x 20" in out and url in out
    code, out, err = cli("info", url, "--json")
    assert code == 0 and json.loads(out)["header"]["sizes"] == [40, 30, 20]


def test_cli_info_missing_url_is_one_line(http_server, cli):
    code, out, err = cli("info", http_server.url_for("nope.jnrrd"))
    assert code == 1 and err.count("\n") == 1 and "nope.jnrrd" in err


def test_cli_validate_http(http_server, cli):
    jnrrd.write(http_server.root / "v.jnrrd", _volume(), tile=16, compression="zstd",
                storage="external")
    url = http_server.url_for("v.jnrrd")
    code, out, err = cli("validate", url, "--deep", "-q")
    assert code == 0 and out.strip() == f"{url}: valid", (out, err)
    tiles = http_server.root / _tiles_dir(http_server.root)
    os.remove(tiles / sorted(os.listdir(tiles))[0])
    code, out, err = cli("validate", url, "--json")
    rows = json.loads(out)
    assert code == 1 and rows and all(r["file"] == url for r in rows)


def test_cli_s3_with_storage_options(s3, tmp_path, cli):
    a, url = _s3_volume(s3, tmp_path, tile=16, compression="zstd", levels=2)
    opts = _options_args(s3.storage_options)
    assert any("client_kwargs={" in o for o in opts)  # a JSON value
    code, out, err = cli("info", url, *opts)
    assert code == 0 and "40 x 30 x 20" in out, err
    code, out, err = cli("validate", url, "--deep", "-q", *opts)
    assert code == 0 and out.strip() == f"{url}: valid", (out, err)
    dst = tmp_path / "out.jnrrd"
    code, out, err = cli("convert", url, dst, "--tile", "8", "-q", *opts)
    assert code == 0, err
    np.testing.assert_array_equal(jnrrd.read(dst)[0], a)
    code, out, err = cli("refs", url, "-o", tmp_path / "refs.json", *opts)
    assert code == 0, err
    refs = json.loads((tmp_path / "refs.json").read_text())
    assert all(v[0] == url for k, v in refs["refs"].items() if "/c/" in k)
    code, out, err = cli("preview", url, "-o", tmp_path / "p.png", "--size", "32", *opts)
    assert code == 0 and (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG", err


def test_cli_convert_http_to_local(http_server, tmp_path, cli):
    a = _volume()
    jnrrd.write(http_server.root / "v.nhdr", a)
    code, out, err = cli("convert", http_server.url_for("v.nhdr"), tmp_path / "o.jnrrd",
                         "--tile", "16", "--compression", "zstd", "-q")
    assert code == 0, err
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "o.jnrrd")[0], a)


@pytest.mark.parametrize("item", ["novalue", "=x"])
def test_cli_bad_storage_option_is_usage_error(http_server, cli, item):
    code, out, err = cli("info", http_server.url_for("v.jnrrd"), "--storage-option", item)
    assert code == 2 and "--storage-option" in err


def test_storage_option_values():
    from jnrrd.cli.common import storage_options

    got = storage_options(["anon=true", 'client_kwargs={"endpoint_url": "http://127.0.0.1:9"}',
                           "profile=dev", "n=3", "key=a=b"])
    assert got == {"anon": True, "client_kwargs": {"endpoint_url": "http://127.0.0.1:9"},
                   "profile": "dev", "n": 3, "key": "a=b"}
    assert storage_options(None) is None


@pytest.mark.parametrize("name", ["g.nrrd", "u.nhdr", "t.jnrrd"])
def test_cli_info_stored_bytes_match_local(http_server, cli, name):
    a = _volume()
    kw = {"g.nrrd": {"encoding": "gzip"}, "u.nhdr": {},
          "t.jnrrd": {"tile": 16, "compression": "zstd"}}[name]
    jnrrd.write(http_server.root / name, a, **kw)
    code, local, err = cli("info", http_server.root / name, "--json")
    assert code == 0, err
    code, remote, err = cli("info", http_server.url_for(name), "--json")
    assert code == 0, err
    got = json.loads(remote)["levels"]
    assert got == json.loads(local)["levels"] and got[0]["stored_bytes"] > 0


# -- URL targets (jnrrd.write(url, storage_options=...)) ---------------------------------------

def _writes_urls() -> bool:
    import inspect

    from jnrrd.writing.dispatch import write

    return "storage_options" in inspect.signature(write).parameters


needs_url_writes = pytest.mark.skipif(not _writes_urls(),
                                      reason="jnrrd.write does not take URLs yet")


@needs_url_writes
def test_convert_local_to_s3_and_s3_to_s3(s3, tmp_path):
    a = _volume()
    jnrrd.write(tmp_path / "v.jnrrd", a, tile=16, compression="zstd")
    opts = s3.storage_options
    jnrrd.convert(tmp_path / "v.jnrrd", s3.url("out/v.jnrrd"), storage_options=opts,
                  levels=2)
    np.testing.assert_array_equal(jnrrd.read(s3.url("out/v.jnrrd"), storage_options=opts)[0],
                                  a)
    jnrrd.convert(s3.url("out/v.jnrrd"), s3.url("out/v.nrrd"), storage_options=opts)
    np.testing.assert_array_equal(jnrrd.read(s3.url("out/v.nrrd"), storage_options=opts)[0],
                                  a)
    assert jnrrd.validate(s3.url("out/v.jnrrd"), storage_options=opts, deep=True) == []


@needs_url_writes
def test_cli_convert_local_to_s3(s3, tmp_path, cli):
    a = _volume()
    jnrrd.write(tmp_path / "v.nhdr", a)
    dst = s3.url("cli/o.jnrrd")
    code, out, err = cli("convert", tmp_path / "v.nhdr", dst, "--tile", "16",
                         "--external", "-q", *_options_args(s3.storage_options))
    assert code == 0, err
    np.testing.assert_array_equal(
        jnrrd.read(dst, storage_options=s3.storage_options)[0], a)
