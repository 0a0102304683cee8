"""The Zarr v3 view (jnrrd.kerchunk_refs, `jnrrd refs`): zarr-python 3 through fsspec's
reference filesystem, and xarray.open_zarr, read every level bit-identically to
jnrrd.read(level=k); what the view cannot express is refused with the reason."""

from __future__ import annotations

import io
import json
import os
import warnings

import numpy as np
import pytest

import jnrrd
from jnrrd.cli import main
from jnrrd.errors import UnsupportedError

zarr = pytest.importorskip("zarr")
fsspec = pytest.importorskip("fsspec")
xr = pytest.importorskip("xarray")

#: zarr-python warns that numcodecs.* codecs are outside the Zarr v3 spec (expected here)
NUMCODECS_WARNING = "ignore:Numcodecs codecs are not in the Zarr version 3"

LE = {"name": "bytes", "configuration": {"endian": "little"}}


def _data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        x = rng.normal(size=shape).astype(dt)
        x.flat[::7] = np.nan  # NaN payloads and signs must survive bit for bit
        x.flat[3::11] = -0.0
        return x
    info = np.iinfo(dt)
    return rng.integers(max(info.min, -1000), min(info.max, 1000), size=shape, dtype=dt,
                        endpoint=True)


def _sparse(shape, dtype, pad):
    x = _data(shape, dtype)
    x[: shape[0] // 2] = pad  # the first tiles along axis 0 are all padding: not stored
    return x


def _store(refs):
    fs = fsspec.filesystem("reference", fo=refs, asynchronous=True)
    return zarr.storage.FsspecStore(fs, read_only=True, path="")


def _check(path, *, xarray=True):
    """Every level, through zarr and xarray, equals jnrrd.read(level=k) byte for byte."""
    refs = jnrrd.kerchunk_refs(path)
    json.dumps(refs, allow_nan=False)  # plain JSON
    assert jnrrd.kerchunk_refs(path, storage_options={}) == refs
    store = _store(refs)
    group = zarr.open_group(store, mode="r", zarr_format=3)
    with jnrrd.open(path) as vol:
        nlevels = len(vol.levels)
    names = [str(k) for k in range(nlevels)]
    assert sorted(group.array_keys()) == names
    ms = group.attrs["ome"]["multiscales"][0]
    assert [d["path"] for d in ms["datasets"]] == names
    assert group.attrs["jnrrd"]["sizes"] == jnrrd.read_header(path)["sizes"]
    for k in range(nlevels):
        expect, _ = jnrrd.read(path, level=k, index_order="C")
        got = group[str(k)][...]
        assert got.shape == expect.shape and got.dtype == expect.dtype
        assert got.tobytes() == expect.tobytes(), f"level {k}"
        if xarray:
            ds = xr.open_zarr(store, zarr_format=3, consolidated=False,
                              drop_variables=[n for n in names if n != str(k)])
            arr = ds[str(k)]
            assert arr.dims == tuple(a["name"] for a in ms["axes"])
            assert arr.values.tobytes() == expect.tobytes(), f"xarray level {k}"
    return refs


def _kw(**kw):
    return kw


CASES = {
    "internal-contiguous-uint8-3d": ((13, 10, 7), "uint8", _kw(tile=4)),
    "internal-contiguous-int16-2d": ((37, 21), "int16", _kw(tile=(8, 8))),
    "chunked-zstd-float32-3d": ((19, 17, 9), "float32",
                                _kw(tile=(8, 8, 4), compression="zstd", tile_format="chunked")),
    "chunked-gzip-int16-2d": ((45, 30), "int16",
                              _kw(tile=(16, 16), compression="gzip", tile_format="chunked")),
    "chain-zstd-crc32c-uint8-3d": ((11, 9, 6), "uint8", _kw(tile=4, codecs=[
        LE, {"name": "zstd", "configuration": {"level": 3, "checksum": True}},
        {"name": "crc32c"}])),
    "chain-gzip-crc32c-float32-2d": ((30, 13), "float32", _kw(tile=(8, 8), codecs=[
        LE, {"name": "gzip", "configuration": {"level": 5}}, {"name": "crc32c"}])),
    "external-gzip-int16-3d": ((13, 11, 5), "int16",
                               _kw(tile=4, compression="gzip", storage="external")),
    "external-raw-uint8-2d": ((21, 9), "uint8", _kw(tile=(8, 4), storage="external")),
    "pyramid-zstd-int16-3d": ((33, 27, 19), "int16",
                              _kw(tile=8, compression="zstd", levels=3)),
    "pyramid-external-float32-2d": ((50, 35), "float32",
                                    _kw(tile=(16, 8), levels=3, storage="external")),
    "pyramid-raw-uint8-2d": ((70, 45), "uint8", _kw(tile=(16, 16), levels=[1, 2, [4, 2]])),
    "transpose-zstd-int16-3d": ((13, 10, 7), "int16", _kw(tile=(4, 3, 5), codecs=[
        {"name": "transpose", "configuration": {"order": [2, 0, 1]}}, LE,
        {"name": "zstd", "configuration": {"level": 1}}])),
    "big-endian-gzip-int16-3d": ((9, 8, 7), "int16",
                                 _kw(tile=4, compression="gzip", header={"endian": "big"})),
    "variable-edges-that-divide": ((16, 12), "int16", _kw(tile=(4, 4), edge="variable")),
    "vector-axis-untiled": ((3, 10, 9), "float32",
                            _kw(tile=4, levels=2, header={"kinds": ["3-vector", "domain",
                                                                    "domain"]})),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_zarr_and_xarray_read_every_level(tmp_path, case):
    shape, dtype, kw = CASES[case]
    path = str(tmp_path / "v.jnrrd")
    jnrrd.write(path, _data(shape, dtype), **kw)
    _check(path)


@pytest.mark.parametrize(("storage", "dtype", "pad"), [
    ("internal", "int16", -7), ("internal", "uint8", 0), ("external", "float32", 0.0),
    ("internal", "float32", float("nan")),
])
def test_sparse_tiles_read_as_the_fill_value(tmp_path, storage, dtype, pad):
    path = str(tmp_path / "s.jnrrd")
    jnrrd.write(path, _sparse((16, 12, 5), dtype, pad), tile=4, compression="zstd", levels=2,
                sparse=True, padding_value=pad, storage=storage)
    refs = _check(path)
    # sparse tiles have no reference: fewer chunk keys than tiles
    chunks = [k for k in refs["refs"] if k.startswith("0/c/")]
    assert 0 < len(chunks) < 4 * 3 * 2
    meta = json.loads(refs["refs"]["0/zarr.json"])
    assert meta["fill_value"] == ("NaN" if pad != pad else pad)


@pytest.mark.filterwarnings(NUMCODECS_WARNING)
@pytest.mark.parametrize("kw", [
    _kw(compression="bzip2"),
    _kw(codecs=[LE, {"name": "numcodecs.shuffle", "configuration": {"elementsize": 2}},
                {"name": "numcodecs.zlib", "configuration": {"level": 1}}]),
    _kw(codecs=[LE, {"name": "numcodecs.lz4", "configuration": {"acceleration": 1}}]),
], ids=["bz2", "shuffle-zlib", "numcodecs-lz4"])
def test_numcodecs_chains(tmp_path, kw):
    path = str(tmp_path / "n.jnrrd")
    jnrrd.write(path, _data((13, 10, 7), "int16"), tile=4, **kw)
    refs = _check(path, xarray=False)
    names = [c["name"] for c in json.loads(refs["refs"]["0/zarr.json"])["codecs"]]
    assert all(n == "bytes" or n.startswith("numcodecs.") for n in names)


def test_layout_of_the_reference_set(tmp_path):
    path = tmp_path / "v.jnrrd"
    h = {"labels": ["x", "y", "z"], "space": "left-posterior-superior",
         "space_directions": [[0.5, 0, 0], [0, 0.5, 0], [0, 0, 2]], "space_origin": [1, 2, 3],
         "space_units": ["mm", "mm", "mm"]}
    jnrrd.write(path, _data((10, 9, 7), "uint8"), header=h, tile=(4, 4, 4), levels=2)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        refs = jnrrd.kerchunk_refs("v.jnrrd")  # a relative path becomes absolute
    finally:
        os.chdir(cwd)
    assert refs["version"] == 1
    r = refs["refs"]
    meta = json.loads(r["0/zarr.json"])
    assert meta["shape"] == [7, 9, 10] and meta["dimension_names"] == ["z", "y", "x"]
    assert meta["chunk_grid"]["configuration"]["chunk_shape"] == [4, 4, 4]
    assert meta["chunk_key_encoding"] == {"name": "default", "configuration": {"separator": "/"}}
    header = jnrrd.read_header(path)
    offsets, sizes = header["tile:offset_table"], header["tile:size_table"]
    # tile (i, j, k) in header order (first axis fastest) is chunk key k/j/i
    assert r["0/c/1/0/2"] == [str(path), offsets[2 + 3 * (0 + 3 * 1)],
                              sizes[2 + 3 * (0 + 3 * 1)]]
    group = json.loads(r["zarr.json"])
    assert group["node_type"] == "group"
    ms = group["attributes"]["ome"]["multiscales"][0]
    assert ms["datasets"][1]["coordinateTransformations"][0] == {
        "type": "scale", "scale": [4.0, 1.0, 1.0]}
    assert "tile:offset_table" not in group["attributes"]["jnrrd"]
    assert group["attributes"]["jnrrd"]["labels"] == ["x", "y", "z"]


def test_tile_locations_accessor(tmp_path):
    path = tmp_path / "t.jnrrd"
    jnrrd.write(path, _sparse((8, 8), "int16", 0), tile=4, compression="zstd", sparse=True)
    header = jnrrd.read_header(path)
    with jnrrd.open(path) as vol:
        locs = list(vol.tile_locations())
    assert [c for c, _ in locs] == [(0, 0), (1, 0), (0, 1), (1, 1)]
    for (_, loc), off, size in zip(locs, header["tile:offset_table"],
                                   header["tile:size_table"], strict=True):
        if off is None:
            assert loc is None
        else:
            assert loc.internal and (loc.offset, loc.size) == (off, size)
    jnrrd.write(tmp_path / "e.jnrrd", _data((8, 8), "uint8"), tile=4, storage="external")
    with jnrrd.open(tmp_path / "e.jnrrd", index_order="C") as vol:
        locs = list(vol.tile_locations())
    assert locs[1][0] == (0, 1)  # C order: coordinates reversed
    assert all(os.path.getsize(loc.path) == loc.size and loc.offset == 0 for _, loc in locs)


REFUSED = {
    "overlap": (_kw(tile=(4, 4), overlap=(1, 1)), r"overlap"),
    "variable-edges": (_kw(tile=(4, 4), edge="variable"), r"'variable' edges"),
    "virtual-levels": (_kw(tile=(4, 4), levels=3, header={"tile:levels_stored": [0]}),
                       r"levels 1, 2 are virtual"),
    "lz4-frame": (_kw(tile=(4, 4), compression="lz4"), r"codec 'lz4'.*LZ4 frame"),
    "conditional": (_kw(tile=(4, 4), codecs=[LE, {"name": "conditional", "configuration": {
        "codecs": [{"name": "zstd", "configuration": {"level": 1}}]}}]),
                    r"codec 'conditional'"),
    "pad": (_kw(tile=(4, 4), codecs=[LE, {"name": "pad", "configuration": {
        "location": "end", "nbytes": 8}}]),
            r"codec 'pad'"),
    "offset": (_kw(tile=(4, 4), codecs=[LE, {"name": "offset", "configuration": {
        "offset": 8}}]), r"codec 'offset'"),
    "scale_offset": (_kw(tile=(4, 4), codecs=[
        {"name": "scale_offset", "configuration": {"offset": 1, "scale": 2}}, LE]),
        r"codec 'scale_offset'"),
    "untiled": (_kw(), r"untiled"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_refused_with_the_reason(tmp_path, case):
    kw, reason = REFUSED[case]
    path = tmp_path / "r.jnrrd"
    jnrrd.write(path, _data((10, 9), "int16"), **kw)
    with pytest.raises(UnsupportedError, match=reason):
        jnrrd.kerchunk_refs(path)
    assert main(["refs", str(path)]) == 1


def test_bfloat16_and_nameless_streams_are_refused(tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    path = tmp_path / "b.jnrrd"
    jnrrd.write(path, np.ones((8, 8), dtype=ml_dtypes.bfloat16), tile=4)
    with pytest.raises(UnsupportedError, match="bfloat16"):
        jnrrd.kerchunk_refs(path)
    with pytest.raises(UnsupportedError, match="path"):
        jnrrd.kerchunk_refs(io.BytesIO(path.read_bytes()))


def test_cli_writes_the_same_json(tmp_path, capsys):
    path = tmp_path / "c.jnrrd"
    jnrrd.write(path, _data((12, 9, 5), "int16"), tile=4, compression="zstd", levels=2)
    out = tmp_path / "c.json"
    assert main(["refs", str(path), "-o", str(out)]) == 0
    expect = jnrrd.kerchunk_refs(path)
    assert json.loads(out.read_text()) == expect
    assert main(["refs", str(path)]) == 0
    assert json.loads(capsys.readouterr().out) == expect
    # the file it wrote is what fsspec opens as a reference filesystem by path
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fs = fsspec.filesystem("reference", fo=str(out), asynchronous=True)
        group = zarr.open_group(zarr.storage.FsspecStore(fs, read_only=True), mode="r")
        assert np.array_equal(group["1"][...], jnrrd.read(path, level=1, index_order="C")[0])


def test_ecosystem_page_example_runs(tmp_path, monkeypatch):
    import re
    from pathlib import Path

    page = (Path(__file__).parents[1] / "docs" / "ecosystem.md").read_text(encoding="utf-8")
    section = page.split("## Zarr and kerchunk views (no copy)", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "docs/ecosystem.md", "exec"), {"__name__": "ecosystem"})


def test_aligned_tiles_and_a_missing_tile_file(tmp_path):
    path = str(tmp_path / "a.jnrrd")
    jnrrd.write(path, _data((20, 9, 6), "int16"), tile=4, compression="zstd", align=4096)
    _check(path, xarray=False)
    ext = tmp_path / "e.jnrrd"
    jnrrd.write(ext, _data((8, 8), "uint8"), tile=4, storage="external")
    with jnrrd.open(ext) as vol:
        gone = next(loc.path for _, loc in vol.tile_locations())
    os.remove(gone)
    # an unrecorded missing tile file is corrupt data, as on read (not silently the fill value)
    with pytest.raises(jnrrd.DataError, match="missing"):
        jnrrd.kerchunk_refs(ext)


def test_cli_output_file_gets_the_usual_permissions(tmp_path):
    # written atomically, but as any new file: umask permissions, no temporary left behind
    src = tmp_path / "a.jnrrd"
    jnrrd.write(src, np.zeros((8, 8), np.uint8), tile=4)
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    out = tmp_path / "a.refs.json"
    assert main(["refs", str(src), "-o", str(out)]) == 0
    assert os.stat(out).st_mode & 0o777 == os.stat(plain).st_mode & 0o777
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jnrrd", "a.refs.json",
                                                         "plain.txt"]
