"""``jnrrd info``: describe a JNRRD or NRRD file as text or JSON."""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
from collections.abc import Sequence
from typing import Any

from ..errors import JnrrdError
from .common import add_storage_option, one_line, options_for, storage_options

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add the ``info`` sub-command to the ``add_subparsers`` object ``sub``."""
    info = sub.add_parser("info", help="describe a file: type, sizes, geometry, tiles, levels",
                          description="Describe a JNRRD or NRRD file (type, sizes, geometry, "
                                      "tiles, levels); list the series of a DICOM folder (or "
                                      "of one DICOM file: UID, modality, description, images, "
                                      "size); describe a NIfTI file (the header jnrrd convert "
                                      "would write).")
    info.add_argument("file", metavar="FILE")
    info.add_argument("--json", action="store_true",
                      help='print JSON: {"header": {...}, "levels": [...]} for a JNRRD or NRRD '
                           'file; {"series": [{"series_uid", "modality", "description", '
                           '"sop_class", "files", "images", "columns", "rows"}, ...]} for '
                           'DICOM; {"format": "nifti", "shape", "dtype", "header"} for NIfTI')
    add_storage_option(info)
    info.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the description of ``args.file``; return the exit code."""
    from ..api import open as jopen
    from ..conversion import source_format

    kind = source_format(args.file)
    if kind == "dicom":
        return _dicom(args)
    if kind == "nifti":
        return _nifti(args)
    options = options_for(args.file, storage_options(args.storage_option))
    with jopen(args.file, **options) as vol:
        levels = [_level_facts(vol, k, options) for k in range(len(vol.levels))]
        if args.json:
            out = {"header": dict(vol.header),
                   "levels": [{"shape": lv["shape"], "scale": lv["scale"],
                               "stored": lv["stored"], "stored_bytes": lv["stored_bytes"]}
                              for lv in levels]}
            print(_dump_json(_jsonable(out)))
            return 0
        for line in _info_lines(args.file, vol, levels):
            print(line)
        from ..editing.info import dead_line

        dead = dead_line(args.file, vol)  # bytes no header names (docs/editing.md)
        if dead is not None:
            print(dead)
        print(_preview_line(args.file))
    return 0


def _dicom(args: argparse.Namespace) -> int:
    """List the series of a DICOM folder (or describe one DICOM file's series)."""
    from ..clinical.dicom_scan import Series, read_file, scan

    if os.path.isdir(args.file):
        found = scan(args.file)
    else:
        ds = read_file(args.file)
        uid = str(getattr(ds, "SeriesInstanceUID", ""))
        found = {uid: Series(uid, [args.file], [ds])}
    listed = [s.describe() for s in found.values()]
    if args.json:
        print(json.dumps({"series": listed}, indent=2, ensure_ascii=False))
        return 0
    print(f"DICOM:       {args.file}: {len(listed)} series")
    for s in listed:
        print(f"  {s['series_uid']}")
        print(f"    {s['modality'] or '?'} {s['description']!r}: {s['images']} image(s) of "
              f"{s['columns']} x {s['rows']} in {s['files']} file(s)")
    path = shlex.quote(args.file)
    if len(listed) == 1:
        print(f"convert:     jnrrd convert {path} OUT.jnrrd")
    else:
        print(f"convert:     jnrrd convert {path} OUT.jnrrd --series UID  (UID: one of the "
              "series above)")
    return 0


def _nifti(args: argparse.Namespace) -> int:
    """Describe a NIfTI file: its size and type, and the JNRRD header it converts to."""
    from ..clinical.nifti import _nibabel, nifti_header, stored_axes

    nib = _nibabel()
    try:
        img = nib.load(args.file)
        header = nifti_header(img, args.file)
    except (OSError, EOFError, ValueError, nib.filebasedimages.ImageFileError) as e:
        raise JnrrdError(f"{args.file}: not a readable NIfTI file: {e}") from None
    full = tuple(int(n) for n in img.shape)
    shape = [full[d] for d in stored_axes(full)]
    dtype = str(img.get_data_dtype())
    if args.json:
        print(_dump_json(_jsonable({"format": "nifti", "shape": shape, "dtype": dtype,
                                    "header": header})))
        return 0
    version = header["nifti:header"]["version"]
    print(f"file:        {args.file}")
    print(f"format:      NIfTI-{version} (read through nibabel; the fields below are the "
          "JNRRD header jnrrd convert writes)")
    print(f"type:        {dtype} (stored)")
    print(f"sizes:       {_fmt_shape(shape)}  (axis 0 fastest)")
    for key, value in header.items():
        if key not in ("extensions",):
            print(_field(key, _shown(value)))
    print(f"convert:     jnrrd convert {shlex.quote(args.file)} OUT.jnrrd")
    return 0


