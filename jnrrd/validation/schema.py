"""Header checks against the bundled JSON Schemas (docs/format.md#extension-prefixes,
docs/validation.md#what-is-checked).

The core fields are validated against ``jnrrd.schema.json``. Each declared extension is
validated with its prefix stripped (docs/format.md#extension-prefixes: "collect a prefix's fields,
strip the prefix, and validate against the schema at the URI"), but only against a bundled schema:
URIs are never fetched. The tiling extension is recognised by its URI
``https://jnrrd.org/extensions/tile/...``; an extension without a bundled schema is a note.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..header.geometry_fields import KIND_SIZES, SPACES
from ..schemas import validator
from .report import Report, pointer

__all__ = ["BUNDLED_EXTENSIONS", "check_core_schema", "check_extension_schema", "lenient_view"]

#: extension URI prefix -> bundled schema name
BUNDLED_EXTENSIONS: dict[str, str] = {
    "https://jnrrd.org/extensions/tile/": "tile.schema.json",
    # docs/clinical.md: label maps and what DICOM and NIfTI sources keep
    "https://jnrrd.org/extensions/label/": "label.schema.json",
    "https://jnrrd.org/extensions/dicom/": "dicom.schema.json",
    "https://jnrrd.org/extensions/nifti/": "nifti.schema.json",
}

_SPACE_LOOKUP: dict[str, str] = {
    **{name.lower(): name for name in SPACES},
    **{a.lower(): a for a in ("RAS", "LAS", "LPS", "RAST", "LAST", "LPST")},
}


def lenient_view(header: Mapping[str, Any]) -> dict[str, Any]:
    """The core fields with the spellings the reader accepts silently made canonical.

    docs/format.md#core-fields, #encodings: encodings and spaces match case-insensitively (``-`` as
    ``_``), kinds are lower-cased with ``-`` as ``_``, centers lower-cased; NRRD type names may
    carry extra blanks. The schema then checks the canonical forms only.
    """
    view = dict(header)
    enc = view.get("encoding")
    if isinstance(enc, str):
        view["encoding"] = enc.lower()
    space = view.get("space")
    if isinstance(space, str):
        view["space"] = _SPACE_LOOKUP.get(space.lower().replace("-", "_"), space)
    t = view.get("type")
    if isinstance(t, str):
        view["type"] = " ".join(t.split())
    for key, norm in (("kinds", _kind), ("centers", _center)):
        v = view.get(key)
        if isinstance(v, list):
            view[key] = [norm(x) if isinstance(x, str) else x for x in v]
    return view


def _kind(v: str) -> str:
    k = v.lower().replace("-", "_")
    return k if k in KIND_SIZES or k in ("???", "none") else v


def _center(v: str) -> str:
    return v.lower() if v.lower() in ("cell", "node", "???", "none") else v


def check_core_schema(header: Mapping[str, Any], report: Report) -> None:
    """Every core field against ``jnrrd.schema.json`` (all violations, not the first)."""
    core = {k: v for k, v in lenient_view(header).items() if ":" not in k}
    _report_errors(validator("jnrrd.schema.json"), core, report, "")


#: per-tile tables and per-level lists (tiling schema): entry test -> checked in bulk, since a
#: schema validator walking a million-entry list item by item takes minutes
_TABLES: dict[str, Any] = {
    "offset_table": lambda x: x is None or (type(x) is int and x >= 0),
    "size_table": lambda x: x is None or (type(x) is int and x >= 1),
    "level_offsets": lambda x: x is None or (type(x) is int and x >= 0),
    "compression_levels": lambda x: x is None or type(x) is int,
    "metadata": lambda x: x is None or isinstance(x, dict),
    # per-level lists: a 20-byte-per-level header claims a million levels
    "level_scales": lambda x: (type(x) is int and x >= 1) or (
        type(x) is list and all(type(s) is int and s >= 1 for s in x)),
    "levels_virtual": lambda x: type(x) is int and x >= 0,
    "level_quality": lambda x: x is None or isinstance(x, dict),
}
_BULK = 64  # tables longer than this are checked in bulk


def check_extension_schema(header: Mapping[str, Any], prefix: str, schema: str,
                           report: Report) -> None:
    """The fields of ``prefix`` (prefix stripped) against the bundled ``schema``."""
    start = prefix + ":"
    fields = {k[len(start):]: v for k, v in header.items() if k.startswith(start)}
    remap: dict[str, list[int]] = {}
    if schema == "tile.schema.json":
        for name, ok in _TABLES.items():
            table = fields.get(name)
            if isinstance(table, list) and len(table) > _BULK:
                # Validate one good representative plus the entries failing the bulk test,
                # and map their positions back to the full table.
                bad = [i for i, x in enumerate(table) if not ok(x)]
                bad_set = set(bad)
                good = next((i for i in range(len(table)) if i not in bad_set), None)
                keep = ([] if good is None else [good]) + bad
                remap[name] = keep
                fields[name] = [table[i] for i in keep]
    _report_errors(validator(schema), fields, report, start, remap)


def _report_errors(v: Any, instance: dict[str, Any], report: Report, prefix: str,
                   remap: dict[str, list[int]] | None = None) -> None:
    errors = sorted(v.iter_errors(instance), key=lambda e: (list(map(str, e.absolute_path)),
                                                            e.validator))
    for e in errors:
        path = list(e.absolute_path)
        if not path:
            _root_error(e, instance, report, prefix)
            continue
        if remap and str(path[0]) in remap and len(path) > 1 and isinstance(path[1], int):
            path[1] = remap[str(path[0])][path[1]]
        key = prefix + str(path[0])
        field = pointer(key, *path[1:])
        report.error(field, f"{_describe(e)} (schema)", e.instance, _expected(e))


def _root_error(e: Any, instance: dict[str, Any], report: Report, prefix: str) -> None:
    if e.validator == "required":
        for name in e.validator_value:
            if name not in instance:
                report.error(prefix + name, "required field is missing (schema)", None,
                             "present")
        return
    if e.validator == "not":  # core: more than one data_file* field
        given = [k for k in ("data_file", "data_files", "data_file_pattern") if k in instance]
        report.error(given[-1] if given else "", "at most one of data_file, data_files, "
                     "data_file_pattern may be given (schema)", given, "one of them")
        return
    if e.validator == "anyOf":  # e.g. external storage: pattern or files
        names = [n for sub in e.context or [] if sub.validator == "required"
                 for n in sub.validator_value if n not in instance]
        if names:
            report.error(prefix + names[0], "one of " + " or ".join(prefix + n for n in names)
                         + " is required here (schema)", None, [prefix + n for n in names])
            return
    report.error(prefix.rstrip(":"), f"{e.message} (schema)", None, None)


def _describe(e: Any) -> str:
    v = e.validator
    if v == "type":
        want = e.validator_value
        want = " or ".join(want) if isinstance(want, list) else want
        return f"expected {want}, found {type(e.instance).__name__}"
    if v == "enum":
        return f"{e.instance!r:.80} is not one of the allowed values"
    if v == "const":
        return f"expected {e.validator_value!r}, found {e.instance!r:.80}"
    if v in ("minimum", "maximum"):
        rel = ">=" if v == "minimum" else "<="
        return f"expected a value {rel} {e.validator_value}, found {e.instance!r}"
    if v in ("minItems", "maxItems"):
        rel = "at least" if v == "minItems" else "at most"
        return f"expected {rel} {e.validator_value} entries, found {len(e.instance)}"
    if v == "uniqueItems":
        return "entries must be distinct"
    if v == "anyOf":
        return f"{e.instance!r:.80} matches none of the allowed forms"
    return e.message


def _expected(e: Any) -> Any:
    v, want = e.validator, e.validator_value
    if v in ("type", "enum", "const"):
        return want
    if v == "minimum":
        return f">= {want}"
    if v == "maximum":
        return f"<= {want}"
    if v == "minItems":
        return f"at least {want} entries"
    if v == "maxItems":
        return f"at most {want} entries"
    if v == "uniqueItems":
        return "distinct entries"
    return None
