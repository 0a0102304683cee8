"""Writes go through the storage layer's write half (jnrrd.storage.WriteStore): a recording
store around the local one sees every tile stored before the header is committed, the
header's commit last, and nothing committed when a write fails."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import jnrrd
from jnrrd.storage import Staged, WriteStore
from jnrrd.storage.writes import LocalWriteStore, target_store


class RecordingStaged:
    """A staged object that logs its writes, commit and abort in its store's log."""

    def __init__(self, store: Recording, key: str, inner) -> None:
        self.store, self.key, self.inner = store, key, inner

    def __getattr__(self, name):  # file, scratch, append, relayout, wrote: the local ones
        return getattr(self.inner, name)

    def write(self, data) -> None:
        self.store.note("write", self.key)
        self.inner.write(data)

    def write_at(self, data, offset) -> None:
        self.store.note("write_at", self.key)
        self.inner.write_at(data, offset)

    def commit(self) -> None:
        self.store.note("commit", self.key)
        self.inner.commit()

    def abort(self) -> None:
        self.store.note("abort", self.key)
        self.inner.abort()

    def __enter__(self) -> RecordingStaged:
        return self

    def __exit__(self, kind, exc, tb) -> None:
        try:
            if kind is None:
                self.commit()
        finally:
            self.abort()


class Recording:
    """A write store around the local one that logs every call in order."""

    def __init__(self, inner: LocalWriteStore, fail_put: int | None = None) -> None:
        self.inner = inner
        self.log: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.fail_put = fail_put

    def note(self, what: str, key: str) -> None:
        with self.lock:
            self.log.append((what, key))

    def path(self, key: str) -> str:
        return self.inner.path(key)

    def put(self, key: str, data) -> None:
        self.note("put", key)
        if self.fail_put is not None and sum(w == "put" for w, _ in self.log) == self.fail_put:
            raise OSError(28, "No space left on device")
        self.inner.put(key, data)

    def reserve(self, prefix: str) -> None:
        self.note("reserve", prefix)
        self.inner.reserve(prefix)

    def sync(self, prefix: str) -> None:
        self.note("sync", prefix)
        self.inner.sync(prefix)

    def stage(self, key: str, **kw) -> RecordingStaged:
        self.note("stage", key)
        return RecordingStaged(self, key, self.inner.stage(key, **kw))

    def append_object(self, staged, key: str, size: int) -> None:
        self.note("append_object", key)
        self.inner.append_object(staged.inner, key, size)

    def delete(self, key: str) -> None:
        self.note("delete", key)
        self.inner.delete(key)

    def discard(self, prefix: str) -> None:
        self.note("discard", prefix)
        self.inner.discard(prefix)

    def owned(self, key: str) -> list[str]:
        return self.inner.owned(key)  # reads the previous header: not logged

    def tidy(self, key: str, **kw) -> list[str]:
        return self.inner.tidy(key, **kw)  # the leftovers sweep: not logged


@pytest.fixture
def recording(monkeypatch):
    """Route the writers' stores through :class:`Recording`; returns the stores made."""
    made: list[Recording] = []

    def recorded(target, fail_put=None, storage_options=None):
        store, key = target_store(target)
        made.append(Recording(store, fail_put))
        return made[-1], key

    import jnrrd.writing.tiled
    import jnrrd.writing.untiled

    for module in (jnrrd.writing.tiled, jnrrd.writing.untiled):
        monkeypatch.setattr(module, "target_store", recorded)
    return made


def _volume() -> np.ndarray:
    return np.arange(40 * 36 * 20, dtype=np.uint16).reshape(40, 36, 20)


def test_local_stores_meet_the_protocols(tmp_path):
    store, key = target_store(tmp_path / "v.jnrrd")
    assert isinstance(store, WriteStore)
    staged = store.stage(key)
    assert isinstance(staged, Staged)
    staged.abort()
    assert list(tmp_path.iterdir()) == []


def test_external_tiles_are_put_then_synced_then_the_header_is_committed_last(tmp_path,
                                                                              recording):
    made = recording
    a = _volume()
    jnrrd.write(tmp_path / "v.jnrrd", a, tile=(16, 16, 8), levels=2, compression="zstd",
                storage="external")
    (store,) = made
    log = store.log
    prefix = log[0][1]
    assert log[0] == ("reserve", prefix) and prefix.startswith("v.") and prefix.endswith(".tiles")
    puts = [k for w, k in log if w == "put"]
    assert len(puts) == 3 * 3 * 3 + 2 * 2 * 2  # levels 0 and 1, none sparse
    assert all(k.startswith(prefix + "/") for k in puts)
    assert log[1 + len(puts):] == [("sync", prefix), ("stage", "v.jnrrd"),
                                   ("write", "v.jnrrd"), ("commit", "v.jnrrd"),
                                   ("abort", "v.jnrrd")]  # abort after commit: a no-op
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "v.jnrrd")[0], a)


