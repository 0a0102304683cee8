"""Typed core fields: normalisation, defaults and errors (docs/format.md#core-fields, #types,
#encodings-and-endianness, #where-the-data-is)."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import pytest

from jnrrd.errors import HeaderError, JnrrdWarning, UnsupportedError
from jnrrd.header import CoreFields, DataFilePattern, core_fields

BASE: dict[str, Any] = {"type": "uint8", "dimension": 2, "sizes": [3, 4], "encoding": "raw"}
SPACE: dict[str, Any] = {"space": "RAS"}
DELETE = object()


def fields(warn: str | None = None, **overrides: Any) -> CoreFields:
    header = {**BASE, **overrides}
    header = {k: v for k, v in header.items() if v is not DELETE}
    if warn is None:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return core_fields(header, source="f.jnrrd")
    with pytest.warns(JnrrdWarning, match=warn):
        return core_fields(header, source="f.jnrrd")


def test_minimal() -> None:
    f = fields()
    assert f == CoreFields(type_name="uint8", dimension=2, sizes=(3, 4), endian="little",
                           encoding="raw")
    assert f.count == 12 and f.itemsize == 1 and not f.detached
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.dimension = 3  # type: ignore[misc]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("overrides", "attr", "expected", "warn"),
    [
        pytest.param({"type": "float", "endian": "big"}, "type_name", "float32", "NRRD type name",
                     id="type-alias"),
        pytest.param({"type": "block", "block_size": 3}, "block_size", 3, None, id="block"),
        pytest.param({"block_size": 3}, "block_size", 3, "ignored for type",
                     id="block-size-unused"),
        pytest.param({"dimension": 2.0, "sizes": [3.0, 4]}, "sizes", (3, 4), None,
                     id="integral-floats"),
        pytest.param({"dimension": 16, "sizes": [1] * 16}, "dimension", 16, None,
                     id="dimension-16"),
        pytest.param({"encoding": DELETE}, "encoding", "raw", "encoding: missing",
                     id="no-encoding"),
        pytest.param({"encoding": "txt"}, "encoding", "ascii", None, id="txt"),
        pytest.param({"encoding": "text"}, "encoding", "ascii", None, id="text"),
        pytest.param({"encoding": "gz"}, "encoding", "gzip", None, id="gz"),
        pytest.param({"encoding": "bz2"}, "encoding", "bzip2", None, id="bz2"),
        pytest.param({"encoding": "ZSTD"}, "encoding", "zstd", None, id="upper-case"),
        pytest.param({"encoding": "lz4"}, "encoding", "lz4", None, id="lz4"),
        pytest.param({"type": "int16"}, "endian", "little", "endian: missing",
                     id="endian-needed"),
        pytest.param({"type": "int16", "encoding": "ascii"}, "endian", "little", None,
                     id="endian-not-needed-ascii"),
        pytest.param({"type": "int16", "tile:codecs": []}, "endian", "little", None,
                     id="endian-from-codecs"),
        pytest.param({"type": "int16", "endian": "big"}, "endian", "big", None, id="big"),
        pytest.param({"space": "right-anterior-superior"}, "space", "right_anterior_superior",
                     None, id="space-hyphens"),
        pytest.param({"space": "lps"}, "space_dimension", 3, None, id="space-short"),
        pytest.param({"space": "RAST"}, "space", "right_anterior_superior_time", None,
                     id="space-rast"),
        pytest.param({"space": "3d-Right-Handed-Time"}, "space", "3D_right_handed_time", None,
                     id="space-3d"),
        pytest.param({"space": "LPS", "space_dimension": 3}, "space_dimension", 3, None,
                     id="space-and-dimension-agree"),
        pytest.param({"space_dimension": 2, "space_origin": [1, 2]}, "space_origin", (1.0, 2.0),
                     None, id="origin"),
        pytest.param({**SPACE, "space_directions": [[1, 0, 0], None]}, "space_directions",
                     ((1.0, 0.0, 0.0), None), None, id="directions"),
        pytest.param({**SPACE, "space_directions": [[1, 0, 0], []]}, "space_directions",
                     ((1.0, 0.0, 0.0), None), r"\[\] read as null", id="directions-empty"),
        pytest.param({"space_origin": [0, 0]}, "space_dimension", 2, "inferred 2",
                     id="sd-inferred"),
        pytest.param({"space_dimension": 2, "measurement_frame": [[1, 0], [0, 1]]},
                     "measurement_frame", ((1.0, 0.0), (0.0, 1.0)), None, id="frame"),
        pytest.param({**SPACE, "space_units": ["mm", "mm", None]}, "space_units",
                     ("mm", "mm", None), None, id="space-units"),
        pytest.param({"spacings": [1, None]}, "spacings", (1.0, None), None, id="spacings"),
        pytest.param({**SPACE, "spacings": [1, None], "space_directions": [[1, 0, 0], None]},
                     "spacings", (1.0, None), "also have space_directions",
                     id="spacing-and-direction"),
        pytest.param({"thicknesses": [2, 3.5]}, "thicknesses", (2.0, 3.5), None, id="thick"),
        pytest.param({"axis_mins": [0, -1]}, "axis_mins", (0.0, -1.0), None, id="axis-mins"),
        pytest.param({"axis_maxs": [1, None]}, "axis_maxs", (1.0, None), None, id="axis-maxs"),
        pytest.param({"centers": ["cell", "???"]}, "centers", ("cell", None), None,
                     id="centers-unknown"),
        pytest.param({"centers": ["Node", "none"]}, "centers", ("node", None), None,
                     id="centers-none"),
        pytest.param({"kinds": ["RGB-color", "domain"]}, "kinds", ("rgb_color", "domain"), None,
                     id="kinds-nrrd"),
        pytest.param({"kinds": ["???", "none"]}, "kinds", (None, None), None, id="kinds-unknown"),
        pytest.param({"kinds": ["rgba-color", None]}, "kinds", ("rgba_color", None),
                     "implies size 4", id="kind-size-mismatch"),
        pytest.param({"labels": ["x", "y"]}, "labels", ("x", "y"), None, id="labels"),
        pytest.param({"units": ["mm", None]}, "units", ("mm", None), None, id="units"),
        pytest.param({"content": "brain"}, "content", "brain", None, id="content"),
        pytest.param({"sample_units": "HU"}, "sample_units", "HU", None, id="sample-units"),
        pytest.param({"line_skip": 2}, "line_skip", 2, None, id="line-skip"),
        pytest.param({"byte_skip": -1}, "byte_skip", -1, None, id="byte-skip-minus-one"),
        pytest.param({"data_file": "d.raw"}, "data_file", "d.raw", None, id="data-file"),
        pytest.param({"data_files": ["a.raw", "b.raw"]}, "data_files", ("a.raw", "b.raw"), None,
                     id="data-files"),
        pytest.param({"data_file_pattern": {"format": "s%03d.raw", "min": 1, "max": 4,
                                            "step": 1}},
                     "data_file_pattern", DataFilePattern("s%03d.raw", 1, 4, 1), None,
                     id="pattern"),
        pytest.param({"data_file_pattern": {"format": "%%_%i", "min": 2, "max": 1}},
                     "data_file_pattern", None, "step: missing", id="pattern-no-step"),
    ],
)
def test_valid(overrides: dict[str, Any], attr: str, expected: Any, warn: str | None) -> None:
    if attr == "data_file_pattern" and expected is None:
        with pytest.raises(HeaderError, match="step"):  # default step 1 runs from 2 down to 1
            fields(warn, **overrides)
        return
    assert getattr(fields(warn, **overrides), attr) == expected


@pytest.mark.slow
@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        pytest.param({"type": DELETE}, "type: required", id="no-type"),
        pytest.param({"type": "float128"}, "type: unknown type", id="bad-type"),
        pytest.param({"type": 5}, "type: expected a type name", id="type-not-string"),
        pytest.param({"dimension": DELETE}, "dimension: required", id="no-dimension"),
        pytest.param({"dimension": 0, "sizes": []}, "dimension: expected an integer >= 1",
                     id="dimension-0"),
        pytest.param({"dimension": 17, "sizes": [1] * 17}, "dimension: expected an integer from",
                     id="dimension-17"),
        pytest.param({"dimension": True}, "dimension: expected an integer", id="dimension-bool"),
        pytest.param({"dimension": 2.5}, "dimension: expected an integer", id="dimension-float"),
        pytest.param({"sizes": DELETE}, "sizes: required", id="no-sizes"),
        pytest.param({"sizes": [3]}, "sizes: expected a list of 2", id="sizes-short"),
        pytest.param({"sizes": 3}, "sizes: expected a list", id="sizes-scalar"),
        pytest.param({"sizes": [3, 0]}, r"sizes\[1\]: expected an integer >= 1", id="size-0"),
        pytest.param({"sizes": [3, True]}, r"sizes\[1\]: expected an integer", id="size-bool"),
        pytest.param({"sizes": [3, 4.5]}, r"sizes\[1\]: expected an integer", id="size-frac"),
        pytest.param({"sizes": [3, "4"]}, r"sizes\[1\]: expected an integer", id="size-str"),
        pytest.param({"encoding": "zip"}, "encoding: expected one of", id="bad-encoding"),
        pytest.param({"encoding": 1}, "encoding: expected one of", id="encoding-int"),
        pytest.param({"endian": "middle"}, "endian: expected 'little' or 'big'", id="bad-endian"),
        pytest.param({"type": "block"}, "block_size: required", id="block-no-size"),
        pytest.param({"type": "block", "block_size": 0}, "block_size: expected an integer >= 1",
                     id="block-size-0"),
        pytest.param({"type": "block", "block_size": 2, "encoding": "ascii"},
                     "encoding: expected a binary encoding", id="block-ascii"),
        pytest.param({"space": "up-down"}, "space: expected a space name", id="bad-space"),
        pytest.param({"space": 3}, "space: expected a space name", id="space-int"),
        pytest.param({"space": "RAS", "space_dimension": 4}, "space_dimension: expected 3",
                     id="space-dimension-disagrees"),
        pytest.param({**SPACE, "space_origin": [0, 0]}, "space_origin: expected a list of 3",
                     id="origin-length"),
        pytest.param({**SPACE, "space_origin": [0, 0, "a"]},
                     r"space_origin\[2\]: expected a number", id="origin-str"),
        pytest.param({**SPACE, "space_directions": [[1, 0, 0]]},
                     "space_directions: expected a list of 2", id="directions-count"),
        pytest.param({**SPACE, "space_directions": [[1, 0], None]},
                     r"space_directions\[0\]: expected a list of 3", id="direction-length"),
        pytest.param({**SPACE, "space_directions": ["none", None]},
                     r"space_directions\[0\]: expected a list", id="direction-string"),
        pytest.param({**SPACE, "measurement_frame": [[1, 0, 0]]},
                     "measurement_frame: expected a list of 3", id="frame-columns"),
        # a null column was carried as None: a frame that no reader of NRRD can use
        pytest.param({**SPACE, "measurement_frame": [[1, 0, 0], None, [0, 0, 1]]},
                     "measurement_frame\\[1\\]: expected an array of 3 numbers",
                     id="frame-null-column"),
        pytest.param({"measurement_frame": [[1]]}, "measurement_frame: needs 'space'",
                     id="frame-without-space"),
        pytest.param({"space_units": ["mm"]}, "space_units: needs 'space'", id="units-no-space"),
        pytest.param({"spacings": [1]}, "spacings: expected a list of 2", id="spacings-length"),
        pytest.param({"spacings": [1, True]}, r"spacings\[1\]: expected a number",
                     id="spacing-bool"),
        pytest.param({"spacings": [1, 10**400]}, r"spacings\[1\]: expected a number within",
                     id="spacing-huge-int"),
        pytest.param({"centers": ["cell", "middle"]}, r"centers\[1\]: expected 'cell'",
                     id="bad-center"),
        pytest.param({"kinds": ["domain", "colour"]}, r"kinds\[1\]: expected a kind",
                     id="bad-kind"),
        pytest.param({"labels": ["x", 1]}, r"labels\[1\]: expected a string", id="label-int"),
        pytest.param({"units": "mm"}, "units: expected a list", id="units-string"),
        pytest.param({"line_skip": -1}, "line_skip: expected an integer >= 0", id="line-skip"),
        pytest.param({"line_skip": False}, "line_skip: expected an integer", id="line-skip-bool"),
        pytest.param({"byte_skip": -2}, "byte_skip: expected an integer >= -1", id="byte-skip"),
        pytest.param({"byte_skip": -1, "encoding": "gzip"}, "byte_skip: expected -1 only with",
                     id="byte-skip-gzip"),
        pytest.param({"data_file": "a", "data_files": ["b"]}, "data_files: expected at most one of",
                     id="two-detached"),
        pytest.param({"data_file": ""}, "data_file: expected a non-empty path",
                     id="empty-data-file"),
        pytest.param({"data_files": []}, "data_files: expected a non-empty list",
                     id="empty-data-files"),
        pytest.param({"data_files": ["a", 2]}, r"data_files\[1\]: expected a string",
                     id="data-files-int"),
        pytest.param({"data_files": ["a", "b", "c", "d", "e"]},
                     "data_files: expected a file count that divides", id="data-files-count"),
        pytest.param({"data_file_pattern": "a%d"}, "data_file_pattern: expected an object",
                     id="pattern-string"),
        pytest.param({"data_file_pattern": {"format": "a%d", "min": 1}},
                     r"data_file_pattern\.max: required", id="pattern-no-max"),
        pytest.param({"data_file_pattern": {"format": "a%s", "min": 1, "max": 2, "step": 1}},
                     r"data_file_pattern\.format: expected exactly one", id="pattern-s"),
        pytest.param({"data_file_pattern": {"format": "a%n", "min": 1, "max": 2, "step": 1}},
                     r"data_file_pattern\.format: expected exactly one", id="pattern-n"),
        pytest.param({"data_file_pattern": {"format": "a", "min": 1, "max": 2, "step": 1}},
                     r"data_file_pattern\.format: expected exactly one", id="pattern-none"),
        pytest.param({"data_file_pattern": {"format": "%d%d", "min": 1, "max": 2, "step": 1}},
                     r"data_file_pattern\.format: expected exactly one", id="pattern-two"),
        pytest.param({"data_file_pattern": {"format": "%d%", "min": 1, "max": 2, "step": 1}},
                     r"data_file_pattern\.format: expected exactly one", id="pattern-dangling"),
        pytest.param({"data_file_pattern": {"format": "%999d", "min": 1, "max": 2, "step": 1}},
                     r"data_file_pattern\.format: expected a field width", id="pattern-width"),
        pytest.param({"data_file_pattern": {"format": "%d", "min": 1, "max": 4, "step": 0}},
                     r"data_file_pattern\.step: expected a non-zero positive", id="step-0"),
        pytest.param({"data_file_pattern": {"format": "%d", "min": 1, "max": 4, "step": -1}},
                     r"data_file_pattern\.step: expected a non-zero positive", id="step-sign"),
        pytest.param({"data_file_pattern": {"format": "%d", "min": 4, "max": 1, "step": 1}},
                     r"data_file_pattern\.step: expected a non-zero negative", id="step-down"),
        pytest.param({"data_file_pattern": {"format": "%d", "min": 1, "max": 5, "step": 1}},
                     "data_file_pattern: expected a file count that divides", id="pattern-count"),
    ],
)
def test_invalid(overrides: dict[str, Any], field: str) -> None:
    header = {k: v for k, v in {**BASE, **overrides}.items() if v is not DELETE}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JnrrdWarning)  # e.g. an inferred space dimension
        with pytest.raises(HeaderError, match=f"^f.jnrrd: {field}"):
            core_fields(header, source="f.jnrrd")


def test_not_a_mapping() -> None:
    with pytest.raises(HeaderError, match="expected a mapping"):
        core_fields([1, 2], source="f.jnrrd")  # type: ignore[arg-type]


def test_message_without_source() -> None:
    with pytest.raises(HeaderError, match="^sizes: expected a list of 2"):
        core_fields({**BASE, "sizes": [1]})


def test_nrrd_mode_accepts_type_names_silently() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f = core_fields({**BASE, "type": "ushort", "endian": "big"}, nrrd=True)
    assert f.type_name == "uint16"


def test_pattern_file_names() -> None:
    f = fields(data_file_pattern={"format": "s%%%03d.raw", "min": 6, "max": 1, "step": -2})
    pattern = f.data_file_pattern
    assert pattern is not None and pattern.count == 3
    assert pattern.file_names() == ["s%006.raw", "s%004.raw", "s%002.raw"]
    with pytest.raises(UnsupportedError, match="max_files"):
        pattern.file_names(max_files=2, source="f.jnrrd")


def test_detached_and_itemsize() -> None:
    assert fields(data_file="x.raw").detached
    assert fields(type="complex128", endian="little").itemsize == 16
    assert fields(type="block", block_size=7).itemsize == 7


def test_block_ignores_endian() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fields(type="block", block_size=4).endian == "little"


@pytest.mark.parametrize("encoding", ["raw", "hex", "gzip", "bzip2", "zstd", "lz4"])
def test_endian_needed_for_binary_encodings(encoding: str) -> None:
    assert fields("endian: missing", type="float32", encoding=encoding).endian == "little"
