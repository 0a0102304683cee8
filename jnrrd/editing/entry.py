"""The ways in: ``jnrrd.create``, ``jnrrd.open(path, mode="r+")`` and ``jnrrd.compact``
(docs/editing.md).

Opening for writing takes the writer's lock first (:mod:`jnrrd.storage.locks`), then
finishes an in-place commit a killed writer left in its journal, then reads the header
through the reader's checks and picks the layout: a local internal file, an internal object,
or an external dataset (local or on an object store).
"""

from __future__ import annotations

import dataclasses
import operator
import os
from typing import IO, Any

import numpy as np

from .._config import settings_for
from ..codecs import chain_is_self_delimiting, is_raw_chain
from ..errors import NoSuchFileError, UnsupportedError, check_index_order, where
from ..header import Header, check_header_end, parse_header, parse_header_bytes
from ..policy import IOSettings, Policy
from ..storage import (
    LOCK_STALE_AFTER,
    LocalStore,
    acquire,
    durability,
    file_identity,
    fresh_token,
    is_remote,
    journal_path,
    local_path,
    lock_name,
    open_source,
    pwrite_all,
    read_journal,
    remove_journal,
    stem,
    target_store,
)
from ..tiling.locate import core_itemsize, derive_sizes, derived_offsets, raw_tile_sizes
from ..writing.dispatch import tiled_plan
from .consistent import CHECKSUM, ROOM, consistent_stream, verify
from .external import External
from .headers import render_internal
from .internal import LocalInternal, RemoteInternal
from .layout import put_whole, room_for
from .tables import Tables
from .volume import DIRTY_BYTES, Session, WritableVolume

__all__ = ["compact", "create", "open_rw", "recover"]


def open_rw(source: Any, *, index_order: str = "F",
            storage_options: dict[str, Any] | None = None, stale_after: float = LOCK_STALE_AFTER,
            durable: bool = True, dirty_bytes: int = DIRTY_BYTES, threads: int | None = None,
            policy: Policy | None = None, io: IOSettings | None = None, **policy_options: Any
            ) -> WritableVolume:
    """Open a tiled JNRRD file (a path or a writable fsspec URL) for writing: see
    ``jnrrd.open(..., mode="r+")`` (``threads``, ``policy``, ``io`` and the policy keywords
    as for reading)."""
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError("mode 'r+' needs a path or URL (a volume is written in place and "
                        f"locked), not {type(source).__name__}")
    check_index_order(index_order, source)
    target = local_path(os.fspath(source))
    pol = settings_for("jnrrd.open(mode='r+')", policy=policy, io=io, options=policy_options,
                       threads=threads)
    wstore, key = target_store(target, storage_options)
    lock = _lock(target, wstore, key, stale_after)
    try:
        return _open_locked(target, source, wstore, key, lock, pol, storage_options,
                            index_order, durable, dirty_bytes)
    except BaseException:
        lock.release()
        raise


def _lock(target: str, wstore: Any, key: str, stale_after: float) -> Any:
    if is_remote(target):
        return acquire(target, fs=wstore.fs, fs_path=wstore.fs_path(lock_name(key)),
                       stale_after=stale_after)
    return acquire(target, stale_after=stale_after)


def recover(path: str, f: IO[bytes]) -> None:
    """Finish the in-place commit a killed writer left in the journal of ``path`` (opened
    for writing as ``f``): its header goes in place when the file's own fails its checksum
    (the write was cut), the journal goes in any case."""
    if not os.path.exists(journal_path(path)):
        return
    data = read_journal(path, file_identity(f.fileno()))
    f.seek(0)
    head = f.read(len(data)) if data is not None else b""
    if data is not None and verify(data) and verify(head) is False:
        pwrite_all(f.fileno(), memoryview(data), 0)
        os.fsync(f.fileno())
    remove_journal(path)


