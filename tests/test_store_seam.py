"""The one read seam (jnrrd/storage/objects.py): every tile and data-section read, local or
remote, internal, external or detached, goes through ``get_ranges`` of a store, and no byte
range is read by a store's readers outside that call; no private API of fsspec, s3fs or
aiohttp is used anywhere in the package."""

from __future__ import annotations

import io
import re
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
from remote_cases import KINDS, data_of

import jnrrd
from jnrrd.storage import objects
from jnrrd.storage.fileobj import StreamReader
from jnrrd.storage.local import LocalStore

ROOT = Path(jnrrd.__file__).parent
_inside = threading.local()


@pytest.fixture
def seam(monkeypatch):
    """Counts ``get_ranges`` calls by key, and fails any reader's range read made outside
    one (on any thread: the flag is set around the call on the caller's thread, and the
    readers run there or on threads the call started)."""
    calls: list[str] = []
    outside: list[str] = []
    real = objects.HeldObjects.get_ranges
    depth = {"n": 0}
    lock = threading.Lock()

    def get_ranges(self, key, ranges, **kw):
        calls.append(key)
        with lock:
            depth["n"] += 1
        try:
            return real(self, key, ranges, **kw)
        finally:
            with lock:
                depth["n"] -= 1

    def guard(cls, name):
        fn = getattr(cls, name)

        def guarded(self, *args, **kw):
            if depth["n"] == 0:
                outside.append(f"{cls.__name__}.{name}")
            return fn(self, *args, **kw)

        monkeypatch.setattr(cls, name, guarded)

    monkeypatch.setattr(objects.HeldObjects, "get_ranges", get_ranges)
    for name in ("get_range", "read_into", "fetch_many"):
        guard(StreamReader, name)
    guard(LocalStore, "get")
    try:
        from jnrrd.storage.remote import RemoteReader

        for name in ("get_range", "read_into", "fetch_many"):
            guard(RemoteReader, name)
    except ImportError:
        pass
    return calls, outside


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("seam")
    for name, options in KINDS.items():
        jnrrd.write(root / name, data_of(name), **options)
    return root


def _read_all(source, name, **kw):
    data, _ = jnrrd.read(source, **kw)
    np.testing.assert_array_equal(data, data_of(name))
    with jnrrd.open(source, **kw) as vol:
        np.testing.assert_array_equal(vol[5:40, ::3, 7], data_of(name)[5:40, ::3, 7])


#: local gzip sections: libdeflate inflates the whole section from a map of the descriptor of
#: the object the store holds (docs/architecture.md, "The read seam")
WHOLE_SECTION = {"gzip.nrrd", "untiled-gzip.jnrrd"}


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_local_read_goes_through_get_ranges(seam, site, name, monkeypatch):
    calls, outside = seam
    held: list[str] = []
    real_hold = objects.HeldObjects.hold

    def hold(self, key, reader=None, **kw):
        held.append(key)
        return real_hold(self, key, reader, **kw)

    monkeypatch.setattr(objects.HeldObjects, "hold", hold)
    _read_all(site / name, name)
    if name in WHOLE_SECTION:
        assert held, "the data was not opened through a store"
    else:
        assert calls, "no read called Store.get_ranges"
    assert outside == []


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_remote_read_goes_through_get_ranges(seam, site, name, tmp_path, http_server):
    pytest.importorskip("aiohttp")
    calls, outside = seam
    shutil.copytree(site, tmp_path, dirs_exist_ok=True)  # the directory the server serves
    _read_all(http_server.url_for(name), name)
    assert calls, "no read called Store.get_ranges"
    assert outside == []


def test_a_stream_without_a_path_reads_through_its_own_store(seam, site):
    calls, outside = seam
    raw = (site / "contiguous.jnrrd").read_bytes()
    np.testing.assert_array_equal(jnrrd.read(io.BytesIO(raw))[0], data_of("contiguous.jnrrd"))
    assert calls and outside == []


def test_external_tile_reads_name_the_tile_object(seam, site):
    calls, _ = seam
    with jnrrd.open(site / "external.jnrrd") as vol:
        vol[:4, :4, :4]
        names = [loc.path for _, loc in vol.tile_locations() if loc is not None]
    assert any(Path(n).name in {Path(c).name for c in calls} for n in names)


_PRIVATE = re.compile(
    r"\b(?:fs|filesystem|session|client|s3|body|resp|response|self\.fs)\.(_[a-z]\w*)"
    r"|set_session|_call_s3|\._cat_file|\._pipe_file|_strip_protocol|encode_url")


def test_no_private_client_api():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        for k, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if _PRIVATE.search(code):
                found.append(f"{path.relative_to(ROOT.parent)}:{k}: {line.strip()}")
    assert found == []


def test_the_private_api_grep_finds_what_it_is_for():
    assert _PRIVATE.search("await fs._call_s3('get_object')")
    assert _PRIVATE.search("session = await fs.set_session()")
    assert _PRIVATE.search("self.fs._strip_protocol(p)")
    assert not _PRIVATE.search("self.fs.cat_file(path)")
