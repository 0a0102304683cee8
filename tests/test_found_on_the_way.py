"""Regression tests for the defects found while trying jnrrd on clinical data (the "found on
the way" list of the clinical issue). Each failed before its fix."""

from __future__ import annotations

import gzip
import io
import sys
from pathlib import Path

import numpy as np
import pytest

import jnrrd
from jnrrd.cli import main
from jnrrd.errors import FormatError, JnrrdWarning, MissingDependencyError, UnsupportedError


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# -- a label map converted with levels is averaged (silent change) ------------------------
def _segmentation() -> np.ndarray:
    """Label 1 on x < 3, label 3 on x >= 3 (a 2-block straddles the border: its average is
    2), and label 7 on 40 of the 64 voxels of the 4-block at (4, 4, 4) (average 4.375)."""
    a = np.ones((8, 8, 8), np.uint8)
    a[3:] = 3
    block = np.zeros(64, np.uint8)
    block[:40] = 7
    a[4:, 4:, 4:] = block.reshape(4, 4, 4)
    return a


def _slicer_seg(path: Path) -> None:
    kv = {"Segmentation_MasterRepresentation": "Binary labelmap",
          "Segment0_ID": "Segment_1", "Segment0_Name": "one", "Segment0_LabelValue": "1",
          "Segment1_ID": "Segment_3", "Segment1_Name": "three", "Segment1_LabelValue": "3",
          "Segment2_ID": "Segment_7", "Segment2_Name": "seven", "Segment2_LabelValue": "7"}
    jnrrd.write(path, _segmentation(), {"space": "LPS", "space_origin": [0, 0, 0],
                                        "space_directions": np.eye(3).tolist(),
                                        "nrrd:key_values": kv})


def test_converting_a_slicer_segmentation_with_levels_keeps_labels(tmp_path, capsys):
    src, out = tmp_path / "seg.seg.nrrd", tmp_path / "out.jnrrd"
    _slicer_seg(src)
    assert _cli(capsys, "convert", str(src), str(out), "--levels", "3", "--quiet")[0] == 0
    with jnrrd.open(out) as vol:
        assert vol.header["tile:downsample_method"] == "mode"
        assert set(np.unique(vol.levels[1][...])) == {0, 1, 3, 7}  # no invented label 2
        assert vol.levels[2][1, 1, 1] == 7  # the majority label of its block survives
        assert vol.header["nrrd:key_values"]["Segment2_Name"] == "seven"


def test_a_converted_segmentation_opens_in_napari_as_labels(tmp_path):
    from jnrrd.integrations.napari import layer_data

    _slicer_seg(tmp_path / "seg.seg.nrrd")
    jnrrd.convert(tmp_path / "seg.seg.nrrd", tmp_path / "out.jnrrd", levels=3)
    with jnrrd.open(tmp_path / "out.jnrrd", index_order="C") as vol:
        assert layer_data(vol, source=str(tmp_path / "out.jnrrd"))[2] == "labels"


def test_averaging_a_label_map_on_request_warns(tmp_path):
    with pytest.warns(JnrrdWarning, match="label map"):
        jnrrd.write(tmp_path / "a.jnrrd", _segmentation(), {"label:map": True}, levels=2,
                    downsample="average")


# -- jnrrd info on a classic NRRD without a .nrrd suffix -----------------------------------
@pytest.mark.parametrize("name", ["scan", "scan.dat"])
@pytest.mark.parametrize("encoding", ["gzip", "bzip2"])
def test_info_reads_a_classic_nrrd_by_its_content(tmp_path, capsys, name, encoding):
    jnrrd.write(tmp_path / "g.nrrd", np.arange(64, dtype=np.int16).reshape(4, 4, 4),
                encoding=encoding)
    (tmp_path / name).write_bytes((tmp_path / "g.nrrd").read_bytes())
    code, out, err = _cli(capsys, "info", str(tmp_path / name))
    assert code == 0, err
    assert "int16" in out and f"encoding:    {encoding}" in out


def test_info_names_a_bare_space_dimension(tmp_path, capsys):
    jnrrd.write(tmp_path / "s.jnrrd", np.zeros((2, 2), np.uint8),
                {"space_dimension": 4, "space_directions": [[1, 0, 0, 0], [0, 1, 0, 0]]})
    out = _cli(capsys, "info", str(tmp_path / "s.jnrrd"))[1]
    assert "space:       4-D (no named space)" in out


