"""NIfTI ⇄ JNRRD (nibabel): geometry against nibabel and SimpleITK (ITK's NIfTI reader) to
1e-6 mm, values exactly; scl_slope, 4-D time axes, label intents, writing back."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import jnrrd
from jnrrd.errors import MissingDependencyError

nib = pytest.importorskip("nibabel")
sitk = pytest.importorskip("SimpleITK")

TOL = 1e-6


def _rotation(ax: float, ay: float, az: float) -> np.ndarray:
    cx, sx, cy, sy, cz, sz = (np.cos(ax), np.sin(ax), np.cos(ay), np.sin(ay), np.cos(az),
                              np.sin(az))
    rx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    ry = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    rz = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    return rz @ ry @ rx


def _oblique_affine() -> np.ndarray:
    aff = np.eye(4)
    aff[:3, :3] = _rotation(0.3, -0.2, 0.5) @ np.diag([0.9, 1.1, 2.5])
    aff[:3, 3] = [-91.5, 12.25, 40.0]
    return aff


def _data(shape=(9, 8, 7), dtype=np.int16) -> np.ndarray:
    return (np.arange(np.prod(shape)) % 3001 - 1000).astype(dtype).reshape(shape)


def _lps_geometry_of(vol: jnrrd.Volume) -> tuple[np.ndarray, np.ndarray]:
    """(origin, 3x3 matrix whose columns are the spatial directions) of level 0."""
    h = vol.header
    assert h["space"] == "left_posterior_superior"
    cols = [d for d in h["space_directions"] if d is not None]
    return np.asarray(h["space_origin"]), np.asarray(cols).T


def _sitk_geometry(path) -> tuple[np.ndarray, np.ndarray]:
    img = sitk.ReadImage(str(path))
    d = np.asarray(img.GetDirection()).reshape(3, 3) * np.asarray(img.GetSpacing())
    return np.asarray(img.GetOrigin()), d


def _nib_lps(path) -> tuple[np.ndarray, np.ndarray]:
    aff = np.diag([-1.0, -1.0, 1.0, 1.0]) @ nib.load(str(path)).affine
    return aff[:3, 3], aff[:3, :3]


def test_oblique_sform_matches_nibabel_and_simpleitk(tmp_path):
    p = tmp_path / "obl.nii.gz"
    img = nib.Nifti1Image(_data(), _oblique_affine())
    img.header.set_xyzt_units("mm")
    nib.save(img, p)
    jnrrd.convert(p, tmp_path / "obl.jnrrd")
    with jnrrd.open(tmp_path / "obl.jnrrd") as vol:
        origin, dirs = _lps_geometry_of(vol)
        np.testing.assert_array_equal(vol[...], _data())
        assert vol.header["space_units"] == ["mm"] * 3
    for o, d in (_nib_lps(p), _sitk_geometry(p)):
        np.testing.assert_allclose(origin, o, atol=TOL, rtol=0)
        np.testing.assert_allclose(dirs, d, atol=TOL, rtol=0)
    np.testing.assert_array_equal(sitk.GetArrayFromImage(sitk.ReadImage(str(p))).T, _data())


def test_qform_only(tmp_path):
    p = tmp_path / "q.nii"
    img = nib.Nifti1Image(_data(), None)
    img.header.set_qform(_oblique_affine(), code=1)
    img.header.set_sform(None, code=0)
    nib.save(img, p)
    data, header = jnrrd.read(_converted(p, tmp_path))
    assert header["nifti:header"]["sform_code"] == 0
    assert header["nifti:header"]["qform_code"] == 1
    cols = np.asarray(header["space_directions"]).T
    o, d = _nib_lps(p)
    np.testing.assert_allclose(header["space_origin"], o, atol=TOL, rtol=0)
    np.testing.assert_allclose(cols, d, atol=TOL, rtol=0)
    so, sd = _sitk_geometry(p)
    np.testing.assert_allclose(header["space_origin"], so, atol=TOL, rtol=0)
    np.testing.assert_allclose(cols, sd, atol=TOL, rtol=0)


def test_no_form_gives_spacings_only(tmp_path):
    p = tmp_path / "n.nii"
    img = nib.Nifti1Image(_data(), None)
    img.header.set_sform(None, code=0)
    img.header.set_qform(None, code=0)
    img.header.set_zooms((0.5, 0.75, 2.0))
    nib.save(img, p)
    header = jnrrd.read(_converted(p, tmp_path))[1]
    assert "space_directions" not in header and header["spacings"] == [0.5, 0.75, 2.0]


def _converted(p, tmp_path, **kw):
    out = tmp_path / (p.name.split(".")[0] + ".jnrrd")
    jnrrd.convert(p, out, **kw)
    return out


@pytest.mark.parametrize("slope,inter,stored_ints", [(0.1234, -7.3, False), (0.5, -3.0, True),
                                                     (1.0, -1024.0, True)])
def test_scl_slope_values_match_nibabel_and_simpleitk(tmp_path, slope, inter, stored_ints):
    p = tmp_path / "s.nii.gz"
    img = nib.Nifti1Image(_data(), np.eye(4))
    img.header.set_slope_inter(slope, inter)
    nib.save(img, p)
    theirs = np.asanyarray(nib.load(str(p)).dataobj)
    out = _converted(p, tmp_path, tile=4, compression="zstd", levels=2)
    with jnrrd.open(out) as vol:
        ours = vol[...]
        chain = [c["name"] for c in vol.header.get("tile:codecs", [])]
    assert ("cast_value" in chain) is stored_ints
    if slope == 1.0:  # integer slope and intercept: integer values (int16 stored in int32)
        assert ours.dtype == np.int32
        np.testing.assert_array_equal(ours, theirs.astype(np.int64))
    else:
        assert ours.dtype == np.float32
        np.testing.assert_array_equal(ours, theirs.astype(np.float32))
        np.testing.assert_array_equal(ours, sitk.GetArrayFromImage(sitk.ReadImage(str(p))).T)
    if stored_ints:  # the tiles hold the stored int16 values
        assert chain == ["scale_offset", "cast_value", "bytes", "zstd"]
        with jnrrd.open(out) as vol:
            assert vol.header["tile:codecs"][1]["configuration"]["data_type"] == "int16"


def test_four_d_time_axis_stays_out_of_the_pyramid(tmp_path):
    p = tmp_path / "f.nii.gz"
    a = np.arange(16 * 16 * 8 * 5, dtype=np.float32).reshape(16, 16, 8, 5)
    img = nib.Nifti1Image(a, _oblique_affine())
    img.header.set_xyzt_units("mm", "msec")
    img.header["pixdim"][4] = 2000.0
    nib.save(img, p)
    out = _converted(p, tmp_path, levels=3, compression="zstd")
    with jnrrd.open(out) as vol:
        h = vol.header
        assert h["kinds"] == ["domain", "domain", "domain", "time"]
        assert h["spacings"][3] == 2000.0 and h["units"][3] == "ms"
        assert h["space_directions"][3] is None
        assert h["tile:sizes"] == [16, 16, 8, 1]
        assert [lv.shape for lv in vol.levels] == [(16, 16, 8, 5), (8, 8, 4, 5), (4, 4, 2, 5)]
        np.testing.assert_array_equal(vol[...], a)
    back = tmp_path / "back.nii.gz"
    jnrrd.convert(out, back)
    img2 = nib.load(str(back))
    assert img2.shape == a.shape and img2.header.get_xyzt_units() == ("mm", "msec")
    assert float(img2.header.get_zooms()[3]) == 2000.0
    np.testing.assert_array_equal(np.asanyarray(img2.dataobj), a)


def test_label_intent_makes_a_label_map(tmp_path):
    p = tmp_path / "lab.nii.gz"
    a = np.zeros((8, 8, 8), np.uint8)
    a[3:] = 3
    a[:3] = 1
    img = nib.Nifti1Image(a, np.eye(4))
    img.header.set_intent("label")
    nib.save(img, p)
    out = _converted(p, tmp_path, levels=2)
    with jnrrd.open(out) as vol:
        assert vol.header["label:map"] is True
        assert vol.header["tile:downsample_method"] == "mode"
        assert set(np.unique(vol.levels[1][...])) == {1, 3}
    jnrrd.convert(out, tmp_path / "back.nii.gz")
    assert nib.load(str(tmp_path / "back.nii.gz")).header.get_intent()[0] == "label"


def test_writing_back_sets_both_forms(tmp_path):
    data = _data()
    jnrrd.write(tmp_path / "ct.jnrrd", data, {
        "space": "LPS", "space_origin": [10.0, -20.0, 30.0],
        "space_directions": (np.diag([-1.0, -1.0, 1.0]) @ _oblique_affine()[:3, :3]).T.tolist()})
    jnrrd.convert(tmp_path / "ct.jnrrd", tmp_path / "ct.nii")
    img = nib.load(str(tmp_path / "ct.nii"))
    sform, scode = img.header.get_sform(coded=True)
    qform, qcode = img.header.get_qform(coded=True)
    assert scode == 1 and qcode == 1
    expected = _oblique_affine()
    expected[:3, 3] = [-10.0, 20.0, 30.0]
    np.testing.assert_allclose(sform, expected, atol=TOL, rtol=0)
    np.testing.assert_allclose(qform, expected, atol=1e-5, rtol=0)  # quaternion in float32
    np.testing.assert_array_equal(np.asanyarray(img.dataobj), data)
    so, sd = _sitk_geometry(tmp_path / "ct.nii")
    np.testing.assert_allclose(so, [10.0, -20.0, 30.0], atol=TOL, rtol=0)
    # and NIfTI -> JNRRD -> NIfTI keeps the geometry
    jnrrd.convert(tmp_path / "ct.nii", tmp_path / "again.jnrrd")
    jnrrd.convert(tmp_path / "again.jnrrd", tmp_path / "again.nii.gz")
    np.testing.assert_allclose(nib.load(str(tmp_path / "again.nii.gz")).affine, sform,
                               atol=TOL, rtol=0)


def test_a_vector_axis_goes_to_the_fifth_dimension(tmp_path):
    a = np.arange(3 * 4 * 5 * 6, dtype=np.float32).reshape(3, 4, 5, 6)
    jnrrd.write(tmp_path / "v.jnrrd", a, {"kinds": ["vector", "domain", "domain", "domain"],
                                          "space": "RAS", "space_origin": [0, 0, 0],
                                          "space_directions": [None, [1, 0, 0], [0, 1, 0],
                                                               [0, 0, 1]]})
    jnrrd.convert(tmp_path / "v.jnrrd", tmp_path / "v.nii.gz")
    img = nib.load(str(tmp_path / "v.nii.gz"))
    assert img.shape == (4, 5, 6, 1, 3) and img.header.get_intent()[0] == "vector"
    np.testing.assert_array_equal(np.asanyarray(img.dataobj)[:, :, :, 0, :],
                                  np.moveaxis(a, 0, -1))


def test_cli_converts_nifti(tmp_path):
    from jnrrd.cli import main

    nib.save(nib.Nifti1Image(_data(), np.eye(4)), tmp_path / "a.nii")
    assert main(["convert", str(tmp_path / "a.nii"), str(tmp_path / "a.jnrrd"), "--quiet",
                 "--levels", "2"]) == 0
    assert main(["convert", str(tmp_path / "a.jnrrd"), str(tmp_path / "b.nii.gz"),
                 "--quiet"]) == 0
    np.testing.assert_array_equal(np.asanyarray(nib.load(str(tmp_path / "b.nii.gz")).dataobj),
                                  _data())


def test_missing_nibabel_names_the_extra(tmp_path, monkeypatch):
    nib.save(nib.Nifti1Image(_data(), np.eye(4)), tmp_path / "a.nii")
    monkeypatch.setitem(sys.modules, "nibabel", None)
    with pytest.raises(MissingDependencyError, match=r"jnrrd\[nifti\]"):
        jnrrd.convert(tmp_path / "a.nii", tmp_path / "a.jnrrd")


def test_units_reach_simpleitk_in_millimetres_and_seconds(tmp_path):
    # ITK works in mm and s: its NIfTI reader scales microns and msec; to_sitk must too
    p = tmp_path / "um.nii.gz"
    img = nib.Nifti1Image(_data(), np.diag([2.0, 2.0, 3.0, 1.0]))
    img.header.set_xyzt_units("micron")
    nib.save(img, p)
    ours = jnrrd.to_sitk(_converted(p, tmp_path))
    theirs = sitk.ReadImage(str(p))
    np.testing.assert_allclose(ours.GetSpacing(), theirs.GetSpacing(), atol=1e-12, rtol=0)
    np.testing.assert_allclose(ours.GetOrigin(), theirs.GetOrigin(), atol=1e-12, rtol=0)
    p = tmp_path / "ms.nii.gz"
    img = nib.Nifti1Image(np.zeros((4, 5, 6, 3), np.int16), np.eye(4))
    img.header.set_xyzt_units("mm", "msec")
    img.header["pixdim"][4] = 2000.0
    nib.save(img, p)
    assert jnrrd.to_sitk(_converted(p, tmp_path)).GetSpacing() == sitk.ReadImage(
        str(p)).GetSpacing() == (1.0, 1.0, 1.0, 2.0)


def test_the_time_offset_is_the_time_origin(tmp_path):
    p = tmp_path / "t.nii.gz"
    img = nib.Nifti1Image(np.zeros((4, 5, 6, 3), np.int16), np.eye(4))
    img.header.set_xyzt_units("mm", "sec")
    img.header["pixdim"][4] = 2.5
    img.header["toffset"] = 7.0
    nib.save(img, p)
    out = _converted(p, tmp_path)
    assert jnrrd.read_header(out)["axis_mins"] == [None, None, None, 7.0]
    ours, theirs = jnrrd.to_sitk(out), sitk.ReadImage(str(p))
    assert ours.GetOrigin() == theirs.GetOrigin() and theirs.GetOrigin()[3] == 7.0
    # the time origin, not the saved NIfTI field, is what goes back
    data, header = jnrrd.read(out)
    header["axis_mins"] = [None, None, None, 9.0]
    jnrrd.write(tmp_path / "moved.jnrrd", data, header)
    jnrrd.convert(tmp_path / "moved.jnrrd", tmp_path / "back.nii.gz")
    assert float(nib.load(str(tmp_path / "back.nii.gz")).header["toffset"]) == 9.0


def test_a_five_d_vector_file_has_no_time_axis(tmp_path):
    p = tmp_path / "vec.nii.gz"
    a = np.arange(10 * 12 * 14 * 3, dtype=np.float32).reshape(10, 12, 14, 1, 3)
    img = nib.Nifti1Image(a, np.diag([2.0, 2.0, 2.0, 1.0]))
    img.header.set_intent("vector")
    nib.save(img, p)
    out = _converted(p, tmp_path)
    data, h = jnrrd.read(out)
    assert h["kinds"] == ["domain", "domain", "domain", "vector"]
    np.testing.assert_array_equal(data, a[:, :, :, 0, :])
    ours, theirs = jnrrd.to_sitk(out), sitk.ReadImage(str(p))
    assert ours.GetSize() == theirs.GetSize() == (10, 12, 14)
    assert ours.GetNumberOfComponentsPerPixel() == theirs.GetNumberOfComponentsPerPixel() == 3
    np.testing.assert_array_equal(sitk.GetArrayFromImage(ours), sitk.GetArrayFromImage(theirs))
    jnrrd.convert(out, tmp_path / "back.nii.gz")
    back = nib.load(str(tmp_path / "back.nii.gz"))
    assert back.shape == a.shape and back.header.get_intent()[0] == "vector"


def test_a_round_trip_keeps_units_and_form_codes(tmp_path):
    p = tmp_path / "a.nii.gz"
    img = nib.Nifti1Image(_data(), _oblique_affine())
    img.header.set_sform(_oblique_affine(), code=2)
    img.header.set_qform(None, code=0)
    img.header.set_xyzt_units("unknown", "sec")
    nib.save(img, p)
    jnrrd.convert(_converted(p, tmp_path), tmp_path / "back.nii.gz")
    back = nib.load(str(tmp_path / "back.nii.gz")).header
    assert back.get_xyzt_units() == ("unknown", "sec")
    assert int(back["sform_code"]) == 2 and int(back["qform_code"]) == 0
    np.testing.assert_allclose(back.get_best_affine(), _oblique_affine(), atol=TOL, rtol=0)


def test_segment_names_nifti_cannot_hold_are_named_in_a_warning(tmp_path):
    from jnrrd.clinical.labels import mark_label_map

    seg = np.zeros((6, 5, 4), np.uint8)
    seg[1:3] = 1
    header = mark_label_map({"space": "LPS", "space_origin": [0, 0, 0],
                             "space_directions": np.eye(3).tolist()},
                            [{"value": 1, "name": "liver"}])
    jnrrd.write(tmp_path / "seg.jnrrd", seg, header)
    with pytest.warns(jnrrd.JnrrdWarning, match=r"label:segments"):
        jnrrd.convert(tmp_path / "seg.jnrrd", tmp_path / "seg.nii.gz")
    assert nib.load(str(tmp_path / "seg.nii.gz")).header.get_intent()[0] == "label"
