"""Preview pictures: three orthogonal mid-slices (or maximum projections) of a volume as one
RGB picture, and a dependency-free PNG writer (``jnrrd preview``, :meth:`jnrrd.Volume.preview`).

- :mod:`.plan` decides what is shown (axes, level, pixels per axis; no I/O),
- :mod:`.render` reads the views from the chosen level and lays them out,
- :mod:`.colour` turns values into colours (percentile window, label palette, RGB),
- :mod:`.png` writes the picture.

This package uses the public ``Volume``/``LevelView`` interface only (it never imports
:mod:`jnrrd.engine`): ``Volume.preview`` imports it, not the other way round.
"""

from __future__ import annotations

from .png import encode_png, write_png
from .render import render_preview

__all__ = ["encode_png", "render_preview", "write_png"]
