"""Every public reader entry point, on the fuzz corpus: only ``JnrrdError`` escapes.

The corpus is :func:`fuzz_strategies.hostile_case` over every seed kind with a hostile value
class forced into most examples (ragged and overflowing tables, boundary integers, deep
nesting, paths the OS refuses, non-object codecs). Each example is read through each entry
point separately: ``read_header``, ``read`` (every level), ``open`` + slicing, ``read_tile``,
``validate``, ``validate(deep=True)``, and the ``info`` (text and ``--json``), ``validate
--deep`` and ``convert`` commands run in-process through :func:`jnrrd.cli.main`. The set of
exception types escaping each entry point must be a subset of ``JnrrdError`` (+
``KeyboardInterrupt``), and the commands must exit 0 or 1 (never a usage error, never a
traceback). Each example runs under the fuzzers' time and memory bounds.
"""

from __future__ import annotations

import collections
import contextlib
import io
import os
import tempfile
import warnings
from collections.abc import Callable
from typing import Any

import fuzz_strategies as fz
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jnrrd
from jnrrd.cli import main as cli_main

DEADLINE_S = float(os.environ.get("JNRRD_FUZZ_DEADLINE_S", "20"))
MAX_PEAK = int(os.environ.get("JNRRD_FUZZ_MAX_PEAK", str(64 << 20)))
#: the command line writes a converted copy; fewer examples keep the quick suite quick
EXAMPLES = min(settings.default.max_examples, 20) if os.environ.get(
    "HYPOTHESIS_PROFILE", "ci") == "ci" else settings.default.max_examples

ALLOWED = (jnrrd.JnrrdError, KeyboardInterrupt)
#: entry point -> exception types that escaped it over the corpus (all must be ALLOWED)
ESCAPED: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)


@pytest.fixture(scope="module")
def seeds():
    cache = fz.SeedCache()
    yield cache
    cache.close()
    if ESCAPED:
        print("\nexceptions escaping each entry point:",
              {k: dict(v) for k, v in sorted(ESCAPED.items())})


def _levels(path: str) -> None:
    with jnrrd.open(path) as vol:
        n = len(vol.levels)
    for k in range(n):
        jnrrd.read(path, level=k)


def _open_slice(path: str) -> None:
    with jnrrd.open(path) as vol:
        for lv in vol.levels:
            lv[...]
            lv[tuple(slice(None, None, -2) if k % 2 else slice(1, None)
                     for k in range(lv.ndim))]


def _read_tile(path: str) -> None:
    with jnrrd.open(path) as vol:
        if not vol.tiled:
            return
        for lv in vol.levels:
            lv.read_tile((0,) * len(vol.tiling.levels[lv.index].grid.grid))


def _cli(*argv: str) -> Callable[[str], None]:
    def run(path: str) -> None:
        args = [a.replace("{path}", path).replace("{out}", path + ".out.jnrrd") for a in argv]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = cli_main(args)
        if code not in (0, 1):
            raise AssertionError(f"jnrrd {' '.join(argv)} exited {code}")
    return run


ENTRY_POINTS: dict[str, Callable[[str], Any]] = {
    "read_header": lambda p: jnrrd.read_header(p),
    "read": lambda p: jnrrd.read(p),
    "read(level=k)": _levels,
    "open+slice": _open_slice,
    "read_tile": _read_tile,
    "validate": lambda p: jnrrd.validate(p),
    "validate(deep=True)": lambda p: jnrrd.validate(p, deep=True),
    "cli info": _cli("info", "{path}"),
    "cli info --json": _cli("info", "--json", "{path}"),
    "cli validate --deep": _cli("validate", "--deep", "--json", "{path}"),
    "cli convert": _cli("convert", "--quiet", "{path}", "{out}"),
}


def _escapes(path: str) -> dict[str, BaseException]:
    """Each entry point's escaping exception (JnrrdErrors included), by entry point."""
    out: dict[str, BaseException] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, fn in ENTRY_POINTS.items():
            try:
                fn(path)
            except fz.Deadline:
                raise
            except BaseException as exc:  # recorded, judged by the caller
                out[name] = exc
    return out


