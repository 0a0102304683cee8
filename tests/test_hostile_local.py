"""Hostile local files against preview, kerchunk_refs, read_tile and validate (issue 29
items 7-10): each answer is correct data or a ``JnrrdError``, in time bounded like a read's.

Each cost test runs under an alarm set far above the fixed cost and far below the old one
(tens of seconds to minutes), as tests/test_costs.py does."""

from __future__ import annotations

import json
import math
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_costs import TILE_EXT, alarm, header_lines

import jnrrd
from jnrrd.cli import main

A = np.arange(8 * 6 * 4, dtype=np.uint16).reshape(8, 6, 4)


def _rewrite_field(path: Path, field: str, value_json: str) -> None:
    """Replace one header line ``{"field": ...}`` of an external-tiles file (its header may
    change length: the tiles are elsewhere)."""
    lines = path.read_bytes().split(b"\n")
    key = json.dumps(field).encode()
    out = [(b"{" + key + b": " + value_json.encode() + b"}") if ln.startswith(b"{" + key)
           else ln for ln in lines]
    assert out != lines, field
    path.write_bytes(b"\n".join(out))


def _geometry_file(tmp_path: Path, field: str, value: str) -> Path:
    path = tmp_path / "g.jnrrd"
    jnrrd.write(path, A, {"space": "RAS", "space_directions": [[1.0, 0, 0], [0, 1.0, 0],
                                                               [0, 0, 1.0]],
                          "space_origin": [0.0, 0.0, 0.0]}, tile=4, storage="external")
    if field == "spacings":  # spacings replace the space fields
        text = path.read_bytes()
        text = b"\n".join(ln for ln in text.split(b"\n") if not ln.startswith(
            (b'{"space"', b'{"space_directions"', b'{"space_origin"')))
        path.write_bytes(text.replace(b'{"type"', b'{"spacings": [1.0, 1.0, 1.0]}\n{"type"', 1))
    _rewrite_field(path, field, value)
    return path


GEOMETRY = [("space_directions", "[[NaN, 0, 0], [0, 1, 0], [0, 0, 1]]"),
            ("space_directions", "[[Infinity, 0, 0], [0, 1, 0], [0, 0, 1]]"),
            ("space_directions", "[[1e308, 0, 0], [0, 1, 0], [0, 0, 1]]"),
            ("space_directions", "[[1e308, 1e308, 0], [0, 1e-308, 0], [0, 0, 1]]"),
            ("space_origin", "[NaN, 0, 0]"), ("space_origin", "[-Infinity, 0, 0]"),
            ("space_origin", "[1e308, 1e308, 1e308]"),
            ("spacings", "[NaN, 1.0, 1.0]"), ("spacings", "[Infinity, 1.0, 1.0]"),
            ("spacings", "[1e308, 1.0, 1e-308]")]


@pytest.mark.parametrize(("field", "value"), GEOMETRY)
def test_non_finite_geometry_in_kerchunk_refs_is_a_header_error(tmp_path, field, value):
    """Regression: NaN (or an infinity) in the geometry made ``kerchunk_refs`` raise a bare
    ``ValueError`` (NaN is not JSON). The references are valid JSON or a ``HeaderError``
    naming the field."""
    path = _geometry_file(tmp_path, field, value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jnrrd.JnrrdWarning)
        vol = jnrrd.open(path)  # the file opens: its data is fine
        np.testing.assert_array_equal(vol[...], A)
        vol.close()
        try:
            refs = jnrrd.kerchunk_refs(path)
        except jnrrd.HeaderError as exc:
            assert field in str(exc) or "space_directions" in str(exc)
            return
    for v in refs["refs"].values():
        if isinstance(v, str):
            json.loads(v, parse_constant=lambda c: pytest.fail(f"{c} in the refs"))


