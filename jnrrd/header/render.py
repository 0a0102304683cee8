"""The header writer: canonical line order, one single-key JSON object per line
(docs/format.md#header-line-order)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import numpy as np

from ..errors import HeaderError, where
from .model import (
    CORE_FIELDS,
    DATA_FILE_FIELDS,
    LABEL_URI,
    LABEL_URI_PREFIX,
    TILE_FIELDS,
    TILE_URI,
    TILE_URI_PREFIX,
    find_prefix,
    split_key,
)
from .wire import MAGIC_KEY, VERSION

__all__ = ["UNDECLARED_URI", "render_header"]

#: URI written for a prefix that is used but was never declared (see :func:`render_header`)
UNDECLARED_URI = "urn:jnrrd:undeclared:{prefix}"

_ORDERED_CORE = tuple(
    f for f in CORE_FIELDS if f not in (MAGIC_KEY, "extensions", *DATA_FILE_FIELDS)
)
_TILE_RANK = {name: i for i, name in enumerate(TILE_FIELDS)}


def render_header(header: Mapping[str, Any], *, source: Any = None) -> bytes:
    """Render ``header`` as JNRRD header bytes, ending with the blank line.

    Line order (docs/format.md#header-line-order): the magic ``{"jnrrd": "0004"}`` (always first,
    whatever the mapping holds under ``jnrrd``), ``type``, ``dimension``, ``sizes``, ``endian``,
    ``encoding``, ``block_size``, the other known core fields in canonical order, unknown
    unprefixed fields in mapping order, the ``data_file*`` field, ``extensions``, then the
    extension fields grouped by prefix in declaration order (the tiling prefix's fields in
    the order of docs/format.md#header-line-order). Values are written as given; nothing is
    validated beyond what JSON can hold (use :func:`core_fields` for that).

    Each line is ``json.dumps({key: value}, ensure_ascii=False, allow_nan=False)``; NaN is
    written as ``null`` and ±infinity as the ``Infinity``/``-Infinity`` tokens
    (docs/format.md#lines-and-json-tokens). NumPy arrays and scalars are written as JSON lists and
    numbers.

    Every prefix that is written is declared on the ``extensions`` line, which precedes all
    prefixed lines (docs/format.md#extension-prefixes). A prefix that is used but not declared is
    declared as:

    * ``tile`` -> ``https://jnrrd.org/extensions/tile/v1.0.0`` when no other prefix is
      declared with the tiling URI (a header built with literal ``tile:`` keys means the
      tiling extension, as the reader assumes, docs/format.md#extension-prefixes);
    * ``label`` -> ``https://jnrrd.org/extensions/label/v1.0.0`` (the label-map marker)
      when no other prefix is declared with that URI;
    * any other prefix ``p`` -> ``urn:jnrrd:undeclared:p`` (``p`` percent-encoded): a URN that
      names no schema, so the file stays honest about not knowing what the prefix means and
      no reader will try to fetch or validate against it. Declarations that are given but
      unused are kept.
    """
    core: list[str] = []
    unknown: list[str] = []
    data_file: list[str] = []
    by_prefix: dict[str, list[str]] = {}
    for key in header:
        if not isinstance(key, str):
            raise HeaderError(f"{where(source)}header keys must be strings, found {key!r}")
        parts = split_key(key)
        if parts is not None:
            by_prefix.setdefault(parts[0], []).append(key)
        elif key in DATA_FILE_FIELDS:
            data_file.append(key)
        elif key in (MAGIC_KEY, "extensions"):
            continue
        elif key in _ORDERED_CORE:
            core.append(key)
        else:
            unknown.append(key)
    core.sort(key=_ORDERED_CORE.index)
    data_file.sort(key=DATA_FILE_FIELDS.index)

    declared = _declarations(header, source)
    tile = find_prefix({"extensions": declared}, TILE_URI_PREFIX)
    for prefix in by_prefix:
        if prefix not in declared:
            if prefix == "tile" and tile is None:
                declared[prefix] = TILE_URI
                tile = prefix
            elif prefix == "label" and find_prefix({"extensions": declared},
                                                   LABEL_URI_PREFIX) is None:
                declared[prefix] = LABEL_URI
            else:
                declared[prefix] = UNDECLARED_URI.format(prefix=quote(prefix, safe=""))

    out = [_line(MAGIC_KEY, VERSION, source)]
    out.extend(_line(k, header[k], source) for k in (*core, *unknown, *data_file))
    if declared or "extensions" in header:
        out.append(_line("extensions", declared, source))
    for prefix in declared:
        keys = by_prefix.get(prefix, [])
        if prefix == tile:
            start = len(prefix) + 1
            keys.sort(key=lambda k: _TILE_RANK.get(k[start:], len(_TILE_RANK)))
        out.extend(_line(k, header[k], source) for k in keys)
    # the blank line that always ends the header (docs/format.md#where-the-header-ends)
    out.append(b"")
    return b"\n".join(out) + b"\n"


def _declarations(header: Mapping[str, Any], source: Any) -> dict[str, str]:
    ext = header.get("extensions")
    if ext is None:
        return {}
    if not isinstance(ext, Mapping) or not all(
        isinstance(p, str) and isinstance(u, str) for p, u in ext.items()
    ):
        raise HeaderError(
            f"{where(source, 'extensions')}expected an object mapping prefix strings to URI "
            f"strings, found {ext!r}"
        )
    return dict(ext)


def _line(key: str, value: Any, source: Any) -> bytes:
    """One header line; fast path straight through ``json`` (no per-element Python work)."""
    try:
        text = json.dumps({key: value}, ensure_ascii=False, allow_nan=False, default=_numpy)
    except (ValueError, RecursionError):
        # Non-finite floats (or a failure we report below): NaN -> null, keep ±Infinity.
        try:
            text = json.dumps(
                {key: _finite(value)}, ensure_ascii=False, allow_nan=True, default=_numpy
            )
        except (ValueError, RecursionError, TypeError) as exc:
            raise _unwritable(key, exc, source) from None
    except TypeError as exc:
        raise _unwritable(key, exc, source) from None
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates (read from "\ud800" escapes) survive only as escapes.
        return json.dumps({key: _finite(value)}, ensure_ascii=True, default=_numpy).encode()


def _unwritable(key: str, exc: BaseException, source: Any) -> HeaderError:
    return HeaderError(f"{where(source, key)}value cannot be written as JSON: {exc}")


def _numpy(value: Any) -> Any:
    """``json`` hook: NumPy arrays become lists, NumPy scalars Python numbers."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _finite(value: Any) -> Any:
    """A copy of ``value`` with every NaN replaced by ``None`` (±infinity kept)."""
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if isinstance(value, np.ndarray | np.generic):
        return _finite(value.tolist())
    return value
