"""Codec roles, registry, canonical JSON, chain validation, bounded decoding, runtime API."""

from __future__ import annotations

import ast
import copy
import dataclasses
import pickle
import re
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import jnrrd.codecs as jc
from jnrrd.codecs import (
    BUILTIN_CODECS,
    Bytes,
    BytesBytesCodec,
    CastValue,
    CodecChain,
    Conditional,
    Crc32c,
    Gzip,
    Offset,
    Pad,
    ScaleOffset,
    Transpose,
    Zstd,
    get_codec,
    register_codec,
)
from jnrrd.errors import CodecError, DataError, UnknownCodecError

LE = {"name": "bytes", "configuration": {"endian": "little"}}


def test_builtin_names_are_the_conventions_list() -> None:
    names = {cls.name for cls in BUILTIN_CODECS}
    assert names == {
        "bytes", "gzip", "zstd", "crc32c", "pad", "offset", "conditional", "scale_offset",
        "cast_value", "transpose", "numcodecs.lz4", "numcodecs.bz2", "numcodecs.zlib",
        "numcodecs.shuffle", "lz4", "bz2",
    }
    for cls in BUILTIN_CODECS:
        assert getattr(jc, cls.__name__) is cls


def _imports(path: Path) -> set[str]:
    """The jnrrd modules a source file imports (relative imports resolved)."""
    package = "jnrrd.codecs" if path.parent.name == "codecs" else "jnrrd"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                name = f"{base}.{node.module}" if node.module else base
                found.add(name)
                found.update(f"{name}.{a.name}" for a in node.names)
            elif node.module and node.module.startswith("jnrrd"):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("jnrrd"))
    return found


def test_codecs_never_import_header_tiling_volume() -> None:
    # STYLE: codecs see only a TileSpec; they never import the header, tiling or volume.
    root = Path(jc.__file__).parent
    files = list(root.glob("*.py"))
    assert len(files) > 5
    for path in files:
        bad = {m for m in _imports(path)
               if m.startswith(("jnrrd.header", "jnrrd.tiling", "jnrrd.engine.volume"))}
        assert not bad, (path.name, bad)
        assert _imports(path) <= ALLOWED | {m for m in _imports(path)
                                            if m.startswith("jnrrd.codecs")}, path.name


ALLOWED = {"jnrrd", "jnrrd.errors", "jnrrd.schemas", "jnrrd.codecs.compress",
           "jnrrd.codecs.compress.NAMES"}
ALLOWED |= {f"jnrrd.errors.{n}" for n in ("CodecError", "DataError", "MissingDependencyError",
                                          "UnknownCodecError", "JnrrdWarning",
                                          "UnsupportedError")}
ALLOWED |= {"jnrrd.schemas.validator", "jnrrd.dtypes", "jnrrd.dtypes.bfloat16_words",
            "jnrrd.dtypes.decimal_int"}
# the operating system's calls (positional reads, read-only maps), each with its fallback
ALLOWED |= {"jnrrd._platform", "jnrrd._platform.map_readonly", "jnrrd._platform.pread"}


# ---- canonical JSON ---------------------------------------------------------------------

