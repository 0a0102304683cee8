"""Per-tile codec stacks (Zarr v3 codecs): tile array ⇄ stored bytes.

Three roles (array→array, one array→bytes, bytes→bytes), a registry with one visible list of
built-ins (:data:`BUILTIN_CODECS`) and the ``jnrrd.codecs`` entry-point group for third
parties, and :class:`CodecChain`, which binds a codec list to a tile shape and dtype. This
package never imports the header, tiling or volume modules: codecs see only a
:class:`TileSpec`.
"""

from __future__ import annotations

from ._base import (
    DEFAULT_LIMIT,
    ArrayArrayCodec,
    ArrayBytesCodec,
    BytesBytesCodec,
    Codec,
    TileSpec,
)
from .array_array import ScaleOffset, Transpose
from .array_bytes import Bytes
from .bytes_bytes import (
    Bz2,
    Crc32c,
    Gzip,
    Lz4,
    NumcodecsBz2,
    NumcodecsLz4,
    NumcodecsZlib,
    Offset,
    Pad,
    Shuffle,
    Zstd,
)
from .cast_value import ROUNDING_MODES, CastValue
from .chain import CodecChain, is_raw_chain
from .conditional import DECISIONS, Conditional
from .registry import (
    ENTRY_POINT_GROUP,
    chain_is_self_delimiting,
    get_codec,
    is_self_delimiting,
    register_builtin_codecs,
    register_codec,
)

#: The built-in codecs (docs/codecs.md), in the order the roles apply: the one visible list.
BUILTIN_CODECS: list[type[Codec]] = [
    Transpose,
    ScaleOffset,
    CastValue,
    Bytes,
    Gzip,
    Zstd,
    Lz4,
    Bz2,
    NumcodecsLz4,
    NumcodecsBz2,
    NumcodecsZlib,
    Shuffle,
    Crc32c,
    Pad,
    Offset,
    Conditional,
]
register_builtin_codecs(BUILTIN_CODECS)

__all__ = [
    "BUILTIN_CODECS",
    "DECISIONS",
    "DEFAULT_LIMIT",
    "ENTRY_POINT_GROUP",
    "ROUNDING_MODES",
    "ArrayArrayCodec",
    "ArrayBytesCodec",
    "Bytes",
    "BytesBytesCodec",
    "Bz2",
    "CastValue",
    "Codec",
    "CodecChain",
    "Conditional",
    "Crc32c",
    "Gzip",
    "Lz4",
    "NumcodecsBz2",
    "NumcodecsLz4",
    "NumcodecsZlib",
    "Offset",
    "Pad",
    "ScaleOffset",
    "Shuffle",
    "TileSpec",
    "Transpose",
    "Zstd",
    "chain_is_self_delimiting",
    "get_codec",
    "is_raw_chain",
    "is_self_delimiting",
    "register_codec",
]
