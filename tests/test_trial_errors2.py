"""Bad arguments to the world queries, the web view, the OME-Zarr export, previews and the
dask/xarray/napari integrations raise a jnrrd exception naming the file, the argument and what
was expected (docs/api.md#errors-and-warnings). ``ArgumentError`` and ``SelectionError`` are
``ValueError``/``IndexError`` too, so callers that caught the builtins keep working."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import jnrrd


@pytest.fixture(scope="module")
def cube(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("trial2") / "cube.jnrrd"
    jnrrd.write(path, np.zeros((16, 12, 8), np.uint8), tile=8, levels=2)
    return path


def raised(call: Callable[[], Any], kind: type[BaseException], *needles: str) -> str:
    """The message of what ``call`` raised, checked to be a ``kind`` and a jnrrd error and to
    hold every one of ``needles``."""
    with pytest.raises(jnrrd.JnrrdError) as info:
        call()
    assert isinstance(info.value, kind), type(info.value).__mro__
    text = str(info.value)
    for needle in needles:
        assert needle in text, (needle, text)
    return text


@pytest.mark.parametrize(("args", "needles"), [
    (([0, 0, 0], [1, 1, 1], 0.0), ("spacing", "positive", "0.0")),
    (([0, 0, 0], [1, 1, 1], "abc"), ("spacing", "'abc'")),
    (([0, 0], [1, 1, 1]), ("lower", "3 finite world coordinates", "[0.0, 0.0]")),
    (([0, 0, 0], [1, np.nan, 1]), ("upper", "3 finite")),
    ((["a", 0, 0], [1, 1, 1]), ("lower", "'a'")),
])
def test_world_query_arguments(cube: Path, args: tuple[Any, ...],
                               needles: tuple[str, ...]) -> None:
    with jnrrd.open(cube) as vol:
        raised(lambda: vol.query(*args), jnrrd.ArgumentError, "cube.jnrrd", *needles)


@pytest.mark.parametrize(("options", "needles"), [
    ({"port": 70000}, ("port 70000", "0 to 65535")),
    ({"port": "8080"}, ("port '8080'",)),
    ({"host": " "}, ("host ' '", "127.0.0.1")),
    ({"layout": "side"}, ("layout 'side'", "4panel")),
    ({"cors": "ftp:/x"}, ("cors 'ftp:/x'", "origin")),
])
def test_serve_arguments(cube: Path, options: dict[str, Any], needles: tuple[str, ...]) -> None:
    raised(lambda: jnrrd.serve(cube, **options), jnrrd.ArgumentError, *needles)


def test_web_store_and_viewer_arguments(cube: Path, tmp_path: Path) -> None:
    from jnrrd.web.store import ZarrStore
    from jnrrd.web.viewer import viewer_state

    with jnrrd.open(cube, index_order="C") as vol:
        raised(lambda: ZarrStore(vol), jnrrd.ArgumentError, "cube.jnrrd", "index_order='F'")
    flat = tmp_path / "flat.jnrrd"
    jnrrd.write(flat, np.zeros((6, 4), np.uint8))
    with jnrrd.open(flat) as vol:
        store = ZarrStore(vol)
        raised(lambda: viewer_state(store, name="flat", layout="yz"), jnrrd.ArgumentError,
               "flat.jnrrd", "layout 'yz'", "xy, 3d or xy-3d")
        raised(lambda: viewer_state(store, name="flat", layout="side"), jnrrd.ArgumentError,
               "layout 'side'")


@pytest.mark.parametrize(("options", "needles"), [
    ({"chunks": [8, 8]}, ("chunks=[8, 8]", "3 sizes >= 1")),
    ({"chunks": 8}, ("chunks=8", "3 sizes")),
    ({"chunks": ["a", 8, 8]}, ("chunks=['a', 8, 8]",)),
    ({"shards": 0}, ("shards=0", "chunks >= 1")),
    ({"shards": [5, 8, 8]}, ("shards=[5, 8, 8]", "multiple of the chunk size [8, 8, 8]")),
    ({"shards": 2.5}, ("shards=2.5", "an int")),
])
def test_omezarr_export_arguments(cube: Path, tmp_path: Path, options: dict[str, Any],
                                  needles: tuple[str, ...]) -> None:
    from jnrrd.integrations.omezarr import write_omezarr

    target = tmp_path / "out.zarr"
    with jnrrd.open(cube) as vol:
        raised(lambda: write_omezarr(vol, target, **options), jnrrd.ArgumentError,
               "cube.jnrrd", *needles)
    assert not target.exists()


def test_omezarr_export_and_multiscales_arguments(cube: Path, tmp_path: Path) -> None:
    from jnrrd.integrations.ngff import multiscales
    from jnrrd.integrations.omezarr import write_omezarr

    with jnrrd.open(cube, index_order="C") as vol:
        raised(lambda: write_omezarr(vol, tmp_path / "c.zarr"), jnrrd.ArgumentError,
               "cube.jnrrd", "index_order='F'")
    with jnrrd.open(cube) as vol:
        raised(lambda: multiscales(vol, paths=["0"]), jnrrd.ArgumentError,
               "cube.jnrrd", "1 paths for 2 levels")


def test_levels_of_the_dask_xarray_and_preview_views(cube: Path) -> None:
    import xarray as xr

    with jnrrd.open(cube) as vol:
        for call in (lambda: vol.to_dask(level=2), lambda: vol.to_dask(level=-1),
                     lambda: vol.preview(level=2)):
            raised(call, jnrrd.SelectionError, "cube.jnrrd", "level", "(0..1)")
        raised(lambda: vol.preview(size=0), jnrrd.ArgumentError, "cube.jnrrd", "size", "got 0")
    raised(lambda: xr.open_dataset(cube, engine="jnrrd", level=5), jnrrd.SelectionError,
           "cube.jnrrd", "level 5 does not exist", "(0..1)")


def test_png_pictures(tmp_path: Path) -> None:
    from jnrrd.preview import encode_png, write_png

    raised(lambda: encode_png(np.zeros((4, 4), np.uint8)), jnrrd.ArgumentError,
           "encode_png: rgb", "H x W x 3 uint8", "(4, 4)")
    raised(lambda: write_png(tmp_path / "p.png", np.zeros((0, 4, 3), np.uint8)),
           jnrrd.ArgumentError, "p.png: write_png: rgb", "0 x 4")
    assert not (tmp_path / "p.png").exists()


def test_napari_layer_data(cube: Path, tmp_path: Path) -> None:
    from jnrrd.integrations.napari import layer_data

    with jnrrd.open(cube) as vol:
        raised(lambda: layer_data(vol), jnrrd.ArgumentError, "cube.jnrrd", "index_order='C'")
    path = tmp_path / "vec.jnrrd"
    jnrrd.write(path, np.zeros((6, 5, 4, 3), np.float32),
                {"kinds": ["vector", "space", "space", "space"]}, index_order="C", tile=4)
    with jnrrd.open(path, index_order="C") as vol:
        data, kw, _ = layer_data(vol)
        arr = data[0] if isinstance(data, list) else data
        assert kw["channel_axis"] == 3 and arr[:, :, :, 2].shape == (6, 5, 4)
        raised(lambda: arr[:, :, :, 3], IndexError, "vec.jnrrd", "axis 3", "index 3", "-3..2")
