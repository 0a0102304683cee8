"""DICOM → JNRRD (pydicom): CT series built by tests/dicom_cases.py, compared with SimpleITK
(GDCM) to 1e-6 mm and exactly in values; series selection, spacing checks, compressed
transfer syntaxes, enhanced multi-frame."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import jnrrd
from jnrrd.cli import main
from jnrrd.errors import MissingDependencyError, UnsupportedError

pytest.importorskip("pydicom")
sitk = pytest.importorskip("SimpleITK")

from dicom_cases import Geometry, ct_series, enhanced_ct, phantom, rotation  # noqa: E402

TOL = 1e-6
OBLIQUE = Geometry.make(rotation(0.2, -0.1, 0.3), (0.7, 0.8, 2.5), (-100.0, 20.0, -30.0))


def _sitk_series(folder: Path, uid: str | None = None) -> sitk.Image:
    reader = sitk.ImageSeriesReader()
    names = (reader.GetGDCMSeriesFileNames(str(folder), uid) if uid
             else reader.GetGDCMSeriesFileNames(str(folder)))
    reader.SetFileNames(names)
    return reader.Execute()


def _affine_of_sitk(img: sitk.Image) -> tuple[np.ndarray, np.ndarray]:
    d = np.asarray(img.GetDirection()).reshape(3, 3) * np.asarray(img.GetSpacing())
    return np.asarray(img.GetOrigin()), d


def _check_against_sitk(path: Path, img: sitk.Image) -> np.ndarray:
    data, h = jnrrd.read(path)
    origin, dirs = _affine_of_sitk(img)
    assert h["space"] == "left_posterior_superior"
    np.testing.assert_allclose(h["space_origin"], origin, atol=TOL, rtol=0)
    np.testing.assert_allclose(np.asarray(h["space_directions"]).T, dirs, atol=TOL, rtol=0)
    theirs = sitk.GetArrayFromImage(img).T
    assert data.dtype == theirs.dtype
    np.testing.assert_array_equal(data, theirs)
    with jnrrd.open(path) as vol:  # the far corner too: small direction errors add up there
        far = [n - 1 for n in data.shape]
        np.testing.assert_allclose((vol.affine @ [*far, 1])[:3],
                                   img.TransformIndexToPhysicalPoint(far), atol=TOL, rtol=0)
    return data


def test_oblique_shuffled_series_matches_simpleitk(tmp_path):
    stored = phantom((24, 20, 9))
    ct_series(tmp_path / "ct", stored, OBLIQUE)
    jnrrd.convert(tmp_path / "ct", tmp_path / "ct.jnrrd")
    data = _check_against_sitk(tmp_path / "ct.jnrrd", _sitk_series(tmp_path / "ct"))
    np.testing.assert_array_equal(data, stored.astype(np.int32) - 1024)
    h = jnrrd.read_header(tmp_path / "ct.jnrrd")
    assert h["dicom:series"]["modality"] == "CT" and h["content"] == "phantom"
    assert "PatientName" not in str(h) and "Phantom" not in str(h)


def test_six_decimal_orientation_is_orthonormalised_as_simpleitk_does(tmp_path):
    # scanners write ImageOrientationPatient with ~6 decimals: the cosines are then not quite
    # unit vectors nor orthogonal; ITK (GDCM) makes them orthonormal, so must we (1e-6 mm)
    oblique = Geometry.make(rotation(0.26, 0.0, 0.35), (0.8, 0.7, 2.5), (-40.0, -60.5, 100.0))
    ct_series(tmp_path / "ct", phantom((128, 96, 6)), oblique, decimals=6)
    jnrrd.convert(tmp_path / "ct", tmp_path / "ct.jnrrd")
    _check_against_sitk(tmp_path / "ct.jnrrd", _sitk_series(tmp_path / "ct"))
    h = jnrrd.read_header(tmp_path / "ct.jnrrd")
    assert np.linalg.norm(h["space_directions"][0]) == pytest.approx(0.8, abs=1e-12)


def test_a_gantry_tilt_keeps_the_sheared_slice_step(tmp_path):
    # slices stepping off the normal (a tilted gantry): the grid is sheared, held exactly
    d = np.eye(3) @ np.diag([0.5, 0.5, 2.0])
    d[1, 2] = 2.0 * np.tan(np.deg2rad(15))  # 15 degrees towards posterior
    tilt = Geometry(np.array([-10.0, 5.0, 30.0]), d)
    ct_series(tmp_path / "ct", phantom((8, 8, 5)), tilt, decimals=6)
    jnrrd.convert(tmp_path / "ct", tmp_path / "ct.jnrrd")
    h = jnrrd.read_header(tmp_path / "ct.jnrrd")
    np.testing.assert_allclose(h["space_directions"][2], d[:, 2], atol=TOL, rtol=0)


def test_per_slice_rescale_is_recorded_and_integers_stay_integers(tmp_path):
    stored = phantom((12, 10, 6))
    rescales = [(1.0, -1024.0 + 3 * k) for k in range(6)]
    ct_series(tmp_path / "ct", stored, OBLIQUE, per_slice_rescale=rescales, seed=4)
    jnrrd.convert(tmp_path / "ct", tmp_path / "ct.jnrrd")
    data = _check_against_sitk(tmp_path / "ct.jnrrd", _sitk_series(tmp_path / "ct"))
    assert data.dtype == np.int16  # the smallest exact type, as SimpleITK gives (not float64)
    np.testing.assert_array_equal(
        data, stored.astype(np.int32) + np.array([i for _, i in rescales], np.int32))
    series = jnrrd.read_header(tmp_path / "ct.jnrrd")["dicom:series"]
    # in slice order (not the first file by name), and saying that it varies
    assert series["rescale"] == {"per_slice": [{"slope": s, "intercept": i}
                                               for s, i in rescales]}
    ct_series(tmp_path / "f", stored, OBLIQUE, per_slice_rescale=[(0.5, -3.0 + k)
                                                                  for k in range(6)])
    jnrrd.convert(tmp_path / "f", tmp_path / "f.jnrrd")
    assert jnrrd.read(tmp_path / "f.jnrrd")[0].dtype == np.float64


def test_series_metadata_comes_from_the_first_slice(tmp_path):
    import pydicom

    ct_series(tmp_path / "ct", phantom((8, 8, 4)), OBLIQUE)
    unit = OBLIQUE.directions[:, 2] / np.linalg.norm(OBLIQUE.directions[:, 2])
    for f in list((tmp_path / "ct").iterdir()):
        ds = pydicom.dcmread(f)
        k = round(float((np.asarray(ds.ImagePositionPatient, float) - OBLIQUE.origin) @ unit)
                  / 2.5)
        ds.WindowCenter, ds.WindowWidth = 40 + k, 400
        ds.save_as(tmp_path / "ct" / f"{'z' if k == 0 else 'a'}{k}.dcm")  # slice 0 last by name
        f.unlink()
    jnrrd.convert(tmp_path / "ct", tmp_path / "ct.jnrrd")
    assert jnrrd.read_header(tmp_path / "ct.jnrrd")["dicom:series"]["window_center"] == [40.0]


@pytest.mark.parametrize("slope,intercept,bits,dtype,codecs", [
    (1.0, -1024.0, 12, "int16", False),   # HU fit int16: stored as they are
    (1.0, -1024.0, 16, "int32", True),    # int32 values, uint16 in the tiles
    (2.0, -1024.0, 12, "int16", False),
    (0.5, -3.0, 12, "float64", True),     # exact through scale_offset + cast_value
    (0.1234, -7.3, 12, "float64", False),  # not exact: float64 tiles
])
def test_rescale_matches_simpleitk(tmp_path, slope, intercept, bits, dtype, codecs):
    stored = phantom((16, 12, 5))
    ct_series(tmp_path / "ct", stored, OBLIQUE, slope=slope, intercept=intercept,
              bits_stored=bits)
    jnrrd.convert(tmp_path / "ct", tmp_path / "ct.jnrrd", tile=8, levels=2,
                  compression="zstd")
    data = _check_against_sitk(tmp_path / "ct.jnrrd", _sitk_series(tmp_path / "ct"))
    assert data.dtype == np.dtype(dtype)
    with jnrrd.open(tmp_path / "ct.jnrrd") as vol:
        names = [c["name"] for c in vol.tiling.codecs]
    assert names == (["scale_offset", "cast_value", "bytes", "zstd"] if codecs
                     else ["bytes", "zstd"])
    assert jnrrd.validate(tmp_path / "ct.jnrrd", deep=True) == []


def test_two_series_in_one_folder(tmp_path, capsys):
    a = ct_series(tmp_path / "mixed", phantom((8, 8, 4)), OBLIQUE, description="first")
    b = ct_series(tmp_path / "mixed", phantom((8, 8, 6), seed=1), OBLIQUE,
                  description="second", seed=1)
    with pytest.raises(UnsupportedError, match=rf"2 series.*series=UID.*{a}.*{b}|{b}.*{a}"):
        jnrrd.convert(tmp_path / "mixed", tmp_path / "x.jnrrd")
    jnrrd.convert(tmp_path / "mixed", tmp_path / "b.jnrrd", series=b)
    assert jnrrd.read_header(tmp_path / "b.jnrrd")["sizes"] == [8, 8, 6]
    _check_against_sitk(tmp_path / "b.jnrrd", _sitk_series(tmp_path / "mixed", b))
    capsys.readouterr()
    assert main(["info", str(tmp_path / "mixed")]) == 0
    out = capsys.readouterr().out
    assert a in out and b in out and "'first'" in out and "6 image(s)" in out
    assert main(["convert", str(tmp_path / "mixed"), str(tmp_path / "a.jnrrd"), "--series", a,
                 "--quiet"]) == 0
    assert jnrrd.read_header(tmp_path / "a.jnrrd")["sizes"] == [8, 8, 4]
    assert main(["convert", str(tmp_path / "mixed"), str(tmp_path / "c.jnrrd"), "--quiet"]) == 1
    with pytest.raises(UnsupportedError, match="no series 'nope'"):
        jnrrd.convert(tmp_path / "mixed", tmp_path / "x.jnrrd", series="nope")


def _positions(gaps: list[float]) -> list[list[float]]:
    z = np.concatenate([[0.0], np.cumsum(gaps)])
    unit = OBLIQUE.directions[:, 2] / np.linalg.norm(OBLIQUE.directions[:, 2])
    return [[float(v) for v in OBLIQUE.origin + unit * d] for d in z]


def test_irregular_spacing_names_the_gap(tmp_path):
    stored = phantom((8, 8, 5))
    ct_series(tmp_path / "gap", stored, OBLIQUE, positions=_positions([2.5, 2.5, 5.0, 2.5]))
    with pytest.raises(UnsupportedError, match=r"5\.0000 mm apart.*mean gap is 3\.1250.*"
                                               r"resample=True"):
        jnrrd.convert(tmp_path / "gap", tmp_path / "x.jnrrd")
    jnrrd.convert(tmp_path / "gap", tmp_path / "r.jnrrd", resample=True)
    data, h = jnrrd.read(tmp_path / "r.jnrrd")
    values = stored.astype(np.float32) - 1024
    assert data.shape == (8, 8, 6) and data.dtype == np.float32  # 12.5 mm at 2.5 mm
    np.testing.assert_allclose(np.linalg.norm(h["space_directions"][2]), 2.5, atol=TOL)
    np.testing.assert_array_equal(data[:, :, 2], values[:, :, 2])
    np.testing.assert_array_equal(data[:, :, 4], values[:, :, 3])
    np.testing.assert_allclose(data[:, :, 3], (values[:, :, 2] + values[:, :, 3]) / 2,
                               rtol=1e-6)
    assert h["dicom:series"]["resampled"] is True


def test_duplicate_positions_and_mixed_orientations_are_refused(tmp_path):
    ct_series(tmp_path / "dup", phantom((8, 8, 3)), OBLIQUE,
              positions=_positions([2.5, 0.0]))
    with pytest.raises(UnsupportedError, match="same position along the slice normal"):
        jnrrd.convert(tmp_path / "dup", tmp_path / "x.jnrrd")
    uid = ct_series(tmp_path / "mix", phantom((8, 8, 3)), OBLIQUE)
    other = Geometry.make(np.eye(3), (0.7, 0.8, 2.5), (0, 0, 0))
    ct_series(tmp_path / "mix2", phantom((8, 8, 1)), other, series_uid=uid, seed=3)
    for f in (tmp_path / "mix2").iterdir():
        shutil.move(f, tmp_path / "mix" / ("z" + f.name))
    with pytest.raises(UnsupportedError, match="ImageOrientationPatient.*do not form one"):
        jnrrd.convert(tmp_path / "mix", tmp_path / "x.jnrrd")


def test_rle_compressed_series_decodes(tmp_path):
    from pydicom.uid import RLELossless

    stored = phantom((12, 10, 4))
    ct_series(tmp_path / "rle", stored, OBLIQUE, syntax=RLELossless)
    jnrrd.convert(tmp_path / "rle", tmp_path / "rle.jnrrd")
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "rle.jnrrd")[0],
                                  stored.astype(np.int16) - 1024)


def test_a_missing_decoder_names_the_packages(tmp_path, monkeypatch):
    import pydicom
    from pydicom.encaps import encapsulate
    from pydicom.pixels import get_decoder
    from pydicom.uid import JPEGLSLossless

    ct_series(tmp_path / "ls", phantom((8, 8, 2)), OBLIQUE)
    for f in (tmp_path / "ls").iterdir():
        ds = pydicom.dcmread(f)
        ds.file_meta.TransferSyntaxUID = JPEGLSLossless
        ds.PixelData = encapsulate([b"\xff\xd8 not really JPEG-LS \xff\xd9"])
        ds.save_as(f)
    decoder = get_decoder(JPEGLSLossless)
    monkeypatch.setattr(type(decoder), "is_available", property(lambda self: False))
    with pytest.raises(MissingDependencyError, match=r"JPEG-LS.*pyjpegls"):
        jnrrd.convert(tmp_path / "ls", tmp_path / "x.jnrrd")


def test_non_dicom_files_are_skipped_and_an_empty_folder_is_an_error(tmp_path):
    stored = phantom((8, 8, 3))
    ct_series(tmp_path / "ct", stored, OBLIQUE)
    (tmp_path / "ct" / "README.txt").write_text("not DICOM")
    (tmp_path / "ct" / "DICOMDIR").write_bytes(b"\0" * 200)
    jnrrd.convert(tmp_path / "ct", tmp_path / "ct.jnrrd")
    assert jnrrd.read_header(tmp_path / "ct.jnrrd")["sizes"] == [8, 8, 3]
    (tmp_path / "empty").mkdir()
    with pytest.raises(UnsupportedError, match="no DICOM images found"):
        jnrrd.convert(tmp_path / "empty", tmp_path / "x.jnrrd")


@pytest.mark.parametrize("reverse", [False, True])
def test_enhanced_multiframe_matches_the_classic_series_and_simpleitk(tmp_path, reverse):
    stored = phantom((16, 12, 6))
    order = list(range(6))[::-1] if reverse else list(range(6))
    enhanced_ct(tmp_path / "enh.dcm", stored, OBLIQUE, frame_order=order)
    jnrrd.convert(tmp_path / "enh.dcm", tmp_path / "enh.jnrrd")
    ct_series(tmp_path / "ct", stored, OBLIQUE)
    jnrrd.convert(tmp_path / "ct", tmp_path / "ct.jnrrd")
    ours, h = jnrrd.read(tmp_path / "enh.jnrrd")
    classic, hc = jnrrd.read(tmp_path / "ct.jnrrd")
    np.testing.assert_array_equal(ours, classic)
    np.testing.assert_allclose(h["space_origin"], hc["space_origin"], atol=TOL, rtol=0)
    np.testing.assert_allclose(h["space_directions"], hc["space_directions"], atol=TOL, rtol=0)
    assert h["dicom:series"]["frames"] == 6
    # SimpleITK keeps the frames in file order: compare voxel by voxel in world space
    img = sitk.ReadImage(str(tmp_path / "enh.dcm"))
    theirs = sitk.GetArrayFromImage(img).T
    o, d = _affine_of_sitk(img)
    k = np.arange(6)[::-1] if reverse else np.arange(6)
    np.testing.assert_array_equal(ours, theirs[:, :, k])
    with jnrrd.open(tmp_path / "enh.jnrrd") as vol:
        aff = vol.affine
    for i, j, kk in [(0, 0, 0), (15, 11, 5), (3, 7, 2)]:
        np.testing.assert_allclose(aff @ [i, j, kk, 1], [*(o + d @ [i, j, k[kk]]), 1],
                                   atol=TOL, rtol=0)


def test_missing_pydicom_names_the_extra(tmp_path, monkeypatch):
    ct_series(tmp_path / "ct", phantom((8, 8, 2)), OBLIQUE)
    monkeypatch.setitem(sys.modules, "pydicom", None)
    with pytest.raises(MissingDependencyError, match=r"jnrrd\[dicom\]"):
        jnrrd.convert(tmp_path / "ct", tmp_path / "x.jnrrd")


def test_a_dicom_series_to_a_four_level_pyramid(tmp_path):
    stored = phantom((40, 36, 20))
    ct_series(tmp_path / "ct", stored, OBLIQUE)
    assert main(["convert", str(tmp_path / "ct"), str(tmp_path / "ct.jnrrd"), "--tile", "16",
                 "--levels", "4", "--compression", "zstd", "--quiet"]) == 0
    with jnrrd.open(tmp_path / "ct.jnrrd") as vol:
        assert [lv.shape for lv in vol.levels] == [(40, 36, 20), (20, 18, 10), (10, 9, 5),
                                                    (5, 4, 2)]
        assert vol.header["tile:downsample_method"] == "average"
        np.testing.assert_array_equal(vol[...], stored.astype(np.int16) - 1024)
