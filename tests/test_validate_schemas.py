"""The bundled JSON Schemas: well-formed draft-07, in step with the library's tables."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft7Validator

from jnrrd.dtypes import NRRD_ALIASES, TYPES
from jnrrd.header.fields import ENCODINGS
from jnrrd.header.geometry_fields import KIND_SIZES, SPACES
from jnrrd.header.model import TILE_FIELDS
from jnrrd.schemas import load_schema, schema_names, validator


@pytest.mark.parametrize("name", schema_names())
def test_every_schema_is_valid_draft7(name: str) -> None:
    schema = load_schema(name)
    Draft7Validator.check_schema(schema)
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"


def test_core_and_codec_schemas_are_bundled() -> None:
    names = schema_names()
    assert {"jnrrd.schema.json", "tile.schema.json"} <= set(names)
    assert "codecs/zstd.schema.json" in names


def test_core_schema_tables_match_the_library() -> None:
    props = load_schema("jnrrd.schema.json")["properties"]
    assert props["type"]["enum"] == [*TYPES, *NRRD_ALIASES]
    assert props["encoding"]["enum"] == list(ENCODINGS)
    assert set(SPACES) <= set(props["space"]["enum"])
    assert set(KIND_SIZES) <= set(props["kinds"]["items"]["enum"])


def test_tile_schema_covers_every_tiling_field() -> None:
    props = load_schema("tile.schema.json")["properties"]
    # data_pattern and zarr_compatible are undefined by the spec (docs/format.md#activation): kept
    # verbatim.
    assert set(props) == set(TILE_FIELDS) - {"data_pattern", "zarr_compatible"}


@pytest.mark.parametrize(
    ("fields", "valid"),
    [
        pytest.param({"level_scales": [1, [2, 2, 1], 4]}, True, id="scales-int-or-list"),
        pytest.param({"offset_table": [10, None], "size_table": [5, None]}, True,
                     id="sparse-tables"),
        pytest.param({"padding_value": None}, True, id="null-padding"),
        pytest.param({"compression": "bz2"}, True, id="compression-alias"),
        pytest.param({"enabled": False}, True, id="enabled-false"),
        pytest.param({"levels_stored": [0, 2]}, True, id="stored-without-virtual"),
        pytest.param({"storage": "external", "pattern": "{x}", "files": [
            {"indices": [0], "file": None, "level": 0}]}, True, id="pattern-and-files"),
        pytest.param({"codecs": [{"name": "bytes"}]}, True, id="codecs"),
        pytest.param({"codecs": []}, False, id="codecs-empty"),
        pytest.param({"storage": "external"}, False, id="external-needs-pattern-or-files"),
        pytest.param({"levels": 2}, False, id="levels-need-scales"),
        pytest.param({"level_scales": [0]}, False, id="scale-zero"),
        pytest.param({"compression": "snappy"}, False, id="compression-unknown"),
    ],
)
def test_tile_schema_relaxations(fields: dict[str, Any], valid: bool) -> None:
    base = {"enabled": True, "dimensions": [0], "sizes": [4], "storage": "internal"}
    assert validator("tile.schema.json").is_valid({**base, **fields}) is valid
