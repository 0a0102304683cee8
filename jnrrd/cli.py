"""The ``jnrrd`` command line (CONVENTIONS §4): ``info``, ``validate`` and ``convert``.

Exit codes: 0 success, 1 an invalid file or a failed command, 2 a usage error. Errors are
one line on stderr (``jnrrd: error: <file>: <field>: <what>``), never a traceback: the CLI
catches :class:`jnrrd.JnrrdError` (bad input), ``OSError`` (missing or unreadable files) and
the ``ValueError`` that :func:`jnrrd.write` raises for impossible option values.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any, TextIO

import numpy as np

from .errors import JnrrdError, JnrrdWarning

__all__ = ["main"]

#: Output/input kinds recognised by ``convert``, by file suffix.
_JNRRD, _NRRD, _NPY = "jnrrd", "nrrd", "npy"
_COMPRESSIONS = ("raw", "gzip", "gz", "bzip2", "bz2", "zstd", "lz4")
_METHODS = ("average", "gaussian", "lanczos", "max", "min", "mode")


class _UsageError(Exception):
    """A command line that parses but asks for something impossible (exit 2)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse: 2 for usage errors, 0 for --help/--version
        return e.code if isinstance(e.code, int) else 2
    if args.command is None:
        parser.print_usage(sys.stderr)
        print("jnrrd: error: a command is required (info, validate, convert)", file=sys.stderr)
        return 2
    with warnings.catch_warnings():
        # A lenient read (e.g. a missing `encoding`) is worth one line, not a stack of them.
        warnings.showwarning = _show_warning
        warnings.simplefilter("default", JnrrdWarning)
        try:
            return int(args.run(args))
        except _UsageError as e:
            parser.print_usage(sys.stderr)
            print(f"jnrrd: error: {e}", file=sys.stderr)
            return 2
        except BrokenPipeError:
            # `jnrrd info x | head`: the reader left; say nothing more (Python docs' recipe).
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return 1
        except (JnrrdError, OSError, ValueError) as e:
            print(f"jnrrd: error: {_one_line(e)}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("jnrrd: interrupted", file=sys.stderr)
            return 130


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: TextIO | None = None, line: str | None = None) -> None:
    print(f"jnrrd: warning: {_one_line(message)}", file=sys.stderr)


def _one_line(e: object) -> str:
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        return f"{e.filename}: {e.strerror}"
    text = " ".join(str(e).split())
    return text or type(e).__name__


def _parser() -> argparse.ArgumentParser:
    from . import __version__

    p = argparse.ArgumentParser(
        prog="jnrrd",
        description="Inspect, validate and convert JNRRD volumes.",
        epilog="Exit codes: 0 ok, 1 invalid file or failure, 2 usage error.",
    )
    p.add_argument("--version", action="version", version=f"jnrrd {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    info = sub.add_parser("info", help="describe a file: type, sizes, geometry, tiles, levels",
                          description="Describe a JNRRD or NRRD file.")
    info.add_argument("file", metavar="FILE")
    info.add_argument("--json", action="store_true",
                      help='print {"header": {...}, "levels": [...]} as JSON')
    info.set_defaults(run=_cmd_info)

    val = sub.add_parser("validate", help="check files against the format rules",
                         description="Validate files; exit 0 when every file is valid.")
    val.add_argument("files", metavar="FILE", nargs="+")
    val.add_argument("--json", action="store_true", help="print the problems as a JSON array")
    val.add_argument("--deep", action="store_true",
                     help="also decode every tile and check sizes and checksums")
    val.set_defaults(run=_cmd_validate)

    conv = sub.add_parser(
        "convert", help="convert between .jnrrd, .nrrd/.nhdr and .npy",
        description="Convert IN to OUT; the formats follow the suffixes (.jnrrd, .nrrd, "
                    ".nhdr, .npy). Tiling options apply to .jnrrd output.")
    conv.add_argument("input", metavar="IN")
    conv.add_argument("output", metavar="OUT")
    conv.add_argument("--tile", type=_int_list, metavar="N[,N...]",
                      help="tile sizes, one per axis (or one for all), e.g. 64,64,64")
    conv.add_argument("--compression", choices=_COMPRESSIONS,
                      help="tile compression (shorthand for a codec chain)")
    conv.add_argument("--codecs", type=_codecs_arg, metavar="JSON",
                      help="tile codec list as Zarr v3 JSON (or @FILE holding it)")
    conv.add_argument("--levels", type=_positive_int, metavar="N",
                      help="pyramid levels (scales 1, 2, 4, ... on every tiled axis)")
    conv.add_argument("--downsample", choices=_METHODS, help="pyramid method (default average)")
    conv.add_argument("--external", nargs="?", const="", metavar="PATTERN",
                      help="store tiles as separate files named by PATTERN "
                           "(e.g. '{z}/{y}_{x}.tile'); without PATTERN the default pattern")
    conv.add_argument("--index-order", choices=("F", "C"), default="F",
                      help="how .npy array axes map onto file axes: F (default) keeps "
                           "shape == sizes, C reverses them")
    conv.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    conv.set_defaults(run=_cmd_convert)
    return p


