"""Editable volumes (docs/editing.md): ``jnrrd.create``, ``jnrrd.open(path, mode="r+")``,
region writes with NumPy's selection and broadcasting rules, ``append``, ``resize``,
commits and aborts, sparse tiles, the refusals, and what a commit costs (the storage
layer's own counts: a tile-aligned write reads nothing back; one changed tile rewrites at
most two tiles per level and the header)."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from editing_support import assert_file_equals, levels_of

import jnrrd
from jnrrd import _platform
from jnrrd.errors import LockError, UnsupportedError

LAYOUTS = ["internal", "external"]


@pytest.fixture(params=LAYOUTS)
def storage(request: pytest.FixtureRequest) -> str:
    return request.param


def test_create_gives_an_empty_sparse_volume_open_for_writing(tmp_path, storage):
    path = tmp_path / "v.jnrrd"
    with jnrrd.create(path, (20, 12, 9), "int16", tile=8, levels=2, fill_value=-3,
                      storage=storage) as vol:
        assert vol.mode == "r+" and isinstance(vol, jnrrd.Volume)
        assert vol.shape == (20, 12, 9) and vol.dtype == np.int16
        np.testing.assert_array_equal(vol[...], np.full((20, 12, 9), -3, np.int16))
    h = jnrrd.read_header(path)
    if storage == "internal":
        assert set(h["tile:offset_table"]) == {None}
        assert h["tile:header_room"] % 4096 == 0
    else:
        assert {e["file"] for e in h["tile:files"]} == {None}
    assert_file_equals(path, np.full((20, 12, 9), -3, np.int16), 2)


def test_region_writes_follow_numpy(tmp_path, storage):
    path = tmp_path / "v.jnrrd"
    model = np.zeros((17, 11, 6), np.float32)
    rng = np.random.default_rng(5)
    keys = [np.s_[2:9, 3, ...], np.s_[::3, ::-2, 4], np.s_[-1], np.s_[1:16:4, 2:, :2],
            np.s_[..., 5], np.s_[:, :, :]]
    with jnrrd.create(path, model.shape, model.dtype, tile=(4, 5, 3), levels=2,
                      storage=storage) as vol:
        for key in keys:
            value = rng.normal(size=model[key].shape).astype(np.float32)
            vol[key] = value
            model[key] = value
            vol[key] = 2.5  # broadcast a scalar, then a row
            model[key] = 2.5
            np.testing.assert_array_equal(vol[...], model)
        vol[3] = np.arange(6, dtype=np.float32)  # broadcast along the missing axes
        model[3] = np.arange(6)
        np.testing.assert_array_equal(vol[...], model)
        with pytest.raises(ValueError):
            vol[0:2, 0:2, 0:2] = np.zeros((3, 2, 2))
        with pytest.raises(IndexError):
            vol[17] = 1
    assert_file_equals(path, model, 2)


def test_c_index_order_reverses_selections_and_axes(tmp_path, storage):
    path = tmp_path / "v.jnrrd"
    with jnrrd.create(path, (5, 7, 9), "uint8", tile=4, storage=storage,
                      index_order="C") as vol:
        assert vol.shape == (5, 7, 9)
        vol[1, 2:5, :] = np.arange(9, dtype=np.uint8)
        vol.append(np.full((7, 9), 4, np.uint8))  # the last header axis is C's first
        assert vol.shape == (6, 7, 9)
    data, header = jnrrd.read(path)
    assert header["sizes"] == [9, 7, 6]
    c = data.T
    np.testing.assert_array_equal(c[1, 2:5, :], np.tile(np.arange(9), (3, 1)))
    assert (c[5] == 4).all() and (c[0] == 0).all()


def test_changes_are_seen_only_after_commit(tmp_path, storage):
    path = tmp_path / "v.jnrrd"
    vol = jnrrd.create(path, (16, 16, 8), "uint16", tile=8, levels=2, storage=storage)
    vol[:8, :8, :] = 7
    assert (jnrrd.read(path)[0] == 0).all()  # not committed yet
    early = jnrrd.open(path)
    vol.commit()
    late = jnrrd.open(path)
    vol[8:, 8:, :] = 9
    vol.commit()
    # no tile a commit names is overwritten: each reader keeps the version it opened
    assert (early[...] == 0).all()
    assert (late[:8, :8, :] == 7).all() and (late[8:, 8:, :] == 0).all()
    early.close()
    late.close()
    vol.close()
    model = np.zeros((16, 16, 8), np.uint16)
    model[:8, :8, :] = 7
    model[8:, 8:, :] = 9
    assert_file_equals(path, model, 2)


def test_read_into_out_sees_uncommitted_writes(tmp_path):
    """``vol.read(selection, out=)`` on a volume open for writing reads its own writes,
    partial ones (kept as patches until a read needs them) included."""
    path = tmp_path / "v.jnrrd"
    with jnrrd.create(path, (16, 16), "uint16", tile=8) as vol:
        vol[...] = 4
    with jnrrd.open(path, mode="r+") as vol:
        vol[1:3, 2] = 9  # part of a tile not read yet
        out = np.empty((16, 16), np.uint16, order="F")
        assert vol.read(..., out=out) is out
        want = np.full((16, 16), 4, np.uint16)
        want[1:3, 2] = 9
        np.testing.assert_array_equal(out, want)
        vol.abort()


def test_with_block_commits_on_success_and_aborts_on_error(tmp_path, storage):
    path = tmp_path / "v.jnrrd"
    jnrrd.create(path, (10, 10, 10), "uint8", tile=5, storage=storage).close()
    with jnrrd.open(path, mode="r+") as vol:
        vol[...] = 1
    with pytest.raises(KeyError), jnrrd.open(path, mode="r+") as vol:
        vol[...] = 2
        vol.append(np.zeros((10, 10, 3), np.uint8))
        raise KeyError("stop")
    assert_file_equals(path, np.ones((10, 10, 10), np.uint8), 1)
    with jnrrd.open(path, mode="r+") as vol:  # the lock went with the failed block
        vol[0, 0, 0] = 5
        vol.abort()
        assert vol[0, 0, 0] == 1
        vol.resize((4, 4, 4))
        vol.abort()
        assert vol.shape == (10, 10, 10)


def test_close_with_uncommitted_changes_warns_and_drops_them(tmp_path):
    path = tmp_path / "v.jnrrd"
    vol = jnrrd.create(path, (8, 8, 8), "uint8", tile=4)
    vol[...] = 3
    with pytest.warns(jnrrd.JnrrdWarning, match="uncommitted"):
        vol.close()
    assert (jnrrd.read(path)[0] == 0).all()
    with pytest.raises(jnrrd.JnrrdError, match="closed"):
        vol[0] = 1


def test_append_and_resize(tmp_path, storage):
    path = tmp_path / "v.jnrrd"
    model = np.full((6, 5, 1), 9, np.int32)
    with jnrrd.create(path, model.shape, np.int32, tile=(4, 4, 3), levels=2, fill_value=9,
                      storage=storage) as vol:
        for t in range(7):
            frame = np.full((6, 5), t, np.int32)
            vol.append(frame)  # one frame: one axis less
            model = np.concatenate([model, frame[..., None]], axis=2)
        vol.append(np.ones((2, 5, 8), np.int32), axis=0)
        model = np.concatenate([model, np.ones((2, 5, 8), np.int32)], axis=0)
        with pytest.raises(ValueError, match="append"):
            vol.append(np.ones((3, 3, 1), np.int32))
        vol.commit()
        vol.resize((10, 9, 3))  # grow one axis, shrink another: new voxels read the fill
        grown = np.full((10, 9, 3), 9, np.int32)
        grown[:8, :5] = model[:, :, :3]
        model = grown
        np.testing.assert_array_equal(vol[...], model)
        with pytest.raises(ValueError):
            vol.resize((10, 9))
        with pytest.raises(ValueError):
            vol.resize((10, 0, 3))
    assert_file_equals(path, model, 2)


def test_all_padding_tiles_stay_sparse(tmp_path):
    path = tmp_path / "v.jnrrd"
    with jnrrd.create(path, (8, 8, 8), "uint8", tile=4, fill_value=5) as vol:
        vol[:4, :4, :4] = 1
        vol[4:, 4:, 4:] = 5  # the fill: nothing to store
    offsets = jnrrd.read_header(path)["tile:offset_table"]
    assert sum(o is not None for o in offsets) == 1
    with jnrrd.open(path, mode="r+") as vol:
        vol[:4, :4, :4] = 5  # back to the fill: sparse again
    assert set(jnrrd.read_header(path)["tile:offset_table"]) == {None}


def test_writing_a_volume_opened_for_reading_is_refused(tmp_path):
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, np.zeros((8, 8), np.uint8), tile=4, levels=2)
    with jnrrd.open(path) as vol:
        assert vol.mode == "r"
        for attempt in (lambda: vol.__setitem__(0, 1), lambda: vol.append(np.zeros(8)),
                        lambda: vol.resize((4, 4)), vol.commit, vol.abort,
                        lambda: vol.levels[1].__setitem__(0, 1)):
            with pytest.raises(UnsupportedError, match="mode='r\\+'"):
                attempt()
    with jnrrd.open(path, mode="r+") as vol, pytest.raises(UnsupportedError, match="level 0"):
        vol.levels[1][0] = 1
    with pytest.raises(ValueError, match="mode"):
        jnrrd.open(path, mode="w")


def test_untiled_and_classic_nrrd_files_say_to_convert(tmp_path):
    untiled = tmp_path / "u.jnrrd"
    nrrd = tmp_path / "c.nrrd"
    jnrrd.write(untiled, np.zeros((4, 4), np.uint8))
    jnrrd.write(nrrd, np.zeros((4, 4), np.uint8))
    for path in (untiled, nrrd):
        with pytest.raises(UnsupportedError, match="convert"):
            jnrrd.open(path, mode="r+")
        jnrrd.open(path, mode="r+" if False else "r").close()
        assert not [n for n in os.listdir(tmp_path) if "lock" in n]  # the lock went too


def test_one_writer_at_a_time_in_one_process(tmp_path, storage):
    path = tmp_path / "v.jnrrd"
    vol = jnrrd.create(path, (8, 8), "uint8", tile=4, storage=storage)
    with pytest.raises(LockError, match="another writer"):
        jnrrd.open(path, mode="r+")
    with pytest.raises(LockError):
        jnrrd.create(path, (8, 8), "uint8", tile=4)
    assert isinstance(LockError("x"), jnrrd.JnrrdError)
    with jnrrd.open(path) as reader:  # readers never wait for the lock
        assert reader.shape == (8, 8)
    vol.close()
    jnrrd.open(path, mode="r+").close()


def test_a_file_written_by_write_is_rewritten_once_then_edited_in_place(tmp_path):
    path = tmp_path / "v.jnrrd"
    data = np.arange(24 * 20 * 10, dtype=np.uint16).reshape(24, 20, 10)
    jnrrd.write(path, data, tile=8, levels=2, compression="zstd")
    inode = os.stat(path).st_ino
    with jnrrd.open(path, mode="r+") as vol:
        vol[0] = 1
    assert os.stat(path).st_ino != inode  # the first commit reserves header room: a rewrite
    assert "tile:header_room" in jnrrd.read_header(path)
    inode = os.stat(path).st_ino
    with jnrrd.open(path, mode="r+") as vol:
        vol[1] = 2
    assert os.stat(path).st_ino == inode  # then commits happen in place
    data[0], data[1] = 1, 2
    assert_file_equals(path, data, 2)


def test_compact_drops_superseded_bytes(tmp_path, storage):
    path = tmp_path / "v.jnrrd"
    model = np.zeros((32, 32, 16), np.uint16)
    with jnrrd.create(path, model.shape, "uint16", tile=8, compression="raw",
                      storage=storage) as vol:
        vol[...] = 1
    for k in range(3):
        with jnrrd.open(path, mode="r+") as vol:
            vol[...] = k + 2
    model[...] = 4
    freed = jnrrd.compact(path)
    if storage == "internal":
        assert freed >= 3 * model.nbytes
        room = jnrrd.read_header(path)["tile:header_room"]
        assert os.path.getsize(path) == room + model.nbytes
    assert_file_equals(path, model, 1)
    with jnrrd.open(path) as vol:
        from jnrrd.editing.info import dead_bytes

        assert dead_bytes(vol) in (0, None)


def test_tile_aligned_writes_read_nothing_back(tmp_path, storage, monkeypatch):
    path = tmp_path / "v.jnrrd"
    with jnrrd.create(path, (32, 32, 32), "uint16", tile=16, compression="zstd",
                      storage=storage) as vol:
        vol[...] = 1
    reads = []
    real_pread = _platform.pread

    def pread(fd, n, off):
        reads.append(n)
        return real_pread(fd, n, off)

    monkeypatch.setattr(_platform, "pread", pread)  # every positional read of the package
    with jnrrd.open(path, mode="r+") as vol:
        vol[16:32, 0:16, :] = 7  # two whole tiles
        vol.append(np.full((32, 32, 16), 3, np.uint16))  # a whole new tile row
        vol.commit()
        assert vol.counters.bytes_read == 0 and vol.counters.reads == 0
        assert reads == []
        vol[0, 0, 0] = 5  # part of a tile: that tile is read back
        vol.commit()
        assert vol.counters.reads == 1
        assert len(reads) == (storage == "internal")  # (external tiles: a file each)


def test_one_changed_tile_rewrites_at_most_two_tiles_per_level_and_the_header(tmp_path):
    path = tmp_path / "v.jnrrd"
    n, t, nlevels = 128, 16, 4
    data = np.random.default_rng(0).integers(0, 200, (n, n, n), dtype=np.uint8)
    with jnrrd.create(path, data.shape, "uint8", tile=t, levels=nlevels) as vol:
        vol[...] = data
    size = os.path.getsize(path)
    with jnrrd.open(path, mode="r+") as vol:
        vol[t:2 * t, 0:t, 3 * t:4 * t] = 9
        before = vol.counters.bytes_written, vol.counters.writes
        vol.commit()
        wrote = vol.counters.bytes_written - before[0]
        writes = vol.counters.writes - before[1]
        header = len(jnrrd.read_header(path)) and vol._s.layout.header_len
        journal = vol.counters.journal_bytes
    tile_bytes = t**3  # raw bound of one stored tile (zstd only shrinks these)
    assert writes <= 2 * nlevels + 2  # tiles, the journal, the header in place
    assert wrote - journal <= 2 * nlevels * (tile_bytes + 64) + vol._s.layout.room
    assert journal <= vol._s.layout.room and header <= vol._s.layout.room
    assert os.path.getsize(path) - size <= 2 * nlevels * (tile_bytes + 64)
    data[t:2 * t, 0:t, 3 * t:4 * t] = 9
    assert_file_equals(path, data, nlevels)


@pytest.mark.slow
def test_one_changed_tile_of_a_512_cube_costs_its_tiles_and_the_header(tmp_path):
    path = tmp_path / "v.jnrrd"
    n, t, nlevels = 512, 64, 4
    rng = np.random.default_rng(1)
    data = rng.integers(0, 4, (n, n, n), dtype=np.uint8)
    with jnrrd.create(path, data.shape, "uint8", tile=t, levels=nlevels) as vol:
        vol[...] = data
    size = os.path.getsize(path)
    with jnrrd.open(path, mode="r+") as vol:
        vol[2 * t:3 * t, t:2 * t, 0:t] = 1
        before = vol.counters.bytes_written, vol.counters.writes
        vol.commit()
        layout = vol._s.layout
        wrote = vol.counters.bytes_written - before[0] - vol.counters.journal_bytes
        writes = vol.counters.writes - before[1]
    assert writes <= 2 * nlevels + 2
    assert wrote <= 2 * nlevels * (t**3 + 64) + layout.room
    assert os.path.getsize(path) - size <= 2 * nlevels * (t**3 + 64)
    data[2 * t:3 * t, t:2 * t, 0:t] = 1
    with jnrrd.open(path) as vol:
        for k, want in enumerate(levels_of(data, nlevels)):
            np.testing.assert_array_equal(vol.levels[k][...], want)


def test_levels_equal_a_fresh_write(tmp_path, storage):
    edited, fresh = tmp_path / "e.jnrrd", tmp_path / "f.jnrrd"
    rng = np.random.default_rng(3)
    with jnrrd.create(edited, (21, 17, 13), "uint8", tile=(8, 4, 4), levels=3,
                      downsample="mode", storage=storage) as vol:
        for _ in range(5):
            lo = rng.integers(0, 10, 3)
            vol[lo[0]:lo[0] + 9, lo[1]:lo[1] + 7, lo[2]:] = rng.integers(0, 3, 1)[0]
            vol.commit()
        vol.append(rng.integers(0, 3, (21, 17, 5)).astype(np.uint8))
        model = vol[...]
    jnrrd.write(fresh, model, tile=(8, 4, 4), levels=3, downsample="mode")
    for k in range(3):
        np.testing.assert_array_equal(jnrrd.read(edited, level=k)[0],
                                      jnrrd.read(fresh, level=k)[0])


def test_quality_fields_that_an_edit_invalidates_are_dropped_with_a_warning(tmp_path):
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, np.ones((16, 16), np.uint8), tile=8, levels=2, quality=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vol = jnrrd.open(path, mode="r+")
    vol[0, 0] = 3
    with pytest.warns(jnrrd.JnrrdWarning, match="level_quality"):
        vol.commit()
    vol.close()
    assert "tile:level_quality" not in jnrrd.read_header(path)
