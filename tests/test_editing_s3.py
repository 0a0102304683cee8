"""Editable volumes on S3 (moto's server on 127.0.0.1; docs/editing.md, "Object stores"):
both layouts take writes, appends, resizes and commits by URL and read back equal; the lock
object keeps a second writer out and is removed on close; a stale one is taken over only
through a conditional overwrite; and a reader in a process that once wrote or listed a
prefix still sees what other processes commit there later."""

from __future__ import annotations

import time

import numpy as np
import pytest
from editing_support import assert_file_equals

import jnrrd
from jnrrd.storage.locks import FsspecOps, ObjectLock, lock_name

s3fs = pytest.importorskip("s3fs")
pytestmark = pytest.mark.timeout(300)


def _fs(s3):
    return s3fs.S3FileSystem(skip_instance_cache=True, **s3.storage_options)


@pytest.mark.parametrize("storage", ["internal", "external"])
def test_edit_by_url(s3, storage):
    url, so = s3.url(f"e/{storage}.jnrrd"), s3.storage_options
    model = np.zeros((20, 14, 9), np.uint16)
    rng = np.random.default_rng(4)
    with jnrrd.create(url, model.shape, "uint16", tile=(8, 8, 4), levels=2, storage=storage,
                      storage_options=so) as vol:
        for _ in range(3):
            lo = rng.integers(0, 8, 3)
            vol[lo[0]:lo[0] + 9, lo[1]:, :lo[2] + 2] = 7 + lo[0]
            model[lo[0]:lo[0] + 9, lo[1]:, :lo[2] + 2] = 7 + lo[0]
            vol.commit()
        vol.append(np.full((20, 14, 5), 3, np.uint16))
        model = np.concatenate([model, np.full((20, 14, 5), 3, np.uint16)], axis=2)
        vol.commit()
        vol.resize((20, 10, 12))
        model = model[:, :10, :12].copy()
    assert_file_equals(url, model, 2, storage_options=so)
    with jnrrd.open(url, mode="r+", storage_options=so) as vol:
        vol[0] = 1
        model[0] = 1
    assert_file_equals(url, model, 2, storage_options=so)
    names = _fs(s3).find(f"{s3.bucket}/e/")
    assert not [n for n in names if "lock" in n]  # the lock object went with the writer
    if storage == "external":  # superseded tile objects were removed
        header = jnrrd.read_header(url, storage_options=so)
        named = {e["file"] for e in header.get("tile:files", []) if e["file"]}
        base = f"{s3.bucket}/e/{header['tile:base_dir']}/"
        assert {n[len(base):] for n in names if n.startswith(base)} == named


def test_the_lock_object_keeps_a_second_writer_out(s3):
    url, so = s3.url("l/v.jnrrd"), s3.storage_options
    vol = jnrrd.create(url, (8, 8), "uint8", tile=4, storage_options=so)
    with pytest.raises(jnrrd.LockError, match="another writer"):
        jnrrd.open(url, mode="r+", storage_options=so)
    vol.close()
    jnrrd.open(url, mode="r+", storage_options=so).close()


def test_a_stale_lock_object_is_taken_over_once(s3):
    fs = _fs(s3)
    path = f"{s3.bucket}/l2/{lock_name('v.jnrrd')}"
    dead = ObjectLock(FsspecOps(fs), path, "dead", stale_after=0.2)  # a writer that died
    time.sleep(0.5)
    taker = ObjectLock(FsspecOps(fs), path, "taker", stale_after=0.2)
    with pytest.raises(jnrrd.LockError):  # the dead writer's lock is gone: it cannot commit
        dead.refresh()
    with pytest.raises(jnrrd.LockError):  # a second taker of the same stale version loses
        FsspecOps(fs).replace(path, b"x", dead.version)
    taker.refresh()
    taker.release()
    assert not fs.exists(path)


def test_a_writer_that_lost_its_lock_does_not_commit(s3):
    url, so = s3.url("l3/v.jnrrd"), s3.storage_options
    vol = jnrrd.create(url, (8, 8), "uint8", tile=4, storage_options=so, stale_after=0.2)
    vol[...] = 5
    time.sleep(0.5)
    other = jnrrd.open(url, mode="r+", storage_options=so, stale_after=0.2)  # takes it over
    with pytest.raises(jnrrd.LockError, match="another writer"):
        vol.commit()
    vol.close()
    other.close()
    assert (jnrrd.read(url, storage_options=so)[0] == 0).all()


def test_a_reader_sees_later_commits_of_other_processes(s3, tmp_path):
    """A process that wrote (and so listed) a prefix must not read an object's version
    from that listing: the object may have been replaced by another process since."""
    url, so = s3.url("r/v.jnrrd"), s3.storage_options
    jnrrd.write(url, np.zeros((8, 8), np.uint8), tile=4, storage_options=so)
    local = tmp_path / "v.jnrrd"
    jnrrd.write(local, np.ones((8, 8), np.uint8), tile=4)
    _fs(s3).put(str(local), f"{s3.bucket}/r/v.jnrrd")  # another process replaces it
    assert (jnrrd.read(url, storage_options=so)[0] == 1).all()
