"""The real-data test set (``tests/data/``, made by ``tests/data/make_real_data.py`` with
pynrrd): every file reads bit-exactly as pynrrd reads it, and round-trips NRRD → JNRRD (tiled,
zstd, levels) → NRRD with data, geometry and key/value pairs intact (issue 14)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import nrrd
import numpy as np
import pytest

import jnrrd

DATA = Path(__file__).resolve().parent / "data"
FILES = ["ct.nrrd", "seg.seg.nrrd", "dwi.nrrd", "rgb.nrrd", "vector.nrrd", "series.nrrd",
         "pair.nhdr"]
DOMAIN = {"domain", "space", "time", None}
# pynrrd field -> JNRRD field, for the fields the set uses (docs/nrrd.md)
GEOMETRY = {"space": "space", "space directions": "space_directions",
            "space origin": "space_origin", "measurement frame": "measurement_frame",
            "space units": "space_units", "kinds": "kinds", "spacings": "spacings",
            "axis mins": "axis_mins", "axis maxs": "axis_maxs", "centerings": "centers",
            "labels": "labels", "units": "units", "content": "content"}
NOT_CARRIED = {"type", "dimension", "sizes", "endian", "encoding", "data file"}


def native(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a.astype(a.dtype.newbyteorder("="), copy=False))


def assert_bit_exact(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape
    got, want = native(got), native(want)
    assert got.dtype == want.dtype
    assert got.tobytes(order="F") == want.tobytes(order="F")


def pynrrd_value_as_jnrrd(key: str, value: Any) -> Any:
    """A pynrrd header value in JNRRD's spelling (NaN ⇄ null, kinds lower case, ...)."""
    if key == "space":
        return value.replace("-", "_")
    if key == "kinds":
        return [k.lower().replace("-", "_") for k in value]
    if key in ("labels", "units"):
        return [v or None for v in value]
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, list):
        return [pynrrd_value_as_jnrrd("", v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def nan_row_to_none(v: Any) -> Any:
    if isinstance(v, list) and v and all(x is None for x in v):
        return None
    return v


def assert_header_matches_pynrrd(header: Any, ph: dict[str, Any]) -> None:
    """Every field pynrrd read is in the jnrrd header, with the same value."""
    kv = dict(header.get("nrrd:key_values") or {})
    for key, value in ph.items():
        if key in NOT_CARRIED:
            continue
        if key in GEOMETRY:
            want = pynrrd_value_as_jnrrd(key, value)
            if key in ("space directions", "measurement frame"):
                want = [nan_row_to_none(r) for r in want]
            assert header[GEOMETRY[key]] == want, key
        else:
            assert kv.pop(key) == value, key
    assert kv == {}, f"key/value pairs pynrrd does not see: {kv}"


def affine_of(ph: dict[str, Any]) -> np.ndarray:
    """The index → world matrix of a pynrrd header (space directions as columns)."""
    cols = [d for d in np.asarray(ph["space directions"], dtype=float) if not np.isnan(d).all()]
    sd = len(ph["space origin"])
    m = np.zeros((sd + 1, len(cols) + 1))
    for j, d in enumerate(cols):
        m[:sd, j] = d
    m[:sd, -1] = ph["space origin"]
    m[sd, -1] = 1.0
    return m


@pytest.mark.parametrize("name", FILES)
def test_reads_bit_exactly_like_pynrrd(name):
    want, ph = nrrd.read(str(DATA / name))
    got, header = jnrrd.read(DATA / name)
    assert_bit_exact(got, want)
    assert_header_matches_pynrrd(header, ph)
    with jnrrd.open(DATA / name) as vol:
        assert_bit_exact(vol[...], want)
        assert_bit_exact(vol[1:, ::2, -1], want[1:, ::2, -1])
        if "space origin" in ph:
            np.testing.assert_array_equal(vol.affine, affine_of(ph))


@pytest.mark.parametrize("name", FILES)
def test_round_trip_nrrd_jnrrd_nrrd(tmp_path, name):
    want, ph = nrrd.read(str(DATA / name))
    data, header = jnrrd.read(DATA / name)
    mid = tmp_path / "mid.jnrrd"
    jnrrd.write(mid, data, header, tile=4, compression="zstd", levels=2)
    back, h2 = jnrrd.read(mid)
    assert_bit_exact(back, want)
    assert_header_matches_pynrrd(h2, ph)
    assert h2["tile:compression"] == "zstd"
    with jnrrd.open(mid) as vol:
        assert len(vol.levels) == 2
        kinds = h2.get("kinds") or [None] * back.ndim
        level1 = tuple(n if k not in DOMAIN else max(1, n // 2)
                       for n, k in zip(back.shape, kinds, strict=True))
        assert vol.levels[1].shape == level1  # channels, layers, gradients never downsampled
        if "space origin" in ph:
            np.testing.assert_array_equal(vol.affine, affine_of(ph))
    out = tmp_path / "out.nrrd"
    h2 = {k: v for k, v in h2.items() if k != "encoding"}  # the tiles' raw; NRRD gets gzip
    jnrrd.write(out, back, h2, encoding="gzip")
    final, ph3 = nrrd.read(str(out))
    assert_bit_exact(final, want)
    for key, value in ph.items():
        if key in NOT_CARRIED:
            continue
        np.testing.assert_equal(ph3[key], value, err_msg=key)


@pytest.mark.parametrize("name", FILES)
def test_pynrrd_header_written_to_jnrrd_keeps_everything(tmp_path, name):
    want, ph = nrrd.read(str(DATA / name))
    path = tmp_path / "p.jnrrd"
    jnrrd.write(path, want, ph, tile=4, compression="zstd", levels=2)
    got, header = jnrrd.read(path)
    assert_bit_exact(got, want)
    assert_header_matches_pynrrd(header, ph)
    if "space origin" in ph:
        with jnrrd.open(path) as vol:
            np.testing.assert_array_equal(vol.levels[0].affine, affine_of(ph))


def test_segmentation_layers_and_dwi_gradients_survive_the_pyramid(tmp_path):
    """Level 1 of a segmentation keeps both layers and every label value; a DWI keeps every
    gradient volume (the non-domain axis is neither tiled nor averaged)."""
    seg, header = jnrrd.read(DATA / "seg.seg.nrrd")
    path = tmp_path / "seg.jnrrd"
    jnrrd.write(path, seg, header, tile=4, compression="zstd", levels=2, downsample="mode")
    with jnrrd.open(path) as vol:
        lv = vol.levels[1][...]
    assert lv.shape[0] == 2
    assert set(np.unique(lv[0])) <= {0, 1, 2} and set(np.unique(lv[1])) <= {0, 1}
    dwi, header = jnrrd.read(DATA / "dwi.nrrd")
    path = tmp_path / "dwi.jnrrd"
    jnrrd.write(path, dwi, header, tile=4, levels=2)
    with jnrrd.open(path) as vol:
        lv = vol.levels[1][...]
    for g in range(dwi.shape[0]):  # each gradient volume averaged on its own
        np.testing.assert_allclose(lv[g, 0, 0, 0], dwi[g, :2, :2, :2].mean(), atol=1)


def _sitk_images() -> dict[str, Any]:
    import SimpleITK as sitk

    a = (np.arange(7 * 8 * 9).reshape(7, 8, 9) * 13 - 300).astype(np.int16)
    img = sitk.GetImageFromArray(a)
    img.SetSpacing((0.7, 0.8, 2.5))
    img.SetOrigin((-10.0, 20.5, 3.0))
    c, s = math.cos(0.1), math.sin(0.1)
    img.SetDirection((c, -s, 0.0, s, c, 0.0, 0.0, 0.0, 1.0))
    vec = sitk.Compose([sitk.Cast(img, sitk.sitkFloat32) * k for k in (1.0, -0.5, 0.25)])
    plane = sitk.GetImageFromArray((a[0] % 256).astype(np.uint8))
    plane.SetSpacing((0.3, 0.4))
    rgb = sitk.Compose([plane, plane, plane])
    return {"ct": img, "vector": vec, "rgb2d": rgb}


def _assert_sitk_geometry(header: Any, img: Any) -> None:
    sd = img.GetDimension()
    direction = np.array(img.GetDirection()).reshape(sd, sd)
    dirs = [d for d in header["space_directions"] if d is not None]
    for i, spacing in enumerate(img.GetSpacing()):
        np.testing.assert_array_equal(dirs[i], direction[:, i] * spacing)
    np.testing.assert_array_equal(header["space_origin"], img.GetOrigin())
    if sd == 3:
        assert header["space"] == "left_posterior_superior"


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".nrrd", ".nhdr"])
@pytest.mark.parametrize("compress", [True, False], ids=["gzip", "raw"])
def test_simpleitk_files_read_bit_exactly(tmp_path, suffix, compress):
    """SimpleITK (ITK's NrrdImageIO) writes NRRDs; jnrrd reads them bit-exactly, with ITK's
    origin, spacing and direction, and writes NRRDs SimpleITK reads back unchanged."""
    import SimpleITK as sitk

    for name, img in _sitk_images().items():
        path = tmp_path / f"{name}{suffix}"
        sitk.WriteImage(img, str(path), useCompression=compress)
        want = sitk.GetArrayFromImage(img)  # C order (z, y, x[, component])
        got, header = jnrrd.read(path, index_order="C")
        comps = img.GetNumberOfComponentsPerPixel()
        if comps > 1:
            assert header["kinds"][0] == "vector" and header["sizes"][0] == comps
        assert_bit_exact(got, want)
        _assert_sitk_geometry(header, img)
        mid = tmp_path / f"{name}.jnrrd"
        jnrrd.write(mid, got, header, index_order="C", tile=4, compression="zstd", levels=2)
        back, h2 = jnrrd.read(mid, index_order="C")
        assert_bit_exact(back, want)
        _assert_sitk_geometry(h2, img)
        out = tmp_path / f"{name}-out.nrrd"
        jnrrd.write(out, back, {k: v for k, v in h2.items() if k != "encoding"},
                    index_order="C", encoding="gzip")
        again, itk_own = sitk.ReadImage(str(out)), sitk.ReadImage(str(path))
        assert_bit_exact(sitk.GetArrayFromImage(again), want)
        # ITK reads jnrrd's NRRD exactly as it reads its own (spacing = |direction| there)
        assert again.GetSpacing() == itk_own.GetSpacing()
        assert again.GetOrigin() == itk_own.GetOrigin() == img.GetOrigin()
        assert again.GetDirection() == itk_own.GetDirection()
