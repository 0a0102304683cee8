"""The viewer side of the web view without a browser (jnrrd.web.viewer, docs/web-view.md):
the launcher page and its state, neuroglancer's client files, the held-open event channel,
and the missing extra. The real browser drives it in tests/test_web_browser.py."""

from __future__ import annotations

import json
import re
import socket
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import jnrrd
from jnrrd.web import viewer as web_viewer

pytest.importorskip("neuroglancer", reason="in the test extra: pip install -e '.[test]'")


def get(url: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def page_state(page: bytes) -> tuple[dict[str, Any], list[float]]:
    text = page.decode()
    state = re.search(r"const state = (\{.*\});\n", text)
    extent = re.search(r"const extent = (\[.*\]);\n", text)
    assert state is not None and extent is not None
    return json.loads(state.group(1)), json.loads(extent.group(1))


def no_redirect(url: str) -> tuple[int, dict[str, str]]:
    class Keep(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any) -> None:
            return None

    try:
        with urllib.request.build_opener(Keep).open(url, timeout=30) as answer:
            return answer.status, dict(answer.headers)
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers)


@pytest.fixture(scope="module")
def ct(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("viewer") / "ct.jnrrd"
    data = np.zeros((40, 30, 12), np.int16)
    data[10:30, 10:20, 3:9] = 1000
    header = {"space": "left-posterior-superior", "space_origin": [-5.0, 0.0, 12.0],
              "space_directions": [[0.5, 0, 0], [0, 0.5, 0], [0, 0, 2.5]],
              "space_units": ["mm", "mm", "mm"], "labels": ["x", "y", "z"]}
    jnrrd.write(path, data, header, tile=8, levels=3, compression="zstd")
    return path


def test_the_client_page_carries_the_volume_state(ct: Path) -> None:
    root = web_viewer.client_dir()
    with jnrrd.serve(ct, viewer=True, layout="xy") as s:
        assert s.viewer_url == s.url + "v/jnrrd/"
        status, headers, page = get(str(s.viewer_url))
        # (one answer: two would differ in their Date header across a second's boundary)
        redirect_status, redirect_headers = no_redirect(s.url + "view")
        assert redirect_status == 302 and redirect_headers["Location"] == "v/jnrrd/"
        # the page's path without its last slash: relative, so a proxy's prefix is kept
        assert no_redirect(s.url + "v/jnrrd")[1]["Location"] == "jnrrd/"
        assert get(s.url + "v/jnrrd")[2] == page
        assert get(s.url + "view")[2] == page  # the short name lands on the same page
        assert get(s.url + "v/jnrrd/index.html")[2] == page
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert headers["Cache-Control"] == "no-cache"
    # neuroglancer's own page, with the view's script first in its head
    index = (root / "index.html").read_bytes()
    assert page.replace(page[page.index(b"<script>"):page.index(b"</script>") + 9], b"") \
        == index
    assert page.index(b"if (!window.location.hash)") < page.index(b"<script defer")
    state, extent = page_state(page)
    assert state["dimensions"] == {"x": [0.0005, "m"], "y": [0.0005, "m"],
                                   "z": [0.0025, "m"]}
    # the centre of the middle voxel, in voxels, offset by the origin (-5 mm / 0.5 mm ...)
    assert state["position"] == [-10 + 20.5, 0 + 15.5, 12 / 2.5 + 6.5]
    assert state["layout"] == "xy"
    layer = state["layers"][0]
    assert layer["type"] == "image" and layer["name"] == "ct" and layer["source"] == ""
    assert layer["shaderControls"]["normalized"]["range"] == [0.0, 1000.0]
    assert extent == [40.0, 30.0, 60.0]  # canonical voxels: 0.5 mm; z 12 * 2.5 / 0.5
    text = page.decode()
    assert "'zarr3://' + store" in text and "new URL('../../'" in text
    assert "history.replaceState" in text


def test_nothing_in_the_state_ends_the_script(tmp_path: Path) -> None:
    path = tmp_path / "a<!--b<script>c.jnrrd"  # the file's name is the layer's name
    jnrrd.write(path, np.zeros((4, 4, 4), np.uint8), tile=4)
    with jnrrd.serve(path, viewer=True) as s:
        page = get(str(s.viewer_url))[2]
    index = (web_viewer.client_dir() / "index.html").read_bytes()
    assert page.count(b"<script") == 1 + index.count(b"<script")
    assert b"<!--" not in page
    assert page_state(page)[0]["layers"][0]["name"] == "a<!--b<script>c"


def test_two_d_volumes_get_one_panel(tmp_path: Path) -> None:
    jnrrd.write(tmp_path / "p.jnrrd", np.arange(600, dtype=np.uint8).reshape(30, 20), tile=8)
    with jnrrd.serve(tmp_path / "p.jnrrd", viewer=True) as s:
        state, extent = page_state(get(str(s.viewer_url))[2])
    assert state["layout"] == "xy" and extent == [30.0, 20.0]
    with pytest.raises(ValueError, match="layout"):
        jnrrd.serve(tmp_path / "p.jnrrd", viewer=True, layout="6panel")


def test_the_client_files_and_nothing_else(ct: Path) -> None:
    root = web_viewer.client_dir()
    bundle = next(p.name for p in root.iterdir() if p.name.startswith("main.")
                  and p.suffix == ".js")
    with jnrrd.serve(ct, viewer=True) as s:
        status, headers, body = get(s.url + "v/jnrrd/" + bundle)
        assert status == 200 and body == (root / bundle).read_bytes()
        assert headers["Content-Type"] == "application/javascript"
        for name in ("__init__.py", "../__init__.py", "index.htm", "v/jnrrd/index.html"):
            assert get(s.url + "v/jnrrd/" + name)[0] == 404, name
        assert get(s.url + "v/other/index.html")[0] == 404
        assert get(s.url + "zarr.json")[0] == 200  # the store beside it


def test_the_event_channel_is_held_open_until_close(ct: Path) -> None:
    s = jnrrd.serve(ct, viewer=True)
    with socket.create_connection(("127.0.0.1", s.port), timeout=10) as sock:
        sock.sendall(f"GET /events/jnrrd?c=1&gc=0 HTTP/1.1\r\nHost: 127.0.0.1:{s.port}\r\n"
                     "Accept: text/event-stream\r\n\r\n".encode())
        head = b""
        while b": jnrrd\n\n" not in head:
            head += sock.recv(4096)
        assert head.startswith(b"HTTP/1.1 200") and b"text/event-stream" in head
        start = time.monotonic()
        s.close()
        rest = b""
        while chunk := sock.recv(4096):
            rest += chunk
        assert time.monotonic() - start < 5  # the channel ends with the server


def test_without_neuroglancer_the_extra_is_named(ct: Path, monkeypatch: pytest.MonkeyPatch
                                                 ) -> None:
    monkeypatch.setattr(web_viewer.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(jnrrd.errors.MissingDependencyError,
                       match=r"pip install neuroglancer \(jnrrd's viewer extra") as info:
        jnrrd.serve(ct, viewer=True)
    assert "jnrrd[" not in str(info.value)  # jnrrd is not on PyPI: no such pip command
    with jnrrd.serve(ct) as s:  # the store alone needs no viewer
        assert get(s.url + "zarr.json")[0] == 200


def test_axis_names_are_made_valid_for_neuroglancer(tmp_path: Path) -> None:
    assert web_viewer.dimension_names(["x", "left-right", "post ant", "ü", "9", "x"]) == [
        "x", "left_right", "post_ant", "d_", "d9", "x_2"]
    path = tmp_path / "l.jnrrd"
    jnrrd.write(path, np.zeros((4, 4, 4), np.uint8), {"labels": ["left-right", "a b", "z"]},
                tile=4)
    with jnrrd.serve(path, viewer=True) as s:
        axes = json.loads(get(s.url + "zarr.json")[2])["attributes"]["ome"]["multiscales"][0]
        state = page_state(get(str(s.viewer_url))[2])[0]
    assert [a["name"] for a in axes["axes"]] == ["z", "a_b", "left_right"]
    assert list(state["dimensions"]) == ["left_right", "a_b", "z"]
    with jnrrd.serve(path) as s:  # jnrrd serve keeps the file's labels
        meta = json.loads(get(s.url + "0/zarr.json")[2])
    assert meta["dimension_names"] == ["z", "a b", "left-right"]


def rgb_file(path: Path) -> Path:
    data = np.zeros((8, 32, 32, 3), np.uint8)  # C order: z, y, x, colour
    data[:, :16, :, 0] = 255
    data[:, 16:, :, 1] = 255
    jnrrd.write(path, data, {"kinds": ["RGB-color", "domain", "domain", "domain"]}, tile=8,
                index_order="C")
    return path


def label_file(path: Path) -> Path:
    data = np.zeros((8, 32, 32), np.uint8)
    data[:, :16, :] = 2
    data[:, 16:, :] = 7
    jnrrd.write(path, data, {"label:map": True}, tile=8)
    return path


def test_rgb_is_shown_in_colour(tmp_path: Path) -> None:
    with jnrrd.serve(rgb_file(tmp_path / "rgb.jnrrd"), viewer=True) as s:
        state, extent = page_state(get(str(s.viewer_url))[2])
    layer = state["layers"][0]
    # the colour axis is the layer's channel dimension, not a global one
    assert list(state["dimensions"]) == ["x", "y", "z"] and len(state["position"]) == 3
    assert layer["source"]["transform"]["outputDimensions"] == {
        "z": [1.0, ""], "y": [1.0, ""], "x": [1.0, ""], "c^": [1, ""]}
    assert "emitRGB" in layer["shader"] and "getDataValue(2)" in layer["shader"]
    assert layer["shaderControls"]["normalized"]["range"] == [0, 255]
    assert extent == [32.0, 32.0, 8.0] and state["layout"] == "4panel"


def test_a_label_map_is_a_segmentation(tmp_path: Path) -> None:
    with jnrrd.serve(label_file(tmp_path / "lab.jnrrd"), viewer=True) as s:
        state, _ = page_state(get(str(s.viewer_url))[2])
    assert state["layers"][0] == {"type": "segmentation", "source": "", "name": "lab"}


def test_the_3d_layout_renders_the_volume_and_fits_it(ct: Path) -> None:
    with jnrrd.serve(ct, viewer=True, layout="3d") as s:
        state, extent = page_state(get(str(s.viewer_url))[2])
    assert state["layers"][0]["volumeRendering"] == "on"
    diagonal = float(np.linalg.norm(extent))
    assert diagonal <= state["projectionScale"] <= 1.2 * diagonal
    with jnrrd.serve(ct, viewer=True, layout="xy-3d") as s:
        assert "volumeRendering" not in page_state(get(str(s.viewer_url))[2])[0]["layers"][0]


def test_a_plane_layout_a_2d_image_lacks_is_an_error(tmp_path: Path) -> None:
    jnrrd.write(tmp_path / "p.jnrrd", np.zeros((30, 20), np.uint8), tile=8)
    for layout in ("xz", "yz", "xz-3d", "yz-3d"):
        with pytest.raises(ValueError, match=f"layout '{layout}'.*2 displayed axes"):
            jnrrd.serve(tmp_path / "p.jnrrd", viewer=True, layout=layout)


def test_the_contrast_window_covers_full_resolution_noise(tmp_path: Path) -> None:
    noise = np.random.default_rng(0).standard_normal((64, 64, 64)).astype(np.float32)
    jnrrd.write(tmp_path / "n.jnrrd", noise, tile=16, levels=3)
    with jnrrd.serve(tmp_path / "n.jnrrd", viewer=True) as s:
        state, _ = page_state(get(str(s.viewer_url))[2])
    lo, hi = state["layers"][0]["shaderControls"]["normalized"]["range"]
    assert lo < -2.0 and hi > 2.0  # N(0, 1): the 0.5th and 99.5th percentiles are ±2.58


@pytest.mark.parametrize("viewer", [False, True])
def test_flipped_or_oblique_directions_warn(tmp_path: Path, viewer: bool) -> None:
    flipped = {"space": "left-posterior-superior", "space_origin": [100.0, 80.0, -30.0],
               "space_directions": [[-0.7, 0, 0], [0, -0.7, 0], [0, 0, 2.5]]}
    c, s_ = np.cos(np.pi / 6), np.sin(np.pi / 6)
    rotated = {"space": "left-posterior-superior", "space_origin": [0.0, 0.0, 0.0],
               "space_directions": [[2 * c, 2 * s_, 0], [-s_, c, 0], [0, 0, 1]]}
    for name, header in (("flipped", flipped), ("rotated", rotated)):
        path = tmp_path / f"{name}.jnrrd"
        jnrrd.write(path, np.zeros((4, 6, 8), np.uint8), header, tile=4)
        with pytest.warns(jnrrd.JnrrdWarning, match="space_directions: flipped, rotated"):
            jnrrd.serve(path, viewer=viewer).close()
    # an axis-aligned file does not warn
    jnrrd.write(tmp_path / "plain.jnrrd", np.zeros((4, 6, 8), np.uint8), {
        "space": "left-posterior-superior", "space_origin": [0.0, 0.0, 0.0],
        "space_directions": [[1, 0, 0], [0, 1, 0], [0, 0, 1]]}, tile=4)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", jnrrd.JnrrdWarning)
        jnrrd.serve(tmp_path / "plain.jnrrd", viewer=viewer).close()


def test_channel_after_space_warns_for_the_store_only(tmp_path: Path) -> None:
    path = rgb_file(tmp_path / "rgb.jnrrd")
    with pytest.warns(jnrrd.JnrrdWarning, match="not valid OME-Zarr 0.5"):
        jnrrd.serve(path).close()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", jnrrd.JnrrdWarning)
        jnrrd.serve(path, viewer=True).close()  # neuroglancer reads it as it is
