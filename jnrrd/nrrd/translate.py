"""Classic NRRD header fields -> JNRRD fields: the one translation the NRRD reader and the
NRRD-spelled header dicts of :func:`jnrrd.write` (:mod:`.mapping`) share.

:class:`RawHeader` holds a header as written (field texts by JNRRD name, key/value pairs,
comments); :class:`Translator` parses and renames them into a :class:`~jnrrd.header.Header`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import HeaderError, UnsupportedError, where
from ..header import Header
from ..header.model import CORE_FIELDS
from .fields import (
    ENCODINGS,
    NRRD_PREFIX,
    NRRD_URI,
    TYPES,
    UNKNOWN,
    parse_int,
    parse_number,
    parse_quoted,
    parse_vectors,
    space_name,
)

__all__ = ["RawHeader", "Translator"]

# teem's test for a file-name template: a printf integer conversion that is not "%%"
_TEMPLATE = re.compile(r"(?<!%)(?:%%)*%[-+ 0#]*[0-9]*[diu]")
# JNRRD name -> the spelling used in messages when the field is absent
_DISPLAY = {"type": "type", "dimension": "dimension", "sizes": "sizes", "encoding": "encoding"}


@dataclass
class RawHeader:
    """The header as written: field values by JNRRD name, plus the NRRD-only parts."""

    version: int
    fields: dict[str, tuple[str, str, int]] = field(default_factory=dict)
    key_values: dict[str, str] = field(default_factory=dict)
    comments: list[str] = field(default_factory=list)
    data_list: list[str] | None = None
    skip_list: list[int] | None = None
    list_subdim: int | None = None
    data_start: int | None = None


class Translator:
    """One NRRD header (as written) to JNRRD fields: :meth:`run` gives the :class:`Header`."""

    def __init__(self, raw: RawHeader, source: Any) -> None:
        self.raw, self.source = raw, source
        self.out: dict[str, Any] = {}

    def has(self, name: str) -> bool:
        """Whether the header has field ``name`` (JNRRD name)."""
        return name in self.raw.fields

    def text(self, name: str) -> tuple[str, str]:
        """(spelling in the file, value) of a present field."""
        spelled, value, _ = self.raw.fields[name]
        return spelled, value

    def require(self, name: str) -> tuple[str, str]:
        """(spelling, value) of a required field, else ``HeaderError``."""
        if name not in self.raw.fields:
            raise HeaderError(f"{where(self.source, _DISPLAY[name])}required NRRD field is "
                              "missing")
        return self.text(name)

    def count(self, items: list[Any], n: int, spelled: str, what: str) -> list[Any]:
        """``items`` when there are ``n`` of them, else ``HeaderError`` naming the field."""
        if len(items) != n:
            raise HeaderError(f"{where(self.source, spelled)}expected {n} {what}, found "
                              f"{len(items)}")
        return items

    def run(self) -> Header:
        """The JNRRD :class:`Header` of the NRRD header."""
        src = self.source
        spelled, value = self.require("type")
        key = " ".join(value.split()).lower()
        if key not in TYPES:
            raise HeaderError(f"{where(src, spelled)}unknown NRRD type {value!r}; expected one "
                              "of int8/signed char, uint8/uchar, int16/short, uint16/ushort, "
                              "int32/int, uint32/uint, int64/longlong, uint64/ulonglong, float, "
                              "double, block")
        out = self.out
        out["type"] = TYPES[key]
        spelled, value = self.require("dimension")
        dim = parse_int(value, src, spelled)
        if not 1 <= dim <= 16:
            raise HeaderError(f"{where(src, spelled)}expected an integer from 1 to 16, found "
                              f"{dim}")
        out["dimension"] = dim
        spelled, value = self.require("sizes")
        sizes = [parse_int(t, src, f"{spelled}[{i}]") for i, t in enumerate(value.split())]
        out["sizes"] = self.count(sizes, dim, spelled, "sizes (one per axis)")
        if self.has("endian"):
            spelled, value = self.text("endian")
            if value.lower() not in ("little", "big"):
                raise HeaderError(f"{where(src, spelled)}expected 'little' or 'big', found "
                                  f"{value!r}")
            out["endian"] = value.lower()
        spelled, value = self.require("encoding")
        if value.lower() not in ENCODINGS:
            raise HeaderError(f"{where(src, spelled)}expected a NRRD encoding (raw, ascii/txt/"
                              f"text, hex, gzip/gz, bzip2/bz2), found {value!r}")
        out["encoding"] = ENCODINGS[value.lower()]
        if self.has("block_size"):
            out["block_size"] = parse_int(self.text("block_size")[1], src,
                                          self.text("block_size")[0])
        for name in ("content", "sample_units"):
            if self.has(name):
                out[name] = self.text(name)[1]
        self._space(dim)
        self._per_axis(dim)
        for name in ("min", "max", "old_min", "old_max"):
            if self.has(name):
                spelled, value = self.text(name)
                out[name] = parse_number(value, src, spelled)
        for name in ("line_skip", "byte_skip"):
            if self.has(name):
                spelled, value = self.text(name)
                out[name] = parse_int(value, src, spelled)
        if self.has("data_file"):
            self._data_file(sizes)
        return self._header()

    def _space(self, dim: int) -> None:
        src, out = self.source, self.out
        sd = None
        if self.has("space"):
            out["space"] = space_name(self.text("space")[1], src, self.text("space")[0])
        if self.has("space_dimension"):
            spelled, value = self.text("space_dimension")
            sd = parse_int(value, src, spelled)
            out["space_dimension"] = sd
        if "space" in out:
            from ..header.geometry_fields import SPACES

            sd = SPACES[out["space"]]
        if self.has("space_directions"):
            spelled, value = self.text("space_directions")
            dirs = parse_vectors(value, src, spelled, allow_none=True)
            out["space_directions"] = self.count(dirs, dim, spelled,
                                                 "vectors or 'none' (one per axis)")
        if self.has("space_origin"):
            spelled, value = self.text("space_origin")
            vecs = parse_vectors(value, src, spelled, allow_none=False)
            out["space_origin"] = self.count(vecs, 1, spelled, "vector")[0]
        if self.has("measurement_frame"):
            spelled, value = self.text("measurement_frame")
            frame = parse_vectors(value, src, spelled, allow_none=False)
            if sd is not None:
                self.count(frame, sd, spelled, f"vectors (space dimension {sd})")
            out["measurement_frame"] = frame
        if self.has("space_units"):
            spelled, value = self.text("space_units")
            units = parse_quoted(value, src, spelled)
            if sd is not None:
                self.count(units, sd, spelled, f"strings (space dimension {sd})")
            out["space_units"] = [u or None for u in units]

    def _per_axis(self, dim: int) -> None:
        src, out = self.source, self.out
        for name in ("spacings", "thicknesses", "axis_mins", "axis_maxs"):
            if self.has(name):
                spelled, value = self.text(name)
                vals = [parse_number(t, src, f"{spelled}[{i}]") if t.lower() not in UNKNOWN
                        else None for i, t in enumerate(value.split())]
                out[name] = self.count(vals, dim, spelled, "numbers (one per axis)")
        for name in ("centers", "kinds"):
            if self.has(name):
                spelled, value = self.text(name)
                words = self.count(value.split(), dim, spelled, f"{name} (one per axis)")
                out[name] = [None if w.lower() in UNKNOWN
                             else w.lower() if name == "centers"
                             else w.lower().replace("-", "_") for w in words]
        for name in ("labels", "units"):
            if self.has(name):
                spelled, value = self.text(name)
                # "" is NRRD's only way to say "no label": JNRRD's null (docs/nrrd.md)
                out[name] = [v or None for v in self.count(
                    parse_quoted(value, src, spelled), dim, spelled,
                    "quoted strings (one per axis)")]

    def _data_file(self, sizes: list[int]) -> None:
        src, raw, out = self.source, self.raw, self.out
        spelled, value = self.text("data_file")
        dim = len(sizes)
        if raw.data_list is not None:
            subdim = dim - 1 if raw.list_subdim is None else raw.list_subdim
            if len(raw.data_list) == 1 and raw.list_subdim is None:
                subdim = dim
            self._check_pieces(len(raw.data_list), subdim, sizes, spelled)
            out["data_files"] = list(raw.data_list)
            if raw.skip_list is not None:
                self._skip_list(spelled)
            return
        words = value.split()
        if words and _TEMPLATE.search(words[0]):
            if len(words) not in (4, 5):
                raise HeaderError(f"{where(src, spelled)}expected '<format> <min> <max> <step> "
                                  f"[<subdim>]', found {value!r}")
            lo, hi, step = (parse_int(w, src, spelled) for w in words[1:4])
            subdim = parse_int(words[4], src, spelled) if len(words) == 5 else dim - 1
            if step == 0 or (hi - lo) * step < 0:
                raise HeaderError(f"{where(src, spelled)}file number max {hi} is not reached "
                                  f"from min {lo} by step {step}")
            self._check_pieces((hi - lo) // step + 1, subdim, sizes, spelled)
            out["data_file_pattern"] = {"format": words[0], "min": lo, "max": hi, "step": step}
            return
        if not value:
            raise HeaderError(f"{where(src, spelled)}expected a file name, found ''")
        out["data_file"] = value

    def _check_pieces(self, nfiles: int, subdim: int, sizes: list[int], spelled: str) -> None:
        """teem's rule: files hold ``subdim``-D pieces, or equal slabs when subdim = dim."""
        dim = len(sizes)
        if not 1 <= subdim <= dim:
            raise HeaderError(f"{where(self.source, spelled)}expected a subdim from 1 to {dim}, "
                              f"found {subdim}")
        if subdim < dim:
            pieces = math.prod(sizes[subdim:])
            if nfiles != pieces:
                raise HeaderError(f"{where(self.source, spelled)}expected {pieces} files of "
                                  f"{subdim}-D pieces, found {nfiles}")
        elif nfiles > sizes[-1] or sizes[-1] % nfiles:
            raise HeaderError(f"{where(self.source, spelled)}expected a file count dividing the "
                              f"{sizes[-1]} slices of the last axis, found {nfiles}")

    def _skip_list(self, spelled: str) -> None:
        """SKIPLIST's per-file byte skips map to ``byte_skip`` only when they are all equal."""
        skips = self.raw.skip_list or []
        if self.out.get("byte_skip", 0):
            raise HeaderError(f"{where(self.source, spelled)}SKIPLIST gives per-file skips; "
                              "expected no global 'byte skip' with it")
        if len(set(skips)) > 1:
            raise UnsupportedError(f"{where(self.source, spelled)}SKIPLIST with different byte "
                                   f"skips per file ({sorted(set(skips))}) cannot be read; "
                                   "JNRRD applies one byte_skip to every data file")
        if skips[0]:
            self.out["byte_skip"] = skips[0]

    def _header(self) -> Header:
        h = Header()
        for name in CORE_FIELDS:
            if name in self.out:
                h[name] = self.out[name]
        if self.raw.key_values or self.raw.comments:
            h["extensions"] = {NRRD_PREFIX: NRRD_URI}
            if self.raw.key_values:
                h[f"{NRRD_PREFIX}:key_values"] = dict(self.raw.key_values)
            if self.raw.comments:
                h[f"{NRRD_PREFIX}:comments"] = list(self.raw.comments)
        return h
