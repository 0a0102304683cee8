"""Clinical on-ramps: DICOM series and SEG (pydicom), NIfTI (nibabel), SimpleITK images, label
maps and queries in world (patient) coordinates. docs/clinical.md describes them.

The submodules import their optional packages only when called, so importing this package
costs nothing; a missing package is a :class:`~jnrrd.errors.MissingDependencyError` naming
the extra to install (``jnrrd[dicom]``, ``jnrrd[nifti]``, ``jnrrd[itk]``).
"""

from __future__ import annotations

__all__: list[str] = []