# -- an .nhdr into a gzip file longer than needed -------------------------------------------
@pytest.mark.parametrize("pack", [gzip.compress, __import__("bz2").compress])
def test_a_longer_compressed_data_file_without_byte_skip_warns(tmp_path, pack):
    a = np.arange(12, dtype="<u2")
    enc = "gzip" if pack is gzip.compress else "bzip2"
    (tmp_path / "d.raw.z").write_bytes(pack(b"\0" * 10 + a.tobytes()))
    (tmp_path / "x.nhdr").write_text("NRRD0004\ntype: uint16\ndimension: 1\nsizes: 12\n"
                                     f"endian: little\nencoding: {enc}\ndata file: d.raw.z\n")
    with pytest.warns(JnrrdWarning, match=r"10 decompressed bytes past the 24.*byte skip: -1"):
        data, _ = jnrrd.read(tmp_path / "x.nhdr")
    assert data[0] == 0  # read from the start, as teem and ITK do


def test_an_exact_compressed_data_file_reads_without_warning(tmp_path):
    a = np.arange(12, dtype="<u2")
    (tmp_path / "d.raw.gz").write_bytes(gzip.compress(a.tobytes()))
    (tmp_path / "x.nhdr").write_text("NRRD0004\ntype: uint16\ndimension: 1\nsizes: 12\n"
                                     "endian: little\nencoding: gzip\ndata file: d.raw.gz\n")
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "x.nhdr")[0], a)


# -- messages ---------------------------------------------------------------------------------
def test_an_empty_nrrd_names_both_magic_lines(tmp_path):
    (tmp_path / "empty.nrrd").write_bytes(b"")
    with pytest.raises(FormatError, match="empty input.*JNRRD or NRRD.*NRRD0001"):
        jnrrd.read(tmp_path / "empty.nrrd")


def test_the_complex_refusal_suggests_a_complex_axis(tmp_path):
    with pytest.raises(UnsupportedError, match="complex64.*kind 'complex'") as e:
        jnrrd.write(tmp_path / "c.nrrd", np.zeros(3, np.complex64))
    assert "float16" not in str(e.value)


def test_to_dask_without_dask_names_the_extra(tmp_path, monkeypatch):
    jnrrd.write(tmp_path / "a.jnrrd", np.zeros((4, 4), np.uint8), tile=2)
    monkeypatch.setitem(sys.modules, "dask", None)
    monkeypatch.setitem(sys.modules, "dask.array", None)
    with jnrrd.open(tmp_path / "a.jnrrd") as vol, pytest.raises(
            MissingDependencyError, match=r"jnrrd\[dask\]"):
        vol.to_dask()


def test_plain_slicer_keys_go_to_nrrd_key_values(tmp_path):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jnrrd.write(tmp_path / "s.nrrd", np.zeros((2, 2, 2), np.uint8),
                    {"Segment0_LabelValue": 1, "Segment0_Name": "liver"})
    assert b"Segment0_LabelValue:=1\nSegment0_Name:=liver\n" in (tmp_path / "s.nrrd").read_bytes()
    kv = jnrrd.read_header(tmp_path / "s.nrrd")["nrrd:key_values"]
    assert kv == {"Segment0_LabelValue": "1", "Segment0_Name": "liver"}


def test_preview_refuses_a_non_png_name(tmp_path, capsys):
    jnrrd.write(tmp_path / "v.jnrrd", np.zeros((4, 4), np.uint8))
    code, _, err = _cli(capsys, "preview", str(tmp_path / "v.jnrrd"), "-o",
                        str(tmp_path / "x.jpg"))
    assert code == 2 and "PNG" in err and not (tmp_path / "x.jpg").exists()


def test_the_progress_bar_shows_elapsed_time_and_eta():
    from jnrrd.progress import Bar

    now = [100.0]
    stream = io.StringIO()
    bar = Bar(stream, force=True, clock=lambda: now[0])
    bar(0, 4)
    now[0] = 130.0
    bar(1, 4)
    assert stream.getvalue().rstrip().endswith("1/4 tiles 0:30 left 1:30")
    now[0] = 3800.0
    bar(4, 4)
    assert "4/4 tiles 1:01:40" in stream.getvalue()
