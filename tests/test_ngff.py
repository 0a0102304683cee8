"""OME-NGFF 0.5 multiscales metadata (jnrrd.integrations.ngff): axes, per-level transforms."""

from __future__ import annotations

import numpy as np
import pytest

import jnrrd
from jnrrd.integrations import ngff

A = np.arange(4 * 5 * 6, dtype=np.int16).reshape(4, 5, 6)
LPS = {"space": "left-posterior-superior", "space_origin": [10, 20, 30],
       "space_units": ["mm", "mm", "mm"], "labels": ["x", "y", "z"]}


def _open(tmp_path, header, name="a.jnrrd"):
    jnrrd.write(tmp_path / name, A, header=header, tile=2, levels=2)
    return jnrrd.open(tmp_path / name)


def test_axis_aligned_space(tmp_path):
    h = dict(LPS, space_directions=[[0.5, 0, 0], [0, 0.75, 0], [0, 0, 2.0]])
    with _open(tmp_path, h) as vol:
        ome = ngff.multiscales(vol)
        assert not ngff.is_oblique(vol)
    assert ome["version"] == "0.5"
    ms = ome["multiscales"][0]
    assert ms["axes"] == [{"name": n, "type": "space", "unit": "millimeter"} for n in "zyx"]
    t0, t1 = (d["coordinateTransformations"] for d in ms["datasets"])
    assert [d["path"] for d in ms["datasets"]] == ["0", "1"]
    assert t0 == [{"type": "scale", "scale": [2.0, 0.75, 0.5]},
                  {"type": "translation", "translation": [30.0, 20.0, 10.0]}]
    # level 1: scale 2 on every axis, origin moved by half a level-0 voxel (cell centres)
    assert t1[0]["scale"] == [4.0, 1.5, 1.0]
    assert t1[1]["translation"] == pytest.approx([31.0, 20.375, 10.25])


def test_no_space_kinds_and_spacings(tmp_path):
    h = {"kinds": ["3-vector", "domain", "time"], "spacings": [None, 2.0, 3.0],
         "labels": ["c", "", "t"], "units": [None, "um", "s"]}
    jnrrd.write(tmp_path / "b.jnrrd", A[:3], header=h, tile={1: 2, 2: 2}, levels=2)
    with jnrrd.open(tmp_path / "b.jnrrd") as vol:
        ome = ngff.multiscales(vol, name="b")
        assert ngff.axis_names(vol) == ["c", "x", "t"]  # unlabeled: named by its type
    ms = ome["multiscales"][0]
    assert ms["name"] == "b"
    assert ms["axes"] == [{"name": "t", "type": "time", "unit": "second"},
                          {"name": "x", "type": "space", "unit": "micrometer"},
                          {"name": "c", "type": "channel"}]
    t1 = ms["datasets"][1]["coordinateTransformations"]
    assert t1 == [{"type": "scale", "scale": [6.0, 4.0, 1.0]},
                  {"type": "translation", "translation": [1.5, 1.0, 0.0]}]


def test_oblique_keeps_voxel_sizes_and_affine(tmp_path):
    h = dict(LPS, space_directions=[[0.6, 0.8, 0], [0, 0, 2.0], [-0.8, 0.6, 0]])
    with _open(tmp_path, h) as vol:
        assert ngff.is_oblique(vol)
        scale, _ = ngff.level_transform(vol, 0)
        aff = ngff.oblique_affines(vol)
        expect = np.asarray(vol.levels[1].affine)
    assert scale == pytest.approx([1.0, 2.0, 1.0])
    # C-order columns: the index columns reversed, the origin last
    assert np.allclose(np.asarray(aff[1])[:, :3], expect[:, :3][:, ::-1])
    assert np.allclose(np.asarray(aff[1])[:, 3], expect[:, 3])


def test_units():
    assert ngff.ngff_unit("mm") == "millimeter"
    assert ngff.ngff_unit("µm") == "micrometer"
    assert ngff.ngff_unit("furlong") == "furlong"
    assert ngff.ngff_unit(None) is None
    assert ngff.nrrd_unit("millimeter") == "mm"


@pytest.mark.parametrize("centers", [None, ["cell", "node", "cell"]])
def test_transforms_put_voxels_where_the_affine_does(tmp_path, centers):
    h = dict(LPS, space_directions=[[0.5, 0, 0], [0, 0.75, 0], [0, 0, 2.0]])
    if centers:
        h["centers"] = centers
    jnrrd.write(tmp_path / "g.jnrrd", np.zeros((16, 12, 9), np.uint8), header=h, tile=4,
                levels=[1, 2, [4, 2, 1]])
    with jnrrd.open(tmp_path / "g.jnrrd", index_order="C") as vol:
        for k, lv in enumerate(vol.levels):
            scale, trans = ngff.level_transform(vol, k)
            idx = np.array([2.0, 3.0, 1.0])  # C-order index (z, y, x)
            world = (lv.affine @ np.append(idx, 1.0))[:3]  # LPS (x, y, z)
            assert np.allclose(np.asarray(scale) * idx + trans, world[::-1]), k
