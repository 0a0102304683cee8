"""The :class:`Header` mapping and how header lines become one
(docs/format.md#duplicates-and-unknown-fields, docs/api.md#header)."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import HeaderError, JnrrdWarning, where
from ..policy import Policy
from .paths import Assignment, apply_assignments, parse_path
from .wire import MAGIC_KEY, MAX_NESTING, VERSION, Entry, nesting_depth

__all__ = [
    "CORE_FIELDS",
    "DATA_FILE_FIELDS",
    "TILE_FIELDS",
    "TILE_URI",
    "TILE_URI_PREFIX",
    "Header",
    "build_header",
    "split_key",
]

#: every core field of docs/format.md#core-fields, in the writer's canonical order
#: (docs/format.md#header-line-order)
CORE_FIELDS: tuple[str, ...] = (
    "jnrrd",
    "type",
    "dimension",
    "sizes",
    "endian",
    "encoding",
    "block_size",
    "content",
    "space",
    "space_dimension",
    "space_units",
    "space_origin",
    "space_directions",
    "measurement_frame",
    "spacings",
    "thicknesses",
    "axis_mins",
    "axis_maxs",
    "centers",
    "kinds",
    "labels",
    "units",
    "min",
    "max",
    "old_min",
    "old_max",
    "sample_units",
    "line_skip",
    "byte_skip",
    "data_file",
    "data_files",
    "data_file_pattern",
    "extensions",
)
DATA_FILE_FIELDS: tuple[str, ...] = ("data_file", "data_files", "data_file_pattern")

#: tiling fields (without prefix) in the order of docs/format.md#header-line-order, ``codecs`` after
#: ``compression`` (docs/format.md#codec-chain); the writer emits a tile prefix's fields in this
#: order
TILE_FIELDS: tuple[str, ...] = (
    "enabled",
    "dimensions",
    "sizes",
    "storage",
    "format",
    "offset_table",
    "size_table",
    "pattern",
    "files",
    "base_dir",
    "edge_handling",
    "padding_value",
    "overlap",
    "compression",
    "codecs",
    "compression_levels",
    "levels",
    "level_scales",
    "level_offsets",
    "level_tile_sizes",
    "levels_stored",
    "levels_virtual",
    "downsample_method",
    "level_quality",
    "metadata",
    "data_pattern",
    "zarr_compatible",
    "header_room",
    "header_checksum",
)
TILE_URI_PREFIX = "https://jnrrd.org/extensions/tile/"
TILE_URI = TILE_URI_PREFIX + "v1.0.0"
#: the label-map extension (``label:map``, ``label:segments``; docs/clinical.md#label-maps)
LABEL_URI_PREFIX = "https://jnrrd.org/extensions/label/"
LABEL_URI = LABEL_URI_PREFIX + "v1.0.0"

_CORE = frozenset(CORE_FIELDS)


def split_key(key: str) -> tuple[str, str] | None:
    """``(prefix, path)`` for a namespaced key (the text before the first ``:``), else None."""
    prefix, colon, path = key.partition(":")
    return (prefix, path) if colon else None


class Header(dict[str, Any]):
    """A JNRRD header: each core field mapped to its value (docs/api.md#header).

    Extension fields live under their top-level key ``"prefix:root"``, with hierarchical paths
    merged into it (``h["meta:creator"]["name"]``); ``h["extensions"]`` holds the declarations
    (prefix -> URI). Unknown fields are kept verbatim so they survive a round trip.
    """

    __slots__ = ()

    def copy(self) -> Header:
        """A shallow copy that is still a :class:`Header` (nested values are shared)."""
        return Header(self)

    def __repr__(self) -> str:
        return f"Header({dict.__repr__(self)})"

    def declarations(self) -> dict[str, str]:
        """The declared extension prefixes (``extensions`` field), prefix -> URI."""
        ext = self.get("extensions")
        return dict(ext) if isinstance(ext, Mapping) else {}

    def prefixes(self) -> list[str]:
        """The prefixes used by extension keys, in first-use order."""
        return list(dict.fromkeys(p[0] for p in map(split_key, self) if p is not None))

    def fields_of(self, prefix: str) -> dict[str, Any]:
        """The fields of one prefix, keyed by their name without ``prefix:``."""
        start = prefix + ":"
        return {k[len(start) :]: v for k, v in self.items() if k.startswith(start)}

    def prefix_for(self, uri_prefix: str) -> str | None:
        """The first prefix whose declared URI starts with ``uri_prefix``, or ``None``."""
        return find_prefix(self, uri_prefix)

    def tile_prefix(self) -> str:
        """The tiling extension's prefix (docs/format.md#extension-prefixes).

        The prefix declared with a URI starting with ``https://jnrrd.org/extensions/tile/``;
        without such a declaration, the literal ``tile`` (warns when ``tile:`` keys exist).
        """
        found = find_prefix(self, TILE_URI_PREFIX)
        if found is not None:
            return found
        if any(k.startswith("tile:") for k in self):
            warnings.warn(
                "tile: fields without a declaration of the tiling extension "
                f"({TILE_URI_PREFIX}...); reading them as the tiling extension",
                JnrrdWarning,
                stacklevel=2,
            )
        return "tile"


def find_prefix(header: Mapping[str, Any], uri_prefix: str) -> str | None:
    """The first prefix in ``header["extensions"]`` whose URI starts with ``uri_prefix``."""
    ext = header.get("extensions")
    if isinstance(ext, Mapping):
        for prefix, uri in ext.items():
            if isinstance(uri, str) and uri.startswith(uri_prefix):
                return str(prefix)
    return None


def build_header(entries: Iterable[Entry], policy: Policy, source: Any = None) -> Header:
    """Turn header lines into a :class:`Header` (docs/format.md#duplicates-and-unknown-fields,
    #hierarchical-extension-paths).

    Duplicate core fields raise ``HeaderError`` (the last wins with a warning under
    ``policy.allow_duplicates``); ``extensions`` lines are shallow-merged, later lines winning
    per prefix; unknown core fields and undeclared prefixes warn; no declaration is invented.
    """
    header = Header({MAGIC_KEY: VERSION})
    lines: dict[str, int] = {MAGIC_KEY: 1}
    assignments: list[Assignment] = []
    declared: dict[str, str] | None = None
    for e in entries:
        key, value = e.key, e.value
        parts = split_key(key)
        if parts is not None:
            prefix, path = parts
            components = parse_path(path)
            if components is None:
                warnings.warn(
                    f"{where(source, key)}line {e.lineno}: {path!r} is not a valid extension "
                    "path; kept as a literal key",
                    JnrrdWarning,
                    stacklevel=3,
                )
                components = [path]
            if len(components) > 1 and len(components) + nesting_depth(
                    value, MAX_NESTING) > MAX_NESTING + 1:
                raise HeaderError(
                    f"{where(source, key[:80])}line {e.lineno}: JSON nested too deeply (an "
                    f"extension path of {len(components)} components and its value nest more "
                    f"than {MAX_NESTING} levels)"
                )
            assignments.append(Assignment(key, prefix, tuple(components), value, e.lineno))
            continue
        if key == "extensions":
            declared = _merge_extensions(declared, value, e, source)
            header["extensions"] = declared
            continue
        if key in lines:
            if key == MAGIC_KEY or not policy.allow_duplicates:
                raise HeaderError(
                    f"{where(source, key)}field repeated on line {e.lineno} (first on line "
                    f"{lines[key]}); expected each core field once"
                    + ("" if key == MAGIC_KEY else " (allow_duplicates=True lets the last win)")
                )
            warnings.warn(
                f"{where(source, key)}field repeated on line {e.lineno}; the last value wins",
                JnrrdWarning,
                stacklevel=3,
            )
        elif key not in _CORE:
            # docs/format.md#duplicates-and-unknown-fields: kept for round-tripping; NRRD spellings
            # are not aliases.
            warnings.warn(
                f"{where(source, key)}unknown field on line {e.lineno}; kept verbatim",
                JnrrdWarning,
                stacklevel=3,
            )
        lines[key] = e.lineno
        header[key] = value
    apply_assignments(header, assignments, max_pad=policy.max_pad, source=source)
    known = declared or {}
    for prefix in dict.fromkeys(a.prefix for a in assignments):
        if prefix not in known:
            warnings.warn(
                f"{where(source)}extension prefix {prefix!r} is used but not declared in "
                "'extensions'",
                JnrrdWarning,
                stacklevel=3,
            )
    return header


def _merge_extensions(
    declared: dict[str, str] | None, value: Any, e: Entry, source: Any
) -> dict[str, str]:
    if not isinstance(value, dict):
        raise HeaderError(
            f"{where(source, 'extensions')}line {e.lineno}: expected an object mapping "
            f"prefixes to URIs, found {type(value).__name__}"
        )
    for prefix, uri in value.items():
        if not isinstance(uri, str):
            raise HeaderError(
                f"{where(source, 'extensions')}line {e.lineno}: prefix {prefix!r}: expected a "
                f"URI string, found {uri!r}"
            )
    merged = dict(declared or {})
    # docs/format.md#extension-prefixes: shallow merge, later lines win per prefix
    merged.update(value)
    return merged
