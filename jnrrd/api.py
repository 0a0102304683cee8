"""The public read/open/write functions (docs/api.md)."""

from __future__ import annotations

import dataclasses
import os
from typing import IO, TYPE_CHECKING, Any, Unpack, cast

import numpy as np

from ._config import settings_for
from .engine.assemble import assemble_volume
from .engine.cache import default_cache_bytes
from .engine.indexing import no_such_level
from .engine.volume import Volume
from .errors import ArgumentError, UnsupportedError, check_index_order, where
from .header import CoreFields, Header, check_header_end, core_fields, parse_header
from .header.foreign import check_not_a_folder
from .header.geometry_fields import canonical_space
from .policy import POLICY_FIELDS, IOSettings, Policy, PolicyOptions
from .storage import Opened, file_version, is_remote, local_path, open_source, opened
from .tiling.spec import TILE_URI, Tiling, parse_tiling

if TYPE_CHECKING:
    from .storage import RemoteStore

__all__ = ["Reopen", "check_header", "open", "read", "read_header"]

_NRRD_MAGIC = b"NRRD000"


def _is_nrrd(f: IO[bytes]) -> bool:
    try:
        head = f.peek(8)[:8] if hasattr(f, "peek") else None
    except (OSError, ValueError):
        head = None
    if head is None:
        pos = f.tell()
        head = f.read(8)
        f.seek(pos)
    if not isinstance(head, (bytes, bytearray, memoryview)):
        raise TypeError("source must be a path or a binary file object (opened with 'rb'), "
                        f"not a text stream ({type(f).__name__})")
    return bytes(head).startswith(_NRRD_MAGIC)


def read_header(source: Any, *, storage_options: dict[str, Any] | None = None,
                policy: Policy | None = None, io: IOSettings | None = None,
                **policy_options: Unpack[PolicyOptions]) -> Header:
    """Read only the header of a JNRRD (or classic NRRD) file (a path, URL or stream).

    ``policy``/``io`` and the policy keywords: as for :func:`open`.
    """
    pol = settings_for("jnrrd.read_header()", policy=policy, io=io, options=policy_options)
    check_not_a_folder(source)
    with opened(source, pol, storage_options) as src:
        f = src.stream = _consistent(src, pol)
        if _is_nrrd(f):
            from .nrrd.reader import read_nrrd_header

            return read_nrrd_header(f, policy=pol, source=source)[0]
        header, data_start = parse_header(f, policy=pol, source=src.name)
        check_header_end(header, data_start, src.name)
    space = canonical_space(header.get("space"))
    if space is not None:
        header["space"] = space  # as read() gives it; an unknown name is left for the checks
    return header


def open(
    source: Any, *, index_order: str = "F", missing: str = "error",
    cache_bytes: int | None = None, threads: int | None = None,
    storage_options: dict[str, Any] | None = None, policy: Policy | None = None,
    io: IOSettings | None = None, **policy_options: Unpack[PolicyOptions]
) -> Volume:
    """Open a JNRRD file lazily: slicing the returned :class:`Volume` reads only what it needs.

    ``source`` is a path, an fsspec URL (``s3://``, ``https://``, ...; ``storage_options``
    go to fsspec unchanged) or a binary file object (left open). ``missing="fill"`` reads
    absent external tile files as padding. ``cache_bytes``: the budget of the volume's cache
    of decoded tiles, shared by all its levels (0: off; ``None``: the default for the storage
    kind, 0 for a local file, 256 MiB for a URL; docs/api.md). ``threads``: tiles decoded at
    once by each read (``None``: the ``jnrrd.config`` setting, else the CPUs the process may
    use). ``policy`` (a :class:`jnrrd.Policy`) and the policy keywords (its fields by name:
    caps and path rules, docs/security.md) say what the reader may do; ``io`` (a
    :class:`jnrrd.IOSettings`) how it does its I/O. Settings not given come from
    :data:`jnrrd.config` as it is now; the volume keeps them (docs/api.md, "Configuration").
    """
    pol = settings_for("jnrrd.open()", policy=policy, io=io, options=policy_options,
                       cache_bytes=cache_bytes, threads=threads)
    return _open(source, index_order, missing, storage_options, pol)


