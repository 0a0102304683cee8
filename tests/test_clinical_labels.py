"""Label maps that stay labels: DICOM SEG → label map with segment metadata, 3D Slicer
segmentations through JNRRD and back (read by slicerio as Slicer would), the label marker."""

from __future__ import annotations

import numpy as np
import pytest

import jnrrd
from jnrrd.clinical.labels import is_label_map, mark_label_map, segments
from jnrrd.errors import HeaderError, JnrrdWarning, UnsupportedError

pytest.importorskip("pydicom")
slicerio = pytest.importorskip("slicerio")

from dicom_cases import Geometry, rotation, segmentation  # noqa: E402

TOL = 1e-6
GEOM = Geometry.make(rotation(0.1, 0.2, -0.3), (0.9, 0.9, 3.0), (10.0, -40.0, 55.0))
SEGMENTS = [
    {"value": 1, "name": "liver", "code": ("10200004", "SCT", "Liver"),
     "lab": (34885, 53485, 34409)},
    {"value": 2, "name": "spleen", "code": ("78961009", "SCT", "Spleen")},
    {"value": 5, "name": "tumour", "code": ("108369006", "SCT", "Neoplasm")},
]


def _labels() -> np.ndarray:
    a = np.zeros((16, 12, 7), np.uint8)
    a[2:8, 2:6, 0:5] = 1
    a[9:14, 6:10, 2:7] = 2
    a[4:6, 3:5, 2:4] = 5  # inside the liver: one label per voxel
    return a


def test_seg_becomes_a_label_map_with_segment_metadata(tmp_path):
    segmentation(tmp_path / "seg.dcm", _labels(), GEOM, SEGMENTS)
    jnrrd.convert(tmp_path / "seg.dcm", tmp_path / "seg.jnrrd")
    data, h = jnrrd.read(tmp_path / "seg.jnrrd")
    np.testing.assert_array_equal(data, _labels())
    assert h["label:map"] is True and is_label_map(h)
    np.testing.assert_allclose(h["space_origin"], GEOM.origin, atol=TOL, rtol=0)
    np.testing.assert_allclose(np.asarray(h["space_directions"]).T, GEOM.directions, atol=TOL,
                               rtol=0)
    segs = {s["value"]: s for s in h["label:segments"]}
    assert [segs[v]["name"] for v in (1, 2, 5)] == ["liver", "spleen", "tumour"]
    assert segs[1]["type"] == {"code": "10200004", "scheme": "SCT", "meaning": "Liver"}
    assert segs[1]["category"]["meaning"] == "Anatomical Structure"
    assert segs[1]["algorithm_type"] == "MANUAL"
    r, g, b = segs[1]["color"]
    assert r > 0.7 and g < 0.5 and b < 0.5  # the CIELab value above is a red
    assert jnrrd.validate(tmp_path / "seg.jnrrd") == []


def test_a_seg_pyramid_takes_the_mode(tmp_path):
    segmentation(tmp_path / "seg.dcm", _labels(), GEOM, SEGMENTS)
    jnrrd.convert(tmp_path / "seg.dcm", tmp_path / "seg.jnrrd", levels=2, tile=8)
    with jnrrd.open(tmp_path / "seg.jnrrd") as vol:
        assert vol.header["tile:downsample_method"] == "mode"
        assert set(np.unique(vol.levels[1][...])) <= {0, 1, 2, 5}


def test_seg_to_seg_nrrd_reads_in_slicerio(tmp_path):
    segmentation(tmp_path / "seg.dcm", _labels(), GEOM, SEGMENTS)
    jnrrd.convert(tmp_path / "seg.dcm", tmp_path / "seg.jnrrd", levels=2)
    with pytest.warns(JnrrdWarning, match=r"\['dicom:series'\]; they are not written"):
        jnrrd.convert(tmp_path / "seg.jnrrd", tmp_path / "out.seg.nrrd")
    seg = slicerio.read_segmentation(str(tmp_path / "out.seg.nrrd"))
    got = {s["labelValue"]: s["name"] for s in seg["segments"]}
    assert got == {1: "liver", 2: "spleen", 5: "tumour"}
    np.testing.assert_array_equal(seg["voxels"], _labels())
    np.testing.assert_allclose(seg["ijkToLPS"][:3, 3], GEOM.origin, atol=TOL, rtol=0)
    mask = slicerio.segment_mask(seg, "spleen") if hasattr(slicerio, "segment_mask") else None
    if mask is not None:
        np.testing.assert_array_equal(mask, _labels() == 2)


