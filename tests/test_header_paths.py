"""Hierarchical extension paths: grammar and application order
(docs/format.md#hierarchical-extension-paths)."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

from jnrrd.errors import HeaderError, JnrrdWarning
from jnrrd.header import parse_header_bytes, parse_path
from jnrrd.policy import Policy

MAGIC = b'{"jnrrd": "0004"}\n{"extensions": {"m": "https://example.org/m"}}\n'


def parse_lines(*lines: tuple[str, Any], **policy: Any) -> dict[str, Any]:
    """Parse a header made of the given extension lines; return the ``m:`` fields."""
    body = b"".join(json.dumps({k: v}).encode() + b"\n" for k, v in lines)
    header, _ = parse_header_bytes(MAGIC + body + b"\n", policy=Policy.from_kwargs(**policy))
    return {k: v for k, v in header.items() if k.startswith("m:")}


@pytest.mark.parametrize(
    ("path", "components"),
    [
        pytest.param("creator[0].@type", ["creator", 0, "@type"], id="creator[0].@type"),
        pytest.param("header.DATE-OBS", ["header", "DATE-OBS"], id="header.DATE-OBS"),
        pytest.param("groups.HIERARCH.ESO.INS.MODE", ["groups", "HIERARCH", "ESO", "INS", "MODE"],
                     id="groups.HIERARCH.ESO.INS.MODE"),
        pytest.param("sform_matrix[0][1]", ["sform_matrix", 0, 1], id="sform_matrix[0][1]"),
        pytest.param("qform_parameters.quaternion[3]", ["qform_parameters", "quaternion", 3],
                     id="qform_parameters.quaternion[3]"),
        pytest.param("my-list[10]", ["my-list", 10], id="non-word-name"),
        pytest.param("b:c", ["b:c"], id="colon-in-name"),
        pytest.param("a b", ["a b"], id="space-in-name"),
        pytest.param("x[999999999]", ["x", 999_999_999], id="nine-digit-index"),
    ],
)
def test_valid_paths(path: str, components: list[Any]) -> None:
    assert parse_path(path) == components


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("", id="empty"),
        pytest.param("a.", id="trailing-dot"),
        pytest.param(".a", id="leading-dot"),
        pytest.param("a..b", id="empty-name"),
        pytest.param("[0]", id="leading-bracket"),
        pytest.param("a[", id="unbalanced-open"),
        pytest.param("a]", id="unbalanced-close"),
        pytest.param("a[01]", id="leading-zero"),
        pytest.param("a[-1]", id="negative"),
        pytest.param("a[x]", id="name-index"),
        pytest.param("a[]", id="empty-index"),
        pytest.param("a[1234567890]", id="ten-digit-index"),
        pytest.param("a[0]b", id="text-after-index"),
    ],
)
def test_invalid_paths(path: str) -> None:
    assert parse_path(path) is None


@pytest.mark.slow
@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        pytest.param([("m:creator[0].@type", "Person")], {"m:creator": [{"@type": "Person"}]},
                     id="creator[0].@type"),
        pytest.param([("m:header.DATE-OBS", "2024-01-01")],
                     {"m:header": {"DATE-OBS": "2024-01-01"}}, id="header.DATE-OBS"),
        pytest.param([("m:groups.HIERARCH.ESO.INS.MODE", "IMG")],
                     {"m:groups": {"HIERARCH": {"ESO": {"INS": {"MODE": "IMG"}}}}},
                     id="groups.HIERARCH.ESO.INS.MODE"),
        pytest.param([("m:sform_matrix[0][1]", 5.0)], {"m:sform_matrix": [[None, 5.0]]},
                     id="sform_matrix[0][1]"),
        pytest.param([("m:qform_parameters.quaternion[3]", 1)],
                     {"m:qform_parameters": {"quaternion": [None, None, None, 1]}},
                     id="qform_parameters.quaternion[3]"),
        pytest.param([("m:a.b", 1), ("m:a", {"c": 2})], {"m:a": {"c": 2, "b": 1}},
                     id="precedence-specific-wins"),
        pytest.param([("m:a", {"c": 2}), ("m:a.b", 1)], {"m:a": {"c": 2, "b": 1}},
                     id="precedence-document-order"),
        pytest.param([("m:a[1]", "y"), ("m:a[0]", "x")], {"m:a": ["x", "y"]},
                     id="pad-then-fill"),
        pytest.param([("m:a[0]", "x"), ("m:a[1]", "y"), ("m:a[2]", "z")],
                     {"m:a": ["x", "y", "z"]}, id="append"),
        pytest.param([("m:a", [1, 2, 3]), ("m:a[1]", 9)], {"m:a": [1, 9, 3]}, id="replace"),
        pytest.param([("m:a", [1]), ("m:a[3]", 4)], {"m:a": [1, None, None, 4]}, id="pad"),
        pytest.param([("m:a[2]", 1), ("m:a[0].x", 2)], {"m:a": [{"x": 2}, None, 1]},
                     id="descend-into-padding"),
        pytest.param([("m:a", {"x": {"y": 1}}), ("m:a.x.z", 2)],
                     {"m:a": {"x": {"y": 1, "z": 2}}}, id="descend-existing"),
        pytest.param([("m:a.b", 1), ("m:c", 2)], {"m:a": {"b": 1}, "m:c": 2}, id="independent"),
    ],
)
def test_apply(lines: list[tuple[str, Any]], expected: dict[str, Any]) -> None:
    assert parse_lines(*lines) == expected


@pytest.mark.parametrize(
    ("lines", "expected", "match"),
    [
        pytest.param([("m:a", 5), ("m:a.b", 1)], {"m:a": {"b": 1}}, "descends into a int",
                     id="scalar-to-object"),
        pytest.param([("m:a", {"x": 1}), ("m:a[0]", 1)], {"m:a": [1]}, "descends into a dict",
                     id="object-to-list"),
        pytest.param([("m:a", [1]), ("m:a.b", 2)], {"m:a": {"b": 2}}, "descends into a list",
                     id="list-to-object"),
        pytest.param([("m:a", "s"), ("m:a[0][0]", 1)], {"m:a": [[1]]}, "descends into a str",
                     id="scalar-to-nested-list"),
        pytest.param([("m:a", {"x": 1}), ("m:a", {"y": 2})], {"m:a": {"y": 2}}, "last value wins",
                     id="whole-object-replaces"),
        pytest.param([("m:a.b", 1), ("m:a.b", 2)], {"m:a": {"b": 2}}, "last value wins",
                     id="same-path-twice"),
        pytest.param([("m:a.", 1)], {"m:a.": 1}, "not a valid extension path",
                     id="invalid-path-literal"),
        pytest.param([("m:a[01]", 1)], {"m:a[01]": 1}, "not a valid extension path",
                     id="invalid-index-literal"),
    ],
)
def test_apply_with_warning(
    lines: list[tuple[str, Any]], expected: dict[str, Any], match: str
) -> None:
    with pytest.warns(JnrrdWarning, match=match):
        assert parse_lines(*lines) == expected


@pytest.mark.parametrize(
    ("lines", "policy"),
    [
        pytest.param([("m:a[65537]", 1)], {}, id="default-cap"),
        pytest.param([("m:a[999999999]", 1)], {}, id="billion"),
        pytest.param([("m:a", [0]), ("m:a[12]", 1)], {"max_pad": 10}, id="custom-cap"),
        pytest.param([("m:a.b[0][11]", 1)], {"max_pad": 10}, id="nested"),
        pytest.param([(f"m:a{i}[10]", 1) for i in range(17)], {"max_pad": 10},
                     id="header-budget"),
    ],
)
def test_padding_cap(lines: list[tuple[str, Any]], policy: dict[str, int]) -> None:
    with pytest.raises(HeaderError, match="max_pad"):
        parse_lines(*lines, **policy)


@pytest.mark.parametrize(
    ("index", "policy"),
    [
        pytest.param(65536, {}, id="default-cap-exact"),
        pytest.param(10, {"max_pad": 10}, id="custom-cap-exact"),
    ],
)
def test_padding_at_cap(index: int, policy: dict[str, int]) -> None:
    result = parse_lines((f"m:a[{index}]", 1), **policy)
    assert len(result["m:a"]) == index + 1
    assert result["m:a"][-1] == 1 and result["m:a"][0] is None


def test_sixteen_padding_lines_fit_the_budget() -> None:
    result = parse_lines(*[(f"m:a{i}[10]", 1) for i in range(16)], max_pad=10)
    assert len(result) == 16


def test_core_keys_are_never_expanded() -> None:
    with pytest.warns(JnrrdWarning, match="unknown field"):
        header, _ = parse_header_bytes(MAGIC + b'{"space.x": 1}\n\n')
    assert header["space.x"] == 1


def test_prefix_is_text_before_first_colon() -> None:
    result = parse_lines(("m:b:c.d", 1))
    assert result == {"m:b:c": {"d": 1}}


def test_no_warning_for_plain_application() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parse_lines(("m:a[0].b", 1), ("m:a[0].c", 2), ("m:a[1]", 3))
