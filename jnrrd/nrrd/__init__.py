"""The classic NRRD bridge: read NRRD0001-0005 (``.nrrd``/``.nhdr``), write NRRD0005.

``jnrrd.read``/``read_header``/``open`` recognise the ``NRRD000x`` magic and come here;
``jnrrd.write`` comes here for ``.nrrd``/``.nhdr`` targets. Headers are exchanged in JNRRD
field names; NRRD key/value pairs and comments travel in the declared ``nrrd`` extension
(``NRRD_URI``). The field mapping and every choice made are described in docs/nrrd.md.
"""

from __future__ import annotations

from .fields import NRRD_PREFIX, NRRD_URI
from .reader import open_nrrd, read_nrrd_header
from .writer import render_nrrd_header, write_nrrd

__all__ = [
    "NRRD_PREFIX",
    "NRRD_URI",
    "open_nrrd",
    "read_nrrd_header",
    "render_nrrd_header",
    "write_nrrd",
]
