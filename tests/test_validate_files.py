"""``jnrrd.validate`` on files: written files are clean, damaged ones name the tile and reason."""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import jnrrd
from jnrrd.errors import ValidationError
from jnrrd.validation import Problem, run_validate, validate

VOLUME = (np.arange(40 * 30 * 20, dtype=np.uint16).reshape(40, 30, 20) * 7) % 1000


def errors(problems: list[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "error"]


def split(path: Path) -> tuple[bytes, bytes]:
    raw = path.read_bytes()
    head, sep, data = raw.partition(b"\n\n")
    return head + sep, data


def header_line(path: Path, key: str) -> Any:
    head, _ = split(path)
    for line in head.decode().splitlines():
        if line.startswith(f'{{"{key}"'):
            return json.loads(line)[key]
    raise AssertionError(f"{key} not in the header")


def replace_in_header(path: Path, old: str, new: str) -> None:
    """Replace text in the header keeping its length (so stored offsets stay right)."""
    assert len(old) == len(new)
    head, data = split(path)
    assert head.count(old.encode()) == 1
    path.write_bytes(head.replace(old.encode(), new.encode()) + data)


@pytest.fixture
def zstd_file(tmp_path: Path) -> Path:
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, VOLUME, tile=(16, 16, 16), compression="zstd", levels=2,
                checksum="crc32")
    return path


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({}, id="untiled"),
        pytest.param({"detached": True}, id="detached"),
        pytest.param({"tile": (16, 16, 16), "compression": "zstd", "levels": 2,
                      "checksum": "crc32"}, id="internal-zstd-pyramid"),
        pytest.param({"tile": (16, 16, 16), "compression": "gzip", "levels": [1, [2, 2, 1]],
                      "tile_format": "chunked"}, id="internal-gzip-anisotropic-chunked"),
        pytest.param({"tile": (16, 16, 16), "storage": "external",
                      "pattern": "t/{l}_{z}_{y}_{x}.raw", "levels": 2},
                     id="external-pyramid"),
        pytest.param({"tile": (16, 16, 16), "overlap": 2, "edge": "variable",
                      "compression": "lz4"}, id="overlap-variable-lz4"),
        pytest.param({"codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                 {"name": "zstd", "configuration": {"level": 1}}]},
                     id="codec-list"),
    ],
)
def test_written_files_are_clean(tmp_path: Path, options: dict[str, Any]) -> None:
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, VOLUME, **options)
    assert validate(path) == []
    assert validate(path, deep=True) == []
    with open(path, "rb") as f:  # a file object works the same way, and is left open
        assert validate(f, deep=True) == []
        assert not f.closed
    # A bare header cannot be checked against its data files: at most a note says so.
    assert [p for p in validate(jnrrd.read_header(path)) if p.severity != "note"] == []


def test_written_big_endian_codec_list_is_clean(tmp_path: Path) -> None:
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, VOLUME, codecs=[{"name": "bytes", "configuration": {"endian": "big"}},
                                      {"name": "zstd", "configuration": {"level": 1}}],
                tile=(16, 16, 16))
    assert validate(path) == []


def test_reader_rejects_negative_offsets(tmp_path: Path) -> None:
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, np.zeros((400,), np.uint8), tile=(200,))
    offsets = header_line(path, "tile:offset_table")
    sizes = header_line(path, "tile:size_table")
    replace_in_header(path, f'"tile:offset_table": [{offsets[0]},',
                      f'"tile:offset_table": [{"-1".rjust(len(str(offsets[0])))},')
    replace_in_header(path, f'"tile:size_table": [{sizes[0]},',
                      f'"tile:size_table": [{"-1".rjust(len(str(sizes[0])))},')
    assert [p.field for p in errors(validate(path))] == ["/tile:offset_table/0",
                                                         "/tile:size_table/0"]
    with pytest.raises(jnrrd.HeaderError):
        jnrrd.open(path)


