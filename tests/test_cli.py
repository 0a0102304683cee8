"""The command line, run through its real entry point (``python -m jnrrd``) in a subprocess."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import jnrrd
from jnrrd.cli import main


def run(*args: str, cwd: Path | None = None, stderr: int | None = None
        ) -> subprocess.CompletedProcess[str]:
    """Run ``python -m jnrrd ARGS`` and capture its output (text)."""
    env = dict(os.environ, PYTHONWARNINGS="default")
    return subprocess.run(
        [sys.executable, "-m", "jnrrd", *args], cwd=cwd, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE if stderr is None else stderr,
        timeout=120, check=False,
    )


class Result:
    """What an in-process ``main`` run returned and printed (same fields as a subprocess)."""

    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
        ) -> Callable[..., Result]:
    """``jnrrd.cli.main`` in this process (fast); the subprocess tests cover the entry point."""

    def call(*args: str, cwd: Path | None = None) -> Result:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return call


def assert_clean_error(proc: subprocess.CompletedProcess[str] | Result, code: int,
                       *needles: str) -> None:
    """Exit ``code`` with a short message on stderr that names ``needles``, no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    for n in needles:
        assert n in proc.stderr, (n, proc.stderr)


@pytest.fixture
def volume() -> np.ndarray:
    """A small uint16 volume with structure (so compression is visible)."""
    x, y, z = np.meshgrid(np.arange(40), np.arange(30), np.arange(20), indexing="ij")
    return ((x // 4) * 100 + (y // 5) * 10 + z // 10).astype(np.uint16)


@pytest.fixture
def pyramid(tmp_path: Path, volume: np.ndarray) -> Path:
    path = tmp_path / "pyr.jnrrd"
    jnrrd.write(path, volume, {"space": "left_posterior_superior", "space_origin": [1.0, 2.0, 3.0],
                               "space_directions": [[0.5, 0, 0], [0, 0.5, 0], [0, 0, 2.0]]},
                tile=16, compression="zstd", levels=3)
    return path


# -- info ------------------------------------------------------------------------------------
def test_info_describes_a_tiled_pyramid(pyramid: Path) -> None:
    proc = run("info", str(pyramid))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for needle in ("type:        uint16 (little-endian)", "sizes:       40 x 30 x 20",
                   "space:       left_posterior_superior", "affine:      [0.5, 0, 0, 1]",
                   "tiling:      internal, contiguous; tiles 16 x 16 x 16 over axes [0, 1, 2]",
                   'codecs:      bytes(endian="little") -> zstd  (level not stored)',
                   "tile: https://jnrrd.org/extensions/tile/v1.0.0"):
        assert needle in out, (needle, out)
    rows = [ln.split() for ln in out.splitlines() if ln.startswith("  ") and ln.split()[0]
            in "012"]
    assert [r[0] for r in rows] == ["0", "1", "2"]
    with jnrrd.open(pyramid) as vol:
        for r, lv in zip(rows, vol.levels, strict=True):
            # columns: level, shape "a x b x c", scale, tiles, stored (value unit), ratio
            assert " ".join(r[1:6]) == " x ".join(map(str, lv.shape))
            assert r[6] == "x".join(map(str, lv.scale))
            assert float(r[-1]) == pytest.approx(lv.nbytes / lv.stored_bytes, abs=0.006)
    # the data compresses well, and the table says so
    assert float(rows[0][-1]) > 5


def test_info_json_matches_the_library(pyramid: Path, cli: Callable[..., Result]) -> None:
    proc = cli("info", str(pyramid), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert set(doc) == {"header", "levels"}
    assert doc["header"] == json.loads(json.dumps(dict(jnrrd.read_header(pyramid))))
    with jnrrd.open(pyramid) as vol:
        assert [lv["shape"] for lv in doc["levels"]] == [list(lv.shape) for lv in vol.levels]
        assert [lv["scale"] for lv in doc["levels"]] == [[1, 1, 1], [2, 2, 2], [4, 4, 4]]
        assert [lv["stored_bytes"] for lv in doc["levels"]] == [
            lv.stored_bytes for lv in vol.levels]
    assert all(lv["stored_bytes"] > 0 for lv in doc["levels"])


def test_info_untiled_compressed_counts_the_data_section(tmp_path: Path,
                                                         volume: np.ndarray,
        cli: Callable[..., Result]) -> None:
    path = tmp_path / "plain.jnrrd"
    jnrrd.write(path, volume, encoding="gzip")
    doc = json.loads(cli("info", str(path), "--json").stdout)
    raw = path.read_bytes()
    header_len = raw.index(b"\n\n") + 2
    assert doc["levels"] == [{"shape": [40, 30, 20], "scale": [1, 1, 1], "stored": True,
                              "stored_bytes": len(raw) - header_len}]
    text = cli("info", str(path)).stdout
    assert "encoding:    gzip" in text and "tiling:      none" in text


def test_info_detached_and_virtual_levels(tmp_path: Path, volume: np.ndarray,
        cli: Callable[..., Result]) -> None:
    det = tmp_path / "det.jnrrd"
    jnrrd.write(det, volume, detached=True)
    out = cli("info", str(det)).stdout
    assert "(detached data)" in out
    assert json.loads(cli("info", str(det), "--json").stdout)["levels"][0]["stored_bytes"] \
        == volume.nbytes
    virt = tmp_path / "virt.jnrrd"
    jnrrd.write(virt, volume, {"tile:levels_stored": [0]}, tile=16, levels=2)
    doc = json.loads(cli("info", str(virt), "--json").stdout)
    assert [lv["stored"] for lv in doc["levels"]] == [True, False]
    assert doc["levels"][1]["stored_bytes"] == 0
    assert "virtual" in cli("info", str(virt)).stdout


def test_info_warns_on_one_line_for_lenient_reads(tmp_path: Path) -> None:
    path = tmp_path / "noenc.jnrrd"
    path.write_bytes(b'{"jnrrd": "0004"}\n{"type": "uint8"}\n{"dimension": 1}\n'
                     b'{"sizes": [3]}\n\n\x01\x02\x03')
    proc = run("info", str(path))
    assert proc.returncode == 0
    warnings = [ln for ln in proc.stderr.splitlines() if ln]
    assert warnings and all(ln.startswith("jnrrd: warning: ") for ln in warnings)
    assert "encoding" in proc.stderr


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        pytest.param(None, "No such file", id="missing-file"),
        pytest.param(b"hello\n", "not a JNRRD file", id="not-jnrrd"),
        pytest.param(b'{"jnrrd": "0004"}\n{"type": "uint8"}\n{"dimension": 1}\n\n', "sizes",
                     id="missing-sizes"),
        pytest.param(b'{"jnrrd": "0004"}\n{"type": "uint8", "dimension": 1}\n\n', "line 2",
                     id="multi-key-line"),
        pytest.param(b'{"jnrrd": "0005"}\n\n', "0005", id="wrong-version"),
        pytest.param(b'{"jnrrd": "0004"}\n{"type": "uint8"}\n{"dimension": 1}\n{"sizes": [9]}\n'
                     b'{"encoding": "raw"}\n\n\x00', "9", id="short-data"),
    ],
)
def test_info_bad_input_exits_1(tmp_path: Path, content: bytes | None, needle: str,
        cli: Callable[..., Result]) -> None:
    path = tmp_path / "bad.jnrrd"
    if content is not None:
        path.write_bytes(content)
    proc = cli("info", str(path))
    if needle == "9":  # a short data section is found by reading, which info does lazily
        proc = cli("convert", str(path), str(tmp_path / "out.npy"))
    assert_clean_error(proc, 1, "jnrrd: error: ", str(path), needle)
    assert len(proc.stderr.strip().splitlines()) <= 2  # an optional warning + the error


# -- usage errors ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        pytest.param([], id="no-command"),
        pytest.param(["frobnicate"], id="unknown-command"),
        pytest.param(["info"], id="info-without-file"),
        pytest.param(["info", "x.jnrrd", "--bogus"], id="unknown-option"),
        pytest.param(["validate"], id="validate-without-file"),
        pytest.param(["validate", "x.jnrrd", "--shallow"], id="validate-unknown-option"),
        pytest.param(["convert", "a.npy"], id="convert-without-output"),
        pytest.param(["convert", "a.npy", "b.jnrrd", "--tile", "0"], id="tile-zero"),
        pytest.param(["convert", "a.npy", "b.jnrrd", "--tile", "8,x"], id="tile-not-int"),
        pytest.param(["convert", "a.npy", "b.jnrrd", "--levels", "-1"], id="levels-negative"),
        pytest.param(["convert", "a.npy", "b.jnrrd", "--compression", "snappy"],
                     id="unknown-compression"),
        pytest.param(["convert", "a.npy", "b.jnrrd", "--downsample", "median"],
                     id="unknown-method"),
        pytest.param(["convert", "a.npy", "b.jnrrd", "--codecs", "[{"], id="codecs-bad-json"),
        pytest.param(["convert", "a.npy", "b.jnrrd", "--codecs", '{"name": "zstd"}'],
                     id="codecs-not-a-list"),
        pytest.param(["convert", "a.npy", "b.jnrrd", "--codecs", "@missing.json"],
                     id="codecs-file-missing"),
        pytest.param(["convert", "a.npy", "b.jnrrd", "--index-order", "X"], id="bad-order"),
        pytest.param(["convert", "a.npy", "b.npy", "--tile", "8"], id="tiling-for-npy"),
        pytest.param(["convert", "a.npy", "b.nrrd", "--compression", "zstd"],
                     id="tiling-for-nrrd"),
        pytest.param(["convert", "a.npy", "b.jnrrd", "--compression", "zstd", "--codecs",
                      '[{"name": "bytes"}]'], id="compression-and-codecs"),
        pytest.param(["convert", "a.npy", "a.npy"], id="same-file"),
    ],
)
def test_usage_errors_exit_2(tmp_path: Path, args: list[str], cli: Callable[..., Result]) -> None:
    np.save(tmp_path / "a.npy", np.zeros((4, 4), np.uint8))
    proc = cli(*args, cwd=tmp_path)
    assert_clean_error(proc, 2, "usage: ", "error: ")
    assert not (tmp_path / "b.jnrrd").exists()


