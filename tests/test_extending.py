"""Extending jnrrd in one place (docs/architecture.md): a compressor declared once (its class,
registered by ``register_codec`` or through the ``jnrrd.codecs`` entry-point group) and a
downsampling method listed once (``jnrrd.pyramid.METHODS``, mirrored by the schema's enum)."""

from __future__ import annotations

import copy
import json
import pickle
import zlib
from dataclasses import FrozenInstanceError, dataclass
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import jnrrd
from jnrrd.codecs import (
    BytesBytesCodec,
    CodecChain,
    chain_is_self_delimiting,
    get_codec,
    is_self_delimiting,
    register_codec,
    registry,
)
from jnrrd.codecs._base import DEFAULT_LIMIT

ROOT = Path(__file__).resolve().parent.parent
DATA = np.arange(24 * 20 * 6, dtype=np.uint16).reshape(24, 20, 6) % 251
CHAIN = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "toy.deflate"}]


@dataclass(frozen=True)
class ToyDeflate(BytesBytesCodec):
    """A third-party compressor: one raw deflate stream (its final block ends it). Written as
    docs/architecture.md "Adding a compressor" says."""

    name = "toy.deflate"
    self_delimiting = True

    level: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.level, bool) or self.level not in range(10):
            raise jnrrd.CodecError(f"toy.deflate: level: {self.level!r} is not in 0..9")

    def encoded_size(self, size: int) -> int | None:
        return None

    def encode(self, data: bytes | memoryview, *, tile_index: int = 0) -> bytes:
        c = zlib.compressobj(self.level, zlib.DEFLATED, -15)
        return c.compress(bytes(data)) + c.flush()

    def decode(self, data: bytes | memoryview, *, size: int | None = None,
               limit: int = DEFAULT_LIMIT) -> bytes:
        d = zlib.decompressobj(-15)
        out = d.decompress(bytes(data), (size if size is not None else limit) + 1)
        if not d.eof:
            raise jnrrd.DataError("toy.deflate: the stream has no end")
        return out


class ToyDeflateUndelimited(ToyDeflate):
    """The same bytes, declared as needing a size_table."""

    self_delimiting = False


