"""Editable volumes (docs/editing.md): ``jnrrd.create``, ``jnrrd.open(..., mode="r+")``,
region writes, appends, resizes, atomic commits, one writer at a time, ``jnrrd.compact``.

- :mod:`.consistent` — reading a committed header: its own checksum, the journal of an
  interrupted in-place commit (imported by the readers: nothing else of this package is);
- :mod:`.tables` — where each stored tile of each level is, and what changed since the last
  commit;
- :mod:`.pyramid` — which level tiles a change reaches, rebuilt from level 0;
- :mod:`.internal`, :mod:`.external` — the two layouts' commits;
- :mod:`.reshape` — what a resize changes: level grids, edge tiles, pyramid regions;
- :mod:`.session` — what a writable volume writes through, and its decoder's tile source;
- :mod:`.headers`, :mod:`.layout`, :mod:`.info` — a commit's header, the layouts'
  interface, dead bytes;
- :mod:`.ahead` — changed tiles encoded ahead of the commit;
- :mod:`.patches` — partial writes to tiles not read yet, merged when needed;
- :mod:`.volume` — :class:`~jnrrd.editing.volume.WritableVolume`;
- :mod:`.entry` — ``create``, ``open`` in mode ``"r+"``, ``compact``.

This module imports nothing, so the readers can import :mod:`.consistent` without pulling
in the writer.
"""
