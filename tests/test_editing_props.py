"""Random edits against a NumPy model (docs/editing.md): region writes with any basic
selection (ints, steps of either sign, ellipsis, broadcast values), appends, resizes,
commits, aborts and reopenings, on internal and external layouts, with and without
pyramids (average, max, mode), with each compression, sparse tiles (a fill value the
writes often repeat), ``pad`` and ``variable`` edges, halos, local paths and S3. After
every commit and reopening the file equals the model at every level; the volume always
reads its own writes; at the end the file validates with ``deep=True``.

The quick run takes a few examples; the slow one the CI profile's count in the full suite and
at least 2,000 in the long profile (``HYPOTHESIS_PROFILE=long``, ``JNRRD_EDIT_EXAMPLES`` to
raise it), about one in six of them on S3.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np
import pytest
from editing_support import assert_file_equals, levels_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jnrrd
from jnrrd.tiling.kinds import max_levels

LONG_EXAMPLES = (max(2000, int(os.environ.get("JNRRD_EDIT_EXAMPLES", "2000")))
                 if os.environ.get("HYPOTHESIS_PROFILE", "ci") == "long"
                 else settings.default.max_examples)
_FIXTURES = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


@st.composite
def scenarios(draw: Any, s3: bool) -> dict[str, Any]:
    ndim = draw(st.integers(2, 3))
    shape = tuple(draw(st.integers(1, 14)) for _ in range(ndim))
    tile = tuple(draw(st.integers(1, 6)) for _ in range(ndim))
    dtype = draw(st.sampled_from(["uint8", "int16", "float32"]))
    methods = ["average", "max", "mode"] if dtype != "float32" else ["average", "max"]
    options: dict[str, Any] = {
        "tile": tile, "compression": draw(st.sampled_from(["raw", "zstd", "gzip", "lz4"])),
        "levels": draw(st.integers(1, min(3, max_levels(shape, range(ndim))))),
        "downsample": draw(st.sampled_from(methods)),
        "fill_value": draw(st.sampled_from([0, 3])),
        "storage": draw(st.sampled_from(["internal", "external"])),
        "edge": draw(st.sampled_from(["pad", "variable"])),
    }
    if min(tile) > 1 and draw(st.booleans()):
        options["overlap"] = 1
    op = st.one_of(
        st.tuples(st.just("write"), st.integers(0, 2**31)),
        st.tuples(st.just("write"), st.integers(0, 2**31)),
        st.tuples(st.just("append"), st.integers(0, 2**31)),
        st.tuples(st.just("resize"), st.integers(0, 2**31)),
        st.tuples(st.just("commit")),
        st.tuples(st.just("abort")),
        st.tuples(st.just("reopen")),
    )
    return {"shape": shape, "dtype": dtype, "options": options,
            "ops": draw(st.lists(op, min_size=1, max_size=7)),
            "s3": s3 and draw(st.integers(0, 5)) == 0}


def _selection(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[Any, ...]:
    key: list[Any] = []
    for n in shape:
        kind = rng.integers(0, 4)
        if kind == 0:
            key.append(int(rng.integers(-n, n)))
        elif kind == 1:
            key.append(slice(None))
        else:
            a, b = sorted(int(x) for x in rng.integers(-n - 2, n + 2, 2))
            step = int(rng.integers(1, 4)) * (1 if kind == 2 else -1)
            key.append(slice(a, b, step) if step > 0 else slice(b, a, step))
    if rng.integers(0, 4) == 0:  # an ellipsis in place of the leading axes
        cut = int(rng.integers(0, len(key)))
        key = [Ellipsis, *key[cut + 1:]] if cut < len(key) - 1 else [*key[:cut], Ellipsis]
    return tuple(key)


def _values(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, fill: int) -> Any:
    if rng.integers(0, 3) == 0:
        return fill if rng.integers(0, 2) else int(rng.integers(0, 9))  # a scalar, often the fill
    full = np.asarray(rng.integers(0, 9, shape)).astype(dtype)
    if full.ndim and full.size and rng.integers(0, 2):  # broadcast along the leading axes
        return full[(0,) * (full.ndim - 1)] if full.ndim > 1 else full
    return full


def _run(sc: dict[str, Any], target: str, so: dict[str, Any] | None) -> None:
    opts = sc["options"]
    extra = {"storage_options": so} if so else {}
    model = np.full(sc["shape"], opts["fill_value"], sc["dtype"])
    committed = model.copy()
    nlevels, method = opts["levels"], opts["downsample"]
    vol = jnrrd.create(target, sc["shape"], sc["dtype"], **opts, **extra)
    try:
        for op in sc["ops"]:
            rng = np.random.default_rng(op[1] if len(op) > 1 else 0)
            if op[0] == "write":
                key = _selection(rng, model.shape)
                value = _values(rng, model[key].shape, sc["dtype"], opts["fill_value"])
                model[key] = value
                vol[key] = value
            elif op[0] == "append":
                axis = int(rng.integers(0, model.ndim))
                ext = list(model.shape)
                ext[axis] = int(rng.integers(1, 6))
                block = rng.integers(0, 9, ext).astype(sc["dtype"])
                vol.append(block, axis=axis)
                model = np.concatenate([model, block], axis=axis)
            elif op[0] == "resize":
                new = tuple(int(x) for x in rng.integers(1, 18, model.ndim))
                grown = np.full(new, opts["fill_value"], sc["dtype"])
                common = tuple(slice(0, min(a, b)) for a, b in zip(new, model.shape))
                grown[common] = model[common]
                vol.resize(new)
                model = grown
            elif op[0] == "abort":
                vol.abort()
                model = committed.copy()
            else:
                vol.commit()
                committed = model.copy()
                if op[0] == "reopen":
                    vol.close()
                    vol = jnrrd.open(target, mode="r+", **extra)
                assert_file_equals(target, committed, nlevels, method, deep=False, **extra)
            np.testing.assert_array_equal(vol[...], model)
        vol.commit()
    finally:
        vol.close()
    with jnrrd.open(target, **extra) as reread:
        for k, want in enumerate(levels_of(model, nlevels, method)):
            np.testing.assert_array_equal(reread.levels[k][...], want)
    assert_file_equals(target, model, nlevels, method, **extra)


def _case(sc: dict[str, Any], s3: Any) -> None:
    if sc["s3"]:
        with tempfile.TemporaryDirectory():
            key = f"p/{np.random.default_rng().integers(1 << 62):x}.jnrrd"
            _run(sc, s3.url(key), s3.storage_options)
        return
    with tempfile.TemporaryDirectory() as d:
        _run(sc, os.path.join(d, "v.jnrrd"), None)


@settings(max_examples=8, suppress_health_check=_FIXTURES)
@given(sc=scenarios(s3=False))
def test_random_edits_match_numpy(sc):
    _case(sc, None)


@settings(max_examples=3, suppress_health_check=_FIXTURES)
@given(sc=scenarios(s3=True).map(lambda sc: {**sc, "s3": True}))
def test_random_edits_match_numpy_on_s3(s3, sc):
    _case(sc, s3)


@pytest.mark.slow
@pytest.mark.timeout(7200)
@settings(max_examples=LONG_EXAMPLES, suppress_health_check=_FIXTURES)
@given(sc=scenarios(s3=True))
def test_random_edits_match_numpy_long(s3, sc):
    _case(sc, s3)
