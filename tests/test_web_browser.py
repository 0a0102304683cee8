"""A real browser on ``jnrrd view`` (docs/web-view.md): headless Chromium (Debian's
``chromium`` package, driven through Playwright; no browser is ever downloaded) opens the URL
the command prints, neuroglancer asks for the coarsest levels' chunks first and for level 0
only after zooming in (the server's request log, ``--log``), and the screenshot shows the
volume's middle slice: a bright sphere in a dark box. Once for a local file, once for a file
on the S3 test server (tests/s3_server.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import jnrrd

pytestmark = pytest.mark.slow

N = 256
LEVELS = 3
RADIUS = 0.3 * N
SPHERE, BOX = 200, 20
VIEWPORT: Any = {"width": 320, "height": 240}
#: flags that work in headless containers: no sandbox, software WebGL (SwiftShader)
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--use-angle=swiftshader", "--enable-unsafe-swiftshader"]
TIMEOUT = 90.0


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no chromium here (Debian: apt-get install chromium; .ci/run installs it)")


def sphere_volume() -> np.ndarray:
    c = (N - 1) / 2
    z, y, x = np.ogrid[:N, :N, :N]
    inside = (x - c) ** 2 + (y - c) ** 2 + (z - c) ** 2 < RADIUS ** 2
    return np.where(inside, SPHERE, BOX).astype(np.uint8)


HEADER = {"space": "left-posterior-superior", "space_directions": [[0.8, 0, 0], [0, 0.8, 0],
                                                                   [0, 0, 0.8]],
          "space_origin": [0.0, 0.0, 0.0], "space_units": ["mm", "mm", "mm"]}


class View:
    """``jnrrd view --no-browser --log`` in a subprocess: the printed URL and the request log
    (``(seconds since start, line)``), read by a thread."""

    def __init__(self, source: str, *extra: str) -> None:
        self.start = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jnrrd", "view", source, "--no-browser", "--log",
             "--layout", "xy", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.url = self.proc.stdout.readline().strip()
        self.lines: list[tuple[float, str]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append((time.monotonic() - self.start, line.rstrip("\n")))

    def chunks(self, level: int) -> list[str]:
        """The chunk requests of ``level`` answered 200 so far."""
        prefix = f"jnrrd: GET /{level}/c/"
        return [line for _, line in list(self.lines)
                if line.startswith(prefix) and " 200 " in line]

    def wait_for(self, what: str, test: Callable[[], bool]) -> None:
        deadline = time.monotonic() + TIMEOUT
        while not test():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"{what}: not within {TIMEOUT:.0f} s; log:\n"
                                     + "\n".join(line for _, line in self.lines[-30:]))
            time.sleep(0.1)

    def settle(self, quiet: float = 1.5) -> None:
        """Wait until no request came for ``quiet`` seconds."""
        def calm() -> bool:
            last = self.lines[-1][0] if self.lines else 0.0
            return time.monotonic() - self.start - last > quiet
        self.wait_for("the requests to settle", calm)

    def close(self) -> str:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=20)
        self._reader.join(timeout=10)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
        return "\n".join(line for _, line in self.lines)


def drive(view: View, shots: Path) -> None:
    """Open the view, check the order of the levels asked for, zoom in, take the picture."""
    from playwright.sync_api import sync_playwright

    assert view.url.endswith("/v/jnrrd/"), view.url
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), headless=True,
                                    args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(view.url, timeout=TIMEOUT * 1000)
            view.wait_for("chunks of the coarsest level", lambda: bool(view.chunks(LEVELS - 1)))
            view.settle()
            # the fitted overview needs no full-resolution chunk
            assert view.chunks(0) == [], "level 0 asked for before zooming in"
            panel = page.locator(".neuroglancer-rendered-data-panel").first
            panel.wait_for(timeout=TIMEOUT * 1000)
            box = panel.bounding_box()
            assert box is not None
            page.screenshot(path=str(shots / "overview.png"))
            page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            page.keyboard.press("Control+Equal")  # neuroglancer: zoom in by 2
            view.wait_for("chunks of level 0 after zooming in", lambda: bool(view.chunks(0)))
            view.settle()
            page.mouse.move(1, 1)  # off the panel: no hover legend over the picture
            page.wait_for_timeout(1000)  # the last chunks drawn
            picture = shots / "zoomed.png"
            page.screenshot(path=str(picture))
            state = json.loads(urllib.parse.unquote(page.url.split("#!", 1)[1]))
        finally:
            browser.close()
    check_picture(picture, box, float(state["crossSectionScale"]))


def check_picture(path: Path, box: Any, scale: float) -> None:
    """The panel's centre shows the middle slice: bright inside the sphere, dark in the box
    around it (``scale``: level-0 voxels per screen pixel)."""
    from PIL import Image

    gray = np.asarray(Image.open(path).convert("L"), dtype=np.float64)
    cy, cx = box["y"] + box["height"] / 2, box["x"] + box["width"] / 2
    yy, xx = np.mgrid[:gray.shape[0], :gray.shape[1]]
    in_panel = ((yy >= box["y"]) & (yy < box["y"] + box["height"])
                & (xx >= box["x"]) & (xx < box["x"] + box["width"]))
    r = np.hypot(yy - cy, xx - cx)
    radius, half_box = RADIUS / scale, N / 2 / scale
    inside = in_panel & (r < 0.6 * radius)
    outside = in_panel & (r > 1.2 * radius) & (np.maximum(abs(yy - cy), abs(xx - cx))
                                                < 0.9 * half_box)
    assert inside.sum() > 500 and outside.sum() > 200, (inside.sum(), outside.sum())
    centre = gray[in_panel & (r < 20)]
    assert centre.std() > 0 or centre.mean() > 0, "the centre is blank"
    mean_in, mean_out = gray[inside].mean(), gray[outside].mean()
    assert mean_in > 180 and mean_out < 60 and mean_in - mean_out > 150, (mean_in, mean_out)


def test_jnrrd_view_in_a_real_browser(tmp_path: Path) -> None:
    pytest.importorskip("playwright", reason="in the test extra")
    pytest.importorskip("neuroglancer", reason="in the test extra")
    chromium()
    path = tmp_path / "sphere.jnrrd"
    jnrrd.write(path, sphere_volume(), HEADER, tile=32, levels=LEVELS, compression="zstd")
    view = View(str(path))
    try:
        drive(view, tmp_path)
    finally:
        log = view.close()
    served = [line for line in log.splitlines() if "/c/" in line and " 200 " in line]
    assert served and all(line.endswith(" stored") for line in served)


def test_jnrrd_view_of_a_file_on_s3_in_a_real_browser(tmp_path: Path, s3: Any) -> None:
    pytest.importorskip("playwright", reason="in the test extra")
    pytest.importorskip("neuroglancer", reason="in the test extra")
    chromium()
    url = s3.url("sphere.jnrrd")
    jnrrd.write(url, sphere_volume(), HEADER, tile=32, levels=LEVELS, compression="zstd",
                storage_options=s3.storage_options)
    options = s3.storage_options
    view = View(url, "--storage-option", f"key={options['key']}",
                "--storage-option", f"secret={options['secret']}",
                "--storage-option", f"endpoint_url={options['endpoint_url']}",
                "--storage-option", f"client_kwargs={json.dumps(options['client_kwargs'])}")
    try:
        drive(view, tmp_path)
    finally:
        view.close()
    assert any("sphere.jnrrd" in r.path for r in s3.server.records)


def screenshot_of(server: Any, shots: Path, name: str) -> tuple[np.ndarray, Any]:
    """Open ``server``'s viewer, wait until the chunk requests settle, take the picture;
    the picture (RGB) and the first panel's box."""
    from PIL import Image
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), headless=True,
                                    args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(str(server.viewer_url), timeout=TIMEOUT * 1000)
            panel = page.locator(".neuroglancer-rendered-data-panel").first
            panel.wait_for(timeout=TIMEOUT * 1000)
            deadline = time.monotonic() + TIMEOUT
            seen = -1
            while time.monotonic() < deadline:  # until no new request for 1.5 s
                page.wait_for_timeout(1500)
                count = len(server.requests)
                if count == seen and any("/c/" in r.path for r in server.requests):
                    break
                seen = count
            page.wait_for_timeout(1000)  # the last chunks drawn
            box = panel.bounding_box()
            page.screenshot(path=str(shots / f"{name}.png"))
        finally:
            browser.close()
    return np.asarray(Image.open(shots / f"{name}.png").convert("RGB"), dtype=np.int32), box


