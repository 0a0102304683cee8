"""Raw tiles read a run at a time (jnrrd/engine/raw_runs.py): neighbours along the first axis
stored one after another are copied by one assignment. Every read equals NumPy's, whatever
the selection, edge tiles, index order or ``out``; a run is one ``get_ranges`` call; what the
runs cannot carry (checksums, byte order, bfloat16, changed tiles, a damaged file) takes the
per-tile path with its errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jnrrd
from jnrrd.engine import raw_runs
from jnrrd.storage import objects


def _volume(shape, dtype="uint16", seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 60000, shape).astype(dtype)


@pytest.fixture
def counted(monkeypatch):
    """The byte ranges the reads asked ``get_ranges`` for."""
    asked: list[tuple[int, int]] = []
    real = objects.HeldObjects.get_ranges

    def get_ranges(self, key, ranges, **kw):
        asked.extend(ranges)
        return real(self, key, ranges, **kw)

    monkeypatch.setattr(objects.HeldObjects, "get_ranges", get_ranges)
    return asked


def test_a_full_read_copies_rows_of_tiles_in_one_request_each(tmp_path, counted):
    a = _volume((64, 24, 20))
    jnrrd.write(tmp_path / "v.jnrrd", a, tile=8)
    got, _ = jnrrd.read(tmp_path / "v.jnrrd")
    np.testing.assert_array_equal(got, a)
    tile = 8 * 8 * 8 * 2
    tile_reads = [r for r in counted if r[1] - r[0] >= tile]
    # 8 tiles per row along the first axis: 3 x 3 rows, each one request of 8 tiles
    assert len(tile_reads) == 9
    assert all(b - a_ == 8 * tile for a_, b in tile_reads)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_any_selection_equals_numpy(tmp_path_factory, data):
    shape = tuple(data.draw(st.integers(1, 20)) for _ in range(3))
    tile = tuple(data.draw(st.integers(1, 6)) for _ in range(3))
    dtype = data.draw(st.sampled_from(["uint8", "int16", "float32", "float64"]))
    edge = data.draw(st.sampled_from(["pad", "variable"]))
    a = _volume(shape, dtype, seed=data.draw(st.integers(0, 9)))
    path = tmp_path_factory.mktemp("runs") / "v.jnrrd"
    jnrrd.write(path, a, tile=tile, edge=edge)

    def axis(n):
        start = data.draw(st.integers(0, n - 1))
        stop = data.draw(st.integers(start + 1, n))
        step = data.draw(st.sampled_from([1, 1, 1, 2]))
        return slice(start, stop, step)

    sel = tuple(axis(n) for n in shape)
    with jnrrd.open(path) as vol:
        np.testing.assert_array_equal(vol[sel], a[sel])
        np.testing.assert_array_equal(vol[...], a)


def test_c_index_order_and_a_strided_out(tmp_path):
    a = _volume((40, 16, 12))
    jnrrd.write(tmp_path / "v.jnrrd", a, tile=4)
    with jnrrd.open(tmp_path / "v.jnrrd") as vol:
        big = np.zeros((80, 16, 12), a.dtype)
        out = big[::2]  # every other plane of a bigger array
        vol.read(..., out=out)
        np.testing.assert_array_equal(out, a)
        assert not big[1::2].any()
    with jnrrd.open(tmp_path / "v.jnrrd", index_order="C") as vol:
        np.testing.assert_array_equal(vol[...], a.T)


@pytest.mark.parametrize("case", ["checksums", "big-endian", "bfloat16"])
def test_what_runs_cannot_carry_is_read_tile_by_tile(tmp_path, case, monkeypatch):
    a = _volume((32, 8, 8))
    path = tmp_path / "v.jnrrd"
    if case == "checksums":
        jnrrd.write(path, a, tile=8, checksum="crc32c")
    elif case == "big-endian":  # the same bytes, declared big-endian (same header length)
        jnrrd.write(path, a, tile=8)
        raw = path.read_bytes()
        assert raw.count(b'"endian": "little"') == 1
        path.write_bytes(raw.replace(b'"endian": "little"', b'"endian":    "big"'))
        a = a.view(">u2")
    else:
        ml_dtypes = pytest.importorskip("ml_dtypes")
        a = a.astype(np.float32).astype(ml_dtypes.bfloat16)
        jnrrd.write(path, a, tile=8)
    used: list[int] = []
    real = raw_runs.RawRuns._place
    monkeypatch.setattr(raw_runs.RawRuns, "_place",
                        lambda self, run, data: (used.append(len(run)), real(self, run, data)))
    got, _ = jnrrd.read(path)
    np.testing.assert_array_equal(got, a)
    assert used == []


def test_tile_entries_longer_than_a_tile_are_read_on_their_own(tmp_path):
    """A size table may list bytes past a raw tile's end (here 16 more after each tile):
    the tile is its first bytes, and no run takes the following bytes for the next tile."""
    a = _volume((16, 4, 4))
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, a, tile=4)
    raw = path.read_bytes()
    head, body = raw.split(b"\n\n", 1)
    lines = [json.loads(line) for line in head.split(b"\n")]
    fields = {k: v for d in lines for k, v in d.items()}
    offsets, sizes = fields["tile:offset_table"], fields["tile:size_table"]
    tiles = [raw[o:o + s] for o, s in zip(offsets, sizes, strict=True)]
    for _ in range(2):  # the header's length settles once the offsets are known
        data_start = len(head) + 2
        fields["tile:offset_table"] = [data_start + i * (len(t) + 16)
                                       for i, t in enumerate(tiles)]
        fields["tile:size_table"] = [len(t) + 16 for t in tiles]
        head = b"\n".join(json.dumps({k: v}).encode() for k, v in fields.items())
    assert len(head) + 2 == data_start
    path.write_bytes(head + b"\n\n" + b"".join(t + b"\xff" * 16 for t in tiles))
    got, _ = jnrrd.read(path)
    np.testing.assert_array_equal(got, a)


def test_a_run_that_cannot_be_read_is_read_tile_by_tile(tmp_path, monkeypatch):
    a = _volume((64, 8, 8))
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, a, tile=8)
    real = objects.HeldObjects.get_ranges
    tile = 8 ** 3 * 2

    def get_ranges(self, key, ranges, **kw):
        if any(b - a_ > tile for a_, b in ranges):
            raise jnrrd.DataError("a run's range refused")
        return real(self, key, ranges, **kw)

    monkeypatch.setattr(objects.HeldObjects, "get_ranges", get_ranges)
    got, _ = jnrrd.read(path)
    np.testing.assert_array_equal(got, a)


def test_a_volume_open_for_writing_reads_its_unstored_tiles(tmp_path):
    a = _volume((64, 16, 8))
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, a, tile=8)
    with jnrrd.open(path, mode="r+") as vol:
        vol[:, :8, :] = 7
        a[:, :8, :] = 7
        np.testing.assert_array_equal(vol[...], a)
    got, _ = jnrrd.read(path)
    np.testing.assert_array_equal(got, a)