@pytest.fixture
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registrations made by a test end with it."""
    monkeypatch.setattr(registry, "_registry", dict(registry._registry))
    monkeypatch.setattr(registry, "_entry_points_loaded", False)
    monkeypatch.setattr(registry, "entry_points", lambda group: [])


def _drop_size_table(path: Path) -> None:
    """Remove ``tile:size_table`` from a written header, keeping every byte offset: the
    removed length goes into JSON whitespace of the offset_table line."""
    raw = path.read_bytes()
    head, sep, tail = raw.partition(b"\n\n")
    lines = head.split(b"\n")
    i = next(k for k, line in enumerate(lines) if line.startswith(b'{"tile:size_table"'))
    removed = len(lines.pop(i)) + 1
    j = next(k for k, line in enumerate(lines) if line.startswith(b'{"tile:offset_table"'))
    lines[j] = lines[j][:-1] + b" " * removed + b"}"
    path.write_bytes(b"\n".join(lines) + sep + tail)
    assert len(path.read_bytes()) == len(raw)


def _write_chunked(path: Path) -> None:
    jnrrd.write(path, DATA, tile=(8, 8, 4), codecs=CHAIN, tile_format="chunked")
    header = jnrrd.read_header(path)
    assert header["tile:format"] == "chunked" and header["tile:codecs"][1] == CHAIN[1]
    assert "tile:size_table" in header  # the writer always records the sizes


def test_registered_self_delimiting_compressor_needs_no_size_table(
        tmp_path: Path, fresh_registry: None) -> None:
    register_codec("toy.deflate", ToyDeflate)
    assert is_self_delimiting("toy.deflate") and chain_is_self_delimiting(CHAIN)
    path = tmp_path / "toy.jnrrd"
    _write_chunked(path)
    np.testing.assert_array_equal(jnrrd.read(path)[0], DATA)
    _drop_size_table(path)
    assert "tile:size_table" not in jnrrd.read_header(path)
    np.testing.assert_array_equal(jnrrd.read(path)[0], DATA)
    with jnrrd.open(path) as vol:
        np.testing.assert_array_equal(vol[3:17, 5:9, 2:5], DATA[3:17, 5:9, 2:5])
    problems = jnrrd.validate(path, deep=True)
    assert not [p for p in problems if p.severity == "error"], problems


def test_compressor_without_self_delimiting_needs_a_size_table(
        tmp_path: Path, fresh_registry: None) -> None:
    register_codec("toy.deflate", ToyDeflateUndelimited)
    assert not is_self_delimiting("toy.deflate") and not chain_is_self_delimiting(CHAIN)
    path = tmp_path / "toy.jnrrd"
    _write_chunked(path)
    np.testing.assert_array_equal(jnrrd.read(path)[0], DATA)
    _drop_size_table(path)
    with pytest.raises(jnrrd.HeaderError, match="size_table"):
        jnrrd.read(path)
    problems = jnrrd.validate(path)
    assert any(p.severity == "error" and p.field == "tile:size_table" for p in problems)


def test_entry_point_compressor_is_self_delimiting(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   fresh_registry: None) -> None:
    groups: list[str] = []

    def fake_entry_points(group: str) -> list[EntryPoint]:
        groups.append(group)
        return [EntryPoint("toy.deflate", f"{__name__}:ToyDeflate", group)]

    monkeypatch.setattr(registry, "entry_points", fake_entry_points)
    path = tmp_path / "toy.jnrrd"
    _write_chunked(path)
    assert groups == ["jnrrd.codecs"]
    _drop_size_table(path)
    np.testing.assert_array_equal(jnrrd.read(path)[0], DATA)


def test_a_dataclass_codec_is_a_value_object(fresh_registry: None) -> None:
    """The recipe's codec gets the built-ins' contract from being a frozen dataclass:
    canonical JSON (defaults dropped), equality and hashing by configuration, immutability,
    pickling and copying."""
    register_codec("toy.deflate", ToyDeflate)
    assert get_codec("toy.deflate") == ToyDeflate() and ToyDeflate().to_json() == CHAIN[1]
    nine = get_codec({"name": "toy.deflate", "configuration": {"level": 9}})
    assert nine == ToyDeflate(9) != ToyDeflate() and hash(nine) == hash(ToyDeflate(level=9))
    assert nine.to_json() == {"name": "toy.deflate", "configuration": {"level": 9}}
    assert get_codec(nine.to_json()) == nine
    assert pickle.loads(pickle.dumps(nine)) == nine == copy.deepcopy(nine) == copy.copy(nine)
    with pytest.raises(FrozenInstanceError):
        nine.level = 1  # type: ignore[misc]
    with pytest.raises(jnrrd.CodecError, match="level"):
        get_codec({"name": "toy.deflate", "configuration": {"level": 10}})
    with pytest.raises(jnrrd.CodecError, match="invalid configuration"):
        get_codec({"name": "toy.deflate", "configuration": {"speed": 1}})


class LegacyToy(BytesBytesCodec):
    """A codec written before codecs were dataclasses: ``__init__`` stores its configuration
    with ``self._set(...)`` and ``_config_json`` writes it."""

    name = "toy.legacy"

    def __init__(self, nbytes: int = 1) -> None:
        self._set(nbytes=nbytes)

    def _config_json(self) -> dict[str, Any]:
        return {"nbytes": self.nbytes}  # type: ignore[attr-defined]

    def encoded_size(self, size: int) -> int | None:
        return size + self.nbytes  # type: ignore[attr-defined]

    def encode(self, data: bytes | memoryview, *, tile_index: int = 0) -> bytes:
        return bytes(self.nbytes) + bytes(data)  # type: ignore[attr-defined]

    def decode(self, data: bytes | memoryview, *, size: int | None = None,
               limit: int = DEFAULT_LIMIT) -> bytes:
        return bytes(data)[self.nbytes:]  # type: ignore[attr-defined]


def test_a_codec_using_the_old_set_still_works_with_a_deprecation_warning(
        fresh_registry: None) -> None:
    register_codec("toy.legacy", LegacyToy)
    with pytest.warns(DeprecationWarning, match="_set is deprecated"):
        two = get_codec({"name": "toy.legacy", "configuration": {"nbytes": 2}})
    with pytest.warns(DeprecationWarning):
        assert two == LegacyToy(2) != LegacyToy(3) and hash(two) == hash(LegacyToy(2))
        chain = CodecChain([get_codec("bytes"), two], dtype="uint8", shape=(3,))
    assert two.to_json() == {"name": "toy.legacy", "configuration": {"nbytes": 2}}
    assert chain.encode(np.arange(3, dtype=np.uint8)) == b"\0\0\0\1\2"
    assert chain.decode(b"\0\0\0\1\2").tolist() == [0, 1, 2]
    with pytest.raises(AttributeError, match="immutable"):
        two.nbytes = 5  # type: ignore[attr-defined]
    assert pickle.loads(pickle.dumps(two)) == two


@pytest.mark.parametrize("name, expected", [
    ("gzip", True), ("bz2", True), ("zstd", True), ("lz4", True),
    ("numcodecs.bz2", True), ("numcodecs.zlib", True), ("numcodecs.lz4", False),
    ("bytes", False), ("crc32c", False), ("pad", False), ("conditional", False),
    ("numcodecs.shuffle", False), ("no.such.codec", False),
])
def test_builtin_codecs_declare_whether_they_are_self_delimiting(name: str,
                                                                 expected: bool) -> None:
    assert is_self_delimiting(name) is expected


def test_downsampling_methods_match_the_schema_enum() -> None:
    """``jnrrd.pyramid.METHODS`` is the one list; the schema cannot import Python, so its
    enum is compared here (adding a method: a kernel in pyramid/methods.py + this enum)."""
    from jnrrd.pyramid import METHODS

    schema = json.loads((ROOT / "schemas" / "tile.schema.json").read_text())
    assert list(schema["properties"]["downsample_method"]["enum"]) == list(METHODS)