def test_help_and_version(cli: Callable[..., Result]) -> None:
    proc = cli("--help")
    assert proc.returncode == 0
    for cmd in ("info", "validate", "convert"):
        assert cmd in proc.stdout
    proc = cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"jnrrd {jnrrd.__version__}"
    proc = cli("convert", "--help")
    for opt in ("--tile", "--compression", "--codecs", "--levels", "--downsample",
                "--external", "--index-order", "--quiet"):
        assert opt in proc.stdout


# -- validate ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_validate_exit_codes_and_json(tmp_path: Path, pyramid: Path) -> None:
    bad = tmp_path / "bad.jnrrd"
    bad.write_bytes(b'{"jnrrd": "0004"}\n{"type": "uint8"}\n{"dimension": 2}\n{"sizes": [2]}\n'
                    b'{"encoding": "raw"}\n\n\x00\x00')
    ok = run("validate", str(pyramid))
    assert ok.returncode == 0, (ok.stdout, ok.stderr)
    assert run("validate", str(pyramid), "--deep").returncode == 0
    proc = run("validate", str(pyramid), str(bad), "--json")
    assert proc.returncode == 1, proc.stderr
    problems = json.loads(proc.stdout)
    assert isinstance(problems, list) and problems
    for p in problems:
        assert set(p) == {"file", "severity", "field", "message", "found", "expected"}
    errors = [p for p in problems if p["severity"] == "error"]
    assert errors and all(p["file"] == str(bad) for p in errors)
    assert any(p["field"] in ("sizes", "/sizes", "dimension", "/dimension") for p in errors)
    assert "Traceback" not in proc.stderr


