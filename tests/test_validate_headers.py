"""``jnrrd.validate`` on header mappings: named cases with the exact problems expected.

Each case edits a valid header (untiled or tiled) and lists every ``(severity, field)`` that
must come back, no more and no fewer; ``fragment`` must appear in the first problem's message.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from jnrrd.validation import Problem, validate

TILE_URI = "https://jnrrd.org/extensions/tile/v1.0.0"
DELETE = object()

CORE: dict[str, Any] = {
    "jnrrd": "0004",
    "type": "uint16",
    "dimension": 3,
    "sizes": [40, 30, 20],
    "endian": "little",
    "encoding": "raw",
}

# 40x30x20 in 16^3 tiles: a 3x2x2 grid, 12 tiles at level 0; level 1 (20x15x10) is 2x1x1.
TILED: dict[str, Any] = {
    **CORE,
    "extensions": {"tile": TILE_URI},
    "tile:enabled": True,
    "tile:dimensions": [0, 1, 2],
    "tile:sizes": [16, 16, 16],
    "tile:storage": "internal",
    "tile:format": "contiguous",
    "tile:offset_table": [1000 + 100 * i for i in range(12)],
    "tile:size_table": [100] * 12,
    "tile:compression": "zstd",
}

EXTERNAL: dict[str, Any] = {
    **{k: v for k, v in TILED.items() if k not in ("tile:offset_table", "tile:size_table",
                                                     "tile:format")},
    "tile:storage": "external",
    "tile:pattern": "tiles/{z}_{y}_{x}.zst",
}

PYRAMID: dict[str, Any] = {
    **TILED,
    "tile:levels": 2,
    "tile:level_scales": [1, 2],
    "tile:offset_table": [1000 + 100 * i for i in range(14)],
    "tile:size_table": [100] * 14,
}


def edit(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A deep copy of ``base`` with fields replaced (``__`` in a name stands for ``:``)."""
    out = copy.deepcopy(base)
    for key, value in changes.items():
        key = key.replace("__", ":")
        if value is DELETE:
            out.pop(key, None)
        else:
            out[key] = value
    return out


E, W, N = "error", "warning", "note"

