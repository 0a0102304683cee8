"""Reading classic NRRD (NRRD0001-0005): header lines -> a JNRRD :class:`Header` -> a Volume.

The header is read line by line with bounded ``readline`` calls (caps from the policy), so
non-seekable streams work and a hostile header cannot exhaust memory. Fields are translated to
JNRRD names and values (docs/format.md#core-fields, #types, #encodings-and-endianness,
#where-the-data-is); what the JNRRD core cannot say (key/value pairs, comments) goes into the
declared ``nrrd`` extension (docs/nrrd.md). The translated header is then checked by
:func:`jnrrd.header.core_fields`, like any JNRRD header.
"""

from __future__ import annotations

import re
import warnings
from typing import IO, TYPE_CHECKING, Any, cast

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
from ..policy import Policy
from ..storage import LocalStore

if TYPE_CHECKING:
    from ..storage import RemoteStore

from .fields import FIELD_NAMES, parse_int, unescape_kv
from .translate import RawHeader, Translator

__all__ = ["open_nrrd", "read_nrrd_header"]

_MAGIC = re.compile(r"NRRD(\d{4})")


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


def _read_raw(f: IO[bytes], policy: Policy, source: Any) -> RawHeader:
    lines = _Lines(f, policy, source)
    magic = lines.next()
    m = _MAGIC.fullmatch((magic or "").rstrip())
    if m is None or not 1 <= int(m.group(1)) <= 5:
        shown = (magic or "")[:40]
        raise VersionError(f"{where(source)}expected a NRRD magic line NRRD0001 to NRRD0005, "
                           f"found {shown!r}")
    raw = RawHeader(version=int(m.group(1)))
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


def _read_list(raw: RawHeader, lines: _Lines, value: str, spelled: str, source: Any) -> None:
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


def _read(f: IO[bytes], policy: Policy, source: Any) -> tuple[Header, CoreFields, int | None]:
    if source is None and describe_source(getattr(f, "name", None)):
        source = f.name  # type: ignore[attr-defined]
    raw = _read_raw(f, policy, source)
    header = Translator(raw, source).run()
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


def open_nrrd(f: IO[bytes], *, path: str | None, store: LocalStore | RemoteStore | None,
              policy: Policy,
              name: Any, index_order: str = "F", src: Any = None) -> Any:
    """Open a classic NRRD file (attached or detached data) as a lazy :class:`jnrrd.Volume`.

    ``path`` is the file's path when it has one (raw data is then memory-mapped), else the
    stream ``f`` is kept for reading the data. Detached data files are keys of ``store`` (the
    header's directory), resolved under the path policy. ``src``: the opened source ``f``
    comes from (:func:`jnrrd.engine.sources.untiled_data` reads the data through its store).
    """
    from ..engine.volume import Volume

    header, core, data_start = _read(f, policy, name)
    paths = data_paths(core, store, policy, name)
    if paths is not None and getattr(store, "remote", False) and policy.opener is None:
        from ..storage import opener_of

        # detached data: URLs
        policy = Policy.from_kwargs(policy, opener=opener_of(cast("RemoteStore", store)))
    if paths is None and data_start is None and core.count:
        raise DataError(f"{where(name)}the header ended at the end of the file: there is no "
                        "data section (and no 'data file' field)")
    if src is not None:
        from ..engine.sources import untiled_data

        untiled = untiled_data(core, src, data_start, paths, policy)
    else:
        untiled = UntiledData(core, path=path, f=None if path is not None else f,
                              data_start=data_start, paths=paths, policy=policy, source=name)
    return Volume(header, tiling=None, core=core, policy=policy, source=None, name=name,
                  index_order=index_order, untiled=untiled)
