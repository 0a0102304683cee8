"""Assembling a :class:`~jnrrd.engine.volume.Volume` from a parsed header and its opened file:
the data section of an untiled file, or the source of a tiled file's tiles. ``jnrrd.open``
(:mod:`jnrrd.api`) parses and checks the header, then calls :func:`assemble_volume`."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..codecs import chain_is_self_delimiting, is_raw_chain
from ..errors import UnsupportedError, where
from ..header import Header
from ..policy import Policy
from ..storage import Opened
from ..tiling.locate import core_itemsize, derived_offsets, raw_tile_sizes
from ..tiling.spec import Tiling
from .sources import ExternalSource, InternalSource, held_object, untiled_data
from .untiled import data_paths
from .volume import Volume

__all__ = ["assemble_volume"]


def assemble_volume(header: Header, core: Any, tiling: Tiling | None, src: Opened,
                    data_start: int | None, pol: Policy, index_order: str, missing: str,
                    cache_bytes: int | None = None) -> Volume:
    """The :class:`Volume` of a parsed and checked header (``core``, ``tiling``) whose file
    ``src`` is open: its untiled data section, or its tiles' source (internal: the very
    object whose header was parsed, held by its store; external: the tile files beside it).
    The volume owns ``src`` from here on."""
    name, f, owned = src.name, src.stream, src.owned
    if pol.legacy_c_order:
        if tiling is not None:
            raise UnsupportedError(f"{where(name)}legacy_c_order is for untiled files of the "
                                   "earlier C-order package; tiled files have no such variant")
        # The data bytes are C order over sizes: the same bytes are F order over the reversed
        # sizes, so read them that way and present the reversed view (shape == sizes).
        core = dataclasses.replace(core, sizes=tuple(reversed(core.sizes)))
        index_order = "C" if index_order == "F" else "F"
    if tiling is None:
        paths = data_paths(core, src.store, pol, name)
        untiled = untiled_data(core, src, data_start, paths, pol)
        return Volume(header, tiling=None, core=core, policy=pol, source=None, name=name,
                      index_order=index_order, untiled=untiled)
    if tiling.storage == "internal":
        offsets = tiling.offset_table
        itemsize = core_itemsize(core)
        decoder_raw = is_raw_chain(tiling.codecs)
        if offsets is None:
            offsets = derived_offsets(tiling, itemsize, data_start, name, raw=decoder_raw)
        fixed = None
        sizes = tiling.size_table
        if sizes is None and decoder_raw:
            sizes = raw_tile_sizes(tiling, itemsize, offsets)
        # The tiles are read from the very file whose header was parsed (never the path
        # again: the path may have been replaced in between). The source owns it from now on.
        store, key = held_object(src.store, src.key, f, map_reads=decoder_raw, owned=owned)
        tiles = InternalSource(
            store, key, offsets=offsets, sizes=sizes,
            data_start=data_start if data_start is not None else 0, fixed_size=fixed,
            self_delimiting=chain_is_self_delimiting(tiling.codecs), fmt=tiling.format,
            prefix=tiling.prefix, source=name,
        )
        return Volume(header, tiling=tiling, core=core, policy=pol, source=tiles, name=name,
                      index_order=index_order, cache_bytes=cache_bytes)
    ext = ExternalSource(src.store, pattern=tiling.pattern, files=tiling.files,
                         base_dir=tiling.base_dir, prefix=tiling.prefix, missing=missing,
                         source=name)
    src.close()
    return Volume(header, tiling=tiling, core=core, policy=pol, source=ext, name=name,
                  index_order=index_order, cache_bytes=cache_bytes)
