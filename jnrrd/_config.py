"""``jnrrd.config``: the defaults of every reader's :class:`~jnrrd.Policy` and of the
:class:`~jnrrd.IOSettings` of every call, in one place (docs/api.md, "Configuration").

A setting's value for one call comes from, first to last: the call's own keyword (or its
``policy=``/``io=`` object), the innermost ``with jnrrd.config(...)`` block in force in this
thread or asyncio task, the process-wide defaults of ``jnrrd.config.set(...)``, the built-in
default. The blocks live in a :class:`contextvars.ContextVar`: a block in one thread or task
is invisible to the others (a new thread starts with none and sees the process defaults).
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import threading
import warnings
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, Unpack

from .policy import IO_FIELDS, POLICY_FIELDS, IOSettings, Policy, SettingsOptions

__all__ = ["Config", "config", "current", "settings_for"]

#: the I/O settings that readers took among their policy keywords before they moved to
#: ``IOSettings`` (still accepted there, with a ``DeprecationWarning``)
MOVED_TO_IO = ("request_concurrency", "coalesce_gap", "request_timeout", "request_retries",
               "connect_timeout", "read_timeout")

_NAMES = frozenset(POLICY_FIELDS) | frozenset(IO_FIELDS)
_EMPTY: Mapping[str, Any] = MappingProxyType({})
#: this thread's / task's ``with config(...)`` overrides, innermost merged over outer ones
_CONTEXT: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar(
    "jnrrd_config", default=_EMPTY)
_LOCK = threading.Lock()
_DEFAULTS: Mapping[str, Any] = _EMPTY  # jnrrd.config.set(...): replaced whole, under _LOCK


def _unknown(name: str, where: str) -> TypeError:
    if name in IO_FIELDS:  # a keyword of the call's I/O settings, given among its policy's
        return TypeError(f"{where} got an unexpected keyword argument {name!r}: {name!r} is "
                         f"an I/O setting: pass io=jnrrd.IOSettings({name}=...), or set it "
                         f"with jnrrd.config({name}=...) (docs/api.md, \"Configuration\")")
    near = difflib.get_close_matches(name, sorted(_NAMES), n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return TypeError(f"{where} got an unexpected keyword argument {name!r}{hint}; the "
                     "settings are listed in docs/api.md, \"Configuration\"")


def _flat(where: str, policy: Policy | None, io: IOSettings | None,
          settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` by name, with every field of the ``policy``/``io`` objects under them."""
    out: dict[str, Any] = {}
    if policy is not None:
        if not isinstance(policy, Policy):
            raise TypeError(f"{where}: policy must be a jnrrd.Policy, not "
                            f"{type(policy).__name__}")
        out.update({n: getattr(policy, n) for n in POLICY_FIELDS})
    if io is not None:
        if not isinstance(io, IOSettings):
            raise TypeError(f"{where}: io must be a jnrrd.IOSettings, not {type(io).__name__}")
        out.update({n: getattr(io, n) for n in IO_FIELDS})
    for name, value in settings.items():
        if name not in _NAMES:
            raise _unknown(name, where)
        out[name] = value
    return out


def _build(values: Mapping[str, Any]) -> Policy:
    """The policy (with its I/O settings) of the built-in defaults updated with ``values``
    (checked: a bad value raises naming its setting)."""
    pol = Policy.from_kwargs(**{n: v for n, v in values.items() if n in POLICY_FIELDS})
    return pol.with_io(IOSettings(**{n: v for n, v in values.items() if n in IO_FIELDS}))


#: the last settings built, with the two mappings they were built from (compared by identity:
#: a block's mapping and the defaults are replaced, never changed, so the same objects mean
#: the same settings; the tuple keeps them alive, so their ids are not reused)
_LAST: tuple[Mapping[str, Any], Mapping[str, Any], Policy] | None = None


def current() -> Policy:
    """The settings in force here (this thread or task): the policy, with its :attr:`io`."""
    global _LAST
    defaults, overrides = _DEFAULTS, _CONTEXT.get()
    last = _LAST
    if last is not None and last[0] is defaults and last[1] is overrides:
        return last[2]
    pol = _build({**defaults, **overrides} if overrides else defaults)
    _LAST = (defaults, overrides, pol)
    return pol


