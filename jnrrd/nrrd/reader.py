"""Reading classic NRRD (NRRD0001-0005): header lines -> a JNRRD :class:`Header` -> a Volume.

The header is read line by line with bounded ``readline`` calls (caps from the policy), so
non-seekable streams work and a hostile header cannot exhaust memory. Fields are translated to
JNRRD names and values (digest 1.7-1.11); what the JNRRD core cannot say (key/value pairs,
comments) goes into the declared ``nrrd`` extension (docs/nrrd.md). The translated header is
then checked by :func:`jnrrd.header.core_fields`, like any JNRRD header.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass, field
from typing import IO, Any

from ..engine.untiled import UntiledData, data_paths
from ..errors import (
    DataError,
    HeaderError,
    JnrrdWarning,
    UnsupportedError,
    VersionError,
    describe_source,
    where,
)
from ..header import CoreFields, Header, core_fields
from ..header.model import CORE_FIELDS
from ..policy import Policy
from .fields import (
    ENCODINGS,
    FIELD_NAMES,
    NRRD_PREFIX,
    NRRD_URI,
    TYPES,
    UNKNOWN,
    parse_int,
    parse_number,
    parse_quoted,
    parse_vectors,
    space_name,
    unescape_kv,
)

__all__ = ["open_nrrd", "read_nrrd_header"]

_MAGIC = re.compile(r"NRRD(\d{4})")
# teem's test for a file-name template: a printf integer conversion that is not "%%"
_TEMPLATE = re.compile(r"(?<!%)(?:%%)*%[-+ 0#]*[0-9]*[diu]")
# JNRRD name -> the spelling used in messages when the field is absent
_DISPLAY = {"type": "type", "dimension": "dimension", "sizes": "sizes", "encoding": "encoding"}


@dataclass
class _Raw:
    """The header as written: field values by JNRRD name, plus the NRRD-only parts."""

    version: int
    fields: dict[str, tuple[str, str, int]] = field(default_factory=dict)
    key_values: dict[str, str] = field(default_factory=dict)
    comments: list[str] = field(default_factory=list)
    data_list: list[str] | None = None
    skip_list: list[int] | None = None
    list_subdim: int | None = None
    data_start: int | None = None


class _Lines:
    """Bounded line reader that tracks the absolute offset of the next unread byte."""

    def __init__(self, f: IO[bytes], policy: Policy, source: Any) -> None:
        self.f, self.policy, self.source = f, policy, source
        try:
            self.base = f.tell()
        except (OSError, AttributeError, ValueError):
            self.base = 0
        self.consumed = 0
        self.lineno = 0

    @property
    def offset(self) -> int:
        return self.base + self.consumed

    def next(self) -> str | None:
        """The next line without its line ending, or ``None`` at end of file."""
        cap = self.policy.max_line_bytes
        raw = self.f.readline(cap + 1)
        if not raw:
            return None
        self.lineno += 1
        if len(raw) > cap and not raw.endswith(b"\n"):
            raise HeaderError(f"{where(self.source)}line {self.lineno} is longer than the "
                              f"max_line_bytes cap ({cap}); pass max_line_bytes=... to allow it")
        self.consumed += len(raw)
        if self.consumed > self.policy.max_header_bytes:
            raise HeaderError(f"{where(self.source)}the header exceeds the max_header_bytes cap "
                              f"({self.policy.max_header_bytes}); pass max_header_bytes=...")
        if raw.endswith(b"\n"):
            raw = raw[:-1]
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            # Old NRRD headers are 8-bit text of unknown encoding; latin-1 keeps every byte.
            return raw.decode("latin-1")


def _read_raw(f: IO[bytes], policy: Policy, source: Any) -> _Raw:
    lines = _Lines(f, policy, source)
    magic = lines.next()
    m = _MAGIC.fullmatch((magic or "").rstrip())
    if m is None or not 1 <= int(m.group(1)) <= 5:
        shown = (magic or "")[:40]
        raise VersionError(f"{where(source)}expected a NRRD magic line NRRD0001 to NRRD0005, "
                           f"found {shown!r}")
    raw = _Raw(version=int(m.group(1)))
    while True:
        line = lines.next()
        if line is None:
            return raw  # header ended at EOF (normal for a detached header)
        if line == "":
            raw.data_start = lines.offset
            return raw
        if line.startswith("#"):
            # teem skips the '#' and any following spaces or '#'
            raw.comments.append(line.lstrip("# \t"))
            continue
        if ":=" in line:
            # teem: any line containing ":=" is a key/value pair; the last one of a key wins
            key, _, value = line.partition(":=")
            raw.key_values[unescape_kv(key)] = unescape_kv(value)
            continue
        name, colon, value = line.partition(":")
        spelled = " ".join(name.split()).lower()
        if not colon:
            raise HeaderError(f"{where(source)}line {lines.lineno}: expected '<field>: <value>', "
                              f"'<key>:=<value>' or a '#' comment, found {line[:60]!r}")
        if spelled not in FIELD_NAMES:
            raise HeaderError(f"{where(source, name.strip())}line {lines.lineno}: unknown NRRD "
                              "field; expected a field of the NRRD format (e.g. 'type', "
                              "'sizes', 'space directions') or a '<key>:=<value>' pair")
        jname = FIELD_NAMES[spelled]
        if jname == "number":  # redundant with sizes; teem ignores it
            continue
        if jname in raw.fields:
            first = raw.fields[jname][2]
            if not policy.allow_duplicates:
                raise HeaderError(f"{where(source, spelled)}field repeated on line "
                                  f"{lines.lineno} (first on line {first}); expected each "
                                  "field once (allow_duplicates=True lets the last win)")
            warnings.warn(f"{where(source, spelled)}field repeated on line {lines.lineno}; "
                          "the last value wins", JnrrdWarning, stacklevel=4)
        value = value.strip()
        raw.fields[jname] = (spelled, value, lines.lineno)
        if jname == "data_file" and value.split()[:1] in (["LIST"], ["SKIPLIST"]):
            _read_list(raw, lines, value, spelled, source)
            raw.data_start = lines.offset
            return raw


def _read_list(raw: _Raw, lines: _Lines, value: str, spelled: str, source: Any) -> None:
    """``data file: LIST [subdim]``: file names on the following lines, to a blank line or EOF
    (``SKIPLIST`` lines are ``<byte skip> <file>``)."""
    words = value.split()
    if len(words) > 2:
        raise HeaderError(f"{where(source, spelled)}expected 'LIST [<subdim>]', found {value!r}")
    if len(words) == 2:
        raw.list_subdim = parse_int(words[1], source, f"{spelled} (subdim)")
    skip = words[0] == "SKIPLIST"
    names: list[str] = []
    skips: list[int] = []
    while True:
        line = lines.next()
        if line is None or line == "":
            break
        if skip:
            num, _, name = line.partition(" ")
            if not name:
                raise HeaderError(f"{where(source, spelled)}line {lines.lineno}: expected "
                                  f"'<skip> <file name>', found {line[:60]!r}")
            skips.append(parse_int(num, source, f"{spelled} (skip on line {lines.lineno})"))
            names.append(name)
        else:
            names.append(line)
        if len(names) > lines.policy.max_files:
            raise UnsupportedError(f"{where(source, spelled)}lists more than the max_files cap "
                                   f"({lines.policy.max_files}) files")
    if not names:
        raise HeaderError(f"{where(source, spelled)}LIST names no file on the lines after it")
    raw.data_list = names
    raw.skip_list = skips if skip else None


# -- translation to JNRRD --------------------------------------------------------------------
class _Translator:
    def __init__(self, raw: _Raw, source: Any) -> None:
        self.raw, self.source = raw, source
        self.out: dict[str, Any] = {}

    def has(self, name: str) -> bool:
        return name in self.raw.fields

    def text(self, name: str) -> tuple[str, str]:
        """(spelling in the file, value) of a present field."""
        spelled, value, _ = self.raw.fields[name]
        return spelled, value

    def require(self, name: str) -> tuple[str, str]:
        if name not in self.raw.fields:
            raise HeaderError(f"{where(self.source, _DISPLAY[name])}required NRRD field is "
                              "missing")
        return self.text(name)

    def count(self, items: list[Any], n: int, spelled: str, what: str) -> list[Any]:
        if len(items) != n:
            raise HeaderError(f"{where(self.source, spelled)}expected {n} {what}, found "
                              f"{len(items)}")
        return items

    def run(self) -> Header:
        src = self.source
        spelled, value = self.require("type")
        key = " ".join(value.split()).lower()
        if key not in TYPES:
            raise HeaderError(f"{where(src, spelled)}unknown NRRD type {value!r}; expected one "
                              "of int8/signed char, uint8/uchar, int16/short, uint16/ushort, "
                              "int32/int, uint32/uint, int64/longlong, uint64/ulonglong, float, "
                              "double, block")
        out = self.out
        out["type"] = TYPES[key]
        spelled, value = self.require("dimension")
        dim = parse_int(value, src, spelled)
        if not 1 <= dim <= 16:
            raise HeaderError(f"{where(src, spelled)}expected an integer from 1 to 16, found "
                              f"{dim}")
        out["dimension"] = dim
        spelled, value = self.require("sizes")
        sizes = [parse_int(t, src, f"{spelled}[{i}]") for i, t in enumerate(value.split())]
        out["sizes"] = self.count(sizes, dim, spelled, "sizes (one per axis)")
        if self.has("endian"):
            spelled, value = self.text("endian")
            if value.lower() not in ("little", "big"):
                raise HeaderError(f"{where(src, spelled)}expected 'little' or 'big', found "
                                  f"{value!r}")
            out["endian"] = value.lower()
        spelled, value = self.require("encoding")
        if value.lower() not in ENCODINGS:
            raise HeaderError(f"{where(src, spelled)}expected a NRRD encoding (raw, ascii/txt/"
                              f"text, hex, gzip/gz, bzip2/bz2), found {value!r}")
        out["encoding"] = ENCODINGS[value.lower()]
        if self.has("block_size"):
            out["block_size"] = parse_int(self.text("block_size")[1], src,
                                          self.text("block_size")[0])
        for name in ("content", "sample_units"):
            if self.has(name):
                out[name] = self.text(name)[1]
        self._space(dim)
        self._per_axis(dim)
        for name in ("min", "max", "old_min", "old_max"):
            if self.has(name):
                spelled, value = self.text(name)
                out[name] = parse_number(value, src, spelled)
        for name in ("line_skip", "byte_skip"):
            if self.has(name):
                spelled, value = self.text(name)
                out[name] = parse_int(value, src, spelled)
        if self.has("data_file"):
            self._data_file(sizes)
        return self._header()

    def _space(self, dim: int) -> None:
        src, out = self.source, self.out
        sd = None
        if self.has("space"):
            out["space"] = space_name(self.text("space")[1], src, self.text("space")[0])
        if self.has("space_dimension"):
            spelled, value = self.text("space_dimension")
            sd = parse_int(value, src, spelled)
            out["space_dimension"] = sd
        if "space" in out:
            from ..header.geometry_fields import SPACES

            sd = SPACES[out["space"]]
        if self.has("space_directions"):
            spelled, value = self.text("space_directions")
            dirs = parse_vectors(value, src, spelled, allow_none=True)
            out["space_directions"] = self.count(dirs, dim, spelled,
                                                 "vectors or 'none' (one per axis)")
        if self.has("space_origin"):
            spelled, value = self.text("space_origin")
            vecs = parse_vectors(value, src, spelled, allow_none=False)
            out["space_origin"] = self.count(vecs, 1, spelled, "vector")[0]
        if self.has("measurement_frame"):
            spelled, value = self.text("measurement_frame")
            frame = parse_vectors(value, src, spelled, allow_none=False)
            if sd is not None:
                self.count(frame, sd, spelled, f"vectors (space dimension {sd})")
            out["measurement_frame"] = frame
        if self.has("space_units"):
            spelled, value = self.text("space_units")
            units = parse_quoted(value, src, spelled)
            if sd is not None:
                self.count(units, sd, spelled, f"strings (space dimension {sd})")
            out["space_units"] = [u or None for u in units]

    def _per_axis(self, dim: int) -> None:
        src, out = self.source, self.out
        for name in ("spacings", "thicknesses", "axis_mins", "axis_maxs"):
            if self.has(name):
                spelled, value = self.text(name)
                vals = [parse_number(t, src, f"{spelled}[{i}]") if t.lower() not in UNKNOWN
                        else None for i, t in enumerate(value.split())]
                out[name] = self.count(vals, dim, spelled, "numbers (one per axis)")
        for name in ("centers", "kinds"):
            if self.has(name):
                spelled, value = self.text(name)
                words = self.count(value.split(), dim, spelled, f"{name} (one per axis)")
                out[name] = [None if w.lower() in UNKNOWN
                             else w.lower() if name == "centers"
                             else w.lower().replace("-", "_") for w in words]
        for name in ("labels", "units"):
            if self.has(name):
                spelled, value = self.text(name)
                # "" is NRRD's only way to say "no label": JNRRD's null (docs/nrrd.md)
                out[name] = [v or None for v in self.count(
                    parse_quoted(value, src, spelled), dim, spelled,
                    "quoted strings (one per axis)")]

    def _data_file(self, sizes: list[int]) -> None:
        src, raw, out = self.source, self.raw, self.out
        spelled, value = self.text("data_file")
        dim = len(sizes)
        if raw.data_list is not None:
            subdim = dim - 1 if raw.list_subdim is None else raw.list_subdim
            if len(raw.data_list) == 1 and raw.list_subdim is None:
                subdim = dim
            self._check_pieces(len(raw.data_list), subdim, sizes, spelled)
            out["data_files"] = list(raw.data_list)
            if raw.skip_list is not None:
                self._skip_list(spelled)
            return
        words = value.split()
        if words and _TEMPLATE.search(words[0]):
            if len(words) not in (4, 5):
                raise HeaderError(f"{where(src, spelled)}expected '<format> <min> <max> <step> "
                                  f"[<subdim>]', found {value!r}")
            lo, hi, step = (parse_int(w, src, spelled) for w in words[1:4])
            subdim = parse_int(words[4], src, spelled) if len(words) == 5 else dim - 1
            if step == 0 or (hi - lo) * step < 0:
                raise HeaderError(f"{where(src, spelled)}file number max {hi} is not reached "
                                  f"from min {lo} by step {step}")
            self._check_pieces((hi - lo) // step + 1, subdim, sizes, spelled)
            out["data_file_pattern"] = {"format": words[0], "min": lo, "max": hi, "step": step}
            return
        if not value:
            raise HeaderError(f"{where(src, spelled)}expected a file name, found ''")
        out["data_file"] = value

    def _check_pieces(self, nfiles: int, subdim: int, sizes: list[int], spelled: str) -> None:
        """teem's rule: files hold ``subdim``-D pieces, or equal slabs when subdim = dim."""
        dim = len(sizes)
        if not 1 <= subdim <= dim:
            raise HeaderError(f"{where(self.source, spelled)}expected a subdim from 1 to {dim}, "
                              f"found {subdim}")
        if subdim < dim:
            pieces = math.prod(sizes[subdim:])
            if nfiles != pieces:
                raise HeaderError(f"{where(self.source, spelled)}expected {pieces} files of "
                                  f"{subdim}-D pieces, found {nfiles}")
        elif nfiles > sizes[-1] or sizes[-1] % nfiles:
            raise HeaderError(f"{where(self.source, spelled)}expected a file count dividing the "
                              f"{sizes[-1]} slices of the last axis, found {nfiles}")

    def _skip_list(self, spelled: str) -> None:
        """SKIPLIST's per-file byte skips map to ``byte_skip`` only when they are all equal."""
        skips = self.raw.skip_list or []
        if self.out.get("byte_skip", 0):
            raise HeaderError(f"{where(self.source, spelled)}SKIPLIST gives per-file skips; "
                              "expected no global 'byte skip' with it")
        if len(set(skips)) > 1:
            raise UnsupportedError(f"{where(self.source, spelled)}SKIPLIST with different byte "
                                   f"skips per file ({sorted(set(skips))}) cannot be read; "
                                   "JNRRD applies one byte_skip to every data file")
        if skips[0]:
            self.out["byte_skip"] = skips[0]

    def _header(self) -> Header:
        h = Header()
        for name in CORE_FIELDS:
            if name in self.out:
                h[name] = self.out[name]
        if self.raw.key_values or self.raw.comments:
            h["extensions"] = {NRRD_PREFIX: NRRD_URI}
            if self.raw.key_values:
                h[f"{NRRD_PREFIX}:key_values"] = dict(self.raw.key_values)
            if self.raw.comments:
                h[f"{NRRD_PREFIX}:comments"] = list(self.raw.comments)
        return h


