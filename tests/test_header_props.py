"""Property tests: render/parse round trips and fuzzing that only ever raises JnrrdError."""

from __future__ import annotations

import math
import warnings
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from jnrrd.errors import JnrrdError
from jnrrd.header import Header, core_fields, parse_header_bytes, render_header
from jnrrd.header.model import CORE_FIELDS

MAGIC = b'{"jnrrd": "0004"}\n'
CORE_NAMES = [f for f in CORE_FIELDS if f not in ("jnrrd", "extensions")]

# --- strategies -----------------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12,
)
prefixes = st.text(max_size=5).filter(lambda p: ":" not in p)
names = st.text(min_size=1, max_size=8).filter(lambda n: not set(n) & set(".[]"))
unknown_keys = st.text(max_size=8).filter(lambda k: ":" not in k and k not in CORE_FIELDS)
extension_keys = st.builds(lambda p, n: f"{p}:{n}", prefixes, names)
keys = st.sampled_from(CORE_NAMES) | unknown_keys | extension_keys
headers = st.dictionaries(keys, json_values, max_size=8)
declarations = st.dictionaries(prefixes, st.text(max_size=12), max_size=3)

core_values = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["uint8", "int16", "float", "block", "bfloat16", "x"])
        | json_values,
        "dimension": st.integers(-1, 18) | json_values,
        "sizes": st.lists(st.integers(-1, 5) | st.floats(0, 4), max_size=4) | json_values,
        "encoding": st.sampled_from(["raw", "gz", "ascii", "zip"]) | json_values,
        "endian": st.sampled_from(["little", "big"]) | json_values,
        "block_size": st.integers(-1, 4) | json_values,
        "space": st.sampled_from(["RAS", "lps", "scanner-xyz", "?"]) | json_values,
        "space_dimension": st.integers(0, 4) | json_values,
        "space_origin": st.lists(st.floats() | st.none(), max_size=4) | json_values,
        "space_directions": st.lists(
            st.none() | st.lists(st.floats(), max_size=4), max_size=4
        )
        | json_values,
        "measurement_frame": st.lists(st.lists(st.integers(), max_size=4), max_size=4),
        "spacings": st.lists(st.floats() | st.none(), max_size=4) | json_values,
        "centers": st.lists(st.sampled_from(["cell", "node", "???", None, "x"]), max_size=4)
        | json_values,
        "kinds": st.lists(st.sampled_from(["domain", "RGB-color", "none", None, 3]), max_size=4)
        | json_values,
        "labels": st.lists(st.text(max_size=2) | st.none(), max_size=4) | json_values,
        "line_skip": st.integers(-2, 2) | json_values,
        "byte_skip": st.integers(-2, 2) | json_values,
        "data_file": json_values,
        "data_files": st.lists(st.text(max_size=3), max_size=4) | json_values,
        "data_file_pattern": st.fixed_dictionaries(
            {},
            optional={
                "format": st.sampled_from(["a%d", "%%%03i", "%s", "%d%d", "%1000d"])
                | json_values,
                "min": st.integers(-3, 3) | json_values,
                "max": st.integers(-3, 3) | json_values,
                "step": st.integers(-2, 2) | json_values,
            },
        )
        | json_values,
    },
)


def no_nan(value: Any) -> Any:
    """What the writer makes of a value: NaN becomes null (docs/format.md#lines-and-json-tokens)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: no_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [no_nan(v) for v in value]
    return value


def quiet_parse(data: bytes) -> tuple[Header, int | None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return parse_header_bytes(data)


def check_parsed(header: Header) -> None:
    """A parsed header: typed fields raise only JnrrdError; it re-renders to itself."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            core_fields(header)
        except JnrrdError:
            pass
    again, start = quiet_parse(render_header(header))
    assert start is not None
    declared = again.pop("extensions", {})
    assert set(header.get("extensions", {})) <= set(declared)
    expected = {k: no_nan(v) for k, v in header.items() if k != "extensions"}
    assert again == expected


# --- round trips ----------------------------------------------------------------------------


@given(headers, declarations)
def test_round_trip(fields: dict[str, Any], declared: dict[str, str]) -> None:
    header = {**fields, "extensions": declared} if declared else fields
    data = render_header(header)
    parsed, start = quiet_parse(data + b"tail")
    assert start == len(data)
    assert parsed.pop("jnrrd") == "0004"
    written = "extensions" in parsed
    got_declared = parsed.pop("extensions", {})
    assert got_declared.items() >= declared.items()
    assert set(got_declared) >= {k.split(":", 1)[0] for k in fields if ":" in k}
    assert parsed == {k: no_nan(v) for k, v in fields.items()}
    assert render_header(parsed | ({"extensions": got_declared} if written else {})) == data


# --- fuzzing --------------------------------------------------------------------------------


@given(st.binary(max_size=400) | st.binary(max_size=400).map(lambda b: MAGIC + b))
def test_fuzz_bytes(data: bytes) -> None:
    try:
        header, _ = quiet_parse(data)
    except JnrrdError:
        return
    check_parsed(header)


SAMPLE = render_header(
    {
        "type": "int16",
        "dimension": 2,
        "sizes": [3, 4],
        "endian": "little",
        "encoding": "raw",
        "space": "RAS",
        "space_directions": [[1, 0, 0], None],
        "kinds": ["space", "list"],
        "extensions": {"tile": "https://jnrrd.org/extensions/tile/v1.0.0", "m": "urn:m"},
        "tile:enabled": True,
        "tile:offset_table": [10, 20],
        "m:a": {"b": [1, {"c": None}]},
    }
) + b"\x01\x02DATA"

mutation = st.tuples(
    st.integers(0, len(SAMPLE)),
    st.sampled_from(["flip", "insert", "delete"]),
    st.sampled_from(b'{}[]:,."\n\r \\0aZ-\x00\xff'),
)


@given(st.lists(mutation, min_size=1, max_size=6))
def test_fuzz_mutated_header(mutations: list[tuple[int, str, int]]) -> None:
    data = bytearray(SAMPLE)
    for pos, op, byte in mutations:
        pos = min(pos, len(data))
        if op == "insert":
            data.insert(pos, byte)
        elif pos < len(data):
            if op == "flip":
                data[pos] = byte
            else:
                del data[pos]
    try:
        header, _ = quiet_parse(bytes(data))
    except JnrrdError:
        return
    check_parsed(header)


@given(core_values)
def test_fuzz_core_fields(header: dict[str, Any]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fields = core_fields(header)
        except JnrrdError:
            return
    assert len(fields.sizes) == fields.dimension
    assert fields.encoding in ("raw", "ascii", "hex", "gzip", "bzip2", "zstd", "lz4")
