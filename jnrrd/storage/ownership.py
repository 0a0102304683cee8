"""What a write target provably owns: the only names cleanup ever removes besides temporary
files (docs/security.md, "Cleanup owns only what it can prove").

A target is one exact name; the file system's own case rules decide which file that is
(``V.jnrrd`` and ``V.JNRRD`` are two targets on a case-sensitive disk or object store, one on
a case-insensitive disk). Besides its temporary files (``.<name>.jnrrd-tmp-<token>…``) a target
owns exactly:

- the names its **journal** claims: before a write creates a fresh data file or tile
  directory, and before it replaces a header whose files it will remove, it appends that name
  to its journal (:func:`claim`; the journal itself is made by
  :func:`jnrrd.storage.leftovers.write_journal`). A killed writer's journal lists what it may
  have left behind (:func:`claims`);
- the fresh names its **previous header** references (:func:`referenced_names`): a rewrite
  removes them once the new header has replaced that one.

A name that merely looks like a leftover (``V.<token>.tiles``), or that another target's
header names, is never taken. Files are read here without following symbolic links and
without blocking on FIFOs (:func:`open_plain`), and only up to the header's blank line.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import re
import stat
from collections.abc import Iterator
from typing import IO, Any, Protocol

from .names import TOKEN_RE

__all__ = ["FINAL", "HEADER_CAP", "case_insensitive", "claim", "claims", "header_strings",
           "journal_records", "open_plain", "read_head", "referenced_names", "stems"]

#: the fresh names of a write's data files and tile directories: ``<stem>.<token>.<kind>``
FINAL = re.compile(
    rf"(?P<stem>.+)\.{TOKEN_RE}\.(?:tiles|data(?:\.[a-z0-9]+)?|raw(?:\.gz|\.bz2)?|txt|hex)")
#: a header longer than this is not searched: it proves nothing (and keeps everything)
HEADER_CAP = 64 << 20
#: how much of a journal is read (a write claims two or three names)
_JOURNAL_CAP = 1 << 20
_FIRST_PIECE = 64 << 10

#: the journals of the writes running in this context: (target path, open descriptor)
_JOURNALS: contextvars.ContextVar[tuple[tuple[str, int], ...]] = contextvars.ContextVar(
    "jnrrd_journals", default=())


def stems(target_name: str) -> set[str]:
    """The stems the fresh names of ``target_name`` are made from (the name itself, and the
    name without a ``.jnrrd``/``.nrrd``/``.nhdr`` suffix in any case)."""
    out = {target_name}
    for ext in (".jnrrd", ".nrrd", ".nhdr"):
        if target_name.lower().endswith(ext):
            out.add(target_name[: -len(ext)])
    return out


def case_insensitive(path: str) -> bool:
    """Whether the file system holding the existing file ``path`` ignores case in its name
    (its name with the case of every letter swapped is the same file)."""
    d, name = os.path.split(path)
    other = os.path.join(d, name.swapcase())
    if other == path:
        return False
    try:
        return os.path.samestat(os.lstat(path), os.lstat(other))
    except OSError:
        return False


def open_plain(path: str) -> IO[bytes] | None:
    """``path`` opened for reading when it is a regular file and not a symbolic link; None
    otherwise (absent, a link, a FIFO, a device, a directory, unreadable). Never blocks."""
    flags = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    try:
        if not hasattr(os, "O_NOFOLLOW") and os.path.islink(path):
            return None  # Windows: no O_NOFOLLOW; links there need privileges to make
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except OSError:
        os.close(fd)
        return None


class Readable(Protocol):
    """Anything read from its start in pieces: a binary file, a remote object's ranges."""

    def read(self, n: int, /) -> bytes:
        """The next ``n`` bytes at most (fewer only at the end)."""
        ...


def read_head(f: Readable, cap: int = HEADER_CAP) -> bytes | None:
    """The bytes of ``f`` up to its first blank line (the end of a JNRRD or NRRD header), or
    all of it when it has none; None when no blank line comes within ``cap`` bytes. Reads in
    doubling pieces, so a small header of a large file costs one small read."""
    buf = bytearray()
    piece = _FIRST_PIECE
    while True:
        more = f.read(min(piece, cap + 1 - len(buf)))
        start = max(0, len(buf) - 3)
        buf += more
        for mark in (b"\n\n", b"\r\n\r\n"):
            end = buf.find(mark, start)
            if end >= 0:
                return bytes(buf[:end])
        if not more:
            return bytes(buf)
        if len(buf) > cap:
            return None
        piece *= 2


