"""Hostile header numbers, shapes and paths: a ``JnrrdError`` from every entry point.

One named test per input of the reliability campaign (docs/reliability.md): ragged or
nested tile tables, offsets and sizes near 2**63, huge integers (beyond float64, beyond
NumPy's item size, beyond the interpreter's digit limit), codec entries of the wrong type,
deep nesting, paths the OS refuses, and a detached file replaced during a read. Each input is
read through :func:`refused_everywhere`: ``read_header``, ``read``, ``open`` + slicing,
``read_tile``, ``validate``, ``validate(deep=True)`` and the ``info``/``validate``/``convert``
commands; anything but a ``JnrrdError`` (or exit codes 0/1 from the CLI) fails.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import jnrrd
from jnrrd.cli import main as cli_main

# every test here runs through libdeflate's gzip path and through zlib alone
pytestmark = pytest.mark.usefixtures("gzip_engine")

DEL = object()
VOL = np.arange(120, dtype="u2").reshape(6, 5, 4)


def rewrite(path: Path, *, keep_offsets: bool = True, **changes: Any) -> None:
    """Replace header fields (``DEL`` removes one; new keys are appended); with
    ``keep_offsets`` a shorter header is padded into the zero-filled alignment gap so the tile
    offsets stay valid."""
    raw = path.read_bytes()
    end = raw.index(b"\n\n") + 2
    fields = []
    for line in raw[:end].decode().splitlines():
        if line.strip():
            ((k, v),) = json.loads(line).items()
            if k in changes:
                v = changes.pop(k)
                if v is DEL:
                    continue
            fields.append((k, v))
    fields += [(k, v) for k, v in changes.items() if v is not DEL]
    head = b"".join(json.dumps({k: v}).encode() + b"\n" for k, v in fields) + b"\n"
    tail = raw[end:]
    if keep_offsets and tail[:1] == b"\0" and len(head) < end:
        head += b"\0" * (end - len(head))
    path.write_bytes(head + tail)


def tiled(tmp_path: Path, name: str = "v.jnrrd", data: np.ndarray = VOL, **kw: Any) -> Path:
    path = tmp_path / name
    jnrrd.write(path, data, **{"tile": (4, 3, 2), "align": 4096, **kw})
    return path


def _quiet(fn: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn()


def _slice(path: Path) -> None:
    with jnrrd.open(path) as vol:
        vol[...]
        vol[tuple(slice(1, None) for _ in range(vol.ndim))]


def _tile(path: Path) -> None:
    """``read_tile`` of the first tile (a single voxel for untiled data)."""
    with jnrrd.open(path) as vol:
        if vol.tiled:
            vol.read_tile((0,) * len(vol.tiling.axes))
        else:
            vol[(0,) * vol.ndim]


def _cli(*argv: str) -> int:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        return cli_main(list(argv))


READERS = {
    "read_header": lambda p: jnrrd.read_header(p),
    "read": lambda p: jnrrd.read(p),
    "open+slice": _slice,
    "read_tile": _tile,
}


def refused_everywhere(path: Path, error: type[jnrrd.JnrrdError] = jnrrd.JnrrdError,
                       *, match: str | None = None, header_ok: bool = False,
                       validate_flags: bool = True, data_only: bool = False) -> None:
    """Every reader raises ``error`` (``read_header`` may succeed with ``header_ok``);
    ``validate`` reports an error (``validate_flags``; only the deep one with ``data_only``,
    for faults in the data section, which ``info`` does not read either); the CLI exits 0/1."""
    for name, fn in READERS.items():
        if name == "read_header" and (header_ok or data_only):
            _quiet(lambda fn=fn: fn(path))
            continue
        with pytest.raises(error, match=match):
            _quiet(lambda fn=fn: fn(path))
    for deep in (False, True):
        problems = _quiet(lambda deep=deep: jnrrd.validate(path, deep=deep))
        if validate_flags and (deep or not data_only):
            assert any(p.severity == "error" for p in problems), (deep, problems)
    info = (0, 1) if data_only else (1,)
    assert _cli("info", str(path)) in info
    assert _cli("info", "--json", str(path)) in info
    assert _cli("validate", "--deep", str(path)) in ((1,) if validate_flags else (0, 1))
    assert _cli("convert", "--quiet", str(path), str(path.with_suffix(".out.jnrrd"))) == 1


# -- tile tables ----------------------------------------------------------------------------

@pytest.mark.parametrize("table", ["offset_table", "size_table"])
def test_ragged_nested_table_is_a_header_error(tmp_path, table):
    """``[[1, 2], [3], ...]``: NumPy's "inhomogeneous shape" ValueError escaped."""
    path = tiled(tmp_path)
    values = jnrrd.read_header(path)[f"tile:{table}"]
    rewrite(path, **{f"tile:{table}": [[1, 2], [3], *values[2:]]})
    refused_everywhere(path, jnrrd.HeaderError, match=table, header_ok=True)


