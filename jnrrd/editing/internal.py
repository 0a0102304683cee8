"""The internal (single-file) layout of an editable volume (docs/editing.md, "Layouts").

Local file (:class:`LocalInternal`): the header sits in a reserved room at the start of the
file (``tile:header_room``); new versions of tiles are appended at the end and never
overwrite bytes a committed header names, so a reader that opened an earlier commit keeps
reading it. A commit makes the appended tiles durable, writes the new header to the
journal (:mod:`jnrrd.storage.journal`), rewrites the header room in place and removes the
journal: it costs the changed tiles plus two copies of the header, whatever the file's size.
When the new header outgrows its room (or the file was not written for editing, e.g. by
``jnrrd.write``), the commit rewrites the whole file instead, with the tiles back to back
after a room twice as large, and replaces it atomically.

Object store (:class:`RemoteInternal`): an object is replaced whole, so every commit
rewrites it (new tiles spooled locally until then; unchanged tiles read back by merged range
requests). External storage is the layout for frequent commits to an object store.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Callable, Sequence
from typing import IO, Any

from .. import _platform
from ..errors import DataError
from ..header import Header
from ..policy import Policy
from ..storage import (
    WriteBack,
    durability,
    file_identity,
    local_target_store,
    pwrite_all,
    remove_journal,
    write_journal,
)
from ..tiling.levels import Level
from .headers import check_rendered, render_internal
from .layout import Counters, aligned, room_for
from .tables import Tables

__all__ = ["LocalInternal", "RemoteInternal", "rewrite_into", "rewrite_staged"]

#: a rewrite copies tiles in batches of about this many bytes
_BATCH_BYTES = 64 << 20
#: table entries of tiles spooled locally (object stores) start here
_SPOOL = 1 << 62


def rewrite_into(out: IO[bytes], header: Header, prefix: str, tables: Tables,
                 fetch: Callable[[Sequence[tuple[int, int]]], list[Any]], min_room: int,
                 policy: Policy, name: Any) -> tuple[Tables, Header, int, int]:
    """Write a fresh file to ``out``: a header room of at least ``min_room`` bytes, then
    every tile the tables name, back to back in global order (``fetch`` reads the bytes of
    a list of entries). Returns the relocated tables, the header (parsed back), its length
    and the room."""
    live = list(tables.tiles())
    room = min_room
    for _ in range(16):
        moved, at = tables.copy(), room
        for lv, i, (_, size) in live:
            moved.relocate(lv.index, i, (at, size))
            at += size
        offs, sizes = moved.internal_tables()
        head = render_internal(header, prefix, offs, sizes, moved.metadata(), room,
                               "contiguous")
        if len(head) <= room:
            break
        room = aligned(2 * len(head))
    parsed = check_rendered(head, policy, name)
    out.write(head)
    out.write(b"\0" * (room - len(head)))
    batch: list[tuple[int, int]] = []
    held = 0
    for _, _, entry in live:
        batch.append(entry)
        held += entry[1]
        if held >= _BATCH_BYTES:
            _copy(out, fetch(batch), batch)
            batch, held = [], 0
    _copy(out, fetch(batch), batch)
    return moved, parsed, len(head), room


def rewrite_staged(store: Any, key: str, header: Header, prefix: str, tables: Tables,
                   fetch: Callable[[Sequence[tuple[int, int]]], list[Any]], header_len: int,
                   lock: Any, counters: Counters, policy: Policy, name: Any
                   ) -> tuple[Tables, Header, int, int]:
    """A commit by rewrite: :func:`rewrite_into` a staged replacement of ``key`` in
    ``store`` (room for the header to grow), the lock refreshed just before the staged file
    replaces the old one; on any failure the staged file goes and the old one stays."""
    nstored = sum(lv.grid.ntiles for lv in tables.levels if lv.stored)
    staged = store.stage(key)
    try:
        done = rewrite_into(staged.file, header, prefix, tables, fetch,
                            room_for(header_len, nstored), policy, name)
        counters.wrote(staged.file.tell())
        lock.refresh()
        staged.commit()
    except BaseException:
        staged.abort()
        raise
    return done


def _copy(out: IO[bytes], datas: list[Any], entries: list[tuple[int, int]]) -> None:
    for data, (off, size) in zip(datas, entries, strict=True):
        if len(data) != size:
            raise DataError(f"tile bytes {off}..{off + size}: the file ended early")
        out.write(data)


class _Positional:
    """Byte ranges of a file that grows while it is read (:func:`jnrrd._platform.pread`:
    a positional read, elsewhere a seek and a read under the lock its ``pwrite`` takes)."""

    def __init__(self, file: Any) -> None:
        self.file = file
        self.fd = file.fileno()

    def get_range(self, start: int, stop: int) -> bytes:
        parts, at = [], start
        while at < stop:
            piece = _platform.pread(self.fd, stop - at, at)
            if not piece:
                break
            parts.append(piece)
            at += len(piece)
        data = b"".join(parts) if len(parts) != 1 else parts[0]
        if len(data) != stop - start:
            raise DataError("file ended early")
        return data

    def close(self) -> None:
        """The file is closed by its owner."""


class LocalInternal:
    """An internal editable file on the local disk (see the module doc)."""

    external = False
    remote = False

    def __init__(self, file: Any, path: str, *, header_len: int, room: int | None,
                 durable: bool) -> None:
        self.counters = Counters()
        #: the header of the last commit (parsed back)
        self.header: Header | None = None
        self.path = os.path.abspath(path)
        self.durable = durable
        self._open(file, header_len, room)

    def _open(self, file: Any, header_len: int, room: int | None) -> None:
        #: the file, opened for reading and writing (positional reads and writes on its
        #: descriptor)
        self.file = file
        self.reader = _Positional(self.file)
        self.identity = file_identity(self.file.fileno())
        #: the header's length on disk, and its room (None: not written for editing)
        self.header_len, self.room = header_len, room
        size = os.fstat(self.file.fileno()).st_size
        self.end = self.committed_end = max(size, room or 0)
        #: starts writing staged tiles back to disk as they come: the commit's fsync then
        #: finds little left to flush (storage.writeback)
        self.write_back = WriteBack(self.durable)

    def read(self, level: Level, coords: tuple[int, ...], index: int, entry: Any
             ) -> bytes | memoryview | None:
        if entry is None:
            return None
        off, size = entry
        try:
            data = self.reader.get_range(off, off + size)
        except DataError:
            raise DataError(f"{self.path}: level {level.index} tile {list(coords)}: bytes "
                            f"{off}..{off + size} run past the end of the file") from None
        self.counters.read(size)
        return data

    def stage(self, level: Level, coords: tuple[int, ...], index: int, data: Any) -> Any:
        view = memoryview(data).cast("B")
        off = self.end
        pwrite_all(self.reader.fd, view, off)
        self.write_back.wrote(self.file, len(view))
        self.end += len(view)
        self.counters.wrote(len(view))
        return off, len(view)

    def retire(self, level: Level, coords: tuple[int, ...], index: int, entry: Any) -> None:
        """Superseded bytes stay where they are (dead bytes, until ``jnrrd.compact``)."""

    def prefetch(self, level: Level, items: list[tuple[tuple[int, ...], int, Any]]
                 ) -> list[Any]:
        """A local file is read tile by tile (:meth:`take` reads it)."""
        return [entry for _, _, entry in items]

    def take(self, level: Level, coords: tuple[int, ...], pending: Any
             ) -> bytes | memoryview | None:
        return self.read(level, coords, level.grid.index(coords), pending)

    def publish(self, header: Header, prefix: str, tables: Tables, lock: Any,
                policy: Policy, name: Any) -> Tables:
        if self.room is not None:
            offs, sizes = tables.internal_tables()
            head = render_internal(header, prefix, offs, sizes, tables.metadata(), self.room,
                                   "chunked")
            if len(head) <= self.room:
                self.header = check_rendered(head, policy, name)
                with durability(self.durable):
                    self._in_place(head, lock)
                return tables
        return self.rewrite(header, prefix, tables, lock, policy, name)

    def _in_place(self, head: bytes, lock: Any) -> None:
        """Tiles durable, header to the journal, header in place, journal gone."""
        fd = self.file.fileno()
        self.write_back.join()
        if self.durable:
            os.fsync(fd)
        lock.refresh()
        data = head + b"\0" * max(0, self.header_len - len(head))
        write_journal(self.path, self.identity, data)
        self.counters.journal_bytes += len(data)
        self.counters.wrote(len(data))
        pwrite_all(fd, memoryview(data), 0)
        self.counters.wrote(len(data))
        if self.durable:
            os.fsync(fd)
        remove_journal(self.path)
        self.header_len = len(head)
        self.committed_end = self.end

    def rewrite(self, header: Header, prefix: str, tables: Tables, lock: Any,
                policy: Policy, name: Any) -> Tables:
        store, key = local_target_store(self.path)
        with durability(self.durable):
            new, self.header, head_len, room = rewrite_staged(
                store, key, header, prefix, tables, self._fetch, self.header_len, lock,
                self.counters, policy, name)
        self.close()
        remove_journal(self.path)
        self._open(open(self.path, "r+b", buffering=0), head_len, room)
        return new

    def _fetch(self, entries: Sequence[tuple[int, int]]) -> list[Any]:
        out = []
        for off, size in entries:
            out.append(self.reader.get_range(off, off + size))
            self.counters.read(size)
        return out

    def abort(self) -> None:
        """Cut the staged tiles off the end of the file (no reader names them)."""
        if self.end > self.committed_end:
            with contextlib.suppress(OSError):
                os.ftruncate(self.file.fileno(), self.committed_end)
        self.end = self.committed_end

    def close(self) -> None:
        self.write_back.join()
        self.reader.close()
        self.file.close()


class RemoteInternal:
    """An internal editable object on an object store (see the module doc)."""

    external = False
    remote = True

    def __init__(self, wstore: Any, key: str, rstore: Any, *, header_len: int) -> None:
        self.counters = Counters()
        #: the header of the last commit (parsed back)
        self.header: Header | None = None
        self.wstore, self.key, self.rstore = wstore, key, rstore
        self.header_len = header_len
        self.spool = tempfile.TemporaryFile()
        self._spool_lock = threading.Lock()
        self._spool_end = 0
        self._reader: Any = None

    def _object(self) -> Any:
        if self._reader is None:
            self._reader = self.rstore.open_reader(self.key)
        return self._reader

    def read(self, level: Level, coords: tuple[int, ...], index: int, entry: Any
             ) -> bytes | memoryview | None:
        if entry is None:
            return None
        return self._fetch([entry])[0]

    def stage(self, level: Level, coords: tuple[int, ...], index: int, data: Any) -> Any:
        view = memoryview(data).cast("B")
        with self._spool_lock:
            off = self._spool_end
            self.spool.seek(off)
            self.spool.write(view)
            self._spool_end += len(view)
        self.counters.wrote(len(view))
        return _SPOOL + off, len(view)

    def retire(self, level: Level, coords: tuple[int, ...], index: int, entry: Any) -> None:
        """The next commit rewrites the object without it."""

    def prefetch(self, level: Level, items: list[tuple[tuple[int, ...], int, Any]]
                 ) -> list[Any]:
        """The object's ranges merged into few requests, all in flight (spooled tiles are
        read at once)."""
        remote = [(i, e) for i, (_, _, e) in enumerate(items) if e is not None and e[0] < _SPOOL]
        out: list[Any] = [None if e is None else ("now", e) for _, _, e in items]
        if remote:
            slices = self._object().fetch_many([(off, off + size) for _, (off, size) in remote])
            for (i, (_, size)), sl in zip(remote, slices, strict=True):
                out[i] = ("later", sl, size)
        return out

    def take(self, level: Level, coords: tuple[int, ...], pending: Any
             ) -> bytes | memoryview | None:
        if pending is None:
            return None
        if pending[0] == "now":
            return self._fetch([pending[1]])[0]
        data = pending[1].result()
        self.counters.read(pending[2])
        return data

    def publish(self, header: Header, prefix: str, tables: Tables, lock: Any,
                policy: Policy, name: Any) -> Tables:
        return self.rewrite(header, prefix, tables, lock, policy, name)

    def rewrite(self, header: Header, prefix: str, tables: Tables, lock: Any,
                policy: Policy, name: Any) -> Tables:
        new, self.header, head_len, _ = rewrite_staged(
            self.wstore, self.key, header, prefix, tables, self._fetch, self.header_len, lock,
            self.counters, policy, name)
        self.header_len = head_len
        self._reader = None  # a new object (and ETag) from now on
        self.abort()
        return new

    def _fetch(self, entries: Sequence[tuple[int, int]]) -> list[Any]:
        out: list[Any] = [None] * len(entries)
        remote = [(i, off, size) for i, (off, size) in enumerate(entries) if off < _SPOOL]
        if remote:
            got = self._object().get_ranges([(off, off + size) for _, off, size in remote])
            for (i, _, size), data in zip(remote, got, strict=True):
                out[i] = data
                self.counters.read(size)
        with self._spool_lock:
            for i, (off, size) in enumerate(entries):
                if off >= _SPOOL:
                    self.spool.seek(off - _SPOOL)
                    out[i] = self.spool.read(size)
                    self.counters.read(size)
        return out

    def abort(self) -> None:
        with self._spool_lock:
            self.spool.seek(0)
            self.spool.truncate()
            self._spool_end = 0

    def close(self) -> None:
        self.spool.close()
