"""The napari reader through npe2 (no GUI), and one slow test in a real napari viewer.

The quick tests load the shipped manifest into an npe2 plugin manager, let npe2 pick the
reader by file name, run it as napari would, and compare the layer tuples with what jnrrd
reads back and with geometry computed here from the header fields.
"""

from __future__ import annotations

import importlib.resources
import os
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pytest

import jnrrd
from jnrrd.integrations.napari import MAX_CHANNELS, LevelArray, get_reader

with warnings.catch_warnings():  # npe2's pydantic models use deprecated pydantic v1 features
    warnings.simplefilter("ignore", DeprecationWarning)
    npe2 = pytest.importorskip("npe2", reason="npe2 is in the test extra: pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


def _manifest_path() -> Path:
    return Path(str(importlib.resources.files("jnrrd") / "napari.yaml"))


@pytest.fixture(scope="module")
def pm() -> npe2.PluginManager:
    """napari's plugin manager: the installed plugin (entry point ``napari.manifest``), or the
    manifest file when this checkout is not pip-installed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        manager = npe2.PluginManager.instance()
        manager.discover()
        if "jnrrd" not in {m.name for m in manager.iter_manifests()}:
            manager.register(npe2.PluginManifest.from_file(_manifest_path()))
    return manager


def _read(pm: npe2.PluginManager, path: Path | str) -> list[tuple]:
    """What napari does with a path: npe2 picks the reader by name and runs it."""
    readers = [r.plugin_name for r in pm.iter_compatible_readers([str(path)])]
    assert "jnrrd" in readers, f"no jnrrd reader for {path}"
    return npe2.read([str(path)], stack=False, plugin_name="jnrrd")


def _one(pm: npe2.PluginManager, path: Path | str) -> tuple:
    layers = _read(pm, path)
    assert len(layers) == 1
    return layers[0]


def _world(header_origin, header_dirs, index_c):
    """World position (napari order: space coordinates reversed) of a C-order index."""
    idx = list(index_c)[::-1]
    w = np.asarray(header_origin, float) + sum(
        i * np.asarray(d, float) for i, d in zip(idx, header_dirs) if d is not None)
    return w[::-1]


# -- the manifest -------------------------------------------------------------------------------

def test_manifest_validates_and_is_packaged() -> None:
    mf = npe2.PluginManifest.from_file(_manifest_path())
    assert mf.name == "jnrrd"
    [reader] = mf.contributions.readers
    assert sorted(reader.filename_patterns) == ["*.jnrrd", "*.nhdr", "*.nrrd"]
    [cmd] = mf.contributions.commands
    assert cmd.id == reader.command and cmd.python_name.endswith(":get_reader")
    # the entry point napari discovers the plugin by (and the wheel ships the manifest
    # because it sits inside the package)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["napari.manifest"] == {"jnrrd": "jnrrd:napari.yaml"}
    assert any(dep.startswith("npe2") for dep in project["optional-dependencies"]["test"])


def test_reader_found_for_each_suffix(pm: npe2.PluginManager, tmp_path: Path) -> None:
    for name in ("a.jnrrd", "b.nrrd", "c.nhdr", "D.JNRRD", "e.Nrrd"):
        found = [r.plugin_name for r in pm.iter_compatible_readers([str(tmp_path / name)])]
        assert "jnrrd" in found, name
    assert "jnrrd" not in [r.plugin_name for r in
                           pm.iter_compatible_readers([str(tmp_path / "f.tif")])]
    assert get_reader("https://example.org/data/ct.jnrrd?sig=abc") is not None
    assert get_reader(str(tmp_path / "f.tif")) is None
    (tmp_path / "dir.jnrrd").mkdir()
    assert get_reader(str(tmp_path / "dir.jnrrd")) is None


# -- layer tuples -------------------------------------------------------------------------------

def test_untiled_volume(pm: npe2.PluginManager, tmp_path: Path) -> None:
    data = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)  # C order: z, y, x
    path = tmp_path / "plain.jnrrd"
    jnrrd.write(path, data, {"spacings": [0.5, 0.75, 2.0], "units": ["mm", "mm", "mm"]},
                index_order="C")
    arr, kw, kind = _one(pm, path)
    assert kind == "image"
    assert isinstance(arr, LevelArray) and arr.shape == (4, 5, 6) and arr.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(arr), data)
    np.testing.assert_array_equal(arr[2, 1:4, ::2], data[2, 1:4, ::2])
    assert kw["scale"] == (2.0, 0.75, 0.5) and kw["translate"] == (0.0, 0.0, 0.0)
    assert kw["units"] == ("mm", "mm", "mm")
    assert kw["rgb"] is False and "multiscale" not in kw and "channel_axis" not in kw
    assert kw["contrast_limits"] == (0.0, 119.0)  # napari would take its first drawn slice
    assert kw["name"] == "plain"
    assert kw["metadata"]["header"]["sizes"] == [6, 5, 4]


def test_tiled_pyramid_is_multiscale(pm: npe2.PluginManager, tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    data = rng.integers(0, 4000, size=(40, 48, 56), dtype=np.uint16)
    path = tmp_path / "pyr.jnrrd"
    header = {"space": "right-anterior-superior", "space_origin": [10.0, -20.0, 5.0],
              "space_directions": [[0.5, 0, 0], [0, 0.5, 0], [0, 0, 1.25]],
              "space_units": ["mm", "mm", "mm"]}
    jnrrd.write(path, data, header, index_order="C", tile=16, compression="zstd", levels=3,
                tile_stats=True)
    levels, kw, kind = _one(pm, path)
    assert kind == "image" and kw["multiscale"] is True
    assert [lv.shape for lv in levels] == [(40, 48, 56), (20, 24, 28), (10, 12, 14)]
    for k, lv in enumerate(levels):
        expected, _ = jnrrd.read(path, level=k, index_order="C")
        np.testing.assert_array_equal(np.asarray(lv), expected)
    np.testing.assert_array_equal(levels[0][17, 3:30, 40:], data[17, 3:30, 40:])
    # level-0 geometry, world axes reversed with the data axes
    assert kw["scale"] == (1.25, 0.5, 0.5) and kw["translate"] == (5.0, -20.0, 10.0)
    assert kw["units"] == ("mm", "mm", "mm")
    assert [m["scale"] for m in kw["metadata"]["levels"]] == [(1, 1, 1), (2, 2, 2), (4, 4, 4)]
    # the data range of level 0 from the tile statistics, no voxel read
    assert kw["contrast_limits"] == (float(data.min()), float(data.max()))


def test_contrast_limits_sample_large_levels(pm: npe2.PluginManager, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import jnrrd.integrations.napari as plugin

    data = np.zeros((9, 20, 30), dtype=np.int32)
    data[0, 10, 15], data[4, 10, 15], data[8, 10, 15] = -5, 50, 7  # first, middle, last plane
    data[2, 10, 15] = 10_000  # not in a sampled plane
    data[4, 0, 0] = 20_000  # outside the central patch
    path = tmp_path / "big.jnrrd"
    jnrrd.write(path, data, index_order="C")
    monkeypatch.setattr(plugin, "_SAMPLE", 3 * 4 * 4)  # "large": three 4x4 central patches
    _, kw, _ = _one(pm, path)
    assert kw["contrast_limits"] == (-5.0, 50.0)


@pytest.mark.parametrize("rgb_axis", [0, 2])  # header axis of the colour: C-order last, first
def test_rgb(pm: npe2.PluginManager, tmp_path: Path, rgb_axis: int) -> None:
    rng = np.random.default_rng(1)
    img = rng.integers(0, 256, size=(30, 40, 3), dtype=np.uint8)  # y, x, rgb as napari wants
    kinds = ["space", "space"]
    kinds.insert(rgb_axis, "RGB-color")
    stored = img if rgb_axis == 0 else np.moveaxis(img, -1, 0)  # C order of the file
    path = tmp_path / "rgb.jnrrd"
    jnrrd.write(path, stored, {"kinds": kinds, "spacings": [0.2 if k == "space" else None
                                                             for k in kinds]},
                index_order="C", tile=16, levels=2)
    levels, kw, kind = _one(pm, path)
    assert kind == "image" and kw["rgb"] is True and "channel_axis" not in kw
    assert [lv.shape for lv in levels] == [(30, 40, 3), (15, 20, 3)]
    np.testing.assert_array_equal(np.asarray(levels[0]), img)
    np.testing.assert_array_equal(levels[0][5:9, 7], img[5:9, 7])
    assert kw["scale"] == (0.2, 0.2)


def test_real_rgb_nrrd(pm: npe2.PluginManager) -> None:
    # a 2-D RGB slice placed in 3-D space (z = 12): world axes y, x, translate 0
    arr, kw, _ = _one(pm, DATA / "rgb.nrrd")
    assert kw["rgb"] is True and arr.shape == (12, 16, 3)
    assert kw["scale"] == (0.25, 0.25) and kw["translate"] == (0.0, 0.0)


def test_channel_axis(pm: npe2.PluginManager, tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    vec = rng.standard_normal((10, 12, 14, 3)).astype(np.float32)  # z, y, x, component
    path = tmp_path / "vec.jnrrd"
    jnrrd.write(path, vec, {"kinds": ["vector", "space", "space", "space"],
                            "spacings": [None, 1.5, 1.5, 3.0]},
                index_order="C", tile=8, levels=2)
    levels, kw, kind = _one(pm, path)
    assert kind == "image" and kw["channel_axis"] == 3 and kw["rgb"] is False
    assert kw["scale"] == (3.0, 1.5, 1.5)  # the layer axes, after the split
    # napari splits with a[:, :, :, i] on each level: lazy, the right channel
    for c in range(3):
        part = levels[0][:, :, :, c]
        assert isinstance(part, LevelArray) and part.shape == (10, 12, 14)
        np.testing.assert_array_equal(np.asarray(part), vec[..., c])
        np.testing.assert_array_equal(part[4, ::3], vec[4, ::3, :, c])
    assert levels[1][:, :, :, 1].shape == (5, 6, 7)
    # one range per channel, from the coarsest level
    coarse, _ = jnrrd.read(path, level=1, index_order="C")
    assert kw["contrast_limits"] == [(float(coarse[..., c].min()), float(coarse[..., c].max()))
                                     for c in range(3)]


def test_long_list_axis_is_not_split(pm: npe2.PluginManager, tmp_path: Path) -> None:
    data = np.zeros((4, 5, MAX_CHANNELS + 1), dtype=np.int16)
    path = tmp_path / "list.nrrd"
    jnrrd.write(path, data, {"kinds": ["list", "space", "space"]}, index_order="C")
    arr, kw, _ = _one(pm, path)
    assert "channel_axis" not in kw and arr.shape == (4, 5, MAX_CHANNELS + 1)
    assert kw["scale"] == (1.0, 1.0, 1.0)


def test_mode_pyramid_is_labels(pm: npe2.PluginManager, tmp_path: Path) -> None:
    lab = np.zeros((32, 32, 32), dtype=np.uint16)
    lab[4:20, 8:30, 2:16] = 3
    lab[20:, :10, 16:] = 7
    path = tmp_path / "seg.jnrrd"
    jnrrd.write(path, lab, index_order="C", tile=16, levels=3, downsample="mode")
    levels, kw, kind = _one(pm, path)
    assert kind == "labels" and kw["multiscale"] is True and "rgb" not in kw
    assert [lv.shape for lv in levels] == [(32, 32, 32), (16, 16, 16), (8, 8, 8)]
    np.testing.assert_array_equal(np.asarray(levels[0]), lab)
    assert set(np.unique(np.asarray(levels[2]))) <= {0, 3, 7}
    # the same data averaged is an image; a Slicer segmentation is labels by its name
    jnrrd.write(tmp_path / "avg.jnrrd", lab, index_order="C", tile=16, levels=2)
    assert _one(pm, tmp_path / "avg.jnrrd")[2] == "image"
    assert _one(pm, DATA / "seg.seg.nrrd")[2] == "labels"


def test_oblique_volume_gets_affine(pm: npe2.PluginManager, tmp_path: Path) -> None:
    data = np.arange(6 * 7 * 8, dtype=np.int16).reshape(6, 7, 8)
    t = np.deg2rad(30)
    dirs = [[0.7 * np.cos(t), 0.7 * np.sin(t), 0.0], [-0.7 * np.sin(t), 0.7 * np.cos(t), 0.0],
            [0.0, 0.0, 2.5]]
    origin = [-120.5, -98.25, 33.0]
    path = tmp_path / "ct.jnrrd"
    jnrrd.write(path, data, {"space": "left-posterior-superior", "space_origin": origin,
                             "space_directions": dirs}, index_order="C", tile=4, levels=2)
    levels, kw, _ = _one(pm, path)
    assert "scale" not in kw and "translate" not in kw
    a = np.asarray(kw["affine"])
    assert a.shape == (4, 4)
    for idx in [(0, 0, 0), (5, 6, 7), (2, 3, 1)]:
        np.testing.assert_allclose((a @ [*idx, 1])[:3], _world(origin, dirs, idx), atol=1e-9)
    # the real CT sample (classic NRRD, rotated in-plane) too
    arr, kw, _ = _one(pm, DATA / "ct.nrrd")
    h = jnrrd.read_header(DATA / "ct.nrrd")
    a = np.asarray(kw["affine"])
    np.testing.assert_allclose((a @ [9, 17, 19, 1])[:3],
                               _world(h["space_origin"], h["space_directions"], (9, 17, 19)))


def test_several_files_give_several_layers(pm: npe2.PluginManager, tmp_path: Path) -> None:
    for k in range(2):
        jnrrd.write(tmp_path / f"s{k}.jnrrd", np.full((3, 4), k, np.uint8), index_order="C")
    layers = get_reader([str(tmp_path / "s0.jnrrd"), str(tmp_path / "s1.jnrrd")])(
        [str(tmp_path / "s0.jnrrd"), str(tmp_path / "s1.jnrrd")])
    assert [int(np.asarray(d).max()) for d, _, _ in layers] == [0, 1]
    assert [kw["name"] for _, kw, _ in layers] == ["s0", "s1"]


# -- a real viewer ------------------------------------------------------------------------------

def _gui_or_skip() -> None:
    import importlib.util

    if importlib.util.find_spec("napari") is None:
        pytest.skip("napari is not installed (pip install -e '.[napari]')")
    try:
        import qtpy.QtWidgets  # noqa: F401
    except Exception as e:  # no qtpy, or no Qt binding behind it
        pytest.skip(f"no usable Qt binding (the 'napari' extra installs PyQt5): {e}")
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        pytest.skip("no display: run under xvfb-run (QT_QPA_PLATFORM=offscreen has no OpenGL "
                    "here); .ci/run does")


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # napari's pydantic v1-style models
@pytest.mark.filterwarnings("ignore:System theme detection requires a Qt6:UserWarning")  # PyQt5
def test_napari_viewer_opens_and_draws(pm: npe2.PluginManager, tmp_path: Path) -> None:
    _gui_or_skip()
    import napari

    z, y, x = np.mgrid[:48, :64, :64]
    ball = (((z - 24) ** 2 + (y - 30) ** 2 + (x - 34) ** 2) < 18 ** 2) * 1000
    path = tmp_path / "ball.jnrrd"
    jnrrd.write(path, ball.astype(np.uint16), {"spacings": [0.5, 0.5, 2.0]}, index_order="C",
                tile=16, compression="zstd", levels=3)
    viewer = napari.Viewer(show=False, show_welcome_screen=False)
    try:
        [layer] = viewer.open(str(path), plugin="jnrrd")
        assert type(layer).__name__ == "Image" and layer.multiscale
        assert [tuple(d.shape) for d in layer.data] == [(48, 64, 64), (24, 32, 32),
                                                       (12, 16, 16)]
        np.testing.assert_allclose(layer.scale, [2.0, 0.5, 0.5])
        np.testing.assert_array_equal(np.asarray(layer.data[0][24]), ball[24])
        viewer.dims.set_point(0, 24 * 2.0)  # world units: the ball's middle plane
        # Qt grabs a never-shown OpenGL canvas as black (napari's own screenshot tests use
        # show=True); under xvfb-run showing it opens no window on anyone's screen
        viewer.window.show()
        shot = viewer.screenshot(canvas_only=True, flash=False)
        assert shot.ndim == 3 and shot.shape[2] in (3, 4)
        colours = np.unique(shot[..., :3].reshape(-1, 3), axis=0)
        assert len(colours) > 1, "the screenshot is one flat colour"
        assert shot[..., :3].max() > 200 and shot[..., :3].min() < 50  # the ball and the dark
        # the other layer kinds napari must accept from the reader
        lab = (ball // 1000 * 3).astype(np.uint8)
        jnrrd.write(tmp_path / "lab.jnrrd", lab, index_order="C", tile=16, levels=2,
                    downsample="mode")
        [labels] = viewer.open(str(tmp_path / "lab.jnrrd"), plugin="jnrrd")
        assert type(labels).__name__ == "Labels" and labels.multiscale
        assert set(np.unique(np.asarray(labels.data[1]))) == {0, 3}
        channels = viewer.open(str(DATA / "vector.nrrd"), plugin="jnrrd")
        assert [type(c).__name__ for c in channels] == ["Image"] * 3
        assert [tuple(c.data.shape) for c in channels] == [(5, 6, 7)] * 3
        [ct] = viewer.open(str(DATA / "ct.nrrd"), plugin="jnrrd")
        assert not np.allclose(ct.affine.affine_matrix[1:3, 1:3], np.diag([0.7, 0.7]))
        assert viewer.screenshot(canvas_only=True, flash=False).shape[2] in (3, 4)
    finally:
        viewer.close()
