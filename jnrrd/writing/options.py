"""The further keywords of :func:`jnrrd.write` and :func:`jnrrd.convert`, by name and type
(docs/api.md, "Writing"): type checkers and editors see them through ``Unpack``; the writer
checks their values (:func:`jnrrd.writing.checks.check_arguments`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypedDict

__all__ = ["ConvertOptions", "TileOptions", "WriteOptions"]

#: a ``conditional`` codec's decision: a named rule, a mask of enabled codecs, or a callable
Decision = str | int | Callable[..., Any]
#: ``True`` (a bar on a terminal) or a callable ``(done, total)``
Progress = bool | Callable[[int, int], Any] | None


class TileOptions(TypedDict, total=False):
    """The tiled-layout keywords of :func:`jnrrd.write` and :func:`jnrrd.convert`: asking
    for one (but ``compression_level``) asks for tiles."""

    decision: Decision | None
    sparse: bool
    tile_stats: bool
    checksum: Literal["crc32", "crc32c"] | Literal[False] | None
    quality: bool
    align: int | None
    compression_level: int | None
    overlap: int | Sequence[int] | Mapping[int, int] | None
    edge: Literal["pad", "variable"] | None
    padding_value: Any
    storage: Literal["internal", "external"] | None
    pattern: str | None
    tile_format: Literal["contiguous", "chunked"] | None


class WriteOptions(TileOptions, total=False):
    """``write(..., **options)``: :class:`TileOptions` and ``progress``."""

    progress: Progress


class ConvertOptions(TileOptions, total=False):
    """``convert(..., **write_options)``: :class:`TileOptions`, the tiling shortcuts of
    :func:`jnrrd.write` and the options of an OME-Zarr target (docs/api.md,
    ``jnrrd.convert``)."""

    tile: Any
    compression: str | None
    codecs: Sequence[Any] | None
    levels: Any
    downsample: str | None
    detached: bool
    durable: bool
    encoding: str | None
    chunks: Any
    shards: Any
    affine: Any
