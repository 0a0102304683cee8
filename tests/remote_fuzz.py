"""The hostile-server fuzz corpus: datasets served in two versions, hypothesis strategies of
server behaviour, the public entry points that take a URL, and one scenario's run.

A scenario is (dataset kind, entry point, script, scope): tests/hostile_http.py answers the
``k``-th request to each object in scope with ``script[k]``. The kinds are small raw datasets
of every layout a URL can name (attached untiled, internal tiles with two levels, detached
JNRRD, external tiles, detached NHDR); every object is larger than the reader's first block
where it holds data, so a read takes several requests, and each has a version B of the same
size (other values), so a swap between two answers is a swap the reader must notice.

:func:`run` runs one scenario under a deadline and a tracemalloc bound and returns what
escaped (``None`` when the entry point returned) after checking what it returned: arrays
equal to version A or version B, never a mix.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from unittest import mock

import fuzz_strategies as fz
import numpy as np
from hostile_http import Behaviour, HostileServer
from hypothesis import strategies as st
from remote_cases import io_settings

import jnrrd
from jnrrd import cli


def fast() -> dict[str, Any]:
    """Client settings of the entry points that take reader keywords: a hostile server fails
    fast (the configured backend kept: tests/remote_cases.py)."""
    return {"io": io_settings(request_timeout=0.4, read_timeout=0.2, connect_timeout=0.5,
                              request_retries=1)}


#: server-side bounds: entry points without reader keywords run with the default settings,
#: and must still end fast (a trickle is cut here, a delay is at most 0.25 s: more than fast()'s
#: read_timeout, so the reader's own timeouts are met too); an endless body
#: is larger than the memory bound, so a client that reads one to its end fails the bound
SERVER = {"endless_cap": 512 << 20, "trickle_cap": 0.15, "trickle_interval": 0.01}
ALLOWED = (jnrrd.JnrrdError, KeyboardInterrupt)
#: kind -> (header object, write keywords); arrays of ~300 KB, over the 256 KiB first block
KINDS: dict[str, tuple[str, dict[str, Any]]] = {
    "untiled": ("u.jnrrd", {}),
    "internal": ("i.jnrrd", {"tile": 16, "levels": 2}),
    "detached": ("d.jnrrd", {"detached": True}),
    "external": ("e.jnrrd", {"tile": 24, "storage": "external"}),
    "nhdr": ("n.nhdr", {}),
}
SHAPE = (72, 64, 36)
_TOKEN = re.compile(r"\.([0-9a-f]{8})\.")


@dataclass
class Want:
    """The two versions of a kind's array, and its tile size when tiles are objects."""

    arrays: tuple[np.ndarray, np.ndarray]
    tile: int | None = None


@dataclass
class Site:
    """The served objects (name -> (version A, version B)) and each kind's two arrays."""

    objects: dict[str, tuple[bytes, bytes]]
    arrays: dict[str, Want]
    #: kind -> the prefix of its data objects (detached data, tiles); its header otherwise
    data: dict[str, str]

    def scope(self, kind: str, scope: str) -> str | None:
        """The object-name filter of a scenario's scope ("all", "header", "data")."""
        header = f"{kind}/{KINDS[kind][0]}"
        return {"all": None, "header": header, "data": self.data[kind]}[scope]


def build_site() -> Site:
    """Write every kind twice (two arrays of the same size) and pair the objects."""
    rng = np.random.default_rng(29)
    one = rng.integers(0, 250, SHAPE, dtype=np.uint8)
    two = (one + 1 + rng.integers(0, 3, SHAPE, dtype=np.uint8)).astype(np.uint8)
    objects: dict[str, tuple[bytes, bytes]] = {}
    arrays: dict[str, Want] = {}
    data_prefix: dict[str, str] = {}
    for kind, (name, kw) in KINDS.items():
        versions = []
        for arr in (one, two):
            with tempfile.TemporaryDirectory(prefix="jnrrd-fuzz-site-") as d:
                jnrrd.write(os.path.join(d, name), arr, **kw)
                versions.append(_files(d))
        (a_files, a_token), (b_files, b_token) = versions
        for rel, data in a_files.items():
            other = b_files[rel.replace(a_token, b_token) if a_token else rel]
            if b_token:  # version B names the objects version A's header names
                other = other.replace(b_token.encode(), a_token.encode())
            assert len(other) == len(data), rel
            objects[f"{kind}/{rel}"] = (data, other)
        arrays[kind] = Want((one, two), kw["tile"] if kw.get("storage") == "external"
                            else None)
        stem = name.rsplit(".", 1)[0]
        data_prefix[kind] = f"{kind}/{stem}.{a_token}." if a_token else f"{kind}/{name}"
    return Site(objects, arrays, data_prefix)


