"""The codec registry: name → codec class; built-ins from ``jnrrd.codecs.BUILTIN_CODECS``,
third parties through :func:`register_codec` or entry points.

``get_codec(json)`` normalizes the JSON (a bare name string means no configuration), validates
it against ``schemas/codecs/<name>.schema.json`` through :mod:`jnrrd.schemas`, and builds the
codec. Codecs registered at runtime or through the ``jnrrd.codecs`` entry-point group (loaded
lazily, on the first unknown name) are validated by their own constructors.
:func:`is_self_delimiting` answers, from the class, whether a chain ending in a codec needs a
``size_table`` (docs/format.md#internal-storage).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from ..errors import CodecError, UnknownCodecError
from ..schemas import validator
from ._base import Codec

__all__ = ["ENTRY_POINT_GROUP", "chain_is_self_delimiting", "get_codec", "is_self_delimiting",
           "register_builtin_codecs", "register_codec"]

ENTRY_POINT_GROUP = "jnrrd.codecs"

# Filled once by jnrrd.codecs from its BUILTIN_CODECS list (this module imports no codec, so
# that codecs which nest others, like conditional, can use get_codec without an import circle).
_BUILTIN_NAMES: dict[str, type[Codec]] = {}
_ALIASES: dict[str, str] = {}
_registry: dict[str, type[Codec]] = {}
_lock = threading.Lock()
_entry_points_loaded = False


def entry_points(*, group: str) -> Any:
    """``importlib.metadata.entry_points``, imported only when a name is unknown (it is slow
    to import, and most programs never need it)."""
    from importlib.metadata import entry_points as found

    return found(group=group)


def register_builtin_codecs(classes: Sequence[type[Codec]]) -> None:
    """Install jnrrd's own codec classes (``jnrrd.codecs`` calls this once with
    ``BUILTIN_CODECS``): their JSON is checked against the bundled schemas, their aliases are
    accepted, and ``register_codec`` may replace them."""
    with _lock:
        for cls in classes:
            _BUILTIN_NAMES[cls.name] = cls
            _ALIASES.update(dict.fromkeys(cls.aliases, cls.name))
            _registry.setdefault(cls.name, cls)


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
        return data.with_runtime(**runtime)
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


def is_self_delimiting(name: str) -> bool:
    """True when the codec registered as ``name`` (built in, registered, or from the
    ``jnrrd.codecs`` entry-point group) declares ``self_delimiting``: a chunked internal file
    whose chain ends in it may omit ``size_table`` (docs/format.md#internal-storage). An
    unknown name (or a plugin that fails to load) is False here; building its chain reports
    it."""
    try:
        return bool(_lookup(name).self_delimiting)
    except CodecError:
        return False


def chain_is_self_delimiting(codecs: Sequence[Any]) -> bool:
    """True when the last codec object of a Zarr v3 codec list is self-delimiting
    (:func:`is_self_delimiting`)."""
    last = codecs[-1] if codecs else None
    return isinstance(last, dict) and isinstance(last.get("name"), str) and \
        is_self_delimiting(last["name"])
