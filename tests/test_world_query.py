"""vol.query(lower, upper, spacing=None, space=None) -> jnrrd.WorldRegion: level choice, the
smallest covering index box (oblique directions through the 8 corners), the affine of the
result, LPS/RAS boxes, and reads from a URL that fetch only the needed tiles."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from dicom_cases import rotation

import jnrrd

SPACE = {"space": "LPS", "space_origin": [-20.0, 10.0, 5.0],
         "space_directions": [[0.5, 0, 0], [0, 0.75, 0], [0, 0, 2.0]]}


def _write(path, shape=(64, 48, 32), header=SPACE, **kw):
    data = np.arange(np.prod(shape), dtype=np.int32).reshape(shape)
    jnrrd.write(path, data, header, tile=16, compression="zstd", **kw)
    return data


def test_axis_aligned_box(tmp_path):
    data = _write(tmp_path / "a.jnrrd")
    with jnrrd.open(tmp_path / "a.jnrrd") as vol:
        r = vol.query([-15.0, 13.0, 9.0], [-10.2, 20.0, 13.0])
    # x: (-15+20)/0.5 = 10 .. (-10.2+20)/0.5 = 19.6 -> cells 10..20; y: 4..13.33 -> 4..13;
    # z: 2..4 -> 2..4
    assert r.level == 0
    assert r.index == (slice(10, 21), slice(4, 14), slice(2, 5), )
    np.testing.assert_array_equal(r.data, data[10:21, 4:14, 2:5])
    np.testing.assert_allclose(r.affine @ [0, 0, 0, 1], [-15.0, 13.0, 9.0, 1.0])
    np.testing.assert_allclose(r.affine[:3, :3], np.diag([0.5, 0.75, 2.0]))
    assert isinstance(r, jnrrd.WorldRegion)


def test_the_coarsest_level_fine_enough(tmp_path):
    _write(tmp_path / "p.jnrrd", levels=4)  # x spacings 0.5, 1, 2, 4; z 2, 4, 8, 16
    with jnrrd.open(tmp_path / "p.jnrrd") as vol:
        box = ([-20.0, 10.0, 5.0], [10.0, 40.0, 60.0])
        assert vol.query(*box).level == 0
        assert vol.query(*box, spacing=1.0).level == 0  # level 1's z spacing is 4
        assert vol.query(*box, spacing=4.0).level == 1
        assert vol.query(*box, spacing=9.0).level == 2
        assert vol.query(*box, spacing=1000.0).level == 3
        r = vol.query(*box, spacing=4.0)
        np.testing.assert_array_equal(r.data, vol.levels[1][r.index])
        np.testing.assert_allclose(r.affine[:3, :3], vol.levels[1].affine[:3, :3])
        with pytest.raises(ValueError, match="spacing"):
            vol.query(*box, spacing=-1)


def test_oblique_box_covers_every_voxel_inside(tmp_path):
    dirs = rotation(0.4, -0.3, 0.7) @ np.diag([0.8, 1.1, 1.7])
    header = {"space": "LPS", "space_origin": [3.0, -7.0, 12.0],
              "space_directions": dirs.T.tolist()}
    data = _write(tmp_path / "o.jnrrd", shape=(30, 26, 22), header=header)
    lo, hi = np.array([0.0, -4.0, 15.0]), np.array([9.0, 6.0, 24.0])
    with jnrrd.open(tmp_path / "o.jnrrd") as vol:
        r = vol.query(lo, hi)
        aff = vol.affine
    ijk = np.stack(np.meshgrid(*[np.arange(n) for n in data.shape], indexing="ij"), -1)
    world = ijk.reshape(-1, 3) @ aff[:3, :3].T + aff[:3, 3]
    inside = ijk.reshape(-1, 3)[np.all((world >= lo) & (world <= hi), axis=1)]
    assert len(inside) > 50
    for a in range(3):  # every voxel centre inside the box is in the index box
        assert r.index[a].start <= inside[:, a].min() and inside[:, a].max() < r.index[a].stop
    # the index box is the corners' continuous indices, rounded by the cell rule
    corners = np.array(list(itertools.product(*zip(lo, hi, strict=True))))
    cont = np.linalg.solve(aff[:3, :3], (corners - aff[:3, 3]).T).T
    want = [slice(max(0, int(np.floor(c.min() + 0.5))), min(n, int(np.ceil(c.max() - 0.5)) + 1))
            for c, n in zip(cont.T, data.shape, strict=True)]
    assert list(r.index) == want
    np.testing.assert_array_equal(r.data, data[tuple(want)])
    start = [s.start for s in want]
    np.testing.assert_allclose(r.affine @ [1, 2, 3, 1], aff @ [start[0] + 1, start[1] + 2,
                                                            start[2] + 3, 1], atol=1e-9)


def test_boxes_in_ras(tmp_path):
    _write(tmp_path / "a.jnrrd")
    with jnrrd.open(tmp_path / "a.jnrrd") as vol:
        lps = vol.query([-15.0, 13.0, 9.0], [-10.2, 20.0, 13.0])
        ras = vol.query([10.2, -20.0, 9.0], [15.0, -13.0, 13.0], space="RAS")
        assert lps.index == ras.index
        np.testing.assert_array_equal(lps.data, ras.data)
        np.testing.assert_allclose(ras.affine @ [0, 0, 0, 1], [15.0, -13.0, 9.0, 1.0])
        np.testing.assert_allclose(np.diag(ras.affine)[:3], [-0.5, -0.75, 2.0])
        same = vol.query([-15.0, 13.0, 9.0], [-10.2, 20.0, 13.0], space="left-posterior-superior")
        assert same.index == lps.index


def test_c_order_and_non_spatial_axes(tmp_path):
    a = np.arange(3 * 20 * 10 * 8, dtype=np.float32).reshape(3, 20, 10, 8)
    jnrrd.write(tmp_path / "v.jnrrd", a, {"kinds": ["vector", "domain", "domain", "domain"],
                                          "space": "RAS", "space_origin": [0, 0, 0],
                                          "space_directions": [None, [1, 0, 0], [0, 2, 0],
                                                               [0, 0, 3]]})
    with jnrrd.open(tmp_path / "v.jnrrd", index_order="C") as vol:
        r = vol.query([2.0, 4.0, 6.0], [5.0, 8.0, 9.0])
        assert r.index == (slice(2, 4), slice(2, 5), slice(2, 6), slice(0, 3))
        np.testing.assert_array_equal(r.data, a.T[2:4, 2:5, 2:6, :])
        np.testing.assert_allclose(r.affine @ [0, 0, 0, 1], [2.0, 4.0, 6.0, 1.0])
        # columns in C order: z (3 mm along world z), y, x
        np.testing.assert_allclose(r.affine[:3, :3], [[0, 0, 1], [0, 2, 0], [3, 0, 0]])


def test_a_box_outside_the_volume_is_empty(tmp_path):
    _write(tmp_path / "a.jnrrd")
    with jnrrd.open(tmp_path / "a.jnrrd") as vol:
        r = vol.query([500.0, 500.0, 500.0], [600.0, 600.0, 600.0])
    assert r.data.size == 0 and r.data.dtype == np.int32


def test_without_space_fields_the_spacing_frame(tmp_path):
    data = np.arange(20 * 30, dtype=np.uint8).reshape(20, 30)
    jnrrd.write(tmp_path / "s.jnrrd", data, {"spacings": [2.0, 0.5]})
    with jnrrd.open(tmp_path / "s.jnrrd") as vol:
        r = vol.query([4.0, 3.0], [10.0, 6.0])
    assert r.index == (slice(2, 6), slice(6, 13))
    np.testing.assert_array_equal(r.data, data[2:6, 6:13])
    with jnrrd.open(tmp_path / "s.jnrrd") as vol, pytest.raises(jnrrd.UnsupportedError,
                                                                 match="LPS, RAS or LAS"):
        vol.query([4.0, 3.0], [10.0, 6.0], space="RAS")


def test_a_url_query_fetches_only_the_needed_tiles(tmp_path):
    pytest.importorskip("aiohttp")
    from http_server import RangeServer

    data = _write(tmp_path / "big.jnrrd", shape=(128, 128, 64), levels=3)
    size = (tmp_path / "big.jnrrd").stat().st_size
    with RangeServer(tmp_path) as server:
        with jnrrd.open(server.url_for("big.jnrrd")) as vol:
            server.reset()
            r = vol.query([-15.0, 13.0, 9.0], [-10.0, 20.0, 13.0])
            fetched = server.bytes_sent
        np.testing.assert_array_equal(r.data, data[r.index])
        assert fetched < size / 20, (fetched, size)


def test_an_empty_result_has_an_index_inside_the_level(tmp_path):
    _write(tmp_path / "a.jnrrd")
    with jnrrd.open(tmp_path / "a.jnrrd") as vol:
        for box in (([500.0] * 3, [600.0] * 3), ([-900.0] * 3, [-800.0] * 3)):
            r = vol.query(*box)
            assert r.data.size == 0
            for s, n in zip(r.index, vol.shape, strict=True):
                assert 0 <= s.start <= s.stop <= n
            np.testing.assert_array_equal(r.data, vol[r.index])


def test_messages_print_plain_numbers(tmp_path):
    _write(tmp_path / "a.jnrrd")
    with jnrrd.open(tmp_path / "a.jnrrd") as vol, pytest.raises(ValueError) as e:
        vol.query([15.0, 1.0], [20.0, 2.0])
    assert "np.float64" not in str(e.value) and "[15.0, 1.0]" in str(e.value)
    with jnrrd.open(tmp_path / "a.jnrrd") as vol, pytest.raises(ValueError) as e:
        vol.query([0.0] * 3, [1.0] * 3, spacing=np.float64(-2.0))
    assert str(e.value).endswith("got -2.0")


def test_world_bounds_and_the_centre_of_a_four_d_oblique_volume(tmp_path):
    dirs = rotation(0.4, -0.3, 0.7) @ np.diag([0.8, 1.1, 1.7])
    header = {"space": "LPS", "space_origin": [3.0, -7.0, 12.0],
              "space_directions": [*dirs.T.tolist(), None],
              "kinds": ["domain"] * 3 + ["time"]}
    _write(tmp_path / "t.jnrrd", shape=(20, 16, 12, 3), header=header)
    with jnrrd.open(tmp_path / "t.jnrrd") as vol:
        lo, hi = vol.world_bounds()
        corners = np.array(list(itertools.product(*[(0, n - 1) for n in (20, 16, 12)])))
        world = corners @ dirs.T + [3.0, -7.0, 12.0]
        np.testing.assert_allclose(lo, world.min(axis=0), atol=1e-9)
        np.testing.assert_allclose(hi, world.max(axis=0), atol=1e-9)
        centre = (lo + hi) / 2  # the volume's centre, whatever its axes
        np.testing.assert_allclose(centre, dirs @ [9.5, 7.5, 5.5] + [3.0, -7.0, 12.0])
        r = vol.query(centre - 2, centre + 2)
        assert r.data.shape[3] == 3 and r.data.size > 0
        ras_lo, ras_hi = vol.world_bounds(space="RAS")
        np.testing.assert_allclose(ras_lo, [-hi[0], -hi[1], lo[2]])
        np.testing.assert_allclose(ras_hi, [-lo[0], -lo[1], hi[2]])
        lo1, hi1 = vol.world_bounds(level=0)
        np.testing.assert_array_equal(lo1, lo)
