"""``jnrrd.validation.validate`` (also ``jnrrd.validate``): every problem of a header or file.

A header is checked in layers, each collecting all it finds (docs/api.md#validation):

1. the wire format (magic, line rules, duplicate core fields: docs/format.md#the-header);
2. the bundled JSON Schemas, core fields and each declared extension with its prefix
   stripped (docs/format.md#extension-prefixes, docs/validation.md#what-is-checked); an extension
   without a bundled schema is a note;
3. cross-field rules a schema cannot state (:mod:`jnrrd.validation.core`,
   :mod:`jnrrd.validation.tiling`): lengths against ``dimension`` and the space dimension,
   tile tables against the tile count of each stored level, codecs against
   ``tile:compression``, pattern placeholders, levels and scales, files present;
4. the reader's own field checks, so that anything the reader would refuse and the layers
   above missed is still an error, and everything it warns about is a warning;
5. with ``deep=True``, every stored tile is read, checksummed and decoded
   (:mod:`jnrrd.validation.deep`).

A file is valid when no problem has severity ``"error"``.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import IO, Any, TextIO, Unpack

from .._config import settings_for
from ..errors import (
    FormatError,
    HeaderError,
    JnrrdError,
    ValidationError,
    VersionError,
    describe_source,
)
from ..header import check_header_end
from ..header.model import CORE_FIELDS, TILE_FIELDS, TILE_URI_PREFIX, build_header, find_prefix
from ..header.wire import MAX_NESTING, nesting_depth, read_entries
from ..policy import IOSettings, Policy, PolicyOptions
from ..storage import Store, is_remote, local_path, opened
from .core import check_core, check_data
from .deep import check_tiles
from .report import Problem, Report, top_field
from .schema import BUNDLED_EXTENSIONS, check_core_schema, check_extension_schema
from .tiling import check_tiling
from .tiling_base import FileInfo

__all__ = ["Problem", "run_validate", "validate"]

_NRRD_MAGIC = b"NRRD000"


def validate(
    source_or_header: Any,
    *,
    deep: bool = False,
    strict: bool = False,
    progress: Callable[[int, int], None] | None = None,
    storage_options: dict[str, Any] | None = None,
    threads: int | None = None,
    policy: Policy | None = None,
    io: IOSettings | None = None,
    **policy_options: Unpack[PolicyOptions],
) -> list[Problem]:
    """Check a JNRRD file or header and return every problem found (docs/api.md#validation).

    ``source_or_header`` is a path, an fsspec URL (``s3://``, ``https://``, ...;
    ``storage_options`` go to fsspec unchanged: detached data and tile files are checked
    next to the header's URL), a binary file object (read from its start, not closed)
    or a header mapping (a :class:`~jnrrd.Header`; file-dependent checks are then skipped).
    ``deep=True`` also reads and decodes every stored tile (checksums, sizes), calling
    ``progress(done, total)`` as tiles are checked, on up to ``threads`` threads.
    ``policy``/``io`` and the policy keywords (caps, path rules): as for
    :func:`jnrrd.open`. With ``strict=True`` a ``ValidationError`` carrying the
    problems is raised when any problem is an error. Unreadable paths raise ``OSError``.
    """
    pol = settings_for("jnrrd.validate()", policy=policy, io=io, options=policy_options,
                       threads=threads)
    report = Report()
    name: Any = None
    if isinstance(source_or_header, Mapping):
        if _check_mapping(source_or_header, report):
            _check_header(source_or_header, pol, report, FileInfo())
        if deep:
            report.note("", "deep checks need a file: only the header was checked")
    else:
        name = describe_source(source_or_header) or None
        with opened(source_or_header, pol, storage_options) as src:
            again = (src.name, storage_options) if src.remote else None
            _check_file(_committed(src, pol, report), src.store, pol, report, deep, progress,
                        again)
    problems = report.finish()
    if strict:
        errors = [p for p in problems if p.severity == "error"]
        if errors:
            prefix = f"{name}: " if name else ""
            raise ValidationError(
                f"{prefix}{len(errors)} error(s); first: {errors[0].field or '(file)'}: "
                f"{errors[0].message}",
                problems,
            )
    return problems


def _committed(src: Any, pol: Policy, report: Report) -> IO[bytes]:
    """The stream of a local file with its header checked against an in-place commit in
    progress or interrupted (docs/editing.md); a damaged one is reported and read as is."""
    if src.remote or src.path is None or not src.owned:
        return src.stream
    from ..editing.consistent import consistent_stream

    try:
        src.stream = consistent_stream(src.stream, src.path, pol.max_header_bytes)
    except JnrrdError as exc:
        report.error("", str(exc))
    return src.stream


def _file_size(f: IO[bytes]) -> int | None:
    try:
        return os.fstat(f.fileno()).st_size
    except (AttributeError, OSError, ValueError):
        pass
    try:
        pos = f.tell()
        end = f.seek(0, os.SEEK_END)
        f.seek(pos)
        return end
    except (AttributeError, OSError, ValueError):
        return None


def _check_file(f: IO[bytes], store: Store | None, pol: Policy, report: Report,
                deep: bool, progress: Callable[[int, int], None] | None,
                again: tuple[str, dict[str, Any] | None] | None = None) -> None:
    """Check an opened file; ``store`` holds the header's directory (local or remote),
    ``again`` the URL and ``storage_options`` of a remote source (read again for deep checks
    of untiled data)."""
    head = f.read(8)
    try:
        f.seek(0)
    except (AttributeError, OSError):
        report.error("", "the file object cannot seek: validation needs a seekable file")
        return
    size = _file_size(f)
    if head.startswith(_NRRD_MAGIC):
        _check_nrrd(f, store, pol, report, deep, progress, size, again)
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            entries, data_start = read_entries(f, pol, None)
        except (FormatError, VersionError) as exc:
            report.error("jnrrd", str(exc), head.decode("latin-1"), '{"jnrrd": "0004"}')
            return
        except JnrrdError as exc:
            report.error(_field_of(str(exc), ()), str(exc))
            return
    dup = _duplicates(entries, pol, report)
    lenient = Policy.from_kwargs(pol, allow_duplicates=True)
    with warnings.catch_warnings(record=True) as more:
        warnings.simplefilter("always")
        try:
            header = build_header(entries, lenient, None)
        except JnrrdError as exc:
            report.error(_field_of(str(exc), [e.key for e in entries]), str(exc))
            return
    if _truncated(header, data_start, report):
        return
    for w in [*caught, *more]:
        text = str(w.message)
        if dup and "field repeated" in text:
            continue  # reported above
        report.warning(_field_of(text, header), text)
    info = FileInfo(data_start=data_start, file_size=size, store=store)
    tiling, core = _check_header(header, pol, report, info)
    if not deep:
        return
    if tiling is not None and core is not None:
        check_tiles(tiling, core, f, size, store, pol, report, progress,
                    data_start=data_start)
    elif core is not None and not report.has_error():
        _deep_untiled(f, pol, report, progress, again)
    else:
        report.note("", "deep checks skipped: the header has errors")


def _truncated(header: Any, data_start: int | None, report: Report) -> bool:
    """Whether the file was cut inside its header, as reading it says
    (docs/format.md#where-the-header-ends): then that is the one problem reported, not what
    the cut header lacks (missing tile tables, tile ranges past the end)."""
    try:
        check_header_end(header, data_start)
    except HeaderError as exc:
        report.error("", str(exc), None, "a blank line ending the header")
        return True
    return False


def _check_nrrd(f: IO[bytes], store: Store | None, pol: Policy, report: Report, deep: bool,
                progress: Callable[[int, int], None] | None, size: int | None,
                again: tuple[str, dict[str, Any] | None] | None = None) -> None:
    """A classic NRRD file, as ``read``/``open`` take it: the NRRD reader's errors and
    warnings, the data's presence and length, and with ``deep`` the data decoded."""
    from ..header import core_fields
    from ..nrrd.reader import read_nrrd_header

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            header, data_start = read_nrrd_header(f, policy=pol)
            core = core_fields(header, nrrd=True)
        except JnrrdError as exc:
            report.error(*_field_and_text(_unnamed(str(exc), f), ()))
            return
    for w in caught:
        report.warning(*_field_and_text(_unnamed(str(w.message), f), header))
    check_data(core, store, data_start, size, pol, report)
    if deep:
        if report.has_error():
            report.note("", "deep checks skipped: the header has errors")
        else:
            _deep_untiled(f, pol, report, progress, again)


def _unnamed(text: str, f: Any) -> str:
    """``text`` without the leading ``"<file>: "`` (each printed line names the file)."""
    own = describe_source(getattr(f, "name", None))
    return text[len(own) + 2:] if own and text.startswith(own + ": ") else text


def _field_and_text(text: str, keys: Any) -> tuple[str, str]:
    """(the field a reader message starts with, the message without that field)."""
    field = _field_of(text, keys)
    if field and text.startswith(field + ": "):
        text = text[len(field) + 2:]
    return field, text


def _duplicates(entries: list[Any], pol: Policy, report: Report) -> bool:
    """Repeated core fields (docs/format.md#duplicates-and-unknown-fields): errors, or warnings
    under allow_duplicates.

    Returns whether any were found (the header builder's own warnings about them are then
    dropped as repeats).
    """
    first: dict[str, int] = {}
    found = False
    for e in entries:
        if ":" in e.key or e.key == "extensions":
            continue
        if e.key in first:
            found = True
            text = f"repeated on line {e.lineno} (first on line {first[e.key]})"
            if pol.allow_duplicates:
                report.warning(e.key, text + "; the last value wins", e.value, "one line")
            else:
                report.error(e.key, text + "; each core field may appear once", e.value,
                             "one line")
        else:
            first[e.key] = e.lineno
    return found


def _check_mapping(header: Mapping[str, Any], report: Report) -> bool:
    """What the wire reader would warn about, for a header given as a mapping; False when a
    value nests too deeply for the other checks (which the reader refuses too)."""
    deep = [k for k, v in header.items() if nesting_depth(v, MAX_NESTING) > MAX_NESTING]
    for key in deep:
        report.error(str(key), f"JSON nested too deeply (more than {MAX_NESTING} levels of "
                     "lists and objects)", None, f"at most {MAX_NESTING} levels")
    if deep:
        return False
    known = set(CORE_FIELDS)
    found = header.get("extensions")
    declared: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    undeclared: dict[str, None] = {}
    tile_declared = find_prefix(header, TILE_URI_PREFIX) is not None
    for key in header:
        if not isinstance(key, str):
            report.error("", f"field names must be strings, found {key!r}", repr(key), "str")
            continue
        prefix, colon, _ = key.partition(":")
        if colon:
            if prefix not in declared and (prefix != "tile" or tile_declared):
                undeclared[prefix] = None
        elif key not in known:
            report.warning(key, "unknown field; kept verbatim", None, "a core field")
    for prefix in undeclared:
        report.warning("extensions", f"extension prefix {prefix!r} is used but not declared",
                       prefix, "a declaration in 'extensions'")
    return True


def _check_header(header: Mapping[str, Any], pol: Policy, report: Report,
                  info: FileInfo) -> tuple[Any, Any]:
    """Schema, cross-field and reader checks; returns (Tiling or None, CoreFields or None)."""
    from ..header import core_fields
    from ..tiling.spec import parse_tiling

    check_core_schema(header, report)
    prefix = _extensions(header, report)
    check_core(header, report)
    core = _reader_check(report, header, lambda: core_fields(header))
    if prefix is not None:
        check_tiling(header, prefix, core, pol, report, info)
    tiling = None
    if core is not None:
        tiling = _reader_check(report, header, lambda: parse_tiling(
            header, core, prefix=prefix, policy=pol, source=None))
        if tiling is None and prefix is not None and header.get(prefix + ":enabled") is True:
            return None, None
        if tiling is None:
            check_data(core, info.store, info.data_start, info.file_size, pol, report)
    return tiling, core


def _extensions(header: Mapping[str, Any], report: Report) -> str | None:
    """Validate each declared extension against its bundled schema; the tiling prefix."""
    declared = header.get("extensions")
    tile_prefix = find_prefix(header, TILE_URI_PREFIX)
    if isinstance(declared, Mapping):
        for prefix, uri in declared.items():
            if not isinstance(uri, str):
                continue
            schema = next((s for u, s in BUNDLED_EXTENSIONS.items() if uri.startswith(u)), None)
            if schema is None:
                report.note(f"{prefix}:", f"extension {prefix!r} ({uri}) has no bundled "
                            "schema: its fields are not validated (schemas are never fetched)",
                            uri, None)
            elif prefix == tile_prefix or schema != "tile.schema.json":
                check_extension_schema(header, str(prefix), schema, report)
    if tile_prefix is None and any(isinstance(k, str) and k.startswith("tile:")
                                   for k in header):
        report.warning("extensions", "tile: fields without a declaration of the tiling "
                       f"extension ({TILE_URI_PREFIX}...); read as the tiling extension",
                       None, {"tile": TILE_URI_PREFIX + "v1.0.0"})
        check_extension_schema(header, "tile", "tile.schema.json", report)
        return "tile"
    return tile_prefix


def _reader_check(report: Report, header: Mapping[str, Any], check: Callable[[], Any]) -> Any:
    """Run one of the reader's checks: its warnings become warnings, and its error becomes an
    error unless a problem was already reported for that field."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = check()
        except JnrrdError as exc:
            text = str(exc)
            field = _field_of(text, header)
            if not report.has_error([top_field(field)] if field else None):
                report.error(field, text)
            result = None
    for w in caught:
        text = str(w.message)
        field = _field_of(text, header)
        if not report.has_any(top_field(field)):
            report.warning(field, text)
    return result


def _field_of(message: str, keys: Any) -> str:
    """The header field a reader message starts with (``"sizes[1]: ..."`` -> ``"sizes"``)."""
    candidates = {*CORE_FIELDS, *(k for k in keys if isinstance(k, str))}
    best = ""
    for k in candidates:
        if (len(k) > len(best) and message.startswith(k)
                and message[len(k):len(k) + 1] in (":", "[", ".", "/", " ")):
            best = k
    if not best:
        # tiling fields of an undeclared or unusual prefix: "<prefix>:<field>"
        head = message.split(" ", 1)[0].rstrip(":")
        name = head.split(":", 1)[-1].split("[", 1)[0].split(".", 1)[0]
        if ":" in head and name in TILE_FIELDS:
            best = head.split("[", 1)[0].split(".", 1)[0]
    return best


def _deep_untiled(f: IO[bytes], pol: Policy, report: Report,
                  progress: Callable[[int, int], None] | None,
                  again: tuple[str, dict[str, Any] | None] | None = None) -> None:
    """Decode an untiled data section (bounded by the ``max_bytes`` cap); a remote source
    (``again``: its URL and ``storage_options``) is read by URL, so that detached data files
    resolve next to it."""
    from ..api import read

    if progress is not None:
        progress(0, 1)
    f.seek(0)
    source: Any = f
    options: dict[str, Any] = {}
    if again is not None:
        source, options = again[0], {"storage_options": again[1]}
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        try:
            read(source, **options, policy=pol, io=pol.io)
        except JnrrdError as exc:
            report.error("", f"the data section cannot be read: {_unnamed(str(exc), f)}")
    if progress is not None:
        progress(1, 1)


def run_validate(files: list[str], *, as_json: bool, deep: bool,
                 out: TextIO = sys.stdout,
                 progress: Callable[[int, int], None] | None = None,
                 storage_options: dict[str, Any] | None = None) -> int:
    """The ``jnrrd validate`` command (docs/cli.md#validate): 0 when every file is valid, else 1.

    Prints one line per problem (``FILE: severity: field: message``; many problems of one
    table, such as every tile of a truncated file, as one summary line) and ``FILE: valid``
    for a file without errors, or, with ``as_json``, one JSON array of every problem
    ``{"file", "severity", "field", "message", "found", "expected"}``. ``progress(done,
    total)`` is passed to :func:`validate` for each file (``deep`` checks report tiles);
    ``storage_options`` to fsspec for the files that are URLs.
    """
    from .summary import text_lines

    status = 0
    rows: list[dict[str, Any]] = []
    for file in files:
        try:
            options = storage_options if is_remote(local_path(file)) else None
            problems = validate(file, deep=deep, progress=progress, storage_options=options)
        except OSError as exc:
            problems = [Problem("error", "", f"cannot read the file: {exc.strerror or exc}")]
        if any(p.severity == "error" for p in problems):
            status = 1
        if as_json:
            rows.extend({"file": file, **p.to_json()} for p in problems)
        else:
            out.writelines(line + "\n" for line in text_lines(file, problems))
    if as_json:
        out.write(json.dumps(rows, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    return status