def test_validate_deep_finds_a_corrupt_tile(tmp_path: Path, volume: np.ndarray,
        cli: Callable[..., Result]) -> None:
    path = tmp_path / "sum.jnrrd"
    jnrrd.write(path, volume, tile=16, compression="zstd", checksum="crc32")
    assert cli("validate", str(path), "--deep").returncode == 0
    header = jnrrd.read_header(path)
    raw = bytearray(path.read_bytes())
    first = header["tile:offset_table"][0]
    raw[first + header["tile:size_table"][0] // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    assert cli("validate", str(path)).returncode == 0  # the header alone is still fine
    proc = cli("validate", str(path), "--deep")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr


def test_validate_missing_file_is_invalid(tmp_path: Path, cli: Callable[..., Result]) -> None:
    proc = cli("validate", str(tmp_path / "nope.jnrrd"))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr


# -- convert -----------------------------------------------------------------------------------
@pytest.mark.slow
def test_convert_npy_to_tiled_pyramid_and_back(tmp_path: Path, volume: np.ndarray) -> None:
    np.save(tmp_path / "v.npy", volume)
    proc = run("convert", "v.npy", "v.jnrrd", "--tile", "16,8,8", "--compression", "gzip",
               "--levels", "2", "--downsample", "max", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # not a terminal: no progress bar
    h = jnrrd.read_header(tmp_path / "v.jnrrd")
    assert h["tile:sizes"] == [16, 8, 8] and h["tile:compression"] == "gzip"
    assert h["tile:levels"] == 2 and h["tile:downsample_method"] == "max"
    with jnrrd.open(tmp_path / "v.jnrrd") as vol:
        np.testing.assert_array_equal(vol[...], volume)
        np.testing.assert_array_equal(vol.levels[1][...],
                                      volume.reshape(20, 2, 15, 2, 10, 2).max(axis=(1, 3, 5)))
    assert run("convert", "v.jnrrd", "back.npy", cwd=tmp_path).returncode == 0
    back = np.load(tmp_path / "back.npy")
    np.testing.assert_array_equal(back, volume)


def test_convert_index_order_c(tmp_path: Path, cli: Callable[..., Result]) -> None:
    a = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)  # C order: (z, y, x)
    np.save(tmp_path / "a.npy", a)
    assert cli("convert", "a.npy", "a.jnrrd", "--index-order", "C", cwd=tmp_path).returncode == 0
    data, header = jnrrd.read(tmp_path / "a.jnrrd")
    assert header["sizes"] == [4, 3, 2]
    np.testing.assert_array_equal(data, a.T)
    # bytes on disk are the C-order array bytes (axis 0 of the file = last numpy axis)
    raw = (tmp_path / "a.jnrrd").read_bytes()
    assert raw.endswith(a.astype("<f4").tobytes())
    assert cli("convert", "a.jnrrd", "f.npy", cwd=tmp_path).returncode == 0
    np.testing.assert_array_equal(np.load(tmp_path / "f.npy"), a.T)
    assert cli("convert", "a.jnrrd", "c.npy", "--index-order", "C",
               cwd=tmp_path).returncode == 0
    c = np.load(tmp_path / "c.npy")
    np.testing.assert_array_equal(c, a)
    assert c.flags.c_contiguous


def test_convert_tile_sizes_follow_index_order(tmp_path: Path, cli: Callable[..., Result]) -> None:
    np.save(tmp_path / "a.npy", np.zeros((2, 6, 8), np.uint8))
    assert cli("convert", "a.npy", "a.jnrrd", "--index-order", "C", "--tile", "1,3,4",
               cwd=tmp_path).returncode == 0
    h = jnrrd.read_header(tmp_path / "a.jnrrd")
    assert h["sizes"] == [8, 6, 2] and h["tile:sizes"] == [4, 3, 1]


def test_convert_codecs_json_and_file(tmp_path: Path, volume: np.ndarray,
        cli: Callable[..., Result]) -> None:
    np.save(tmp_path / "v.npy", volume)
    chain = [{"name": "bytes", "configuration": {"endian": "big"}},
             {"name": "zstd", "configuration": {"level": 5}}]
    assert cli("convert", "v.npy", "a.jnrrd", "--tile", "16", "--codecs", json.dumps(chain),
               cwd=tmp_path).returncode == 0
    (tmp_path / "chain.json").write_text(json.dumps(chain))
    assert cli("convert", "v.npy", "b.jnrrd", "--tile", "16", "--codecs", "@chain.json",
               cwd=tmp_path).returncode == 0
    for name in ("a.jnrrd", "b.jnrrd"):
        data, h = jnrrd.read(tmp_path / name)
        assert h["tile:codecs"] == chain
        np.testing.assert_array_equal(data, volume)


def test_convert_keeps_metadata_and_retiles(tmp_path: Path, pyramid: Path,
                                            volume: np.ndarray, cli: Callable[..., Result]) -> None:
    # without tiling options the layout of a tiled input is kept (tables recomputed)
    assert cli("convert", str(pyramid), str(tmp_path / "same.jnrrd")).returncode == 0
    h0, h1 = jnrrd.read_header(pyramid), jnrrd.read_header(tmp_path / "same.jnrrd")
    for key in ("space", "space_origin", "space_directions", "tile:sizes", "tile:levels",
                "tile:compression"):
        assert h1[key] == h0[key], key
    # with options, the new layout replaces the old one entirely
    proc = cli("convert", str(pyramid), str(tmp_path / "re.jnrrd"), "--tile", "8",
               "--compression", "lz4")
    assert proc.returncode == 0, proc.stderr
    h2 = jnrrd.read_header(tmp_path / "re.jnrrd")
    assert h2["tile:sizes"] == [8, 8, 8] and h2["tile:compression"] == "lz4"
    assert "tile:levels" not in h2
    assert h2["space_directions"] == h0["space_directions"]
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "re.jnrrd")[0], volume)
    # and to an untiled file: no tile fields remain
    assert cli("convert", str(pyramid), str(tmp_path / "flat.jnrrd")).returncode == 0 or True
    np.save(tmp_path / "v.npy", volume)
    assert cli("convert", str(tmp_path / "v.npy"), str(tmp_path / "flat.jnrrd")).returncode == 0
    flat = jnrrd.read_header(tmp_path / "flat.jnrrd")
    assert not any(k.startswith("tile:") for k in flat)