def test_flipped_byte_in_zstd_tile_fails_its_checksum(zstd_file: Path) -> None:
    offsets = header_line(zstd_file, "tile:offset_table")
    sizes = header_line(zstd_file, "tile:size_table")
    raw = bytearray(zstd_file.read_bytes())
    raw[offsets[5] + sizes[5] // 2] ^= 0x10
    zstd_file.write_bytes(bytes(raw))
    assert errors(validate(zstd_file)) == []  # the header alone cannot tell
    problems = errors(validate(zstd_file, deep=True))
    assert [p.field for p in problems][:1] == ["/tile:metadata/5/checksum"]
    assert problems[0].message.startswith("tile 5 (level 0, tile [2, 1, 0]): crc32 checksum")
    assert problems[0].expected == header_line(zstd_file, "tile:metadata")[5]["checksum"]
    assert all(p.message.startswith("tile 5 ") for p in problems)


def test_flipped_byte_in_zstd_frame_header_does_not_decode(tmp_path: Path) -> None:
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, VOLUME, tile=(16, 16, 16), compression="zstd")
    offsets = header_line(path, "tile:offset_table")
    raw = bytearray(path.read_bytes())
    raw[offsets[3]] ^= 0xFF  # the zstd magic number
    path.write_bytes(bytes(raw))
    problems = errors(validate(path, deep=True))
    assert [p.field for p in problems] == ["/tile:offset_table/3"]
    assert problems[0].message.startswith("tile 3 (level 0, tile [0, 1, 0]): does not decode")


def test_truncated_last_tile(zstd_file: Path) -> None:
    raw = zstd_file.read_bytes()
    zstd_file.write_bytes(raw[:-10])
    last = len(header_line(zstd_file, "tile:offset_table")) - 1
    shallow = errors(validate(zstd_file))
    assert [p.field for p in shallow] == [f"/tile:offset_table/{last}"]
    assert "run past the end of the file" in shallow[0].message
    deep = errors(validate(zstd_file, deep=True))
    truncated = [p for p in deep if "truncated" in p.message]
    assert [p.field for p in truncated] == [f"/tile:offset_table/{last}"]
    assert truncated[0].message.startswith(f"tile {last} (level 1, tile [1, 0, 0]): truncated")


def test_offset_past_end_of_file(zstd_file: Path) -> None:
    offsets = header_line(zstd_file, "tile:offset_table")
    text = str(offsets[7])
    far = "9" * len(text)
    assert int(far) > zstd_file.stat().st_size
    replace_in_header(zstd_file, f", {text},", f", {far},")
    shallow = errors(validate(zstd_file))
    assert [p.field for p in shallow] == ["/tile:offset_table/7"]
    assert shallow[0].found == int(far)
    deep = errors(validate(zstd_file, deep=True))
    assert {p.field for p in deep} == {"/tile:offset_table/7"}
    assert any(p.message.startswith("tile 7 (level 0, tile [1, 0, 1]): truncated")
               for p in deep)


def test_offset_into_the_header(zstd_file: Path) -> None:
    offsets = header_line(zstd_file, "tile:offset_table")
    text = str(offsets[0])
    low = "1" + "0" * (len(text) - 1)
    assert int(low) < offsets[0]
    replace_in_header(zstd_file, f'"tile:offset_table": [{text},',
                      f'"tile:offset_table": [{low},')
    problems = errors(validate(zstd_file))
    assert [p.field for p in problems] == ["/tile:offset_table/0"]
    assert "points into the header" in problems[0].message


@pytest.mark.slow
def test_missing_external_tile_file(tmp_path: Path) -> None:
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, VOLUME, tile=(16, 16, 16), storage="external",
                pattern="t/{z}_{y}_{x}.raw")
    base = header_line(path, "tile:base_dir")
    os.remove(tmp_path / base / "t" / "1_0_2.raw")
    problems = errors(validate(path))
    assert [p.field for p in problems] == ["tile:pattern"]
    assert problems[0].message == ("tile 8 (level 0, tile [2, 0, 1]): tile file "
                                   "'t/1_0_2.raw' is missing")
    deep = errors(validate(path, deep=True))
    assert any("tile 8 " in p.message and "cannot be read" in p.message for p in deep)


def test_missing_detached_data_file(tmp_path: Path) -> None:
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, VOLUME, detached=True)
    os.remove(tmp_path / header_line(path, "data_file"))
    problems = errors(validate(path))
    assert [p.field for p in problems] == ["data_file"]
    assert "is missing" in problems[0].message


def test_detached_data_file_escaping_the_directory(tmp_path: Path) -> None:
    path = tmp_path / "v.jnrrd"
    path.write_text('{"jnrrd": "0004"}\n{"type": "uint8"}\n{"dimension": 1}\n'
                    '{"sizes": [4]}\n{"encoding": "raw"}\n{"data_file": "../x.raw"}\n\n')
    problems = errors(validate(path))
    assert [p.field for p in problems] == ["data_file"]
    assert "allow_parent" in problems[0].message


