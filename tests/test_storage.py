"""The storage layer on its own: LocalStore and the stream reader (get, get_ranges, size,
exists, version, confinement, bounded whole-object reads)."""

from __future__ import annotations

import io
import os
import tracemalloc

import pytest

import jnrrd
from jnrrd.policy import GiB, Policy
from jnrrd.storage import Store, open_source, opened
from jnrrd.storage.fileobj import StreamReader, stream_dir
from jnrrd.storage.local import LocalStore

BYTES = bytes(range(256)) * 4


@pytest.fixture
def store(tmp_path):
    (tmp_path / "a.bin").write_bytes(BYTES)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.bin").write_bytes(b"xyz")
    return LocalStore(str(tmp_path), Policy())


def test_local_store_is_a_store(store):
    assert isinstance(store, Store)


def test_get_whole_object_and_cap(store):
    assert store.get("a.bin") == BYTES
    assert store.get("sub/b.bin") == b"xyz"
    assert store.get("a.bin", limit=10) == BYTES[:10]


def test_get_ranges(store):
    got = store.get_ranges("a.bin", [(0, 4), (300, 302), (1020, 1024)])
    assert [bytes(g) for g in got] == [BYTES[:4], BYTES[300:302], BYTES[1020:]]
    with pytest.raises(jnrrd.DataError, match="file ended early"):
        store.get_ranges("a.bin", [(1000, 2000)])


def test_size_and_exists(store, tmp_path):
    assert store.size("a.bin") == len(BYTES)
    assert store.exists("sub/b.bin")
    assert not store.exists("missing.bin")
    assert not store.exists("sub")  # a directory holds no object
    with pytest.raises(FileNotFoundError):
        store.size("missing.bin")
    with pytest.raises(FileNotFoundError):
        store.get("missing.bin")


def test_version_changes_after_a_rewrite(store, tmp_path):
    before = store.version("a.bin")
    assert store.version("a.bin") == before
    tmp = tmp_path / "a.tmp"
    tmp.write_bytes(BYTES + b"!")
    os.replace(tmp, tmp_path / "a.bin")
    assert store.version("a.bin") != before
    os.remove(tmp_path / "a.bin")
    with pytest.raises(jnrrd.DataError, match="no longer exists"):
        store.version("a.bin")


@pytest.mark.parametrize("key", ["../outside.bin", "/etc/hostname", "sub/../../outside.bin",
                                 "http://example.com/x"])
def test_confinement_refusals(tmp_path, key):
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "outside.bin").write_bytes(b"secret")
    store = LocalStore(str(root), Policy())
    for call in (store.get, store.size, store.exists, store.version):
        with pytest.raises(jnrrd.SecurityError):
            call(key)


def test_symlink_out_of_the_root_is_refused(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "outside.bin").write_bytes(b"secret")
    os.symlink(tmp_path / "outside.bin", root / "link.bin")
    with pytest.raises(jnrrd.SecurityError):
        LocalStore(str(root), Policy()).get("link.bin")
    allowed = Policy.from_kwargs(allowed_roots=[str(tmp_path)])
    assert LocalStore(str(root), allowed).get("link.bin") == b"secret"


def test_not_a_regular_file_is_a_data_error(store, tmp_path):
    with pytest.raises(jnrrd.DataError):
        store.get("sub")


def test_child_store_is_confined_to_its_root(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "t.bin").write_bytes(b"t")
    (tmp_path / "top.bin").write_bytes(b"top")
    child = LocalStore(str(tmp_path), Policy()).child("d", field="tile:base_dir")
    assert child.get("t.bin") == b"t"
    with pytest.raises(jnrrd.SecurityError):
        child.get("../top.bin")


def test_small_object_under_a_huge_cap_costs_its_size(store, tmp_path):
    """A 100-byte object read under a 1 GiB cap costs its size plus the open file's buffer,
    never the cap (CPython's ``read(n)`` reserves ``n`` bytes before reading)."""
    (tmp_path / "small.bin").write_bytes(b"s" * 100)
    store.get("small.bin", limit=1 * GiB)  # warm caches (realpath of the root)
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        data = store.get("small.bin", limit=1 * GiB)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert data == b"s" * 100
    assert peak < 16 << 10