def _open_locked(target: str, source: Any, wstore: Any, key: str, lock: Any, pol: Policy,
                 storage_options: dict[str, Any] | None, index_order: str, durable: bool,
                 dirty_bytes: int, stats: tuple[bool, str | None] | None = None
                 ) -> WritableVolume:
    name = source if isinstance(source, str) else os.fspath(source)
    remote = is_remote(target)
    if remote:
        src = open_source(target, pol, storage_options)
        stream, store = src.stream, src.store
    else:
        try:
            own = open(target, "r+b")
        except FileNotFoundError as e:  # as jnrrd.open(mode="r") says it (NoSuchFileError)
            raise NoSuchFileError(e.errno, e.strerror, name) from None
        try:
            recover(target, own)
            stream = consistent_stream(own, target, pol.max_header_bytes)
        except BaseException:
            own.close()
            raise
        store = LocalStore(os.path.dirname(os.path.abspath(target)), pol, source=name)
    keep = False  # the layout keeps the stream (a local internal file)
    try:
        header, core, tiling, start = _parsed(stream, pol, name)
        if tiling.storage == "external":
            layout: Any = External(wstore, key, store, base_dir=tiling.base_dir,
                                   pattern=tiling.pattern, ntiled=len(tiling.axes),
                                   nlevels=len(tiling.levels), policy=pol, source=name)
            tables = Tables.of(tiling)
            layout.sweep(tables)
        else:
            size = (stream.reader.file_size if remote  # type: ignore[attr-defined]
                    else os.fstat(stream.fileno()).st_size)
            tiling, sizes = _internal_tables(tiling, core, start, size, name)
            tables = Tables.of(tiling, sizes)
            if remote:
                layout = RemoteInternal(wstore, key, store, header_len=start)
            else:
                layout = LocalInternal(stream, target, header_len=start,
                                       room=_room(header, tiling, start, sizes),
                                       durable=durable)
                keep = True
        session = Session(layout, lock, tiling.prefix, pol, name, int(dirty_bytes),
                          stats=stats)
        return WritableVolume(header, core, tiling, tables, session, index_order=index_order)
    except BaseException:
        if keep:
            layout.close()
        raise
    finally:
        if not keep:
            stream.close()


def _parsed(stream: IO[bytes], pol: Policy, name: Any) -> tuple[Header, Any, Any, int]:
    """The header, core fields, tiling and data start of a file that can be written."""
    if stream.read(8).startswith(b"NRRD000"):
        raise UnsupportedError(f"{where(name)}a classic NRRD file cannot be opened for "
                               f"writing: {_CONVERT}")
    stream.seek(0)
    header, data_start = parse_header(stream, policy=pol, source=name)
    check_header_end(header, data_start, name)
    from ..api import check_header

    core, tiling = check_header(header, policy=pol, source=name)
    if tiling is None:
        raise UnsupportedError(f"{where(name)}an untiled file cannot be opened for writing: "
                               f"{_CONVERT}")
    if core.type_name == "bfloat16" and pol.bfloat16 == "uint16":
        raise UnsupportedError(f"{where(name)}bfloat16 volumes are written as values: open "
                               "them with bfloat16='ml_dtypes' or 'float32'")
    return header, core, tiling, data_start if data_start is not None else 0


_CONVERT = ("convert it to a tiled JNRRD first (jnrrd.convert(src, 'out.jnrrd', tile=64), or "
            "jnrrd convert IN OUT.jnrrd --tile 64,64,64), then open that")


def _internal_tables(tiling: Any, core: Any, start: int, size: int, name: Any
                     ) -> tuple[Any, np.ndarray]:
    """The tiling with its offsets, and every tile's size, as the reader derives them."""
    itemsize = core_itemsize(core)
    offsets = tiling.offset_table
    raw = is_raw_chain(tiling.codecs)
    if offsets is None:
        offsets = derived_offsets(tiling, itemsize, start, name, raw=raw)
    sizes = tiling.size_table
    if sizes is None and raw:
        sizes = raw_tile_sizes(tiling, itemsize, offsets)
    sizes = derive_sizes(offsets, sizes, data_start=start, file_size=size, fixed_size=None,
                         self_delimiting=chain_is_self_delimiting(tiling.codecs),
                         fmt=tiling.format, prefix=tiling.prefix, source=name)
    return dataclasses.replace(tiling, offset_table=offsets), sizes


