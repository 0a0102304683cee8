"""Detached data (docs/format.md#attached-and-detached-data) and the path policy
(docs/security.md#path-policy): ``data_file``, ``data_files``, ``data_file_pattern``,
``write(detached=True)``, and every way a header could point outside its directory, refused before
anything is opened."""

from __future__ import annotations

import builtins
import gzip
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
import zstandard

import jnrrd
from jnrrd.errors import DataError, HeaderError, SecurityError, UnsupportedError

X = np.arange(24, dtype=np.uint16).reshape(2, 3, 4)  # file order: 0, 1, ..., 23


def header(*extra: dict, encoding: str = "raw") -> bytes:
    lines = [{"jnrrd": "0004"}, {"type": "uint16"}, {"dimension": 3}, {"sizes": [2, 3, 4]},
             {"endian": "little"}, {"encoding": encoding}, *extra]
    return ("\n".join(json.dumps(x) for x in lines) + "\n\n").encode()


def flat(lo: int, hi: int) -> bytes:
    return np.arange(lo, hi, dtype="<u2").tobytes()


def expected() -> np.ndarray:
    return np.arange(24, dtype=np.uint16).reshape(2, 3, 4, order="F")


def test_data_file_single(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "v.raw").write_bytes(flat(0, 24))
    p = tmp_path / "v.jnrrd"
    p.write_bytes(header({"data_file": "sub/v.raw"}) + b"anything after the header")
    data, h = jnrrd.read(p)
    np.testing.assert_array_equal(data, expected())
    with jnrrd.open(p) as vol:
        np.testing.assert_array_equal(vol[:, ::-2, 1:3], expected()[:, ::-2, 1:3])


def test_data_files_each_with_its_own_stream_and_skips(tmp_path: Path) -> None:
    (tmp_path / "a.gz").write_bytes(b"skip me\n" + gzip.compress(b"xyz" + flat(0, 8)))
    (tmp_path / "b.zst").write_bytes(b"skip me\n" + zstandard.ZstdCompressor().compress(
        b"xyz" + flat(8, 16)))
    (tmp_path / "c.gz").write_bytes(b"skip me\n" + gzip.compress(b"xyz" + flat(16, 24))
                                    + gzip.compress(b"ignored"))
    # every file carries its own gzip stream; one zstd file is mislabelled on purpose below
    p = tmp_path / "v.jnrrd"
    p.write_bytes(header({"line_skip": 1}, {"byte_skip": 3},
                         {"data_files": ["a.gz", "c.gz", "a.gz"]}, encoding="gzip"))
    data, _ = jnrrd.read(p)
    first = np.frombuffer(flat(0, 8) + flat(16, 24) + flat(0, 8), "<u2")
    np.testing.assert_array_equal(data, first.reshape(2, 3, 4, order="F"))
    p.write_bytes(header({"line_skip": 1}, {"byte_skip": 3},
                         {"data_files": ["a.gz", "b.zst", "c.gz"]}, encoding="gzip"))
    with pytest.raises(DataError, match="b.zst"):
        jnrrd.read(p)


@pytest.mark.parametrize("k", [1, 2, 3, 4, 6, 8, 12, 24])
def test_data_files_split_evenly(tmp_path: Path, k: int) -> None:
    per = 24 // k
    names = []
    for j in range(k):
        (tmp_path / f"part{j}.raw").write_bytes(flat(j * per, (j + 1) * per))
        names.append(f"part{j}.raw")
    p = tmp_path / "v.jnrrd"
    p.write_bytes(header({"data_files": names}))
    np.testing.assert_array_equal(jnrrd.read(p)[0], expected())


@pytest.mark.parametrize("k", [5, 7, 9, 25])
def test_data_files_must_divide(tmp_path: Path, k: int) -> None:
    p = tmp_path / "v.jnrrd"
    p.write_bytes(header({"data_files": [f"{j}.raw" for j in range(k)]}))
    with pytest.raises(HeaderError, match="v.jnrrd: data_files"):
        jnrrd.read(p)


