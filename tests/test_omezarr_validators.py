"""OME-Zarr exports pass ngff-zarr's validator (schema and structural rules) and
ome-zarr-models: axes named x, y, z (t, c by kind), channel and time axes before the space
axes, at most 3 space axes, label maps as OME-Zarr label images. Regression tests for the
exports both rejected (axis0/axis1/axis2 names, channel-last RGB/vector/DWI, 4 space axes)."""

from __future__ import annotations

import numpy as np
import pytest

import jnrrd
from jnrrd.clinical.labels import mark_label_map

zarr = pytest.importorskip("zarr")
models = pytest.importorskip("ome_zarr_models.v05.image")
image_label = pytest.importorskip("ome_zarr_models.v05.image_label")
ngff_zarr = pytest.importorskip(
    "ngff_zarr", reason='ngff-zarr is the ngff-validate extra: pip install -e ".[ngff-validate]"'
                        " (.ci/run installs it)")

LPS = {"space": "LPS", "space_origin": [1.0, 2.0, 3.0],
       "space_directions": [[0.5, 0, 0], [0, 0.5, 0], [0, 0, 2.0]]}
CASES = {
    "3-D": ((16, 12, 10), LPS, ["z", "y", "x"]),
    "3-D, no space": ((16, 12, 10), {}, ["z", "y", "x"]),
    "2-D": ((16, 12), {}, ["y", "x"]),
    "RGB": ((3, 16, 12, 10), {**LPS, "kinds": ["RGB-color", "domain", "domain", "domain"],
                               "space_directions": [None, *LPS["space_directions"]]},
            ["c", "z", "y", "x"]),
    "vector": ((3, 16, 12, 10), {"kinds": ["3-vector", "domain", "domain", "domain"]},
               ["c", "z", "y", "x"]),
    "DWI": ((7, 16, 12, 10), {"kinds": ["list", "domain", "domain", "domain"]},
            ["c", "z", "y", "x"]),
    "4 domain axes": ((16, 12, 10, 5), {}, ["c", "z", "y", "x"]),
    "time": ((16, 12, 10, 5), {"kinds": ["domain", "domain", "domain", "time"]},
             ["t", "z", "y", "x"]),
    "oblique": ((16, 12, 10), {**LPS, "space_directions": [[0, 0.5, 0], [0.5, 0, 0],
                                                            [0, 0, 2.0]]}, ["z", "y", "x"]),
}


def _validate(path, model: str = "image") -> dict:
    group = zarr.open_group(path, mode="r")
    attrs = group.attrs.asdict()
    ngff_zarr.validate(attrs, version="0.5", model=model)
    ngff_zarr.from_ngff_zarr(str(path), validate=True)
    (image_label.ImageLabel if model == "label" else models.Image).from_zarr(group)
    return attrs


@pytest.mark.parametrize("case", list(CASES))
def test_exports_validate_and_come_back(tmp_path, case):
    shape, header, names = CASES[case]
    data = (np.arange(np.prod(shape)) % 200).astype(np.uint8).reshape(shape)
    src, out, back = tmp_path / "v.jnrrd", tmp_path / "v.ome.zarr", tmp_path / "back.jnrrd"
    jnrrd.write(src, data, header, tile=8, levels=2)
    if case == "oblique":
        with pytest.warns(jnrrd.JnrrdWarning, match="space_directions"):
            jnrrd.convert(src, out)
    else:
        jnrrd.convert(src, out)
    attrs = _validate(out)
    assert [a["name"] for a in attrs["ome"]["multiscales"][0]["axes"]] == names
    jnrrd.convert(out, back)
    got, h = jnrrd.read(back)
    np.testing.assert_array_equal(got, data)
    assert h.get("kinds") == jnrrd.read_header(src).get("kinds")
    np.testing.assert_array_equal(jnrrd.read(back, level=1)[0], jnrrd.read(src, level=1)[0])


def test_a_label_map_is_an_ome_zarr_label_image(tmp_path):
    lab = np.zeros((16, 12, 10), np.uint16)
    lab[:5], lab[5:11] = 1, 7
    header = mark_label_map(LPS, [{"value": 1, "name": "liver", "color": [1.0, 0.0, 0.0]},
                                  {"value": 7, "name": "spleen"}])
    jnrrd.write(tmp_path / "l.jnrrd", lab, header, tile=8, levels=2)
    jnrrd.convert(tmp_path / "l.jnrrd", tmp_path / "l.ome.zarr")
    label = _validate(tmp_path / "l.ome.zarr", model="label")["ome"]["image-label"]
    colors = {c["label-value"]: c["rgba"] for c in label["colors"]}
    assert colors[1] == [255, 0, 0, 255] and set(colors) == {1, 7}
    assert {p["label-value"]: p["name"] for p in label["properties"]} == {1: "liver",
                                                                           7: "spleen"}
    g = zarr.open_group(tmp_path / "l.ome.zarr", mode="r")
    assert set(np.unique(g["1"][...])) <= {0, 1, 7}  # the mode pyramid, as written


def test_rfc5_affine_for_oblique_volumes(tmp_path):
    """Opt-in: each level's full index→world matrix as RFC-5's ``affine`` transform."""
    c, s = np.cos(0.3), np.sin(0.3)
    dirs = [[0.5 * c, 0.5 * s, 0], [-0.5 * s, 0.5 * c, 0], [0, 0, 2.0]]
    data = np.arange(16 * 12 * 10, dtype=np.int16).reshape(16, 12, 10)
    jnrrd.write(tmp_path / "o.jnrrd", data, {**LPS, "space_directions": dirs}, tile=8,
                levels=2)
    jnrrd.convert(tmp_path / "o.jnrrd", tmp_path / "o.ome.zarr", affine=True)
    ms = zarr.open_group(tmp_path / "o.ome.zarr", mode="r").attrs["ome"]["multiscales"][0]
    with jnrrd.open(tmp_path / "o.jnrrd") as vol:
        for k, ds in enumerate(ms["datasets"]):
            [t] = ds["coordinateTransformations"]
            m = np.asarray(t["affine"])  # rows and columns: z, y, x (Zarr order)
            a = vol.levels[k].affine  # columns x, y, z; rows world L, P, S
            np.testing.assert_allclose(m[::-1, :3][:, ::-1], a[:3, :3], atol=1e-12)
            np.testing.assert_allclose(m[::-1, 3], a[:3, 3], atol=1e-12)
    jnrrd.convert(tmp_path / "o.ome.zarr", tmp_path / "back.jnrrd")  # the header attribute
    assert jnrrd.read_header(tmp_path / "back.jnrrd")["space_directions"] == dirs
