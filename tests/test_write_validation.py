"""The writer never writes what its reader refuses (issue 14 item 1, issue 19 section 4).

Every refused write raises a ``JnrrdError`` naming the field or argument and leaves nothing
behind: no target, no temporary file, no tile directory.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import jnrrd
from jnrrd.errors import HeaderError, JnrrdError, SecurityError

A = np.arange(64, dtype=np.uint8).reshape(4, 4, 4)


def _refused(tmp_path, exc, match, *args, name="out.jnrrd", **kw):
    target = tmp_path / name
    with pytest.raises(exc, match=match):
        jnrrd.write(target, A, *args, **kw)
    assert os.listdir(tmp_path) == []
    return target


# -- issue 14 item 1: core and extension fields checked like the reader checks them ---------

@pytest.mark.parametrize(("header", "field"), [
    ({"kinds": ["space", "space"]}, "kinds"),
    ({"kinds": ["space", "space", "bogus"]}, r"kinds\[2\]"),
    ({"space": "RAS", "space_directions": [[1, 0, 0]] * 2}, "space_directions"),
    ({"space": "RAS", "space_directions": [[1, 0]] * 3}, r"space_directions\[0\]"),
    ({"labels": ["x", "y"]}, "labels"),
    ({"space": "RAS", "measurement_frame": [[1, 0, 0]] * 2}, "measurement_frame"),
    ({"space": "RAS", "measurement_frame": [[1, 0]] * 3}, r"measurement_frame\[0\]"),
    ({"space": "bogus"}, "space"),
    ({"space": "RAS", "space_dimension": 4}, "space_dimension"),
    ({"space": "RAS", "space_origin": [0, 0]}, "space_origin"),
    ({"spacings": [1, "a", 1]}, r"spacings\[1\]"),
    ({"centers": ["cell", "middle", "cell"]}, r"centers\[1\]"),
    ({"content": 5}, "content"),
    ({"units": ["mm"]}, "units"),
    ({"extensions": {"m": 5}}, "extensions"),
])
def test_write_refuses_header_the_reader_refuses(tmp_path, header, field):
    _refused(tmp_path, HeaderError, field, header)


@pytest.mark.parametrize("header", [{"tile:level_scales": [2]},
                                    {"tile:level_scales": [[2, 1, 1]], "tile:levels": 1}])
def test_write_refuses_level_zero_below_full_resolution(tmp_path, header):
    """Found by the property test: a single level of scale 2 was written downsampled under a
    header that says full resolution (wrong data, no error)."""
    _refused(tmp_path, HeaderError, "level 0 must have scale 1", header)


@pytest.mark.parametrize(("header", "kw"), [({"tile:pattern": "{x}.t"}, {}),
                                           ({}, {"tile": 2, "pattern": "{x}{y}{z}.t"}),
                                           ({"tile:pattern": "{x}.t", "tile:storage": "internal"},
                                            {})])
def test_write_refuses_pattern_for_internal_tiles(tmp_path, header, kw):
    """A tile pattern asks for tile files: with internal storage it was dropped silently."""
    _refused(tmp_path, HeaderError, "storage", header, **kw)


def test_write_storage_keyword_overrides_a_read_external_layout(tmp_path):
    ext = tmp_path / "e.jnrrd"
    jnrrd.write(ext, A, tile=2, storage="external")
    data, header = jnrrd.read(ext)
    jnrrd.write(tmp_path / "i.jnrrd", data, header, storage="internal")
    assert jnrrd.read_header(tmp_path / "i.jnrrd")["tile:storage"] == "internal"
    assert np.array_equal(jnrrd.read(tmp_path / "i.jnrrd")[0], A)


@pytest.mark.parametrize("tiled", [{}, {"tile": 2}])
def test_write_refuses_extensions_that_are_not_an_object(tmp_path, tiled):
    """Found by the property test: a tiled write gave a bare TypeError."""
    _refused(tmp_path, HeaderError, "extensions", {"extensions": 3}, **tiled)


@pytest.mark.parametrize("tiled", [{}, {"tile": 2}, {"tile": 2, "storage": "external"}])
def test_write_refuses_bad_kinds_untiled_and_tiled(tmp_path, tiled):
    _refused(tmp_path, HeaderError, "kinds", {"kinds": ["space"]}, **tiled)


def test_write_refuses_bad_fields_on_detached_and_stream_targets(tmp_path):
    import io

    _refused(tmp_path, HeaderError, "labels", {"labels": ["a"]}, detached=True)
    buf = io.BytesIO()
    with pytest.raises(HeaderError, match="labels"):
        jnrrd.write(buf, A, {"labels": ["a"]})
    assert buf.getvalue() == b""


@pytest.mark.parametrize(("header", "field"), [
    ({"tile:dimensions": [5]}, "tile:dimensions"),
    ({"tile:enabled": True, "tile:dimensions": [5], "tile:sizes": [2]}, "tile:dimensions"),
    ({"tile:enabled": True, "tile:dimensions": [0, 1], "tile:sizes": [2]}, "tile:sizes"),
    ({"tile:enabled": True, "tile:dimensions": [1, 0], "tile:sizes": [2, 2]},
     "tile:dimensions"),
    ({"tile:enabled": True, "tile:padding_value": 300}, "tile:padding_value"),
    ({"tile:enabled": True, "tile:storage": "cloud"}, "tile:storage"),
    ({"tile:enabled": True, "tile:format": "striped"}, "tile:format"),
    ({"tile:enabled": True, "tile:edge_handling": "wrap"}, "tile:edge_handling"),
    ({"tile:enabled": True, "tile:compression": "lzma"}, "tile:compression"),
    ({"tile:enabled": True, "tile:overlap": [1, 1]}, "tile:overlap"),
    ({"tile:enabled": True, "tile:overlap": [-1, 0, 0]}, "tile:overlap"),
    ({"tile:enabled": True, "tile:level_scales": [1, 0]}, "tile:level_scales"),
    ({"tile:enabled": True, "tile:level_scales": [2, 4]}, "tile:level_scales"),
    ({"tile:enabled": True, "tile:levels_stored": ["a"], "tile:level_scales": [1, 2]},
     "tile:levels_stored"),
    ({"tile:enabled": True, "tile:levels_stored": [1], "tile:level_scales": [1, 2]},
     "tile:levels_stored"),
    ({"tile:enabled": True, "tile:level_tile_sizes": [[2]], "tile:level_scales": [1]},
     "tile:level_tile_sizes"),
    ({"tile:enabled": True, "tile:downsample_method": "median", "tile:level_scales": [1, 2]},
     "tile:downsample_method"),
])
def test_write_refuses_tile_fields_the_reader_refuses(tmp_path, header, field):
    _refused(tmp_path, HeaderError, field, header)


def test_write_keeps_tile_fields_given_without_enabled(tmp_path):
    """A header that asks for tiles gets tiles (its tile fields are not dropped silently)."""
    target = tmp_path / "t.jnrrd"
    jnrrd.write(target, A, {"tile:dimensions": [0, 1, 2], "tile:sizes": [2, 2, 4]})
    h = jnrrd.read_header(target)
    assert h["tile:dimensions"] == [0, 1, 2] and h["tile:sizes"] == [2, 2, 4]
    assert np.array_equal(jnrrd.read(target)[0], A)


# -- issue 19 section 4: bad arguments are JnrrdErrors (or clear TypeErrors) --------------

def test_write_int_header_key_is_header_error(tmp_path):
    _refused(tmp_path, HeaderError, "5", {5: 1})


def test_write_unknown_storage_is_an_error(tmp_path):
    _refused(tmp_path, JnrrdError, "storage.*cloud", tile=2, storage="cloud")


def test_write_negative_overlap_is_an_error(tmp_path):
    _refused(tmp_path, JnrrdError, "overlap", tile=2, overlap=-1)
    _refused(tmp_path, JnrrdError, "overlap", tile=2, overlap=[1, -1, 0])


def test_write_compression_list_is_a_clear_type_error(tmp_path):
    _refused(tmp_path, TypeError, "compression", compression=["zstd"])


def test_write_unknown_checksum_is_an_error(tmp_path):
    _refused(tmp_path, JnrrdError, "checksum.*md5", tile=2, checksum="md5")
    _refused(tmp_path, TypeError, "checksum", tile=2, checksum=True)


@pytest.mark.parametrize(("kw", "name"), [
    ({"compression": "lzma"}, "compression"),
    ({"compression": 3}, "compression"),
    ({"encoding": "base64"}, "encoding"),
    ({"encoding": 1}, "encoding"),
    ({"downsample": "median", "levels": 2}, "downsample"),
    ({"edge": "wrap", "tile": 2}, "edge"),
    ({"decision": "maybe", "tile": 2}, "decision"),
    ({"storage": 1, "tile": 2}, "storage"),
    ({"index_order": "K"}, "index_order"),
    ({"align": -1, "tile": 2}, "align"),
    ({"align": "page", "tile": 2}, "align"),
    ({"compression_level": "high", "compression": "zstd"}, "compression_level"),
    ({"tile": 0}, "tile"),
    ({"tile": "64"}, "tile"),
    ({"tile": {7: 2}}, "tile"),
    ({"tile": 2, "overlap": "1"}, "overlap"),
    ({"tile": 2, "pattern": 5, "storage": "external"}, "pattern"),
    ({"levels": 0}, "levels"),
    ({"sparse": "yes", "tile": 2}, "sparse"),
    ({"tile_format": "striped", "tile": 2}, "tile_format"),
    ({"tile_format": "", "tile": 2}, "tile_format"),
    ({"storage": "", "tile": 2}, "storage"),
    ({"levels": True}, "levels"),
    ({"tile": 2, "padding_value": "x"}, "padding_value"),
    ({"tile": 2, "progress": "yes"}, "progress"),
    ({"durable": "no"}, "durable"),
    ({"detached": "yes"}, "detached"),
])
def test_write_refuses_unknown_option_values(tmp_path, kw, name):
    with pytest.raises((JnrrdError, TypeError, ValueError), match=name):
        jnrrd.write(tmp_path / "o.jnrrd", A, **kw)
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
@pytest.mark.parametrize("pattern", ["C:{x}_{y}_{z}.t", "\\\\h\\s\\{x}{y}{z}", "d:/{x}{y}{z}",
                                     "/abs/{x}{y}{z}", "../{x}{y}{z}", "a/../../{x}{y}{z}",
                                     "http://h/{x}{y}{z}"])
def test_write_refuses_patterns_the_reader_refuses(tmp_path, pattern):
    _refused(tmp_path, SecurityError, "pattern", tile=2, storage="external", pattern=pattern)


@pytest.mark.parametrize(("pattern", "what"), [
    ("a\x00{x}{y}{z}", "NUL"),
    ("a" * 300 + "{x}{y}{z}", "255"),
    ("d/" + "b" * 300 + "/{x}{y}{z}", "255"),
    ("{x}{y}{z}/", "end"),
    ("{x}{y}{z}/.", "end"),
    ("", "pattern"),
])
def test_write_refuses_unusable_pattern_names(tmp_path, pattern, what):
    _refused(tmp_path, JnrrdError, what, tile=2, storage="external", pattern=pattern)


def test_write_accepts_pattern_with_subdirectories(tmp_path):
    target = tmp_path / "ok.jnrrd"
    jnrrd.write(target, A, tile=2, storage="external", pattern="{z}/{y}/a/../{x}.t")
    assert np.array_equal(jnrrd.read(target)[0], A)


# -- issue 14 item 7: tile:compression agrees with tile:codecs; canonical space -----------

_B = {"name": "bytes", "configuration": {}}


@pytest.mark.parametrize(("comp", "chain"), [
    ("raw", [_B, {"name": "crc32c"}]),
    ("raw", [_B, {"name": "zstd", "configuration": {"level": 1}}]),
    ("zstd", [_B]),
    ("zstd", [_B, {"name": "crc32c"}]),
    ("zstd", [_B, {"name": "zstd", "configuration": {"level": 1}}, {"name": "crc32c"}]),
    ("gzip", [_B, {"name": "zstd", "configuration": {"level": 1}}]),
    ("lz4", [{"name": "transpose", "configuration": {"order": [2, 1, 0]}}, _B,
             {"name": "lz4"}]),
])
def test_compression_and_codecs_disagreeing_is_refused_on_write(tmp_path, comp, chain):
    _refused(tmp_path, HeaderError, "tile:compression",
             {"tile:compression": comp, "tile:codecs": chain})
    _refused(tmp_path, HeaderError, "tile:compression", compression=comp, codecs=chain)


def _tiled_file(tmp_path, extra):
    """A tiled raw file whose header gains ``extra`` fields (the checks fail before data)."""
    import json

    src = tmp_path / "src.jnrrd"
    jnrrd.write(src, A, tile=4)
    raw = src.read_bytes()
    end = raw.index(b"\n\n") + 1
    add = b"".join(json.dumps({k: v}).encode() + b"\n" for k, v in extra.items())
    out = tmp_path / "edited.jnrrd"
    out.write_bytes(raw[:end] + add + raw[end:])
    return out


def test_compression_and_codecs_disagreeing_is_refused_on_read(tmp_path):
    bad = _tiled_file(tmp_path, {"tile:codecs": [_B, {"name": "crc32c"}]})
    assert jnrrd.read_header(bad)["tile:compression"] == "raw"
    with pytest.raises(HeaderError, match="tile:compression"):
        jnrrd.read(bad)
    problems = jnrrd.validate(bad)
    assert any(p.severity == "error" and "compression" in p.field for p in problems)


def test_compression_and_codecs_agreeing_by_table_are_accepted(tmp_path):
    target = tmp_path / "ok.jnrrd"
    chain = [_B, {"name": "zstd", "configuration": {"level": 1}}]
    jnrrd.write(target, A, {"tile:compression": "zstd", "tile:codecs": chain})
    h = jnrrd.read_header(target)
    assert h["tile:compression"] == "zstd"
    assert np.array_equal(jnrrd.read(target)[0], A)


@pytest.mark.parametrize(("given", "canonical"), [
    ("RAS", "right_anterior_superior"), ("lps", "left_posterior_superior"),
    ("left-anterior-superior", "left_anterior_superior"), ("3d-right-handed", "3D_right_handed"),
    ("Scanner-XYZ-Time", "scanner_xyz_time"),
])
def test_read_returns_space_in_canonical_long_form(tmp_path, given, canonical):
    target = tmp_path / "s.jnrrd"
    jnrrd.write(target, A, {"space": given})
    raw = target.read_bytes()
    edited = raw.replace(f'"{canonical}"'.encode(), f'"{given}"'.encode())
    assert edited != raw or given == canonical
    target.write_bytes(edited)
    assert jnrrd.read_header(target)["space"] == canonical
    assert jnrrd.read(target)[1]["space"] == canonical
    with jnrrd.open(target) as vol:
        assert vol.header["space"] == canonical


def test_read_header_leaves_an_unknown_space_for_the_checks(tmp_path):
    target = tmp_path / "s.jnrrd"
    jnrrd.write(target, A, {"space": "RAS"})
    target.write_bytes(target.read_bytes().replace(b'"right_anterior_superior"', b'"nowhere"'))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert jnrrd.read_header(target)["space"] == "nowhere"
    with pytest.raises(HeaderError, match="space"):
        jnrrd.read(target)


# -- property: write raises if and only if reading the written file would raise -----------

from unittest import mock  # noqa: E402

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_NUM = st.one_of(st.floats(-4, 4, allow_nan=False), st.integers(-3, 3), st.none(),
                 st.just("x"))
_STR = st.one_of(st.sampled_from(["a", "mm", ""]), st.none(), st.just(3))


def _lists(elem, lo=0, hi=4):
    return st.lists(elem, min_size=lo, max_size=hi)


#: field -> values around the valid ones (right and wrong lengths, types and names)
_FIELDS = {
    "kinds": _lists(st.sampled_from(["space", "domain", "RGB-color", "vector", "bogus", None,
                                     "???"]), 2, 4),
    "labels": _lists(_STR, 2, 4),
    "units": _lists(_STR, 2, 4),
    "centers": _lists(st.sampled_from(["cell", "node", None, "middle"]), 2, 4),
    "spacings": _lists(_NUM, 2, 4),
    "thicknesses": _lists(_NUM, 2, 4),
    "axis_mins": _lists(_NUM, 2, 4),
    "space": st.sampled_from(["RAS", "lps", "left-anterior-superior", "scanner_xyz_time",
                              "bogus", "3D-right-handed"]),
    "space_dimension": st.integers(0, 5),
    "space_origin": _lists(_NUM, 2, 4),
    "space_units": _lists(_STR, 2, 4),
    "space_directions": _lists(st.one_of(st.none(), _lists(_NUM, 2, 4)), 2, 4),
    "measurement_frame": _lists(_lists(_NUM, 2, 4), 2, 4),
    "content": _STR,
    "extensions": st.sampled_from([{"m": "https://example.org/m"}, {"m": 5}, 3]),
    "tile:dimensions": _lists(st.integers(-1, 3), 0, 4),
    "tile:sizes": _lists(st.integers(0, 5), 0, 4),
    "tile:storage": st.sampled_from(["internal", "external", "cloud"]),
    "tile:format": st.sampled_from(["contiguous", "chunked", "striped"]),
    "tile:edge_handling": st.sampled_from(["pad", "variable", "wrap"]),
    "tile:padding_value": st.one_of(st.integers(-2, 300), st.none(), st.just("0")),
    "tile:overlap": st.one_of(_lists(st.integers(-1, 2), 1, 3), st.just(1)),
    "tile:compression": st.sampled_from(["raw", "zstd", "gz", "lzma"]),
    "tile:codecs": st.sampled_from([[_B], [_B, {"name": "crc32c"}],
                                    [_B, {"name": "zstd", "configuration": {"level": 1}}],
                                    [{"name": "nope"}], "bytes"]),
    "tile:level_scales": st.sampled_from([[1, 2], [1], [2], [1, 0], [[1, 1, 1], [2, 2, 2]],
                                          "x"]),
    "tile:pattern": st.sampled_from(["{x}_{y}_{z}.t", "C:{x}{y}{z}", "../{x}{y}{z}",
                                     "{x}.t", "{i}/{l}"]),
}


@given(st.dictionaries(st.sampled_from(sorted(_FIELDS)), st.none(), max_size=5)
       .flatmap(lambda keys: st.fixed_dictionaries({k: _FIELDS[k] for k in keys})),
       st.sampled_from([{}, {"tile": 2}, {"tile": 4, "storage": "external"}]))
def test_write_raises_iff_reading_the_file_would_raise(header, kw):
    import tempfile

    unchecked = getattr(jnrrd.write, "__wrapped__", jnrrd.write)  # not re-validated

    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.simplefilter("ignore", jnrrd.JnrrdWarning)
        target = os.path.join(d, "p.jnrrd")
        try:
            jnrrd.write(target, A, dict(header), **kw)
        except JnrrdError:
            refused = True
        else:
            refused = False
        if not refused:
            assert np.array_equal(jnrrd.read(target)[0], A)
            return
        assert os.listdir(d) == []
        # The same write without the final checks gives a file the reader refuses (or fails
        # on its own before writing anything).
        with mock.patch("jnrrd.writing.dispatch.check_final_header"), \
                mock.patch("jnrrd.writing.dispatch.check_tile_names"), \
                mock.patch("jnrrd.writing.dispatch.check_codec_chain"):
            try:
                unchecked(target, A, dict(header), **kw)
            except (JnrrdError, OSError, TypeError, ValueError, KeyError, IndexError):
                return
        with pytest.raises(JnrrdError):
            data, _ = jnrrd.read(target)
            assert np.array_equal(data, A)


def test_write_refuses_codecs_field_that_is_not_a_list(tmp_path):
    _refused(tmp_path, HeaderError, "tile:codecs", {"tile:codecs": "bytes"})
    _refused(tmp_path, HeaderError, "tile:codecs", {"tile:codecs": []})


def test_write_refuses_bad_header_for_dask_arrays_before_any_file(tmp_path):
    import dask.array as da

    _refused_data = da.from_array(A, chunks=2)
    with pytest.raises(HeaderError, match="kinds"):
        jnrrd.write(tmp_path / "d.jnrrd", _refused_data, {"kinds": ["space"]}, tile=2)
    with pytest.raises(SecurityError, match="pattern"):
        jnrrd.write(tmp_path / "d.jnrrd", _refused_data, tile=2, storage="external",
                    pattern="C:{x}{y}{z}")
    assert os.listdir(tmp_path) == []


_ARGS = {
    "tile": st.one_of(st.integers(-1, 5), _lists(st.integers(-1, 5), 0, 4), st.none(),
                      st.just("4"), st.dictionaries(st.integers(-4, 4), st.integers(0, 4),
                                                    max_size=2)),
    "overlap": st.one_of(st.integers(-1, 2), _lists(st.integers(-1, 2), 0, 4), st.just("1")),
    "compression": st.sampled_from(["zstd", "gz", "raw", "lzma", ["zstd"], 3]),
    "checksum": st.sampled_from(["crc32", "crc32c", "md5", True, None]),
    "storage": st.sampled_from(["internal", "external", "cloud", ""]),
    "pattern": st.sampled_from(["{x}{y}{z}.t", "{i}", "C:{x}{y}{z}", "{x}{y}{z}/", "a\x00{i}",
                                "../{i}", 5]),
    "edge": st.sampled_from(["pad", "variable", "wrap"]),
    "align": st.sampled_from([0, 4096, -1, "page"]),
    "levels": st.one_of(st.integers(-1, 3), st.just([1, 2]), st.just([2]), st.just(True)),
    "downsample": st.sampled_from(["average", "max", "median", 1]),
    "encoding": st.sampled_from(["raw", "gzip", "hex", "base64", 1]),
    "sparse": st.sampled_from([True, False, "yes"]),
    "tile_format": st.sampled_from(["contiguous", "chunked", "striped"]),
    "decision": st.sampled_from(["always", "maybe", -1, 1]),
    "padding_value": st.sampled_from([0, 255, 300, -1, None, "x", 1.5]),
    "index_order": st.sampled_from(["F", "C", "K"]),
}


@given(st.dictionaries(st.sampled_from(sorted(_ARGS)), st.none(), max_size=4)
       .flatmap(lambda keys: st.fixed_dictionaries({k: _ARGS[k] for k in keys})))
def test_bad_write_arguments_are_named_errors_and_leave_nothing(kw):
    """Random keyword values: the write succeeds and reads back, or raises a JnrrdError (or a
    TypeError/ValueError naming the argument) and creates nothing."""
    import tempfile

    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.simplefilter("ignore", jnrrd.JnrrdWarning)
        target = os.path.join(d, "a.jnrrd")
        try:
            jnrrd.write(target, A, **kw)
        except (JnrrdError, TypeError, ValueError) as e:
            assert type(e) in (TypeError, ValueError) or isinstance(e, JnrrdError)
            assert os.listdir(d) == []
            return
        order = kw.get("index_order", "F")
        data = jnrrd.read(target, index_order=order)[0]
        assert np.array_equal(data, A)