def test_size_near_2_63_does_not_wrap_past_the_end_of_file_check(tmp_path):
    """offset + size wrapped in int64, passed the end-of-file check and then a read asked
    the OS for 2**63 bytes (MemoryError/OverflowError)."""
    path = tiled(tmp_path, compression="zstd")
    sizes = jnrrd.read_header(path)["tile:size_table"]
    rewrite(path, **{"tile:size_table": [2**63 - 1, *sizes[1:]]})
    refused_everywhere(path, jnrrd.DataError, match="past the end", header_ok=True)


@pytest.mark.parametrize("drop_sizes", [False, True], ids=["with-sizes", "no-sizes"])
def test_offset_2_63_minus_1_is_past_the_end(tmp_path, drop_sizes):
    """``validate --deep`` passed an offset of 2**63-1 to pread (OSError: Invalid argument)."""
    path = tiled(tmp_path, compression="zstd")
    offsets = jnrrd.read_header(path)["tile:offset_table"]
    rewrite(path, **{"tile:offset_table": [2**63 - 1, *offsets[1:]],
                     **({"tile:size_table": DEL} if drop_sizes else {})})
    refused_everywhere(path, jnrrd.JnrrdError, header_ok=True)


def test_deep_validate_of_contiguous_raw_file_without_tables(tmp_path):
    """``validate(deep=True)`` asserted an offset table (AssertionError); the reader derives
    back-to-back offsets for contiguous raw tiles, so deep validation does too."""
    path = tiled(tmp_path, align=None)
    rewrite(path, keep_offsets=False, **{"tile:offset_table": DEL, "tile:size_table": DEL})
    problems = _quiet(lambda: jnrrd.validate(path, deep=True))
    assert not [p for p in problems if p.severity == "error"], problems
    assert np.array_equal(_quiet(lambda: jnrrd.read(path))[0], VOL)
    assert _cli("validate", "--deep", str(path)) == 0
    # and a truncated one is reported per tile, not as a crash
    path.write_bytes(path.read_bytes()[:-10])
    problems = _quiet(lambda: jnrrd.validate(path, deep=True))
    assert any(p.severity == "error" and "truncated" in p.message for p in problems), problems


# -- huge numbers ---------------------------------------------------------------------------

def test_padding_value_beyond_float64_is_a_header_error(tmp_path):
    """An integer ``tile:padding_value`` of 10**400 for a float type (OverflowError)."""
    path = tiled(tmp_path, data=VOL.astype("f4"))
    rewrite(path, **{"tile:padding_value": 10**400})
    refused_everywhere(path, jnrrd.HeaderError, match="padding_value", header_ok=True)


def test_block_size_2_62_jnrrd(tmp_path):
    """``block_size`` 2**62: NumPy's "invalid itemsize in generic type tuple" ValueError."""
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, np.zeros(4, "V8"))
    rewrite(path, block_size=2**62)
    refused_everywhere(path, jnrrd.UnsupportedError, match="block_size", header_ok=True)


def test_block_size_2_62_nrrd(tmp_path):
    """The same through the classic NRRD bridge."""
    path = tmp_path / "v.nrrd"
    path.write_bytes(b"NRRD0005\ntype: block\nblock size: 4611686018427387904\ndimension: 1\n"
                     b"sizes: 4\nencoding: raw\n\n" + b"\0" * 32)
    refused_everywhere(path, jnrrd.UnsupportedError, match="block_size", validate_flags=False)