@pytest.mark.parametrize(("field", "value"), GEOMETRY)
def test_non_finite_or_huge_geometry_gives_a_preview(tmp_path, field, value):
    """Regression: ``Volume.preview`` and ``jnrrd preview`` raised a bare ``OverflowError``
    for 1e308 in ``space_directions`` (and ``ValueError`` for huge spacings). A side that is
    no length counts as 1 (with a warning); extreme aspects give thin pictures."""
    path = _geometry_file(tmp_path, field, value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jnrrd.JnrrdWarning)
        with jnrrd.open(path) as vol:
            pic = vol.preview(size=64)
            mip = vol.preview(size=64, mip=True)
        assert main(["preview", str(path), "-o", str(tmp_path / "p.png"), "--size", "64"]) == 0
    for p in (pic, mip):
        assert p.dtype == np.uint8 and p.ndim == 3 and 0 < max(p.shape[:2]) <= 3 * 64 + 8
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


def test_a_side_that_is_no_length_is_named_in_a_warning(tmp_path):
    path = _geometry_file(tmp_path, "spacings", "[NaN, 1.0, 1.0]")
    with jnrrd.open(path) as vol, pytest.warns(jnrrd.JnrrdWarning, match="spacings of axis 0"):
        vol.preview(size=32)


# -- item 8: a preview over 10^7 missing tiles -------------------------------------------------

def _many_tiles(tmp_path: Path, sizes: list[int], dims: list[int]) -> Path:
    path = tmp_path / "many.jnrrd"
    path.write_bytes(header_lines([
        ("type", "uint8"), ("dimension", len(sizes)), ("sizes", sizes), ("encoding", "raw"),
        ("extensions", TILE_EXT), ("tile:enabled", True), ("tile:dimensions", dims),
        ("tile:sizes", [1] * len(dims)), ("tile:storage", "external"),
        ("tile:pattern", "t/{i}.bin")]))
    return path


@pytest.mark.parametrize(("sizes", "dims"), [([10**7, 1], [0, 1]), ([10**7, 1], [0]),
                                             ([1, 10**7], [1]), ([5 * 10**6, 2], [0])])
@pytest.mark.parametrize("mip", [False, True])
def test_preview_of_ten_million_missing_tiles_fails_at_the_first(tmp_path, sizes, dims, mip):
    """Regression: a 300-byte header declaring 10^7 missing one-voxel tiles took 24-46 s to
    fail in ``preview``: a strided selection walked every tile of the range, even the ones
    its step skips. Now only the tiles it lands on are visited."""
    path = _many_tiles(tmp_path, sizes, dims)
    with alarm(10.0):
        with jnrrd.open(path) as vol, pytest.raises(jnrrd.DataError, match="missing"):
            vol.preview(mip=mip)
        assert main(["preview", str(path), "-o", str(tmp_path / "p.png")]) == 1


@settings(max_examples=40)
@given(st.data())
def test_strided_selections_over_small_tiles_read_what_numpy_reads(data):
    shape = data.draw(st.lists(st.integers(1, 23), min_size=1, max_size=3))
    tile = [data.draw(st.integers(1, 5)) for _ in shape]
    overlap = data.draw(st.integers(0, 1)) if min(tile) > 1 else 0
    a = np.arange(math.prod(shape), dtype=np.int32).reshape(shape)
    key = tuple(slice(data.draw(st.integers(0, n - 1)), None, data.draw(st.integers(1, 9)))
                for n in shape)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "s.jnrrd"
        jnrrd.write(path, a, tile=tile, overlap=overlap)
        for cache in (0, None):
            with jnrrd.open(path, cache_bytes=cache) as vol:
                np.testing.assert_array_equal(vol[key], a[key])


# -- item 9: read_tile of untiled files ---------------------------------------------------------

@pytest.mark.parametrize(("suffix", "encoding"), [
    *((".jnrrd", e) for e in ("raw", "gzip", "bzip2", "zstd", "lz4", "ascii", "hex")),
    *((s, e) for s in (".nrrd", ".nhdr") for e in ("raw", "gzip", "bzip2", "ascii"))])