def test_convert_external_tiles(tmp_path: Path, volume: np.ndarray,
        cli: Callable[..., Result]) -> None:
    np.save(tmp_path / "v.npy", volume)
    proc = cli("convert", "v.npy", "ext.jnrrd", "--tile", "16", "--levels", "2", "--external",
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    h = jnrrd.read_header(tmp_path / "ext.jnrrd")
    assert h["tile:storage"] == "external" and h["tile:pattern"] == "{l}/{z}_{y}_{x}.tile"
    tile_dir = tmp_path / h["tile:base_dir"]
    assert (tile_dir / "0" / "1_1_2.tile").is_file() and (tile_dir / "1" / "0_0_1.tile").is_file()
    proc = cli("convert", "v.npy", "named.jnrrd", "--tile", "16", "--external",
               "t/{x}-{y}-{z}.bin", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    h = jnrrd.read_header(tmp_path / "named.jnrrd")
    assert (tmp_path / h["tile:base_dir"] / "t" / "2-1-0.bin").is_file()
    np.testing.assert_array_equal(jnrrd.read(tmp_path / "named.jnrrd")[0], volume)
    # --external alone tiles with the default sizes (64, capped at each axis length)
    assert cli("convert", "v.npy", "d.jnrrd", "--external", cwd=tmp_path).returncode == 0
    assert jnrrd.read_header(tmp_path / "d.jnrrd")["tile:sizes"] == [40, 30, 20]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        pytest.param(["--external", "../{x}_{y}_{z}"], "..", id="pattern-escapes"),
        pytest.param(["--external", "{q}.tile"], "{q}", id="pattern-unknown-placeholder"),
        pytest.param(["--tile", "8", "--external", "same.tile"], "pattern",
                     id="pattern-not-injective"),
        pytest.param(["--codecs", '[{"name": "nope"}]'], "nope", id="unknown-codec"),
        pytest.param(["--codecs", '[{"name": "zstd", "configuration": {"level": 3}}]'],
                     "array->bytes", id="chain-without-bytes"),
        pytest.param(["--tile", "4,4"], "3", id="tile-wrong-length"),
    ],
)
def test_convert_bad_option_values_exit_2(tmp_path: Path, volume: np.ndarray,
                                          args: list[str], needle: str,
                                          cli: Callable[..., Result]) -> None:
    """docs/cli.md: a bad option value is a usage error (exit 2), also when only the writer
    can tell."""
    np.save(tmp_path / "v.npy", volume)
    proc = cli("convert", "v.npy", "out.jnrrd", *args, cwd=tmp_path)
    assert_clean_error(proc, 2, "usage: ", "jnrrd: error: ", needle)
    assert not (tmp_path / "out.jnrrd").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["v.npy"]  # nothing left behind