CANONICAL = [
    pytest.param("bytes", {"name": "bytes"}, id="bytes-string"),
    pytest.param(LE, LE, id="bytes-little"),
    pytest.param({"name": "gzip", "configuration": {"level": 5}},
                 {"name": "gzip", "configuration": {"level": 5}}, id="gzip"),
    pytest.param({"name": "zstd", "configuration": {"level": 3, "checksum": False}},
                 {"name": "zstd", "configuration": {"level": 3}}, id="zstd-checksum-false"),
    pytest.param({"name": "zstd", "configuration": {"level": 3, "checksum": True}},
                 {"name": "zstd", "configuration": {"level": 3, "checksum": True}},
                 id="zstd-checksum-true"),
    pytest.param({"name": "scale_offset", "configuration": {"offset": 0, "scale": 1}},
                 {"name": "scale_offset"}, id="scale_offset-defaults"),
    pytest.param({"name": "scale_offset", "configuration": {"offset": 0, "scale": 0.5}},
                 {"name": "scale_offset", "configuration": {"scale": 0.5}},
                 id="scale_offset-offset-default"),
    pytest.param({"name": "scale_offset", "configuration": {"offset": "+Infinity"}},
                 {"name": "scale_offset", "configuration": {"offset": "Infinity"}},
                 id="scale_offset-plus-infinity"),
    pytest.param({"name": "cast_value", "configuration": {"data_type": "uint8",
                                                           "rounding": "nearest-even"}},
                 {"name": "cast_value", "configuration": {"data_type": "uint8"}},
                 id="cast_value-default-rounding"),
    pytest.param({"name": "cast_value", "configuration": {
        "data_type": "int8", "rounding": "towards-zero", "out_of_range": "clamp",
        "scalar_map": {"encode": [["+Infinity", 1]]}}},
        {"name": "cast_value", "configuration": {
            "data_type": "int8", "rounding": "towards-zero", "out_of_range": "clamp",
            "scalar_map": {"encode": [["Infinity", 1]]}}}, id="cast_value-full"),
    pytest.param({"name": "pad", "configuration": {"location": "end", "nbytes": 2}},
                 {"name": "pad", "configuration": {"location": "end", "nbytes": 2}}, id="pad"),
    pytest.param({"name": "offset", "configuration": {"offset": 3, "prefix": "YWJj"}},
                 {"name": "offset", "configuration": {"offset": 3, "prefix": "YWJj"}},
                 id="offset"),
    pytest.param({"name": "optional", "configuration": {"codecs": ["crc32c"], "header_bits": 8}},
                 {"name": "conditional", "configuration": {"codecs": [{"name": "crc32c"}]}},
                 id="optional-alias-default-bits"),
    pytest.param({"name": "conditional", "configuration": {"codecs": ["crc32c"],
                                                            "header_bits": 16}},
                 {"name": "conditional", "configuration": {"codecs": [{"name": "crc32c"}],
                                                           "header_bits": 16}},
                 id="conditional-16-bits"),
    pytest.param({"name": "transpose", "configuration": {"order": [2, 0, 1]}},
                 {"name": "transpose", "configuration": {"order": [2, 0, 1]}}, id="transpose"),
    pytest.param({"name": "lz4"}, {"name": "lz4"}, id="lz4-default"),
    pytest.param({"name": "bz2", "configuration": {"level": 9}}, {"name": "bz2"},
                 id="bz2-default"),
    pytest.param({"name": "numcodecs.zlib", "configuration": {"level": 4}},
                 {"name": "numcodecs.zlib", "configuration": {"level": 4}}, id="zlib"),
]


@pytest.mark.parametrize("given, canonical", CANONICAL)
def test_canonical_json(given: Any, canonical: dict[str, Any]) -> None:
    codec = get_codec(given)
    assert codec.to_json() == canonical
    assert get_codec(canonical) == codec
    assert get_codec(canonical).to_json() == canonical
    assert hash(get_codec(canonical)) == hash(codec)


def test_codecs_are_immutable_and_compare_by_configuration() -> None:
    a, b = Zstd(level=3), Zstd(level=3)
    assert a == b and a != Zstd(level=4) and a != Gzip(level=3)
    with pytest.raises(AttributeError):
        a.level = 5  # type: ignore[misc]


@pytest.mark.parametrize("given, canonical", CANONICAL)
def test_codecs_pickle_and_copy_as_equal_values(given: Any, canonical: dict[str, Any]) -> None:
    codec = get_codec(given)
    for twin in (pickle.loads(pickle.dumps(codec)), copy.copy(codec), copy.deepcopy(codec)):
        assert twin == codec and hash(twin) == hash(codec) and twin.to_json() == canonical


def test_builtin_codecs_are_frozen_dataclasses() -> None:
    for cls in BUILTIN_CODECS:
        assert dataclasses.is_dataclass(cls), cls.__name__
    codec = CastValue("int8", out_of_range="clamp", scalar_map={"encode": [["NaN", 0]]})
    with pytest.raises(dataclasses.FrozenInstanceError):
        codec.rounding = "towards-zero"  # type: ignore[misc]
    changed = dataclasses.replace(codec, rounding="towards-zero")
    assert changed == CastValue("int8", "towards-zero", "clamp", {"encode": [["NaN", 0]]})
    assert "CastValue(data_type='int8'" in repr(codec)
    assert repr(Offset(2, b"ab")) == "Offset(offset=2, prefix=b'ab')"  # its own arguments