def test_slicer_segment_fields_survive_jnrrd_and_back(tmp_path):
    """A segmentation as 3D Slicer writes it (slicerio's writer) → JNRRD with a pyramid →
    .seg.nrrd: the same segments, every Slicer field, the same voxels."""
    ijk = np.eye(4)
    ijk[:3, :3] = GEOM.directions
    ijk[:3, 3] = GEOM.origin
    seg = slicerio.create_segmentation(_labels().shape, ijk)
    for s in SEGMENTS:
        slicerio.add_segment(seg, _labels() == s["value"], {"id": s["name"], "name": s["name"],
                                                            "color": [0.1, 0.5, 0.9]})
    slicerio.write_segmentation(str(tmp_path / "slicer.seg.nrrd"), seg)
    before = jnrrd.read_header(tmp_path / "slicer.seg.nrrd")["nrrd:key_values"]
    jnrrd.convert(tmp_path / "slicer.seg.nrrd", tmp_path / "s.jnrrd", levels=3, tile=8)
    with jnrrd.open(tmp_path / "s.jnrrd") as vol:
        assert vol.header["tile:downsample_method"] == "mode"
    jnrrd.convert(tmp_path / "s.jnrrd", tmp_path / "back.seg.nrrd")
    after = jnrrd.read_header(tmp_path / "back.seg.nrrd")["nrrd:key_values"]
    assert after == before
    again = slicerio.read_segmentation(str(tmp_path / "back.seg.nrrd"))
    assert [s["name"] for s in again["segments"]] == [s["name"] for s in seg["segments"]]
    np.testing.assert_array_equal(again["voxels"], seg["voxels"])


def test_overlapping_and_fractional_segs_are_refused(tmp_path):
    segmentation(tmp_path / "ov.dcm", _labels(), GEOM, SEGMENTS, overlap=(2, 3, 0))
    with pytest.raises(UnsupportedError, match="overlap"):
        jnrrd.convert(tmp_path / "ov.dcm", tmp_path / "x.jnrrd")
    segmentation(tmp_path / "fr.dcm", _labels(), GEOM, SEGMENTS, fractional=True)
    with pytest.raises(UnsupportedError, match="FRACTIONAL"):
        jnrrd.convert(tmp_path / "fr.dcm", tmp_path / "x.jnrrd")


def test_the_marker_is_settable_and_clearable(tmp_path):
    a = np.zeros((8, 8, 8), np.uint16)
    a[3:] = 4
    jnrrd.write(tmp_path / "m.jnrrd", a, mark_label_map({}, [{"value": 4, "name": "x"}]),
                levels=2)
    h = jnrrd.read_header(tmp_path / "m.jnrrd")
    assert h["extensions"]["label"] == "https://jnrrd.org/extensions/label/v1.0.0"
    assert h["tile:downsample_method"] == "mode" and segments(h) == [{"value": 4, "name": "x"}]
    # label:map false wins over every hint (a mode pyramid, a Slicer key, a .seg.nrrd name)
    jnrrd.write(tmp_path / "n.jnrrd", a, {"label:map": False, "nrrd:key_values": {
        "Segment0_ID": "x"}, "extensions": {"nrrd": "https://jnrrd.org/extensions/nrrd/v1.0.0"}},
        levels=2, downsample="mode")
    with jnrrd.open(tmp_path / "n.jnrrd", index_order="C") as vol:
        from jnrrd.integrations.napari import layer_data

        assert layer_data(vol, source="n.seg.nrrd")[2] == "image"
    assert not is_label_map({"type": "float32", "label:map": True})  # never for floats
    with pytest.raises(HeaderError, match="label:map.*true or false"):
        is_label_map({"type": "uint8", "label:map": "yes"})


def test_label_detection_rules():
    kv = {"extensions": {"nrrd": "https://jnrrd.org/extensions/nrrd/v1.0.0"}, "type": "uint8"}
    assert is_label_map({**kv, "nrrd:key_values": {"Segmentation_MasterRepresentation": "x"}})
    assert is_label_map({**kv, "nrrd:key_values": {"Segment3_LabelValue": "2"}})
    assert not is_label_map({**kv, "nrrd:key_values": {"Segment3_Color": "1 0 0"}})
    assert is_label_map({"type": "int16", "content": "brain label map"})
    assert not is_label_map({"type": "int16", "content": "brain"})
    assert is_label_map({"type": "uint8", "tile:downsample_method": "mode"})
    assert segments({"type": "uint8", "Segment0_LabelValue": "3", "Segment0_Name": "a",
                     "Segment0_Color": "1 0 0.5"}) == [{"value": 3, "name": "a",
                                                         "color": [1.0, 0.0, 0.5]}]


def test_a_nifti_label_map_to_seg_nrrd_lists_its_labels(tmp_path):
    nib = pytest.importorskip("nibabel")
    img = nib.Nifti1Image(_labels(), np.eye(4))
    img.header.set_intent("label")
    nib.save(img, tmp_path / "lab.nii.gz")
    with pytest.warns(JnrrdWarning, match=r"\['nifti:header'\]"):  # NIfTI provenance
        jnrrd.convert(tmp_path / "lab.nii.gz", tmp_path / "lab.seg.nrrd")
    seg = slicerio.read_segmentation(str(tmp_path / "lab.seg.nrrd"))
    assert sorted(s["labelValue"] for s in seg["segments"]) == [1, 2, 5]
    np.testing.assert_array_equal(seg["voxels"], _labels())
