"""Helpers of the editing tests (docs/editing.md): the pyramid a fresh write would store,
and the check that a file on disk equals a NumPy model at every level and validates deep."""

from __future__ import annotations

from typing import Any

import numpy as np

import jnrrd
from jnrrd.pyramid import downsample


def levels_of(model: np.ndarray, nlevels: int, method: str = "average",
              axes: tuple[int, ...] | None = None) -> list[np.ndarray]:
    """Level 0 .. nlevels-1 of ``model`` with scales 2**k on ``axes`` (default: all)."""
    axes = tuple(range(model.ndim)) if axes is None else axes
    return [model if k == 0 else downsample(
        model, [2**k if a in axes else 1 for a in range(model.ndim)], method)
        for k in range(nlevels)]


def assert_file_equals(target: Any, model: np.ndarray, nlevels: int, method: str = "average",
                       *, storage_options: dict[str, Any] | None = None,
                       deep: bool = True) -> None:
    """The file at ``target`` holds ``model`` (level 0) and its pyramid exactly, and
    validates without errors (``deep``: every tile decoded)."""
    options = {"storage_options": storage_options} if storage_options else {}
    with jnrrd.open(target, **options) as vol:
        assert vol.shape == model.shape
        assert len(vol.levels) == nlevels
        for k, want in enumerate(levels_of(model, nlevels, method)):
            got = vol.levels[k][...]
            assert got.shape == want.shape, (k, got.shape, want.shape)
            np.testing.assert_array_equal(got, want, err_msg=f"level {k}")
    errors = [p for p in jnrrd.validate(target, deep=deep, **options) if p.severity == "error"]
    assert errors == []
