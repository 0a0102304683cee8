"""The pieces of :func:`jnrrd.validate.validate`: a problem report, the bundled-schema checks,
the cross-field checks of the core and tiling fields, and the deep (per-tile) checks.

Each checker collects every problem it finds into a :class:`~.report.Report` instead of
stopping at the first, so one run lists everything wrong with a file (docs/api.md#validation).
"""