@pytest.mark.parametrize("pattern, numbers", [
    pytest.param({"format": "s%03d.raw", "min": 1, "max": 4, "step": 1}, [1, 2, 3, 4],
                 id="step-1"),
    pytest.param({"format": "s%03d.raw", "min": 0, "max": 7, "step": 2}, [0, 2, 4, 6],
                 id="step-2-max-not-reached"),
    pytest.param({"format": "s%03d.raw", "min": 9, "max": 0, "step": -3}, [9, 6, 3, 0],
                 id="negative-step"),
    pytest.param({"format": "slice_%d%%.raw", "min": 10, "max": 11, "step": 1}, [10, 11],
                 id="literal-percent"),
])
def test_data_file_pattern(tmp_path: Path, pattern: dict, numbers: list[int]) -> None:
    per = 24 // len(numbers)
    for j, n in enumerate(numbers):
        (tmp_path / (pattern["format"].replace("%%", "\0") % n).replace("\0", "%")
         ).write_bytes(flat(j * per, (j + 1) * per))
    p = tmp_path / "v.jnrrd"
    p.write_bytes(header({"data_file_pattern": pattern}))
    np.testing.assert_array_equal(jnrrd.read(p)[0], expected())


@pytest.mark.parametrize("pattern, match", [
    pytest.param({"format": "s%03d.raw", "min": 1, "max": 4, "step": 0}, "step", id="zero-step"),
    pytest.param({"format": "s%03d.raw", "min": 1, "max": 4, "step": -1}, "step",
                 id="step-against-direction"),
    pytest.param({"format": "s%s.raw", "min": 1, "max": 4, "step": 1}, "format",
                 id="string-conversion"),
    pytest.param({"format": "s%d%d.raw", "min": 1, "max": 4, "step": 1}, "format",
                 id="two-conversions"),
    pytest.param({"format": "s%n.raw", "min": 1, "max": 4, "step": 1}, "format",
                 id="printf-n"),
    pytest.param({"format": "s.raw", "min": 1, "max": 4, "step": 1}, "format",
                 id="no-conversion"),
])
def test_bad_data_file_pattern(tmp_path: Path, pattern: dict, match: str) -> None:
    p = tmp_path / "v.jnrrd"
    p.write_bytes(header({"data_file_pattern": pattern}))
    with pytest.raises(HeaderError, match=f"data_file_pattern.*{match}"):
        jnrrd.read(p)


def test_pattern_file_count_cap(tmp_path: Path) -> None:
    p = tmp_path / "v.jnrrd"
    p.write_bytes(header({"data_file_pattern": {"format": "%d", "min": 1, "max": 24,
                                                "step": 1}}))
    with pytest.raises(UnsupportedError, match="max_files"):
        jnrrd.read(p, max_files=10)


@pytest.mark.parametrize("extra, field, encoding", [
    pytest.param({"data_file": "nowhere.raw"}, "data_file", "raw", id="data_file-raw"),
    pytest.param({"data_file": "nowhere.gz"}, "data_file", "gzip", id="data_file-gzip"),
    pytest.param({"data_file": "sub"}, "data_file", "raw", id="data_file-is-a-directory"),
    pytest.param({"data_files": ["a.raw", "nowhere.raw"]}, "data_files", "raw",
                 id="data_files-second"),
    pytest.param({"data_file_pattern": {"format": "%d.raw", "min": 0, "max": 1, "step": 1}},
                 "data_file_pattern", "raw", id="pattern"),
])
def test_missing_data_file_is_a_data_error(tmp_path: Path, extra: dict, field: str,
                                           encoding: str) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.raw").write_bytes(flat(0, 12))
    (tmp_path / "0.raw").write_bytes(flat(0, 12))
    p = tmp_path / "v.jnrrd"
    p.write_bytes(header(extra, encoding=encoding))
    match = f"v.jnrrd: {field}: .*(nowhere|sub|1.raw)"
    with pytest.raises(DataError, match=match):
        jnrrd.read(p)
    with pytest.raises(DataError, match=match):  # at open (memmap) or at the first read
        with jnrrd.open(p) as vol:
            vol[0]


def test_two_detached_fields(tmp_path: Path) -> None:
    p = tmp_path / "v.jnrrd"
    p.write_bytes(header({"data_file": "a.raw"}, {"data_files": ["a.raw"]}))
    with pytest.raises(HeaderError, match="at most one"):
        jnrrd.read(p)


def test_detached_header_from_a_nameless_stream(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedError, match="header's path"):
        jnrrd.read(io.BytesIO(header({"data_file": "v.raw"})))


