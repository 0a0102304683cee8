"""jnrrd.to_sitk / jnrrd.from_sitk: pixels exactly, direction/origin/spacing as SimpleITK
holds them, vector pixel types, levels, metadata, and the series SimpleITK reads itself."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import jnrrd
from jnrrd.errors import MissingDependencyError

sitk = pytest.importorskip("SimpleITK")

from dicom_cases import rotation  # noqa: E402

TOL = 1e-12


def _image(pixel=np.int16, shape=(7, 6, 5), components=0) -> sitk.Image:
    full = (shape[::-1] + (components,)) if components else shape[::-1]
    arr = (np.arange(np.prod(full)) % 251).astype(pixel).reshape(full)
    img = sitk.GetImageFromArray(arr, isVector=bool(components))
    img.SetSpacing([0.5, 0.75, 2.25][: img.GetDimension()])
    img.SetOrigin([-12.5, 30.0, 7.75][: img.GetDimension()])
    d = rotation(0.3, -0.4, 0.2) if img.GetDimension() == 3 else np.array(
        [[0.6, -0.8], [0.8, 0.6]])
    img.SetDirection(d.ravel().tolist())
    return img


def _same_image(a: sitk.Image, b: sitk.Image) -> None:
    assert a.GetPixelID() == b.GetPixelID() and a.GetSize() == b.GetSize()
    np.testing.assert_allclose(a.GetOrigin(), b.GetOrigin(), atol=TOL, rtol=0)
    np.testing.assert_allclose(a.GetSpacing(), b.GetSpacing(), atol=TOL, rtol=0)
    np.testing.assert_allclose(a.GetDirection(), b.GetDirection(), atol=TOL, rtol=0)
    np.testing.assert_array_equal(sitk.GetArrayFromImage(a), sitk.GetArrayFromImage(b))


@pytest.mark.parametrize("pixel", [np.uint8, np.int16, np.uint32, np.float32, np.float64])
def test_scalar_round_trip(tmp_path, pixel):
    img = _image(pixel)
    data, header = jnrrd.from_sitk(img)
    assert data.shape == tuple(header.get("sizes", data.shape)) == img.GetSize()
    jnrrd.write(tmp_path / "a.jnrrd", data, header, tile=4, compression="zstd")
    back = jnrrd.to_sitk(tmp_path / "a.jnrrd")
    _same_image(back, img)
    h = jnrrd.read_header(tmp_path / "a.jnrrd")
    assert h["space"] == "left_posterior_superior"
    # the geometry matches what SimpleITK reads from the same volume written as NRRD
    jnrrd.convert(tmp_path / "a.jnrrd", tmp_path / "a.nrrd")
    _same_image(sitk.ReadImage(str(tmp_path / "a.nrrd")), img)


def test_vector_images(tmp_path):
    img = _image(np.float32, components=3)
    data, header = jnrrd.from_sitk(img)
    assert header["kinds"] == ["vector", "domain", "domain", "domain"]
    assert data.shape == (3, *img.GetSize())
    jnrrd.write(tmp_path / "v.jnrrd", data, header)
    _same_image(jnrrd.to_sitk(tmp_path / "v.jnrrd"), img)


def test_two_d_images(tmp_path):
    img = _image(np.uint16, shape=(9, 4))
    data, header = jnrrd.from_sitk(img)
    assert header["space_dimension"] == 2 and "space" not in header
    jnrrd.write(tmp_path / "p.jnrrd", data, header)
    _same_image(jnrrd.to_sitk(tmp_path / "p.jnrrd"), img)


def test_levels_carry_their_geometry(tmp_path):
    img = _image(np.int16, shape=(16, 16, 8))
    jnrrd.write(tmp_path / "l.jnrrd", *jnrrd.from_sitk(img), tile=8, levels=2)
    one = jnrrd.to_sitk(tmp_path / "l.jnrrd", level=1)
    with jnrrd.open(tmp_path / "l.jnrrd") as vol:
        aff = vol.levels[1].affine
        np.testing.assert_array_equal(sitk.GetArrayFromImage(one).T, vol.levels[1][...])
    d = np.asarray(one.GetDirection()).reshape(3, 3) * one.GetSpacing()
    np.testing.assert_allclose(d, aff[:3, :3], atol=TOL, rtol=0)
    np.testing.assert_allclose(one.GetOrigin(), aff[:3, 3], atol=TOL, rtol=0)


def test_ras_files_are_turned_to_lps(tmp_path):
    jnrrd.write(tmp_path / "r.jnrrd", np.zeros((2, 3, 4), np.uint8),
                {"space": "RAS", "space_origin": [1.0, 2.0, 3.0],
                 "space_directions": [[2.0, 0, 0], [0, 3.0, 0], [0, 0, 4.0]]})
    img = jnrrd.to_sitk(tmp_path / "r.jnrrd")
    assert img.GetOrigin() == (-1.0, -2.0, 3.0)
    assert img.GetDirection() == (-1.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 1.0)
    assert img.GetSpacing() == (2.0, 3.0, 4.0)


def test_metadata_and_label_maps(tmp_path):
    img = _image(np.uint8)
    img.SetMetaData("Segment0_ID", "liver")
    img.SetMetaData("Segment0_LabelValue", "1")
    data, header = jnrrd.from_sitk(img)
    assert header["nrrd:key_values"] == {"Segment0_ID": "liver", "Segment0_LabelValue": "1"}
    jnrrd.write(tmp_path / "s.jnrrd", data, header, levels=2, tile=4)
    assert jnrrd.read_header(tmp_path / "s.jnrrd")["tile:downsample_method"] == "mode"
    back = jnrrd.to_sitk(tmp_path / "s.jnrrd")
    assert back.GetMetaData("Segment0_ID") == "liver"


def test_the_dicom_series_as_simpleitk_reads_it(tmp_path):
    pytest.importorskip("pydicom")
    from dicom_cases import Geometry, ct_series, phantom

    geom = Geometry.make(rotation(0.2, -0.1, 0.3), (0.7, 0.8, 2.5), (-100.0, 20.0, -30.0))
    ct_series(tmp_path / "ct", phantom((20, 16, 7)), geom)
    jnrrd.convert(tmp_path / "ct", tmp_path / "ct.jnrrd")
    reader = sitk.ImageSeriesReader()
    reader.SetFileNames(reader.GetGDCMSeriesFileNames(str(tmp_path / "ct")))
    theirs = reader.Execute()
    ours = jnrrd.to_sitk(tmp_path / "ct.jnrrd")
    assert ours.GetPixelID() == theirs.GetPixelID()
    np.testing.assert_array_equal(sitk.GetArrayFromImage(ours), sitk.GetArrayFromImage(theirs))
    for a, b in ((ours.GetOrigin(), theirs.GetOrigin()),
                 (ours.GetSpacing(), theirs.GetSpacing()),
                 (ours.GetDirection(), theirs.GetDirection())):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)


def test_missing_simpleitk_names_the_extra(tmp_path, monkeypatch):
    jnrrd.write(tmp_path / "a.jnrrd", np.zeros((2, 2, 2), np.uint8))
    monkeypatch.setitem(sys.modules, "SimpleITK", None)
    with pytest.raises(MissingDependencyError, match=r"jnrrd\[itk\]"):
        jnrrd.to_sitk(tmp_path / "a.jnrrd")


def test_a_four_d_image_keeps_its_time_origin_and_units(tmp_path):
    img = sitk.Image([4, 5, 6, 3], sitk.sitkInt16)
    img.SetOrigin([1.0, 2.0, 3.0, 4.0])
    img.SetSpacing([0.5, 0.5, 1.0, 2.0])
    data, header = jnrrd.from_sitk(img)
    assert header["axis_mins"] == [None, None, None, 4.0]
    # ITK's units, said: millimetres and seconds
    assert header["space_units"] == ["mm"] * 3 and header["units"] == [None] * 3 + ["s"]
    jnrrd.write(tmp_path / "t.jnrrd", data, header)
    back = jnrrd.to_sitk(tmp_path / "t.jnrrd")
    assert back.GetOrigin() == (1.0, 2.0, 3.0, 4.0) and back.GetSpacing() == img.GetSpacing()


def test_length_and_time_units_become_millimetres_and_seconds(tmp_path):
    jnrrd.write(tmp_path / "um.jnrrd", np.zeros((2, 3, 4, 2), np.uint8),
                {"space": "LPS", "space_origin": [1000.0, 0, 0], "space_units": ["um"] * 3,
                 "space_directions": [[2.0, 0, 0], [0, 2.0, 0], [0, 0, 4.0], None],
                 "kinds": ["domain"] * 3 + ["time"], "spacings": [None] * 3 + [500.0],
                 "units": [None] * 3 + ["ms"], "axis_mins": [None] * 3 + [250.0]})
    img = jnrrd.to_sitk(tmp_path / "um.jnrrd")
    np.testing.assert_allclose(img.GetSpacing(), [0.002, 0.002, 0.004, 0.5], rtol=1e-15)
    np.testing.assert_allclose(img.GetOrigin(), [1.0, 0, 0, 0.25], rtol=1e-15)
    jnrrd.write(tmp_path / "odd.jnrrd", np.zeros((2, 3, 4), np.uint8),
                {"space": "LPS", "space_origin": [0, 0, 0], "space_units": ["furlong"] * 3,
                 "space_directions": np.eye(3).tolist()})
    with pytest.warns(jnrrd.JnrrdWarning, match="furlong.*millimetres"):
        assert jnrrd.to_sitk(tmp_path / "odd.jnrrd").GetSpacing() == (1.0, 1.0, 1.0)


def test_a_label_map_pixel_type_becomes_a_label_image():
    # SimpleITK's GetArrayFromImage aborts the interpreter on a LabelMap image: run apart
    code = ("import SimpleITK as sitk, jnrrd\n"
            "img = sitk.Image(4, 5, 6, sitk.sitkLabelUInt8)\n"
            "img.SetSpacing([0.5, 1.0, 2.0])\n"
            "data, header = jnrrd.from_sitk(img)\n"
            "print(data.dtype, data.shape, header['label:map'], header['space_directions'])\n")
    import subprocess

    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[:3] == ["uint8", "(4,", "5,"]
    assert "True [[0.5, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 2.0]]" in run.stdout
