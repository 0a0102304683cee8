"""Fuzzing the OME-Zarr importer with hostile stores (tests/zarr_strategies.py): only
``JnrrdError`` (or correct data) within time and memory bounds (docs/reliability.md).

Each example converts a hostile store to ``.jnrrd`` (and, in turn, ``.nrrd`` or ``.npy``)
under the fuzzers' alarm and tracemalloc bound. When a conversion succeeds, the data must be
what zarr-python reads from the same store (when zarr-python reads it at all). The quick
profile runs a few examples; the long one is the documented run::

    HYPOTHESIS_PROFILE=long JNRRD_LONG_EXAMPLES=5000 JNRRD_FUZZ_DEADLINE_S=2 \\
        JNRRD_FUZZ_MAX_PEAK=268435456 JNRRD_FUZZ_STATS=zarr-stats.json \\
        python -m pytest tests/test_fuzz_zarr.py -k fuzz_zarr_stores -s

The entry-point test asserts, for every public entry point that takes a Zarr store (the
``convert`` function and command, to each target format) and for the local-file entry points
of issue 29 (``preview``, ``validate``, ``read_tile``, ``kerchunk_refs``, ``cleanup``, and
their commands) on the converted files and on the JNRRD fuzz corpus, that the exception
types escaping are a subset of ``JnrrdError`` (+ ``KeyboardInterrupt``).
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import os
import tempfile
import time
import warnings
from collections.abc import Callable
from typing import Any

import fuzz_strategies as fz
import numpy as np
import pytest
import zarr_strategies as zs
from hypothesis import given, settings
from hypothesis import strategies as st

import jnrrd
from jnrrd.cli import main as cli_main

pytest.importorskip("zarr")

DEADLINE_S = float(os.environ.get("JNRRD_FUZZ_DEADLINE_S", "20"))
MAX_PEAK = int(os.environ.get("JNRRD_FUZZ_MAX_PEAK", str(256 << 20)))
LONG = os.environ.get("HYPOTHESIS_PROFILE", "ci") != "ci"
#: the quick profile: a few stores per test (the long profile runs its own count)
EXAMPLES = settings.default.max_examples if LONG else min(settings.default.max_examples, 10)
ENTRY_EXAMPLES = settings.default.max_examples if LONG else min(
    settings.default.max_examples, 5)
ALLOWED = (jnrrd.JnrrdError, KeyboardInterrupt)

COUNTS: collections.Counter[str] = collections.Counter()
SLOWEST: dict[str, float] = collections.defaultdict(float)
PEAKS: dict[str, int] = collections.defaultdict(int)
WORST: dict[str, str] = {}
ESCAPED: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)


@pytest.fixture(scope="module")
def zseeds():
    cache = zs.ZSeedCache()
    yield cache
    cache.close()
    if COUNTS:
        print("\nzarr fuzz examples:", dict(sorted(COUNTS.items())))
        print("slowest example (s):", {k: round(v, 3) for k, v in sorted(SLOWEST.items())})
        print("largest peak (MiB):", {k: round(v / 2**20, 1) for k, v in sorted(PEAKS.items())})
    if ESCAPED:
        print("exceptions escaping each entry point:",
              {k: dict(v) for k, v in sorted(ESCAPED.items())})


@pytest.fixture(scope="module")
def seeds():
    cache = fz.SeedCache()
    yield cache
    cache.close()


def _record(counter: str, seconds: float, peak: int, case: Any) -> None:
    label = f"{case.kind} after [{case.what}]"
    if seconds > 2.0:  # the documented per-example bound
        COUNTS[counter + ":over-2s"] += 1
        WORST[f"{counter}:over-2s:{COUNTS[counter + ':over-2s']}"] = f"{seconds:.2f} s: {label}"
    if seconds > SLOWEST[counter]:
        SLOWEST[counter] = seconds
        WORST[counter + ":slowest"] = label
    if peak > PEAKS[counter]:
        PEAKS[counter] = peak
        WORST[counter + ":peak"] = label
    out = os.environ.get("JNRRD_FUZZ_STATS")
    if out:
        with open(out, "w") as f:
            json.dump({"examples": COUNTS, "slowest_s": SLOWEST, "peak_bytes": PEAKS,
                       "worst": WORST}, f, indent=1)


def _oracle(store: str) -> np.ndarray | None:
    """Level 0 as zarr-python reads it (header order), or None where it cannot."""
    import zarr

    try:
        g = zarr.open_group(store, mode="r")
        ome = g.attrs.get("ome", g.attrs)
        path = ome["multiscales"][0]["datasets"][0]["path"]
        return np.asarray(g[path][...]).T
    except Exception:  # zarr-python's own view of a broken store: no oracle
        return None


def _convert_checked(case: zs.ZCase, d: str, target: str) -> str | None:
    """Convert under the bounds; the output path when it succeeded, else None."""
    store = zs.materialize(case, d)
    out = os.path.join(d, target)
    t0 = time.perf_counter()
    stats: dict[str, int] = {}
    ok = False
    try:
        with fz.bounded(DEADLINE_S, MAX_PEAK) as stats, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                jnrrd.convert(store, out)
                ok = True
            except jnrrd.JnrrdError:
                pass
    except fz.Deadline as exc:
        raise AssertionError(f"{case.kind} after [{case.what}]: {exc}") from None
    except BaseException as exc:  # anything that is not a JnrrdError is a bug
        raise AssertionError(f"{type(exc).__name__} escaped on {case.kind} after "
                             f"[{case.what}]: {exc}") from exc
    finally:
        _record("stores", time.perf_counter() - t0, stats.get("peak", 0), case)
    return out if ok else None


@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_fuzz_zarr_stores(zseeds, data):
    """Hostile stores converted to JNRRD (and NRRD or NumPy): a JnrrdError or the data
    zarr-python reads, each store within the time and memory bounds."""
    case = data.draw(zs.hostile_store(zseeds))
    target = data.draw(st.sampled_from(["o.jnrrd", "o.jnrrd", "o.nrrd", "o.npy"]),
                       label="target")
    COUNTS["stores"] += 1
    with tempfile.TemporaryDirectory(prefix="jnrrd-zfuzz-") as d:
        out = _convert_checked(case, d, target)
        if out is None:
            return
        COUNTS["stores:converted"] += 1
        got = np.load(out) if out.endswith(".npy") else jnrrd.read(out)[0]
        # zarr-python is no hostile-input reader: never given FIFOs or planted links
        want = None if case.special else _oracle(os.path.join(d, zs.STORE))
        if want is not None and want.shape == got.shape:
            np.testing.assert_array_equal(got, want, err_msg=f"{case.kind} [{case.what}]")
            COUNTS["stores:checked-against-zarr"] += 1


def test_every_seed_converts_to_what_zarr_reads(zseeds, tmp_path):
    """The unmutated seeds are valid stores that convert exactly (the fuzzer starts from
    data)."""
    for kind in zseeds.kinds:
        d = tmp_path / kind
        d.mkdir()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", jnrrd.JnrrdWarning)
            out = _convert_checked(zs.ZCase(kind, zseeds.files(kind), "none"), str(d), "o.jnrrd")
        assert out is not None, kind
        np.testing.assert_array_equal(jnrrd.read(out)[0], _oracle(str(d / zs.STORE)),
                                      err_msg=kind)


# -- entry points --------------------------------------------------------------------------

def _cli(*argv: str) -> Callable[[str, str], None]:
    def run(src: str, d: str) -> None:
        args = [a.replace("{src}", src).replace("{d}", d) for a in argv]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = cli_main(args)
        if code not in (0, 1):
            raise AssertionError(f"jnrrd {' '.join(args)} exited {code}")
    return run


#: entry points that take a Zarr store (source path, scratch directory)
STORE_ENTRY_POINTS: dict[str, Callable[[str, str], Any]] = {
    "convert->jnrrd": lambda s, d: jnrrd.convert(s, os.path.join(d, "o.jnrrd")),
    "convert->nrrd": lambda s, d: jnrrd.convert(s, os.path.join(d, "o.nhdr")),
    "convert->npy": lambda s, d: jnrrd.convert(s, os.path.join(d, "o.npy")),
    "convert->jnrrd tiled": lambda s, d: jnrrd.convert(s, os.path.join(d, "t.jnrrd"), tile=4,
                                                       storage="external"),
    "cli convert": _cli("convert", "--quiet", "{src}", "{d}/c.jnrrd"),
    "cleanup(store)": lambda s, d: jnrrd.cleanup(s, older_than=0),
}


def _preview(p: str) -> None:
    with jnrrd.open(p) as vol:
        vol.preview(size=32)
        vol.preview(size=32, mip=True)


def _read_tiles(p: str) -> None:
    with jnrrd.open(p) as vol:
        for lv in vol.levels:
            lv.read_tile((0,) * len(vol.tiling.levels[lv.index].grid.grid)) if vol.tiled \
                else vol.read_tile((0,) * vol.ndim)


#: the local-file entry points of issue 29 items 7-10 and 12 (a file path, scratch dir)
FILE_ENTRY_POINTS: dict[str, Callable[[str, str], Any]] = {
    "preview": lambda p, d: _preview(p),
    "cli preview": _cli("preview", "{src}", "-o", "{d}/p.png", "--size", "32"),
    "validate": lambda p, d: jnrrd.validate(p),
    "validate(deep=True)": lambda p, d: jnrrd.validate(p, deep=True),
    "read_tile": lambda p, d: _read_tiles(p),
    "kerchunk_refs": lambda p, d: jnrrd.kerchunk_refs(p),
    "cli refs": _cli("refs", "{src}", "-o", "{d}/r.json"),
    "cleanup(dir)": lambda p, d: jnrrd.cleanup(os.path.dirname(p), older_than=0),
    "cli cleanup": _cli("cleanup", "--older-than", "0", "{d}"),
}


def _escapes(points: dict[str, Callable[[str, str], Any]], src: str, d: str
             ) -> dict[str, BaseException]:
    out: dict[str, BaseException] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, fn in points.items():
            try:
                fn(src, d)
            except fz.Deadline:
                raise
            except BaseException as exc:  # recorded, judged by the caller
                out[name] = exc
    return out


def _judge(escapes: dict[str, BaseException], label: str) -> None:
    bad = {}
    for name, exc in escapes.items():
        ESCAPED[name][type(exc).__name__] += 1
        if not isinstance(exc, ALLOWED):
            bad[name] = exc
    assert not bad, f"{label}: " + "; ".join(
        f"{n}: {type(e).__name__}: {str(e)[:200]}" for n, e in bad.items())


@settings(max_examples=ENTRY_EXAMPLES)
@given(data=st.data())
def test_only_jnrrd_errors_escape_zarr_and_file_entry_points(zseeds, seeds, data):
    """Every entry point that takes a Zarr store, on hostile stores; the local-file entry
    points on what they converted to, and on the JNRRD fuzz corpus with issue 29's classes
    (non-finite geometry, millions of missing tiles) forced into some files."""
    case = data.draw(zs.hostile_store(zseeds, mutations=(0, 2)))
    label = f"{case.kind} after [{case.what}]"
    with tempfile.TemporaryDirectory(prefix="jnrrd-zentry-") as d:
        store = zs.materialize(case, d)
        try:
            with fz.bounded(DEADLINE_S * 4, MAX_PEAK):
                escapes = _escapes(STORE_ENTRY_POINTS, store, d)
                for out in ("o.jnrrd", "t.jnrrd"):
                    if os.path.exists(os.path.join(d, out)):
                        escapes.update({f"{k} [{out}]": v for k, v in _escapes(
                            FILE_ENTRY_POINTS, os.path.join(d, out), d).items()})
        except fz.Deadline as exc:
            raise AssertionError(f"{label}: {exc}") from None
    _judge(escapes, label)
    jcase = data.draw(local_hostile_case(seeds))
    with tempfile.TemporaryDirectory(prefix="jnrrd-fentry-") as d:
        path = fz.materialize(jcase, d)
        try:
            with fz.bounded(DEADLINE_S * 4, MAX_PEAK):
                escapes = _escapes(FILE_ENTRY_POINTS, path, d)
        except fz.Deadline as exc:
            raise AssertionError(f"{jcase.kind} after [{jcase.what}]: {exc}") from None
    _judge(escapes, f"{jcase.kind} after [{jcase.what}]")


#: issue 29's classes for local files: geometry JSON cannot carry, and huge tile grids
GEOMETRY = [("space_directions", fz.RawJSON("[[NaN, 0, 0], [0, 1, 0], [0, 0, 1]]")),
            ("space_directions", fz.RawJSON("[[1e308, 1e308, 0], [0, 1, 0], [0, 0, 1]]")),
            ("space_origin", fz.RawJSON("[Infinity, 0, -Infinity]")),
            ("spacings", fz.RawJSON("[NaN, 1e308, 5e-324]")),
            ("sizes", [10**7, 1, 1]), ("sizes", [3162, 3162, 1])]


@st.composite
def local_hostile_case(draw: st.DrawFn, seeds: fz.SeedCache) -> fz.Case:
    case = draw(fz.hostile_case(seeds, sorted(set(fz.SEEDS) - set(fz.NRRD_SEEDS)),
                                hostile=0.5, mutations=(0, 1)))
    if draw(st.booleans()):
        key, value = draw(st.sampled_from(GEOMETRY))
        fields, tail = fz.split_header(case.files[fz.HEADER])
        if key == "sizes":  # one-voxel tiles over the new grid: millions of them
            fields = [f for f in fields if f[0] not in ("sizes", "tile:sizes")]
            fields.append(("tile:sizes", [1] * len(value)))
        elif key.startswith("space"):
            fields = [f for f in fields if f[0] not in ("spacings",)]
            if not any(f[0] == "space" for f in fields):
                fields.append(("space", "RAS"))
            fields.append(("space_origin" if key == "space_directions" else
                           "space_directions", [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
                           if key == "space_origin" else [0, 0, 0]))
        fields = [f for f in fields if f[0] != key] + [(key, value)]
        case = fz.Case(case.kind, {**case.files, fz.HEADER: fz.render(fields) + tail},
                       f"{case.what}; {key}={getattr(value, 'text', value)!r:.40}",
                       case.links)
    return case
