"""The web view's Zarr store (jnrrd.web, docs/web-view.md) read through its HTTP server by
zarr-python: every level equals ``jnrrd.read(..., level=k, index_order="C")``, the OME-Zarr
0.5 metadata passes ``ome-zarr-models``, stored tiles are served byte for byte where the chain
allows, sparse tiles are absent, and the rest is re-encoded."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest

import jnrrd
from jnrrd.web.store import REENCODED_CODECS, ZarrStore, default_chunk

zarr = pytest.importorskip("zarr", reason="zarr is in the test extra: pip install -e '.[test]'")


def volume(shape: tuple[int, ...], dtype: Any = np.uint16, seed: int = 0) -> np.ndarray:
    """A smooth-ish seeded volume with some repetition (so compressors do something)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 50, shape).astype(dtype)
    return x + np.arange(shape[0], dtype=dtype).reshape((-1,) + (1,) * (len(shape) - 1))


class Case(NamedTuple):
    shape: tuple[int, ...]
    options: dict[str, Any]
    #: whether level 0's chunks are the stored tiles (``None``: some are)
    stored: bool | None
    dtype: Any = np.uint16


def opts(**options: Any) -> dict[str, Any]:
    return options


_CHAIN_T = [{"name": "transpose", "configuration": {"order": [2, 0, 1]}},
            {"name": "bytes", "configuration": {"endian": "big"}},
            {"name": "zstd", "configuration": {"level": 1}}]
CASES = {
    "zstd-3-levels": Case((21, 18, 13), opts(tile=8, compression="zstd", levels=3), True),
    "raw": Case((21, 18, 13), opts(tile=(8, 8, 4)), True),
    "gzip-external": Case((21, 18, 13), opts(tile=8, compression="gzip", levels=2,
                                             storage="external"), True),
    "transpose-bigendian": Case((21, 18, 13), opts(tile=(8, 6, 4), codecs=_CHAIN_T), True),
    "crc32-checksums": Case((21, 18, 13), opts(tile=8, compression="zstd", tile_stats=True,
                                               checksum="crc32"), True),
    "lz4-frame": Case((21, 18, 13), opts(tile=8, compression="lz4", levels=2), False),
    "overlap": Case((21, 18, 13), opts(tile=8, overlap=1, compression="zstd"), False),
    "variable-edges": Case((21, 18, 13), opts(tile=8, edge="variable", compression="zstd"),
                           None),
    "virtual-levels": Case((21, 18, 13), opts(tile=8, levels=3, compression="zstd",
                                              header={"tile:levels_stored": [0, 2]}), True),
    "untiled": Case((21, 18, 13), {}, False),
    "2d-float": Case((70, 45), opts(tile=32, compression="zstd", levels=2), True, np.float32),
    "4d-int8": Case((9, 8, 7, 3), opts(tile=(4, 4, 4, 3), compression="gzip"), True, np.int8),
}


@pytest.fixture
def served(tmp_path: Path) -> Any:
    servers = []

    def start(path: Any, **kw: Any) -> Any:
        server = jnrrd.serve(path, **kw)
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.close()


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_every_level_reads_back_through_zarr_python(tmp_path: Path, served: Any,
                                                    name: str) -> None:
    case = CASES[name]
    path = tmp_path / "v.jnrrd"
    data = volume(case.shape, case.dtype)
    jnrrd.write(path, data, **case.options)
    server = served(path)
    group = zarr.open_group(server.url, mode="r", zarr_format=3)
    with jnrrd.open(path) as vol:
        nlevels = len(vol.levels)
    assert sorted(group.array_keys()) == [str(k) for k in range(nlevels)]
    for k in range(nlevels):
        expected, _ = jnrrd.read(path, level=k, index_order="C")
        got = group[str(k)][...]
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)
    level0 = [r for r in server.requests if r.path.startswith("/0/c/") and r.status == 200]
    flags = {r.stored for r in level0}
    assert flags == ({True, False} if case.stored is None else {case.stored}), name


def test_classic_nrrd_and_untiled_files_get_default_chunks(tmp_path: Path, served: Any) -> None:
    data = volume((70, 20, 9))
    jnrrd.write(tmp_path / "v.nrrd", data)
    server = served(tmp_path / "v.nrrd")
    meta = json.loads(_get(server.url + "0/zarr.json")[2])
    assert meta["chunk_grid"]["configuration"]["chunk_shape"] == [9, 20, 64]
    assert meta["codecs"] == list(REENCODED_CODECS)
    np.testing.assert_array_equal(zarr.open_group(server.url, mode="r")["0"][...], data.T)
    assert default_chunk((300, 200), ("domain", "domain")) == (256, 200)
    assert default_chunk((5, 100, 100, 100), ("vector", None, None, None)) == (5, 64, 64, 64)
    assert default_chunk((100000,), (None,)) == (65536,)


