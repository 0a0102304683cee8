"""Keys and the Header mapping: duplicates, extensions, unknown fields, prefixes
(docs/format.md#extension-prefixes)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from jnrrd.errors import HeaderError, JnrrdWarning
from jnrrd.header import TILE_URI, Header, parse_header_bytes
from jnrrd.policy import Policy

MAGIC = b'{"jnrrd": "0004"}\n'


def parse(body: bytes, **policy: Any) -> Header:
    header, _ = parse_header_bytes(
        MAGIC + body + b"\n", policy=Policy.from_kwargs(**policy), source="m.jnrrd"
    )
    return header


def test_header_is_a_dict() -> None:
    header = parse(b'{"type": "uint8"}\n{"dimension": 1}\n')
    assert isinstance(header, dict)
    assert header == {"jnrrd": "0004", "type": "uint8", "dimension": 1}
    assert list(header) == ["jnrrd", "type", "dimension"]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b'{"type": "uint8"}\n{"type": "int8"}\n', id="core"),
        pytest.param(b'{"sizes": [1]}\n{"dimension": 1}\n{"sizes": [2]}\n', id="core-later"),
        pytest.param(b'{"x_unknown": 1}\n{"x_unknown": 2}\n', id="unknown"),
    ],
)
def test_duplicate_core_field(body: bytes) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JnrrdWarning)  # the unknown-field case warns first
        with pytest.raises(HeaderError, match=r"m\.jnrrd: .*repeated on line \d \(first on line"):
            parse(body)


def test_allow_duplicates_last_wins_with_warning() -> None:
    with pytest.warns(JnrrdWarning, match="last value wins"):
        header = parse(b'{"type": "uint8"}\n{"type": "int8"}\n', allow_duplicates=True)
    assert header["type"] == "int8"


def test_repeated_magic_is_always_an_error() -> None:
    with pytest.raises(HeaderError, match="jnrrd: field repeated"):
        parse(b'{"jnrrd": "0004"}\n', allow_duplicates=True)


def test_extensions_lines_are_merged() -> None:
    header = parse(
        b'{"extensions": {"tile": "https://jnrrd.org/extensions/tile/v1.0.0", "a": "urn:a1"}}\n'
        b'{"extensions": {"dicom": "urn:dicom", "a": "urn:a2"}}\n'
    )
    assert header["extensions"] == {
        "tile": "https://jnrrd.org/extensions/tile/v1.0.0",
        "a": "urn:a2",
        "dicom": "urn:dicom",
    }


@pytest.mark.parametrize(
    ("body", "match"),
    [
        pytest.param(b'{"extensions": ["tile"]}\n', "expected an object", id="list"),
        pytest.param(b'{"extensions": "tile"}\n', "expected an object", id="string"),
        pytest.param(b'{"extensions": {"tile": 1}}\n', "prefix 'tile': expected a URI string",
                     id="uri-not-string"),
    ],
)
def test_bad_extensions(body: bytes, match: str) -> None:
    with pytest.raises(HeaderError, match=match):
        parse(body)


@pytest.mark.parametrize(
    "key",
    [
        pytest.param("space directions", id="nrrd-space-directions"),
        pytest.param("byteskip", id="nrrd-byteskip"),
        pytest.param("datafile", id="nrrd-datafile"),
        pytest.param("centerings", id="nrrd-centerings"),
        pytest.param("vendor_field", id="made-up"),
    ],
)
def test_unknown_fields_kept_with_warning(key: str) -> None:
    with pytest.warns(JnrrdWarning, match="unknown field"):
        header = parse(f'{{"{key}": [1, "x"]}}\n'.encode())
    assert header[key] == [1, "x"]


def test_undeclared_prefix_warns_and_invents_nothing() -> None:
    with pytest.warns(JnrrdWarning, match="'meta' is used but not declared"):
        header = parse(b'{"meta:creator.name": "A"}\n')
    assert header["meta:creator"] == {"name": "A"}
    assert "extensions" not in header


def test_declaration_after_use_is_fine() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        header = parse(b'{"meta:x": 1}\n{"extensions": {"meta": "urn:meta"}}\n')
    assert header["meta:x"] == 1


def test_prefix_helpers() -> None:
    header = parse(
        b'{"extensions": {"t": "https://jnrrd.org/extensions/tile/v1.0.0", "m": "urn:m"}}\n'
        b'{"t:enabled": true}\n{"t:sizes": [4]}\n{"m:a.b": 1}\n'
    )
    assert header.tile_prefix() == "t"
    assert header.prefix_for("urn:") == "m"
    assert header.prefix_for("https://nothing/") is None
    assert header.prefixes() == ["t", "m"]
    assert header.fields_of("t") == {"enabled": True, "sizes": [4]}
    assert header.declarations() == header["extensions"]


def test_tile_prefix_fallback_warns_only_with_tile_keys() -> None:
    with pytest.warns(JnrrdWarning, match="not declared"):
        header = parse(b'{"tile:enabled": true}\n')
    with pytest.warns(JnrrdWarning, match="without a declaration of the tiling extension"):
        assert header.tile_prefix() == "tile"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Header({"type": "uint8"}).tile_prefix() == "tile"
        assert Header({"extensions": {"tile": TILE_URI}}).tile_prefix() == "tile"


def test_copy_is_a_header() -> None:
    header = parse(b'{"type": "uint8"}\n')
    other = header.copy()
    assert isinstance(other, Header)
    assert other == header and other is not header
    other["type"] = "int8"
    assert header["type"] == "uint8"
    assert repr(other).startswith("Header({")