@pytest.mark.parametrize("detached", [False, True], ids=["attached", "detached"])
def test_byte_skip_2_64_jnrrd(tmp_path, detached):
    """``byte_skip`` 2**64 reached ``seek`` ("cannot fit 'int' into an offset-sized integer")."""
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, VOL, detached=detached)
    rewrite(path, byte_skip=2**64)
    refused_everywhere(path, jnrrd.HeaderError, match="byte_skip", header_ok=True)


@pytest.mark.parametrize("skip", [2**63 - 1, 2**40])
def test_byte_skip_past_the_end_is_a_data_error(tmp_path, skip):
    """A skip that fits 64 bits but runs past the end of the file."""
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, VOL)
    rewrite(path, byte_skip=skip)
    refused_everywhere(path, jnrrd.DataError, match="byte_skip", header_ok=True)


def test_byte_skip_2_64_nrrd(tmp_path):
    path = tmp_path / "v.nrrd"
    path.write_bytes(b"NRRD0005\ntype: uint8\ndimension: 1\nsizes: 4\nencoding: raw\n"
                     b"byte skip: 18446744073709551616\n\n" + b"\0" * 32)
    refused_everywhere(path, jnrrd.HeaderError, match="byte.skip", validate_flags=False)


def test_ascii_value_longer_than_the_int_digit_limit(tmp_path):
    """A 5,000-digit ascii value: Python's int-digit limit ValueError escaped."""
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, np.arange(4, dtype="u2"), encoding="ascii")
    raw = path.read_bytes()
    end = raw.index(b"\n\n") + 2
    path.write_bytes(raw[:end] + b"9" * 5000 + b" 1 2 3\n")
    refused_everywhere(path, jnrrd.DataError, match="out of range", data_only=True)
    # leading zeros do not count: the value is 1
    path.write_bytes(raw[:end] + b"0" * 5000 + b"1 1 2 3\n")
    assert _quiet(lambda: jnrrd.read(path))[0].tolist() == [1, 1, 2, 3]


def test_nrrd_ascii_value_longer_than_the_int_digit_limit(tmp_path):
    path = tmp_path / "v.nrrd"
    path.write_bytes(b"NRRD0005\ntype: uint8\ndimension: 1\nsizes: 4\nencoding: ascii\n\n"
                     + b"9" * 5000 + b" 1 2 3\n")
    refused_everywhere(path, jnrrd.DataError, match="out of range", data_only=True)


def test_nrrd_sizes_longer_than_the_int_digit_limit(tmp_path):
    path = tmp_path / "v.nrrd"
    path.write_bytes(b"NRRD0005\ntype: uint8\ndimension: 1\nsizes: " + b"9" * 5000
                     + b"\nencoding: raw\n\n" + b"\0" * 32)
    refused_everywhere(path, jnrrd.HeaderError, match="sizes", validate_flags=False)


def test_jnrrd_sizes_beyond_64_bits(tmp_path):
    """``sizes`` entries must fit a signed 64-bit integer like every header count."""
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, VOL)
    rewrite(path, sizes=[2**64, 5, 4])
    refused_everywhere(path, jnrrd.HeaderError, match="sizes", header_ok=True)


# -- codec entries --------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("entry", [5, ["bytes"], "zstd", None, {"configuration": {}}],
                         ids=["int", "list", "string", "null", "no-name"])
@pytest.mark.parametrize("alone", [False, True], ids=["after-bytes", "alone"])
def test_codec_entry_that_is_not_an_object(tmp_path, entry, alone):
    """A ``tile:codecs`` entry that is an int or a list: ``.get`` on it (AttributeError)."""
    path = tiled(tmp_path, compression="zstd")
    chain = [entry] if alone else [{"name": "bytes", "configuration": {"endian": "little"}},
                                   entry]
    rewrite(path, **{"tile:codecs": chain, "tile:compression": DEL})
    refused_everywhere(path, jnrrd.HeaderError, match="codecs", header_ok=True)


