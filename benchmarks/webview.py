"""``jnrrd view`` in a real browser: time to the first chunk and to the first picture of data,
and the bytes moved, for the 512³ volume locally and behind a 20 ms-per-request HTTP server.

    python benchmarks/webview.py [--size 512] [--repeat 3] [--latency-ms 20] [--keep]

Needs headless Chromium (Debian: ``apt-get install chromium``), Playwright and neuroglancer
(``pip install -e ".[test]"``), and zarr for the peer. The data: the CT-like uint16 volume of
``_volume.py`` as ``ct.jnrrd`` (internal 64³ zstd-3 tiles, a 3-level pyramid, as in
``remote.py``), and the same three levels as an OME-Zarr 0.5 group written by zarr-python
(``ct.zarr``: the same 64³ chunks, ``bytes`` + ``zstd`` level 3, the same metadata).

Cases, each repetition in a fresh browser context (empty HTTP cache, fresh neuroglancer),
interleaved (A B C D A B C D ...), viewport 1280×800, neuroglancer's default 4-panel layout:

- ``jnrrd view, local file``: ``python -m jnrrd view ct.jnrrd --no-browser --log``;
- ``jnrrd view, http +N ms``: the same with ``http://.../ct.jnrrd`` served by
  ``tests/http_server.py`` in its own process with N ms of latency before every answer;
- ``static OME-Zarr, +0 ms`` and ``+N ms`` (the peers): ``ct.zarr`` served as plain files
  (a threaded ``http.server`` with CORS, the same latency), opened in the same neuroglancer
  client with the same view (the state ``jnrrd view`` builds, pointed at the files).

Times (medians, seconds): ``start→url`` (process start to the printed URL), ``start→chunk``
and ``start→data`` (to the first chunk answered and to the first screenshot whose xy panel
shows data: over half of its central region away from the empty panel's grey), and
``open→chunk``, ``open→data`` from the browser's navigation (the only ones a peer has; the
ratios compare these). Bytes: ``served/asked`` is the chunk bytes the jnrrd server sent over
the stored bytes of the tiles neuroglancer asked for (1.00 when every chunk is a stored tile);
``upstream/asked`` (http case) is every byte the upstream server sent to ``jnrrd view``
(header, the contrast window's tiles, the chunks) over the same stored bytes. Target:
``upstream/asked`` ≤ 1.05. Shared machines make the times noisy: rerun on a quiet one.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _volume
from remote import HttpServer  # tests/http_server.py in its own process

VIEWPORT = {"width": 1280, "height": 800}
LEVELS = 3
TILE = 64
TIMEOUT = 120.0
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--use-angle=swiftshader", "--enable-unsafe-swiftshader"]
#: neuroglancer's empty slice view is this grey; data is "shown" when over half of the panel's
#: central region is farther from it than this
EMPTY_GREY, SHOWN = 128.0, 16.0


# -- data ---------------------------------------------------------------------------------
def build(root: Path, size: int) -> None:
    import zarr
    from zarr.codecs import ZstdCodec

    import jnrrd

    arr = _volume.ct_volume(size)
    path = root / "ct.jnrrd"
    jnrrd.write(path, arr.T, tile=(TILE,) * 3, compression="zstd", compression_level=3,
                levels=LEVELS)
    with jnrrd.serve(path) as s:  # the OME metadata exactly as served
        import urllib.request
        with urllib.request.urlopen(s.url + "zarr.json") as answer:
            attributes = json.loads(answer.read())["attributes"]
    group = zarr.open_group(str(root / "ct.zarr"), mode="w", zarr_format=3)
    group.attrs.update(attributes)
    for k in range(LEVELS):
        data = jnrrd.read(path, level=k, index_order="C")[0]
        z = group.create_array(str(k), shape=data.shape, chunks=(TILE,) * 3, dtype=data.dtype,
                               compressors=[ZstdCodec(level=3)], fill_value=0,
                               dimension_names=[a["name"] for a in
                                                attributes["ome"]["multiscales"][0]["axes"]])
        z[...] = data


class StaticFiles:
    """The peer: a directory as plain files over HTTP (CORS ``*``, latency before every
    answer), with a request log ``(seconds, path, status, bytes)``."""

    def __init__(self, root: Path, latency: float) -> None:
        self.latency, self.t0 = latency, time.monotonic()
        self.log: list[tuple[float, str, int, int]] = []
        owner = self

        class Handler(SimpleHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def end_headers(self) -> None:
                self.send_header("Access-Control-Allow-Origin", "*")
                self.send_header("Cache-Control", "no-cache")
                super().end_headers()

            def send_head(self) -> Any:
                if owner.latency:
                    time.sleep(owner.latency)
                return super().send_head()

            def log_request(self, code: Any = "-", size: Any = "-") -> None:
                path = Path(self.translate_path(self.path))
                n = path.stat().st_size if path.is_file() and str(code) == "200" else 0
                owner.log.append((time.monotonic() - owner.t0, self.path, int(code), n))

            def log_message(self, *args: Any) -> None:
                pass

        handler = functools.partial(Handler, directory=str(root))
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def reset(self) -> None:
        self.log, self.t0 = [], time.monotonic()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# -- one run ------------------------------------------------------------------------------
def shown(png: bytes) -> bool:
    """Whether a screenshot of the xy panel shows data (see the module docstring)."""
    import io

    from PIL import Image

    grey = np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=np.float64)
    h, w = grey.shape
    centre = grey[h // 4: 3 * h // 4, w // 4: 3 * w // 4]
    return bool((np.abs(centre - EMPTY_GREY) > SHOWN).mean() > 0.5)


def watch(page: Any, t_open: float) -> dict[str, float]:
    """Poll the xy panel until it shows data; the times from navigation."""
    panel = page.locator(".neuroglancer-rendered-data-panel").first
    deadline = time.monotonic() + TIMEOUT
    panel.wait_for(timeout=TIMEOUT * 1000)
    while time.monotonic() < deadline:
        box = panel.bounding_box()
        if box and shown(page.screenshot(clip=box)):
            return {"open→data": time.monotonic() - t_open}
        time.sleep(0.05)
    raise RuntimeError("no data on screen")


def settle(log_len: Any, quiet: float = 2.0) -> None:
    """Wait until the log has not grown for ``quiet`` seconds (bounded)."""
    deadline, last, since = time.monotonic() + 60, -1, time.monotonic()
    while time.monotonic() < deadline:
        n = log_len()
        if n != last:
            last, since = n, time.monotonic()
        elif time.monotonic() - since > quiet:
            return
        time.sleep(0.1)


def run_jnrrd(browser: Any, source: str, sizes: dict[str, int],
              upstream: HttpServer | None) -> dict[str, float]:
    if upstream is not None:
        upstream.reset()
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "jnrrd", "view", source, "--no-browser",
                             "--log"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines: list[tuple[float, str]] = []

    def read() -> None:
        for line in proc.stderr:  # type: ignore[union-attr]
            lines.append((time.monotonic() - t0, line.rstrip("\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        url = proc.stdout.readline().strip()  # type: ignore[union-attr]
        out = {"start→url": time.monotonic() - t0}
        context = browser.new_context(viewport=VIEWPORT)
        page = context.new_page()
        t_open = time.monotonic()
        page.goto(url, timeout=TIMEOUT * 1000)
        out.update(watch(page, t_open))
        out["start→data"] = out["open→data"] + (t_open - t0)
        settle(lambda: len(lines))
        context.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        reader.join(timeout=10)
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]
    chunks = [(t, line.split()) for t, line in lines if " /" in line and "/c/" in line
              and line.split()[3] == "200"]
    first = min(t for t, _ in chunks)
    asked = {parts[2] for _, parts in chunks}
    stored = sum(sizes[key] for key in asked)
    out.update({"start→chunk": first, "open→chunk": first - (t_open - t0),
                "chunks": float(len(chunks)),
                "served/asked": sum(int(parts[4]) for _, parts in chunks) / stored})
    if upstream is not None:
        out["upstream/asked"] = upstream.counters()["bytes"] / stored
    return out


def run_peer(browser: Any, client: Any, peer: StaticFiles, state: dict[str, Any]
             ) -> dict[str, float]:
    peer.reset()
    view = dict(state, layers=[dict(state["layers"][0], source="zarr3://" + peer.url
                                    + "ct.zarr/")])
    url = client.url + "v/jnrrd/#!" + urllib.parse.quote(json.dumps(view))
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    t_open = time.monotonic()
    peer.t0 = t_open
    page.goto(url, timeout=TIMEOUT * 1000)
    out = watch(page, t_open)
    settle(lambda: len(peer.log))
    context.close()
    chunks = [e for e in peer.log if "/c/" in e[1] and e[2] == 200]
    out.update({"open→chunk": min(e[0] for e in chunks), "chunks": float(len(chunks))})
    return out


def view_state(client: Any) -> dict[str, Any]:
    """The state the /view page builds, with its fitted zoom computed here (same viewport)."""
    import re
    import urllib.request

    with urllib.request.urlopen(client.viewer_url) as answer:
        page = answer.read().decode()
    found = re.search(r"const state = (\{.*\});\n", page)
    sizes = re.search(r"const extent = (\[.*\]);\n", page)
    assert found is not None and sizes is not None, "the page carries no state"
    state, extent = json.loads(found.group(1)), json.loads(sizes.group(1))
    w, h = VIEWPORT["width"] / 2, (VIEWPORT["height"] - 50) / 2  # 4panel: halves
    state["crossSectionScale"] = float(f"{max(extent) / min(w, h) * 1.1:.4g}")
    return state


def tile_sizes(path: Path) -> dict[str, int]:
    """``/<level>/c/<i>/<j>/<k>`` → stored bytes, for every stored tile."""
    import jnrrd

    out = {}
    with jnrrd.open(path, index_order="C") as vol:
        for k, lv in enumerate(vol.levels):
            for coords, loc in lv.tile_locations():
                if loc is not None:
                    out[f"/{k}/c/" + "/".join(map(str, coords))] = loc.size
    return out


# -- main ---------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--latency-ms", type=float, default=20.0)
    ap.add_argument("--keep", action="store_true", help="keep the scratch datasets")
    args = ap.parse_args(argv)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("webview.py needs chromium (Debian: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    import jnrrd

    _volume.CACHE_DIR.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="webview-", dir=_volume.CACHE_DIR))
    ms = args.latency_ms
    print(f"building {args.size}³ in {root} ...", file=sys.stderr)
    build(root, args.size)
    sizes = tile_sizes(root / "ct.jnrrd")
    upstream = HttpServer(root)
    upstream.set_latency(ms / 1000)
    peers = {0.0: StaticFiles(root, 0.0), ms: StaticFiles(root, ms / 1000)}
    client = jnrrd.serve(root / "ct.jnrrd", viewer=True)  # neuroglancer's files for the peers
    state = view_state(client)
    names = ["jnrrd view, local file", "static OME-Zarr, +0 ms",
             f"jnrrd view, http +{ms:g} ms", f"static OME-Zarr, +{ms:g} ms"]
    results: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    try:
        for path in root.rglob("*"):  # warm: this measures serving, not the disk
            if path.is_file():
                path.read_bytes()
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, headless=True, args=FLAGS)
            try:
                for r in range(args.repeat):
                    print(f"repetition {r + 1}/{args.repeat}", file=sys.stderr)
                    results[names[0]].append(
                        run_jnrrd(browser, str(root / "ct.jnrrd"), sizes, None))
                    results[names[1]].append(run_peer(browser, client, peers[0.0], state))
                    results[names[2]].append(
                        run_jnrrd(browser, upstream.url + "/ct.jnrrd", sizes, upstream))
                    results[names[3]].append(run_peer(browser, client, peers[ms], state))
            finally:
                browser.close()
    finally:
        client.close()
        upstream.close()
        for s in peers.values():
            s.close()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    report(results, names, args)


def report(results: dict[str, list[dict[str, float]]], names: list[str],
           args: argparse.Namespace) -> None:
    keys = ["start→url", "start→chunk", "start→data", "open→chunk", "open→data", "chunks",
            "served/asked", "upstream/asked"]
    print(f"\nweb view, {args.size}³ uint16, 64³ zstd-3 tiles, {LEVELS} levels; medians of "
          f"{args.repeat} (seconds; bytes as ratios)")
    print(f"{'case':32s}" + "".join(f"{k:>15s}" for k in keys))
    med: dict[str, dict[str, float]] = {}
    for name in names:
        med[name] = {k: statistics.median(r[k] for r in results[name])
                     for k in keys if all(k in r for r in results[name])}
        print(f"{name:32s}" + "".join(
            f"{med[name][k]:15.3f}" if k in med[name] else f"{'-':>15s}" for k in keys))
    for a, b in ((names[0], names[1]), (names[2], names[3])):
        print(f"{a} / {b}: open→chunk {med[a]['open→chunk'] / med[b]['open→chunk']:.2f}x, "
              f"open→data {med[a]['open→data'] / med[b]['open→data']:.2f}x")
    up = med[names[2]].get("upstream/asked")
    if up is not None:
        print(f"target upstream/asked <= 1.05: {up:.3f} {'met' if up <= 1.05 else 'NOT met'}")


if __name__ == "__main__":
    main()