def _open(source: Any, index_order: str, missing: str,
          storage_options: dict[str, Any] | None, pol: Policy,
          cache_bytes: int | None = None) -> Volume:
    """:func:`open` with its settings resolved (``cache_bytes``: overrides ``pol.io``'s)."""
    if cache_bytes is None:
        cache_bytes = pol.io.cache_bytes
    check_index_order(index_order, source)
    if missing not in ("error", "fill"):
        raise ArgumentError(f"{where(source, 'missing')}expected 'error' or 'fill', got "
                            f"{missing!r:.80}")
    check_not_a_folder(source)  # a DICOM series or a Zarr store: say so, and how to convert
    src = open_source(source, pol, storage_options)
    by_path = isinstance(source, (str, os.PathLike))
    base = pol
    if src.remote:  # detached data files: the URLs the store resolved, opened through it
        from .storage import opener_of

        pol = Policy.from_kwargs(pol, opener=opener_of(cast("RemoteStore", src.store)))
        if cache_bytes is None:
            cache_bytes = default_cache_bytes(remote=True)
    try:
        src.stream = _consistent(src, pol)
        # the version of the file this stream reads (fstat: even if the path was replaced)
        version = (cast(Any, src.stream).reader.version if src.remote
                   else file_version(src.stream.fileno()) if by_path else None)
        if _is_nrrd(src.stream):
            from .nrrd.reader import open_nrrd

            vol = open_nrrd(src.stream, path=src.path, store=src.store, policy=pol,
                            name=src.name, index_order=index_order, src=src)
            src.close()
        else:
            header, data_start = parse_header(src.stream, policy=pol, source=src.name)
            check_header_end(header, data_start, src.name)
            core, tiling = check_header(header, policy=pol, source=src.name)
            vol = assemble_volume(header, core, tiling, src, data_start, pol, index_order,
                                  missing, cache_bytes)
    except BaseException:
        src.close()
        raise
    if by_path:
        vol.reopen = Reopen.of(source, index_order, missing, base, version=version,
                               storage_options=storage_options)
    return vol


def _consistent(src: Opened, pol: Policy) -> IO[bytes]:
    """The source's stream, its header checked against an in-place commit in progress or
    interrupted (``jnrrd.editing.consistent``; local files only: objects are replaced
    whole)."""
    if src.remote or src.path is None or not src.owned:
        return src.stream
    from .editing.consistent import consistent_stream

    return consistent_stream(src.stream, src.path, pol.max_header_bytes)