def test_stored_tiles_are_served_byte_for_byte(tmp_path: Path, served: Any) -> None:
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, volume((40, 33, 20)), tile=16, compression="zstd", levels=2)
    server = served(path)
    raw = path.read_bytes()
    total = 0
    with jnrrd.open(path, index_order="C") as vol:
        for k, lv in enumerate(vol.levels):
            for coords, loc in lv.tile_locations():
                key = f"{k}/c/" + "/".join(map(str, coords))
                status, headers, body = _get(server.url + key)
                assert loc is not None and status == 200 and "Content-Encoding" not in headers
                assert body == raw[loc.offset:loc.offset + loc.size]
                assert lv.read_tile_bytes(coords) == body
                total += loc.size
    chunks = [r for r in server.requests if "/c/" in r.path]
    assert all(r.stored for r in chunks)
    assert sum(r.sent for r in chunks) == total  # nothing re-encoded, nothing added


def test_sparse_tiles_are_absent_with_the_fill_value(tmp_path: Path, served: Any) -> None:
    data = np.full((24, 16, 8), 7, np.int16)
    data[:8, :8] = np.arange(8 * 8 * 8, dtype=np.int16).reshape(8, 8, 8)
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, data, tile=8, compression="gzip", sparse=True,
                header={"tile:padding_value": 7})
    server = served(path)
    meta = json.loads(_get(server.url + "0/zarr.json")[2])
    assert meta["fill_value"] == 7
    assert _get(server.url + "0/c/0/0/0")[0] == 200
    assert _get(server.url + "0/c/0/1/2")[0] == 404
    np.testing.assert_array_equal(zarr.open_group(server.url, mode="r")["0"][...], data.T)


def test_a_corrupt_stored_tile_is_an_error_never_data(tmp_path: Path, served: Any) -> None:
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, volume((16, 16, 8)), tile=8, compression="zstd", tile_stats=True,
                checksum="crc32")
    with jnrrd.open(path) as vol:
        loc = next(iter(vol.tile_locations()))[1]
    assert loc is not None
    raw = bytearray(path.read_bytes())
    raw[loc.offset + loc.size - 1] ^= 0xFF
    path.write_bytes(bytes(raw))
    errors: list[str] = []
    server = served(path, on_error=errors.append)
    status, _, body = _get(server.url + "0/c/0/0/0")
    assert status == 500 and b"checksum" in body
    assert len(errors) == 1 and "checksum" in errors[0] and errors[0].startswith("/0/c/0/0/0")
    assert _get(server.url + "0/c/0/1/1")[0] == 200  # the server goes on


def test_ome_zarr_metadata_validates_with_ome_zarr_models(tmp_path: Path, served: Any) -> None:
    models = pytest.importorskip("ome_zarr_models.v05", reason="in the test extra")
    path = tmp_path / "ct.jnrrd"
    header = {"space": "left-posterior-superior", "space_origin": [10.0, 20.0, 30.0],
              "space_directions": [[0.5, 0, 0], [0, 0.5, 0], [0, 0, 2.0]],
              "space_units": ["mm", "mm", "mm"]}
    jnrrd.write(path, volume((32, 24, 10)), header, tile=8, levels=3, compression="zstd")
    server = served(path)
    image = models.Image.from_zarr(zarr.open_group(server.url, mode="r"))
    ms = image.attributes.ome.multiscales[0]
    assert [a.unit for a in ms.axes] == ["millimeter"] * 3
    assert [d.path for d in ms.datasets] == ["0", "1", "2"]
    scales = [d.coordinateTransformations[0].scale for d in ms.datasets]
    assert scales == [[2.0, 0.5, 0.5], [4.0, 1.0, 1.0], [8.0, 2.0, 2.0]]  # C order
    group = json.loads(_get(server.url + "zarr.json")[2])
    assert group["attributes"]["ome"]["multiscales"][0]["name"] == "ct"
    assert group["attributes"]["jnrrd"]["space_units"] == ["mm", "mm", "mm"]
    assert "tile:offset_table" not in group["attributes"]["jnrrd"]


def test_float64_is_served_as_float32_to_the_viewer(tmp_path: Path,
                                                               served: Any) -> None:
    pytest.importorskip("neuroglancer", reason="in the test extra")
    data = volume((10, 9, 8), np.float64) + 0.25
    jnrrd.write(tmp_path / "f.jnrrd", data, tile=4, compression="zstd")
    with pytest.warns(jnrrd.JnrrdWarning, match="float64.*float32"):
        server = served(tmp_path / "f.jnrrd", viewer=True)
    got = zarr.open_group(server.url, mode="r")["0"][...]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, data.T.astype(np.float32))
    plain = served(tmp_path / "f.jnrrd")  # jnrrd serve keeps the type
    assert zarr.open_group(plain.url, mode="r")["0"].dtype == np.float64