def panel_pixels(picture: np.ndarray, box: Any) -> np.ndarray:
    x0, y0 = int(box["x"]) + 2, int(box["y"]) + 2
    return picture[y0:int(box["y"] + box["height"]) - 2, x0:int(box["x"] + box["width"]) - 2]


def test_colour_labels_and_the_3d_layout_in_a_real_browser(tmp_path: Path) -> None:
    pytest.importorskip("playwright", reason="in the test extra")
    pytest.importorskip("neuroglancer", reason="in the test extra")
    chromium()
    from test_web_viewer import label_file, rgb_file

    # RGB: the two halves in red and green, not one channel in grey
    with jnrrd.serve(rgb_file(tmp_path / "rgb.jnrrd"), viewer=True, layout="xy") as s:
        picture, box = screenshot_of(s, tmp_path, "rgb")
    px = panel_pixels(picture, box).reshape(-1, 3)
    red = (px[:, 0] > 200) & (px[:, 1] < 60) & (px[:, 2] < 60)
    green = (px[:, 1] > 200) & (px[:, 0] < 60) & (px[:, 2] < 60)
    assert red.sum() > 2000 and green.sum() > 2000, (red.sum(), green.sum())
    # a label map: labels 2 and 7 in two different colours
    with jnrrd.serve(label_file(tmp_path / "lab.jnrrd"), viewer=True, layout="xy") as s:
        picture, box = screenshot_of(s, tmp_path, "labels")
    px = panel_pixels(picture, box)
    cy, cx = px.shape[0] // 2, px.shape[1] // 2
    top, bottom = px[cy - px.shape[0] // 4, cx], px[cy + px.shape[0] // 4, cx]
    assert np.abs(top - bottom).max() > 60, (top, bottom)
    assert all(int(c.max()) - int(c.min()) > 60 for c in (top, bottom)), (top, bottom)
    # the 3d layout: chunks asked for and the sphere rendered, bright in the panel's middle
    path = tmp_path / "sphere.jnrrd"
    jnrrd.write(path, sphere_volume()[::4, ::4, ::4].copy(), HEADER, tile=16, levels=2)
    with jnrrd.serve(path, viewer=True, layout="3d") as s:
        picture, box = screenshot_of(s, tmp_path, "3d")
        assert any("/c/" in r.path and r.status == 200 for r in s.requests)
    px = panel_pixels(picture, box).mean(axis=2)
    cy, cx = px.shape[0] // 2, px.shape[1] // 2
    assert px[cy - 10:cy + 10, cx - 10:cx + 10].mean() > 120
    assert px[:10, :10].mean() < 40  # the background