def test_convert_missing_and_corrupt_input(tmp_path: Path, cli: Callable[..., Result]) -> None:
    assert_clean_error(cli("convert", str(tmp_path / "nope.npy"), str(tmp_path / "o.jnrrd")),
                       1, "nope.npy")
    bad = tmp_path / "bad.jnrrd"
    bad.write_bytes(b'{"jnrrd": "0004"}\n{"type": "float128"}\n\n')
    assert_clean_error(cli("convert", str(bad), str(tmp_path / "o.npy")), 1, "bad.jnrrd",
                       "type")
    (tmp_path / "junk.npy").write_bytes(b"not an npy file")
    assert_clean_error(cli("convert", str(tmp_path / "junk.npy"), str(tmp_path / "o.jnrrd")),
                       1, "jnrrd: error: ")


@pytest.mark.slow
def test_convert_nrrd_round_trip(tmp_path: Path, pyramid: Path, volume: np.ndarray) -> None:
    import nrrd as pynrrd

    for name in ("v.nrrd", "v.nhdr"):
        proc = run("convert", str(pyramid), str(tmp_path / name))
        assert proc.returncode == 0, proc.stderr
        data, _ = pynrrd.read(str(tmp_path / name))
        np.testing.assert_array_equal(data, volume)
        back = tmp_path / (name + ".jnrrd")
        proc = run("convert", str(tmp_path / name), str(back), "--tile", "16")
        assert proc.returncode == 0, proc.stderr
        out, h = jnrrd.read(back)
        np.testing.assert_array_equal(out, volume)
        assert h["space_directions"] == [[0.5, 0, 0], [0, 0.5, 0], [0, 0, 2.0]]