@pytest.mark.parametrize("map_reads", [True, False])
def test_stream_reader_on_a_file(tmp_path, map_reads):
    p = tmp_path / "a.bin"
    p.write_bytes(BYTES)
    with open(p, "rb") as f:
        r = StreamReader(f, map_reads=map_reads)
        assert r.file_size == len(BYTES)
        assert bytes(r.get_range(10, 20)) == BYTES[10:20]
        if not map_reads:
            with pytest.raises(jnrrd.DataError, match="file ended early"):
                r.get_range(1000, 1100)
        r.close()
        assert not f.closed  # not owned: the caller's stream stays open


def test_stream_reader_bytesio_is_zero_copy():
    buf = io.BytesIO(BYTES)
    r = StreamReader(buf)
    got = r.get_range(5, 9)
    assert isinstance(got, memoryview) and bytes(got) == BYTES[5:9]
    del got
    r.close()


def test_stream_reader_without_fileno_locks_seek_and_read():
    class Plain(io.RawIOBase):
        def __init__(self) -> None:
            self._b = io.BytesIO(BYTES)

        def readable(self) -> bool:
            return True

        def seekable(self) -> bool:
            return True

        def seek(self, pos: int, whence: int = 0) -> int:
            return self._b.seek(pos, whence)

        def tell(self) -> int:
            return self._b.tell()

        def readinto(self, b) -> int:
            return self._b.readinto(b)

    r = StreamReader(Plain(), owned=True)
    assert bytes(r.get_range(100, 104)) == BYTES[100:104]
    with pytest.raises(jnrrd.DataError, match="file ended early"):
        r.get_range(1020, 1030)
    r.close()


def test_stream_dir(tmp_path):
    p = tmp_path / "a.bin"
    p.write_bytes(b"")
    with open(p, "rb") as f:
        assert stream_dir(f) == str(tmp_path)
    assert stream_dir(io.BytesIO(b"")) is None


def test_stream_reader_get_ranges(tmp_path):
    p = tmp_path / "a.bin"
    p.write_bytes(BYTES)
    r = StreamReader(str(p))  # a path: opened and owned by the reader
    assert [bytes(g) for g in r.get_ranges([(0, 2), (8, 9)])] == [BYTES[:2], BYTES[8:9]]
    r.close()


def test_resolve_a_path(tmp_path):
    p = tmp_path / "v.jnrrd"
    p.write_bytes(b"abc")
    with opened(str(p), Policy()) as src:
        assert src.owned and src.stream.read() == b"abc"
        assert src.header_dir == str(tmp_path) and src.key == "v.jnrrd"
        assert src.store.get(src.key) == b"abc"
        assert src.name == str(p)
    assert src.stream.closed


def test_resolve_a_named_stream_and_an_anonymous_one(tmp_path):
    p = tmp_path / "v.jnrrd"
    p.write_bytes(b"abc")
    with open(p, "rb") as f:
        src = open_source(f, Policy())
        assert not src.owned and src.store is not None and src.path == str(p)
        src.close()
        assert not f.closed  # a caller's stream is never closed
    src = open_source(io.BytesIO(b"abc"), Policy())
    assert src.store is None and src.path is None and src.name is None
    with pytest.raises(TypeError, match="path or a binary file object"):
        open_source(3, Policy())


def test_resolved_store_keeps_the_policy(tmp_path):
    (tmp_path / "root").mkdir()
    p = tmp_path / "root" / "v.jnrrd"
    p.write_bytes(b"abc")
    (tmp_path / "outside.bin").write_bytes(b"x")
    with opened(str(p), Policy()) as src:
        with pytest.raises(jnrrd.SecurityError):
            src.store.get("../outside.bin")
    with opened(str(p), Policy.from_kwargs(allow_parent=True)) as src:
        assert src.store.get("../outside.bin") == b"x"
