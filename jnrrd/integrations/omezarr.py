"""OME-Zarr (OME-NGFF 0.5 on Zarr v3) written from a :class:`jnrrd.Volume` with zarr-python 3.

Every level of the volume (stored or virtual) becomes an array ``"0"``, ``"1"``, ... of the
group, in C order: shapes, chunks and the NGFF ``axes`` are the header axes reversed
(docs/format.md#zarr-axis-order). Chunks are the level's tile shape, codecs follow the JNRRD
compression where Zarr has it (zstd, gzip; anything else becomes zstd), and the group carries the
NGFF ``multiscales`` (axes from ``labels``/``kinds``/``space_units``, per-level ``scale`` and
``translation`` from the level geometry) and the JNRRD header under the ``jnrrd`` attribute.
Geometry a diagonal transform cannot hold (oblique ``space_directions``, a
``measurement_frame``) lives only in that attribute, with a :class:`~jnrrd.JnrrdWarning`
naming the field. The reverse direction is :mod:`jnrrd.integrations.omezarr_read`.

Memory stays bounded by one chunk (one shard when ``shards=`` is given) plus what reading it
from the volume costs: the data go through one write unit at a time.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import shutil
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..clinical.labels import is_label_map, palette, segments
from ..errors import ArgumentError, JnrrdWarning, MissingDependencyError, UnsupportedError, where
from ..header.foreign import is_zarr_path
from ..optional import missing_message
from ..storage import fresh_token, tmp_marker, write_guard
from .ngff import NGFF_VERSION, export_order, is_oblique, multiscales

__all__ = ["AXES_ATTRIBUTE", "HEADER_ATTRIBUTE", "header_attribute", "is_zarr_path", "regions",
           "require_zarr", "write_omezarr"]

#: the group attribute holding the JNRRD header (data-location and tile-table fields dropped)
HEADER_ATTRIBUTE = "jnrrd"
#: the group attribute listing the header axis of each array axis (when not simply reversed)
AXES_ATTRIBUTE = "jnrrd_axes"

#: header fields that describe where the source's bytes were, not the data
_LOCATION = {"jnrrd", "dimension", "sizes", "type", "block_size", "data_file", "data_files",
             "data_file_pattern", "line_skip", "byte_skip"}
#: tiling fields the writer computes (tables, per-file details)
_TILE_COMPUTED = {"offset_table", "size_table", "level_offsets", "metadata",
                  "compression_levels", "level_quality", "base_dir", "files"}
_ZARR_COMPRESSORS = ("zstd", "gzip")


def require_zarr() -> Any:
    """The ``zarr`` module (zarr-python 3), or :class:`MissingDependencyError` naming the
    extra."""
    try:
        import zarr
    except ImportError as e:
        raise MissingDependencyError(missing_message(
            "zarr", extra="zarr", feature="OME-Zarr", pip="zarr>=3.1")) from e
    if int(str(zarr.__version__).split(".")[0]) < 3:
        raise MissingDependencyError(f"OME-Zarr needs zarr-python 3, found {zarr.__version__}:"
                                     " pip install 'zarr>=3.1' (jnrrd's extra jnrrd[zarr])")
    return zarr


def header_attribute(header: Mapping[str, Any], tile_prefixes: set[str]) -> dict[str, Any]:
    """The JNRRD header as stored under :data:`HEADER_ATTRIBUTE`: without the fields that
    say where the source's bytes were (they mean nothing beside Zarr arrays) and without the
    tile tables (the layout fields that ask for tiles stay, so converting back restores it)."""
    out: dict[str, Any] = {}
    for k, v in header.items():
        prefix, _, field = str(k).partition(":")
        if k in _LOCATION or (field and prefix in tile_prefixes and field in _TILE_COMPUTED):
            continue
        out[k] = v
    out["sizes"] = list(header["sizes"])
    out["type"] = header["type"]
    return out


def write_omezarr(vol: Any, target: Any, *, storage_options: Mapping[str, Any] | None = None,
                  chunks: Sequence[int] | None = None, shards: Any = None,
                  compression: str | None = None, compression_level: int | None = None,
                  progress: Callable[[int, int], None] | None = None,
                  affine: bool = False) -> None:
    """Write every level of ``vol`` (a :class:`jnrrd.Volume` opened with
    ``index_order="F"``) as an OME-Zarr group at ``target``.

    ``chunks`` (header axis order, level 0; default the tile shape) and ``shards`` (an int:
    that many chunks per axis in each shard; or a shape in voxels, header order) shape the
    arrays; ``compression`` is ``"zstd"`` or ``"gzip"`` (default: the volume's when Zarr has
    it, else zstd). A local ``target`` is written beside itself and renamed into place (an
    existing group there is replaced only once the new one is complete); a URL is written in
    place through fsspec with ``storage_options``. ``progress(done, total)`` counts bytes.
    ``affine=True`` writes RFC-5 ``affine`` transforms (exact for oblique volumes; only for
    readers that implement RFC-5, see :func:`jnrrd.integrations.ngff.multiscales`).
    """
    zarr = require_zarr()
    if vol.index_order != "F":
        raise ArgumentError(f"{where(vol.name, 'index_order')}write_omezarr needs a volume "
                            "opened with index_order='F'")
    dtype = _zarr_dtype(vol)
    comp, level = _compressor(vol, compression, compression_level)
    order = export_order(vol)
    attrs = _group_attributes(vol, order, affine)
    local = not _is_url(target)
    path = os.fspath(target)
    # a local write holds its journal: a concurrent sweep never takes its staging group
    with write_guard(path) if local else contextlib.nullcontext():
        staging = _staging_path(path) if local else path
        try:
            # a URL through fsspec with its options (zarr >= 3.2 refuses options with
            # memory:// and file:// strings, which it otherwise also hands to fsspec)
            group = zarr.open_group(staging if local else zarr.storage.FsspecStore.from_url(
                path, storage_options=dict(storage_options or {}), read_only=False),
                mode="w", zarr_format=3)
            group.attrs.update(attrs)
            total = sum(lv.size for lv in vol.levels) * dtype.itemsize
            done = 0
            for k, lv in enumerate(vol.levels):
                cshape = _level_chunks(vol, lv, k, chunks)
                sshape = _shard_shape(shards, cshape, lv.shape, vol.name)
                codec = (zarr.codecs.ZstdCodec(level=level) if comp == "zstd"
                         else zarr.codecs.GzipCodec(level=level))
                arr = group.create_array(
                    str(k), shape=_take(lv.shape, order), chunks=_take(cshape, order),
                    shards=None if sshape is None else _take(sshape, order), dtype=dtype,
                    compressors=[codec], fill_value=_fill_value(vol, dtype),
                    dimension_names=[a["name"] for a in attrs["ome"]["multiscales"][0]["axes"]])
                for region in regions(lv.shape, sshape or cshape):
                    block = np.asarray(lv[region], dtype=dtype)
                    # header axes (F order) -> the export's axis order (NGFF's)
                    arr[_take(region, order)] = np.transpose(block, order)
                    done += block.nbytes
                    if progress is not None:
                        progress(done, total)
        except BaseException:
            if local:
                shutil.rmtree(staging, ignore_errors=True)
            raise
        if local:
            _replace_dir(staging, path)


def _take(values: Sequence[Any], order: Sequence[int]) -> tuple[Any, ...]:
    """``values`` (header order) in the export's axis order."""
    return tuple(values[d] for d in order)


