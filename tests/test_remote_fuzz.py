"""Fuzzing every public entry point that takes a URL against a hostile HTTP server.

tests/hostile_http.py serves small datasets of every layout (tests/remote_fuzz.py) and answers
each request as a hypothesis-drawn script says: any status, redirects (same host, another
host, a loop, a non-HTTP URL), ``ETag``/``Last-Modified`` dropped, changed or weak, wrong or
missing ``Content-Range``/``Content-Length``, chunked, gzip or a claimed encoding, bodies cut
short, longer, endless or trickled, delays, and the object swapped for its other version
(same size) between two answers. Every scenario must end with correct data (version A or B
whole, never a mix) or a ``JnrrdError``, in bounded time and tracemalloc peak.

- ``test_a_hostile_server_gets_only_jnrrd_errors_or_correct_data``: the fuzzer; the quick
  profile runs a few examples, the long one as many as hypothesis's ``long`` profile says:
  ``HYPOTHESIS_PROFILE=long JNRRD_LONG_EXAMPLES=10000 JNRRD_FUZZ_DEADLINE_S=2
  JNRRD_FUZZ_STATS=remote-fuzz.json python -m pytest tests/test_remote_fuzz.py -s``
  (docs/reliability.md has the figures of the last run);
- ``test_every_url_entry_point_lets_only_jnrrd_errors_escape``: every entry point (``read``,
  ``read_header``, ``open`` + slicing, ``validate``, ``convert``, ``kerchunk_refs``,
  ``preview``, and the ``info``, ``validate``, ``convert``, ``refs``, ``preview`` commands)
  over a fixed corpus of one script per hostile class: the exception types that escape each
  are a subset of ``JnrrdError`` (+ ``KeyboardInterrupt``); the slow variant runs every
  script on every kind.
"""

from __future__ import annotations

import collections
import json
import os
import resource

import fuzz_strategies as fz
import pytest
import remote_fuzz as rf
from hostile_http import Behaviour, HostileServer
from hypothesis import given, settings

#: every test here runs through both backends of remote reads (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("remote_backend")

pytest.importorskip("aiohttp")

DEADLINE_S = float(os.environ.get("JNRRD_FUZZ_DEADLINE_S", "20"))
MAX_PEAK = int(os.environ.get("JNRRD_FUZZ_MAX_PEAK", str(256 << 20)))
QUICK = os.environ.get("HYPOTHESIS_PROFILE", "ci") == "ci"
EXAMPLES = 12 if QUICK else settings.default.max_examples

#: per entry point: exception types that escaped; and the run's figures
ESCAPED: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
FIGURES: dict[str, float] = collections.defaultdict(float)
WORST: dict[str, str] = {}


@pytest.fixture(scope="module")
def served():
    site = rf.build_site()
    with HostileServer(site.objects, **rf.SERVER) as server:
        if not QUICK:
            rf.warm_up(server, site)
        yield server, site
    if FIGURES:
        print("\nhostile-server scenarios:", _summary())


def _summary() -> dict[str, object]:
    return {"figures": {k: round(v, 3) for k, v in sorted(FIGURES.items())},
            "escaped": {k: dict(v) for k, v in sorted(ESCAPED.items())}, "worst": WORST}


def _failed(sc: rf.Scenario, exc: BaseException) -> AssertionError:
    """A scenario over the bounds (or with wrong data): noted in the figures, then raised."""
    FIGURES["failures"] += 1
    WORST[f"failure {int(FIGURES['failures'])}"] = f"{sc}: {type(exc).__name__}: {exc}"[:800]
    _dump()
    return AssertionError(f"{sc}: {exc}")


def _dump() -> None:
    out = os.environ.get("JNRRD_FUZZ_STATS")
    if out:
        with open(out, "w") as f:
            json.dump(_summary(), f, indent=1)


