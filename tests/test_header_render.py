"""The header writer: canonical order, JSON rules, declarations, round trips
(docs/format.md#header-line-order)."""

from __future__ import annotations

import json
import math
import warnings
from typing import Any

import numpy as np
import pytest

from jnrrd.errors import HeaderError, JnrrdWarning
from jnrrd.header import TILE_URI, Header, parse_header_bytes, render_header


def keys(data: bytes) -> list[str]:
    lines = data.split(b"\n")
    assert lines[-2:] == [b"", b""]  # the blank line, then nothing
    return [next(iter(json.loads(line))) for line in lines[:-2]]


def test_canonical_order() -> None:
    header = {
        "m:x": 1,
        "tile:offset_table": [10],
        "data_file": "d.raw",
        "labels": ["x"],
        "vendor": 1,
        "extensions": {"m": "urn:m", "tile": TILE_URI},
        "block_size": 4,
        "tile:enabled": True,
        "encoding": "raw",
        "tile:sizes": [2],
        "endian": "little",
        "tile:custom": 0,
        "sizes": [4],
        "space": "RAS",
        "tile:dimensions": [0],
        "dimension": 1,
        "content": "c",
        "type": "block",
        "jnrrd": "0004",
        "line_skip": 0,
    }
    assert keys(render_header(header)) == [
        "jnrrd", "type", "dimension", "sizes", "endian", "encoding", "block_size",
        "content", "space", "labels", "line_skip", "vendor", "data_file", "extensions",
        "m:x", "tile:enabled", "tile:dimensions", "tile:sizes", "tile:offset_table",
        "tile:custom",
    ]  # fmt: skip


def test_magic_always_first_and_current() -> None:
    data = render_header({"type": "uint8", "jnrrd": "0005"})
    assert data.startswith(b'{"jnrrd": "0004"}\n{"type": "uint8"}\n\n')
    assert render_header({}) == b'{"jnrrd": "0004"}\n\n'


@pytest.mark.parametrize(
    ("value", "line"),
    [
        pytest.param(math.nan, b'{"min": null}', id="nan"),
        pytest.param(math.inf, b'{"min": Infinity}', id="inf"),
        pytest.param(-math.inf, b'{"min": -Infinity}', id="minus-inf"),
        pytest.param([1.5, math.nan, {"a": -math.inf}], b'{"min": [1.5, null, {"a": -Infinity}]}',
                     id="nested"),
        pytest.param(np.float32(np.nan), b'{"min": null}', id="numpy-nan"),
        pytest.param(np.array([1, 2], dtype=np.int64), b'{"min": [1, 2]}', id="numpy-array"),
        pytest.param(np.array([np.inf, np.nan]), b'{"min": [Infinity, null]}',
                     id="numpy-non-finite"),
        pytest.param(np.uint64(2**64 - 1), b'{"min": 18446744073709551615}', id="numpy-scalar"),
        pytest.param((1, 2), b'{"min": [1, 2]}', id="tuple"),
        pytest.param("é✓", '{"min": "é✓"}'.encode(), id="utf8-not-escaped"),
        pytest.param("a\nb", b'{"min": "a\\nb"}', id="newline-escaped"),
        pytest.param("\ud800", b'{"min": "\\ud800"}', id="lone-surrogate"),
    ],
)
def test_values(value: Any, line: bytes) -> None:
    data = render_header({"min": value})
    assert data.split(b"\n")[1] == line
    assert b"NaN" not in data


@pytest.mark.parametrize(
    ("header", "match"),
    [
        pytest.param({"min": {1, 2}}, "min: value cannot be written", id="set"),
        pytest.param({"min": object()}, "min: value cannot be written", id="object"),
        pytest.param({"min": {(1, 2): 3}}, "min: value cannot be written", id="tuple-key"),
        pytest.param({"min": [math.nan, {1}]}, "min: value cannot be written", id="nan-and-set"),
        pytest.param({1: "x"}, "keys must be strings", id="int-key"),
        pytest.param({"extensions": ["m"]}, "extensions: expected an object", id="extensions"),
        pytest.param({"extensions": {"m": 1}}, "extensions: expected an object", id="uri-int"),
    ],
)
def test_unwritable(header: dict[Any, Any], match: str) -> None:
    with pytest.raises(HeaderError, match=match):
        render_header(header, source="out.jnrrd")


def test_circular_value() -> None:
    value: list[Any] = []
    value.append(value)
    with pytest.raises(HeaderError, match="min: value cannot be written"):
        render_header({"min": value})


@pytest.mark.parametrize(
    ("header", "declared"),
    [
        pytest.param({"tile:enabled": True}, {"tile": TILE_URI}, id="tile"),
        pytest.param({"meta:x": 1}, {"meta": "urn:jnrrd:undeclared:meta"}, id="other"),
        pytest.param({"a b/c:x": 1}, {"a b/c": "urn:jnrrd:undeclared:a%20b%2Fc"},
                     id="percent-encoded"),
        pytest.param({"extensions": {"t": TILE_URI}, "tile:x": 1},
                     {"t": TILE_URI, "tile": "urn:jnrrd:undeclared:tile"},
                     id="tile-uri-taken"),
        pytest.param({"extensions": {"u": "urn:u"}}, {"u": "urn:u"}, id="unused-kept"),
        pytest.param({"extensions": {}}, {}, id="empty-kept"),
    ],
)
def test_declarations(header: dict[str, Any], declared: dict[str, str]) -> None:
    data = render_header(header)
    names = keys(data)
    assert names[1] == "extensions"
    assert json.loads(data.split(b"\n")[1])["extensions"] == declared


def test_no_extensions_line_without_prefixes() -> None:
    assert "extensions" not in keys(render_header({"type": "uint8"}))


def test_custom_tile_prefix_ordered_like_tile() -> None:
    header = {
        "extensions": {"x": "urn:x", "t": TILE_URI},
        "t:sizes": [2],
        "x:b": 1,
        "t:enabled": True,
        "x:a": 2,
    }
    assert keys(render_header(header))[2:] == ["x:b", "x:a", "t:enabled", "t:sizes"]


def test_render_parse_round_trip() -> None:
    header = Header(
        {
            "jnrrd": "0004",
            "type": "float32",
            "dimension": 3,
            "sizes": [4, 5, 6],
            "endian": "big",
            "encoding": "gzip",
            "space": "left_posterior_superior",
            "space_origin": [0.5, -1e-300, 1e300],
            "space_directions": [[1, 0, 0], None, [0, 0, 2.5]],
            "kinds": ["space", "list", "space"],
            "min": -math.inf,
            "vendor_field": {"deep": [1, {"x": None}]},
            "extensions": {"tile": TILE_URI, "meta": "urn:meta"},
            "tile:enabled": True,
            "tile:dimensions": [0, 1, 2],
            "tile:offset_table": list(range(1000, 2000)),
            "meta:creator": [{"@type": "Person", "name": "Ä"}],
        }
    )
    data = render_header(header)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the unknown vendor field warns
        parsed, start = parse_header_bytes(data + b"\x00DATA")
    assert parsed == header
    assert start == len(data)
    assert render_header(parsed) == data


def test_flattened_keys_are_written_as_given() -> None:
    data = render_header({"extensions": {"m": "urn:m"}, "m:a.b": 1, "m:a[0]": 2})
    assert keys(data)[2:] == ["m:a.b", "m:a[0]"]
    with pytest.warns(JnrrdWarning, match="descends into a dict"):
        parsed, _ = parse_header_bytes(data)
    assert parsed["m:a"] == [2]  # same depth: line order, the later line replaces
