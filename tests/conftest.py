"""Shared test configuration: a fixed hypothesis profile in CI, shared fixtures, and the
simulated platforms.

``JNRRD_SIMULATE_PLATFORM=windows`` (or ``macos``) runs the suite as on that system: the
package's platform module is imported first, before anything else of the package, and removes
from ``os`` and ``mmap`` what that system lacks and decides as there (jnrrd/_platform.py,
docs/portability.md). Subprocesses inherit the variable and simulate too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import loopback_only
import pytest
from hypothesis import HealthCheck, settings

import jnrrd._platform  # first: the simulated platform applies before anything else of jnrrd

loopback_only.install()  # no test reaches any address but this machine's


def pytest_report_header() -> str:
    simulated = os.environ.get(jnrrd._platform.SIMULATE_ENV)
    return f"jnrrd platform: {jnrrd._platform.SYSTEM}" + (" (simulated)" if simulated else "")

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
        pytest.fail("the deflate package (a core dependency) is not installed")
    return request.param


# -- servers for the remote tests (127.0.0.1 only, stopped at teardown) ---------------------

@pytest.fixture
def http_server(tmp_path: Any) -> Iterator[Any]:
    """A ``RangeServer`` (tests/http_server.py) serving ``tmp_path``: write files there and
    read them at ``http_server.url_for(name)``; counters, latency and faults are switches."""
    from http_server import RangeServer

    with RangeServer(tmp_path) as server:
        yield server


@pytest.fixture(params=["fsspec", pytest.param("obstore", marks=pytest.mark.slow)])
def remote_backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run a remote test through each backend of remote reads (docs/remote.md, "Backends"),
    as the process-wide ``jnrrd.config`` default (so Dask's threads use it too): fsspec, and
    obstore (in the full suite; tests/test_obstore.py is its quick part). Under obstore the
    default is ``follow_redirects=True`` too, so that HTTP goes through obstore's client
    (the only redirect rule it can keep); a test that names another rule reads through
    jnrrd's own client."""
    import jnrrd

    if request.param == "obstore":
        try:
            import obstore  # noqa: F401
        except ImportError:
            pytest.fail("obstore (in the test extra) is not installed")
        jnrrd.config.set(remote_backend="obstore", follow_redirects=True)
    else:
        jnrrd.config.set(remote_backend="fsspec")
    try:
        yield request.param
    finally:
        jnrrd.config.reset()


@pytest.fixture(scope="session")
def _s3_server() -> Iterator[Any]:
    pytest.importorskip("moto.server")
    from s3_server import S3Server

    with S3Server() as server:
        yield server


@pytest.fixture
def s3(_s3_server: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fresh bucket on moto's S3 server (tests/s3_server.py): ``s3.storage_options`` for
    s3fs, ``s3.bucket``, ``s3.url(key)``; dummy AWS credentials in the environment and no
    metadata lookups, for this test only. The server's counters start at zero."""
    pytest.importorskip("s3fs")
    from s3_server import AWS_ENV, S3Bucket

    for name, value in AWS_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    bucket = _s3_server.bucket()
    _s3_server.latency = 0.0
    _s3_server.clear_faults()
    _s3_server.reset()
    return S3Bucket(_s3_server, bucket, _s3_server.storage_options())