def test_nested_conditional_codec_entry_that_is_not_an_object(tmp_path):
    """The same check holds inside a ``conditional`` codec's own list."""
    path = tiled(tmp_path, compression="zstd")
    chain = [{"name": "bytes", "configuration": {"endian": "little"}},
             {"name": "conditional", "configuration": {"codecs": [7]}}]
    rewrite(path, **{"tile:codecs": chain, "tile:compression": DEL})
    refused_everywhere(path, jnrrd.JnrrdError, header_ok=True)


# -- deep nesting ---------------------------------------------------------------------------

def _nest(value: Any, depth: int, as_object: bool = False) -> Any:
    for _ in range(depth):
        value = {"a": value} if as_object else [value]
    return value


def test_sizes_nested_700_deep(tmp_path):
    """``validate()`` on ``sizes`` nested 700 deep: RecursionError."""
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, VOL)
    rewrite(path, sizes=_nest(6, 700))
    refused_everywhere(path, jnrrd.HeaderError, match="nested")


@pytest.mark.parametrize("as_object", [False, True], ids=["lists", "objects"])
def test_extension_value_nested_900_deep(tmp_path, as_object):
    """``info --json`` on a deeply nested extension value: RecursionError."""
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, VOL)
    rewrite(path, **{"meta:x": _nest(1, 900, as_object)})
    refused_everywhere(path, jnrrd.HeaderError, match="nested")


def test_extension_path_with_thousands_of_components(tmp_path):
    """A hierarchical key ``meta:a.a.a...`` (or ``meta:a[0][0]...``) builds the same
    nesting from a flat line."""
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, VOL)
    rewrite(path, **{"meta:" + ".".join(["a"] * 2000): 1})
    refused_everywhere(path, jnrrd.HeaderError, match="nested")
    jnrrd.write(path, VOL)
    rewrite(path, **{"meta:a" + "[0]" * 40: _nest(1, 40)})
    refused_everywhere(path, jnrrd.HeaderError, match="nested")


def test_250_nested_conditional_codecs(tmp_path):
    """``info --json`` on 250 nested ``conditional`` codecs: RecursionError."""
    codec: Any = {"name": "zstd", "configuration": {"level": 1}}
    for _ in range(250):
        codec = {"name": "conditional", "configuration": {"codecs": [codec]}}
    path = tiled(tmp_path, compression="zstd")
    rewrite(path, **{"tile:codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                     codec], "tile:compression": DEL})
    refused_everywhere(path, jnrrd.HeaderError, match="nested")


def test_moderate_nesting_still_reads(tmp_path):
    """Nesting within the limit (an extension value 60 deep) reads and validates."""
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, VOL, header={"meta:x": _nest(1, 60)})
    assert _quiet(lambda: jnrrd.read_header(path))["meta:x"] == _nest(1, 60)
    assert _cli("info", "--json", str(path)) == 0


def test_validate_of_a_deeply_nested_mapping():
    """``validate`` given a header mapping checks the nesting too (no RecursionError)."""
    header = {"jnrrd": "0004", "type": "uint8", "dimension": 1, "sizes": _nest(4, 5000),
              "encoding": "raw"}
    problems = jnrrd.validate(header)
    assert any(p.severity == "error" and "nested" in p.message for p in problems)


# -- paths the OS refuses -------------------------------------------------------------------

def _detached(tmp_path: Path) -> Path:
    path = tmp_path / "d.jnrrd"
    jnrrd.write(path, VOL, detached=True)
    return path


def _loop(tmp_path: Path) -> str:
    os.symlink("loop2", tmp_path / "loop1")
    os.symlink("loop1", tmp_path / "loop2")
    return "loop1"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["long-name", "long-path", "loop", "through-file"])
def test_data_file_the_os_refuses(tmp_path, kind):
    """ENAMETOOLONG, ELOOP and ENOTDIR escaped as bare OSErrors."""
    path = _detached(tmp_path)
    name = {"long-name": "a" * 300 + ".raw", "long-path": ("a" * 200 + "/") * 30 + "x.raw",
            "loop": _loop(tmp_path) if kind == "loop" else "", "through-file": "d.jnrrd/x.raw"
            }[kind]
    rewrite(path, data_file=name)
    refused_everywhere(path, jnrrd.DataError, match="data_file", header_ok=True)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["long-name", "loop", "through-file"])