CASES = [
    # -- core: valid ------------------------------------------------------------------------
    pytest.param(CORE, [], "", id="core-valid"),
    pytest.param(edit(CORE, space="RAS", space_origin=[0, 0, 0],
                      space_directions=[[1, 0, 0], [0, 1, 0], [0, 0, 2.5]],
                      kinds=["domain", "domain", "domain"], centers=["cell", "???", None],
                      labels=["x", "y", "z"]), [], "", id="core-valid-space"),
    pytest.param(edit(CORE, sizes=[40.0, 30, 20]), [], "", id="core-integral-float-size"),
    pytest.param(edit(CORE, encoding="GZIP"), [], "", id="core-encoding-any-case"),
    pytest.param(edit(CORE, space="left-posterior-superior", space_origin=[1, 2, 3]), [], "",
                 id="core-space-hyphen-spelling"),
    pytest.param(edit(CORE, type="uint8", endian=DELETE), [], "", id="core-one-byte-no-endian"),
    # -- core: invalid ----------------------------------------------------------------------
    pytest.param(edit(CORE, type=DELETE), [(E, "type")], "required", id="core-type-missing"),
    pytest.param(edit(CORE, type="float128"), [(E, "type")], "not one of",
                 id="core-type-unknown"),
    pytest.param(edit(CORE, type="float"), [(W, "type")], "NRRD type name",
                 id="core-type-nrrd-alias"),
    pytest.param(edit(CORE, dimension=0), [(E, "dimension")], ">= 1", id="core-dimension-0"),
    pytest.param(edit(CORE, dimension=17, sizes=[1] * 17),
                 [(E, "dimension"), (E, "sizes")], "<= 16", id="core-dimension-17"),
    pytest.param(edit(CORE, dimension=True), [(E, "dimension")], "expected integer",
                 id="core-dimension-bool"),
    pytest.param(edit(CORE, sizes=[40, 30]), [(E, "sizes")], "expected 3 entries",
                 id="core-sizes-too-short"),
    pytest.param(edit(CORE, sizes=[40, 0, 20]), [(E, "/sizes/1")], ">= 1",
                 id="core-sizes-zero"),
    pytest.param(edit(CORE, sizes=[True, 30, 20]), [(E, "/sizes/0")], "expected integer",
                 id="core-sizes-bool"),
    pytest.param(edit(CORE, encoding=DELETE), [(W, "encoding")], "assuming 'raw'",
                 id="core-encoding-missing"),
    pytest.param(edit(CORE, encoding="rle"), [(E, "encoding")], "not one of",
                 id="core-encoding-unknown"),
    pytest.param(edit(CORE, endian=DELETE), [(W, "endian")], "assuming 'little'",
                 id="core-endian-missing"),
    pytest.param(edit(CORE, endian="middle"), [(E, "endian")], "not one of",
                 id="core-endian-unknown"),
    pytest.param(edit(CORE, spacings=[1.0, 1.0]), [(E, "spacings")], "expected 3 entries",
                 id="core-spacings-length"),
    pytest.param(edit(CORE, space="RAS", space_directions=[[1, 0, 0], [0, 1], None, None]),
                 [(E, "space_directions"), (E, "/space_directions/1")], "expected 3 entries",
                 id="core-space-directions-lengths"),
    pytest.param(edit(CORE, space="RAS", space_dimension=4), [(E, "space_dimension")],
                 "3-dimensional", id="core-space-dimension-disagrees"),
    pytest.param(edit(CORE, space="RAS", space_origin=[0, 0]), [(E, "space_origin")],
                 "the space dimension", id="core-space-origin-length"),
    pytest.param(edit(CORE, space_units=["mm", "mm", "mm"]), [(E, "space_units")],
                 "needs 'space'", id="core-space-units-without-space"),
    pytest.param(edit(CORE, space="RAS", measurement_frame=[[1, 0, 0], [0, 1], [0, 0, 1]]),
                 [(E, "/measurement_frame/1")], "column 1", id="core-measurement-frame-column"),
    pytest.param(edit(CORE, space="bogus_space"), [(E, "space")], "not one of",
                 id="core-space-unknown"),
    pytest.param(edit(CORE, kinds=["domain", "wavelet", "domain"]), [(E, "/kinds/1")],
                 "not one of", id="core-kind-unknown"),
    pytest.param(edit(CORE, kinds=["RGB-color", "domain", "domain"]), [(W, "kinds")],
                 "implies size 3", id="core-kind-size-mismatch"),
    pytest.param(edit(CORE, centers=["cell", "middle", None]), [(E, "/centers/1")],
                 "not one of", id="core-center-unknown"),
    pytest.param(edit(CORE, type="block", endian=DELETE), [(E, "block_size")], "required",
                 id="core-block-without-block-size"),
    pytest.param(edit(CORE, encoding="gzip", byte_skip=-1), [(E, "byte_skip")],
                 "only with encoding 'raw'", id="core-byte-skip-minus-one-gzip"),
    pytest.param(edit(CORE, data_file="a.raw", data_files=["b.raw"]), [(E, "data_files")],
                 "at most one", id="core-two-data-file-fields"),
    pytest.param(edit(CORE, data_file_pattern={"format": "s%03d.raw", "min": 1, "max": 4,
                                               "step": 0}),
                 [(E, "/data_file_pattern/step")], "", id="core-pattern-step-zero"),
    pytest.param(edit(CORE, data_file_pattern={"format": "slice.raw", "min": 1, "max": 20,
                                               "step": 1}),
                 [(E, "data_file_pattern")], "exactly one %d", id="core-pattern-no-conversion"),
    pytest.param(edit(CORE, colour="red"), [(W, "colour")], "unknown field",
                 id="core-unknown-field"),
    pytest.param(edit(CORE, **{"meta:author": "x"}), [(W, "extensions")], "not declared",
                 id="core-undeclared-prefix"),
    pytest.param(edit(CORE, extensions={"meta": "https://example.org/meta/v1"},
                      **{"meta:author": "x"}), [(N, "meta:")], "no bundled schema",
                 id="core-unknown-extension-is-a-note"),
    pytest.param(edit(CORE, dimension=2, endian="middle", spacings=[1, 2, 3, 4],
                      labels=["x", 5]),
                 [(E, "sizes"), (E, "endian"), (E, "spacings"), (E, "/labels/1")], "",
                 id="core-many-problems-collected"),
    # -- tiling: valid ----------------------------------------------------------------------
    pytest.param(TILED, [], "", id="tile-valid-internal"),
    pytest.param(EXTERNAL, [], "", id="tile-valid-external"),
    pytest.param(PYRAMID, [], "", id="tile-valid-pyramid"),
    pytest.param(edit(TILED, tile__compression="gz"), [], "", id="tile-compression-alias-gz"),
    pytest.param(edit(PYRAMID, tile__level_scales=[1, [2, 2, 1]],
                      tile__offset_table=list(range(1000, 1016)), tile__size_table=[1] * 16),
                 [], "", id="tile-anisotropic-scales"),
    pytest.param(edit(TILED, tile__offset_table=[None] + TILED["tile:offset_table"][1:],
                      tile__size_table=[None] + [100] * 11, tile__padding_value=None,
                      type="float32", tile__format="chunked"), [], "",
                 id="tile-sparse-null-entries"),
    pytest.param(edit(TILED, extensions={"t": TILE_URI},
                      **{k.replace("tile:", "t:"): v for k, v in TILED.items()
                         if k.startswith("tile:")},
                      **{k.replace(":", "__"): DELETE for k in TILED if k.startswith("tile:")}),
                 [], "", id="tile-other-prefix-found-by-uri"),
    pytest.param(edit(TILED, tile__codecs=[{"name": "bytes",
                                            "configuration": {"endian": "little"}},
                                           {"name": "zstd", "configuration": {"level": 3}}]),
                 [], "", id="tile-codecs-agree-with-compression"),
    pytest.param(edit(EXTERNAL, tile__pattern="tiles/{i}.zst",
                      tile__files=[{"indices": [0, 0, 0], "file": None}]), [], "",
                 id="tile-pattern-and-sparse-files"),
    # -- tiling: invalid --------------------------------------------------------------------
    pytest.param(edit(TILED, tile__enabled=False), [(W, "tile:enabled")], "tiling is off",
                 id="tile-disabled"),
    pytest.param(edit(TILED, tile__enabled=DELETE), [(E, "tile:enabled")], "required",
                 id="tile-enabled-missing"),
    pytest.param(edit(TILED, tile__enabled="yes"), [(E, "tile:enabled")], "expected boolean",
                 id="tile-enabled-not-boolean"),
    pytest.param(edit(TILED, tile__dimensions=[0, 2, 1]), [(E, "tile:dimensions")],
                 "strictly increasing", id="tile-dimensions-unordered"),
    pytest.param(edit(TILED, tile__dimensions=[0, 3], tile__sizes=[16, 16]),
                 [(E, "/tile:dimensions/1")], "does not exist", id="tile-dimension-out-of-range"),
    pytest.param(edit(TILED, tile__sizes=[16, 16]), [(E, "tile:sizes")], "expected 3 entries",
                 id="tile-sizes-length"),
    pytest.param(edit(TILED, tile__storage="cloud"), [(E, "tile:storage")], "not one of",
                 id="tile-storage-unknown"),
    pytest.param(edit(TILED, tile__offset_table=list(range(1000, 1011))),
                 [(E, "tile:offset_table")], "expected 12 entries",
                 id="tile-offset-table-length"),
    pytest.param(edit(TILED, tile__offset_table=[1000, -5] + [2000] * 10),
                 [(E, "/tile:offset_table/1")], "", id="tile-offset-negative"),
    pytest.param(edit(TILED, tile__dimensions=[0, 1], tile__sizes=[1, 1], sizes=[40, 3, 1],
                      tile__format="chunked", tile__offset_table=[1000] * 70 + [1.5] + [1000] * 49,
                      tile__size_table=[1] * 120),
                 [(E, "/tile:offset_table/70")], "", id="tile-long-table-bad-entry"),
    pytest.param(edit(TILED, tile__size_table=[None] + [100] * 11),
                 [(E, "/tile:size_table/0")], "null entries", id="tile-size-table-null-mismatch"),
    pytest.param(edit(TILED, tile__codecs=[{"name": "bytes",
                                            "configuration": {"endian": "little"}},
                                           {"name": "gzip", "configuration": {"level": 5}}]),
                 [(E, "tile:compression")], "disagrees", id="tile-compression-vs-codecs"),
    pytest.param(edit(TILED, encoding="gzip", tile__compression=DELETE,
                      tile__codecs=[{"name": "bytes", "configuration": {"endian": "little"}}]),
                 [(E, "encoding")], "must be 'raw'", id="tile-codecs-with-encoding-gzip"),
    pytest.param(edit(TILED, tile__compression=DELETE,
                      tile__codecs=[{"name": "bytes", "configuration": {"endian": "big"}}]),
                 [(E, "endian")], "disagrees", id="tile-codecs-endian-disagrees"),
    pytest.param(edit(TILED, tile__compression=DELETE,
                      tile__codecs=[{"name": "zstd", "configuration": {"level": 3}}]),
                 [(E, "tile:codecs")], "cannot be built", id="tile-codecs-no-array-bytes"),
    pytest.param(edit(TILED, tile__compression="snappy"), [(E, "tile:compression")],
                 "not one of", id="tile-compression-unknown"),
    pytest.param(edit(TILED, encoding="bzip2"), [(E, "encoding")], "disagrees",
                 id="tile-encoding-vs-compression"),
    pytest.param(edit(TILED, encoding="ascii"), [(E, "encoding")], "cannot be used",
                 id="tile-ascii-encoding"),
    pytest.param(edit(PYRAMID, tile__level_scales=DELETE), [(E, "tile:level_scales")],
                 "required", id="tile-levels-without-scales"),
    pytest.param(edit(PYRAMID, tile__levels=3), [(E, "tile:level_scales")],
                 "expected 3 entries", id="tile-levels-vs-scales"),
    pytest.param(edit(PYRAMID, tile__level_scales=[2, 4]), [(E, "/tile:level_scales/0")],
                 "scale must be 1", id="tile-level-0-scale"),
    pytest.param(edit(PYRAMID, tile__level_scales=[1, [2, 2]]),
                 [(E, "/tile:level_scales/1")], "level 1", id="tile-scale-list-length"),
    pytest.param(edit(PYRAMID, tile__levels_stored=[1]), [(E, "tile:levels_stored")],
                 "level 0 must be stored", id="tile-level-0-not-stored"),
    pytest.param(edit(PYRAMID, tile__levels_stored=[0, 1], tile__levels_virtual=[1]),
                 [(E, "tile:levels_stored")], "disjoint", id="tile-stored-virtual-overlap"),
    pytest.param(edit(PYRAMID, tile__levels_virtual=[1]), [(E, "tile:offset_table"),
                                                           (E, "tile:size_table")],
                 "expected 12 entries", id="tile-virtual-level-has-no-entries"),
    pytest.param(edit(PYRAMID, tile__level_tile_sizes=[[8, 8, 8], [8, 8, 8]]),
                 [(E, "/tile:level_tile_sizes/0")], "must equal",
                 id="tile-level-tile-sizes-entry-0"),
    pytest.param(edit(EXTERNAL, tile__pattern="tiles/{study}_{z}_{y}_{x}"),
                 [(E, "tile:pattern")], "unknown placeholder", id="tile-pattern-placeholder"),
    pytest.param(edit(EXTERNAL, tile__pattern="tiles/{z}_{y}.zst"), [(E, "tile:pattern")],
                 "does not tell tiles apart", id="tile-pattern-not-injective"),
    pytest.param(edit(EXTERNAL, tile__pattern="tiles/{x}_{y}_{z}}"), [(E, "tile:pattern")],
                 "stray", id="tile-pattern-stray-brace"),
    pytest.param(edit(EXTERNAL, tile__levels=2, tile__level_scales=[1, 2]),
                 [(E, "tile:pattern")], "add {l}", id="tile-pattern-needs-level"),
    pytest.param(edit(EXTERNAL, tile__pattern=DELETE), [(E, "tile:pattern")],
                 "tile:pattern or tile:files", id="tile-external-without-pattern-or-files"),
    pytest.param(edit(EXTERNAL, tile__files=[{"indices": [0, 0, 0], "file": "a"},
                                             {"indices": [0, 0, 0], "file": "b"}]),
                 [(E, "/tile:files/1")], "second entry", id="tile-files-duplicate"),
    pytest.param(edit(EXTERNAL, tile__files=[{"indices": [3, 0, 0], "file": "a"}]),
                 [(E, "/tile:files/0/indices")], "outside", id="tile-files-outside-grid"),
    pytest.param(edit(EXTERNAL, tile__offset_table=[0] * 12), [(W, "tile:offset_table")],
                 "does not apply", id="tile-external-offset-table-ignored"),
    pytest.param(edit(TILED, tile__padding_value=70000), [(E, "tile:padding_value")],
                 "out of range", id="tile-padding-out-of-range"),
    pytest.param(edit(TILED, tile__padding_value=None), [(E, "tile:padding_value")],
                 "float type", id="tile-padding-null-for-integers"),
    pytest.param(edit(TILED, tile__overlap=[16, 0, 0]), [(W, "/tile:overlap/0")],
                 "not smaller", id="tile-overlap-not-smaller"),
    pytest.param(edit(TILED, tile__dimensions=[0, 1], tile__sizes=[16, 16],
                      tile__overlap=[2, 2, 1], tile__offset_table=list(range(1000, 1006)),
                      tile__size_table=[1] * 6),
                 [(E, "tile:overlap")], "untiled axes", id="tile-overlap-on-untiled-axis"),
    pytest.param(edit(TILED, tile__zarr_compatible=True), [(E, "tile:zarr_compatible")],
                 "not defined", id="tile-zarr-compatible"),
    pytest.param(edit(TILED, extensions=DELETE), [(W, "extensions")], "without a declaration",
                 id="tile-undeclared-prefix"),
    pytest.param(edit(TILED, tile__format="chunked", tile__offset_table=DELETE,
                      tile__size_table=DELETE), [(E, "tile:offset_table")], "required",
                 id="tile-chunked-without-offsets"),
    pytest.param(edit(TILED, tile__metadata=[{"checksum": "a1b2c3d4"}] * 12),
                 [(N, "tile:metadata")], "never verified", id="tile-bare-checksums-note"),
    pytest.param(edit(TILED, tile__metadata=[{}] * 11), [(E, "tile:metadata")],
                 "expected 12 entries", id="tile-metadata-length"),
    pytest.param(edit(TILED, tile__colour="red"), [(N, "tile:colour")], "not a field",
                 id="tile-unknown-field-note"),
    pytest.param(edit(TILED, tile__dimensions=[0, 2, 1], tile__storage="cloud",
                      tile__compression="snappy", sizes=[40, 30]),
                 [(E, "sizes"), (E, "tile:dimensions"), (E, "tile:storage"),
                  (E, "tile:compression")], "", id="tile-many-problems-collected"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("header", "expected", "fragment"), CASES)
def test_header_cases(header: dict[str, Any], expected: list[tuple[str, str]],
                      fragment: str) -> None:
    problems = validate(header)
    assert all(isinstance(p, Problem) for p in problems)
    found = sorted((p.severity, p.field) for p in problems)
    assert found == sorted(expected), [(p.severity, p.field, p.message) for p in problems]
    if fragment:
        assert fragment in problems[0].message


def test_case_count() -> None:
    # The issue asks for at least 40 named cases, valid and invalid, core and tiling.
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)) >= 40
    assert sum(i.startswith("core-") for i in ids) >= 20
    assert sum(i.startswith("tile-") for i in ids) >= 20
