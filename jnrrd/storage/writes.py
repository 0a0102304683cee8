"""The write half of local storage: whole objects put under fresh names, staged objects made
visible at once by an atomic replace, ``fsync`` of what a write made
(docs/format.md#writer-layout-and-atomicity "Writer layout and atomicity").

A writer decides WHAT goes where (tables, layout, header space); this module does the byte
handling on the local disk: creating files and directories, positional writes, in-kernel
copies, the write-back flusher, ``fsync``, ``os.replace`` and the directory ``fsync``. Keys are
``'/'``-separated names under the store's root (the target's directory). Another store (an
object store) implements the same methods (:class:`jnrrd.storage.WriteStore`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from typing import IO, Any

from .atomic import durable, remove_leftovers, replace, reported_as
from .names import fresh_token, tmp_marker
from .ownership import case_insensitive, claim, open_plain, read_head, referenced_names
from .protocols import Staged
from .writeback import WriteBack, copy_range, pwrite_all

__all__ = ["LocalWriteStore", "StagedFile", "atomic_file", "target_store"]


class StagedFile:
    """A new object written beside its key, made visible under the key at once by
    :meth:`commit` (``fsync``, ``os.replace``, directory ``fsync``) or removed by
    :meth:`abort`.

    :attr:`file` is the open temporary file (sequential writes and seeks); :meth:`write_at`
    writes at an offset from any thread. With ``write_back`` the bytes written are written back
    to disk in the background as they come, so the commit's ``fsync`` finds little left.
    """

    def __init__(self, target: str, token: str, *, durable: bool, random_access: bool = False,
                 write_back: bool = False) -> None:
        self.target = target
        self.tmp = f"{tmp_marker(target)}{token}"
        self.durable = durable
        self._paths = [self.tmp]
        self._scratch: list[IO[bytes]] = []
        self._final: str | None = None  # a fresh layout made by relayout()
        self._committed: str | None = None
        self._closed = False
        self.file: IO[bytes] = open(self.tmp, "w+b" if random_access else "wb")
        self.fd = self.file.fileno()
        self._wb = WriteBack(durable) if write_back else None

    def write(self, data: Any) -> None:
        """Write ``data`` at the file's position."""
        self.file.write(data)
        if self._wb is not None:
            self._wb.wrote(self.file, len(data))

    def write_at(self, data: memoryview, offset: int) -> None:
        """Write all of ``data`` at ``offset`` (positional, thread-safe; report it with
        :meth:`wrote` for the write-back)."""
        pwrite_all(self.fd, data, offset)

    def wrote(self, nbytes: int) -> None:
        """Note ``nbytes`` written by :meth:`write_at` (for the write-back)."""
        if self._wb is not None:
            self._wb.wrote(self.file, nbytes)

    def scratch(self, suffix: str) -> IO[bytes]:
        """A scratch file beside the staged one (``<temporary name><suffix>``), removed with
        it."""
        path = f"{self.tmp}{suffix}"
        self._paths.append(path)
        f = open(path, "w+b")
        self._scratch.append(f)
        return f

    def append(self, src: IO[bytes], size: int) -> None:
        """Copy the first ``size`` bytes of ``src`` (a scratch file) to the file's position."""
        copy_range(src, self.file, size)

    def relayout(self, head: bytes, first: int, tail_from: int) -> None:
        """Lay the object out again in a fresh file: ``head``, zeros up to ``first``, then
        the bytes of this one from ``tail_from`` on (``fsync``ed); :meth:`commit` then makes
        that one visible."""
        self.file.flush()
        fresh = self.tmp + ".exact"
        self._paths.append(fresh)
        with open(fresh, "wb") as out, open(self.tmp, "rb") as tail:
            out.write(head)
            out.write(b"\0" * (first - len(head)))
            tail.seek(tail_from)
            shutil.copyfileobj(tail, out, 8 << 20)
            out.flush()
            if self.durable:
                os.fsync(out.fileno())
        self._final = fresh

    def commit(self) -> None:
        """Flush, ``fsync`` (when durable), close, and replace the key's object by this one."""
        final = self._final
        if final is None:
            self.file.flush()
            if self._wb is not None:
                self._wb.join()
            if self.durable:
                os.fsync(self.fd)
            final = self.tmp
        self.close()
        replace(final, self.target)
        self._committed = final
        self._unlink()  # scratch files, and the first layout after relayout()

    def abort(self) -> None:
        """Remove the staged object (and its scratch files) without touching the key's."""
        self.close()
        self._unlink()

    def close(self) -> None:
        """Close the files (idempotent); the temporary names stay until commit or abort."""
        if self._closed:
            return
        self._closed = True
        if self._wb is not None:
            self._wb.join()
        self.file.close()
        for f in self._scratch:
            f.close()

    def _unlink(self) -> None:
        paths, self._paths = self._paths, []
        for p in paths:
            if p != self._committed:
                with contextlib.suppress(OSError):
                    os.unlink(p)

    def __enter__(self) -> StagedFile:
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        try:
            if kind is None:
                self.commit()
        finally:
            self.abort()