def test_short_raw_data_section(tmp_path: Path) -> None:
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, VOLUME)
    path.write_bytes(path.read_bytes()[:-2])
    problems = errors(validate(path))
    assert [p.field for p in problems] == ["sizes"]
    assert problems[0].found == VOLUME.nbytes - 2
    assert problems[0].expected == VOLUME.nbytes


def test_deep_untiled_compressed_data(tmp_path: Path) -> None:
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, VOLUME, encoding="gzip")
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    assert errors(validate(path)) == []
    problems = errors(validate(path, deep=True))
    assert [p.field for p in problems] == [""]
    assert "data section cannot be read" in problems[0].message


HEADER = b'{"jnrrd": "0004"}\n{"type": "uint8"}\n{"dimension": 1}\n{"sizes": [2]}\n'


@pytest.mark.parametrize(
    ("content", "expected", "fragment"),
    [
        pytest.param(HEADER + b'{"encoding": "raw"}\n\n\x01\x02', [], "", id="minimal"),
        pytest.param(HEADER + b'{"encoding": "raw"}\n{"sizes": [2]}\n\n\x01\x02',
                     [("error", "sizes")], "repeated on line 6 (first on line 4)",
                     id="duplicate-core-field"),
        pytest.param(b'{"jnrrd": "0005"}\n\n', [("error", "jnrrd")], "0005", id="version"),
        pytest.param(b"NRRD0004\ntype: uint8\n\n", [("error", "dimension")],
                     "required NRRD field is missing", id="classic-nrrd-incomplete"),
        pytest.param(b"NRRD0004\ntype: uint8\ndimension: 1\nsizes: 2\nencoding: raw\n\n\x01\x02",
                     [], "", id="classic-nrrd"),
        pytest.param(b"NRRD0004\ntype: uint8\ndimension: 1\nsizes: 3\nencoding: raw\n\n\x01\x02",
                     [("error", "sizes")], "holds 2 bytes", id="classic-nrrd-short"),
        pytest.param(b"\x89PNG\r\n", [("error", "jnrrd")], "", id="not-jnrrd"),
        pytest.param(HEADER + b'{"encoding": "raw", "endian": "big"}\n\n\x01\x02',
                     [("error", "")], "", id="two-keys-on-a-line"),
        pytest.param(HEADER + b'{"encoding": "raw"}\n\n', [("error", "sizes")],
                     "holds 0 bytes", id="no-data"),
        pytest.param(HEADER + b'{"encoding": "raw"}\n{"meta:a.b": 1}\n\n\x01\x02',
                     [("warning", "")], "not declared", id="undeclared-prefix-in-file"),
    ],
)
def test_file_cases(tmp_path: Path, content: bytes, expected: list[tuple[str, str]],
                    fragment: str) -> None:
    path = tmp_path / "f.jnrrd"
    path.write_bytes(content)
    problems = validate(path)
    assert sorted((p.severity, p.field) for p in problems) == sorted(expected), problems
    if fragment:
        assert fragment in problems[0].message


def test_duplicates_allowed_by_policy_are_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "f.jnrrd"
    path.write_bytes(HEADER + b'{"encoding": "raw"}\n{"sizes": [2]}\n\n\x01\x02')
    problems = validate(path, allow_duplicates=True)
    assert [(p.severity, p.field) for p in problems] == [("warning", "sizes")]


def test_bytes_io_source() -> None:
    problems = validate(io.BytesIO(HEADER + b'{"encoding": "raw"}\n\n\x01'))
    assert [(p.severity, p.field) for p in problems] == [("error", "sizes")]


def test_strict_raises_with_the_problems(tmp_path: Path) -> None:
    path = tmp_path / "f.jnrrd"
    path.write_bytes(HEADER + b'{"encoding": "rle"}\n\n\x01\x02')
    with pytest.raises(ValidationError, match=r"f\.jnrrd: 1 error\(s\); first: encoding") as e:
        validate(path, strict=True)
    assert [p.field for p in e.value.problems] == ["encoding"]
    path.write_bytes(HEADER + b'{"encoding": "raw"}\n\n\x01\x02')
    assert validate(path, strict=True) == []


def test_progress_reports_every_tile(zstd_file: Path) -> None:
    calls: list[tuple[int, int]] = []
    assert validate(zstd_file, deep=True, progress=lambda d, t: calls.append((d, t))) == []
    assert calls[0] == (0, 14) and calls[-1] == (14, 14)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


def test_policy_caps_apply(zstd_file: Path) -> None:
    problems = errors(validate(zstd_file, max_tiles=10))
    assert [p.field for p in problems] == ["tile:sizes"]
    assert "max_tiles" in problems[0].message