# -- writing ------------------------------------------------------------------------------------
@pytest.mark.parametrize("encoding", ["raw", "ascii", "hex", "gzip", "bzip2", "zstd", "lz4"])
@pytest.mark.parametrize("index_order", ["F", "C"])
def test_write_detached(tmp_path: Path, encoding: str, index_order: str) -> None:
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, X, detached=True, encoding=encoding, index_order=index_order)
    h = jnrrd.read_header(p)
    assert os.path.dirname(h["data_file"]) == ""  # beside the header, relative
    assert (tmp_path / h["data_file"]).exists()
    raw = p.read_bytes()
    assert raw.endswith(b"\n\n") and raw.count(b"\n\n") == 1  # nothing after the header
    data, _ = jnrrd.read(p, index_order=index_order)
    np.testing.assert_array_equal(data, X)
    assert sorted(os.listdir(tmp_path)) == sorted(["v.jnrrd", h["data_file"]])


def test_write_detached_raw_bytes(tmp_path: Path) -> None:
    p = tmp_path / "v.jnrrd"
    jnrrd.write(p, expected(), detached=True, header={"endian": "big"})
    h = jnrrd.read_header(p)
    assert (tmp_path / h["data_file"]).read_bytes() == np.arange(24, dtype=">u2").tobytes()


def test_write_detached_to_a_stream_is_refused() -> None:
    with pytest.raises(UnsupportedError):
        jnrrd.write(io.BytesIO(), X, detached=True)