def test_equal_codecs_hash_equal() -> None:
    """Scalars are kept as their canonical JSON: 1 and 1.0, a NumPy and a Python number, a
    NaN and "NaN" are the same configuration (and so hash alike)."""
    pairs = [(ScaleOffset(offset=1), ScaleOffset(offset=1.0)),
             (ScaleOffset(scale=np.float32(0.5)), ScaleOffset(scale=0.5)),
             (ScaleOffset(offset=float("nan")), ScaleOffset(offset="NaN")),
             (ScaleOffset(offset="+Infinity"), ScaleOffset(offset=float("inf")))]
    for a, b in pairs:
        assert a == b and hash(a) == hash(b) and a.to_json() == b.to_json()


@pytest.mark.parametrize("decision", ["always", "never", "compress_if_smaller", 1])
def test_conditional_with_a_named_decision_pickles(decision: Any) -> None:
    cond = Conditional([Gzip(level=1)], decision=decision)
    back = pickle.loads(pickle.dumps(cond))
    data = bytes(100)
    assert back == cond and back.decision == decision and back.encode(data) == cond.encode(data)


# ---- configuration errors --------------------------------------------------------------

BAD = [
    pytest.param({"name": "zstd"}, id="zstd-no-level"),
    pytest.param({"name": "zstd", "configuration": {"level": 3, "extra": 1}}, id="zstd-extra"),
    pytest.param({"name": "gzip", "configuration": {"level": 10}}, id="gzip-level"),
    pytest.param({"name": "bytes", "configuration": {"endian": "middle"}}, id="bytes-endian"),
    pytest.param({"name": "transpose", "configuration": {"order": [0, 0]}}, id="transpose-dup"),
    pytest.param({"name": "transpose"}, id="transpose-no-config"),
    pytest.param({"name": "pad", "configuration": {"location": "middle", "nbytes": 1}},
                 id="pad-location"),
    pytest.param({"name": "cast_value", "configuration": {"data_type": "bool"}},
                 id="cast-bool"),
    pytest.param({"name": "cast_value", "configuration": {"data_type": "uint8",
                                                           "scalar_map": {"both": []}}},
                 id="cast-map-key"),
    pytest.param({"name": "conditional", "configuration": {"codecs": []}}, id="cond-empty"),
    pytest.param({"configuration": {}}, id="no-name"),
    pytest.param(42, id="not-json-object"),
    pytest.param({"name": "zstd", "configuration": [3]}, id="config-not-object"),
]


@pytest.mark.parametrize("bad", BAD)
def test_bad_configuration(bad: Any) -> None:
    with pytest.raises(CodecError) as info:
        get_codec(bad)
    assert not isinstance(info.value, UnknownCodecError)


def test_unknown_codec() -> None:
    with pytest.raises(UnknownCodecError, match="blosc") as info:
        get_codec({"name": "blosc"})
    assert isinstance(info.value, LookupError)


