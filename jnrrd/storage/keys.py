"""Object names as the server will see them: the one confinement rule of every remote backend.

A header names other objects (``data_file``, tile files, ``tile:base_dir``) by keys relative
to its own "directory". Between the header and the server a key may be read three ways: as
written (an object store such as S3 takes it literally), with its unreserved percent-escapes
decoded once and its dot segments removed (an HTTP client normalising the URL: ``%2e%2e``
becomes ``..`` and climbs), or fully decoded (a server, or a proxy in front of it, decoding
``%2F`` into ``/`` and ``%252e`` twice into ``.``). :func:`confine_key` checks the key
under every one of those readings (also cut at ``?``/``#``, and with ``;params`` dropped from
its segments, as Java servers do), so no reading can leave the header's directory without the
policy's opt-in, and refuses a key whose escapes hide a ``/``, a ``\\`` or a ``.``/``..``
segment (servers disagree on those) unless the caller passes ``allow_encoded_keys=True``.
The key handed on is the one written, normalised: the checks never change what is asked for.

:func:`check_object_url` is the rule for the URL a caller reads or writes: one spelling of
each object, so a writer and a later reader name the same key (no ``.``, ``..`` or empty
segments, no control characters).

Nothing here does I/O or knows a backend (docs/remote.md, docs/security.md).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from urllib.parse import unquote

from ..errors import SecurityError, UnsupportedError
from ..policy import Policy

__all__ = ["ConfinedKey", "check_object_url", "confine_key", "decode_fully"]

#: more rounds of percent-decoding than this and a key is refused (each round shortens it)
MAX_DECODES = 8
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: escapes of unreserved characters (RFC 3986 §2.3): an HTTP client decodes these itself
_UNRESERVED_ESCAPE = re.compile(r"%(?:[46][1-9A-Fa-f]|[57][0-9Aa]|3[0-9]|2[DdEe]|5[Ff]|7[Ee])")
_DOTS = (".", "..")


@dataclass(frozen=True)
class ConfinedKey:
    """A key that passed :func:`confine_key`: ``path`` normalised (``'/'``-separated, no dot
    segments), relative to the header's directory unless ``absolute`` (then from the
    bucket's or host's root)."""

    path: str
    absolute: bool


def decode_fully(text: str, *, what: str = "") -> str:
    """``text`` percent-decoded until nothing changes (``SecurityError`` after
    :data:`MAX_DECODES` rounds)."""
    for _ in range(MAX_DECODES):
        decoded = unquote(text)
        if decoded == text:
            return text
        text = decoded
    raise SecurityError(f"{what}{text!r} is percent-encoded more than {MAX_DECODES} times")


def confine_key(key: object, policy: Policy, *, prefix: str = "", root: str = ""
                ) -> ConfinedKey:
    """Check a key named by a header under ``policy`` as every party on the way will read it
    (``prefix`` starts error messages, ``root`` names the header's directory in them)."""
    if not isinstance(key, str) or not key:
        raise SecurityError(f"{prefix}expected a non-empty relative path, found {key!r}")
    full = decode_fully(key, what=prefix)
    for form, how in ((key, ""), (full, " (once percent-decoded)")):
        if _CONTROL.search(form) or "\\" in form:
            raise SecurityError(f"{prefix}path {key!r} contains a control character or a "
                                f"backslash{how}")
        if _URL.match(form):
            raise SecurityError(f"{prefix}URL {key!r}{how} is blocked: paths in a remote "
                                "header resolve against the header's own URL")
    hidden = _hidden_structure(key, full)
    if hidden and not policy.allow_encoded_keys:
        raise SecurityError(
            f"{prefix}path {key!r} hides {hidden} behind percent-encoding, which servers "
            "decode differently; name the object plainly, or pass allow_encoded_keys=True "
            "to allow it (it must stay confined however it is decoded)")
    client = _UNRESERVED_ESCAPE.sub(lambda m: unquote(m.group(0)), key)
    readings = {key, client, full}
    for form in list(readings):
        readings.add(re.split(r"[?#]", form, maxsplit=1)[0])
    for form in list(readings):
        readings.add("/".join(seg.split(";", 1)[0] for seg in form.split("/")))
    for form in sorted(readings - {key}):
        _confined(form, key, policy, prefix, root)
    return _confined(key, key, policy, prefix, root)


def _hidden_structure(key: str, full: str) -> str:
    """What the escapes of ``key`` hide ('' when nothing): a separator or a dot segment."""
    if full.count("/") != key.count("/"):
        return "a '/'"
    if any(d in _DOTS and k != d for k, d in zip(key.split("/"), full.split("/"), strict=True)):
        return "a '.' or '..' segment"
    return ""


def _confined(form: str, key: str, policy: Policy, prefix: str, root: str) -> ConfinedKey:
    """One reading of ``key`` checked against the policy's absolute/parent rules."""
    absolute = form.startswith("/")
    if absolute:
        if not policy.allow_absolute:
            raise SecurityError(f"{prefix}absolute path {key!r} is blocked; pass "
                                "allow_absolute=True to allow it")
        return ConfinedKey(posixpath.normpath("/" + form.lstrip("/")), True)
    norm = posixpath.normpath(form) if form else "."
    if (norm == ".." or norm.startswith("../")) and not policy.allow_parent:
        where_ = f" {root!r}" if root else ""
        raise SecurityError(f"{prefix}path {key!r} leaves the header's directory{where_}; "
                            "pass allow_parent=True to allow it")
    return ConfinedKey(norm, False)


def check_object_url(url: str, path: str) -> None:
    """``UnsupportedError`` unless ``path`` (the object's path in ``url``: an fsspec path or
    the URL itself) names it in one spelling: no ``.``, ``..`` or empty segments (also
    percent-encoded) and no control characters. Readers and writers both apply it, so the key
    a write stores is the key a read of the same URL asks for."""
    m = _URL.match(path)
    rest = path[m.end():] if m else path
    if m is not None:  # host and query are not the object's name
        rest = re.split(r"[?#]", rest.partition("/")[2], maxsplit=1)[0]
    if _CONTROL.search(rest):
        raise UnsupportedError(f"{url!r}: the object's name contains a control character "
                               "(a newline, a tab, ...); object stores and HTTP cannot carry "
                               "it reliably")
    segments = rest.lstrip("/").split("/")
    bad = [s for s in segments if s in ("", *_DOTS) or unquote(s) in _DOTS]
    if bad:
        clean = posixpath.normpath("/" + decode_fully(rest)).lstrip("/")
        raise UnsupportedError(f"{url}: the object's name has '.', '..' or empty segments, "
                               f"which stores resolve differently; name it as {clean!r}")
