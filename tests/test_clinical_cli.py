"""What a new user met around the clinical formats: DICOM options on other inputs, NIfTI and
DICOM given to the JNRRD readers, install hints that work, `jnrrd info FOLDER`, messages."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import jnrrd
from jnrrd.cli import main
from jnrrd.errors import CodecError, FormatError, JnrrdError, MissingDependencyError

nib = pytest.importorskip("nibabel")
pytest.importorskip("pydicom")

from dicom_cases import OBLIQUE_CT, ct_series, phantom  # noqa: E402


@pytest.fixture
def nifti(tmp_path):
    p = tmp_path / "obl.nii.gz"
    nib.save(nib.Nifti1Image(np.zeros((4, 5, 6), np.int16), np.eye(4)), p)
    return p


@pytest.mark.parametrize("option", [["--resample"], ["--series", "1.2.3"]])
def test_dicom_options_on_other_inputs_are_usage_errors(tmp_path, capsys, nifti, option):
    jnrrd.write(tmp_path / "ct.jnrrd", np.zeros((4, 5, 6), np.int16))
    for source in (nifti, tmp_path / "ct.jnrrd"):
        assert main(["convert", str(source), str(tmp_path / "o.jnrrd"), *option]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and err.strip().splitlines()[-1].startswith(
            f"jnrrd: error: {option[0]}: ")
        assert "DICOM" in err


def test_series_must_be_a_uid(tmp_path):
    ct_series(tmp_path / "ct", phantom((8, 8, 2)), OBLIQUE_CT)
    with pytest.raises(TypeError, match="series= takes one SeriesInstanceUID"):
        jnrrd.convert(tmp_path / "ct", tmp_path / "o.jnrrd", series=["a"])


@pytest.mark.parametrize("module,package,call", [
    ("pydicom", "pydicom", lambda p: jnrrd.convert(p / "ct", p / "x.jnrrd")),
    ("nibabel", "nibabel", lambda p: jnrrd.convert(p / "a.nii", p / "x.jnrrd")),
    ("SimpleITK", "SimpleITK", lambda p: jnrrd.to_sitk(p / "a.jnrrd")),
])
def test_install_hints_name_a_package_pip_finds(tmp_path, monkeypatch, module, package, call):
    # jnrrd is not on PyPI: `pip install "jnrrd[dicom]"` fails; the package itself installs
    ct_series(tmp_path / "ct", phantom((8, 8, 2)), OBLIQUE_CT)
    nib.save(nib.Nifti1Image(np.zeros((2, 2, 2), np.int16), np.eye(4)), tmp_path / "a.nii")
    jnrrd.write(tmp_path / "a.jnrrd", np.zeros((2, 2, 2), np.uint8))
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingDependencyError) as e:
        call(tmp_path)
    assert f"pip install {package} " in str(e.value) and "images needs" not in str(e.value)
    assert f"{package} is not installed" in str(e.value)
    assert not isinstance(e.value, CodecError) and isinstance(e.value, ImportError)


def test_nifti_given_to_the_jnrrd_readers_is_named(tmp_path, capsys, nifti):
    for call in (jnrrd.open, jnrrd.read, jnrrd.read_header):
        with pytest.raises(FormatError, match=r"it is a NIfTI-1 file.*jnrrd convert"):
            call(nifti)
    with pytest.raises(FormatError, match=r"SimpleITK reads NIfTI itself"):
        jnrrd.to_sitk(nifti)
    for argv in (["validate", str(nifti)], ["preview", str(nifti), "-o",
                                             str(tmp_path / "x.png")]):
        assert main(argv) == 1
        out = capsys.readouterr()
        assert "NIfTI" in out.out + out.err and f"jnrrd convert {nifti}" in out.out + out.err


def test_a_dicom_folder_given_to_the_jnrrd_readers_is_named(tmp_path, capsys):
    ct_series(tmp_path / "ct", phantom((8, 8, 2)), OBLIQUE_CT)
    one = next(p for p in (tmp_path / "ct").iterdir())
    for source in (tmp_path / "ct", one):
        with pytest.raises(JnrrdError, match=r"DICOM.*jnrrd convert"):
            jnrrd.open(source)
    assert main(["preview", str(tmp_path / "ct"), "-o", str(tmp_path / "x.png")]) == 1
    err = capsys.readouterr().err
    assert "DICOM" in err and "jnrrd convert" in err and "Is a directory" not in err


def test_info_describes_a_nifti_file(capsys, nifti):
    assert main(["info", str(nifti)]) == 0
    out = capsys.readouterr().out
    assert "NIfTI" in out and "4 x 5 x 6" in out and f"jnrrd convert {nifti}" in out


def test_info_names_the_folder_and_the_series_in_its_convert_line(tmp_path, capsys):
    uid = ct_series(tmp_path / "ct", phantom((8, 8, 2)), OBLIQUE_CT)
    assert main(["info", str(tmp_path / "ct")]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("convert:"))
    assert str(tmp_path / "ct") in line and "--series" not in line and "FOLDER" not in line
    ct_series(tmp_path / "ct", phantom((8, 8, 3), seed=1), OBLIQUE_CT, seed=1)
    assert main(["info", str(tmp_path / "ct")]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("convert:"))
    assert "--series" in line and (uid in line or "UID" in line)


def test_dicom_to_nrrd_warns_only_about_what_it_drops(tmp_path):
    ct_series(tmp_path / "ct", phantom((8, 8, 2)), OBLIQUE_CT)
    with pytest.warns(jnrrd.JnrrdWarning) as caught:
        jnrrd.convert(tmp_path / "ct", tmp_path / "ct.nrrd")
    text = " ".join(str(w.message) for w in caught)
    assert "dicom:series" in text and "tiling" not in text


def test_help_texts_say_what_the_commands_do(capsys):
    assert main(["convert", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "zarr" in out.split("--format")[1].split("--encoding")[0]
    assert "time axes" in out  # --levels: not every tiled axis
    assert main(["info", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "series" in out and "DICOM" in out