@dataclasses.dataclass(frozen=True)
class Reopen:
    """How to open a path source again, in another thread or process: hashable, picklable.

    :func:`open` hands one to every volume it opens by path (``Volume.reopen``). The Dask and
    xarray integrations call it where they need the file again (a worker, a per-process
    cache) instead of importing the opener, and use it, with a stamp of the file, as the key
    of their cache of open volumes.
    """

    path: str  # absolute, or a URL
    index_order: str
    missing: str
    policy: tuple[tuple[str, Any], ...]  # every Policy keyword, by name
    #: the file's version token when it was opened (``storage.local.file_version``, or a
    #: remote object's ETag/generation and size); not part of equality or hash. Unpickling a
    #: volume (and every Dask task) compares it with the re-opened file's.
    version: Any = dataclasses.field(default=None, compare=False)
    #: ``open(..., cache_bytes=)`` as given (``None``: the default); a re-opened volume gets
    #: a cache of its own with the same budget (also in :attr:`io`)
    cache_bytes: int | None = None
    #: a URL's ``storage_options`` (passed to fsspec again); not part of equality or hash,
    #: :attr:`options_key` stands for them there
    storage_options: dict[str, Any] | None = dataclasses.field(default=None, compare=False)
    options_key: str = ""
    #: the I/O settings it was opened with (threads, cache, remote requests)
    io: IOSettings = IOSettings()

    @classmethod
    def of(cls, source: str | os.PathLike[str], index_order: str, missing: str,
           policy: Policy, *, version: Any = None,
           storage_options: dict[str, Any] | None = None) -> Reopen:
        """The re-opener of a path or URL ``source`` opened with the settings ``policy``
        (with its ``io``)."""
        items = tuple((name, getattr(policy, name)) for name in POLICY_FIELDS)
        path = os.fspath(source)
        if not is_remote(local_path(path)):
            path = os.path.abspath(local_path(path))
        options = dict(storage_options) if storage_options else None
        return cls(path, index_order, missing, items, version, policy.io.cache_bytes, options,
                   repr(sorted(options.items(), key=lambda kv: kv[0])) if options else "",
                   policy.io)

    def settings(self) -> Policy:
        """The policy (with its I/O settings) the file was opened with."""
        return Policy.from_kwargs(**dict(self.policy)).with_io(self.io)

    def __call__(self) -> Volume:
        """A new :class:`Volume` of the same file, opened with the same arguments."""
        return _open(self.path, self.index_order, self.missing, self.storage_options,
                     self.settings())


def check_header(header: Header, *, policy: Policy, source: Any = None
                 ) -> tuple[CoreFields, Tiling | None]:
    """Every check the reader runs on a parsed header before it touches data: the core fields
    and the tiling fields (the writer runs the same on the header it is about to write).

    Sets ``header["space"]`` to its canonical long form. Raises ``HeaderError`` (or another
    ``JnrrdError``) naming the field.
    """
    core = core_fields(header, source=source)
    if core.space is not None:
        header["space"] = core.space
    prefix = header.prefix_for(TILE_URI)
    if prefix is None and any(k.startswith("tile:") for k in header):
        prefix = header.tile_prefix()
    tiling = parse_tiling(header, core, prefix=prefix, policy=policy, source=source)
    if tiling is not None and tiling.storage == "internal" and any(
        header.get(k) is not None for k in ("data_file", "data_files", "data_file_pattern")
    ):
        raise UnsupportedError(f"{where(source)}internal tiling with detached data "
                               "(data_file*) is not supported")
    return core, tiling


def read(source: Any, *, level: int = 0, index_order: str = "F", missing: str = "error",
         storage_options: dict[str, Any] | None = None, out: np.ndarray | None = None,
         threads: int | None = None, policy: Policy | None = None,
         io: IOSettings | None = None, **policy_options: Unpack[PolicyOptions]
         ) -> tuple[np.ndarray, Header]:
    """Read a whole volume (or pyramid level) from a path, URL or stream: returns
    ``(data, header)``.

    With ``index_order="F"`` (default) ``data.shape == tuple(header["sizes"])`` (level 0);
    ``"C"`` gives the reversed shape, C-contiguous. ``out``: a writeable array of that shape
    and the volume's dtype, filled and returned as ``data`` (the caller reuses its memory;
    ``JnrrdError`` for another shape or dtype). ``threads``, ``policy``, ``io`` and the
    policy keywords: as for :func:`open`.
    """
    pol = settings_for("jnrrd.read()", policy=policy, io=io, options=policy_options,
                       threads=threads)
    # a whole remote level 0 is read once: no decoded-tile cache to fill on the way
    once = level == 0 and is_remote(local_path(source))
    vol = _open(source, index_order, missing, storage_options, pol, 0 if once else None)
    try:
        if not 0 <= level < len(vol.levels):
            raise no_such_level(vol.name, level, len(vol.levels))
        if out is not None:
            data = vol.levels[level].read(..., out=out)
        elif vol._untiled is not None and level == 0:
            data = vol._untiled.full()
            if vol.index_order == "C":
                data = data.T
        else:
            data = vol.levels[level][...]
        return data, vol.header
    finally:
        vol.close()
