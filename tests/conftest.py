"""Shared test configuration: a fixed hypothesis profile in CI, shared fixtures."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=60,
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "dev",
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "long",
    max_examples=int(os.environ.get("JNRRD_LONG_EXAMPLES", "20000")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Every .jnrrd file written by jnrrd.write in any test must validate clean.
pytest_plugins = ["plugins.validate_written"]


@pytest.fixture(params=["libdeflate", "zlib"])
def gzip_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test through libdeflate's one-shot gzip path and again through zlib only (the
    fallback without the ``deflate`` package): both must give the same arrays and errors."""
    from jnrrd.codecs import gzip_fast

    if request.param == "zlib":
        monkeypatch.setattr(gzip_fast, "available", False)
    elif not gzip_fast.available:
        pytest.skip("the deflate package (jnrrd[gzip]) is not installed")
    return request.param