def test_types_without_a_zarr_name_are_refused(tmp_path: Path) -> None:
    jnrrd.write(tmp_path / "c.jnrrd", np.zeros((4, 4), np.complex64), tile=2)
    with pytest.raises(jnrrd.UnsupportedError, match="complex64"):
        jnrrd.serve(tmp_path / "c.jnrrd")


def test_a_remote_file_is_served_alike(tmp_path: Path, served: Any, s3: Any) -> None:
    data = volume((20, 17, 9))
    url = s3.url("v.jnrrd")
    jnrrd.write(url, data, tile=8, compression="zstd", levels=2,
                storage_options=s3.storage_options)
    server = served(url, storage_options=s3.storage_options)
    group = zarr.open_group(server.url, mode="r")
    for k in range(2):
        expected, _ = jnrrd.read(url, level=k, index_order="C",
                                 storage_options=s3.storage_options)
        np.testing.assert_array_equal(group[str(k)][...], expected)
    assert all(r.stored for r in server.requests if "/c/" in r.path and r.status == 200)


@pytest.mark.parametrize("name", ["zstd-3-levels", "variable-edges", "overlap", "untiled",
                                  "2d-float", "4d-int8"])
def test_the_middle_plane_read_through_the_chunks(tmp_path: Path, name: str) -> None:
    case = CASES[name]
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, volume(case.shape, case.dtype), **case.options)
    with jnrrd.open(path) as vol:
        store = ZarrStore(vol)
        top = vol.levels[-1]
        sel = tuple(slice(None) if d < 2 else n // 2 for d, n in enumerate(top.shape))
        np.testing.assert_array_equal(store.middle_plane(), top[sel])


def test_chunk_answers_are_cached_within_a_budget(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, volume((32, 32, 16)), tile=8, compression="zstd")
    reads: list[Any] = []
    real = jnrrd.LevelView.read_tile_bytes
    def counted(self: Any, coords: Any) -> Any:
        reads.append(coords)
        return real(self, coords)

    monkeypatch.setattr(jnrrd.LevelView, "read_tile_bytes", counted)
    with jnrrd.open(path) as vol:
        store = ZarrStore(vol)
        arr = store.arrays[0]
        first = store.chunk(arr, (1, 2, 0))
        assert first[0] is not None and first[1]
        assert store.chunk(arr, (1, 2, 0)) == first and len(reads) == 1
        none = ZarrStore(vol, chunk_cache_bytes=0)
        none.chunk(arr, (1, 2, 0))
        none.chunk(arr, (1, 2, 0))
        assert len(reads) == 3
        small = ZarrStore(vol, chunk_cache_bytes=len(first[0]) + 100)  # room for one
        for coords in [(0, 0, 0), (1, 0, 0), (0, 0, 0)]:
            small.chunk(arr, coords)
        assert len(reads) == 6  # (0, 0, 0) was pushed out by (1, 0, 0)


def test_a_file_behind_http_is_served_alike(tmp_path: Path, served: Any) -> None:
    from http_server import RangeServer

    data = volume((20, 17, 9))
    jnrrd.write(tmp_path / "v.jnrrd", data, tile=8, compression="zstd", levels=2)
    with RangeServer(tmp_path) as upstream:
        url = upstream.url_for("v.jnrrd")
        server = served(url)
        group = zarr.open_group(server.url, mode="r")
        for k in range(2):
            expected, _ = jnrrd.read(tmp_path / "v.jnrrd", level=k, index_order="C")
            np.testing.assert_array_equal(group[str(k)][...], expected)
        server.close()  # before the upstream server goes


def test_a_urls_query_and_credentials_are_never_served(tmp_path: Path) -> None:
    from http_server import Fault, RangeServer

    from jnrrd.web import redact

    assert redact("see https://user:pw@host/a/b.jnrrd?X-Amz-Signature=abc&t=1#f now") \
        == "see https://host/a/b.jnrrd?… now"
    assert redact("s3://bucket/key.jnrrd") == "s3://bucket/key.jnrrd"
    # random float64: the tiles lie past the header's first read
    data = np.random.default_rng(0).random((64, 64, 64))
    jnrrd.write(tmp_path / "f64.jnrrd", data, tile=16, compression="zstd", levels=2)
    errors: list[str] = []
    with RangeServer(tmp_path) as upstream:
        url = upstream.url_for("f64.jnrrd") + "?token=SECRET123"
        with jnrrd.serve(url, on_error=errors.append) as server:
            group = json.loads(_get(server.url + "zarr.json")[2])
            assert group["attributes"]["ome"]["multiscales"][0]["name"] == "f64"
            assert b"SECRET123" not in _get(server.url)[2]
            upstream.faults.append(Fault("status", status=503))
            status, _, body = _get(server.url + "0/c/3/3/3")
            assert status == 502 and b"127.0.0.1" in body
            assert b"SECRET123" not in body and b"token" not in body
    assert errors and not any("SECRET123" in e for e in errors)
