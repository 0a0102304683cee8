"""bytes→bytes codecs: compressors, shuffle, crc32c, and the ``pad``/``offset`` framing codecs.

Every decoder is bounded (docs/codecs.md#bounded-decoding): given the exact expected size it
stops at ``size + 1`` bytes and fails on anything else; given only a limit it never produces
more than ``limit + 1`` bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import lz4.block
import numpy as np

from ..errors import CodecError, DataError
from . import compress as _c
from ._base import DEFAULT_LIMIT, BytesBytesCodec, b64decode, b64encode, check_size

__all__ = [
    "Bz2",
    "Crc32c",
    "Gzip",
    "Lz4",
    "NumcodecsBz2",
    "NumcodecsLz4",
    "NumcodecsZlib",
    "Offset",
    "Pad",
    "Shuffle",
    "Zstd",
]


def _int(value: Any, name: str, field: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise CodecError(f"{name}: {field}: {value!r} is not an integer in [{lo}, {hi}]")
    return value


@dataclass(frozen=True, init=False)
class _Compressor(BytesBytesCodec):
    """A stream compressor from :mod:`jnrrd.codecs.compress` with a ``level``."""

    stream: ClassVar[str] = ""
    level_range: ClassVar[tuple[int, int]] = (0, 9)
    default_level: ClassVar[int | None] = None  # None: level is required

    level: int

    def __init__(self, level: int | None = None) -> None:
        self._init_level(level)

    def _init_level(self, level: int | None) -> None:
        if level is None:
            if self.default_level is None:
                raise CodecError(f"{self.name}: level is a required configuration parameter")
            level = self.default_level
        object.__setattr__(self, "level", _int(level, self.name, "level", *self.level_range))

    def _config_json(self) -> dict[str, Any]:
        if self.default_level is not None and self.level == self.default_level:
            return {}
        return {"level": self.level}

    def encoded_size(self, size: int) -> int | None:
        """Data-dependent."""
        return None

    def encode(self, data: bytes | memoryview, *, tile_index: int = 0) -> bytes:
        """One member/stream/frame."""
        return _c.compress(self.stream, data, level=self.level)

    def decode(
        self, data: bytes | memoryview, *, size: int | None = None, limit: int = DEFAULT_LIMIT
    ) -> bytes:
        """Bounded decompression (concatenated members/frames accepted)."""
        what = f"{self.name}: "
        if size is not None:
            return _c.decompress(self.stream, data, size, what=what)
        return _c.decompress_at_most(self.stream, data, limit, what=what)


@dataclass(frozen=True, init=False)
class Gzip(_Compressor):
    """RFC 1952 gzip (strict: a zlib stream is rejected inside ``tile:codecs``)."""

    name = "gzip"
    stream = "gzip"
    self_delimiting = True  # the deflate final block, then CRC-32 and ISIZE


@dataclass(frozen=True, init=False)
class Bz2(_Compressor):
    """A bzip2 stream (``level`` 1–9, default 9)."""

    name = "bz2"
    stream = "bz2"
    self_delimiting = True  # the end-of-stream marker
    level_range = (1, 9)
    default_level = 9


@dataclass(frozen=True, init=False)
class NumcodecsBz2(Bz2):
    """numcodecs ``BZ2``: a plain bzip2 stream (``level`` default 1)."""

    name = "numcodecs.bz2"
    self_delimiting = True  # a plain bzip2 stream (end-of-stream marker)
    default_level = 1

    def _config_json(self) -> dict[str, Any]:
        return {"level": self.level}


@dataclass(frozen=True, init=False)
class NumcodecsZlib(_Compressor):
    """numcodecs ``Zlib``: an RFC 1950 zlib stream (TIFF deflate), ``level`` default 1."""

    name = "numcodecs.zlib"
    stream = "zlib"
    self_delimiting = True  # the deflate final block, then Adler-32
    default_level = 1

    def _config_json(self) -> dict[str, Any]:
        return {"level": self.level}

    def encode(self, data: bytes | memoryview, *, tile_index: int = 0) -> bytes:
        """One zlib stream."""
        import zlib

        return zlib.compress(data, self.level)

    def decode(
        self, data: bytes | memoryview, *, size: int | None = None, limit: int = DEFAULT_LIMIT
    ) -> bytes:
        """Bounded zlib decompression."""
        out = _c.decompress_at_most("zlib", data, size if size is not None else limit,
                                    what=f"{self.name}: ")
        check_size(self.name, out, size, limit)
        return out


@dataclass(frozen=True, init=False)
class Lz4(_Compressor):
    """The LZ4 *frame* format (``level`` default 0)."""

    name = "lz4"
    stream = "lz4"
    self_delimiting = True  # the frame's EndMark
    level_range = (-65536, 16)
    default_level = 0


@dataclass(frozen=True, init=False)
class Zstd(_Compressor):
    """Zstandard: one frame with content size; ``checksum`` adds the content checksum."""

    name = "zstd"
    stream = "zstd"
    self_delimiting = True  # frames: the last block has its Last_Block flag
    level_range = (-131072, 22)

    checksum: bool = False

    def __init__(self, level: int | None = None, checksum: bool = False) -> None:
        self._init_level(level)
        if not isinstance(checksum, bool):
            raise CodecError(f"zstd: checksum: {checksum!r} is not a boolean")
        object.__setattr__(self, "checksum", checksum)

    def _config_json(self) -> dict[str, Any]:
        config: dict[str, Any] = {"level": self.level}
        if self.checksum:
            config["checksum"] = True
        return config

    def encode(self, data: bytes | memoryview, *, tile_index: int = 0) -> bytes:
        """One frame."""
        return _c.zstd_compress(data, level=self.level, checksum=self.checksum)


@dataclass(frozen=True)
class NumcodecsLz4(BytesBytesCodec):
    """numcodecs ``LZ4``: a 4-byte little-endian size, then one raw LZ4 block."""

    name = "numcodecs.lz4"
    #: a raw LZ4 block has no end marker (its prefix states the decoded size, not the
    #: stored one): the stored size must come from the size_table
    self_delimiting = False

    acceleration: int = 1

    def __post_init__(self) -> None:
        _int(self.acceleration, self.name, "acceleration", 1, 1 << 16)

    def _config_json(self) -> dict[str, Any]:
        return {"acceleration": self.acceleration}

    def encoded_size(self, size: int) -> int | None:
        """Data-dependent."""
        return None

    def max_encoded_size(self, size: int) -> int:
        """LZ4_compressBound plus the size prefix."""
        return 4 + size + size // 255 + 16

    def encode(self, data: bytes | memoryview, *, tile_index: int = 0) -> bytes:
        """Size prefix and one block."""
        return lz4.block.compress(data, mode="fast", acceleration=self.acceleration,
                                  store_size=True)

    def decode(
        self, data: bytes | memoryview, *, size: int | None = None, limit: int = DEFAULT_LIMIT
    ) -> bytes:
        """The stated size is checked against the expected one before anything is allocated."""
        if len(data) < 4:
            raise DataError(f"{self.name}: {len(data)} bytes is shorter than the size prefix")
        (stated,) = struct.unpack_from("<I", data)
        if (size is not None and stated != size) or stated > limit:
            raise DataError(
                f"{self.name}: the block states {stated} bytes; expected "
                + (f"exactly {size}" if size is not None else f"at most {limit}")
            )
        try:
            out = lz4.block.decompress(bytes(data[4:]), uncompressed_size=stated)
        except lz4.block.LZ4BlockError as exc:
            raise DataError(f"{self.name}: corrupt LZ4 block: {exc}") from None
        if len(out) != stated:
            raise DataError(f"{self.name}: the block holds {len(out)} bytes; it states {stated}")
        return out


@dataclass(frozen=True)
class Shuffle(BytesBytesCodec):
    """numcodecs ``Shuffle``: byte ``k`` of every element grouped together (blosc shuffle).

    Trailing bytes that do not fill an element are kept unchanged at the end.
    """

    name = "numcodecs.shuffle"

    elementsize: int = 4

    def __post_init__(self) -> None:
        _int(self.elementsize, self.name, "elementsize", 1, 1 << 16)

    def _config_json(self) -> dict[str, Any]:
        return {"elementsize": self.elementsize}

    def _split(self, data: bytes | memoryview) -> tuple[np.ndarray, int]:
        buf = np.frombuffer(data, dtype=np.uint8)
        return buf, (len(buf) // self.elementsize) * self.elementsize

    def encode(self, data: bytes | memoryview, *, tile_index: int = 0) -> bytes:
        """Shuffle."""
        buf, n = self._split(data)
        body = buf[:n].reshape(-1, self.elementsize).T.tobytes()
        return body + buf[n:].tobytes()

    def decode(
        self, data: bytes | memoryview, *, size: int | None = None, limit: int = DEFAULT_LIMIT
    ) -> bytes:
        """Unshuffle."""
        check_size(self.name, data, size, limit)
        buf, n = self._split(data)
        body = buf[:n].reshape(self.elementsize, -1).T.tobytes()
        return body + buf[n:].tobytes()


@dataclass(frozen=True)
class Crc32c(BytesBytesCodec):
    """Append the CRC-32C of the data, little endian (a core codec: ``crc32c`` is a
    dependency of jnrrd)."""

    name = "crc32c"

    def encoded_size(self, size: int) -> int | None:
        """Four bytes more."""
        return size + 4

    def encode(self, data: bytes | memoryview, *, tile_index: int = 0) -> bytes:
        """Data plus checksum."""
        import crc32c  # on first use: the package's import costs a start-up ~20 ms

        return bytes(data) + struct.pack("<I", crc32c.crc32c(data))

    def decode(
        self, data: bytes | memoryview, *, size: int | None = None, limit: int = DEFAULT_LIMIT
    ) -> bytes | memoryview:
        """Verify and strip the checksum (``DataError`` on mismatch)."""
        if len(data) < 4:
            raise DataError(f"crc32c: {len(data)} bytes is fewer than the 4-byte checksum")
        view = memoryview(data)
        body = view[:-4]
        check_size(self.name, body, size, limit)
        (stored,) = struct.unpack("<I", view[-4:])
        import crc32c

        actual = crc32c.crc32c(body)
        if stored != actual:
            raise DataError(f"crc32c: checksum mismatch: stored {stored:08x}, data {actual:08x}")
        return body


PaddingSource = bytes | Callable[[bytes], bytes] | None


@dataclass(frozen=True, init=False)
class Pad(BytesBytesCodec):
    """Fixed-size padding at the ``start`` or ``end`` of the encoded tile.

    ``padding`` is literal bytes (base64 in JSON; zeros when absent) or, from Python only, a
    callable that builds the padding from the encoded tile (e.g. a TIFF header carrying the
    compressed byte count); it must return exactly ``nbytes`` bytes. Decode strips ``nbytes``
    without comparing them (docs/codecs.md#pad). A callable compares by identity and is not
    written to the JSON.
    """

    name = "pad"
    _size_field: ClassVar[str] = "nbytes"

    location: str  # "start" or "end"
    nbytes: int
    padding: PaddingSource = None

    def __init__(self, location: str, nbytes: int, padding: Any = None) -> None:
        if location not in ("start", "end"):
            raise CodecError(f"pad: location: {location!r} is not 'start' or 'end'")
        object.__setattr__(self, "location", location)
        self._init_padding(nbytes, padding, "nbytes", "padding")

    def _init_padding(self, nbytes: Any, padding: Any, nfield: str, pfield: str) -> None:
        nbytes = _int(nbytes, self.name, nfield, 0, 1 << 31)
        literal: bytes | None = None
        if isinstance(padding, str):
            literal = b64decode(padding, self.name, pfield)
        elif isinstance(padding, (bytes, bytearray, memoryview)):
            literal = bytes(padding)
        elif padding is not None and not callable(padding):
            raise CodecError(f"{self.name}: {pfield}: expected base64 text, bytes or a callable")
        if literal is not None and len(literal) != nbytes:
            raise CodecError(
                f"{self.name}: decoded {pfield} is {len(literal)} bytes but {nfield} is {nbytes}"
            )
        object.__setattr__(self, "nbytes", nbytes)
        object.__setattr__(self, "padding", literal if literal is not None else padding)

    def _config_json(self) -> dict[str, Any]:
        """A callable padding is runtime only and is not written."""
        config: dict[str, Any] = {"location": self.location, "nbytes": self.nbytes}
        if isinstance(self.padding, bytes):
            config["padding"] = b64encode(self.padding)
        return config

    def encoded_size(self, size: int) -> int | None:
        """``nbytes`` more."""
        return size + self.nbytes

    def _pad_bytes(self, encoded: bytes | memoryview) -> bytes:
        if self.padding is None:
            return bytes(self.nbytes)
        if callable(self.padding):
            made = self.padding(bytes(encoded))
            if not isinstance(made, (bytes, bytearray, memoryview)) or len(made) != self.nbytes:
                got = len(made) if isinstance(made, (bytes, bytearray, memoryview)) else made
                raise CodecError(
                    f"{self.name}: the padding callable returned {got!r}; expected exactly "
                    f"{self.nbytes} bytes"
                )
            return bytes(made)
        return self.padding

    def encode(self, data: bytes | memoryview, *, tile_index: int = 0) -> bytes:
        """Add the padding."""
        pad = self._pad_bytes(data)
        return pad + bytes(data) if self.location == "start" else bytes(data) + pad

    def decode(
        self, data: bytes | memoryview, *, size: int | None = None, limit: int = DEFAULT_LIMIT
    ) -> bytes | memoryview:
        """Strip ``nbytes`` (``DataError`` when the data is shorter)."""
        if len(data) < self.nbytes:
            raise DataError(
                f"{self.name}: encoded tile ({len(data)} bytes) is shorter than "
                f"{self._size_field} ({self.nbytes})"
            )
        view = memoryview(data)
        body = view[self.nbytes :] if self.location == "start" else view[: len(view) - self.nbytes]
        check_size(self.name, body, size, limit)
        return body


@dataclass(frozen=True, init=False)
class Offset(Pad):
    """``pad`` at the start, under its own name: ``offset`` bytes of ``prefix`` (zeros).

    Its fields are ``pad``'s (``location`` is always ``"start"``, ``nbytes`` is the offset,
    ``padding`` the prefix), so ``dataclasses.replace`` does not apply to it: build a new one.
    """

    name = "offset"
    _size_field = "offset"

    def __init__(self, offset: int, prefix: Any = None) -> None:
        object.__setattr__(self, "location", "start")
        self._init_padding(offset, prefix, "offset", "prefix")

    def __repr__(self) -> str:
        return f"Offset(offset={self.nbytes!r}, prefix={self.padding!r})"

    def _config_json(self) -> dict[str, Any]:
        """A callable prefix is runtime only and is not written."""
        config: dict[str, Any] = {"offset": self.nbytes}
        if isinstance(self.padding, bytes):
            config["prefix"] = b64encode(self.padding)
        return config