def _is_url(target: Any) -> bool:
    return isinstance(target, str) and "://" in target and not target.startswith("file://")


def _staging_path(path: str) -> str:
    """A fresh temporary name beside ``path``, spelled as every temporary name of this library
    (:mod:`jnrrd.storage.names`), so ``jnrrd cleanup`` removes what a killed write left."""
    path = path.rstrip("/\\") or path
    if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        raise FileNotFoundError(2, "its directory does not exist", path)
    return tmp_marker(path) + fresh_token()


def _replace_dir(staging: str, path: str) -> None:
    """Move the complete group ``staging`` to ``path``; an existing group there is renamed
    aside first and removed after (a crash in between leaves one of them whole)."""
    path = path.rstrip("/\\") or path
    old = None
    if os.path.lexists(path):
        if not os.path.isdir(path) or not os.path.exists(os.path.join(path, "zarr.json")):
            shutil.rmtree(staging, ignore_errors=True)
            raise FileExistsError(17, "exists and is not a Zarr v3 group (not replaced)", path)
        old = _staging_path(path)
        os.rename(path, old)
    os.rename(staging, path)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _zarr_dtype(vol: Any) -> np.dtype:
    dt = np.dtype(vol.dtype)
    if dt.kind not in "iufcb" or dt.name == "bfloat16":
        raise UnsupportedError(f"{vol.name}: type {vol.header.get('type')}: OME-Zarr arrays "
                               "hold integer, float and complex numbers only")
    return dt.newbyteorder("=") if dt.byteorder not in ("=", "|") else dt


