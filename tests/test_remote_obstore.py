"""The choice between the two backends of remote reads, and the quick part of the obstore
backend's tests (docs/remote.md, "Backends"); the whole remote suite runs through it in the
full suite (the ``remote_backend`` fixture of tests/conftest.py)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import jnrrd
from jnrrd.policy import IOSettings, Policy
from jnrrd.storage import remote_obstore
from jnrrd.storage.remote import choose_backend, filesystem
from jnrrd.storage.remote_fetch import Fetcher
from jnrrd.storage.remote_obstore import ObstoreFetcher, ObstoreFS
from jnrrd.storage.resolve import resolve

pytestmark = pytest.mark.timeout(60)


def _policy(backend: str, **kw: object) -> Policy:
    return Policy(**kw).with_io(IOSettings(remote_backend=backend))  # type: ignore[arg-type]


def test_auto_takes_obstore_for_its_schemes_and_fsspec_for_the_rest() -> None:
    assert choose_backend("s3://b/k", {}, Policy(), None) == "obstore"
    assert choose_backend("gs://b/k", {}, Policy(), None) == "obstore"
    assert choose_backend("memory://b/k", {}, Policy(), None) == "fsspec"
    assert choose_backend("memory://b/k", {}, _policy("obstore"), None) == "fsspec"
    assert choose_backend("s3://b/k", {}, _policy("fsspec"), None) == "fsspec"
    assert choose_backend("s3://b/k", {}, _policy("fsspec"), "obstore") == "obstore"


def test_http_stays_with_fsspec_under_either_backend() -> None:
    """obstore's HTTP client follows redirects itself (docs/remote.md, "Backends")."""
    url = "http://127.0.0.1:9/v.jnrrd"
    for backend in ("auto", "obstore"):
        assert choose_backend(url, {}, _policy(backend, follow_redirects=True), None) == "fsspec"
    fs, _ = filesystem(url, {"backend": "obstore"}, policy=Policy())
    assert not isinstance(fs, ObstoreFS)


def test_storage_options_map_to_obstore_or_choose_fsspec() -> None:
    s3fs_style = {"key": "k", "secret": "s", "endpoint_url": "http://127.0.0.1:9",
                  "client_kwargs": {"region_name": "eu-west-1"}}
    fs, _ = filesystem("s3://b/k", s3fs_style, policy=Policy())
    assert isinstance(fs, ObstoreFS)
    assert fs.config == {"aws_access_key_id": "k", "aws_secret_access_key": "s",
                         "aws_endpoint": "http://127.0.0.1:9", "aws_region": "eu-west-1"}
    assert fs.client["allow_http"] is True
    # an option obstore has no name for: auto takes fsspec, forcing obstore names it
    fs, _ = filesystem("s3://b/k", {"requester_pays": True}, policy=Policy())
    assert not isinstance(fs, ObstoreFS)
    with pytest.raises(jnrrd.UnsupportedError, match="requester_pays"):
        filesystem("s3://b/k", {"requester_pays": True, "backend": "obstore"})
    # the "backend" option is never passed on
    fs, _ = filesystem("s3://b/k", {"backend": "fsspec", "anon": True}, policy=Policy())
    assert not isinstance(fs, ObstoreFS) and "backend" not in fs.storage_options
    with pytest.raises(ValueError, match="remote_backend"):
        IOSettings(remote_backend="boto")  # type: ignore[arg-type]


def test_forcing_obstore_without_it_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "obstore", None)  # import obstore fails
    assert not remote_obstore.available()
    assert choose_backend("s3://b/k", {}, Policy(), None) == "fsspec"
    with pytest.raises(jnrrd.MissingDependencyError, match=r"jnrrd\[obstore\]"):
        filesystem("s3://b/k", {"backend": "obstore"})


def test_s3_reads_go_through_obstore_in_ranged_gets(s3, tmp_path) -> None:
    from remote_cases import put_to_s3, random_volume

    a = random_volume((64, 64, 40))  # 320 KiB of noise: past the first block
    jnrrd.write(tmp_path / "v.jnrrd", a, tile=8, compression="zstd")
    put_to_s3(s3, tmp_path / "v.jnrrd", "d/v.jnrrd")
    opened = resolve(s3.url("d/v.jnrrd"), Policy(), s3.storage_options)
    try:
        assert isinstance(opened.store.fetcher, ObstoreFetcher)
    finally:
        opened.close()
    s3.server.reset()
    with jnrrd.open(s3.url("d/v.jnrrd"), storage_options=s3.storage_options) as vol:
        np.testing.assert_array_equal(vol[-10:, :, -5:], a[-10:, :, -5:])
    gets = [r for r in s3.server.records if r.method == "GET"]
    assert len(gets) >= 2 and all(r.range_header for r in gets)  # first block, then tiles
    with jnrrd.open(s3.url("d/v.jnrrd"), storage_options={**s3.storage_options,
                                                         "backend": "fsspec"}) as vol:
        np.testing.assert_array_equal(vol[:], a)


def test_a_changed_object_is_a_data_error_through_obstore(s3, tmp_path) -> None:
    from remote_cases import put_to_s3, random_volume

    a = random_volume((64, 64, 40))  # past the first block: the tiles need more requests
    for i, arr in enumerate((a, a + 1)):
        jnrrd.write(tmp_path / f"v{i}.jnrrd", arr, tile=16, compression="zstd")
    put_to_s3(s3, tmp_path / "v0.jnrrd", "v.jnrrd")
    with jnrrd.open(s3.url("v.jnrrd"), storage_options=s3.storage_options) as vol:
        put_to_s3(s3, tmp_path / "v1.jnrrd", "v.jnrrd")  # If-Match: 412
        with pytest.raises(jnrrd.DataError, match="changed"):
            vol[-10:]


def test_fsspec_fetcher_is_unchanged_for_other_protocols() -> None:
    fs, path = filesystem("memory://x/v.jnrrd", policy=_policy("obstore"))
    assert isinstance(Fetcher(fs, Policy()), Fetcher) and not getattr(fs, "obstore", False)
