"""Load the bundled JSON Schemas (docs/validation.md#what-is-checked).

The schemas live in the repository's top-level ``schemas/`` folder and ship inside the wheel
as ``jnrrd/schemas/``. Installed package data is tried first; an editable install falls back
to the source tree. This module imports nothing else from jnrrd, so codecs and header
validation can both use it.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["load_schema", "schema_names", "validator"]

_SOURCE_TREE = Path(__file__).resolve().parent.parent / "schemas"


def _root() -> Any:
    packaged = resources.files("jnrrd") / "schemas"
    if packaged.is_dir():
        return packaged
    return _SOURCE_TREE


def schema_names() -> list[str]:
    """Relative names (``"jnrrd.schema.json"``, ``"codecs/zstd.schema.json"``) of all schemas."""
    names: list[str] = []

    def walk(node: Any, prefix: str) -> None:
        for child in node.iterdir():
            if child.is_dir():
                walk(child, prefix + child.name + "/")
            elif child.name.endswith(".json"):
                names.append(prefix + child.name)

    walk(_root(), "")
    return sorted(names)


@cache
def load_schema(name: str) -> dict[str, Any]:
    """Return the parsed schema ``name`` (e.g. ``"codecs/pad.schema.json"``)."""
    node = _root()
    for part in name.split("/"):
        node = node / part
    return json.loads(node.read_text(encoding="utf-8"))


@cache
def validator(name: str) -> Any:
    """A cached ``Draft7Validator`` for schema ``name``."""
    from jsonschema import Draft7Validator

    return Draft7Validator(load_schema(name))
