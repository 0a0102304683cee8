"""Fuzzing the classes of tiny inputs that cost seconds, gigabytes or a hang.

Generators in ``fuzz_costs``: non-regular data and tile files, member floods, virtual levels
at extreme scales, huge tile and level counts. Every example is read every way
(``fuzz_strategies.exercise``) under the fuzzers' bounds: only ``JnrrdError``s (or data), no
run over the deadline, no tracemalloc peak over 64 MiB.
"""

from __future__ import annotations

import os
import tempfile

import fuzz_costs as fc
import fuzz_strategies as fz
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

DEADLINE_S = 20.0  # per example; the fuzzers' bound (tracemalloc runs alongside)
MAX_PEAK = 64 << 20
#: these examples cost more than the others' (up to 10^5 members or tiles): a quarter as many
FEW = settings(max_examples=max(8, settings.default.max_examples // 4))


@pytest.fixture(scope="module")
def seeds():
    cache = fz.SeedCache()
    yield cache
    cache.close()


def _run(cc: fc.CostCase) -> None:
    with tempfile.TemporaryDirectory(prefix="jnrrd-fuzz-") as d:
        path, held = fc.materialize(cc, d)
        try:
            with fz.bounded(DEADLINE_S, MAX_PEAK):
                fz.exercise(path)
        except fz.Deadline as exc:
            raise AssertionError(f"{cc.case.kind} [{cc.case.what}]: {exc}") from None
        except BaseException as exc:
            fz.check_exception(exc, cc.case)
            raise
        finally:
            for s in held:
                s.close()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs and sockets")
@FEW
@given(data=st.data())
def test_fuzz_non_regular_files(seeds, data):
    _run(data.draw(fc.non_regular_case(seeds)))


@pytest.mark.slow
@FEW
@given(cc=fc.member_flood_case())
def test_fuzz_member_floods(cc):
    _run(cc)


@pytest.mark.slow
@given(cc=fc.extreme_scale_case())
def test_fuzz_extreme_virtual_scales(cc):
    _run(cc)


@pytest.mark.slow
@FEW
@given(cc=fc.many_tiles_case())
def test_fuzz_many_tiles_and_levels(cc):
    _run(cc)