def _room(header: Header, tiling: Any, start: int, sizes: np.ndarray) -> int | None:
    """The header room of a file written for editing (its header carries its checksum and
    room, and no tile lies in the room); None for any other file (its first commit rewrites
    it)."""
    p = tiling.prefix + ":"
    room = header.get(p + ROOM)
    if not isinstance(room, int) or isinstance(room, bool) or header.get(p + CHECKSUM) is None:
        return None
    live = tiling.offset_table[tiling.offset_table >= 0]
    if start > room or (live.size and int(live.min()) < room):
        return None
    return room


def create(path: Any, shape: Any, dtype: Any, header: Any = None, *, tile: Any = 64,
           compression: str | None = "zstd", levels: Any = 1, downsample: str | None = None,
           fill_value: Any = 0, storage: str = "internal",
           storage_options: dict[str, Any] | None = None, index_order: str = "F",
           stale_after: float = LOCK_STALE_AFTER, durable: bool = True,
           dirty_bytes: int = DIRTY_BYTES, **options: Any) -> WritableVolume:
    """A new empty volume (every tile sparse, reading ``fill_value``), open for writing:
    see ``jnrrd.create``."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"create: expected a path or URL, not {type(path).__name__}")
    if storage not in ("internal", "external"):
        raise ValueError(f"storage must be 'internal' or 'external', got {storage!r}")
    target = local_path(os.fspath(path))
    sizes = tuple(operator.index(n) for n in shape) if not isinstance(shape, int) else (shape,)
    data = np.broadcast_to(np.zeros((), np.dtype(dtype)), sizes)  # the shape and type only
    if storage == "internal":
        options.setdefault("tile_format", "chunked")
    plan, build = tiled_plan(target, data, header, index_order=index_order, tile=tile,
                             compression=compression, levels=levels, downsample=downsample,
                             padding_value=fill_value, storage=storage, **options)
    wstore, key = target_store(target, storage_options)
    lock = _lock(target, wstore, key, stale_after)
    try:
        n = plan.nstored
        meta: list[dict[str, Any]] = [{} for _ in range(n)]
        with durability(durable):
            if storage == "internal":
                head = build(plan, [None] * n, [-1] * n, meta, None, None)
                parsed, _ = parse_header_bytes(head, source=path)
                room = room_for(len(head), n)
                body = render_internal(parsed, plan.prefix, [None] * n, [None] * n, None,
                                       room, "chunked")
                put_whole(wstore, key, body + b"\0" * (room - len(body)))
                if not is_remote(target):
                    remove_journal(target)
            else:
                base = f"{stem(key)}.{fresh_token()}.tiles"
                wstore.reserve(base)
                previous = wstore.owned(key)  # what the header being replaced references
                put_whole(wstore, key, build(plan, [None] * n, [], meta, base, None))
                wstore.tidy(key, keep=[base], owned=previous)
        return _open_locked(target, path, wstore, key, lock, Policy(), storage_options,
                            index_order, durable, dirty_bytes,
                            stats=(plan.tile_stats, plan.checksum))
    except BaseException:
        lock.release()
        raise


def compact(path: Any, *, storage_options: dict[str, Any] | None = None, **policy: Any
            ) -> int:
    """Rewrite a tiled file (or external dataset) without superseded tile bytes, its tiles
    back to back after a fresh header room; return the bytes it no longer holds. Takes the
    writer's lock (``LockError`` while a writer holds the volume)."""
    from .info import dead_bytes

    with open_rw(path, storage_options=storage_options, **policy) as vol:
        before = dead_bytes(vol)
        vol._compact()
    return before or 0
