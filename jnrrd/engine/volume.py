"""The lazy :class:`Volume`: where tiling and codecs meet.

A ``Volume`` reads only the tiles a selection touches, decodes them on a shared thread pool
(zstandard, zlib and lz4 release the GIL), and copies each decoded tile's needed part straight
into the output. Raw internal tiles are read through a memory map, without a decode copy.
Untiled files are served by :mod:`jnrrd.engine.untiled` (a memory map for raw data).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from itertools import islice
from typing import Any

import numpy as np

from .._threads import run_each, run_parallel
from ..dtypes import to_user, user_dtype
from ..errors import JnrrdError, UnsupportedError, check_index_order, describe_source, where
from ..header import Header
from ..policy import Policy
from ..tiling.grid import AxisSel, TileGrid, plain_key, plain_selection, selection_with_booleans
from ..tiling.levels import Level
from ..tiling.padding import chain_fill
from ..tiling.spec import Tiling
from ..world import WorldQueries
from .cache import CacheInfo, TileCache, check_cache_bytes, default_cache_bytes
from .indexing import (
    Levels,
    OIndex,
    finish_basic,
    has_array_index,
    no_such_level,
    numpy_getitem,
    planes_read,
    read_into,
)
from .locations import TileLocation, checked_coords, tile_locations
from .pickling import reduce_view
from .raw_runs import RawRuns, raw_runs_apply
from .readonly import ReadOnly
from .sources import ExternalSource, InternalSource
from .tiles import TileDecoder
from .virtual import VirtualLevels

__all__ = ["LevelView", "Volume"]

#: raw selections up to this size are copied in the calling thread
_INLINE_RAW_BYTES = 8 << 20
#: tile tasks listed (and run) at a time
_TASK_BATCH = 4096
#: ... and of a remote one (the compressed bytes of a batch are held while it decodes)
_REMOTE_BATCH = 1024


class LevelView(ReadOnly):
    """One resolution level with the lazy array interface (``shape``, ``dtype``, slicing)."""

    def __init__(self, volume: Volume, level: Level) -> None:
        self._vol = volume
        self._level = level
        self.index = level.index
        self.c_order = volume.index_order == "C"

    # -- array interface --------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        s = self._level.shape
        return s[::-1] if self.c_order else s

    @property
    def dtype(self) -> np.dtype:
        return self._vol._dtype

    @property
    def ndim(self) -> int:
        return len(self._level.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self._level.shape))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def chunks(self) -> tuple[int, ...]:
        """The tile (core) shape over all axes, in the caller's axis order."""
        g = self._level.grid
        c = list(g.shape)
        for k, a in enumerate(g.axes):
            c[a] = min(g.tile[k], g.shape[a])
        return tuple(c[::-1]) if self.c_order else tuple(c)

    @property
    def scale(self) -> tuple[int, ...]:
        s = self._level.scale
        return s[::-1] if self.c_order else s

    @property
    def header(self) -> Header:
        """The file's header (level-0 ``sizes``, header axis order)."""
        return self._vol._header

    @property
    def stored(self) -> bool:
        """False for a virtual level (computed from level 0 on demand)."""
        return self._level.stored

    @property
    def stored_bytes(self) -> int:
        """The sum of this level's stored tile sizes (0 for a virtual level)."""
        return self._vol._stored_bytes(self._level)

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return (f"<jnrrd level {self.index} shape={self.shape} dtype={self.dtype} "
                f"scale={self.scale}>")

    def read(self, selection: Any = ..., *, out: np.ndarray | None = None) -> np.ndarray:
        """``self[selection]``; with ``out``, written into it and returned (docs/api.md)."""
        return self[selection] if out is None else read_into(self, selection, out)

    def __getitem__(self, key: Any) -> np.ndarray:
        if plain_key(key):
            shape = self._level.shape
            sel = plain_selection(key, shape[::-1] if self.c_order else shape, self._vol.name)
            rest = None
        elif has_array_index(key):
            return numpy_getitem(self, key)  # one list/array index, NumPy's semantics
        else:
            sel, rest = selection_with_booleans(key, self.shape, self._vol.name)
        if self.c_order:
            sel = sel[::-1]
        out = finish_basic(self._vol._read(self._level, sel), sel, self.c_order)
        return out if rest is None else out[rest]  # type: ignore[index]

    @property
    def volume(self) -> Volume:
        """The :class:`Volume` this level belongs to (``vol.levels[k].volume is vol``); close
        it to release the file of an unpickled level."""
        return self._vol

    @property
    def oindex(self) -> OIndex:
        """Orthogonal indexing (zarr's ``oindex``): ``vol.oindex[[3, 9], 10:20, mask]``
        indexes each axis on its own by an int, slice, integer list/array or boolean mask."""
        return OIndex(self)

    def __reduce__(self) -> tuple[Any, ...]:
        # pickle, copy, deepcopy: re-open the file by path (jnrrd.engine.pickling)
        return reduce_view(self)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self[...]
        return a if dtype is None else a.astype(dtype, copy=False)

    def read_tile(self, coords: Sequence[int], *, core: bool = False) -> np.ndarray:
        """The decoded stored tile at tile-grid ``coords`` (padding and halo included;
        ``core=True`` gives only its core region).

        Raises :class:`~jnrrd.errors.UnsupportedError` for an untiled volume (it has no tiles;
        slice it instead)."""
        coords = self._tile_coords(coords)
        tile = self._vol._tile(self._level, coords)
        if core:
            tile = tile[self._level.grid.stored_from_core(coords)]
        return tile.T if self.c_order else tile

    def read_tile_bytes(self, coords: Sequence[int]) -> bytes | memoryview | None:
        """The stored (encoded) bytes of the tile at tile-grid ``coords`` as the file holds
        them, checksum verified when the file records one; ``None`` for a sparse tile.
        :class:`~jnrrd.errors.UnsupportedError` for an untiled volume or a virtual level."""
        coords = self._tile_coords(coords)
        if self._vol._decoder is None or not self._level.stored:
            raise UnsupportedError(f"{where(self._vol.name)}level {self.index} is virtual "
                                   "(computed on read): it has no stored tile bytes")
        self._vol._check_open()
        return self._vol._decoder.checked_bytes(self._level, coords)

    def _tile_coords(self, coords: Sequence[int]) -> tuple[int, ...]:
        return checked_coords(coords, self._level.grid if self._vol.tiled else None,
                              reverse=self.c_order, name=self._vol.name)

    def tile_locations(self) -> Iterator[tuple[tuple[int, ...], TileLocation | None]]:
        """``(coords, location)`` of every tile of this level in linear-index order, without
        reading any: a :class:`~jnrrd.engine.locations.TileLocation` (file, offset, size), or
        ``None`` for a sparse tile. ``UnsupportedError`` for an untiled volume or a virtual
        level."""
        return tile_locations(self._vol._source, self._level, name=self._vol.name,
                              reverse=self.c_order)

    @property
    def level(self) -> Level:
        """This level's description in header axis order: ``index``, ``scale``, ``shape``,
        ``grid`` (the tile grid) and ``stored``."""
        return self._level

    # -- geometry ---------------------------------------------------------------------------
    def header_geometry(self) -> tuple[np.ndarray | None, list[np.ndarray | None] | None]:
        """``(space_origin, space_directions)`` of this level in header axis order (``None``
        where the header has no space), whatever the ``index_order``."""
        return self._vol._geometry(self._level)

    @property
    def space_origin(self) -> np.ndarray | None:
        return self._vol._geometry(self._level)[0]

    @property
    def space_directions(self) -> list[np.ndarray | None] | None:
        dirs = self._vol._geometry(self._level)[1]
        if dirs is None:
            return None
        return dirs[::-1] if self.c_order else dirs

    @property
    def affine(self) -> np.ndarray:
        """Homogeneous index→world matrix over the spatial axes (docs/api.md#volumes)."""
        origin, dirs = self._vol._geometry(self._level, for_affine=True)
        cols = [d for d in (dirs[::-1] if self.c_order else dirs) if d is not None]
        sd = len(origin)
        m = np.zeros((sd + 1, len(cols) + 1))
        for j, d in enumerate(cols):
            m[:sd, j] = d
        m[:sd, -1] = origin
        m[sd, -1] = 1.0
        return m

    def to_dask(self) -> Any:
        """This level as a ``dask.array.Array`` whose chunks are the tiles."""
        return self._vol.to_dask(level=self.index)


