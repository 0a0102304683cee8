"""A pytest plugin: every ``.jnrrd`` file written through ``jnrrd.write`` must validate clean.

An autouse fixture wraps ``jnrrd.write`` wherever the test suite can reach it (the package
facade, ``jnrrd.writing.dispatch`` and any module of this repository that imported the function by
name). After each successful write to a ``.jnrrd`` path the file is validated at once, so a
test that damages the file afterwards on purpose is checked before the damage. Any problem
of severity ``"error"`` fails the test. The path policy is relaxed for this check (absolute
paths, parent directories): a test may write a dataset that is read back with those opt-ins.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import jnrrd
import jnrrd.writing.dispatch
from jnrrd.validation import validate

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_ORIGINAL: Callable[..., None] = jnrrd.writing.dispatch.write
_MARKER = "__validates_written__"


def check_written(target: Any, storage_options: dict[str, Any] | None = None) -> None:
    """Fail the running test when the ``.jnrrd`` file at ``target`` (a path or a URL with
    its ``storage_options``) has an error."""
    if not isinstance(target, (str, os.PathLike)) or not os.fspath(target).endswith(".jnrrd"):
        return
    extra: dict[str, Any] = {}
    if storage_options:
        if "storage_options" not in inspect.signature(validate).parameters:
            return  # a URL that needs options, and a validate that cannot take them yet
        extra["storage_options"] = storage_options
    problems = validate(target, allow_absolute=True, allow_parent=True, **extra)
    bad = [p for p in problems if p.severity == "error"]
    if bad:
        lines = "\n".join(f"  {p.field or '(file)'}: {p.message}" for p in bad)
        pytest.fail(f"jnrrd.write produced a file that does not validate: {target}\n{lines}",
                    pytrace=False)


def _wrapped(write: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(write)
    def write_and_validate(target: Any, *args: Any, **kwargs: Any) -> None:
        write(target, *args, **kwargs)
        check_written(target, kwargs.get("storage_options"))

    setattr(write_and_validate, _MARKER, True)
    return write_and_validate


def _holders() -> Iterator[tuple[Any, str]]:
    """(module, attribute) pairs holding the original ``write`` in this repository's code."""
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not (name == "jnrrd" or name.startswith("jnrrd.")) and not (
            isinstance(path, str) and os.path.abspath(path).startswith(_ROOT + os.sep)
        ):
            continue
        for attr, value in list(vars(module).items()):
            if value is _ORIGINAL:
                yield module, attr


@pytest.fixture(autouse=True)
def _validate_written(monkeypatch: pytest.MonkeyPatch) -> None:
    wrapper = _wrapped(_ORIGINAL)
    for module, attr in _holders():
        monkeypatch.setattr(module, attr, wrapper)
