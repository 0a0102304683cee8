"""The tile codec chain fields (docs/format.md#codec-chain): ``tile:codecs``, the
``tile:compression`` shorthand and the core ``encoding`` resolved into one Zarr v3 chain, checked
against each other."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import HeaderError, JnrrdWarning

__all__ = ["CODEC_TO_COMPRESSION", "SHORTHAND", "bytes_codec", "check_codec_objects",
           "codec_names", "compression_chain", "resolve_codecs", "shorthand_names"]

#: tile:compression shorthand -> bytes->bytes codec name (docs/format.md#codec-chain)
SHORTHAND = {"raw": None, "gzip": "gzip", "gz": "gzip", "bzip2": "bz2", "bz2": "bz2",
             "zstd": "zstd", "lz4": "lz4"}
#: the value written for an alias of tile:compression
CANONICAL_COMPRESSION = {"gz": "gzip", "bz2": "bzip2"}
#: codec name -> tile:compression value, for comparing the two fields by codec name
CODEC_TO_COMPRESSION = {"gzip": "gzip", "bz2": "bzip2", "zstd": "zstd", "lz4": "lz4"}


def compression_chain(name: str | None, endian: str, dtype: np.dtype,
                      level: int | None = None) -> list[dict[str, Any]]:
    """The chain a ``tile:compression`` value stands for (docs/format.md#compression-shorthand)."""
    chain: list[dict[str, Any]] = [bytes_codec(endian, dtype)]
    codec = SHORTHAND.get(name or "raw")
    if codec is not None:
        entry: dict[str, Any] = {"name": codec}
        if codec in ("gzip", "zstd"):
            entry["configuration"] = {"level": 6 if codec == "gzip" and level is None
                                      else 3 if level is None else level}
        elif level is not None and codec in ("bz2", "lz4"):
            entry["configuration"] = {"level": level}
        chain.append(entry)
    return chain


def shorthand_names(comp: str) -> list[str]:
    """The codec names ``tile:compression`` stands for, by the docs/format.md#compression-shorthand
    table."""
    codec = SHORTHAND[comp]
    return ["bytes"] if codec is None else ["bytes", codec]


def codec_names(codecs: Sequence[Any]) -> list[Any]:
    """The ``name`` of each entry of a ``tile:codecs`` list (a non-object entry as itself)."""
    return [c.get("name") if isinstance(c, Mapping) else c for c in codecs]


def bytes_codec(endian: str, dtype: np.dtype) -> dict[str, Any]:
    """The ``bytes`` codec for ``dtype`` (``endian`` only for multi-byte numeric types)."""
    if dtype.itemsize > 1 and dtype.kind != "V":
        return {"name": "bytes", "configuration": {"endian": endian}}
    return {"name": "bytes", "configuration": {}}


def resolve_codecs(header: Mapping[str, Any], p: str, pre: str, core: Any, dtype: np.dtype
            ) -> tuple[list[dict[str, Any]], bool]:
    """The tile chain (JSON) and whether gzip in it also accepts zlib (shorthand/encoding)."""
    codecs = header.get(p + "codecs")
    comp = header.get(p + "compression")
    if comp is not None and (not isinstance(comp, str) or comp not in SHORTHAND):
        raise HeaderError(
            f"{pre}{p}compression: expected one of raw, gzip, bzip2, zstd, lz4, found {comp!r}"
        )
    endian = core.endian or "little"
    if codecs is not None:
        if not isinstance(codecs, list) or not codecs:
            raise HeaderError(f"{pre}{p}codecs: expected a non-empty list of codec objects")
        check_codec_objects(codecs, f"{pre}{p}codecs")
        if core.encoding not in (None, "raw"):
            raise HeaderError(f"{pre}encoding: must be 'raw' with {p}codecs, "
                              f"found {core.encoding!r}")
        names = codec_names(codecs)
        for c in codecs:
            if isinstance(c, dict) and c.get("name") == "bytes":
                cfg = c.get("configuration") or {}
                bendian = cfg.get("endian") if isinstance(cfg, dict) else None
                if (bendian is not None and "endian" in header and dtype.itemsize > 1
                        and bendian != header["endian"]):
                    raise HeaderError(
                        f"{pre}endian: {header['endian']!r} disagrees with the bytes codec's "
                        f"endian {bendian!r} in {p}codecs"
                    )
        if comp is not None and names != shorthand_names(comp):
            # docs/format.md#compression-shorthand: with both fields, the chain must be the
            # shorthand's chain
            raise HeaderError(
                f"{pre}{p}compression: {comp!r} stands for the chain {shorthand_names(comp)}, "
                f"which disagrees with {p}codecs {names!r:.200}"
            )
        return [dict(c) for c in codecs], False
    if comp is None and core.encoding in SHORTHAND and core.encoding != "raw":
        warnings.warn(f"{pre}encoding: {core.encoding!r} used as the tile codec "
                      f"(write {p}compression instead)", JnrrdWarning, stacklevel=4)
        comp = core.encoding
    elif comp is not None and core.encoding not in (None, "raw") and (
        SHORTHAND.get(core.encoding) != SHORTHAND[comp]
    ):
        raise HeaderError(
            f"{pre}encoding: {core.encoding!r} disagrees with {p}compression {comp!r}"
        )
    return compression_chain(comp, endian, dtype), True


def check_codec_objects(codecs: list[Any], field: str) -> None:
    """Every entry of a codec list, and of the lists nested in a configuration's ``codecs``
    (``conditional``), is an object with a ``name`` string and an object ``configuration``
    when it has one; else ``HeaderError`` naming the entry (``field`` is its prefix)."""
    stack = [(codecs, field)]
    while stack:
        entries, at = stack.pop()
        for j, c in enumerate(entries):
            if not isinstance(c, dict) or not isinstance(c.get("name"), str):
                raise HeaderError(f"{at}[{j}]: expected a codec object with a 'name' string "
                                  f"(Zarr v3), found {c!r:.80}")
            if "configuration" not in c:
                continue
            conf = c["configuration"]
            if not isinstance(conf, dict):
                raise HeaderError(f"{at}[{j}].configuration: expected an object, found "
                                  f"{conf!r:.80}")
            if isinstance(conf.get("codecs"), list):
                stack.append((conf["codecs"], f"{at}[{j}].configuration.codecs"))