class LocalWriteStore:
    """A directory on the local disk as the target of a write; keys are names under it.

    ``durable`` (read when the store is made, in the writing thread: see
    :func:`jnrrd.storage.atomic.durability`) says whether :meth:`sync` and commits
    ``fsync``.
    """

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self.durable = durable()

    def path(self, key: str) -> str:
        """The local path of ``key``."""
        return os.path.join(self.root, key)

    def put(self, key: str, data: Any) -> None:
        """Write a whole object under ``key`` (a fresh name: not atomic, not synced)."""
        path = self.path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)

    def reserve(self, prefix: str) -> None:
        """Claim a fresh prefix for :meth:`put` (a new directory; ``FileExistsError`` when
        taken); the running write's journal records it first."""
        claim(self.path(prefix))
        os.makedirs(self.path(prefix))

    def sync(self, prefix: str) -> None:
        """``fsync`` every object put under ``prefix`` (when durable)."""
        if not self.durable:
            return
        for root, _, files in os.walk(self.path(prefix)):
            for name in files:
                fd = os.open(os.path.join(root, name), os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)

    def append_object(self, staged: Staged, key: str, size: int) -> None:
        """Append the first ``size`` bytes of the object ``key`` to ``staged`` (an in-kernel
        copy where the system has one)."""
        with open(self.path(key), "rb") as f:
            staged.append(f, size)

    def delete(self, key: str) -> None:
        """Remove the object ``key`` (``FileNotFoundError`` when absent)."""
        os.unlink(self.path(key))

    def discard(self, prefix: str) -> None:
        """Remove everything under ``prefix`` (best effort)."""
        shutil.rmtree(self.path(prefix), ignore_errors=True)

    def owned(self, key: str) -> list[str]:
        """The fresh data files and tile directories the current header at ``key`` references
        and a write to ``key`` made (:func:`~jnrrd.storage.ownership.referenced_names`; names
        compared ignoring case only on a case-insensitive disk): what a rewrite of ``key``
        removes once its new header is in place. The running write's journal records them
        first, so a write killed after the replace leaves evidence of them. Empty when there
        is no such header (or it is a link, or cannot be read)."""
        path = self.path(key)
        f = open_plain(path)
        if f is None:
            return []
        try:
            with f:
                head = read_head(f)
        except OSError:
            return []
        names = referenced_names(head, os.path.basename(path), casefold=case_insensitive(path))
        for n in names:
            claim(self.path(n))
        return names

    def tidy(self, key: str, *, keep: Iterable[str] = (), owned: Iterable[str] = ()
             ) -> list[str]:
        """Remove the temporary files of ``key`` and the names in ``owned`` (what
        :meth:`owned` said its previous header referenced) except the keys in ``keep``
        (:func:`~jnrrd.storage.atomic.remove_leftovers`); return their paths."""
        return remove_leftovers(self.path(key), keep=[self.path(k) for k in keep],
                                patterns=[re.escape(n) for n in owned])

    def stage(self, key: str, *, token: str | None = None, random_access: bool = False,
              write_back: bool = False) -> StagedFile:
        """A new object for ``key``, visible only once committed (``token`` names its
        temporary file; ``random_access`` opens it for reading too; ``write_back`` flushes
        it to disk in the background while it is written)."""
        claim(self.path(key))  # a fresh data file: the journal records it (not the target)
        return StagedFile(self.path(key), token or fresh_token(), durable=self.durable,
                          random_access=random_access, write_back=write_back)


def target_store(target: str) -> tuple[LocalWriteStore, str]:
    """The store a write to the path ``target`` goes through, and the target's key in it."""
    path = os.path.abspath(target)
    return LocalWriteStore(os.path.dirname(path)), os.path.basename(path)


@contextlib.contextmanager
def atomic_file(target: str) -> Iterator[IO[bytes]]:
    """Write ``target`` atomically: yields a temporary file beside it, replaced on success.

    An ``OSError`` names ``target`` (as given), never the temporary file (see
    :func:`~jnrrd.storage.atomic.reported_as`).
    """
    given = target
    with reported_as(given):
        staged = StagedFile(os.path.abspath(target), fresh_token(), durable=durable())
        try:
            yield staged.file
            staged.commit()
        except BaseException:
            staged.abort()
            raise