def _record(sc: rf.Scenario, outcome: rf.Outcome) -> None:
    FIGURES["scenarios"] += 1
    FIGURES["data returned"] += outcome.escaped is None
    if outcome.seconds > FIGURES["slowest s"]:
        FIGURES["slowest s"] = outcome.seconds
        WORST["slowest"] = str(sc)[:400]
    if outcome.peak > FIGURES["largest peak MiB"] * 2**20:
        FIGURES["largest peak MiB"] = outcome.peak / 2**20
        WORST["largest peak"] = str(sc)[:400]
    FIGURES["over 2 s"] += outcome.seconds > 2.0
    FIGURES["max RSS MiB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ESCAPED[sc.entry][type(outcome.escaped).__name__ if outcome.escaped else "none"] += 1
    _dump()


def _run(served, sc: rf.Scenario) -> rf.Outcome:
    server, site = served
    try:
        outcome = rf.run(server, site, sc, deadline=DEADLINE_S, max_peak=MAX_PEAK)
    except (fz.Deadline, AssertionError) as exc:
        raise _failed(sc, exc) from None
    _record(sc, outcome)
    exc = outcome.escaped
    assert exc is None or isinstance(exc, rf.ALLOWED), \
        f"{sc}: {type(exc).__name__}: {str(exc)[:300]}"
    return outcome


@settings(max_examples=EXAMPLES)
@given(sc=rf.scenarios())
def test_a_hostile_server_gets_only_jnrrd_errors_or_correct_data(served, sc):
    _run(served, sc)


#: one script per hostile class (the fixed corpus of the entry-point test)
CLASSES: dict[str, list[Behaviour]] = {
    "endless body, no length": [Behaviour(length="drop", body="endless")],
    "endless chunked body": [Behaviour(), Behaviour(chunked=True, body="endless")],
    "huge Content-Length": [Behaviour(length="huge", body="endless")],
    "trickle": [Behaviour(), Behaviour(body="trickle")],
    "swap, Last-Modified only": [Behaviour(etag="drop", swap=True, conditions=False),
                                 *[Behaviour(etag="drop", conditions=False)] * 3],
    "ETag dropped after the first answer": [Behaviour(swap=True, conditions=False),
                                            *[Behaviour(etag="drop", last_modified="drop",
                                                        conditions=False)] * 3],
    "no validators": [Behaviour(etag="drop", last_modified="drop")] * 4,
    "redirect to another host": [Behaviour(redirect="other-host")],
    "redirect loop": [Behaviour(redirect="loop")] * 8,
    "Range ignored": [Behaviour(status=200)] * 4,
    "wrong Content-Range": [Behaviour(content_range="shift")] * 4,
    "gzip answer": [Behaviour(encoding="gzip")] * 4,
    "500 then cut short": [Behaviour(status=500), Behaviour(body="short"),
                           Behaviour(body="extra")],
    "404": [Behaviour(status=404)] * 4,
    "silent": [Behaviour(delay=0.3)] * 4,
    "other version's bytes": [Behaviour(), Behaviour(body="other", conditions=False)],
}
QUICK_CLASSES = ["endless body, no length", "swap, Last-Modified only",
                 "redirect to another host", "Range ignored", "500 then cut short", "404"]


def _escape_sets(served, classes: list[str], kinds: list[str]) -> dict[str, set[type]]:
    escaped: dict[str, set[type]] = collections.defaultdict(set)
    n = 0
    for entry in rf.ENTRY_POINTS:
        for name in classes:
            for kind in kinds if len(kinds) > 1 else [sorted(rf.KINDS)[n % len(rf.KINDS)]]:
                n += 1
                sc = rf.Scenario(kind, entry, tuple(CLASSES[name]), "all")
                outcome = _run(served, sc)
                escaped[entry].add(type(outcome.escaped))
    return escaped


def _assert_subsets(escaped: dict[str, set[type]]) -> None:
    assert set(escaped) == set(rf.ENTRY_POINTS)
    for entry, types in escaped.items():
        bad = [t for t in types if t is not type(None) and not issubclass(t, rf.ALLOWED)]
        assert not bad, (entry, bad)
    # the corpus is hostile enough to make every entry point fail somewhere (validate
    # reports what it finds instead)
    assert all(any(t is not type(None) for t in types) for entry, types in escaped.items()
               if "validate" not in entry)


@pytest.mark.slow
def test_every_url_entry_point_lets_only_jnrrd_errors_escape(served):
    _assert_subsets(_escape_sets(served, QUICK_CLASSES, ["rotate"]))


@pytest.mark.slow
def test_every_url_entry_point_on_every_class_and_kind(served, remote_backend):
    """Every class against every kind; under obstore every class against the kinds in turn:
    a kind (the file's layout) is read by the same code above either client, so the obstore
    run spends its time on the classes, which meet its client."""
    kinds = sorted(rf.KINDS) if remote_backend == "fsspec" else ["rotate"]
    _assert_subsets(_escape_sets(served, list(CLASSES), kinds))
