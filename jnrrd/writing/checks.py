"""What ``jnrrd.write`` checks before its first byte: arguments, tile names, the final header.

The header about to be written is parsed back and put through the reader's own checks
(:func:`jnrrd.api.check_header`), so the writer refuses exactly what its reader would refuse,
with the same ``HeaderError`` naming the field. Tile names go through the reader's path policy
(:func:`jnrrd.storage.local.resolve_path`) plus what a file system can hold.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import HeaderError, JnrrdWarning, SecurityError, where

__all__ = ["check_arguments", "check_final_header", "check_layout_request", "check_tile_names",
           "probe_header"]

#: longest file name component and whole path the writer creates (POSIX NAME_MAX/PATH_MAX)
NAME_MAX = 255
PATH_MAX = 4096
_CHECKSUMS = ("crc32", "crc32c")
_STORAGES = ("internal", "external")
_EDGES = ("pad", "variable")
_TILE_FORMATS = ("contiguous", "chunked")
_DECISIONS = ("compress_if_smaller", "always", "never")


def _choice(name: str, value: Any, allowed: Sequence[str]) -> None:
    """``value`` is None or one of ``allowed`` (TypeError for a non-string)."""
    if value is None:
        return
    if not isinstance(value, str):
        raise TypeError(f"write(): {name} must be a string ({', '.join(map(repr, allowed))}) "
                        f"or None, not {type(value).__name__} {value!r:.80}")
    if value not in allowed:
        raise HeaderError(f"write(): {name}={value!r} is not supported; expected one of "
                               f"{', '.join(map(repr, allowed))}")


def _int_arg(name: str, value: Any, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"write(): {name} must be an integer, not {type(value).__name__} "
                        f"{value!r:.80}")
    if value < lo:
        raise HeaderError(f"write(): {name} must be ≥ {lo}, got {value!r}")
    return int(value)


def _flag(name: str, value: Any) -> None:
    if value is not None and not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"write(): {name} must be True or False, not {type(value).__name__} "
                        f"{value!r:.80}")


def _tile_arg(tile: Any, ndim: int, target: Any) -> None:
    if tile is None:
        return
    if isinstance(tile, Mapping):
        for axis, size in tile.items():
            _int_arg("tile axis", axis, -ndim)
            if axis >= ndim:
                raise HeaderError(f"write(): tile: axis {axis} does not exist (the array "
                                       f"has {ndim} axes)")
            _int_arg(f"tile[{axis}]", size, 1)
        if not tile:
            raise HeaderError("write(): tile: an empty mapping tiles no axis")
        return
    if isinstance(tile, (str, bytes)) or not isinstance(tile, (int, np.integer, Sequence,
                                                               np.ndarray)):
        raise TypeError(f"write(): tile must be an int, a sequence of ints (None: untiled) "
                        f"or a mapping "
                        f"{{axis: size}}, not {type(tile).__name__} {tile!r:.80}")
    if isinstance(tile, (int, np.integer)):
        _int_arg("tile", tile, 1)
        return
    if len(tile) != ndim:
        raise HeaderError(f"{where(target, 'tile')}expected {ndim} entries (one per axis of the "
                          f"{ndim}-D array; None leaves an axis untiled), got {len(tile)}: "
                          f"{list(tile)!r:.80}")
    for k, v in enumerate(tile):
        if v is not None:  # None leaves that axis untiled
            _int_arg(f"tile[{k}]", v, 1)
    if len(tile) and all(v is None for v in tile):
        raise HeaderError("write(): tile: at least one axis must be tiled (None leaves an "
                          "axis untiled)")


def _overlap_arg(ov: Any) -> None:
    if ov is None:
        return
    if isinstance(ov, (int, np.integer)):
        _int_arg("overlap", ov, 0)
        return
    if isinstance(ov, (str, bytes)) or not isinstance(ov, (Sequence, np.ndarray)):
        raise TypeError(f"write(): overlap must be an int or a sequence of ints, not "
                        f"{type(ov).__name__} {ov!r:.80}")
    for k, v in enumerate(ov):
        _int_arg(f"overlap[{k}]", v, 0)


def check_arguments(header: Mapping[Any, Any] | None, ndim: int, *, encoding: Any,
                    tile: Any, compression: Any, codecs: Any, downsample: Any,
                    detached: Any, options: Mapping[str, Any], target: Any = None) -> None:
    """Every keyword of ``write`` with an enumerated or typed value, before anything is done.

    A wrongly typed argument is a ``TypeError``, an unknown value a ``HeaderError``;
    both name the argument (a ``tile`` of the wrong length also names ``target``).
    """
    from ..header.fields import ENCODINGS
    from ..pyramid.methods import METHODS
    from ..tiling.codec_fields import SHORTHAND

    if header is not None:
        if not isinstance(header, Mapping):
            raise TypeError(f"write(): header must be a mapping of fields, not "
                            f"{type(header).__name__}")
        bad = [k for k in header if not isinstance(k, str)]
        if bad:
            raise HeaderError(f"header: field names must be strings, found {bad[0]!r}")
        ext = header.get("extensions")
        if ext is not None and not isinstance(ext, Mapping):  # as the reader says it
            raise HeaderError(f"extensions: expected an object mapping prefixes to URIs, "
                              f"found {type(ext).__name__}")
    _choice("encoding", encoding, list(ENCODINGS))
    _choice("compression", compression, list(SHORTHAND))
    _choice("downsample", downsample, METHODS)
    _choice("storage", options.get("storage"), _STORAGES)
    _choice("edge", options.get("edge"), _EDGES)
    _choice("tile_format", options.get("tile_format"), _TILE_FORMATS)
    checksum = options.get("checksum")
    if checksum is not False:
        _choice("checksum", checksum, _CHECKSUMS)
    decision = options.get("decision")
    if decision is not None and not callable(decision):
        if isinstance(decision, (int, np.integer)) and not isinstance(decision, bool):
            _int_arg("decision", decision, 0)  # a mask of enabled conditional codecs
        else:
            _choice("decision", decision, _DECISIONS)
    if codecs is not None and (isinstance(codecs, (str, bytes, Mapping))
                               or not isinstance(codecs, Sequence)):
        raise TypeError(f"write(): codecs must be a list of codec objects or Zarr v3 JSON "
                        f"objects, not {type(codecs).__name__} {codecs!r:.80}")
    for name in ("sparse", "tile_stats", "quality"):
        _flag(name, options.get(name))
    _flag("detached", detached)
    if options.get("align") is not None:
        _int_arg("align", options["align"], 0)
    if options.get("compression_level") is not None:
        _int_arg("compression_level", options["compression_level"], -(2**31))
    pattern = options.get("pattern")
    if pattern is not None and not isinstance(pattern, str):
        raise TypeError(f"write(): pattern must be a string, not {type(pattern).__name__}")
    _tile_arg(tile, ndim, target)
    _overlap_arg(options.get("overlap"))


def check_layout_request(p: str, scales: Sequence[tuple[int, ...]], storage: Any,
                         options: Mapping[str, Any], header: Mapping[str, Any]) -> None:
    """What the tiled layout would not carry is an error, never dropped: a level 0 that is
    not full resolution (docs/format.md#levels-pyramids), a pattern for tiles stored inside the
    file."""
    if any(s != 1 for s in scales[0]):
        raise HeaderError(f"{p}level_scales: level 0 must have scale 1, found "
                          f"{list(scales[0])}")
    asked = options.get("pattern") is not None or (
        options.get("storage") is None and header.get(p + "pattern") is not None)
    if storage != "external" and asked:
        raise HeaderError(f"{p}pattern: names external tile files; pass storage='external' "
                          f"(or {p}storage: external) with it")


def probe_header(plan: Any, build: Callable[..., bytes], target: str) -> bytes:
    """The header ``build`` would write, with placeholder tables (every tile present)."""
    n = plan.nstored
    base_dir = None
    if plan.storage == "external":
        from ..storage import stem

        base_dir = f"{stem(target)}.00000000.tiles"
    offsets = [0] * n if plan.storage == "internal" else []
    return build(plan, [1] * n, offsets, [], base_dir, None)


def check_final_header(head: bytes, source: Any = None) -> None:
    """Parse ``head`` back and run the reader's checks on it (``HeaderError`` naming the
    field). The reader's warnings are not repeated here: the file will give them on read."""
    from ..api import check_header
    from ..header import parse_header_bytes
    from ..policy import Policy

    policy = Policy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JnrrdWarning)
        header, _ = parse_header_bytes(head, policy=policy, source=source)
        check_header(header, policy=policy, source=source)