def test_read_tile_of_an_untiled_file_is_unsupported(tmp_path, encoding, suffix):
    """Regression (issue 29 item 9): ``read_tile`` on an untiled file raised a bare
    ``AttributeError``. Decided: an untiled file has no tiles: ``UnsupportedError`` saying
    to slice it instead (docs/api.md)."""
    path = tmp_path / f"u{suffix}"
    jnrrd.write(path, A, encoding=encoding)
    with jnrrd.open(path) as vol:
        for call in (lambda: vol.read_tile((0, 0, 0)), lambda: vol.levels[0].read_tile((0,)),
                     lambda: vol.read_tile((0, 0, 0), core=True)):
            with pytest.raises(jnrrd.UnsupportedError, match="not tiled"):
                call()


def test_read_tile_of_a_file_with_tiling_switched_off_is_unsupported(tmp_path):
    path = tmp_path / "off.jnrrd"
    jnrrd.write(path, A, {"extensions": TILE_EXT, "tile:enabled": False})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jnrrd.JnrrdWarning)
        with jnrrd.open(path) as vol, pytest.raises(jnrrd.UnsupportedError,
                                                     match="not tiled"):
            vol.read_tile((0, 0, 0))


# -- item 10: validation bounded like reading --------------------------------------------------

def _contiguous(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "contig.jnrrd"
    path.write_bytes(header_lines([
        ("type", "uint8"), ("dimension", 1), ("sizes", [n]), ("encoding", "raw"),
        ("extensions", TILE_EXT), ("tile:enabled", True), ("tile:dimensions", [0]),
        ("tile:sizes", [1]), ("tile:storage", "internal"), ("tile:format", "contiguous")]))
    return path


def _virtual(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "levels.jnrrd"
    path.write_bytes(header_lines([
        ("type", "uint8"), ("dimension", 1), ("sizes", [4]), ("encoding", "raw"),
        ("extensions", TILE_EXT), ("tile:enabled", True), ("tile:dimensions", [0]),
        ("tile:sizes", [1]), ("tile:storage", "internal"), ("tile:levels", n),
        ("tile:level_scales", [1] + [2] * (n - 1)),
        ("tile:levels_virtual", list(range(1, n)))]) + b"\0" * 4)
    return path


@pytest.mark.parametrize("kind", ["external", "contiguous", "virtual"])
@pytest.mark.parametrize("deep", [False, True])
def test_validate_of_a_tiny_header_claiming_millions_is_bounded(tmp_path, kind, deep):
    """Regression: ``validate`` and ``validate(deep=True)`` ran for minutes on a header of a
    few hundred bytes declaring 10^7 external or raw contiguous tiles (a check and a problem
    per tile), and on 10^6 virtual levels. The tile checks now stop after 100 bad tiles with
    a note, and ``max_levels`` is checked before any per-level work, as the reader does."""
    path = {"external": lambda: _many_tiles(tmp_path, [10**7], [0]),
            "contiguous": lambda: _contiguous(tmp_path, 10**7),
            "virtual": lambda: _virtual(tmp_path, 10**6)}[kind]()
    with alarm(30.0):  # about 1 s here; minutes before the fix
        problems = jnrrd.validate(path, deep=deep)
    errors = [p for p in problems if p.severity == "error"]
    assert errors and len(problems) < 300
    if kind == "virtual":
        assert any("max_levels" in p.message for p in errors)
    elif kind == "external":
        assert any("stopped after 100 bad tiles" in p.message for p in problems)
    else:  # the header alone shows the file too short (the deep checks are then skipped)
        assert any("need 10000000 bytes" in p.message for p in errors)


def test_validate_still_lists_every_problem_of_a_dataset_with_few(tmp_path):
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, A, tile=2, storage="external")
    base = tmp_path / jnrrd.read_header(path)["tile:base_dir"]
    gone = sorted(base.iterdir())[:5]
    for p in gone:
        p.unlink()
    for deep in (False, True):
        problems = jnrrd.validate(path, deep=deep)
        assert not any("stopped" in p.message for p in problems)
        for p in gone:
            assert sum(p.name in q.message for q in problems) == 1 + deep
