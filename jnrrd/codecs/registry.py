"""The codec registry: one visible list of built-ins, third parties through entry points.

``get_codec(json)`` normalizes the JSON (a bare name string means no configuration), validates
it against ``schemas/codecs/<name>.schema.json`` through :mod:`jnrrd.schemas` (CONVENTIONS §5),
and builds the codec. Codecs registered at runtime or through the ``jnrrd.codecs`` entry-point
group (loaded lazily, on the first unknown name) are validated by their own constructors.
"""

from __future__ import annotations

import threading
from typing import Any

from ..errors import CodecError, UnknownCodecError
from ..schemas import validator
from ._base import Codec
from .array_array import ScaleOffset, Transpose
from .array_bytes import Bytes
from .bytes_bytes import (
    Bz2,
    Crc32c,
    Gzip,
    Lz4,
    NumcodecsBz2,
    NumcodecsLz4,
    NumcodecsZlib,
    Offset,
    Pad,
    Shuffle,
    Zstd,
)
from .cast_value import CastValue
from .conditional import Conditional

__all__ = ["BUILTIN_CODECS", "ENTRY_POINT_GROUP", "get_codec", "register_codec"]

ENTRY_POINT_GROUP = "jnrrd.codecs"

#: The built-in codecs (CONVENTIONS §2), in the order the roles apply.
BUILTIN_CODECS: list[type[Codec]] = [
    Transpose,
    ScaleOffset,
    CastValue,
    Bytes,
    Gzip,
    Zstd,
    Lz4,
    Bz2,
    NumcodecsLz4,
    NumcodecsBz2,
    NumcodecsZlib,
    Shuffle,
    Crc32c,
    Pad,
    Offset,
    Conditional,
]

_BUILTIN_NAMES = {cls.name: cls for cls in BUILTIN_CODECS}
_ALIASES = {alias: cls.name for cls in BUILTIN_CODECS for alias in cls.aliases}
_registry: dict[str, type[Codec]] = dict(_BUILTIN_NAMES)
_lock = threading.Lock()
_entry_points_loaded = False


def entry_points(*, group: str) -> Any:
    """``importlib.metadata.entry_points``, imported only when a name is unknown (it is slow
    to import, and most programs never need it)."""
    from importlib.metadata import entry_points as found

    return found(group=group)


def register_codec(name: str, cls: type[Codec]) -> None:
    """Register (or replace) the codec class used for ``name``."""
    if not (isinstance(cls, type) and issubclass(cls, Codec)):
        raise CodecError(f"register_codec: {cls!r} is not a Codec subclass")
    with _lock:
        _registry[name] = cls


def _load_entry_points() -> None:
    global _entry_points_loaded
    with _lock:
        if _entry_points_loaded:
            return
        _entry_points_loaded = True
        found = list(entry_points(group=ENTRY_POINT_GROUP))
    for ep in found:
        if ep.name in _registry:
            continue
        try:
            cls = ep.load()
        except Exception as exc:  # a broken plugin must not break other codecs
            raise CodecError(
                f"codec {ep.name!r}: entry point {ep.value!r} failed to load: {exc}"
            ) from exc
        register_codec(ep.name, cls)


def _lookup(name: str) -> type[Codec]:
    name = _ALIASES.get(name, name)
    cls = _registry.get(name)
    if cls is None:
        _load_entry_points()
        cls = _registry.get(name)
    if cls is None:
        raise UnknownCodecError(
            f"unknown codec {name!r}: not built in and no package provides it through the "
            f"{ENTRY_POINT_GROUP!r} entry-point group (install the package that defines it)"
        )
    return cls


def _normalize(data: Any) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(name, configuration, whole object) of codec JSON."""
    if isinstance(data, str):
        return data, {}, {"name": data}
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise CodecError(f"codec JSON {data!r} is not a name or an object with a 'name'")
    config = data.get("configuration", {})
    if not isinstance(config, dict):
        raise CodecError(f"codec {data['name']!r}: configuration is not an object")
    return data["name"], config, data


def _schema_check(name: str, whole: dict[str, Any]) -> None:
    if name not in _BUILTIN_NAMES:
        return
    errors = sorted(validator(f"codecs/{name}.schema.json").iter_errors(whole),
                    key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        path = "/".join(str(p) for p in e.absolute_path) or "(codec)"
        raise CodecError(f"codec {name!r}: {path}: {e.message}")


def get_codec(data: Any, **runtime: Any) -> Codec:
    """Build a codec from Zarr v3 JSON (or return a codec object unchanged).

    ``runtime`` carries non-serialized settings (``decision=``/``trial_encode=`` for
    ``conditional``); codecs that take none ignore them.
    """
    if isinstance(data, Codec):
        if runtime.get("decision") is not None and isinstance(data, Conditional):
            return data.with_decision(runtime["decision"],
                                      trial_encode=runtime.get("trial_encode"))
        return data
    name, config, whole = _normalize(data)
    cls = _lookup(name)
    canonical = cls.name or name
    if canonical != name:
        whole = {**whole, "name": canonical}
    _schema_check(canonical, whole)
    try:
        return cls.from_config(dict(config), **runtime)
    except CodecError:
        raise
    except TypeError as exc:
        # Unknown or missing keys in a third-party configuration.
        raise CodecError(f"codec {name!r}: invalid configuration {config!r}: {exc}") from None
