"""The file format of ``write`` and ``jnrrd convert``: by suffix (any case) or by ``format``;
the tile layout keyword is ``tile_format`` (docs/format.md#file-format-by-suffix)."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import numpy as np
import pytest

import jnrrd
from jnrrd.cli import main
from jnrrd.errors import UnsupportedError

DATA = np.arange(24, dtype=np.uint16).reshape(2, 3, 4)


def _magic(path: os.PathLike[str] | str) -> bytes:
    with open(path, "rb") as f:
        return f.read(8)


@pytest.mark.parametrize("name, magic", [
    ("a.nrrd", b"NRRD0005"), ("a.NRRD", b"NRRD0005"), ("a.Nrrd", b"NRRD0005"),
    ("a.nhdr", b"NRRD0005"), ("a.NHDR", b"NRRD0005"),
    ("a.jnrrd", b"{\"jnrrd\""), ("a.JNRRD", b"{\"jnrrd\""), ("a.JNrrd", b"{\"jnrrd\""),
])
def test_suffix_picks_format_in_any_case(tmp_path, name, magic):
    jnrrd.write(tmp_path / name, DATA)
    assert _magic(tmp_path / name).startswith(magic)
    back, _ = jnrrd.read(tmp_path / name)
    np.testing.assert_array_equal(back, DATA)


def test_upper_case_nhdr_is_detached(tmp_path):
    jnrrd.write(tmp_path / "a.NHDR", DATA)
    assert "data file:" in (tmp_path / "a.NHDR").read_text()
    assert len(os.listdir(tmp_path)) == 2


@pytest.mark.parametrize("name", ["a.dat", "a", "a.nrrd.gz", "a.npy", "a.jnrrd.tmp"])
def test_unknown_suffix_is_an_error_and_writes_nothing(tmp_path, name):
    with pytest.raises(UnsupportedError, match=r"\.jnrrd, \.nrrd, \.nhdr") as exc:
        jnrrd.write(tmp_path / name, DATA)
    assert "format=" in str(exc.value) and name in str(exc.value)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("fmt, magic", [("nrrd", b"NRRD0005"), ("jnrrd", b"{\"jnrrd\"")])
def test_explicit_format_for_other_suffixes(tmp_path, fmt, magic):
    jnrrd.write(tmp_path / "a.dat", DATA, format=fmt)
    assert _magic(tmp_path / "a.dat").startswith(magic)
    back, _ = jnrrd.read(tmp_path / "a.dat")
    np.testing.assert_array_equal(back, DATA)


def test_explicit_format_agreeing_with_suffix(tmp_path):
    jnrrd.write(tmp_path / "a.NRRD", DATA, format="nrrd")
    jnrrd.write(tmp_path / "a.jnrrd", DATA, format="jnrrd")
    assert _magic(tmp_path / "a.NRRD") == b"NRRD0005"


@pytest.mark.parametrize("name, fmt", [("a.jnrrd", "nrrd"), ("a.nrrd", "jnrrd"),
                                       ("a.NHDR", "jnrrd")])
def test_explicit_format_contradicting_suffix_is_an_error(tmp_path, name, fmt):
    with pytest.raises(UnsupportedError, match="disagrees with the suffix"):
        jnrrd.write(tmp_path / name, DATA, format=fmt)
    assert os.listdir(tmp_path) == []


def test_unknown_format_value_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="'jnrrd' or 'nrrd'"):
        jnrrd.write(tmp_path / "a.jnrrd", DATA, format="tiff")
    assert os.listdir(tmp_path) == []


def test_tile_format_keyword(tmp_path):
    jnrrd.write(tmp_path / "a.jnrrd", DATA, tile=2, tile_format="chunked")
    assert jnrrd.read_header(tmp_path / "a.jnrrd")["tile:format"] == "chunked"
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "a.jnrrd")[0], DATA)


@pytest.mark.parametrize("layout", ["contiguous", "chunked"])
def test_deprecated_format_keyword_for_the_tile_layout(tmp_path, layout):
    with pytest.warns(DeprecationWarning, match="tile_format"):
        jnrrd.write(tmp_path / "a.jnrrd", DATA, tile=2, format=layout)
    assert jnrrd.read_header(tmp_path / "a.jnrrd")["tile:format"] == layout
    with pytest.warns(DeprecationWarning), pytest.raises(UnsupportedError, match="suffix"):
        jnrrd.write(tmp_path / "b.dat", DATA, tile=2, format=layout)


def test_deprecated_format_disagreeing_with_tile_format(tmp_path):
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="tile_format"):
        jnrrd.write(tmp_path / "a.jnrrd", DATA, tile=2, format="chunked",
                    tile_format="contiguous")


def test_file_object_is_jnrrd_by_default():
    buf = io.BytesIO()
    jnrrd.write(buf, DATA)
    assert buf.getvalue().startswith(b"{\"jnrrd\"")
    np.testing.assert_array_equal(jnrrd.read(io.BytesIO(buf.getvalue()))[0], DATA)


@pytest.mark.parametrize("encoding", ["raw", "gzip", "ascii"])
def test_file_object_with_format_nrrd(encoding):
    buf = io.BytesIO()
    jnrrd.write(buf, DATA, {"space_origin": [1.0, 2.0, 3.0], "space_dimension": 3},
                format="nrrd", encoding=encoding)
    assert buf.getvalue().startswith(b"NRRD0005\n")
    back, header = jnrrd.read(io.BytesIO(buf.getvalue()))
    np.testing.assert_array_equal(back, DATA)
    assert header["space_origin"] == [1.0, 2.0, 3.0]
    with pytest.raises(UnsupportedError, match="detached"):
        jnrrd.write(io.BytesIO(), DATA, format="nrrd", detached=True)


@pytest.mark.parametrize("kwargs", [{"tile": 2}, {"compression": "zstd"}, {"levels": 2},
                                    {"tile_format": "chunked"}, {"storage": "external"}])
def test_nrrd_target_refuses_tiling_options(tmp_path, kwargs):
    with pytest.raises(UnsupportedError, match="untiled"):
        jnrrd.write(tmp_path / "a.nrrd", DATA, **kwargs)
    assert os.listdir(tmp_path) == []


# -- the command line ----------------------------------------------------------------------
def _cli(capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(args))
    return code, capsys.readouterr().err


def test_cli_convert_output_suffix_any_case(tmp_path, capsys):
    src = tmp_path / "in.npy"
    np.save(src, DATA)
    for name, magic in (("o.NRRD", b"NRRD0005"), ("o.JNRRD", b"{\"jnrrd\"")):
        code, err = _cli(capsys, "convert", str(src), str(tmp_path / name), "-q")
        assert code == 0, err
        assert _magic(tmp_path / name).startswith(magic)


def test_cli_convert_unknown_suffix_needs_format(tmp_path, capsys):
    src = tmp_path / "in.npy"
    np.save(src, DATA)
    code, err = _cli(capsys, "convert", str(src), str(tmp_path / "o.dat"))
    assert code == 2 and "--format" in err and ".jnrrd" in err
    assert not (tmp_path / "o.dat").exists()
    code, err = _cli(capsys, "convert", str(src), str(tmp_path / "o.dat"), "--format", "nrrd")
    assert code == 0, err
    assert _magic(tmp_path / "o.dat") == b"NRRD0005"
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "o.dat")[0], DATA)


def test_cli_convert_format_contradicting_suffix(tmp_path, capsys):
    src = tmp_path / "in.npy"
    np.save(src, DATA)
    code, err = _cli(capsys, "convert", str(src), str(tmp_path / "o.jnrrd"), "--format", "nrrd")
    assert code == 1 and "disagrees" in err
    assert not (tmp_path / "o.jnrrd").exists()


def test_cli_convert_format_subprocess(tmp_path):
    src = tmp_path / "in.npy"
    np.save(src, DATA)
    out = tmp_path / "volume.bin"
    proc = subprocess.run([sys.executable, "-m", "jnrrd", "convert", str(src), str(out),
                           "--format", "jnrrd", "--tile", "2"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert _magic(out).startswith(b"{\"jnrrd\"")
    np.testing.assert_array_equal(jnrrd.read(out)[0], DATA)
