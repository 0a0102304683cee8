"""Where bytes live: the store protocols, their implementations, and the one public face the
rest of jnrrd imports them through.

A store holds objects under keys: ``'/'``-separated names relative to the store's root (a
header's ``data_file`` or a tile file name, as the header spells it). The tiling layer says
which key and byte range hold a tile (:mod:`jnrrd.tiling.locate`), a store fetches those bytes,
the engine decodes them; nothing here knows about headers, tiles or codecs.

**The face.** Every module outside ``jnrrd/storage/`` imports storage through this package
(``from jnrrd.storage import open_source``), never a submodule (tests/test_architecture.py checks
it): the names in :data:`__all__` are the whole interface, and the modules behind them can
move. The local names are imported with this package; the remote ones (:data:`_REMOTE`:
:class:`~.remote.RemoteStore`, :func:`~.remote.filesystem`, ...) load on first use, so a
program that reads and writes local files never imports fsspec, aiohttp, asyncio or ssl. A
module that needs a remote name imports it where it handles a URL (inside the function), and
for annotations under ``TYPE_CHECKING``.

The modules behind the face:

- :mod:`.protocols`: :class:`Store`, :class:`WriteStore`, :class:`Staged`;
- :mod:`.urls`: whether a source is a URL, a remote URL, or a ``file://`` path (nothing
  remote imported);
- :mod:`.objects`: the read seam every store shares (``get_ranges`` over objects held open
  or opened per call, :class:`~.objects.RangeStream`, :class:`~.objects.StreamStore`);
- :mod:`.local`: files on the local disk (path confinement under the reader's policy, only
  regular files opened, memory maps and ``pread``);
- :mod:`.fileobj`: a caller's binary stream as a reader of one object;
- :mod:`.resolve`: a path, file object or URL → store, key and opened reader;
- :mod:`.remote`, :mod:`.remote_fetch`, :mod:`.remote_http`, :mod:`.remote_stream`,
  :mod:`.aio`: objects behind fsspec URLs (range requests merged and checked, HTTP answers
  checked, requests on one event loop); :mod:`.remote_obstore`,
  :mod:`.remote_obstore_fetch`: the same through obstore;
- :mod:`.keys`, :mod:`.validators`, :mod:`.bodies`: the rules every remote backend applies
  (keys confined as the server will see them, one version per read, bodies bounded by the
  request);
- :mod:`.version_check`: a remote object's version token asked again (Dask and xarray tasks
  check that the object is still the one their graph was built from);
- :mod:`.writes`: the write half on the local disk (:class:`WriteStore`: objects put under
  fresh names, staged objects committed by atomic replace, ``fsync``), with
  :mod:`.writeback` (positional writes, in-kernel copies, the write-back flusher) and
  :mod:`.names` (fresh tokens, temporary names);
- :mod:`.remote_writes`: the write half on object stores (fsspec URLs): tiles put
  concurrently, staged objects in local temporary files uploaded as one object at commit;
- :mod:`.targets`: a write's target (a path or a URL) → its write store and key;
- :mod:`.atomic`, :mod:`.leftovers`, :mod:`.ownership`: atomic replacement, the leftovers of
  interrupted writes, and what a write target provably owns (the only names cleanup removes);
- :mod:`.journal`, :mod:`.locks`: an in-place edit's undo journal and its writer lock.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .atomic import durability, reported_as
from .fileobj import StreamReader
from .journal import file_identity, journal_path, read_journal, remove_journal, write_journal
from .leftovers import STALE_AFTER, cleanup, write_guard
from .local import LocalStore, file_version, open_resolved, resolve_path
from .locks import STALE_AFTER as LOCK_STALE_AFTER
from .locks import acquire, lock_name
from .names import MARK, TOKEN_RE, fresh_token, stem, tmp_marker
from .objects import RangeStream, StreamStore
from .protocols import Staged, Store, WriteStore
from .resolve import Opened, open_source, opened
from .targets import local_target, target_store
from .urls import is_remote, is_url, local_path
from .writeback import WriteBack, pwrite_all
from .writes import LocalWriteStore, atomic_file
from .writes import target_store as local_target_store

if TYPE_CHECKING:  # the remote names, for type checkers (loaded on first use at run time)
    from .remote import RemoteStore, filesystem
    from .remote_stream import opener_of
    from .remote_writes import RemoteWriteStore, check_writable
    from .version_check import VersionCheck

#: remote name -> the module that defines it (imported on first use: fsspec, aiohttp and the
#: event loop come with it)
_REMOTE = {
    "RemoteStore": "remote", "filesystem": "remote",
    "opener_of": "remote_stream",
    "RemoteWriteStore": "remote_writes", "check_writable": "remote_writes",
    "VersionCheck": "version_check",
}

__all__ = [
    "LOCK_STALE_AFTER",
    "MARK",
    "STALE_AFTER",
    "TOKEN_RE",
    "LocalStore",
    "LocalWriteStore",
    "Opened",
    "RangeStream",
    "RemoteStore",
    "RemoteWriteStore",
    "Staged",
    "Store",
    "StreamReader",
    "StreamStore",
    "VersionCheck",
    "WriteBack",
    "WriteStore",
    "acquire",
    "atomic_file",
    "check_writable",
    "cleanup",
    "durability",
    "file_identity",
    "file_version",
    "filesystem",
    "fresh_token",
    "is_remote",
    "is_url",
    "journal_path",
    "local_path",
    "local_target",
    "local_target_store",
    "lock_name",
    "open_resolved",
    "open_source",
    "opened",
    "opener_of",
    "pwrite_all",
    "read_journal",
    "remove_journal",
    "reported_as",
    "resolve_path",
    "stem",
    "target_store",
    "tmp_marker",
    "write_guard",
    "write_journal",
]


if not TYPE_CHECKING:  # hidden from type checkers, so that a misspelt name stays an error

    def __getattr__(name: str) -> Any:
        """A remote name (:data:`_REMOTE`), imported on first use."""
        module = _REMOTE.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        globals()[name] = value  # later lookups skip this function
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_REMOTE))