def _compressor(vol: Any, compression: str | None, level: int | None) -> tuple[str, int]:
    """The Zarr compressor and its level: asked for, else the volume's when Zarr has it."""
    if compression is not None:
        name = {"gz": "gzip"}.get(compression, compression)
        if name not in _ZARR_COMPRESSORS:
            raise UnsupportedError(f"compression={compression!r}: OME-Zarr output takes "
                                   "'zstd' or 'gzip'")
    else:
        name, found = "zstd", None
        if vol.tiling is not None:
            found = next((c for c in vol.tiling.codecs if c.get("name") in _ZARR_COMPRESSORS),
                         None)
        if found is not None:
            name = found["name"]
            level = level if level is not None else (found.get("configuration") or {}).get(
                "level")
    if level is None:
        level = 3 if name == "zstd" else 5
    return name, int(level)


def _fill_value(vol: Any, dtype: np.dtype) -> Any:
    value = vol.tiling.padding_value if vol.tiling is not None else 0
    if value is None:
        return float("nan") if dtype.kind in "fc" else 0
    return value


def _level_chunks(vol: Any, lv: Any, k: int, chunks: Sequence[int] | None
                  ) -> tuple[int, ...]:
    """Level ``k``'s chunk shape (header order): the tile shape, ``chunks`` when given (level
    0's; capped at each level's extent), or a default for untiled volumes."""
    if chunks is None and vol.tiled:
        return tuple(int(c) for c in lv.chunks)
    if chunks is None:
        kinds = vol.core.kinds or (None,) * lv.ndim
        side = 64 if lv.ndim >= 3 else (256 if lv.ndim == 2 else 65536)
        chunks = [side if _domain(kinds[a]) else n for a, n in enumerate(lv.shape)]
    try:
        sizes = [None if c is None else int(c) for c in chunks]
    except (TypeError, ValueError):  # not numbers
        sizes = [0]
    if len(sizes) != lv.ndim or any(c is not None and c < 1 for c in sizes):
        raise ArgumentError(f"{where(vol.name)}chunks={chunks!r:.80}: expected {lv.ndim} "
                            "sizes >= 1 (None: the whole axis)")
    return tuple(n if c is None else min(c, n) for c, n in zip(sizes, lv.shape, strict=True))


def _domain(kind: Any) -> bool:
    return kind in (None, "domain", "space", "time", "none", "???")


def _shard_shape(shards: Any, chunks: tuple[int, ...], shape: tuple[int, ...],
                 source: Any = None) -> tuple[int, ...] | None:
    """The shard shape (header order) of ``shards`` for a level of ``shape`` in chunks of
    ``chunks``; an :class:`ArgumentError` naming ``source`` for a value that is none."""
    if shards is None:
        return None
    if isinstance(shards, (int, np.integer)) and not isinstance(shards, bool):
        if shards < 1:
            raise ArgumentError(f"{where(source)}shards={shards}: expected a number of "
                                "chunks >= 1")
        return tuple(c * min(int(shards), math.ceil(n / c))
                     for c, n in zip(chunks, shape, strict=True))
    try:
        sh = tuple(int(s) for s in shards)
    except (TypeError, ValueError):  # not numbers
        sh = ()
    if len(sh) != len(chunks) or any(s < c or s % c for s, c in zip(sh, chunks, strict=True)):
        raise ArgumentError(f"{where(source)}shards={shards!r:.80}: expected an int (chunks "
                            f"per shard) or {len(chunks)} sizes, each a multiple of the chunk "
                            f"size {list(chunks)}")
    return sh


def regions(shape: tuple[int, ...], unit: tuple[int, ...]) -> Iterator[tuple[slice, ...]]:
    """The regions of ``shape`` one ``unit`` each (header order), the last axis slowest."""
    ranges = [range(0, n, u) for n, u in zip(shape, unit, strict=True)]
    for lows in itertools.product(*reversed(ranges)):
        yield tuple(slice(lo, min(lo + u, n))
                    for lo, u, n in zip(reversed(lows), unit, shape, strict=True))


