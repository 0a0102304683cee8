"""Reading JNRRD and NRRD files by ``s3://`` URL through s3fs, against moto's S3 server on
127.0.0.1 (tests/s3_server.py; no request leaves the machine).

What is proved: every kind of file (untiled, detached, internal contiguous/chunked/sparse,
pyramids, external tiles, NRRD, detached NRRD) reads by URL with ``storage_options``
exactly as from the local path; ``open(url)[sel]`` equals the local read for seeded random
selections; a region touching 64 tiles takes far fewer requests than 64 and about their
bytes; a coarse level fetches only its own bytes; ``to_dask`` of an S3 volume computes the
same array (threads here, a process-based ``distributed`` cluster in the slow test); an
object changed under a reader is a ``DataError``, never wrong data; a missing object or
bucket is ``FileNotFoundError`` naming the URL.

Writes by URL: every kind round-trips; an
upload the server refuses part-way (a real 403 from the server, not a patched client) fails
naming the object's URL and leaves the previous dataset readable and whole; the header is
the last object put.

The files read are written locally and uploaded with s3fs (one bucket per module).
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from remote_cases import (
    KINDS,
    LEVELS,
    RNG_SEED,
    big_volume,
    covered,
    data_of,
    io_settings,
    random_selection,
    tile_ranges,
    values,
)

import jnrrd

s3fs = pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

#: (and every test here runs through both backends of remote reads: tests/conftest.py)
pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("remote_backend")]

SMALL, SMALL_TILE = 128, 16


@pytest.fixture(scope="module")
def bucket(_s3_server, tmp_path_factory):
    """A bucket holding one file of every kind under ``site/`` and a 128³ volume with 16³
    tiles under ``big/`` (the HTTP tests' geometry at half scale); returns ``(bucket name,
    local directory, the 128³ array)``."""
    from s3_server import AWS_ENV

    root = tmp_path_factory.mktemp("s3site")
    (root / "site").mkdir()
    (root / "big").mkdir()
    for name, options in KINDS.items():
        jnrrd.write(root / "site" / name, data_of(name), **options)
    big = big_volume(root / "big" / "big.jnrrd", n=SMALL, tile=SMALL_TILE)
    with pytest.MonkeyPatch.context() as mp:
        for key, value in AWS_ENV.items():
            mp.setenv(key, value)
        name = _s3_server.bucket()
        fs = s3fs.S3FileSystem(skip_instance_cache=True, **_s3_server.storage_options())
        fs.put(str(root / "site") + "/", f"{name}/site/", recursive=True)
        fs.put(str(root / "big" / "big.jnrrd"), f"{name}/big/big.jnrrd")
    return name, root, big


@pytest.fixture
def s3site(s3, bucket):
    """``(url of a name, storage_options, local directory, server)`` for the module's bucket;
    the ``s3`` fixture gives the environment and zeroed counters."""
    name, root, _ = bucket

    def url(key: str) -> str:
        return f"s3://{name}/{key}"

    return url, s3.storage_options, root, s3.server


# -- every kind, by URL as by path --------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", KINDS)
def test_read_by_url_equals_local_read(s3site, name):
    url, options, root, server = s3site
    local = values(jnrrd.read(root / "site" / name))
    remote = values(jnrrd.read(url(f"site/{name}"), storage_options=options))
    assert remote.dtype == local.dtype
    np.testing.assert_array_equal(remote, local)
    assert (dict(jnrrd.read_header(url(f"site/{name}"), storage_options=options))
            == dict(jnrrd.read_header(root / "site" / name)))
    assert server.counts["GET"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", KINDS)
def test_open_selections_equal_local_reads(s3site, name):
    url, options, root, _ = s3site
    rng = np.random.default_rng([RNG_SEED, 3, list(KINDS).index(name)])
    with (jnrrd.open(root / "site" / name) as local,
          jnrrd.open(url(f"site/{name}"), storage_options=options, cache_bytes=0) as remote):
        for _ in range(8):
            sel = random_selection(rng, local.shape)
            np.testing.assert_array_equal(remote[sel], local[sel], err_msg=str(sel))


@pytest.mark.parametrize("name", LEVELS)
def test_levels_by_url(s3site, name):
    url, options, root, _ = s3site
    with (jnrrd.open(url(f"site/{name}"), storage_options=options) as remote,
          jnrrd.open(root / "site" / name) as local):
        for k in range(LEVELS[name]):
            np.testing.assert_array_equal(remote.levels[k][...], local.levels[k][...])


def test_pickled_volume_carries_url_and_storage_options(s3site):
    url, options, _, _ = s3site
    with jnrrd.open(url("site/pyramid.jnrrd"), storage_options=options) as vol:
        clone = pickle.loads(pickle.dumps(vol))
        np.testing.assert_array_equal(clone.levels[1][...], vol.levels[1][...])


def test_missing_object_is_file_not_found_naming_it(s3site):
    url, options, _, _ = s3site
    with pytest.raises(FileNotFoundError, match="site/nothing.jnrrd"):
        jnrrd.open(url("site/nothing.jnrrd"), storage_options=options)


def test_missing_bucket_is_file_not_found_naming_the_url(s3site):
    _, options, _, _ = s3site
    with pytest.raises(FileNotFoundError, match="no-such-bucket-16/x.jnrrd"):
        jnrrd.open("s3://no-such-bucket-16/x.jnrrd", storage_options=options)


@pytest.mark.timeout(60)
def test_refused_get_is_a_remote_error_naming_the_url(s3site):
    url, options, _, server = s3site
    with jnrrd.open(url("site/contiguous.jnrrd"), storage_options=options, cache_bytes=0,
                    io=io_settings(request_retries=0)) as vol:
        server.fail("GET", status=403)
        with pytest.raises(OSError) as info:
            vol[...]
    assert isinstance(info.value, jnrrd.JnrrdError), type(info.value).__mro__
    assert "site/contiguous.jnrrd" in str(info.value), str(info.value)


@pytest.mark.timeout(60)
def test_a_transient_500_is_retried_to_the_right_data(s3site):
    url, options, _, server = s3site
    with jnrrd.open(url("site/contiguous.jnrrd"), storage_options=options,
                    cache_bytes=0) as vol:
        server.fail("GET", status=500, code="InternalError", times=1)
        np.testing.assert_array_equal(vol[...], data_of("contiguous.jnrrd"))
    assert server.faults == []


# -- requests -----------------------------------------------------------------------------------

def get_ranges(server, key: str) -> list[tuple[int, int]]:
    """The byte ranges of the GETs of ``/bucket/key`` the S3 server answered."""
    out = []
    for r in server.records:
        if r.method == "GET" and r.path.endswith("/" + key) and r.status in (200, 206):
            if r.range_header:
                a, _, b = r.range_header.split("=", 1)[1].partition("-")
                out.append((int(a), int(b) + 1))
            else:
                out.append((0, r.sent))
    return out


def test_region_touching_64_tiles_takes_far_fewer_requests(s3site, bucket):
    url, options, _, server = s3site
    a = bucket[2]
    # 16³ tiles are ~5 KB: the default gap (64 KiB) would merge the rows of the region; a
    # small gap keeps the bytes to the touched tiles, as 64³ tiles do with the default
    with jnrrd.open(url("big/big.jnrrd"), storage_options=options, cache_bytes=0,
                    io=io_settings(coalesce_gap=1024)) as vol:
        touched = tile_ranges(vol, 0, 25 // SMALL_TILE, 74 // SMALL_TILE)
        assert len(touched) == 64
        server.reset()
        np.testing.assert_array_equal(vol[25:75, 25:75, 25:75], a[25:75, 25:75, 25:75])
        got = get_ranges(server, "big/big.jnrrd")
    assert len(got) <= 16, got
    assert covered(touched, got)
    need = sum(e - s for s, e in touched)
    assert need <= sum(e - s for s, e in got) <= 1.1 * need


def test_coarse_level_read_fetches_only_that_level(s3site):
    url, options, _, server = s3site
    with jnrrd.open(url("big/big.jnrrd"), storage_options=options, cache_bytes=0) as vol:
        mine = tile_ranges(vol, 2)
        others = tile_ranges(vol, 0) + tile_ranges(vol, 1)
        server.reset()
        vol.levels[2][...]
        got = get_ranges(server, "big/big.jnrrd")
    assert got and covered(mine, got)
    for s, e in got:
        assert not any(s < b and a < e for a, b in others), (s, e)


# -- Dask ---------------------------------------------------------------------------------------

def test_to_dask_of_an_s3_volume(s3site):
    pytest.importorskip("dask.array")
    url, options, root, _ = s3site
    with jnrrd.open(url("site/pyramid.jnrrd"), storage_options=options) as vol:
        arr = vol.to_dask(level=1)
        got = arr.compute(scheduler="threads")
    with jnrrd.open(root / "site" / "pyramid.jnrrd") as local:
        np.testing.assert_array_equal(got, local.levels[1][...])


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_to_dask_on_a_process_cluster(s3site):
    """Workers in other processes re-open the URL with the pickled storage_options."""
    distributed = pytest.importorskip("distributed")
    url, options, root, _ = s3site
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       host="127.0.0.1", dashboard_address="127.0.0.1:0")
    try:
        with distributed.Client(cluster) as client:
            with jnrrd.open(url("site/contiguous.jnrrd"), storage_options=options) as vol:
                got = client.compute(vol.to_dask()).result(timeout=120)
    finally:
        cluster.close()
    np.testing.assert_array_equal(got, data_of("contiguous.jnrrd"))


# -- change detection ---------------------------------------------------------------------------

@pytest.mark.parametrize("compression", [None, "zstd"])
def test_object_replaced_under_a_reader_is_a_data_error(s3, tmp_path, compression):
    """Uncompressed, the replacement has the same size and tile offsets: only the version
    token (ETag) can tell."""
    a = data_of("contiguous.jnrrd")
    jnrrd.write(tmp_path / "v.jnrrd", a, tile=32, compression=compression)
    jnrrd.write(tmp_path / "w.jnrrd", a[::-1].copy(), tile=32, compression=compression)
    fs = s3fs.S3FileSystem(skip_instance_cache=True, **s3.storage_options)
    fs.put(str(tmp_path / "v.jnrrd"), s3.path("v.jnrrd"))
    with jnrrd.open(s3.url("v.jnrrd"), storage_options=s3.storage_options,
                    cache_bytes=0) as vol:
        first = vol[:2, :2, :2]
        fs.put(str(tmp_path / "w.jnrrd"), s3.path("v.jnrrd"))
        with pytest.raises(jnrrd.DataError) as info:
            vol[...]
        assert "v.jnrrd" in str(info.value)
    np.testing.assert_array_equal(first, a[:2, :2, :2])


# -- writes by URL ------------------------------------------------------------------------------


def objects(s3) -> list[str]:
    fs = s3fs.S3FileSystem(skip_instance_cache=True, **s3.storage_options)
    return sorted(p.split("/", 1)[1] for p in fs.find(s3.bucket))


@pytest.mark.slow
@pytest.mark.parametrize("name", KINDS)
def test_write_by_url_then_read_equals_the_local_file(s3, tmp_path, name):
    a = data_of(name)
    url = s3.url(f"w/{name}")
    jnrrd.write(url, a, storage_options=s3.storage_options, **KINDS[name])
    jnrrd.write(tmp_path / name, a, **KINDS[name])
    rng = np.random.default_rng([RNG_SEED, 7, list(KINDS).index(name)])
    with (jnrrd.open(url, storage_options=s3.storage_options, cache_bytes=0) as remote,
          jnrrd.open(tmp_path / name) as local):
        np.testing.assert_array_equal(remote[...], a)
        for _ in range(4):
            sel = random_selection(rng, local.shape)
            np.testing.assert_array_equal(remote[sel], local[sel], err_msg=str(sel))
        for k in range(1, len(local.levels)):
            np.testing.assert_array_equal(remote.levels[k][...], local.levels[k][...])


@pytest.mark.parametrize("skip", [5])
def test_upload_refused_mid_way_leaves_the_previous_dataset(s3, skip):
    """The server refuses the PUTs of a rewrite after its first ``skip`` ones: the write
    fails naming the URL, and the dataset written before still reads, whole."""
    old = data_of("external.jnrrd")
    new = old[::-1].copy()
    url = s3.url("v.jnrrd")
    options = KINDS["external.jnrrd"]
    jnrrd.write(url, old, storage_options=s3.storage_options, **options)
    before = objects(s3)
    s3.server.fail("PUT", skip=skip)
    with pytest.raises(OSError) as info:
        jnrrd.write(url, new, storage_options=s3.storage_options, **options)
    s3.server.clear_faults()
    assert f"s3://{s3.bucket}/v." in str(info.value), str(info.value)  # the object's URL
    np.testing.assert_array_equal(values(jnrrd.read(url, storage_options=s3.storage_options)),
                                  old)
    assert set(before) <= set(objects(s3))
    jnrrd.write(url, new, storage_options=s3.storage_options, **options)  # and then it works
    np.testing.assert_array_equal(values(jnrrd.read(url, storage_options=s3.storage_options)),
                                  new)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["contiguous.jnrrd", "untiled.jnrrd", "detached.nhdr"])
def test_refused_single_object_upload_changes_nothing(s3, name):
    a = data_of(name)
    url = s3.url(f"o/{name}")
    jnrrd.write(url, a, storage_options=s3.storage_options, **KINDS[name])
    before = objects(s3)
    s3.server.fail("PUT")
    with pytest.raises(OSError):
        jnrrd.write(url, a[::-1].copy(), storage_options=s3.storage_options, **KINDS[name])
    s3.server.clear_faults()
    np.testing.assert_array_equal(values(jnrrd.read(url, storage_options=s3.storage_options)),
                                  a)
    assert objects(s3) == before


def test_header_is_put_after_every_tile(s3):
    url = s3.url("p/v.jnrrd")
    jnrrd.write(url, data_of("pyramid.jnrrd"), storage_options=s3.storage_options,
                tile=32, compression="zstd", levels=3, storage="external")
    puts = [r.path for r in s3.server.records if r.method == "PUT" and r.status == 200]
    assert puts[-1] == f"/{s3.bucket}/p/v.jnrrd"
    assert len(puts) > 10 and all(p != puts[-1] for p in puts[:-1])
