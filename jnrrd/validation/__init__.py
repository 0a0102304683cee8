"""``jnrrd.validation``: every problem of a JNRRD or NRRD header or file, not just the first.

The public names are :func:`validate` (also ``jnrrd.validate``), :class:`Problem` (also
``jnrrd.Problem``) and :func:`run_validate` (the ``jnrrd validate`` command's loop), all from
:mod:`.api`. The pieces behind them: a problem report (:mod:`.report`), the bundled-schema
checks (:mod:`.schema`), the cross-field checks of the core and tiling fields (:mod:`.core`,
:mod:`.tiling`) and the deep, per-tile checks (:mod:`.deep`). Each checker collects every
problem it finds into a :class:`~.report.Report` instead of stopping at the first, so one run
lists everything wrong with a file (docs/validation.md).
"""

from __future__ import annotations

from .api import Problem, run_validate, validate

__all__ = ["Problem", "run_validate", "validate"]