class Volume(WorldQueries, VirtualLevels, LevelView):
    """A lazily read JNRRD volume (``jnrrd.open``): level 0, with ``levels`` for the rest."""

    #: whether a read may copy raw tiles straight from the stored bytes, a run at a time
    #: (engine.raw_runs); a volume whose tiles can differ from them (open for writing) may not
    _copies_stored_runs = True

    def __init__(self, header: Header, *, tiling: Tiling | None, core: Any, policy: Policy,
                 source: InternalSource | ExternalSource | None, name: Any,
                 index_order: str = "F", untiled: Any = None,
                 cache_bytes: int | None = None) -> None:
        cache_bytes = check_cache_bytes(cache_bytes)
        check_index_order(index_order, name)
        self._header = header
        self.index_order = index_order
        self.name = name
        #: set by the opener for a path source: a hashable, picklable callable that opens the
        #: same file again the same way (``jnrrd.api.Reopen``); the Dask and xarray
        #: integrations re-open files on workers through it. ``None``: not re-openable.
        self.reopen: Callable[[], Volume] | None = None
        self._core = core
        self._policy = policy
        self._tiling = tiling
        self._source = source
        self._untiled = untiled
        self._dtype = user_dtype(core.type_name, core.block_size, policy.bfloat16)
        self._decoder = (TileDecoder(tiling, core, source, policy, name)
                         if tiling is not None and source is not None else None)
        self._closed = False
        if tiling is None:
            shape = tuple(core.sizes)
            level = Level(0, (1,) * len(shape),
                          TileGrid(shape, tuple(range(len(shape))), shape, (0,) * len(shape)),
                          True, 0)
            self._levels: tuple[Level, ...] = (level,)
        else:
            self._levels = tiling.levels
        if cache_bytes is None:
            cache_bytes = default_cache_bytes(
                virtual_levels=any(not lv.stored for lv in self._levels))
        # raw internal tiles come from the memory map: there is no decode to save
        self._use_cache = cache_bytes > 0 and self._decoder is not None and not (
            self._decoder.raw and source is not None and source.internal)
        #: decoded tiles of every level, ``(level, coords)`` → read-only array (engine/cache)
        self._cache = TileCache(cache_bytes, {lv.index: (lv.grid, self._dtype)
                                              for lv in self._levels if lv.stored}
                                if self._use_cache else None)
        super().__init__(self, self._levels[0])
        self.levels: tuple[LevelView, ...] = Levels((self, *(
            LevelView(self, lv) for lv in self._levels[1:]
        )))

    @property
    def tiled(self) -> bool:
        return self._tiling is not None

    @property
    def core(self) -> Any:
        """The typed core header fields (:class:`jnrrd.header.CoreFields`, header axis
        order): sizes, type, labels, spacings, space, units, ..."""
        return self._core

    @property
    def tiling(self) -> Tiling | None:
        return self._tiling

    @property
    def cache_bytes(self) -> int:
        """The decoded-tile cache's budget in bytes (0: no cache; docs/api.md)."""
        return self._cache.max_bytes

    def cache_info(self) -> CacheInfo:
        """Hits, misses, evictions, tiles and bytes held of the decoded-tile cache."""
        return self._cache.info()

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._closed

    def close(self) -> None:
        """Release the file handle and memory map (reads after close fail)."""
        self._closed = True
        self._cache.clear(close=True)
        if self._source is not None:
            self._source.close()
        if self._untiled is not None:
            self._untiled.close()

    def __enter__(self) -> Volume:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        kind, name = "tiled" if self.tiled else "untiled", describe_source(self.name)
        return (f"<jnrrd.Volume {name or '<stream>'} {kind} shape={self.shape} "
                f"dtype={self.dtype} levels={len(self.levels)}>")

    def read_tile(self, coords: Sequence[int], level: int = 0, *, core: bool = False) -> np.ndarray:
        """The decoded stored tile at tile-grid ``coords`` of level ``level`` (docs/api.md#volumes):
        ``vol.read_tile(c, k)`` is ``vol.levels[k].read_tile(c)``; ``core=True`` gives only the
        tile's core region. ``SelectionError`` (an ``IndexError``) for a level that does not exist,
        :class:`~jnrrd.errors.UnsupportedError` for an untiled volume."""
        if isinstance(level, bool) or not isinstance(level, (int, np.integer)):
            raise TypeError(f"read_tile: level must be an int, got {type(level).__name__}")
        if not 0 <= level < len(self.levels):
            raise no_such_level(self.name, level, len(self.levels))
        return LevelView.read_tile(self.levels[int(level)], coords, core=core)

    def to_dask(self, level: int = 0) -> Any:
        """A ``dask.array.Array`` over level ``level`` whose chunks are the tiles."""
        from .._upper import upper  # the body is jnrrd.integrations.dask's, loaded on use

        return upper("volume_to_dask")(self, level)

    def preview(self, size: int = 256, *, mip: bool = False, level: int | None = None,
                labels: bool | None = None) -> np.ndarray:
        """An ``H x W x 3`` ``uint8`` picture: three orthogonal mid-slices side by side (one
        view for a 2-D volume), or maximum projections with ``mip=True``, read from the coarsest
        stored level that still gives ``size`` pixels on the longest side of a view (or from
        ``level``), in physical aspect, windowed by percentiles; label volumes in palette
        colours (``labels`` forces the choice). Rules: docs/ecosystem.md#preview-pictures."""
        from ..preview import render_preview

        return render_preview(self, size, mip=mip, level=level, labels=labels)

    # -- reading ----------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise JnrrdError(f"{where(self.name)}the volume is closed; open the file again "
                             "to read it")

    def _read(self, level: Level, sel: tuple[AxisSel, ...], out: Any = None) -> np.ndarray:
        """``sel`` in header order (F order), or ``out`` (its shape and dtype) filled."""
        if self._closed:
            self._check_open()
        if self._tiling is None:
            return self._untiled.read(sel, out)
        if out is None:
            counts = tuple([s.count for s in sel])
            if (nbytes := math.prod(counts) * self._dtype.itemsize) > self._policy.max_bytes:
                self._policy.check_bytes(nbytes, "the selection", self.name)
            out = np.empty(counts, self._dtype, order="F")
        if out.size == 0 or (self._use_cache and self._cache.copy_region(level.index, sel, out)):
            return out  # every tile cached in the level's bricks: a few block copies
        if not level.stored:
            self._read_virtual(level, sel, out)
            return out
        dec = self._decoder
        assert dec is not None
        fill, decoded = self._fill_value(), self._decoded

        def copy(piece: Any, fetched: Any = None) -> None:  # one tile's part into ``out``
            tile = decoded(level, piece.coords, planes_read(piece.src[-1]), fetched)
            out[piece.dst] = fill if tile is None else tile[piece.src]

        pieces = level.grid.pieces(sel)
        if not self._use_cache and self._raw_runs:
            # raw tiles: neighbours stored in a row are copied in one go (engine.raw_runs)
            runs = RawRuns(dec, level, out, copy)
            if out.nbytes <= _INLINE_RAW_BYTES:  # memory copies: hand-offs would cost more
                for run in runs.runs(pieces):
                    runs.copy_run(run)
            else:
                run_each(runs.runs(pieces), runs.copy_run, threads=self._policy.io.threads)
        elif dec.raw and out.nbytes <= _INLINE_RAW_BYTES:
            for p in pieces:  # small raw reads are memory copies: hand-offs would cost more
                copy(p)
        elif not (dec.remote or self._use_cache):
            # each thread takes the next tile as it comes free (no task built per tile)
            run_each(pieces, copy, threads=self._policy.io.threads)
        else:
            self._read_batches(level, pieces, copy, out)
        return out

    def _read_batches(self, level: Level, pieces: Iterator[Any],
                      copy: Callable[[Any, Any], None], out: np.ndarray) -> None:
        """The pieces in bounded batches (memory does not grow with the tile count; a failing
        tile ends the read before the rest are listed): cache hits copied at once, a remote
        batch's requests all in flight before the first decode."""
        dec = self._decoder
        assert dec is not None
        while True:
            batch = list(islice(pieces, _REMOTE_BATCH if dec.remote else _TASK_BATCH))
            if not batch:
                return
            if self._use_cache:  # tiles in the cache are copied here, the rest decoded
                batch = self._cache.copy_hits(level.index, batch, out)
            fetched = dec.prefetch(level, [p.coords for p in batch]) if dec.remote else None
            tasks: list[Callable[[], None]] = [partial(copy, p, fetched) for p in batch]
            if fetched is not None:  # decode the tiles in the order their bytes arrive
                tasks = fetched.as_they_arrive([p.coords for p in batch], tasks)
            run_parallel(tasks, threads=self._policy.io.threads)

    def _decoded(self, level: Level, coords: tuple[int, ...], planes: int | None = None,
                 fetched: Any = None) -> np.ndarray | None:
        """The decoded stored tile (None when sparse): through the cache when it is on (a
        read-only array), else decoded now (only ``planes`` planes, in scratch memory);
        its bytes from ``fetched`` (a batch requested at once) when given."""
        dec = self._decoder
        assert dec is not None
        if self._use_cache:
            return self._cache.get_or_load((level.index, coords),
                                           lambda: dec.decode(level, coords, fetched=fetched))
        return dec.decode(level, coords, planes, scratch=True, fetched=fetched)

    @property
    def _raw_runs(self) -> bool:
        dec = self._decoder
        return self._copies_stored_runs and dec is not None and raw_runs_apply(dec)

    def _fill_value(self) -> Any:
        assert self._tiling is not None
        v = self._tiling.padding_value
        if self._core.type_name == "bfloat16":
            words = np.array([chain_fill(v, "bfloat16")], dtype=np.uint16)
            return to_user(words, "bfloat16", self._policy.bfloat16)[0]
        return v

    def _tile(self, level: Level, coords: tuple[int, ...]) -> np.ndarray:
        """One stored tile (stored extent), decoded, computed (virtual) or padding (sparse)."""
        self._check_open()
        grid = level.grid
        shape = grid.stored_shape(coords)
        if not level.stored:
            computed = np.full(shape, self._fill_value(), dtype=self.dtype, order="F")
            region = grid.valid_region(coords)
            computed[grid.valid_in_stored(coords)] = self._virtual_region(level, region)
            return computed
        tile = self._decoded(level, coords)
        if tile is None:
            return np.full(shape, self._fill_value(), dtype=self.dtype, order="F")
        return np.array(tile, order="F", copy=True)

    # -- metadata ---------------------------------------------------------------------------
    def _stored_bytes(self, level: Level) -> int:
        if self._tiling is None:
            return self._untiled.stored_bytes if self._untiled is not None else 0
        if not level.stored:
            return 0
        src = self._source
        if isinstance(src, InternalSource):
            sl = src.sizes[level.first : level.first + level.grid.ntiles]
            return int(sl[sl > 0].sum())
        assert isinstance(src, ExternalSource)
        return src.stored_bytes(level)

    def _geometry(self, level: Level, for_affine: bool = False) -> tuple[Any, Any]:
        from ..geometry import level_geometry

        return level_geometry(self._core, level.scale, for_affine=for_affine)

    def iter_tiles(self, level: int = 0) -> Iterator[tuple[int, ...]]:
        """Tile coordinates of a level in linear-index order (header axis order)."""
        return self._levels[level].grid.all_coords()