def _group_attributes(vol: Any, order: list[int], affine: bool = False) -> dict[str, Any]:
    """The group's ``ome`` (NGFF 0.5; ``image-label`` for a label map) and ``jnrrd``
    attributes (and ``jnrrd_axes`` when the axes are not the header's reversed); warns for
    each geometry field that only the ``jnrrd`` attribute keeps."""
    tiling = vol.tiling
    prefixes = {tiling.prefix} if tiling is not None else set()
    for p, uri in (vol.header.get("extensions") or {}).items():
        if isinstance(uri, str) and uri.startswith("https://jnrrd.org/extensions/tile/"):
            prefixes.add(p)
    ome = multiscales(vol, name=_group_name(vol), order=order, affine=affine)
    if is_label_map(vol.header, vol.dtype):
        ome["image-label"] = _image_label(vol)
    for field in [] if affine else _not_diagonal(vol):
        warnings.warn(f"{vol.name}: {field}: OME-NGFF scale/translation cannot express it; "
                      f"kept only in the '{HEADER_ATTRIBUTE}' attribute (restored when "
                      "converted back to JNRRD)", JnrrdWarning, stacklevel=4)
    why = _axis_order_problem([a.get("type") for a in ome["multiscales"][0]["axes"]])
    if why:
        warnings.warn(f"{vol.name}: the NGFF axes (header axes reversed) are "
                      f"{[a['name'] for a in ome['multiscales'][0]['axes']]}: {why}; zarr-python "
                      "reads the group, readers that enforce OME-NGFF 0.5's axis rules may not",
                      JnrrdWarning, stacklevel=4)
    out: dict[str, Any] = {"ome": ome, HEADER_ATTRIBUTE: header_attribute(vol.header,
                                                                        prefixes)}
    if order != list(reversed(range(vol.ndim))):
        out[AXES_ATTRIBUTE] = order
    return out


def _image_label(vol: Any) -> dict[str, Any]:
    """NGFF ``image-label`` metadata of a label map: a colour and the properties (name,
    description, codes) of each described segment."""
    colors, props = [], []
    for seg in segments(vol.header):
        value = seg.get("value")
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        color = seg.get("color")
        if not (isinstance(color, list) and len(color) in (3, 4)):
            color = list(palette(value))  # every described label gets a colour (NGFF 0.5)
        rgba = [int(round(float(c) * 255)) for c in color] + [255] * (4 - len(color))
        colors.append({"label-value": value, "rgba": rgba})
        props.append({"label-value": value, **{k: v for k, v in seg.items()
                                                if k not in ("value", "color")}})
    out: dict[str, Any] = {"version": NGFF_VERSION}
    if colors:
        out["colors"] = colors
    if props:
        out["properties"] = props
    return out


def _axis_order_problem(types: list[Any]) -> str | None:
    """What breaks OME-NGFF 0.5's axis rules (2 to 5 axes; 2 or 3 ``space`` axes; at most one
    ``time`` and one ``channel`` axis, in the order time, channel, space), or None."""
    rank = {"time": 0, "channel": 1, "space": 2}
    order = [rank.get(t, 3) for t in types]
    if not 2 <= len(types) <= 5:
        return f"{len(types)} axes (NGFF 0.5 allows 2 to 5)"
    if types.count("space") not in (2, 3):
        return f"{types.count('space')} space axes (NGFF 0.5 needs 2 or 3)"
    if types.count("time") > 1 or types.count("channel") > 1 or 3 in order:
        return "NGFF 0.5 allows one time and one channel axis besides space axes"
    if order != sorted(order):
        return "NGFF 0.5 orders them time, channel, space"
    return None


def _group_name(vol: Any) -> str | None:
    name = vol.name if isinstance(vol.name, str) else None
    return os.path.basename(name) if name else None


def _not_diagonal(vol: Any) -> list[str]:
    """The geometry fields a per-axis scale and translation cannot express."""
    out = ["space_directions"] if is_oblique(vol) else []
    frame = vol.core.measurement_frame
    if frame is not None and not np.allclose(np.asarray(frame, dtype=float),
                                             np.eye(len(frame))):
        out.append("measurement_frame")
    return out
