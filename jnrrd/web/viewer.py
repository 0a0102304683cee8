"""The neuroglancer client of ``jnrrd view``, served beside the store (docs/web-view.md).

The ``neuroglancer`` Python package (``pip install neuroglancer``) ships its web client
as static files (``neuroglancer/static/client``). That build expects to be served at
``/v/<token>/`` by neuroglancer's own Python server, with a server-sent-event channel at
``/events/<token>`` through which that server pushes state. Here the viewer's state comes
from the URL fragment instead (``#!{...}``, which the client reads and keeps up to date), so
the channel is only held open, silent (:meth:`Viewer.is_events`); the package is located,
never imported, and its Python server is not used.

The client's page, ``/v/jnrrd/`` (``/view`` redirects there), gets one script first in its
head (:func:`launcher_script`): when the URL has no state yet, it builds it with the store's
URL *as the browser sees it* (so the link works through SSH port forwarding or a reverse
proxy) and writes it into the fragment before the client starts. The state: one image layer
``zarr3://<store>`` (neuroglancer reads the OME-Zarr 0.5 multiscales: voxel size, units and
the pyramid), the dimensions in header axis order (``x`` fastest) with their voxel size and
unit, the position at the volume's centre (the middle of each axis), a contrast window from
the coarsest level's middle slice (:func:`contrast_window`), and a zoom that fits the volume
to the browser's window, computed by the page (neuroglancer then asks for the level whose
voxels match the screen's pixels, and for the coarser ones as stand-ins while they load).
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ArgumentError, MissingDependencyError, where

__all__ = ["LAYOUTS", "TOKEN", "VIEWER_TYPES", "Viewer", "client_dir", "client_page",
           "contrast_window", "dimension_names", "launcher_script", "viewer_state"]

#: the path segment the client derives its server's URLs from (``/v/<token>/``)
TOKEN = "jnrrd"
#: element types neuroglancer's image layers read (others are shown as float32)
VIEWER_TYPES = frozenset({"uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64",
                          "float32"})
LAYOUTS = ("4panel", "xy", "xz", "yz", "3d", "xy-3d", "xz-3d", "yz-3d")
#: the height (pixels) of neuroglancer's top bar and layer bar
_BARS = 50
#: room around the fitted volume
_MARGIN = 1.1
_NAME = re.compile(r"[a-z0-9][A-Za-z0-9_.-]*\.(?:js|css|wasm|html|map)")
_TYPES = {".js": "application/javascript", ".css": "text/css", ".wasm": "application/wasm",
          ".html": "text/html; charset=utf-8", ".map": "application/json"}
#: OME-NGFF (UDUNITS-2) unit names → (factor, neuroglancer's base unit)
_SI = {
    "angstrom": (1e-10, "m"), "picometer": (1e-12, "m"), "nanometer": (1e-9, "m"),
    "micrometer": (1e-6, "m"), "millimeter": (1e-3, "m"), "centimeter": (1e-2, "m"),
    "decimeter": (1e-1, "m"), "meter": (1.0, "m"), "kilometer": (1e3, "m"),
    "inch": (0.0254, "m"), "foot": (0.3048, "m"),
    "nanosecond": (1e-9, "s"), "microsecond": (1e-6, "s"), "millisecond": (1e-3, "s"),
    "second": (1.0, "s"), "minute": (60.0, "s"), "hour": (3600.0, "s"),
}
_SHADER = "#uicontrol invlerp normalized\nvoid main() {\n  emitGrayscale(normalized());\n}\n"
_RGB_SHADER = ("#uicontrol invlerp normalized\nvoid main() {\n  emitRGB(vec3(normalized("
               "getDataValue(0)), normalized(getDataValue(1)), normalized(getDataValue(2))));\n}\n")


def dimension_names(names: Sequence[str]) -> list[str]:
    """Axis names as neuroglancer takes them (a letter, then letters, digits or ``_``):
    other characters become ``_``, a name not starting with a letter gets a ``d`` before
    it, repeats get ``_2``, ``_3``, ... (``"left-right"`` → ``"left_right"``)."""
    out: list[str] = []
    for name in names:
        new = re.sub(r"[^A-Za-z0-9_]", "_", name)
        if not re.match(r"[A-Za-z]", new):
            new = "d" + new
        base, k = new, 2
        while new in out:
            new, k = f"{base}_{k}", k + 1
        out.append(new)
    return out


def client_dir() -> Path:
    """The directory of neuroglancer's built client, found without importing the package;
    :class:`~jnrrd.errors.MissingDependencyError` when it is not installed."""
    spec = importlib.util.find_spec("neuroglancer")
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    for root in roots:
        path = Path(root) / "static" / "client"
        if (path / "index.html").is_file():
            return path
    raise MissingDependencyError(
        "jnrrd view needs neuroglancer's web client, which the neuroglancer package ships: "
        "pip install neuroglancer (jnrrd's viewer extra; in a source checkout: "
        "pip install -e \".[viewer]\")")


class Viewer:
    """The viewer's routes: ``/v/jnrrd/`` (the client's page with the view's state),
    ``/v/jnrrd/<file>`` (the client's files, a fixed list read at start), ``/view`` (a
    redirect to the page) and ``/events/jnrrd`` (the held-open channel)."""

    entry = f"v/{TOKEN}/"

    def __init__(self, state: dict[str, Any], extent: Sequence[float],
                 root: Path | None = None) -> None:
        self.root = client_dir() if root is None else root
        self.files = {p.name: p for p in self.root.iterdir()
                      if p.is_file() and _NAME.fullmatch(p.name)}
        self._cache: dict[str, bytes] = {}
        self.page = client_page((self.root / "index.html").read_bytes(),
                                launcher_script(state, extent))

    def is_events(self, path: str) -> bool:
        return path == f"/events/{TOKEN}"

    def redirect(self, path: str) -> str | None:
        """The relative ``Location`` for a short path (``/view``, the page's path without
        its last slash), else ``None``."""
        if path == "/view":
            return self.entry
        return f"{TOKEN}/" if path == "/" + self.entry.rstrip("/") else None

    def get(self, path: str) -> tuple[str, bytes, str] | None:
        """``(content type, body, cache-control)`` of a viewer path, else ``None``."""
        prefix = "/" + self.entry
        if not path.startswith(prefix):
            return None
        name = path[len(prefix):] or "index.html"
        if name == "index.html":
            return _TYPES[".html"], self.page, "no-cache"
        file = self.files.get(name)
        if file is None:
            return None
        body = self._cache.get(name)
        if body is None:
            body = self._cache.setdefault(name, file.read_bytes())
        # the bundles' names carry their content hash (index.html names them)
        return _TYPES[Path(name).suffix], body, "max-age=86400"


def client_page(index: bytes, script: str) -> bytes:
    """neuroglancer's ``index.html`` with ``script`` first in its head: it runs before the
    client's deferred bundles read the URL fragment."""
    tag = f"<script>\n{script}</script>".encode()
    at = index.find(b"<head>")
    at = 0 if at < 0 else at + len(b"<head>")
    return index[:at] + tag + index[at:]


