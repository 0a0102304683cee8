"""Atomic untiled writes (docs/format.md#atomic-writes): a failed write leaves the old file or
dataset readable and nothing behind; a detached overwrite never touches the data file the current
header references before the new header is in place; leftovers go at the next write."""

from __future__ import annotations

import builtins
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import jnrrd
import jnrrd.writing.stream

OLD = np.arange(12, dtype=np.int16).reshape(3, 4)


class Failing:
    """An array-like whose ``__getitem__`` raises on its ``fail_at``-th call."""

    def __init__(self, shape: tuple[int, ...], dtype: str, fail_at: int) -> None:
        self.shape, self.dtype = shape, np.dtype(dtype)
        self.calls, self.fail_at = 0, fail_at

    def __getitem__(self, key):
        self.calls += 1
        if self.calls >= self.fail_at:
            raise RuntimeError("source failed half-way")
        return np.ones(self.shape, self.dtype)[key]


@pytest.fixture
def small_slabs(monkeypatch: pytest.MonkeyPatch) -> None:
    # one slab per index of the slowest axis, so a failure can come half-way through
    monkeypatch.setattr(jnrrd.writing.stream, "_SLAB_BYTES", 1)


@pytest.mark.parametrize("encoding", ["raw", "gzip", "ascii"])
@pytest.mark.parametrize("detached", [False, True], ids=["attached", "detached"])
def test_failed_write_keeps_the_old_dataset(tmp_path: Path, small_slabs, encoding: str,
                                            detached: bool) -> None:
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, OLD, detached=detached)
    before = {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path)}
    src = Failing((50, 40, 8), "float32", fail_at=4)
    with pytest.raises(RuntimeError, match="half-way"):
        jnrrd.write(p, src, encoding=encoding, detached=detached)
    assert src.calls == 4  # it really failed in the middle of the data
    after = {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path)}
    assert after == before  # no temporary file, no new data file, nothing changed
    np.testing.assert_array_equal(jnrrd.read(p)[0], OLD)


def test_failed_write_of_a_new_file_leaves_nothing(tmp_path: Path, small_slabs) -> None:
    with pytest.raises(RuntimeError):
        jnrrd.write(tmp_path / "new.jnrrd", Failing((4, 4, 4), "uint8", fail_at=2))
    assert os.listdir(tmp_path) == []


def test_write_streams_slabs(tmp_path: Path, small_slabs) -> None:
    src = Failing((5, 6, 7), "uint16", fail_at=10**9)
    jnrrd.write(tmp_path / "v.jnrrd", src)
    assert src.calls == 7  # one read per slab along the slowest axis, never the whole volume
    assert (jnrrd.read(tmp_path / "v.jnrrd")[0] == 1).all()