def settings_for(where: str, *, policy: Policy | None = None, io: IOSettings | None = None,
            options: Mapping[str, Any] | None = None, **named: Any) -> Policy:
    """The settings of one call named ``where`` (e.g. ``"jnrrd.read()"``): its ``policy=``
    and ``io=`` objects, its policy keywords ``options`` and its named I/O keywords
    ``named`` (``None``: not given) over :func:`current`.

    A ``policy``/``io`` object stands for every field of its kind (the ``jnrrd.config``
    defaults of that kind do not apply under it); single keywords override single fields.
    The remote I/O settings given as policy keywords (their former place) are accepted with
    a ``DeprecationWarning``.
    """
    options = dict(options or {})
    moved = [n for n in MOVED_TO_IO if n in options]
    if moved:
        given = ", ".join(f"{n}={options[n]!r}" for n in moved)
        warnings.warn(f"{where}: {', '.join(f'{n}=' for n in moved)} as a policy keyword is "
                      f"deprecated; pass io=jnrrd.IOSettings({given}) or set it with "
                      f"jnrrd.config({given})", DeprecationWarning, stacklevel=3)
    for name in options:
        if name not in POLICY_FIELDS and name not in MOVED_TO_IO:
            raise _unknown(name, where)
    call = _flat(where, policy, io, options)
    call.update({n: v for n, v in named.items() if v is not None})
    if not call:
        return current()
    base = {**_DEFAULTS, **_CONTEXT.get()}
    if policy is not None:  # the object replaces the configured policy
        base = {n: v for n, v in base.items() if n not in POLICY_FIELDS}
    if io is not None:
        base = {n: v for n, v in base.items() if n not in IO_FIELDS}
    return _build({**base, **call})


class Config:
    """``jnrrd.config``: ``with jnrrd.config(threads=1): ...`` sets defaults for the block
    (this thread or task only); ``jnrrd.config.set(...)`` sets the process-wide defaults;
    ``jnrrd.config.reset()`` drops them; ``jnrrd.config.current()`` is what is in force.

    Every setting is a field of :class:`~jnrrd.Policy` or :class:`~jnrrd.IOSettings`, by
    name; ``policy=`` / ``io=`` give all fields of one kind at once.
    """

    def __call__(self, *, policy: Policy | None = None, io: IOSettings | None = None,
                 **settings: Unpack[SettingsOptions]
                 ) -> contextlib.AbstractContextManager[Policy]:
        """A context manager: the settings for the ``with`` block (checked now)."""
        values = _flat("jnrrd.config()", policy, io, settings)
        _build({**_DEFAULTS, **_CONTEXT.get(), **values})  # a bad value fails here
        return self._block(values)

    @contextlib.contextmanager
    def _block(self, values: Mapping[str, Any]) -> Iterator[Policy]:
        token = _CONTEXT.set(MappingProxyType({**_CONTEXT.get(), **values}))
        try:
            yield current()
        finally:
            _CONTEXT.reset(token)

    def set(self, *, policy: Policy | None = None, io: IOSettings | None = None,
            **settings: Unpack[SettingsOptions]) -> None:
        """Set process-wide defaults (every thread; ``with`` blocks still override them)."""
        global _DEFAULTS
        values = _flat("jnrrd.config.set()", policy, io, settings)
        with _LOCK:
            merged = {**_DEFAULTS, **values}
            _build(merged)  # a bad value fails here, leaving the defaults as they were
            _DEFAULTS = MappingProxyType(merged)

    def reset(self) -> None:
        """Drop the defaults set with :meth:`set` (``with`` blocks in force stay)."""
        global _DEFAULTS
        with _LOCK:
            _DEFAULTS = _EMPTY

    def current(self) -> Policy:
        """The settings in force here: the :class:`~jnrrd.Policy`, its ``io`` the
        :class:`~jnrrd.IOSettings`."""
        return current()

    def __repr__(self) -> str:
        return f"jnrrd.config({', '.join(f'{k}={v!r}' for k, v in self._changed().items())})"

    def _changed(self) -> dict[str, Any]:
        return {**_DEFAULTS, **_CONTEXT.get()}


#: the configuration (see :class:`Config`)
config = Config()