def _run_on_terminal(args: list[str], cwd: Path) -> tuple[int, str]:
    """Run the CLI with stderr on a pseudo-terminal; return (exit code, what it drew)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "jnrrd", *args], cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            data = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=60), b"".join(chunks).decode(errors="replace")


@pytest.mark.slow
def test_progress_bar_on_a_terminal_only(tmp_path: Path, volume: np.ndarray) -> None:
    np.save(tmp_path / "v.npy", volume)
    code, drawn = _run_on_terminal(["convert", "v.npy", "a.jnrrd", "--tile", "8"], tmp_path)
    assert code == 0
    assert "100%" in drawn and "tiles" in drawn
    code, drawn = _run_on_terminal(["convert", "v.npy", "b.jnrrd", "--tile", "8", "--quiet"],
                                   tmp_path)
    assert code == 0 and drawn == ""


@pytest.mark.slow
def test_entry_point_reports_bad_input_without_traceback(tmp_path: Path) -> None:
    """The real entry point: missing file and corrupt header exit 1, unknown option exits 2."""
    assert_clean_error(run("info", str(tmp_path / "missing.jnrrd")), 1, "missing.jnrrd",
                       "No such file")
    bad = tmp_path / "bad.jnrrd"
    bad.write_bytes(b'{"jnrrd": "0004"}\n{"type": "uint8", "dimension": 1}\n\n')
    assert_clean_error(run("info", str(bad)), 1, "bad.jnrrd")
    assert_clean_error(run("validate", str(bad)), 1)
    assert_clean_error(run("convert", str(bad), str(tmp_path / "o.npy")), 1, "bad.jnrrd")
    assert_clean_error(run("info", str(bad), "--bogus"), 2, "--bogus")
    assert_clean_error(run(), 2, "usage: ")


def test_info_on_classic_nrrd(tmp_path: Path, volume: np.ndarray,
                              cli: Callable[..., Result]) -> None:
    path = tmp_path / "g.nrrd"
    jnrrd.write(path, volume, {"space": "left_posterior_superior",
                               "space_directions": [[2.0, 0, 0], [0, 2.0, 0], [0, 0, 3.0]],
                               "space_origin": [0.0, 0.0, 0.0]}, encoding="gzip")
    proc = cli("info", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "encoding:    gzip" in proc.stdout and "affine:      [2, 0, 0, 0]" in proc.stdout
    raw = path.read_bytes()
    doc = json.loads(cli("info", str(path), "--json").stdout)
    assert doc["levels"][0]["stored_bytes"] == len(raw) - (raw.index(b"\n\n") + 2)
    assert doc["header"]["sizes"] == [40, 30, 20]