@pytest.mark.parametrize("opts", [{}, {"compression": "zstd", "levels": 2}])
def test_an_internal_file_is_one_staged_object_committed_after_its_tiles(tmp_path, recording,
                                                                         opts):
    made = recording
    a = _volume()
    jnrrd.write(tmp_path / "v.jnrrd", a, tile=(16, 16, 8), **opts)
    (store,) = made
    log = store.log
    assert log[0] == ("stage", "v.jnrrd")
    # raw tiles at offsets known in advance are written in place, others in order
    assert {w for w, _ in log[1:-1]} == {"write_at" if not opts else "write"}
    assert log[-1] == ("commit", "v.jnrrd")
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "v.jnrrd")[0], a)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.jnrrd"]


def test_a_detached_write_commits_its_data_file_then_its_header(tmp_path, recording):
    made = recording
    a = _volume()
    jnrrd.write(tmp_path / "v.jnrrd", a, detached=True)
    (store,) = made
    commits = [k for w, k in store.log if w == "commit"]
    assert len(commits) == 2 and commits[0].startswith("v.") and commits[1] == "v.jnrrd"
    assert store.log[-2:] == [("commit", "v.jnrrd"), ("abort", "v.jnrrd")]
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "v.jnrrd")[0], a)


def test_a_failed_external_write_commits_nothing_and_discards_its_tiles(tmp_path,
                                                                        monkeypatch):
    import jnrrd.writing.tiled

    made: list[Recording] = []

    def failing(target, storage_options=None):
        store, key = target_store(target)
        made.append(Recording(store, fail_put=3 if made else None))  # the second write fails
        return made[-1], key

    monkeypatch.setattr(jnrrd.writing.tiled, "target_store", failing)
    old = _volume()
    jnrrd.write(tmp_path / "v.jnrrd", old, tile=(16, 16, 8), storage="external")
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(OSError, match="No space"):
        jnrrd.write(tmp_path / "v.jnrrd", old + 1, tile=(16, 16, 8), storage="external")
    log = made[-1].log
    assert "commit" not in {w for w, _ in log}
    assert log[-1] == ("discard", log[0][1])
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "v.jnrrd")[0], old)


def test_dask_external_tiles_go_through_the_store_before_the_header(tmp_path, monkeypatch):
    da = pytest.importorskip("dask.array")
    import jnrrd.integrations.dask_write

    made: list[Recording] = []

    def recorded(target, storage_options=None):
        store, key = target_store(target)
        made.append(Recording(store))
        return made[-1], key

    monkeypatch.setattr(jnrrd.integrations.dask_write, "target_store", recorded)
    a = _volume()
    jnrrd.write(tmp_path / "v.jnrrd", da.from_array(a, chunks=10), tile=(16, 16, 8),
                storage="external")
    (store,) = made
    whats = [w for w, _ in store.log]
    assert whats[0] == "reserve" and whats.count("put") == 3 * 3 * 3
    assert whats[-4:] == ["sync", "write", "commit", "abort"]
    assert whats.index("stage") > max(i for i, w in enumerate(whats) if w == "put")
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "v.jnrrd")[0], a)


def test_dask_internal_tiles_are_spooled_then_appended_before_the_commit(tmp_path,
                                                                        monkeypatch):
    da = pytest.importorskip("dask.array")
    import jnrrd.integrations.dask_write

    made: list[Recording] = []

    def recorded(target, storage_options=None):
        store, key = target_store(target)
        made.append(Recording(store))
        return made[-1], key

    monkeypatch.setattr(jnrrd.integrations.dask_write, "target_store", recorded)
    a = _volume()
    jnrrd.write(tmp_path / "v.jnrrd", da.from_array(a, chunks=10), tile=(16, 16, 8),
                compression="zstd")
    (store,) = made
    whats = [w for w, _ in store.log]
    assert whats[0] == "reserve" and whats.count("put") == 27
    assert whats[-3:] == ["commit", "abort", "discard"]
    assert whats.count("append_object") == 27
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "v.jnrrd")[0], a)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.jnrrd"]


def test_a_tile_outgrowing_the_header_bound_relays_the_file_out_exactly(tmp_path,
                                                                        monkeypatch):
    """The reserved header space is an upper bound; should the header not fit (forced
    here), the staged file is laid out again with the exact offsets and that one is
    committed, leaving no temporary files."""
    import jnrrd.writing.sinks

    monkeypatch.setattr(jnrrd.writing.sinks, "header_space", lambda *args: 64)
    a = _volume()
    target = tmp_path / "v.jnrrd"
    jnrrd.write(target, a, tile=(16, 16, 8), compression="zstd", levels=2)
    np.testing.assert_array_equal(jnrrd.read(target)[0], a)
    raw = target.read_bytes()
    offsets = jnrrd.read_header(target)["tile:offset_table"]
    assert offsets[0] == raw.index(b"\n\n") + 2  # tiles follow the header, no gap
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.jnrrd"]
