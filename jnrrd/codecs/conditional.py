"""The ``conditional`` codec (read alias ``optional``): per-tile enabling of nested codecs.

Encoded form (docs/codecs.md#conditional-read-alias-optional): a header of ``header_bits / 8``
bytes holding the mask as a little-endian integer (bit i ↔ ``codecs[i]``), then the data with
the enabled codecs applied in order. Decode applies the enabled ones in reverse. Reserved bits
set on decode are a ``CodecError``; input shorter than the header is a ``DataError``.

Which codecs to enable is the writer's *decision* (runtime configuration, never serialized):
``"compress_if_smaller"`` (trial encode; keep only if strictly smaller), ``"always"``,
``"never"``, an ``int`` mask, or a callable
``(tile_index, codec_index, codec, unencoded, trial_encoded | None) -> bool``. Without a
decision every bit is 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..errors import CodecError, DataError
from ._base import DEFAULT_LIMIT, BytesBytesCodec, Codec
from .registry import get_codec

__all__ = ["DECISIONS", "Conditional", "Decision"]

Decision = Callable[[int, int, BytesBytesCodec, bytes, "bytes | None"], bool]
DECISIONS = ("compress_if_smaller", "always", "never")


def _default_bits(n: int) -> int:
    """The default ``header_bits``: ``n`` bits rounded up to whole bytes."""
    return -(-n // 8) * 8


def _smaller(tile_index: int, i: int, codec: Any, unencoded: bytes, trial: bytes | None) -> bool:
    return trial is not None and len(trial) < len(unencoded)


def _always(tile_index: int, i: int, codec: Any, unencoded: bytes, trial: bytes | None) -> bool:
    return True


def _in_mask(mask: int, tile_index: int, i: int, codec: Any, unencoded: bytes,
             trial: bytes | None) -> bool:
    return bool(mask >> i & 1)


@dataclass(frozen=True, init=False)
class Conditional(BytesBytesCodec):
    """Apply each nested bytes→bytes codec only where the tile's mask bit says so.

    The configuration is ``codecs`` and ``header_bits``; ``decision`` and ``trial_encode`` are
    runtime settings: never written, not compared.
    """

    name = "conditional"
    aliases = ("optional",)

    codecs: tuple[BytesBytesCodec, ...]
    header_bits: int
    decision: str | int | Decision | None = field(default=None, compare=False)
    trial_encode: bool = field(default=False, compare=False)
    _decide: Decision | None = field(init=False, compare=False, repr=False)

    def __init__(
        self,
        codecs: Sequence[Any],
        *,
        header_bits: int | None = None,
        decision: str | int | Decision | None = None,
        trial_encode: bool | None = None,
    ) -> None:
        if isinstance(codecs, (str, bytes, dict)) or not isinstance(codecs, Sequence):
            raise CodecError("conditional: codecs: expected a list of codecs")
        if not codecs:
            raise CodecError("conditional: codecs: the list is empty")
        nested: list[BytesBytesCodec] = []
        for c in codecs:
            codec = c if isinstance(c, Codec) else get_codec(c)
            if not isinstance(codec, BytesBytesCodec):
                raise CodecError(
                    f"conditional: nested codec {codec.name!r} is not bytes->bytes; nested "
                    "codecs must all be bytes->bytes"
                )
            nested.append(codec)
        if header_bits is None:
            header_bits = _default_bits(len(nested))
        if isinstance(header_bits, bool) or not isinstance(header_bits, int) or header_bits <= 0:
            raise CodecError(f"conditional: header_bits: {header_bits!r} must be positive")
        if header_bits % 8:
            raise CodecError(f"conditional: header_bits: {header_bits} is not a multiple of 8")
        if header_bits < len(nested):
            raise CodecError(
                f"conditional: header_bits: {header_bits} < {len(nested)} nested codecs"
            )
        decide, trial = _decision(decision, trial_encode)
        object.__setattr__(self, "codecs", tuple(nested))
        object.__setattr__(self, "header_bits", header_bits)
        object.__setattr__(self, "decision", decision)
        object.__setattr__(self, "trial_encode", trial)
        object.__setattr__(self, "_decide", decide)

    @classmethod
    def from_config(cls, config: dict[str, Any], **runtime: Any) -> Conditional:
        """From JSON; ``decision``/``trial_encode`` come from the runtime keywords."""
        nested = [get_codec(c, **runtime) for c in config.get("codecs", [])]
        return cls(nested, header_bits=config.get("header_bits"),
                   decision=runtime.get("decision"), trial_encode=runtime.get("trial_encode"))

    @property
    def _nbytes(self) -> int:
        return self.header_bits // 8

    def _config_json(self) -> dict[str, Any]:
        config: dict[str, Any] = {"codecs": [c.to_json() for c in self.codecs]}
        if self.header_bits != _default_bits(len(self.codecs)):
            config["header_bits"] = self.header_bits
        return config

    def with_runtime(self, **runtime: Any) -> Codec:
        """With ``runtime["decision"]`` (and ``trial_encode``) when a decision is given."""
        if runtime.get("decision") is None:
            return self
        return self.with_decision(runtime["decision"], trial_encode=runtime.get("trial_encode"))

    def with_decision(
        self, decision: str | int | Decision | None, *, trial_encode: bool | None = None
    ) -> Conditional:
        """The same codec with another runtime decision."""
        return Conditional(self.codecs, header_bits=self.header_bits,
                           decision=decision, trial_encode=trial_encode)

    def encoded_size(self, size: int) -> int | None:
        """Fixed only when no nested codec can change the size."""
        for c in self.codecs:
            if c.encoded_size(size) != size:
                return None
        return size + self._nbytes

    def max_encoded_size(self, size: int) -> int:
        """Header plus the largest any subset of the nested codecs can produce."""
        bound = size
        for c in self.codecs:
            bound = max(bound, c.max_encoded_size(bound))
        return bound + self._nbytes

    def mask_for(self, data: bytes | memoryview, *, tile_index: int = 0) -> tuple[int, bytes]:
        """(mask, encoded body) for ``data`` under the runtime decision."""
        mask = 0
        cur = bytes(data)
        if self._decide is None:
            return 0, cur
        for i, codec in enumerate(self.codecs):
            trial = codec.encode(cur, tile_index=tile_index) if self.trial_encode else None
            use = self._decide(tile_index, i, codec, cur, trial)
            if use:
                mask |= 1 << i
                cur = trial if trial is not None else codec.encode(cur, tile_index=tile_index)
        return mask, cur

    def encode(self, data: bytes | memoryview, *, tile_index: int = 0) -> bytes:
        """Header (the mask, little endian) followed by the processed data."""
        mask, body = self.mask_for(data, tile_index=tile_index)
        return mask.to_bytes(self._nbytes, "little") + body

    def decode(
        self, data: bytes | memoryview, *, size: int | None = None, limit: int = DEFAULT_LIMIT
    ) -> bytes | memoryview:
        """Read the mask, check reserved bits, undo the enabled codecs in reverse."""
        n = self._nbytes
        if len(data) < n:
            raise DataError(
                f"conditional: {len(data)} bytes is shorter than the {n}-byte mask header"
            )
        view = memoryview(data)
        mask = int.from_bytes(view[:n], "little")
        reserved = mask >> len(self.codecs)
        if reserved:
            bit = len(self.codecs) + (reserved & -reserved).bit_length() - 1
            raise CodecError(
                f"conditional: the mask 0x{mask:0{2 * n}x} sets reserved bit {bit} "
                f"({len(self.codecs)} nested codecs)"
            )
        # Expected sizes before each enabled codec, forward from the known input size.
        sizes: list[int | None] = []
        bounds: list[int] = []
        cur: int | None = size
        bound = size if size is not None else limit
        for i, codec in enumerate(self.codecs):
            sizes.append(cur)
            bounds.append(bound)
            if mask >> i & 1:
                cur = codec.encoded_size(cur) if cur is not None else None
                bound = codec.max_encoded_size(bound)
        out: bytes | memoryview = view[n:]
        for i in reversed(range(len(self.codecs))):
            if mask >> i & 1:
                out = self.codecs[i].decode(out, size=sizes[i], limit=bounds[i])
        if size is not None and len(out) != size:
            raise DataError(f"conditional: decoded {len(out)} bytes; expected exactly {size}")
        if size is None and len(out) > limit:
            raise DataError(f"conditional: decoded more than {limit} bytes")
        return out


def _decision(
    decision: str | int | Decision | None, trial_encode: bool | None
) -> tuple[Decision | None, bool]:
    """(callable or None, trial flag) for a decision (no decision: every bit 0)."""
    if decision is None or decision == "never":
        return None, bool(trial_encode)
    if decision == "always":
        return _always, bool(trial_encode)
    if decision == "compress_if_smaller":
        if trial_encode is False:
            raise CodecError("conditional: 'compress_if_smaller' needs trial encoding")
        return _smaller, True
    if isinstance(decision, int) and not isinstance(decision, bool):
        if decision < 0:
            raise CodecError(f"conditional: decision mask {decision} is negative")
        return partial(_in_mask, decision), bool(trial_encode)
    if callable(decision):
        return decision, bool(trial_encode)
    raise CodecError(
        f"conditional: decision: {decision!r} is not one of {', '.join(DECISIONS)}, a mask "
        "or a callable"
    )