def test_crc32c_is_a_core_dependency() -> None:
    """A plain `pip install jnrrd` reads and writes the crc32c codec (issue 14 item 7); the
    old extra name keeps installing."""
    with open(Path(__file__).parents[1] / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    assert any(re.fullmatch(r"crc32c\b.*", d) for d in project["dependencies"])
    assert "crc32c" in project["optional-dependencies"]
    codec = get_codec("crc32c")
    data = b"123456789"
    assert codec.encode(data) == data + (0xE3069283).to_bytes(4, "little")


class Reverse(BytesBytesCodec):
    """A test codec: reverses the bytes."""

    name = "test.reverse"

    def encode(self, data: Any, *, tile_index: int = 0) -> bytes:
        return bytes(data)[::-1]

    def decode(self, data: Any, *, size: int | None = None, limit: int = 0) -> bytes:
        return bytes(data)[::-1]


def test_register_codec() -> None:
    register_codec("test.reverse", Reverse)
    chain = CodecChain.from_json([LE, {"name": "test.reverse"}], dtype="uint16", shape=(3,))
    data = chain.encode(np.array([1, 2, 3], dtype=np.uint16))
    assert data == b"\x00\x03\x00\x02\x00\x01"
    assert chain.decode(data).tolist() == [1, 2, 3]
    with pytest.raises(CodecError):
        register_codec("broken", int)  # type: ignore[arg-type]


def test_entry_point_codecs_load_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib.metadata import EntryPoint

    from jnrrd.codecs import registry

    calls: list[str] = []

    def fake_entry_points(group: str) -> list[EntryPoint]:
        calls.append(group)
        return [EntryPoint("test.ep_reverse", f"{__name__}:Reverse", group)]

    monkeypatch.setattr(registry, "entry_points", fake_entry_points)
    monkeypatch.setattr(registry, "_entry_points_loaded", False)
    monkeypatch.setattr(registry, "_registry", dict(registry._registry))
    get_codec(LE)
    assert calls == []  # built-ins never touch entry points
    assert isinstance(get_codec({"name": "test.ep_reverse"}), Reverse)
    assert calls == ["jnrrd.codecs"]
    with pytest.raises(UnknownCodecError):
        get_codec({"name": "still-unknown"})
    assert calls == ["jnrrd.codecs"]  # loaded once


# ---- chain validation -------------------------------------------------------------------

ORDER_ERRORS = [
    pytest.param([{"name": "gzip", "configuration": {"level": 1}}], id="no-array-bytes"),
    pytest.param([LE, LE], id="two-array-bytes"),
    pytest.param([LE, {"name": "transpose", "configuration": {"order": [0]}}], id="aa-after-ab"),
    pytest.param([{"name": "crc32c"}, LE], id="bb-before-ab"),
]


@pytest.mark.parametrize("codecs", ORDER_ERRORS)
def test_chain_order(codecs: list[Any]) -> None:
    with pytest.raises(CodecError):
        CodecChain.from_json(codecs, dtype="uint16", shape=(4,))


@pytest.mark.parametrize(
    "codecs, dtype, shape",
    [
        pytest.param(["bytes"], "uint16", (4,), id="endian-required"),
        pytest.param([{"name": "transpose", "configuration": {"order": [1, 0]}}, LE],
                     "uint8", (4,), id="transpose-rank"),
        pytest.param([{"name": "scale_offset", "configuration": {"offset": 1}}, LE],
                     "complex64", (4,), id="scale-offset-complex"),
        pytest.param([LE], "uint16", (-1,), id="negative-shape"),
        pytest.param([LE], "U3", (1,), id="string-dtype"),
        pytest.param("bytes", "uint8", (1,), id="codecs-not-a-list"),
    ],
)
def test_chain_spec_errors(codecs: Any, dtype: str, shape: tuple[int, ...]) -> None:
    with pytest.raises(CodecError):
        CodecChain.from_json(codecs, dtype=dtype, shape=shape)


def test_chain_shape_and_dtype_checks() -> None:
    chain = CodecChain([Bytes("little")], dtype="uint16", shape=(2, 3))
    with pytest.raises(CodecError):
        chain.encode(np.zeros((3, 2), np.uint16))
    assert chain.encode(np.ones((2, 3), np.int64)) == b"\x01\x00" * 6  # cast to the chain dtype
    with pytest.raises(CodecError):
        CodecChain([Bytes("little")], dtype="uint8", shape=(1,), fill_value="abc")
    with pytest.raises(CodecError):
        CodecChain(["bytes"], dtype="uint8", shape=(1,))  # type: ignore[list-item]


def test_axis_zero_fastest() -> None:
    # docs/format.md#voxels-inside-a-tile golden example: a[x, y] = x + 4y, sizes [4, 3].
    a = np.fromfunction(lambda x, y: x + 4 * y, (4, 3), dtype=np.uint8)
    chain = CodecChain([Bytes()], dtype="uint8", shape=(4, 3))
    assert chain.encode(a) == bytes(range(12))
    assert (chain.decode(bytes(range(12))) == a).all()
    assert chain.encode(np.asfortranarray(a)) == bytes(range(12))


def test_transpose_order_refers_to_header_axes() -> None:
    a = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    chain = CodecChain([Transpose([2, 0, 1]), Bytes()], dtype="uint8", shape=(2, 3, 4))
    stored = chain.encode(a)
    assert stored == np.transpose(a, (2, 0, 1)).tobytes(order="F")
    assert (chain.decode(stored) == a).all()


def test_with_shape_reuses_codecs() -> None:
    chain = CodecChain.from_json([LE, {"name": "zstd", "configuration": {"level": 1}}],
                                 dtype="int16", shape=(8, 8), fill_value=-1)
    assert chain.with_shape((8, 8)) is chain
    edge = chain.with_shape((3, 8))
    assert edge.shape == (3, 8) and edge.codecs == chain.codecs and edge.fill_value == -1
    a = np.arange(24, dtype=np.int16).reshape(3, 8)
    assert (edge.decode(edge.encode(a)) == a).all()


def test_stored_dtype_and_fill_after_cast() -> None:
    chain = CodecChain.from_json(
        [{"name": "scale_offset", "configuration": {"offset": -10, "scale": 0.1}},
         {"name": "cast_value", "configuration": {
             "data_type": "uint8", "scalar_map": {"encode": [["NaN", 0]], "decode": [[0, "NaN"]]}}},
         "bytes"],
        dtype="float64", shape=(4,), fill_value=float("nan"))
    assert chain.stored_dtype == np.uint8 and chain.encoded_fill_value == 0
    assert chain.encoded_size == 4
    assert chain.to_json()[2] == {"name": "bytes"}


# ---- bounded decoding through the chain ------------------------------------------------

COMPRESSED = [
    pytest.param({"name": "gzip", "configuration": {"level": 1}}, id="gzip"),
    pytest.param({"name": "zstd", "configuration": {"level": 1}}, id="zstd"),
    pytest.param({"name": "lz4"}, id="lz4"),
    pytest.param({"name": "bz2", "configuration": {"level": 1}}, id="bz2"),
    pytest.param({"name": "numcodecs.lz4", "configuration": {"acceleration": 1}}, id="nc-lz4"),
    pytest.param({"name": "numcodecs.bz2", "configuration": {"level": 1}}, id="nc-bz2"),
    pytest.param({"name": "numcodecs.zlib", "configuration": {"level": 1}}, id="nc-zlib"),
]


@pytest.mark.parametrize("compressor", COMPRESSED)
def test_chain_rejects_wrong_sizes(compressor: dict[str, Any]) -> None:
    small = CodecChain.from_json([LE, compressor], dtype="uint16", shape=(100,))
    big = CodecChain.from_json([LE, compressor], dtype="uint16", shape=(101,))
    a = np.arange(101, dtype=np.uint16)
    stored_big, stored_small = big.encode(a), small.encode(a[:100])
    with pytest.raises(DataError):
        small.decode(stored_big)  # oversized
    with pytest.raises(DataError):
        big.decode(stored_small)  # short
    with pytest.raises(DataError):
        small.decode(stored_small[: len(stored_small) // 2])  # truncated
    with pytest.raises(DataError):
        small.decode(b"\x00" * 8 + stored_small[8:])  # corrupt
    assert (small.decode(stored_small) == a[:100]).all()


@pytest.mark.parametrize("compressor", COMPRESSED)
def test_bomb_in_a_variable_stage_is_capped(compressor: dict[str, Any]) -> None:
    # [bytes, X, X]: the outer decoder has no exact size, only a bound derived from the tile.
    chain = CodecChain.from_json([LE, compressor, compressor], dtype="uint8", shape=(16,))
    inner = get_codec(compressor)
    bomb = inner.encode(inner.encode(bytes(16)) + bytes(8 << 20))
    with pytest.raises(DataError):
        chain.decode(bomb)
    assert chain.decode(chain.encode(np.arange(16, dtype=np.uint8))).tolist() == list(range(16))


def test_crc32c_detects_corruption() -> None:
    chain = CodecChain([Bytes("little"), Crc32c()], dtype="uint16", shape=(4,))
    stored = bytearray(chain.encode(np.arange(4, dtype=np.uint16)))
    stored[0] ^= 1
    with pytest.raises(DataError, match="checksum"):
        chain.decode(bytes(stored))


def test_pad_end_and_short_input() -> None:
    chain = CodecChain([Bytes(), Pad("end", 3, b"xyz")], dtype="uint8", shape=(2,))
    assert chain.encode(np.array([1, 2], np.uint8)) == b"\x01\x02xyz"
    with pytest.raises(DataError):
        chain.decode(b"xy")
    with pytest.raises(DataError):
        chain.decode(b"\x01\x02\x03xyz")  # one byte too many after stripping


# ---- callables ---------------------------------------------------------------------------


def test_pad_and_offset_callables() -> None:
    seen: list[bytes] = []

    def header(encoded: bytes) -> bytes:
        seen.append(encoded)
        return len(encoded).to_bytes(4, "little")

    for codec in (Pad("start", 4, header), Offset(4, header)):
        chain = CodecChain([Bytes(), Zstd(level=1), codec], dtype="uint8", shape=(50,))
        stored = chain.encode(np.zeros(50, np.uint8))
        assert int.from_bytes(stored[:4], "little") == len(stored) - 4 == len(seen[-1])
        assert chain.decode(stored).tolist() == [0] * 50
        assert "padding" not in codec.to_json()["configuration"]
        assert "prefix" not in codec.to_json()["configuration"]


@pytest.mark.parametrize("result", [b"abc", b"abcde", "abcd", None], ids=repr)
def test_padding_callable_must_return_nbytes(result: Any) -> None:
    chain = CodecChain([Bytes(), Pad("start", 4, lambda e: result)], dtype="uint8", shape=(1,))
    with pytest.raises(CodecError, match="exactly 4 bytes"):
        chain.encode(np.zeros(1, np.uint8))


def test_conditional_decision_callable_arguments() -> None:
    calls: list[tuple[Any, ...]] = []

    def decide(tile_index: int, i: int, codec: Any, unencoded: bytes, trial: Any) -> bool:
        calls.append((tile_index, i, codec.name, unencoded, trial))
        return i == 0

    cond = Conditional([Gzip(level=1), Crc32c()], decision=decide)
    chain = CodecChain([Bytes(), cond], dtype="uint8", shape=(3,))
    stored = chain.encode(np.array([1, 2, 3], np.uint8), tile_index=7)
    assert stored[0] == 1
    assert calls[0] == (7, 0, "gzip", b"\x01\x02\x03", None)
    # The second codec sees the output of the enabled first one
    # (docs/codecs.md#conditional-read-alias-optional).
    assert calls[1][:3] == (7, 1, "crc32c") and calls[1][3] == stored[1:]
    assert chain.decode(stored).tolist() == [1, 2, 3]
    with_trial = Conditional([Gzip(level=1)], decision=decide, trial_encode=True)
    with_trial.encode(b"abc")
    assert calls[-1][4] is not None


@pytest.mark.parametrize(
    "decision, mask",
    [("always", 3), ("never", 0), (None, 0), (2, 2), ("compress_if_smaller", 1)],
    ids=["always", "never", "default", "int-mask", "compress_if_smaller"],
)
def test_conditional_decisions(decision: Any, mask: int) -> None:
    chain = CodecChain.from_json(
        ["bytes", {"name": "conditional", "configuration": {"codecs": [
            {"name": "zstd", "configuration": {"level": 1}}, {"name": "crc32c"}]}}],
        dtype="uint8", shape=(1000,), decision=decision)
    # zeros compress; crc32c grows the data, so compress_if_smaller skips it.
    stored = chain.encode(np.zeros(1000, np.uint8))
    assert stored[0] == mask
    assert chain.decode(stored).tolist() == [0] * 1000


@pytest.mark.parametrize("decision", ["sometimes", 1.5, -1])
def test_conditional_bad_decision(decision: Any) -> None:
    with pytest.raises(CodecError):
        Conditional([Gzip(level=1)], decision=decision)


def test_conditional_errors() -> None:
    cond = Conditional([Crc32c()], header_bits=16)
    with pytest.raises(DataError):
        cond.decode(b"\x00")
    with pytest.raises(CodecError, match="reserved bit 9"):
        cond.decode(b"\x00\x02abc")
    with pytest.raises(CodecError):
        Conditional([Bytes()])
    with pytest.raises(CodecError, match="trial"):
        Conditional([Gzip(level=1)], decision="compress_if_smaller", trial_encode=False)
    assert get_codec(cond, decision="always").decision == "always"


def test_scale_offset_cast_value_objects() -> None:
    so = ScaleOffset(offset=1)
    cv = CastValue("int8", out_of_range="clamp")
    chain = CodecChain([so, cv, Bytes()], dtype="int32", shape=(3,), fill_value=1)
    assert chain.encoded_fill_value == 0
    stored = chain.encode(np.array([1, 2, 1000], np.int32))
    assert stored == b"\x00\x01\x7f"
    assert chain.decode(stored).tolist() == [1, 2, 128]
    with pytest.raises(CodecError, match="exact division"):
        CodecChain([ScaleOffset(scale=2), Bytes()], dtype="int8", shape=(1,)).decode(b"\x03")
    with pytest.raises(CodecError):
        CodecChain([ScaleOffset(scale=0), Bytes()], dtype="int32", shape=(1,))
    with pytest.raises(CodecError):
        CodecChain([ScaleOffset(offset="NaN"), Bytes("little")], dtype="float32", shape=(1,))