def launcher_script(state: dict[str, Any], extent: Sequence[float]) -> str:
    """The script that opens the view when the page has no state in its fragment yet: the
    layer pointed at the store two levels up from the page (the store's URL as the browser
    sees it), the volume's ``extent`` (canonical voxels along the displayed axes) fitted to
    the window, the state written into the fragment without a new navigation."""
    # "<" escaped: nothing in the JSON can end the script element
    text = json.dumps(state, separators=(",", ":")).replace("<", "\\u003c")
    halves = {"4panel": (2, 2), "xy-3d": (2, 1), "xz-3d": (2, 1), "yz-3d": (2, 1)}
    across, down = halves.get(state["layout"], (1, 1))
    return (
        "if (!window.location.hash) {\n"
        f"  const state = {text};\n"
        f"  const extent = {json.dumps([float(e) for e in extent])};\n"
        "  const store = new URL('../../', window.location.href).href;\n"
        "  for (const layer of state.layers) {\n"
        "    if (typeof layer.source === 'string') layer.source = 'zarr3://' + store;\n"
        "    else layer.source.url = 'zarr3://' + store;\n"
        "  }\n"
        # the panels' size: the window less neuroglancer's two bars, split by the layout
        f"  const w = Math.max(64, window.innerWidth / {across});\n"
        f"  const h = Math.max(64, (window.innerHeight - {_BARS}) / {down});\n"
        "  const fit = Math.max(...extent.map(e => e / Math.min(w, h)));\n"
        f"  state.crossSectionScale = Number((fit * {_MARGIN}).toPrecision(4));\n"
        "  history.replaceState(null, '', '#!' + encodeURIComponent(JSON.stringify(state)));\n"
        "}\n"
    )