def _files(d: str) -> tuple[dict[str, bytes], str]:
    out = {}
    for root, _, names in os.walk(d):
        for n in names:
            full = os.path.join(root, n)
            with open(full, "rb") as f:
                out[os.path.relpath(full, d).replace(os.sep, "/")] = f.read()
    tokens = {m.group(1) for rel in out for m in _TOKEN.finditer(rel)}
    return out, (tokens.pop() if tokens else "")


# -- strategies ---------------------------------------------------------------------------------

def _mostly(normal: Any, *odd: Any, weight: int = 4) -> st.SearchStrategy[Any]:
    return st.sampled_from([normal] * weight + list(odd))


def behaviours() -> st.SearchStrategy[Behaviour]:
    """One answer: mostly correct, each field misbehaving now and then."""
    return st.builds(
        Behaviour,
        status=_mostly(None, 200, 206, 204, 299, 304, 400, 401, 403, 404, 410, 412, 416, 429,
                       500, 503, 999, weight=12),
        redirect=_mostly(None, "loop", "same-host", "other-host", "bad-scheme",
                         "no-location", weight=14),
        etag=_mostly("keep", "drop", "change", "weak"),
        last_modified=_mostly("keep", "drop", "change"),
        content_range=_mostly("right", "drop", "garbage", "shift", "star", "huge", "short",
                              weight=8),
        length=_mostly("right", "drop", "huge", "short", "long", "garbage", weight=8),
        chunked=st.booleans(),
        encoding=_mostly(None, "gzip", "br", weight=10),
        body=_mostly("right", "short", "extra", "endless", "trickle", "empty", "other",
                     weight=8),
        delay=_mostly(0.0, 0.05, 0.25, weight=10),
        swap=_mostly(False, True, weight=3),
        conditions=st.booleans(),
    )


@dataclass(frozen=True)
class Scenario:
    """One entry point on one kind, the server scripted for the objects in ``scope``."""

    kind: str
    entry: str
    script: tuple[Behaviour, ...]
    scope: str  # all | header | data

    def __str__(self) -> str:
        return f"{self.entry} on {self.kind} ({self.scope} objects): {list(self.script)}"


@st.composite
def scenarios(draw: Any, entries: list[str] | None = None) -> Scenario:
    """A scenario: any kind, any entry point (of ``entries``), a script of up to four
    answers for the header object, the data objects, or all."""
    kind = draw(st.sampled_from(sorted(KINDS)))
    entry = draw(st.sampled_from(entries or sorted(ENTRY_POINTS)))
    script = tuple(draw(st.lists(behaviours(), min_size=1, max_size=4)))
    return Scenario(kind, entry, script, draw(st.sampled_from(["all", "header", "data"])))


# -- entry points -------------------------------------------------------------------------------