class Journal:
    """Records file-system events in order: opens for writing, replaces, removals."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[tuple[str, str]] = []
        real_open, real_replace = builtins.open, os.replace
        real_unlink, real_rmtree = os.unlink, shutil.rmtree

        def spy_open(file, mode="r", *a, **kw):
            if isinstance(file, (str, os.PathLike)) and any(c in mode for c in "wax+"):
                self.events.append(("write", os.path.abspath(file)))
            return real_open(file, mode, *a, **kw)

        def spy_replace(src, dst, *a, **kw):
            self.events.append(("replace", os.path.abspath(dst)))
            return real_replace(src, dst, *a, **kw)

        def spy_unlink(path, *a, **kw):
            self.events.append(("remove", os.path.abspath(path)))
            return real_unlink(path, *a, **kw)

        def spy_rmtree(path, *a, **kw):
            self.events.append(("remove", os.path.abspath(path)))
            return real_rmtree(path, *a, **kw)

        monkeypatch.setattr(builtins, "open", spy_open)
        monkeypatch.setattr(os, "replace", spy_replace)
        monkeypatch.setattr(os, "unlink", spy_unlink)
        monkeypatch.setattr(os, "remove", spy_unlink)
        monkeypatch.setattr(shutil, "rmtree", spy_rmtree)


@pytest.mark.parametrize("new_detached", [True, False], ids=["to-detached", "to-attached"])
def test_detached_overwrite_order(tmp_path: Path, monkeypatch, new_detached: bool) -> None:
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, OLD, detached=True)
    old_data = str(tmp_path / jnrrd.read_header(p)["data_file"])
    journal = Journal(monkeypatch)
    jnrrd.write(p, OLD * 2, detached=new_detached)
    ev = journal.events
    header_in_place = ev.index(("replace", str(p)))
    touching_old = [i for i, (_, path) in enumerate(ev) if path == old_data]
    assert touching_old == [i for i, e in enumerate(ev) if e == ("remove", old_data)]
    assert touching_old and all(i > header_in_place for i in touching_old), ev
    assert not os.path.exists(old_data)
    h = jnrrd.read_header(p)
    if new_detached:
        assert str(tmp_path / h["data_file"]) != old_data
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["v.jnrrd", *([h["data_file"]] if new_detached else [])])
    np.testing.assert_array_equal(jnrrd.read(p)[0], OLD * 2)


@pytest.mark.parametrize("detached", [False, True], ids=["attached", "detached"])
def test_leftovers_removed_by_the_next_write(tmp_path: Path, detached: bool) -> None:
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, OLD * 3, detached=True)
    previous = jnrrd.read_header(p)["data_file"]  # the data file the previous header names
    leftovers = [
        ".v.jnrrd.jnrrd-tmp-0badc0de",  # an interrupted header/attached write
        previous,
        f".{previous}.jnrrd-tmp-feedf00d",  # an interrupted write of that data file
    ]
    # named like ours, but no header of v.jnrrd names them: not provably v.jnrrd's
    unrelated = ["w.0123abcd.data.raw", "v.raw", "notes.txt", ".w.jnrrd.jnrrd-tmp-0badc0de",
                 "v.0123abcd.data.raw.bak", "v.0123abcd.data.raw", "v.89abcdef.data.rawzst"]
    for n in leftovers[::2] + unrelated:
        (tmp_path / n).write_bytes(b"x")
    jnrrd.write(p, OLD, detached=detached)
    names = set(os.listdir(tmp_path))
    assert not names & set(leftovers), names & set(leftovers)
    assert set(unrelated) <= names
    np.testing.assert_array_equal(jnrrd.read(p)[0], OLD)


def test_overwrite_keeps_a_user_named_data_file(tmp_path: Path) -> None:
    (tmp_path / "mine.raw").write_bytes(OLD.astype("<i2").tobytes(order="F"))
    p = tmp_path / "v.jnrrd"
    p.write_bytes(b'{"jnrrd": "0004"}\n{"type": "int16"}\n{"dimension": 2}\n{"sizes": [3, 4]}\n'
                  b'{"endian": "little"}\n{"encoding": "raw"}\n{"data_file": "mine.raw"}\n\n')
    jnrrd.write(p, OLD + 1, detached=True)
    assert (tmp_path / "mine.raw").exists()  # not ours to remove
    np.testing.assert_array_equal(jnrrd.read(p)[0], OLD + 1)


def test_readers_see_old_or_new_never_half(tmp_path: Path, monkeypatch) -> None:
    """While the new file is being written, the target still holds the complete old file."""
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, OLD)
    seen = []
    real_replace = os.replace

    def check_then_replace(src, dst, *a, **kw):
        if os.path.abspath(dst) == str(p):
            seen.append(jnrrd.read(p)[0].copy())
        return real_replace(src, dst, *a, **kw)

    monkeypatch.setattr(os, "replace", check_then_replace)
    jnrrd.write(p, OLD * 3, encoding="gzip")
    assert len(seen) == 1
    np.testing.assert_array_equal(seen[0], OLD)
    np.testing.assert_array_equal(jnrrd.read(p)[0], OLD * 3)


# --- durable=False: atomic, without fsync ----------------------------------------------------


@pytest.mark.parametrize("kind", ["untiled", "internal", "internal-zstd-levels", "external",
                                  "nrrd"])
def test_durable_false_skips_every_fsync_and_writes_the_same_data(kind, tmp_path, monkeypatch):
    import threading

    calls = []
    lock = threading.Lock()

    def counting(real):
        def f(fd):
            with lock:
                calls.append(fd)
            return real(fd)
        return f

    monkeypatch.setattr(os, "fsync", counting(os.fsync))
    if hasattr(os, "fdatasync"):  # (not on macOS and Windows, nor as simulated)
        monkeypatch.setattr(os, "fdatasync", counting(os.fdatasync))
    a = np.arange(40 * 30 * 20, dtype=np.uint16).reshape(40, 30, 20)
    opts = {"untiled": {}, "internal": {"tile": (16, 16, 8)},
            "internal-zstd-levels": {"tile": (16, 16, 8), "compression": "zstd", "levels": 2},
            "external": {"tile": (16, 16, 8), "storage": "external"}, "nrrd": {}}[kind]
    name = "v.nrrd" if kind == "nrrd" else "v.jnrrd"
    for durable in (True, False):
        path = tmp_path / str(durable) / name
        path.parent.mkdir()
        calls.clear()
        jnrrd.write(path, a, durable=durable, **opts)
        assert bool(calls) == durable
        np.testing.assert_array_equal(jnrrd.read(path)[0], a)
    if kind != "external":
        assert (tmp_path / "True" / name).read_bytes() == (tmp_path / "False" / name).read_bytes()


@pytest.mark.parametrize("range_sync", [True, False])
def test_writeback_is_started_while_tiles_are_written(tmp_path, monkeypatch, range_sync):
    """Every few MiB the writer starts the write-back the final fsync needs: with
    sync_file_range on Linux, else an fdatasync (fsync where there is none) on a background
    thread (jnrrd/_platform.py: ``start_writeback``, ``fdatasync``)."""
    from jnrrd import _platform
    from jnrrd.storage import writeback

    kicked = []
    if range_sync:
        monkeypatch.setattr(_platform, "_SYNC_FILE_RANGE",
                            lambda fd, off, n, flags: kicked.append(flags) or 0)
    else:
        monkeypatch.setattr(_platform, "_SYNC_FILE_RANGE", None)
        real = _platform.fdatasync
        monkeypatch.setattr(_platform, "fdatasync", lambda fd: (kicked.append(fd), real(fd)))
    monkeypatch.setattr(writeback, "_SYNC_EVERY", 1 << 16)
    a = np.arange(64 * 64 * 64, dtype=np.uint16).reshape(64, 64, 64)
    jnrrd.write(tmp_path / "v.jnrrd", a, tile=(16, 16, 16))
    assert kicked
    if range_sync:
        assert set(kicked) == {_platform._SYNC_FILE_RANGE_WRITE}
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "v.jnrrd")[0], a)


def test_a_large_write_leaves_the_page_cache(tmp_path, monkeypatch):
    """Past DROP_AFTER bytes a durable write drops what it has sent to disk from the page
    cache (POSIX_FADV_DONTNEED), in order, from the start of the file, two kicks behind.
    (The calls are recorded, and passed on: advice where the system has ``posix_fadvise``,
    nothing elsewhere.)"""
    from jnrrd import _platform
    from jnrrd.storage import writeback
    dropped = []
    real = _platform.drop_cached

    def drop_cached(fd, offset, length):
        dropped.append((offset, length))
        real(fd, offset, length)

    monkeypatch.setattr(_platform, "drop_cached", drop_cached)
    monkeypatch.setattr(writeback, "_SYNC_EVERY", 1 << 16)
    monkeypatch.setattr(writeback, "DROP_AFTER", 1 << 20)
    a = np.arange(64 * 64 * 512, dtype=np.uint16).reshape(512, 64, 64)  # 4 MiB
    for durable in (False, True):
        dropped.clear()
        jnrrd.write(tmp_path / "v.jnrrd", a, tile=(16, 16, 16), durable=durable)
        np.testing.assert_array_equal(jnrrd.read(tmp_path / "v.jnrrd")[0], a)
        if not durable:
            assert dropped == []
    size = (tmp_path / "v.jnrrd").stat().st_size
    assert dropped[0][0] == 0 and all(  # one run from the start, in order
        o == p + n for (p, n), (o, _) in zip(dropped, dropped[1:]))
    end = dropped[-1][0] + dropped[-1][1]
    # what was written before the first 1 MiB is dropped too; the last 2 kicks' bytes are not
    assert size - 3 * (1 << 16) - (1 << 18) <= end < size


@pytest.mark.parametrize(("where", "compression"), [
    ("put", None), ("put", "zstd"), ("pwrite_all", None), ("feed", None), ("feed", "zstd")])
def test_a_failure_while_storing_tiles_keeps_the_old_file(tmp_path, monkeypatch, where,
                                                          compression):
    """Rows are stored on a background thread and raw tiles written in place from the pool:
    an error there (a full disk) reaches the caller and leaves the old file and no leftovers."""
    from jnrrd.pyramid import builder
    from jnrrd.storage import writes
    from jnrrd.writing import sinks

    target = tmp_path / "v.jnrrd"
    old = np.full((48, 40, 64), 7, np.uint16)
    jnrrd.write(target, old, tile=(16, 16, 16))
    before = target.read_bytes()
    calls = {"n": 0}

    def failing(real):
        def f(*args, **kwargs):
            calls["n"] += 1
            if calls["n"] == 5:
                raise OSError(28, "No space left on device")
            return real(*args, **kwargs)
        return f

    if where == "put":
        monkeypatch.setattr(sinks.DirectSink, "put", failing(sinks.DirectSink.put))
        monkeypatch.setattr(sinks.DirectSink, "written", failing(sinks.DirectSink.written))
    elif where == "pwrite_all":
        monkeypatch.setattr(writes, "pwrite_all", failing(writes.pwrite_all))
    else:
        monkeypatch.setattr(builder, "_PARALLEL_VOXELS", 1)  # halves on the helper thread
        monkeypatch.setattr(builder.PyramidBuilder, "_rows",
                            failing(builder.PyramidBuilder._rows))
    new = np.arange(48 * 40 * 64, dtype=np.uint16).reshape(48, 40, 64)
    with pytest.raises(OSError, match="No space"):
        jnrrd.write(target, new, tile=(16, 16, 16), levels=3, downsample="mode",
                    compression=compression)
    assert calls["n"] >= 5
    assert target.read_bytes() == before
    assert os.listdir(tmp_path) == ["v.jnrrd"]