def viewer_state(store: Any, *, name: str, layout: str = "4panel"
                 ) -> tuple[dict[str, Any], list[float]]:
    """The neuroglancer state of a :class:`~jnrrd.web.store.ZarrStore` (see the module
    docstring) and the volume's extent along the displayed axes in canonical voxels (the
    launcher page fits it to the window and fills in the layer's ``source``)."""
    if layout not in LAYOUTS:
        raise ArgumentError(f"layout {layout!r}: expected one of {', '.join(LAYOUTS)}")
    group = json.loads(store.documents["zarr.json"])
    ms = group["attributes"]["ome"]["multiscales"][0]
    axes = ms["axes"][::-1]  # header order: x (fastest) first
    first = ms["datasets"][0]["coordinateTransformations"]
    scale0 = first[0]["scale"][::-1]
    trans0 = first[1]["translation"][::-1] if len(first) > 1 else [0.0] * len(axes)
    shape0 = store.arrays[0].shape
    colour = colour_axis(store)
    units: list[list[Any]] = []
    dims: dict[str, list[Any]] = {}
    position = []
    for d, axis in enumerate(axes):
        factor, unit = _SI.get(axis.get("unit") or "", (1.0, ""))
        step = scale0[d] if scale0[d] else 1.0
        units.append([step * factor, unit])
        if d == colour:  # a channel dimension of the layer, not a global one
            continue
        dims[axis["name"]] = units[d]
        # the centre of the middle voxel (neuroglancer's voxel i spans [i, i + 1))
        position.append(trans0[d] / step + shape0[d] // 2 + 0.5)
    domain = [d for d in range(len(axes)) if d != colour]
    shown = domain[:3]
    steps = [units[d][0] for d in shown]
    extent = [shape0[d] * steps[i] / min(steps) for i, d in enumerate(shown)]
    if len(shown) < 3:
        if layout == "4panel":
            layout = "xy"
        elif layout not in ("xy", "3d", "xy-3d"):
            raise ArgumentError(f"{where(store.vol.name)}layout {layout!r}: the volume has "
                                f"{len(shown)} displayed axes; a 2-D image shows in xy, 3d "
                                "or xy-3d")
    state = {
        "dimensions": dims,
        "position": position,
        "crossSectionScale": 1.0,
        # the 3-D view's height in canonical voxels: the volume's diagonal, with a margin
        "projectionScale": float(f"{_MARGIN * math.hypot(*extent):.4g}"),
        "layers": [_layer(store, name, layout, colour, [a["name"] for a in axes], units)],
        "selectedLayer": {"layer": name},
        "layout": layout,
    }
    return state, extent


def colour_axis(store: Any) -> int | None:
    """The header axis of an RGB or RGBA colour axis (kinds ``RGB-color``, ``RGBA-color``,
    3 or 4 values), shown in colour; ``None`` without one."""
    from ..tiling.kinds import axis_kinds

    shape = store.arrays[0].shape
    kinds = axis_kinds(store.vol.header, len(shape))
    found = [d for d, k in enumerate(kinds)
             if k in ("rgb_color", "rgba_color") and shape[d] in (3, 4)]
    return found[0] if len(found) == 1 and len(shape) >= 3 else None


def is_labels(store: Any) -> bool:
    """Whether the volume is a label map (``jnrrd.clinical.labels.is_label_map``) that
    neuroglancer shows as a segmentation (an integer type)."""
    from ..clinical.labels import is_label_map

    return store.dtype.kind in "ui" and is_label_map(store.vol.header, store.vol.dtype)


def _layer(store: Any, name: str, layout: str, colour: int | None, names: list[str],
           units: list[list[Any]]) -> dict[str, Any]:
    """The layer: a segmentation for a label map, an image otherwise (in colour across an
    RGB axis; volume rendered in the ``3d`` layout, where there are no planes)."""
    import numpy as np

    if is_labels(store):
        return {"type": "segmentation", "source": "", "name": name}
    lo, hi = contrast_window(store)
    layer: dict[str, Any] = {"type": "image", "source": "", "name": name, "shader": _SHADER,
                             "shaderControls": {"normalized": {"range": [lo, hi]}}}
    if colour is not None:
        # the colour axis as the layer's channel dimension (a name ending in "^"): the
        # shader reads its values; the source's dimensions are listed in its (C) order
        out = {(n + "^" if d == colour else n): units[d] if d != colour else [1, ""]
               for d, n in reversed(list(enumerate(names)))}
        layer["source"] = {"url": "", "transform": {"outputDimensions": out}}
        layer["shader"] = _RGB_SHADER
        if store.dtype.kind in "ui":  # colours over the type's range, not a window
            layer["shaderControls"] = {"normalized": {"range": [0, int(np.iinfo(
                store.dtype).max)]}}
    if layout == "3d":
        layer["volumeRendering"] = "on"
    return layer


def contrast_window(store: Any) -> tuple[float, float]:
    """The window the layer opens with: from the lower to the upper of the 0.5th and 99.5th
    percentiles of two samples, the coarsest level's middle plane (across the first two axes:
    the whole volume's range) and level 0's chunk at the centre (the full resolution's
    variation, which averaging into coarser levels narrows: noise would saturate)."""
    import numpy as np

    lows, highs = [], []
    for sample in (store.middle_plane(), store.centre_chunk(0)):
        if sample is None:
            continue
        values = np.asarray(sample, dtype=np.float64).ravel()
        values = values[np.isfinite(values)]
        if values.size:
            lo_, hi_ = np.percentile(values, [0.5, 99.5])
            lows.append(float(lo_))
            highs.append(float(hi_))
    if not lows:
        return 0.0, 1.0
    lo, hi = min(lows), max(highs)
    if not hi > lo:
        hi = lo + 1.0
    return _round(lo), _round(hi)


def _round(v: float) -> float:
    return float(f"{v:.6g}") if math.isfinite(v) else 0.0