# -- argument types ------------------------------------------------------------------------
def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return n


def _int_list(text: str) -> list[int]:
    return [_positive_int(t.strip()) for t in text.split(",")]


def _codecs_arg(text: str) -> list[dict[str, Any]]:
    if text.startswith("@"):
        try:
            with open(text[1:], encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise argparse.ArgumentTypeError(f"cannot read {text[1:]}: {e.strerror}") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON ({e.msg} at {e.pos})") from None
    if not isinstance(value, list) or not all(
        isinstance(c, dict) and isinstance(c.get("name"), str) for c in value
    ):
        raise argparse.ArgumentTypeError(
            'expected a JSON list of codec objects, e.g. [{"name": "bytes"}, {"name": "zstd"}]')
    return value


def _kind(path: str) -> str:
    low = path.lower()
    if low.endswith(".npy"):
        return _NPY
    if low.endswith((".nrrd", ".nhdr")):
        return _NRRD
    return _JNRRD


# -- info ----------------------------------------------------------------------------------
def _cmd_info(args: argparse.Namespace) -> int:
    from .api import open as jopen

    with jopen(args.file) as vol:
        levels = [_level_facts(vol, k) for k in range(len(vol.levels))]
        if args.json:
            out = {"header": dict(vol.header),
                   "levels": [{"shape": lv["shape"], "scale": lv["scale"],
                               "stored": lv["stored"], "stored_bytes": lv["stored_bytes"]}
                              for lv in levels]}
            print(_dump_json(_jsonable(out)))
            return 0
        for line in _info_lines(args.file, vol, levels):
            print(line)
    return 0


def _level_facts(vol: Any, k: int) -> dict[str, Any]:
    lv = vol.levels[k]
    stored = bool(lv.stored)
    nbytes = int(lv.nbytes)
    stored_bytes = int(lv.stored_bytes) if stored else 0
    if not vol.tiled and stored_bytes == 0:
        stored_bytes = _untiled_stored_bytes(vol)
    tiles = None
    if vol.tiled:
        tiles = int(vol.tiling.levels[k].grid.ntiles)
    return {"index": k, "shape": list(lv.shape), "scale": list(lv.scale), "stored": stored,
            "stored_bytes": stored_bytes, "nbytes": nbytes, "tiles": tiles}


def _untiled_stored_bytes(vol: Any) -> int:
    """Bytes of an untiled (possibly compressed) data section: the file after the header, or
    the detached data files."""
    from .header import parse_header

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
        if _kind(os.fspath(name)) == _JNRRD:
            _, start = parse_header(f, source=name)
        else:  # classic NRRD: the header ends at the first empty line
            start = _nrrd_data_start(f)
    return max(0, size - start) if start is not None else 0


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
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
    return f"{n} B"  # unreachable; keeps type checkers calm


def _fmt_codec(c: dict[str, Any]) -> str:
    conf = c.get("configuration") or {}
    inner = ", ".join(f"{k}={json.dumps(v)}" for k, v in conf.items() if k != "codecs")
    if "codecs" in conf:
        nested = " -> ".join(_fmt_codec(n) for n in conf["codecs"])
        inner = f"{inner + ', ' if inner else ''}codecs=[{nested}]"
    return f"{c.get('name')}({inner})" if inner else str(c.get("name"))


def _info_lines(path: str, vol: Any, levels: list[dict[str, Any]]) -> list[str]:
    h = vol.header
    lines = [f"file:        {path}"]
    typ = str(h.get("type"))
    if h.get("endian") is not None:
        typ += f" ({h['endian']}-endian)"
    lines.append(f"type:        {typ}")
    lines.append(f"sizes:       {_fmt_shape(h.get('sizes', vol.shape))}  (axis 0 fastest)")
    for key in ("labels", "kinds", "units", "spacings", "centers"):
        if h.get(key) is not None:
            lines.append(f"{key + ':':<13}{json.dumps(h[key], ensure_ascii=False)}")
    if h.get("space") is not None or h.get("space_dimension") is not None:
        lines.append(f"space:       {h.get('space') or h.get('space_dimension')}")
    if h.get("space_origin") is not None:
        lines.append(f"origin:      {json.dumps(h['space_origin'])}")
    if h.get("space_directions") is not None:
        lines.append(f"directions:  {json.dumps(h['space_directions'])}")
    try:
        aff = np.asarray(vol.affine)
        rows = ["[" + ", ".join(f"{v:g}" for v in row) + "]" for row in aff]
        lines.append(f"affine:      {rows[0]}")
        lines.extend(f"             {r}" for r in rows[1:])
    except JnrrdError as e:  # inconsistent geometry fields: report, keep describing
        lines.append(f"affine:      unavailable ({_one_line(e)})")
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
        lines.append("codecs:      " + " -> ".join(_fmt_codec(c) for c in t.codecs))
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
    ext = h.get("extensions") or {}
    used = sorted({k.split(":", 1)[0] for k in h if isinstance(k, str) and ":" in k})
    if ext or used:
        lines.append("extensions:")
        for prefix in sorted(set(ext) | set(used)):
            uri = ext.get(prefix, "(undeclared)")
            lines.append(f"  {prefix}: {uri}")
    return lines


def _dump_json(doc: dict[str, Any]) -> str:
    """``{"header": ..., "levels": ...}`` with one header field or level per line (long
    tables stay on one line, so the output is both greppable and valid JSON)."""
    def d(v: Any) -> str:
        return json.dumps(v, ensure_ascii=False)

    head = ",\n".join(f"    {d(k)}: {d(v)}" for k, v in doc["header"].items())
    levels = ",\n".join(f"    {d(lv)}" for lv in doc["levels"])
    return f'{{\n  "header": {{\n{head}\n  }},\n  "levels": [\n{levels}\n  ]\n}}'


def _jsonable(v: Any) -> Any:
    """Header values as strict-enough JSON: NaN becomes null (digest 1.2), NumPy → Python."""
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


# -- validate ------------------------------------------------------------------------------
def _cmd_validate(args: argparse.Namespace) -> int:
    from .validate import run_validate

    return int(run_validate(args.files, as_json=args.json, deep=args.deep, out=sys.stdout))


# -- convert -------------------------------------------------------------------------------
_TILING_OPTIONS = ("tile", "compression", "codecs", "levels", "downsample", "external")


def _cmd_convert(args: argparse.Namespace) -> int:
    from .api import open as jopen
    from .writing import write

    src_kind, dst_kind = _kind(args.input), _kind(args.output)
    asked = [o for o in _TILING_OPTIONS if getattr(args, o) is not None]
    if asked and dst_kind != _JNRRD:
        names = ", ".join("--" + o for o in asked)
        raise _UsageError(f"{names}: tiling options need a .jnrrd output, not {args.output}")
    if args.compression is not None and args.codecs is not None:
        raise _UsageError("--compression and --codecs exclude each other (a compression name "
                          "is shorthand for a codec list)")
    if os.path.abspath(args.input) == os.path.abspath(args.output):
        raise _UsageError("IN and OUT are the same file")
    order = args.index_order
    if src_kind == _NPY:
        # A memory map keeps memory bounded by the writer's slabs, not the array.
        data: Any = np.load(args.input, mmap_mode="r", allow_pickle=False)
        header: dict[str, Any] = {}
        vol = None
    else:
        vol = jopen(args.input, index_order=order)
        data, header = vol, dict(vol.header)
    try:
        if dst_kind == _NPY:
            _write_npy(args.output, data, fortran=order == "F")
            return 0
        header = _carried_header(header, rewrite_tiling=bool(asked))
        kw: dict[str, Any] = {}
        if args.tile is not None:
            kw["tile"] = args.tile[0] if len(args.tile) == 1 else tuple(args.tile)
        for name in ("compression", "codecs", "levels", "downsample"):
            if getattr(args, name) is not None:
                kw[name] = getattr(args, name)
        if args.external is not None:
            kw["storage"] = "external"
            if args.external:
                kw["pattern"] = args.external
        if args.codecs is not None:
            # The chain's `bytes` codec decides the byte order (CONVENTIONS §1.2): the
            # input's `endian` must not contradict it.
            header.pop("endian", None)
        if asked:
            # `write` tiles when asked for tiles, compression, codecs or levels; an explicit
            # `tile:enabled` makes --external/--downsample alone tile with the default sizes.
            header["tile:enabled"] = True
        tiled = bool(kw) or any(str(k).endswith(":enabled") and v is True
                                for k, v in header.items())
        if tiled and dst_kind == _JNRRD and not args.quiet:
            kw["progress"] = True  # the bar itself stays quiet when stderr is not a terminal
        write(args.output, data, header or None, index_order=order, **kw)
    finally:
        if vol is not None:
            vol.close()
    return 0


# Fields the writer computes (or that describe the input's storage, not the data).
_COMPUTED = {"jnrrd", "dimension", "sizes", "type", "block_size", "data_file", "data_files",
             "data_file_pattern", "line_skip", "byte_skip"}


def _carried_header(header: dict[str, Any], *, rewrite_tiling: bool) -> dict[str, Any]:
    """The input's header as ``write`` input: data-location fields dropped; tiling fields
    dropped too when the command line asks for a new layout (so they cannot override it)."""
    out = {k: v for k, v in header.items() if k not in _COMPUTED}
    if rewrite_tiling or not any(str(k).endswith(":enabled") for k in out):
        tile_prefixes = {p for p, uri in (out.get("extensions") or {}).items()
                         if isinstance(uri, str) and uri.startswith("https://jnrrd.org/"
                                                                    "extensions/tile/")}
        tile_prefixes.add("tile")
        out = {k: v for k, v in out.items() if str(k).split(":", 1)[0] not in tile_prefixes
               or ":" not in str(k)}
        if isinstance(out.get("extensions"), dict):
            ext = {p: u for p, u in out["extensions"].items() if p not in tile_prefixes}
            if ext:
                out["extensions"] = ext
            else:
                out.pop("extensions")
    if out.get("encoding") not in (None, "raw", "gzip", "gz", "bzip2", "bz2", "zstd", "lz4",
                                   "ascii", "txt", "text", "hex"):
        out.pop("encoding")
    return out


def _write_npy(path: str, data: Any, *, fortran: bool) -> None:
    """Write ``data`` (caller axis order) to ``.npy`` one slab at a time.

    Slabs run along the file's slowest axis (the caller's last axis under ``index_order="F"``,
    its first under ``"C"``), and the ``.npy`` is stored in the matching memory order, so each
    slab is contiguous, touches each tile once, and memory stays bounded by one slab.
    """
    shape = tuple(int(n) for n in data.shape)
    dtype = np.dtype(data.dtype)
    fortran = fortran and len(shape) > 1
    tmp = f"{path}.partial"
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=shape,
                                    fortran_order=fortran)
    try:
        axis = len(shape) - 1 if fortran else 0
        n = shape[axis] if shape else 1
        row = max(1, dtype.itemsize * math.prod(shape) // max(n, 1))
        step = max(1, (64 << 20) // row)  # ~64 MiB slabs
        chunk = getattr(data, "chunks", None)
        if isinstance(chunk, tuple) and len(chunk) == len(shape) and chunk:
            step = max(step // chunk[axis], 1) * chunk[axis]
        for lo in range(0, n, step):
            key = tuple(slice(lo, min(n, lo + step)) if a == axis else slice(None)
                        for a in range(len(shape)))
            out[key] = np.asarray(data[key])
        out.flush()
        del out
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


if __name__ == "__main__":  # pragma: no cover - `python -m jnrrd.cli`
    sys.exit(main())