def _preview_line(path: str) -> str:
    """Where to find a picture: the ``jnrrd preview`` command for this file."""
    import posixpath
    import shlex

    stem = posixpath.splitext(posixpath.basename(path.replace(os.sep, "/")))[0] or "preview"
    return f"preview:     jnrrd preview {shlex.quote(path)} -o {shlex.quote(stem + '.png')}"


def _level_facts(vol: Any, k: int, options: dict[str, Any] | None = None) -> dict[str, Any]:
    from ..storage import is_remote

    lv = vol.levels[k]
    stored = bool(lv.stored)
    nbytes = int(lv.nbytes)
    stored_bytes = int(lv.stored_bytes) if stored else 0
    if not vol.tiled and stored_bytes == 0:
        stored_bytes = (_remote_untiled_bytes(vol, options or {}) if is_remote(vol.name)
                        else _untiled_stored_bytes(vol))
    tiles = None
    if vol.tiled:
        tiles = int(vol.tiling.levels[k].grid.ntiles)
    return {"index": k, "shape": list(lv.shape), "scale": list(lv.scale), "stored": stored,
            "stored_bytes": stored_bytes, "nbytes": nbytes, "tiles": tiles}


def _untiled_stored_bytes(vol: Any) -> int:
    """Bytes of an untiled (possibly compressed) data section: the file after the header, or
    the detached data files."""

    name = vol.name
    if not isinstance(name, (str, os.PathLike)) or not os.path.exists(name):
        return 0
    h = vol.header
    base = os.path.dirname(os.path.abspath(name))
    files: list[str] = []
    if isinstance(h.get("data_file"), str):
        files = [h["data_file"]]
    elif isinstance(h.get("data_files"), list):
        files = [f for f in h["data_files"] if isinstance(f, str)]
    if files:
        paths = [os.path.join(base, f) for f in files]
        return sum(os.path.getsize(p) for p in paths if os.path.isfile(p))
    with open(name, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        start = _data_start(f, name)
    return max(0, size - start) if start is not None else 0


def _remote_untiled_bytes(vol: Any, options: dict[str, Any]) -> int:
    """:func:`_untiled_stored_bytes` of a URL: the object after its header, or the detached
    data objects next to it (one metadata request each)."""
    from ..policy import Policy
    from ..storage import opened

    h = vol.header
    files: list[str] = []
    if isinstance(h.get("data_file"), str):
        files = [h["data_file"]]
    elif isinstance(h.get("data_files"), list):
        files = [f for f in h["data_files"] if isinstance(f, str)]
    with opened(vol.name, Policy(), options.get("storage_options")) as src:
        store = src.store
        if files:
            assert store is not None
            return sum(store.size(f) for f in files if store.exists(f))
        f = src.stream
        size = f.seek(0, os.SEEK_END)
        f.seek(0)
        start = _data_start(f, vol.name)
    return max(0, size - start) if start is not None else 0


def _data_start(f: Any, name: Any) -> int | None:
    """Offset of the data section after the header; the content tells JNRRD from classic NRRD
    (as ``jnrrd.open`` does), whatever the file's suffix."""
    from ..header import parse_header

    head = f.read(8)
    f.seek(0)
    if head.startswith(b"NRRD000"):  # classic NRRD: the header ends at the first empty line
        return _nrrd_data_start(f)
    return parse_header(f, source=name)[1]


def _nrrd_data_start(f: Any, limit: int = 64 << 20) -> int | None:
    """Offset after a classic NRRD header's empty line (``None`` when not found in ``limit``
    bytes); lines end in LF or CRLF."""
    pos = 0
    while pos < limit:
        line = f.readline(limit - pos)
        if not line:
            return None
        pos += len(line)
        if line in (b"\n", b"\r\n"):
            return pos
    return None


def _fmt_shape(shape: Sequence[int]) -> str:
    return " x ".join(str(int(n)) for n in shape)


def _fmt_bytes(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    size = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        size /= 1024
        if size < 1024 or unit == "TiB":
            return f"{size:.1f} {unit}"
    return f"{n} B"  # unreachable; keeps type checkers calm


def _fmt_codec(c: dict[str, Any]) -> str:
    conf = c.get("configuration") or {}
    inner = ", ".join(f"{k}={json.dumps(v)}" for k, v in conf.items() if k != "codecs")
    if "codecs" in conf:
        nested = " -> ".join(_fmt_codec(n) for n in conf["codecs"])
        inner = f"{inner + ', ' if inner else ''}codecs=[{nested}]"
    return f"{c.get('name')}({inner})" if inner else str(c.get("name"))


def _fmt_chain(h: Any, t: Any) -> str:
    """The tile codec chain as the file stores it (docs/cli.md#info). ``tile:compression``
    names a compressor but not its level: the chain it stands for carries the reader's default
    level, which is not shown as fact. A level appears only when the file stores one: in
    ``tile:codecs``, or per tile in ``tile:compression_levels``."""
    if t.field("codecs") in h:
        return " -> ".join(_fmt_codec(c) for c in t.codecs)
    levels = h.get(t.field("compression_levels"))
    if isinstance(levels, list) and levels and all(type(v) is int for v in levels):
        lo, hi = min(levels), max(levels)
        level: int | str | None = lo if lo == hi else f"{lo}..{hi}, per tile"
    else:
        level = None
    parts = []
    for c in t.codecs:
        if c.get("name") == "bytes":
            parts.append(_fmt_codec(c))
        elif level is None:
            parts.append(f"{c.get('name')}")
        else:
            parts.append(f"{c.get('name')}(level={level})")
    text = " -> ".join(parts)
    return text + "  (level not stored)" if level is None and len(parts) > 1 else text


def _info_lines(path: str, vol: Any, levels: list[dict[str, Any]]) -> list[str]:
    import numpy as np

    h = vol.header
    lines = [f"file:        {path}"]
    typ = str(h.get("type"))
    if h.get("endian") is not None:
        typ += f" ({h['endian']}-endian)"
    lines.append(f"type:        {typ}")
    lines.append(f"sizes:       {_fmt_shape(h.get('sizes', vol.shape))}  (axis 0 fastest)")
    if h.get("content") is not None:
        lines.append(f"content:     {h['content']}")
    for key in ("labels", "kinds", "units", "spacings", "thicknesses", "axis_mins", "axis_maxs",
                "centers"):
        if h.get(key) is not None:
            lines.append(_field(key, json.dumps(h[key], ensure_ascii=False)))
    if h.get("space") is not None:
        lines.append(f"space:       {h['space']}")
    elif h.get("space_dimension") is not None:
        lines.append(f"space:       {h['space_dimension']}-D (no named space)")
    if h.get("space_origin") is not None:
        lines.append(f"origin:      {json.dumps(h['space_origin'])}")
    if h.get("space_directions") is not None:
        lines.append(f"directions:  {json.dumps(h['space_directions'])}")
    if h.get("space_units") is not None:
        lines.append(f"space units: {json.dumps(h['space_units'], ensure_ascii=False)}")
    lines.extend(_measurement_frame(h.get("measurement_frame")))
    try:
        aff = np.asarray(vol.affine)
        rows = ["[" + ", ".join(f"{v:g}" for v in row) + "]" for row in aff]
        lines.append(f"affine:      {rows[0]}")
        lines.extend(f"             {r}" for r in rows[1:])
    except JnrrdError as e:  # inconsistent geometry fields: report, keep describing
        lines.append(f"affine:      unavailable ({one_line(e)})")
    enc = h.get("encoding", "raw")
    if h.get("data_file") or h.get("data_files") or h.get("data_file_pattern"):
        enc += "  (detached data)"
    lines.append(f"encoding:    {enc}")
    t = vol.tiling
    if t is None:
        lines.append("tiling:      none")
    else:
        lines.append(
            f"tiling:      {t.storage}"
            + (f", {t.format}" if t.storage == "internal" else "")
            + f"; tiles {_fmt_shape(t.tile)} over axes {list(t.axes)}"
            + f"; edge {t.edge}"
            + (f"; overlap {list(t.overlap)}" if any(t.overlap) else "")
            + (f"; padding {json.dumps(t.padding_value)}" if t.padding_value not in (0, None)
               else "")
        )
        if t.storage == "external":
            lines.append(f"pattern:     {t.pattern}"
                         + (f"  (base_dir {t.base_dir})" if t.base_dir else ""))
        lines.append("codecs:      " + _fmt_chain(h, t))
    lines.append("levels:")
    lines.append("  level  shape                 scale       tiles   stored        ratio")
    for lv in levels:
        if not lv["stored"]:
            stored, ratio = "virtual", "-"
        else:
            stored = _fmt_bytes(lv["stored_bytes"])
            ratio = (f"{lv['nbytes'] / lv['stored_bytes']:.2f}" if lv["stored_bytes"]
                     else "-")
        tiles = "-" if lv["tiles"] is None else str(lv["tiles"])
        lines.append(f"  {lv['index']:<6} {_fmt_shape(lv['shape']):<21} "
                     f"{'x'.join(map(str, lv['scale'])):<11} {tiles:<7} {stored:<13} {ratio}")
    lines.extend(_metadata_lines(h, vol.tiling))
    ext = h.get("extensions") or {}
    used = sorted({k.split(":", 1)[0] for k in h if isinstance(k, str) and ":" in k})
    if ext or used:
        lines.append("extensions:")
        for prefix in sorted(set(ext) | set(used)):
            uri = ext.get(prefix, "(undeclared)")
            lines.append(f"  {prefix}: {uri}")
    return lines


def _measurement_frame(mf: Any) -> list[str]:
    """The measurement frame as matrix rows (inner list *i* of the field is column *i*)."""
    if mf is None:
        return []
    import numpy as np

    try:
        rows = np.asarray(mf, dtype=np.float64).T
    except (TypeError, ValueError):
        return [f"measurement frame: {json.dumps(mf)}"]
    if rows.ndim != 2:
        return [f"measurement frame: {json.dumps(mf)}"]
    return ["measurement frame:",
            *("  [" + ", ".join(f"{v:g}" for v in row) + "]" for row in rows)]


#: longest value text shown for a key/value pair or extension field
_VALUE_WIDTH = 200


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(_jsonable(value),
                                                         ensure_ascii=False)
    text = " ".join(text.split()) if "\n" in text else text
    return text if len(text) <= _VALUE_WIDTH else text[:_VALUE_WIDTH - 3] + "..."


def _metadata_lines(h: Any, tiling: Any) -> list[str]:
    """NRRD key/value pairs (``<nrrd>:key_values``) and the other extension fields that are
    neither tiling nor NRRD bookkeeping, one per line."""
    from ..nrrd.fields import NRRD_URI

    nrrd = h.prefix_for(NRRD_URI) if hasattr(h, "prefix_for") else None
    nrrd = nrrd or "nrrd"
    tile = tiling.prefix if tiling is not None else "tile"
    lines: list[str] = []
    kv = h.get(f"{nrrd}:key_values")
    if isinstance(kv, dict) and kv:
        lines.append("key/values:")
        lines.extend(f"  {k}: {_shown(v)}" for k, v in kv.items())
    other = [(k, v) for k, v in h.items() if isinstance(k, str) and ":" in k
             and k.split(":", 1)[0] not in (tile, nrrd)]
    if other:
        lines.append("fields:")
        lines.extend(f"  {k}: {_shown(v)}" for k, v in other)
    return lines


def _field(key: str, text: str) -> str:
    """``key: text`` with the value in the column of the other lines (13), or one space
    after a longer key."""
    return f"{key + ':':<12} {text}"


def _dump_json(doc: dict[str, Any]) -> str:
    """``doc`` with one entry per line for its mappings (``header``: one field per line)
    and its lists of mappings (``levels``: one level per line); other values on one line
    (long tables stay on one line, so the output is both greppable and valid JSON)."""
    def d(v: Any) -> str:
        return json.dumps(v, ensure_ascii=False)

    def block(v: Any) -> str:
        if isinstance(v, dict) and v:
            inner = ",\n".join(f"    {d(k)}: {d(x)}" for k, x in v.items())
            return f"{{\n{inner}\n  }}"
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            inner = ",\n".join(f"    {d(x)}" for x in v)
            return f"[\n{inner}\n  ]"
        return d(v)

    body = ",\n".join(f"  {d(k)}: {block(v)}" for k, v in doc.items())
    return f"{{\n{body}\n}}"


def _jsonable(v: Any) -> Any:
    """Header values as strict-enough JSON: NaN becomes null (docs/format.md#lines-and-json-tokens),
    NumPy → Python."""
    import numpy as np

    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return _jsonable(v.tolist())
    if isinstance(v, np.generic):
        return _jsonable(v.item())
    if isinstance(v, float) and math.isnan(v):
        return None
    return v

