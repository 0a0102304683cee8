"""A Zarr v3 view of a tiled JNRRD file without copying: a kerchunk reference set.

:func:`kerchunk_refs` describes the file as a Zarr v3 group (kerchunk reference set version 1,
read through fsspec's ``reference://`` filesystem): one array per stored level (``"0"``,
``"1"``, ...) whose chunks are the stored tiles, referenced as ``[url, offset, size]`` in the
unchanged ``.jnrrd`` file (internal tiles) or tile file (external tiles). No tile is read.

Axis order (docs/format.md#zarr-axis-order): a stored tile is written with header axis 0 fastest,
which is a C-order chunk of the *reversed* shape. So shapes, chunk shapes, chunk keys, NGFF axes and
``dimension_names`` are the header's reversed, and the bytes are shared as they are. A
``transpose`` codec's order is remapped to the reversed axes.

The group's attributes: ``ome`` (OME-NGFF 0.5 ``multiscales``, :mod:`jnrrd.integrations.ngff`)
and ``jnrrd`` (the file's header without its per-tile tables, which the references replace).

A file the view cannot express raises :class:`~jnrrd.errors.UnsupportedError` naming why:
untiled files, overlapping tiles, ``variable`` edges that cut a tile, virtual levels, an
element type zarr-python has no name for (``bfloat16``, ``block``), or a codec without a Zarr
v3 equivalent (the LZ4 frame ``lz4``, ``conditional``, ``pad``, ``offset``, ``scale_offset``,
``cast_value``, third-party codecs).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import HeaderError, UnsupportedError, where
from ..storage import is_remote, is_url
from .ngff import axis_names, multiscales

__all__ = ["REFS_VERSION", "kerchunk_refs", "zarr_codecs", "zarr_fill_value"]

REFS_VERSION = 1
#: per-tile tables: the references say the same, and they can be long
_TABLES = ("offset_table", "size_table", "level_offsets", "metadata", "files")
#: codecs with the same name and configuration in Zarr v3 / zarr-python (numcodecs.* need the
#: numcodecs package, which zarr-python depends on)
_SAME = frozenset({"gzip", "zstd", "crc32c", "numcodecs.bz2", "numcodecs.zlib",
                   "numcodecs.lz4", "numcodecs.shuffle"})
_NO_EQUIVALENT = {
    "lz4": "the LZ4 frame format has no Zarr v3 codec (numcodecs.lz4 is a raw LZ4 block with "
           "a size prefix, a different format)",
    "conditional": "its per-tile header mask has no Zarr v3 codec",
    "optional": "its per-tile header mask has no Zarr v3 codec",
    "pad": "fixed padding around the encoded tile has no Zarr v3 codec",
    "offset": "a fixed prefix before the encoded tile has no Zarr v3 codec",
    "scale_offset": "zarr-python has no scale_offset codec",
    "cast_value": "zarr-python has no cast_value codec",
}
_TYPES = frozenset({"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                    "float16", "float32", "float64", "complex64", "complex128"})


def kerchunk_refs(source: Any, *, storage_options: Mapping[str, Any] | None = None
                  ) -> dict[str, Any]:
    """A kerchunk reference set (version 1) describing ``source`` as a Zarr v3 group.

    ``source`` is a path (or a binary file object with a path ``name``) or an fsspec URL
    (``s3://``, ``https://``, ...; ``storage_options`` go to fsspec unchanged). The
    references point at the file by absolute path, or at the URL itself (and at the URLs of
    external tile files next to it): read them with the same options, passed as
    ``remote_options``. Open the result with fsspec's ``reference`` filesystem and
    zarr-python 3 (``pip install "jnrrd[zarr]"``)::

        fs = fsspec.filesystem("reference", fo=refs, asynchronous=True,
                               remote_protocol="s3", remote_options=storage_options)
        group = zarr.open_group(zarr.storage.FsspecStore(fs, read_only=True), mode="r")

    :class:`~jnrrd.errors.UnsupportedError` for a file the view cannot express (see the
    module docstring).
    """
    from ..api import open as jopen

    url = _url(source)
    kwargs: dict[str, Any] = {}
    if storage_options:
        kwargs["storage_options"] = dict(storage_options)
    to_url = None
    if is_remote(url):
        from ..storage import filesystem

        fs = filesystem(url, dict(storage_options or {}), backend="fsspec")[0]
        to_url = fs.unstrip_protocol
    with jopen(source, **kwargs) as vol:
        return volume_refs(vol, url, tile_url=to_url)


def _url(source: Any) -> str:
    name = source if isinstance(source, (str, os.PathLike)) else getattr(source, "name", None)
    if not isinstance(name, (str, os.PathLike)):
        raise UnsupportedError("kerchunk_refs: the references need the file's path or URL; "
                               "a file object without a path name has none")
    name = os.fspath(name)
    return name if is_url(name) else os.path.abspath(name)


def volume_refs(vol: Any, url: str, *, tile_url: Callable[[str], str] | None = None
                ) -> dict[str, Any]:
    """The reference set of an opened volume whose own file is at ``url``; ``tile_url``
    turns the location of an external tile file (a remote store's path) into its URL."""
    name = vol.name
    if not vol.tiled:
        raise UnsupportedError(
            f"{where(name)}untiled file: a Zarr view needs tiles (chunks); convert it to a "
            "tiled file first (jnrrd convert IN OUT.jnrrd --tile 64,64,64)")
    tiling, core = vol.tiling, vol.core
    p = tiling.prefix
    if any(tiling.overlap):
        raise UnsupportedError(
            f"{where(name, p + ':overlap')}overlapping tiles ({list(tiling.overlap)} voxels of "
            "halo): a Zarr chunk cannot share voxels with its neighbours")
    virtual = [lv.index for lv in vol.levels if not lv.stored]
    if virtual:
        raise UnsupportedError(
            f"{where(name, p + ':levels_virtual')}level{'s' if len(virtual) > 1 else ''} "
            f"{', '.join(map(str, virtual))} {'are' if len(virtual) > 1 else 'is'} virtual "
            "(computed from level 0 on read, no stored tiles to reference); write them as "
            "stored levels")
    if core.type_name not in _TYPES:
        raise UnsupportedError(
            f"{where(name, 'type')}{core.type_name!r} has no Zarr v3 data type that "
            "zarr-python reads")
    ndim = len(core.sizes)
    codecs = zarr_codecs(tiling.codecs, ndim, source=name, field=p + ":codecs")
    fill = zarr_fill_value(tiling.padding_value, core.type_name)
    dims = axis_names(vol)[::-1]
    refs: dict[str, Any] = {"zarr.json": _group_json(vol, p, name)}
    for lv in vol.levels:
        chunk = _chunk_shape(lv.level.grid, name, p)
        refs[f"{lv.index}/zarr.json"] = _dumps({
            "zarr_format": 3, "node_type": "array",
            "shape": list(lv.level.shape[::-1]), "data_type": core.type_name,
            "chunk_grid": {"name": "regular",
                           "configuration": {"chunk_shape": list(chunk[::-1])}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": fill, "codecs": codecs, "attributes": {},
            "dimension_names": dims,
        })
        axes = lv.level.grid.axes
        for coords, loc in lv.tile_locations():
            if loc is None:
                continue  # sparse: zarr gives the fill value for a missing chunk
            full = [0] * ndim
            for k, a in enumerate(axes):
                full[a] = coords[k]
            key = f"{lv.index}/c/" + "/".join(str(c) for c in full[::-1])
            where_ = url if loc.internal else loc.path
            if tile_url is not None and not loc.internal and not is_url(where_):
                where_ = tile_url(where_)
            refs[key] = [where_, loc.offset, loc.size]
    return {"version": REFS_VERSION, "refs": refs}


def _group_json(vol: Any, p: str, name: Any) -> str:
    """The group's ``zarr.json``: NGFF ``multiscales`` and the header attribute.

    JSON has no NaN or infinity: a header field holding one (``space_directions``,
    ``space_origin``, ``spacings``, ...), or a level geometry that overflows float64, is a
    :class:`~jnrrd.errors.HeaderError` naming the fields."""
    with np.errstate(all="ignore"):  # an overflowing transform is reported below
        attrs = {"ome": multiscales(vol), "jnrrd": header_attribute(vol.header, p)}
    try:
        return _dumps({"zarr_format": 3, "node_type": "group", "attributes": attrs})
    except ValueError:
        pass
    bad = [str(k) for k, v in vol.header.items() if not _finite(v)]
    if bad:
        raise HeaderError(f"{where(name, ', '.join(bad))}holds NaN or an infinity, which the "
                          "JSON metadata of a Zarr view cannot hold") from None
    raise HeaderError(f"{where(name, 'space_directions')}the level geometry (NGFF scale and "
                      "translation) computed from the space fields overflows float64, which "
                      "the JSON metadata of a Zarr view cannot hold") from None


def _finite(value: Any) -> bool:
    """Whether every number in ``value`` (nested lists and dicts) is finite."""
    stack = [value]
    while stack:
        x = stack.pop()
        if isinstance(x, float) and not math.isfinite(x):
            return False
        if isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
    return True


def _chunk_shape(grid: Any, name: Any, p: str) -> tuple[int, ...]:
    """The chunk shape (header order) of a level: its stored tile shape. ``variable`` edges
    store smaller edge tiles, which a regular chunk grid can hold only when no tile is cut
    (the axis divides, or one tile covers it)."""
    shape = list(grid.shape)
    for k, a in enumerate(grid.axes):
        t, n = grid.tile[k], grid.shape[a]
        if grid.edge == "variable" and grid.grid[k] > 1 and n % t:
            raise UnsupportedError(
                f"{where(name, p + ':edge_handling')}'variable' edges: the last tile along "
                f"axis {a} holds {n % t} of {t} voxels, and a regular Zarr chunk grid cannot "
                "describe a smaller edge chunk (write with edge_handling 'pad')")
        shape[a] = t if grid.edge == "pad" or grid.grid[k] > 1 else min(t, n)
    return tuple(shape)


def zarr_codecs(chain: Sequence[Mapping[str, Any]], ndim: int, *, source: Any = None,
                field: str = "tile:codecs") -> list[dict[str, Any]]:
    """The Zarr v3 codec list of a JNRRD tile chain (Zarr JSON, header axis order) for the
    reversed (C-order) axes: ``transpose`` orders are remapped, the rest is kept or renamed
    (``bz2`` → ``numcodecs.bz2``). ``UnsupportedError`` for a codec without an equivalent."""
    out: list[dict[str, Any]] = []
    for c in chain:
        name = c.get("name")
        config = dict(c.get("configuration") or {})
        if name == "transpose":
            # jnrrd order p over header axes ↔ zarr order o over reversed axes:
            # o[j] = n − 1 − p[n − 1 − j] (docs/format.md#zarr-axis-order, vectors)
            order = [int(v) for v in config["order"]]
            n = len(order)
            out.append({"name": "transpose", "configuration": {
                "order": [n - 1 - order[n - 1 - j] for j in range(n)]}})
        elif name == "bytes":
            out.append({"name": "bytes",
                        "configuration": {"endian": config.get("endian", "little")}})
        elif name == "bz2":
            # a plain bzip2 stream, which numcodecs.bz2 reads
            out.append({"name": "numcodecs.bz2",
                        "configuration": {"level": int(config.get("level", 9))}})
        elif name in _SAME:
            entry: dict[str, Any] = {"name": name}
            if name == "zstd":
                config = {"level": int(config.get("level", 0)),
                          "checksum": bool(config.get("checksum", False))}
            if config or name in ("gzip", "zstd"):
                entry["configuration"] = config
            out.append(entry)
        else:
            why = _NO_EQUIVALENT.get(str(name), "it is not a Zarr v3 codec zarr-python reads")
            raise UnsupportedError(f"{where(source, field)}codec {name!r}: {why}")
    if ndim and not out:
        raise UnsupportedError(f"{where(source, field)}an empty codec chain")
    return out


def zarr_fill_value(value: Any, type_name: str) -> Any:
    """``tile:padding_value`` as a Zarr v3 ``fill_value`` (0 when absent; ``"NaN"`` and
    ``"Infinity"`` spelled as Zarr v3 writes them)."""
    if value is None:
        value = 0
    if type_name.startswith("complex"):
        v = complex(value)
        return [zarr_fill_value(v.real, "float64"), zarr_fill_value(v.imag, "float64")]
    if type_name.startswith("float"):
        v = float(value)
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return v
    return int(value)


def header_attribute(header: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """The header as a JSON-ready attribute: per-tile tables dropped, non-finite floats as
    ``"NaN"``/``"Infinity"``/``"-Infinity"``."""
    drop = {f"{prefix}:{t}" for t in _TABLES}
    return {k: _json_ready(v) for k, v in header.items() if k not in drop}


def _json_ready(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    if isinstance(v, Mapping):
        return {str(k): _json_ready(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_ready(x) for x in v]
    if hasattr(v, "tolist"):
        return _json_ready(v.tolist())
    return v


def _dumps(obj: Any) -> str:
    return json.dumps(obj, allow_nan=False, separators=(",", ":"))