def _same(got: np.ndarray, want: Want, sel: Any = ...) -> None:
    """``got`` is ``sel`` of version A or of version B, never a mix. External tiles are
    objects of their own (a server may replace each between two requests), so there each
    whole tile must be one version (each voxel, for a partial selection)."""
    versions = [w[sel] for w in want.arrays]
    if any(got.shape == v.shape and np.array_equal(got, v) for v in versions):
        return
    if want.tile and got.shape == versions[0].shape:
        blocks = [got == v for v in versions]
        if sel is ...:
            t = want.tile
            for corner in np.ndindex(*[-(-n // t) for n in got.shape]):
                box = tuple(slice(c * t, (c + 1) * t) for c in corner)
                if not any(b[box].all() for b in blocks):
                    raise AssertionError(f"wrong data: tile at {box} matches neither version")
            return
        if (blocks[0] | blocks[1]).all():
            return
    raise AssertionError(f"wrong data: matches neither version ({got.shape})")


def _read(url: str, want: Any, out: str) -> None:
    _same(jnrrd.read(url, **fast())[0], want)


def _open_slice(url: str, want: Any, out: str) -> None:
    with jnrrd.open(url, cache_bytes=0, **fast()) as vol:
        _same(vol[5:40, ::3, 7], want, (slice(5, 40), slice(None, None, 3), 7))
        _same(vol[...], want)
        for k in range(1, len(vol.levels)):
            vol.levels[k][...]


def _convert(url: str, want: Any, out: str) -> None:
    target = os.path.join(out, "c.jnrrd")
    jnrrd.convert(url, target)
    _same(jnrrd.read(target)[0], want)


def _preview(url: str, want: Any, out: str) -> None:
    with jnrrd.open(url, **fast()) as vol:
        vol.preview(32)


def _cli(*argv: str) -> Callable[[str, Any, str], None]:
    """A command run in-process: exit 0 or 1 (never a usage error); the exception the
    command caught and reported (its ``jnrrd: error:`` line) escapes here, to be judged."""
    def run(url: str, want: Any, out: str) -> None:
        args = [a.format(url=url, out=out) for a in argv]
        reported: list[BaseException] = []

        def one_line(exc: BaseException) -> str:
            reported.append(exc)
            return str(exc)

        with mock.patch.object(cli, "one_line", one_line), \
                contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            code = cli.main(args)
        if code not in (0, 1):
            raise AssertionError(f"jnrrd {' '.join(argv)} exited {code}")
        if reported:
            raise reported[0]
    return run


ENTRY_POINTS: dict[str, Callable[[str, Any, str], None]] = {
    "read": _read,
    "read_header": lambda url, want, out: jnrrd.read_header(url, **fast()),
    "open+slice": _open_slice,
    "validate": lambda url, want, out: jnrrd.validate(url, deep=True, **fast()),
    "convert": _convert,
    "kerchunk_refs": lambda url, want, out: jnrrd.kerchunk_refs(url),
    "preview": _preview,
    "cli info": _cli("info", "--json", "{url}"),
    "cli validate": _cli("validate", "--deep", "{url}"),
    "cli convert": _cli("convert", "--quiet", "{url}", "{out}/c.jnrrd"),
    "cli refs": _cli("refs", "{url}", "-o", "{out}/r.json"),
    "cli preview": _cli("preview", "{url}", "-o", "{out}/p.png", "--size", "32"),
}


# -- one scenario -------------------------------------------------------------------------------

@dataclass
class Outcome:
    """What one scenario did: the exception that escaped (or None), seconds, peak bytes."""

    escaped: BaseException | None
    seconds: float
    peak: int


def run(server: HostileServer, site: Site, sc: Scenario, *, deadline: float,
        max_peak: int) -> Outcome:
    """Run ``sc`` under ``deadline`` seconds and ``max_peak`` traced bytes (``fz.Deadline``
    or an ``AssertionError`` past them); wrong data is an ``AssertionError`` too."""
    server.load(list(sc.script), only=site.scope(sc.kind, sc.scope))
    url = server.url_for(f"{sc.kind}/{KINDS[sc.kind][0]}")
    escaped: BaseException | None = None
    with tempfile.TemporaryDirectory(prefix="jnrrd-fuzz-out-") as out:
        t0 = time.perf_counter()
        with fz.bounded(deadline, max_peak) as stats, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                ENTRY_POINTS[sc.entry](url, site.arrays[sc.kind], out)
            except (fz.Deadline, AssertionError):
                raise
            except BaseException as exc:  # judged by the caller
                escaped = exc
        seconds = time.perf_counter() - t0
    if seconds > deadline:  # the alarm can land where Python swallows it (a GC callback)
        raise fz.Deadline(f"took {seconds:.2f} s, over the {deadline} s bound")
    return Outcome(escaped, seconds, stats["peak"])


def warm_up(server: HostileServer, site: Site) -> None:
    """Every entry point once on every kind, the server behaving: the modules each imports
    on first use are loaded before any scenario is timed."""
    for kind in KINDS:
        for entry in ENTRY_POINTS:
            run(server, site, Scenario(kind, entry, (), "all"), deadline=120,
                max_peak=1 << 40)
