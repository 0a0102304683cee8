"""Bad input found by a new user's trial raises a jnrrd exception naming the file, the field
and what was expected (docs/api.md#errors-and-warnings), never a bare builtin one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import jnrrd


@pytest.fixture(scope="module")
def cube(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("trial") / "cube.jnrrd"
    jnrrd.write(path, np.zeros((16, 12, 8), np.uint8), tile=8, compression="zstd", levels=2)
    return path


def raised(call: Callable[[], Any], *kinds: type[BaseException]) -> str:
    """The message of what ``call`` raised, checked to be every class of ``kinds``."""
    with pytest.raises(jnrrd.JnrrdError) as info:
        call()
    for kind in kinds:
        assert isinstance(info.value, kind), (type(info.value).__mro__, kind)
    return str(info.value)


def test_selection_error_is_both_a_jnrrd_error_and_an_index_error() -> None:
    assert issubclass(jnrrd.SelectionError, jnrrd.JnrrdError)
    assert issubclass(jnrrd.SelectionError, IndexError)
    assert "SelectionError" in jnrrd.__all__ and "ArgumentError" in jnrrd.__all__


@pytest.mark.parametrize(("order", "key", "needles"), [
    ("F", (500, 0, 0), ("axis 0", "500", "-16..15")),
    ("F", (0, -13), ("axis 1", "-13", "-12..11")),
    ("C", (0, 0, 16), ("axis 2", "16", "-16..15")),
    ("F", (slice(None, None, 0),), ("axis 0", "step", "0")),
    ("F", (0, 0, 0, 0), ("4", "3")),
    ("F", (..., 0, ...), ("ellipsis",)),
    ("F", ([500], 0, 0), ("axis 0", "500", "-16..15")),
    ("F", (0, np.zeros(3, bool)), ("axis 1", "boolean", "12")),
])
def test_bad_indices_name_the_file_the_axis_and_the_range(
        cube: Path, order: str, key: tuple[Any, ...], needles: tuple[str, ...]) -> None:
    with jnrrd.open(cube, index_order=order) as vol:
        msg = raised(lambda: vol[key], jnrrd.SelectionError, IndexError)
        for n in (str(cube), *needles):
            assert n in msg, (n, msg)
        if key[0] == [500]:
            msg = raised(lambda: vol.oindex[key], jnrrd.SelectionError)
            assert str(cube) in msg and "axis 0" in msg


def test_a_level_that_does_not_exist_names_the_file_and_the_levels(cube: Path) -> None:
    with jnrrd.open(cube) as vol:
        for call in (lambda: vol.levels[7], lambda: vol.read_tile((0, 0, 0), 7),
                     lambda: jnrrd.read(cube, level=7)):
            msg = raised(call, jnrrd.SelectionError, IndexError)
            assert str(cube) in msg and "level 7" in msg and "0..1" in msg, msg
        assert vol.levels[-1].shape == (8, 6, 4) and len(vol.levels[0:1]) == 1


def test_index_order_names_the_file_and_what_is_expected(cube: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.jnrrd"
    for call, name in ((lambda: jnrrd.read(cube, index_order="X"), cube),
                       (lambda: jnrrd.open(cube, index_order="X"), cube),
                       (lambda: jnrrd.write(out, np.zeros(3), index_order="X"), out)):
        msg = raised(call, jnrrd.ArgumentError)
        assert str(name) in msg and "index_order" in msg and "'F' or 'C'" in msg, msg


def test_a_tile_with_the_wrong_number_of_entries_names_the_target(tmp_path: Path) -> None:
    out = tmp_path / "t.jnrrd"
    msg = raised(lambda: jnrrd.write(out, np.zeros((4, 4, 4), np.uint8), tile=(2, 2)),
                 jnrrd.HeaderError)
    assert str(out) in msg and "tile" in msg and "3 entries" in msg and "2" in msg, msg
    assert not out.exists()


def test_append_and_resize_arguments_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "e.jnrrd"
    with jnrrd.create(path, (8, 8, 4), "uint8", tile=4) as vol:
        msg = raised(lambda: vol.append(np.zeros((3, 3, 1), np.uint8)), jnrrd.ArgumentError)
        assert str(path) in msg and "append" in msg and "(3, 3, 1)" in msg, msg
        msg = raised(lambda: vol.append(np.zeros((8, 8, 1), np.uint8), axis=5),
                     jnrrd.SelectionError, IndexError)
        assert str(path) in msg and "axis 5" in msg, msg
        msg = raised(lambda: vol.resize((8, 8, -1)), jnrrd.ArgumentError)
        assert str(path) in msg and "resize" in msg and "-1" in msg, msg
        vol.resize((8, 8, 5))  # the volume is still usable
    assert jnrrd.read(path)[0].shape == (8, 8, 5)


def test_a_missing_file_is_both_file_not_found_and_a_jnrrd_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing.jnrrd"
    for call in (lambda: jnrrd.open(missing), lambda: jnrrd.read(missing),
                 lambda: jnrrd.read_header(missing), lambda: jnrrd.open(missing, mode="r+")):
        msg = raised(call, FileNotFoundError, jnrrd.NoSuchFileError)
        assert str(missing) in msg, msg
    assert issubclass(jnrrd.errors.ObjectNotFoundError, FileNotFoundError)