@pytest.mark.slow
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_only_jnrrd_errors_escape_any_entry_point(seeds, data):
    case = data.draw(fz.hostile_case(seeds, sorted(fz.SEEDS), hostile=0.8, mutations=(0, 2)))
    with tempfile.TemporaryDirectory(prefix="jnrrd-fuzz-entry-") as d:
        path = fz.materialize(case, d)
        try:
            with fz.bounded(DEADLINE_S, MAX_PEAK):
                escapes = _escapes(path)
        except fz.Deadline as exc:
            raise AssertionError(f"{case.kind} after [{case.what}]: {exc}") from None
    bad = {}
    for name, exc in escapes.items():
        ESCAPED[name][type(exc).__name__] += 1
        if not isinstance(exc, ALLOWED):
            bad[name] = exc
    assert not bad, (
        f"{case.kind} after [{case.what}]: "
        + "; ".join(f"{n}: {type(e).__name__}: {str(e)[:200]}" for n, e in bad.items())
    )


#: one input per hostile class, applied to one seed of each storage kind below
FIXED_CLASSES: list[tuple[str, Any]] = [
    ("tile:offset_table", [[1, 2], [3]]),
    ("tile:size_table", [2**63 - 1] * 8),
    ("sizes", fz.RawJSON("[" + "9" * 5000 + ", 5, 4]")),
    ("byte_skip", 2**64),
    ("meta:x", fz._nested(700)),
    ("tile:codecs", fz.nested_conditional(250)),
    ("tile:codecs", [5]),
    ("data_file", "loop1"),
    ("tile:pattern", "a" * 300 + "/{i}_{l}"),
]
FIXED_KINDS = ["attached-raw", "detached-raw", "internal-chunked-zstd", "external-pattern"]


def test_escape_sets_on_a_fixed_corpus_are_subsets_of_jnrrd_error(seeds, tmp_path):
    """The same assertion over a fixed corpus (every hostile class on one seed of each
    storage kind, and the NRRD seeds' boundary values), collected per entry point as sets."""
    cases = []
    for kind in FIXED_KINDS:
        files = seeds.files(kind)
        for key, value in FIXED_CLASSES:
            fields, tail = fz.split_header(files[fz.HEADER])
            # a codec list replaces the tile:compression shorthand (else they disagree first)
            drop = {key, "tile:compression"} if key == "tile:codecs" else {key}
            fields = [f for f in fields if f[0] not in drop] + [(key, value)]
            cases.append(fz.Case(kind, {**files, fz.HEADER: fz.render(fields) + tail},
                                 f"{key}={value!r:.60}", {"loop1": "loop2", "loop2": "loop1"}))
    for kind in fz.NRRD_SEEDS:
        files = seeds.files(kind)
        for value in (b"9" * 5000, b"18446744073709551616", b"loop1"):
            head, sep, tail = files[fz.HEADER].partition(b"\n\n")
            for key in (b"sizes", b"byte skip", b"data file"):
                text = b"\n".join(ln for ln in head.split(b"\n") if not ln.startswith(key))
                cases.append(fz.Case(kind, {**files, fz.HEADER: text + b"\n" + key + b": "
                                            + value + sep + tail}, f"{key!r}: {value[:20]!r}",
                                     {"loop1": "loop2", "loop2": "loop1"}))
    escaped: dict[str, set[type]] = collections.defaultdict(set)
    for n, case in enumerate(cases):
        d = tmp_path / str(n)
        d.mkdir()
        for name, exc in _escapes(fz.materialize(case, str(d))).items():
            escaped[name].add(type(exc))
    assert set(escaped) >= {"read_header", "read", "open+slice", "read_tile"}
    for name, types in escaped.items():
        assert all(issubclass(t, ALLOWED) for t in types), (name, types)