def test_many_bad_offsets_are_capped(tmp_path: Path) -> None:
    n = 400
    header = {
        "jnrrd": "0004", "type": "uint8", "dimension": 1, "sizes": [n], "encoding": "raw",
        "extensions": {"tile": "https://jnrrd.org/extensions/tile/v1.0.0"},
        "tile:enabled": True, "tile:dimensions": [0], "tile:sizes": [1],
        "tile:storage": "internal", "tile:format": "chunked",
        "tile:offset_table": [10**9] * n, "tile:size_table": [1] * n,
    }
    path = tmp_path / "f.jnrrd"
    path.write_bytes(b"".join(json.dumps({k: v}).encode() + b"\n" for k, v in header.items())
                     + b"\n")
    problems = validate(path)
    assert len(problems) == 101
    assert problems[-1].message == f"{n - 100} more problems of this kind not listed"


# -- the command-line entry -----------------------------------------------------------------

def test_run_validate_text(tmp_path: Path, zstd_file: Path) -> None:
    bad = tmp_path / "bad.jnrrd"
    bad.write_bytes(HEADER + b'{"encoding": "rle"}\n\n\x01\x02')
    out = io.StringIO()
    assert run_validate([str(zstd_file)], as_json=False, deep=True, out=out) == 0
    assert out.getvalue() == f"{zstd_file}: valid\n"
    out = io.StringIO()
    assert run_validate([str(zstd_file), str(bad)], as_json=False, deep=False, out=out) == 1
    assert re.fullmatch(re.escape(f"{zstd_file}: valid\n{bad}") + r": error: encoding: .+\n",
                        out.getvalue())


def test_run_validate_json(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jnrrd"
    bad.write_bytes(HEADER + b'{"encoding": "rle"}\n\n\x01\x02')
    missing = tmp_path / "missing.jnrrd"
    out = io.StringIO()
    assert run_validate([str(bad), str(missing)], as_json=True, deep=False, out=out) == 1
    rows = json.loads(out.getvalue())
    assert [set(r) for r in rows] == [{"file", "severity", "field", "message", "found",
                                       "expected"}] * 2
    assert rows[0]["file"] == str(bad) and rows[0]["field"] == "encoding"
    assert rows[0]["found"] == "rle" and "raw" in rows[0]["expected"]
    assert rows[1]["file"] == str(missing) and rows[1]["severity"] == "error"


def test_deep_check_of_a_stream_without_descriptor_reads_one_tile_at_a_time(tmp_path):
    """Deep validation decodes tiles on worker threads; a stream without a file descriptor
    is read by seek + read, which must not interleave (a tile was reported truncated)."""
    import threading
    import time

    p = tmp_path / "v.jnrrd"
    x = np.random.default_rng(0).integers(0, 255, (64, 64, 32), dtype=np.uint8)
    jnrrd.write(p, x, tile=(8, 8, 8), compression="zstd")
    raw = p.read_bytes()
    overlaps = []

    class Slow(io.RawIOBase):  # no fileno(); a pause between seek and read
        def __init__(self) -> None:
            self.b = io.BytesIO(raw)
            self.owner: int | None = None

        def readable(self) -> bool:
            return True

        def seekable(self) -> bool:
            return True

        def seek(self, pos: int, whence: int = 0) -> int:
            if self.owner not in (None, threading.get_ident()):
                overlaps.append(pos)
            self.owner = threading.get_ident()
            out = self.b.seek(pos, whence)
            time.sleep(0.002)
            return out

        def tell(self) -> int:
            return self.b.tell()

        def readinto(self, m) -> int:
            data = self.b.read(len(m))
            m[: len(data)] = data
            self.owner = None
            return len(data)

    assert jnrrd.validate(Slow(), deep=True) == []
    assert overlaps == []


def test_refused_tile_paths_name_the_tile_field_not_data_file(tmp_path: Path) -> None:
    path = tmp_path / "ext.jnrrd"
    jnrrd.write(path, np.zeros((8, 8), np.uint8), tile=4, storage="external",
                pattern="abc{x}_{y}.bin")
    replace_in_header(path, '"abc{x}_{y}.bin"', '"../{x}_{y}.bin"')
    found = errors(validate(path))
    assert found and all(p.field == "tile:pattern" for p in found)
    assert not any("data_file" in p.message for p in found), found[0].message
    assert "tile:pattern" in found[0].message
