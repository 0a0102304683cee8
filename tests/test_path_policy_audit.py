"""Path policy audit (docs/security.md#path-policy): every place a path is built from file
content, proven with an audit hook that records every file the read opens.

Each hostile dataset sits in ``root/`` and names a real file in ``outside/`` (by ``..``, an
absolute path, a pattern, a base directory, or a symlink inside the root). The read must fail
with ``SecurityError`` and the ``open``/``mmap`` audit events must show that nothing under
``outside/`` was opened; with ``allowed_roots=[outside]`` (or ``allow_parent``) the same
dataset reads, and everything opened lies inside the root or the allowed roots.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Any

import numpy as np
import pytest

import jnrrd
from jnrrd.tiling.spec import TILE_URI

_RECORDING: list[list[str]] = []


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if not _RECORDING or event != "open":
        return
    path = args[0]
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if isinstance(path, str):
        _RECORDING[-1].append(os.path.realpath(path))


sys.addaudithook(_hook)  # hooks cannot be removed; it records only inside ``opened()``

DATA = np.arange(8, dtype=np.uint8)


class opened:
    """Context manager collecting the real paths of every file opened inside it."""

    def __enter__(self) -> list[str]:
        _RECORDING.append([])
        return _RECORDING[-1]

    def __exit__(self, *exc: object) -> None:
        _RECORDING.pop()


def _lines(fields: list[tuple[str, Any]]) -> bytes:
    head = [{"jnrrd": "0004"}, *({k: v} for k, v in fields)]
    return b"".join(json.dumps(o).encode() + b"\n" for o in head) + b"\n"


_CORE = [("type", "uint8"), ("dimension", 1), ("sizes", [8]), ("encoding", "raw")]
_TILED = [*_CORE, ("extensions", {"tile": TILE_URI}), ("tile:enabled", True),
          ("tile:dimensions", [0]), ("tile:sizes", [8]), ("tile:storage", "external")]


def _case(name: str, root: str, outside: str) -> bytes | None:
    """The header (or classic NRRD file) for one hostile case; creates what it needs."""
    secret = os.path.join(outside, "secret.raw")
    if name == "data_file-parent":
        return _lines([*_CORE, ("data_file", "../outside/secret.raw")])
    if name == "data_file-absolute":
        return _lines([*_CORE, ("data_file", secret)])
    if name == "data_file-url":
        return _lines([*_CORE, ("data_file", "file://" + secret)])
    if name == "data_files-one-escapes":
        with open(os.path.join(root, "ok.raw"), "wb") as f:
            f.write(DATA[:4].tobytes())
        return _lines([*_CORE, ("data_files", ["ok.raw", "../outside/secret4.raw"])])
    if name == "data_file_pattern":
        return _lines([*_CORE, ("data_file_pattern", {"format": "../outside/s%d.raw",
                                                       "min": 0, "max": 0, "step": 1})])
    if name == "data_file-symlink":
        os.symlink(secret, os.path.join(root, "link.raw"))
        return _lines([*_CORE, ("data_file", "link.raw")])
    if name == "tile:pattern":
        return _lines([*_TILED, ("tile:pattern", "../outside/t{x}.bin")])
    if name == "tile:files":
        return _lines([*_TILED, ("tile:files", [
            {"level": 0, "indices": [0], "file": "../outside/t0.bin"}])])
    if name == "tile:base_dir":
        return _lines([*_TILED, ("tile:base_dir", "../outside"), ("tile:pattern", "t{x}.bin")])
    if name == "tile:base_dir-symlink":
        os.symlink(outside, os.path.join(root, "tiles"))
        return _lines([*_TILED, ("tile:base_dir", "tiles"), ("tile:pattern", "t{x}.bin")])
    if name == "tile-file-symlink":
        os.symlink(os.path.join(outside, "t0.bin"), os.path.join(root, "t0.bin"))
        return _lines([*_TILED, ("tile:pattern", "t{x}.bin")])
    if name == "nrrd-data-file":
        return (b"NRRD0004\ntype: uint8\ndimension: 1\nsizes: 8\nencoding: raw\n"
                b"data file: ../outside/secret.raw\n\n")
    if name == "nrrd-data-file-list":
        return (b"NRRD0004\ntype: uint8\ndimension: 1\nsizes: 8\nencoding: raw\n"
                b"data file: LIST\n../outside/secret.raw\n")
    raise AssertionError(name)


CASES = ["data_file-parent", "data_file-absolute", "data_file-url", "data_files-one-escapes",
         "data_file_pattern", "data_file-symlink", "tile:pattern", "tile:files",
         "tile:base_dir", "tile:base_dir-symlink", "tile-file-symlink", "nrrd-data-file",
         "nrrd-data-file-list"]


@pytest.fixture
def layout(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    for name in ("secret.raw", "s0.raw", "t0.bin"):
        (outside / name).write_bytes(DATA.tobytes())
    (outside / "secret4.raw").write_bytes(DATA[4:].tobytes())
    return str(root), str(outside)


def _read_every_way(path: str, **policy: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jnrrd.read(path, **policy)
        with jnrrd.open(path, **policy) as vol:
            vol[...]


@pytest.mark.parametrize("case", CASES)
def test_paths_outside_the_root_are_never_opened(layout, case):
    root, outside = layout
    ext = ".nrrd" if case.startswith("nrrd") else ".jnrrd"
    path = os.path.join(root, "v" + ext)
    with open(path, "wb") as f:
        f.write(_case(case, root, outside))
    with opened() as seen:
        with pytest.raises(jnrrd.SecurityError) as info:
            _read_every_way(path)
    assert isinstance(info.value, PermissionError)
    assert path in seen  # the hook works: the header itself was opened
    leaked = [p for p in seen if p.startswith(outside + os.sep)]
    assert leaked == [], leaked
    if case == "data_file-url":
        return
    # The same dataset with the outside directory allowed: it reads, and only the root and
    # the allowed directory were touched.
    policy: dict[str, Any] = {"allowed_roots": [outside]}
    if case == "data_file-absolute":
        policy = {"allow_absolute": True}
    with opened() as seen:
        _read_every_way(path, **policy)
    base = os.path.dirname(root)
    assert all(p.startswith((root + os.sep, outside + os.sep)) for p in seen
               if p.startswith(base + os.sep)), seen
    assert any(p.startswith(outside + os.sep) for p in seen)


def test_allow_parent_opens_exactly_the_named_file(layout):
    root, outside = layout
    path = os.path.join(root, "v.jnrrd")
    with open(path, "wb") as f:
        f.write(_case("data_file-parent", root, outside))
    with opened() as seen:
        data, _ = jnrrd.read(path, allow_parent=True)
    np.testing.assert_array_equal(data, DATA)
    assert {p for p in seen if p.startswith(outside)} == {os.path.join(outside, "secret.raw")}


def test_an_opener_alone_serves_urls(layout):
    """A URL is fetched only through the caller's opener, and only the named URL."""
    import io

    root, outside = layout
    path = os.path.join(root, "v.jnrrd")
    with open(path, "wb") as f:
        f.write(_lines([*_CORE, ("data_file", "https://example.invalid/d.raw")]))
    asked = []

    def opener(url: str, mode: str) -> io.BytesIO:
        asked.append((url, mode))
        return io.BytesIO(DATA.tobytes())

    data, _ = jnrrd.read(path, opener=opener)
    np.testing.assert_array_equal(data, DATA)
    assert asked == [("https://example.invalid/d.raw", "rb")]


@pytest.mark.parametrize("name", ["d.raw", "sub/d.raw", "./d.raw", "sub/../d.raw"])
def test_fast_realpath_matches_os_realpath(tmp_path, name):
    """The cached resolution in ``resolve_path`` gives ``os.path.realpath``'s answer, with
    and without symlinks on the way (policy.py ``_realpath``)."""
    from jnrrd.policy import Policy
    from jnrrd.storage.local import resolve_path

    (tmp_path / "sub").mkdir()
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "linkdir")
    pol = Policy.from_kwargs(allow_parent=True)
    for root in (tmp_path, tmp_path / "linkdir"):
        full = os.path.join(root, name)
        assert resolve_path(str(root), name, pol) == os.path.realpath(full)