def _read(f: IO[bytes], policy: Policy, source: Any) -> tuple[Header, CoreFields, int | None]:
    if source is None and describe_source(getattr(f, "name", None)):
        source = f.name  # type: ignore[attr-defined]
    raw = _read_raw(f, policy, source)
    header = _Translator(raw, source).run()
    core = core_fields(header, source=source, nrrd=True)
    return header, core, raw.data_start


def read_nrrd_header(f: IO[bytes], *, policy: Policy, source: Any = None
                     ) -> tuple[Header, int | None]:
    """Read a classic NRRD header from ``f`` (positioned at the file start).

    Returns the header in JNRRD field names and values and the absolute offset of the data
    (``None`` when the header ended at end of file). Raises ``VersionError`` for a magic other
    than NRRD0001-0005 and ``HeaderError`` naming the file and field for anything malformed.
    """
    header, _, data_start = _read(f, policy, source)
    return header, data_start


def open_nrrd(f: IO[bytes], *, path: str | None, header_dir: str | None, policy: Policy,
              name: Any, index_order: str = "F") -> Any:
    """Open a classic NRRD file (attached or detached data) as a lazy :class:`jnrrd.Volume`.

    ``path`` is the file's path when it has one (raw data is then memory-mapped), else the
    stream ``f`` is kept for reading the data. Detached data files resolve against
    ``header_dir`` under the path policy.
    """
    from ..engine.volume import Volume

    header, core, data_start = _read(f, policy, name)
    paths = data_paths(core, header_dir, policy, name)
    if paths is None and data_start is None and core.count:
        raise DataError(f"{where(name)}the header ended at the end of the file: there is no "
                        "data section (and no 'data file' field)")
    untiled = UntiledData(core, path=path, f=None if path is not None else f,
                          data_start=data_start, paths=paths, policy=policy, source=name)
    return Volume(header, tiling=None, core=core, policy=policy, source=None, name=name,
                  index_order=index_order, untiled=untiled)