@pytest.mark.parametrize("field", ["tile:pattern", "tile:base_dir"])
def test_external_tile_path_the_os_refuses(tmp_path, kind, field):
    path = tiled(tmp_path, storage="external", align=None)
    name = {"long-name": "a" * 300, "loop": _loop(tmp_path) if kind == "loop" else "",
            "through-file": "v.jnrrd"}[kind]
    change = ({"tile:pattern": name + "/{x}_{y}_{z}"} if field == "tile:pattern"
              else {"tile:base_dir": name})
    rewrite(path, **change)
    refused_everywhere(path, jnrrd.DataError, data_only=True)


@pytest.mark.parametrize("kind", ["long-name", "loop", "through-file"])
def test_nhdr_data_file_the_os_refuses(tmp_path, kind):
    name = {"long-name": "a" * 300, "loop": _loop(tmp_path) if kind == "loop" else "",
            "through-file": "v.nhdr/x"}[kind]
    path = tmp_path / "v.nhdr"
    path.write_bytes(b"NRRD0005\ntype: uint8\ndimension: 1\nsizes: 4\nencoding: raw\n"
                     b"data file: " + name.encode() + b"\n\n")
    refused_everywhere(path, jnrrd.DataError, header_ok=True, validate_flags=False)


def test_detached_file_replaced_during_a_read(tmp_path, monkeypatch):
    """The data file was opened, checked, then memory-mapped by path again: a file replaced
    (or removed) in between gave np.memmap's bare FileNotFoundError. The map now comes from
    the descriptor that was checked."""
    from jnrrd.engine import untiled_parts as datasection

    path = _detached(tmp_path)
    data_file = tmp_path / jnrrd.read_header(path)["data_file"]
    original = datasection.Part.__init__

    def remove_after_check(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if data_file.exists():
            data_file.unlink()

    monkeypatch.setattr(datasection.Part, "__init__", remove_after_check)
    with jnrrd.open(path) as vol:
        assert np.array_equal(vol[...], VOL)


# -- found by the entry-point fuzzer --------------------------------------------------------

def test_write_with_tiling_switched_off_drops_the_tile_declaration(tmp_path):
    """Found by test_fuzz_entry_points (``convert`` of a file with ``tile:enabled: false``):
    the untiled write dropped the tile fields but kept the extension's declaration, so the
    file it wrote failed validation (the declared tiling extension requires its fields)."""
    src = tiled(tmp_path, compression="zstd")
    rewrite(src, **{"tile:enabled": False})
    data, header = _quiet(lambda: jnrrd.read(src))
    out = tmp_path / "out.jnrrd"
    _quiet(lambda: jnrrd.write(out, data, header=header))
    assert not [p for p in jnrrd.validate(out) if p.severity == "error"]
    assert "tile" not in (jnrrd.read_header(out).get("extensions") or {})
    assert np.array_equal(jnrrd.read(out)[0], data)  # the bytes after the header, untiled
    assert _cli("convert", "--quiet", str(src), str(tmp_path / "out2.jnrrd")) == 0


@pytest.mark.parametrize("value", [[], {}, ["zstd"], {"zstd": 1}], ids=str)
def test_compression_that_is_not_a_string(tmp_path, value):
    """Found by test_fuzz_entry_points: ``tile:compression: []`` was looked up in the
    shorthand table (TypeError: unhashable type)."""
    path = tiled(tmp_path, compression="zstd")
    rewrite(path, **{"tile:compression": value})
    refused_everywhere(path, jnrrd.HeaderError, match="compression", header_ok=True)


def test_codec_name_that_is_not_a_string_with_compression(tmp_path):
    path = tiled(tmp_path, compression="zstd")
    rewrite(path, **{"tile:codecs": [{"name": "bytes"}, {"name": ["zstd"]}]})
    refused_everywhere(path, jnrrd.HeaderError, match="codecs", header_ok=True)