def check_codec_chain(plan: Any, chain_dtype: np.dtype) -> None:
    """Build the tile codec chain once, so a bad codec fails before any file is created."""
    from ..engine.tiles import TileEncoder

    lv = plan.levels[0]
    TileEncoder(plan, chain_dtype).chain(lv.grid.stored_shape((0,) * len(lv.grid.axes)))


def check_tile_names(pattern: str, plan: Any, target: str) -> None:
    """External tile names: the reader's path policy, and names a file system can hold.

    Placeholders expand to decimal integers only, so the first and the last tile of each
    stored level stand for all of them.
    """
    from ..policy import Policy
    from ..storage import resolve_path, stem
    from ..tiling.locate import check_pattern, expand_pattern

    field = f"{plan.prefix}:pattern"
    check_pattern(pattern, plan.axes, plan.levels, None, field=field)
    here = os.path.dirname(os.path.abspath(target))
    root = os.path.join(here, f"{stem(target)}.00000000.tiles")
    policy = Policy()
    for lv in plan.levels:
        if not lv.stored:
            continue
        last = tuple(g - 1 for g in lv.grid.grid)
        for coords in ((0,) * len(last), last):
            name = expand_pattern(pattern, coords, lv.index, lv.grid.index(coords))
            try:
                resolve_path(root, name, policy, source=None, field=field)
            except SecurityError as exc:
                raise SecurityError(f"{exc} (tiles are written under the dataset's "
                                    "directory)") from None
            _fits_file_system(name, root, field, pattern)


def _fits_file_system(name: str, root: str, field: str, pattern: str) -> None:
    parts = name.replace("\\", "/").split("/")
    if parts[-1] in ("", ".", ".."):
        raise HeaderError(f"{field}: {pattern!r} must end in a file name (not '/', '.' or "
                          "'..')")
    for part in parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise HeaderError(f"{field}: the component {part[:40]!r}... of {pattern!r} is "
                              f"longer than {NAME_MAX} bytes")
    total = len(os.fsencode(os.path.join(root, name)))
    if total > PATH_MAX:
        raise HeaderError(f"{field}: tile paths from {pattern!r} are {total} bytes long, over "
                          f"{PATH_MAX}")