def header_strings(head: bytes) -> list[str] | None:
    """The strings of a JNRRD header (every JSON string) or the ``data file`` values of a
    classic NRRD header; None when ``head`` is neither.

    ``ValueError`` when the header cannot be searched completely (malformed JSON, nesting past
    the interpreter's limit) or names its data files by a pattern (whose names a search for
    one name would miss)."""
    start = head[:16]
    if start.startswith(b"NRRD"):
        out = []
        for line in head.decode("utf-8", "surrogateescape").splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip().lower() in ("data file", "datafile"):
                if "%" in value or value.strip().upper() == "LIST":
                    raise ValueError("data files named by a pattern or a list")
                out.append(value.strip())
        return out
    if not (start.lstrip(b"\xef\xbb\xbf").lstrip().startswith(b"{") and b"jnrrd" in start):
        return None
    found: list[str] = []
    for line in head.decode("utf-8", "surrogateescape").splitlines()[1:]:
        if line.count('"') <= 2:
            continue  # only a key (``{"tile:offset_table": [...]}``): no name in it
        try:
            obj = json.loads(line)
        except RecursionError:
            raise ValueError("a header line nested too deeply to search") from None
        if isinstance(obj, dict) and "data_file_pattern" in obj:
            raise ValueError("data files named by a pattern")
        _strings(obj, found)
    return found


def _strings(obj: Any, out: list[str]) -> None:
    stack = [obj]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            out.append(x)
        elif isinstance(x, dict):
            stack.extend(x.keys())
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)


def referenced_names(head: bytes | None, target_name: str, *, casefold: bool = False
                     ) -> list[str]:
    """The fresh names (data files, tile directories beside the header) that the previous
    header ``head`` of ``target_name`` references and that a write to ``target_name`` made
    (their stem is the target's; compared ignoring case when ``casefold``, i.e. on a
    case-insensitive file system). Empty when nothing can be proved."""
    if head is None:
        return []
    try:
        strings = header_strings(head)
    except ValueError:
        return []
    own = {s.casefold() if casefold else s for s in stems(target_name)}
    out: list[str] = []
    for s in strings or ():
        name = s[2:] if s.startswith("./") else s
        name = name.rstrip("/")
        m = FINAL.fullmatch(name)
        if m is None or "/" in name or "\\" in name or name == target_name:
            continue
        stem = m.group("stem")
        if (stem.casefold() if casefold else stem) in own and name not in out:
            out.append(name)
    return out


# -- journals ------------------------------------------------------------------------------

@contextlib.contextmanager
def journal_records(target: str, fd: int) -> Iterator[None]:
    """Inside the block, :func:`claim` appends names beside ``target`` to the journal open at
    ``fd``."""
    token = _JOURNALS.set((*_JOURNALS.get(), (os.path.abspath(target), fd)))
    try:
        yield
    finally:
        _JOURNALS.reset(token)


def claim(path: str) -> None:
    """Record in the journal of the running write to the target beside ``path`` that this
    write owns ``path``'s name (a fresh data file or tile directory it is about to create, or
    a previous file it is about to remove). A name that is not one of those (the target
    itself, anything not named like a fresh file) is not recorded."""
    path = os.path.abspath(path)
    d, name = os.path.split(path)
    if FINAL.fullmatch(name) is None:
        return
    for target, fd in _JOURNALS.get():
        if os.path.dirname(target) == d and os.path.basename(target) != name:
            line = json.dumps(name) + "\n"
            with contextlib.suppress(OSError):
                os.write(fd, line.encode("utf-8", "surrogateescape"))


def claims(journal: str) -> list[str]:
    """The names a journal claims (fresh names only, no paths); empty for a journal of an
    earlier version (which claimed nothing), or one that is not a regular file."""
    f = open_plain(journal)
    if f is None:
        return []
    with f:
        text = f.read(_JOURNAL_CAP).decode("utf-8", "surrogateescape")
    out = []
    for line in text.splitlines():
        try:
            name = json.loads(line)
        except ValueError:
            continue  # a line cut short by the kill
        if (isinstance(name, str) and FINAL.fullmatch(name) and "/" not in name
                and os.sep not in name and "\0" not in name):
            out.append(name)
    return out