# -- path policy ----------------------------------------------------------------------------
class OpenSpy:
    """Records every file the library opens (builtins.open and os.open)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.opened: list[str] = []
        real_open, real_os_open = builtins.open, os.open

        def spy_open(file, *a, **kw):
            self.opened.append(os.fspath(file) if not isinstance(file, int) else str(file))
            return real_open(file, *a, **kw)

        def spy_os_open(path, *a, **kw):
            self.opened.append(os.fspath(path))
            return real_os_open(path, *a, **kw)

        monkeypatch.setattr(builtins, "open", spy_open)
        monkeypatch.setattr(os, "open", spy_os_open)


HOSTILE = [
    pytest.param("../outside.raw", id="parent"),
    pytest.param("sub/../../outside.raw", id="parent-through-sub"),
    pytest.param("OUTSIDE_ABS", id="absolute"),
    pytest.param("https://example.org/v.raw", id="https-url"),
    pytest.param("s3://bucket/v.raw", id="s3-url"),
    pytest.param("file:///etc/passwd", id="file-url"),
    pytest.param("C:\\data\\v.raw", id="windows-drive"),
    pytest.param("C:v.raw", id="windows-drive-relative"),
    pytest.param("\\\\server\\share\\v.raw", id="unc"),
    pytest.param("v.raw\x00.txt", id="nul-byte"),
    pytest.param("", id="empty"),
]


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    """tmp/outside.raw (a target outside), tmp/d/ (the header's directory)."""
    (tmp_path / "outside.raw").write_bytes(flat(0, 24))
    (tmp_path / "d" / "sub").mkdir(parents=True)
    return tmp_path / "d"


def _name(name: str, layout: Path) -> str:
    return str(layout.parent / "outside.raw") if name == "OUTSIDE_ABS" else name


@pytest.mark.slow
@pytest.mark.parametrize("field", ["data_file", "data_files", "data_file_pattern"])
@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_paths_refused_before_opening(layout: Path, monkeypatch, name: str,
                                              field: str) -> None:
    name = _name(name, layout)
    if field == "data_file":
        extra = {"data_file": name}
    elif field == "data_files":
        (layout / "ok.raw").write_bytes(flat(0, 12))
        extra = {"data_files": ["ok.raw", name]}  # the good file first: still nothing opened
    else:  # an empty name leaves a format without a conversion: a HeaderError
        extra = {"data_file_pattern": {"format": name + "%d" if name else "", "min": 0,
                                       "max": 0, "step": 1}}
    p = layout / "v.jnrrd"
    p.write_bytes(header(extra))
    spy = OpenSpy(monkeypatch)
    with pytest.raises((SecurityError, HeaderError)) as info:
        jnrrd.read(p)
    assert spy.opened == [str(p)], spy.opened  # only the header itself
    if name:
        assert isinstance(info.value, SecurityError)
        assert isinstance(info.value, PermissionError)
        assert f"v.jnrrd: {field}" in str(info.value)


def test_symlink_pointing_outside_is_refused(layout: Path, monkeypatch) -> None:
    os.symlink(layout.parent / "outside.raw", layout / "link.raw")
    p = layout / "v.jnrrd"
    p.write_bytes(header({"data_file": "link.raw"}))
    spy = OpenSpy(monkeypatch)
    with pytest.raises(SecurityError, match="outside"):
        jnrrd.read(p)
    assert spy.opened == [str(p)]


def test_symlinked_directory_pointing_outside_is_refused(layout: Path) -> None:
    os.symlink(layout.parent, layout / "up")
    p = layout / "v.jnrrd"
    p.write_bytes(header({"data_file": "up/outside.raw"}))
    with pytest.raises(SecurityError):
        jnrrd.read(p)


def test_symlink_inside_the_directory_is_fine(layout: Path) -> None:
    (layout / "sub" / "real.raw").write_bytes(flat(0, 24))
    os.symlink(layout / "sub" / "real.raw", layout / "link.raw")
    p = layout / "v.jnrrd"
    p.write_bytes(header({"data_file": "link.raw"}))
    np.testing.assert_array_equal(jnrrd.read(p)[0], expected())


@pytest.mark.parametrize("name, policy", [
    pytest.param("../outside.raw", {"allow_parent": True}, id="allow_parent"),
    pytest.param("OUTSIDE_ABS", {"allow_absolute": True}, id="allow_absolute"),
    pytest.param("../outside.raw", {"allowed_roots": ["ROOT"]}, id="allowed_roots"),
    pytest.param("OUTSIDE_ABS", {"allow_absolute": True, "allowed_roots": ["ROOT"]},
                 id="absolute-inside-allowed-root"),
])
def test_opt_ins(layout: Path, name: str, policy: dict) -> None:
    policy = {k: ([str(layout.parent)] if v == ["ROOT"] else v) for k, v in policy.items()}
    p = layout / "v.jnrrd"
    p.write_bytes(header({"data_file": _name(name, layout)}))
    data, _ = jnrrd.read(p, **policy)
    np.testing.assert_array_equal(data, expected())
    with jnrrd.open(p, **policy) as vol:
        np.testing.assert_array_equal(vol[1], expected()[1])


@pytest.mark.parametrize("name, policy", [
    pytest.param("OUTSIDE_ABS", {"allow_parent": True}, id="parent-does-not-allow-absolute"),
    pytest.param("../outside.raw", {"allow_absolute": True}, id="absolute-does-not-allow-parent"),
    pytest.param("../outside.raw", {"allowed_roots": ["OTHER"]}, id="other-root"),
    pytest.param("https://example.org/v.raw", {"allow_absolute": True, "allow_parent": True},
                 id="url-needs-an-opener"),
])
def test_opt_ins_are_specific(layout: Path, name: str, policy: dict) -> None:
    (layout / "other").mkdir()
    policy = {k: ([str(layout / "other")] if v == ["OTHER"] else v) for k, v in policy.items()}
    p = layout / "v.jnrrd"
    p.write_bytes(header({"data_file": _name(name, layout)}))
    with pytest.raises(SecurityError):
        jnrrd.read(p, **policy)


@pytest.mark.parametrize("encoding, body", [
    pytest.param("raw", flat(0, 24), id="raw"),
    pytest.param("gzip", gzip.compress(flat(0, 24)), id="gzip"),
])
def test_opener_serves_urls(layout: Path, encoding: str, body: bytes) -> None:
    calls: list[tuple[str, str]] = []

    def opener(url: str, mode: str):
        calls.append((url, mode))
        return io.BytesIO(body)

    url = "https://example.org/data/v.bin"
    p = layout / "v.jnrrd"
    p.write_bytes(header({"data_file": url}, encoding=encoding))
    data, _ = jnrrd.read(p, opener=opener)
    np.testing.assert_array_equal(data, expected())
    assert calls == [(url, "rb")]
    with jnrrd.open(p, opener=opener) as vol:
        np.testing.assert_array_equal(vol[:, 1:, ::-1], expected()[:, 1:, ::-1])
