"""Regression tests of the remote half of issue 29, one named test per example of the issue.

- keys hidden behind percent-encoding (``%2e%2e/``, ``.%2e/``, ``..%2F``, double encoding)
  in ``data_file``, ``tile:pattern`` (read, open, validate, ``missing="fill"``),
  ``tile:base_dir`` and an NHDR ``data file`` never reach an object outside the header's
  directory (``allow_encoded_keys`` is the opt-in, and even then the key must stay confined);
- endless bodies (no length, a huge ``Content-Length``, chunked, a trickle) cost memory
  bounded by the request and end in bounded time, with default settings;
- an object replaced by one of the same size between two answers (a server that sends only
  ``Last-Modified``, or drops its ``ETag``) is a ``DataError``, also for an unpickled volume;
  a server with no validator at all is a warning at open; ``If-Match`` /
  ``If-Unmodified-Since`` go with every later request;
- ``s3://b/dd/x/../y.jnrrd`` is one spelling for writer and reader (refused);
- remote keys with a long last part or a newline, and a detached dataset rewritten while it
  is read, end in ``JnrrdError``;
- a server without ``Range`` support gets an error saying what to do;
- redirects (same host by default, ``follow_redirects``), timeouts (defaults 10 s / 30 s,
  ``read_timeout``), identity encoding on every request.

Servers: tests/http_server.py (correct), tests/hostile_http.py (scripted), moto's S3
(tests/s3_server.py), fsspec's ``memory://``; all on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import pickle
import time
import warnings

import numpy as np
import pytest
from hostile_http import Behaviour, HostileServer
from http_server import RangeServer
from memory_peak import measured
from remote_cases import io_settings

import jnrrd
from jnrrd.errors import JnrrdWarning
from jnrrd.policy import Policy

fsspec = pytest.importorskip("fsspec")
pytest.importorskip("aiohttp")

#: (and every test here runs through both backends of remote reads: tests/conftest.py)
pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("remote_backend")]

SECRET = bytes([7, 8, 9, 10])


def _header(**fields) -> bytes:
    items = [{"jnrrd": "0004"}, {"type": "uint8"}, {"dimension": 1}, {"sizes": [4]},
             {"encoding": "raw"}] + [{k: v} for k, v in fields.items()]
    return "".join(json.dumps(x) + "\n" for x in items).encode() + b"\n"


def _external(pattern: str, base_dir: str | None = None) -> bytes:
    tile = {"tile:enabled": True, "tile:dimensions": [0], "tile:sizes": [4],
            "tile:storage": "external", "tile:pattern": pattern}
    if base_dir is not None:
        tile["tile:base_dir"] = base_dir
    return _header(extensions={"tile": "https://jnrrd.org/extensions/tile/v1.0.0"}, **tile)


def _outside(server: RangeServer) -> list[str]:
    """Paths the server was asked for outside /ok/t1/."""
    return [r.path for r in server.records if not r.path.startswith("/ok/t1/")]


# -- 1. path escape through percent-encoding ----------------------------------------------------

ESCAPES = ["%2e%2e/elsewhere/det.raw", ".%2e/elsewhere/det.raw", "%2E%2E/elsewhere/det.raw",
           "..%2Felsewhere/det.raw", "%252e%252e/elsewhere/det.raw",
           "a/%2e%2e/%2e%2e/elsewhere/det.raw", "%2e%2e%2felsewhere%2fdet.raw",
           "..%5Celsewhere%5Cdet.raw", "%2e%2e;x/elsewhere/det.raw"]


@pytest.mark.slow
@pytest.mark.parametrize("key", ESCAPES)
def test_percent_encoded_data_file_cannot_leave_the_headers_directory(key):
    site = {"ok/t1/h.jnrrd": _header(data_file=key), "ok/elsewhere/det.raw": SECRET}
    with RangeServer(site) as server:
        url = server.url + "/ok/t1/h.jnrrd"
        with pytest.raises(jnrrd.SecurityError):
            jnrrd.read(url)
        with pytest.raises(jnrrd.SecurityError):
            jnrrd.open(url)
        problems = jnrrd.validate(url)
        assert any(p.severity == "error" and p.field == "data_file" for p in problems), problems
        assert _outside(server) == []


@pytest.mark.parametrize("pattern", ["%2e%2e/elsewhere/{x}.raw", ".%2e/elsewhere/{x}.raw",
                                     "%2e%2e%2Felsewhere/{x}.raw"])
@pytest.mark.parametrize("how", ["read", "open", "validate", "fill"])
def test_percent_encoded_tile_pattern_cannot_leave_the_headers_directory(pattern, how):
    site = {"ok/t1/h.jnrrd": _external(pattern), "ok/elsewhere/0.raw": SECRET}
    with RangeServer(site) as server:
        url = server.url + "/ok/t1/h.jnrrd"
        if how == "validate":
            problems = jnrrd.validate(url)
            assert any(p.severity == "error" and p.field == "tile:pattern"
                       for p in problems), problems
            try:  # deep: a report or a SecurityError, never a request outside
                problems = jnrrd.validate(url, deep=True)
            except jnrrd.SecurityError:
                pass
            else:
                assert any(p.severity == "error" for p in problems), problems
        else:
            with pytest.raises(jnrrd.SecurityError):
                if how == "read":
                    jnrrd.read(url)
                else:
                    with jnrrd.open(url, missing="fill" if how == "fill" else "error") as v:
                        v[...]
        assert _outside(server) == []


def test_percent_encoded_base_dir_cannot_leave_the_headers_directory():
    site = {"ok/t1/h.jnrrd": _external("{x}.raw", base_dir="%2e%2e/elsewhere"),
            "ok/elsewhere/0.raw": SECRET}
    with RangeServer(site) as server:
        with pytest.raises(jnrrd.SecurityError):
            jnrrd.read(server.url + "/ok/t1/h.jnrrd")
        assert _outside(server) == []


@pytest.mark.parametrize("key", ["%2e%2e/elsewhere/det.raw", "..%2Felsewhere/det.raw"])
def test_percent_encoded_nhdr_data_file_cannot_leave_the_headers_directory(key):
    nhdr = (f"NRRD0004\ntype: uint8\ndimension: 1\nsizes: 4\nencoding: raw\n"
            f"data file: {key}\n\n").encode()
    site = {"ok/t1/h.nhdr": nhdr, "ok/elsewhere/det.raw": SECRET}
    with RangeServer(site) as server:
        with pytest.raises(jnrrd.SecurityError):
            jnrrd.read(server.url + "/ok/t1/h.nhdr")
        assert _outside(server) == []


def test_encoded_keys_opt_in_reads_a_confined_key_and_still_refuses_an_escape():
    site = {"ok/t1/h.jnrrd": _header(data_file="sub%2Fdet.raw"), "ok/t1/sub/det.raw": SECRET,
            "ok/t1/up.jnrrd": _header(data_file="%2e%2e/elsewhere/det.raw"),
            "ok/elsewhere/det.raw": SECRET}
    with RangeServer(site) as server:
        with pytest.raises(jnrrd.SecurityError, match="allow_encoded_keys"):
            jnrrd.read(server.url + "/ok/t1/h.jnrrd")
        got, _ = jnrrd.read(server.url + "/ok/t1/h.jnrrd", allow_encoded_keys=True)
        assert got.tobytes() == SECRET
        with pytest.raises(jnrrd.SecurityError, match="allow_parent"):
            jnrrd.read(server.url + "/ok/t1/up.jnrrd", allow_encoded_keys=True)
        assert _outside(server) == []


#: (key, policy keywords, the key handed on, or None when refused)
CONFINE_CASES = [
    ("t/0_0.tile", {}, "t/0_0.tile"),
    ("t/./a/../0.tile", {}, "t/0.tile"),
    ("scan%20a.raw", {}, "scan%20a.raw"),  # an escape of no separator or dot segment
    ("v%2eraw", {}, "v%2eraw"),
    ("%2e%2e/x", {}, None),
    ("%2e%2e/x", {"allow_parent": True}, None),
    ("%2e%2e/x", {"allow_parent": True, "allow_encoded_keys": True}, "%2e%2e/x"),
    ("a/%2e%2e/x", {"allow_encoded_keys": True}, "a/%2e%2e/x"),
    ("a/%2e%2e/%2e%2e/x", {"allow_encoded_keys": True}, None),
    ("a%2Fb/%2e%2e/%2e%2e", {"allow_encoded_keys": True}, None),  # yarl's reading climbs
    ("%25252e%25252e/x", {}, None),
    ("%" + "25" * 9 + "2e", {"allow_encoded_keys": True}, None),  # encoded too often
    ("..?x", {}, None),  # "?" ends an HTTP path: the server sees ".."
    ("..#x", {}, None),
    ("..;x/y", {}, None),  # ";params" dropped by Java servers
    ("%2F%2Fhost/x", {"allow_encoded_keys": True}, None),
    ("%2Fabs", {"allow_encoded_keys": True, "allow_absolute": True}, "%2Fabs"),
    ("a%00b", {}, None),
    ("a%0Ab", {}, None),
    ("a\nb", {}, None),
    ("a%5Cb", {"allow_encoded_keys": True}, None),
    ("https%3A//elsewhere/x", {}, None),
]


@pytest.mark.slow
@pytest.mark.parametrize(("key", "opts", "want"), CONFINE_CASES)
def test_confine_key_reads_every_way_the_server_may(key, opts, want):
    from jnrrd.storage.keys import confine_key

    policy = Policy.from_kwargs(**opts)
    if want is None:
        with pytest.raises(jnrrd.SecurityError):
            confine_key(key, policy)
    else:
        assert confine_key(key, policy).path == want


# -- 3. endless bodies --------------------------------------------------------------------------

def _big_pair() -> tuple[np.ndarray, bytes, bytes]:
    """Two versions of one raw tiled file, the same size (~1.2 MB: several requests)."""
    import tempfile

    a = np.arange(96 * 80 * 64, dtype=np.uint16).reshape(96, 80, 64) % 4001
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "v.jnrrd")
        jnrrd.write(path, a, tile=32)
        with open(path, "rb") as f:
            one = f.read()
        jnrrd.write(path, a[::-1].copy(), tile=32)
        with open(path, "rb") as f:
            two = f.read()
    assert len(one) == len(two) and one != two
    return a, one, two


@pytest.fixture(scope="module")
def pair():
    return _big_pair()


@pytest.fixture
def hostile(pair):
    a, one, two = pair
    with HostileServer({"v.jnrrd": (one, two)}, endless_cap=1 << 30) as server:
        yield server, a


def _peak(fn):
    """(result or exception, seconds, peak bytes: tracemalloc's, or under obstore the
    resident set's, tests/memory_peak.py) of ``fn()``."""
    stats: dict[str, int] = {}
    with measured(stats):
        t0 = time.perf_counter()
        try:
            out = fn()
        except Exception as exc:  # judged by the caller
            out = exc
        seconds = time.perf_counter() - t0
    return out, seconds, stats["peak"]


ENDLESS = {
    "no length": Behaviour(length="drop", body="endless"),
    "huge Content-Length": Behaviour(length="huge", body="endless"),
    "chunked": Behaviour(chunked=True, body="endless"),
}


@pytest.fixture(scope="module")
def external_pair(tmp_path_factory):
    """Two versions of an external-tile dataset (header and tile objects)."""
    a = np.arange(40 * 30, dtype=np.uint16).reshape(40, 30)
    files = []
    for k, arr in enumerate((a, a[::-1].copy())):
        d = tmp_path_factory.mktemp(f"ext{k}")
        jnrrd.write(d / "e.jnrrd", arr, tile=8, storage="external",
                    header={"tile:pattern": "t/{x}_{y}.raw"})
        files.append({p.relative_to(d).as_posix(): p.read_bytes()
                      for p in sorted(d.rglob("*")) if p.is_file()})
    one, two = files  # the same names but for the fresh token: paired in order
    site = {name: (data, data if name == "e.jnrrd" else other)
            for (name, data), other in zip(one.items(), two.values(), strict=True)}
    return a, site


def _bounded(out, seconds, peak, a):
    assert isinstance(out, (jnrrd.JnrrdError, tuple)), repr(out)
    if isinstance(out, tuple):
        np.testing.assert_array_equal(out[0], a)
    assert seconds < 10 and peak < 48 << 20, (seconds, peak)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("shape", ENDLESS)
def test_an_endless_body_costs_the_first_block_not_the_stream(hostile, shape):
    """Default settings: the first request answered with 206 and the right Content-Range,
    then a body that does not end."""
    server, a = hostile
    server.load([ENDLESS[shape]])
    _bounded(*_peak(lambda: jnrrd.read(server.url_for("v.jnrrd"))), a)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("shape", ENDLESS)
def test_an_endless_body_costs_an_external_tile_not_the_stream(external_pair, shape):
    """Default settings: every tile object answered with 206, its Content-Range right, then
    a body that does not end (a tile is asked for whole: the request is its size bound)."""
    a, site = external_pair
    with HostileServer(site, endless_cap=1 << 30) as server:
        server.load([ENDLESS[shape]], only="t/")
        _bounded(*_peak(lambda: jnrrd.read(server.url_for("e.jnrrd"))), a)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("shape", [*ENDLESS, "whole object"])
def test_endless_bodies_of_later_ranges_and_whole_answers_stay_bounded(hostile, shape):
    """The same for a range after the first block, and for a 200 (Range ignored) without a
    length at the first block."""
    server, a = hostile
    if shape == "whole object":
        server.load([Behaviour(status=200, length="drop", body="endless")])
    else:
        server.load([Behaviour(), ENDLESS[shape]])
    _bounded(*_peak(lambda: jnrrd.read(server.url_for("v.jnrrd"))), a)


@pytest.mark.timeout(30)
def test_a_trickled_body_ends_at_the_request_timeout(hostile):
    server, a = hostile
    server.load([Behaviour(), Behaviour(body="trickle")])
    out, seconds, peak = _peak(lambda: jnrrd.read(
        server.url_for("v.jnrrd"), io=io_settings(request_timeout=1.0)))
    assert isinstance(out, jnrrd.RemoteError) and "request_timeout" in str(out), repr(out)
    assert seconds < 5 and peak < 48 << 20


# -- 4. two versions mixed ----------------------------------------------------------------------

#: (first answer, later answers): versions the server gives, the object swapped after the first
MIXES = {
    "Last-Modified only": (Behaviour(etag="drop", swap=True, conditions=False),
                           Behaviour(etag="drop", conditions=False)),
    "ETag dropped after the first answer": (Behaviour(swap=True, conditions=False),
                                            Behaviour(etag="drop", last_modified="drop",
                                                      conditions=False)),
    "ETag kept, conditions ignored": (Behaviour(swap=True, conditions=False),
                                      Behaviour(conditions=False)),
}


@pytest.mark.parametrize("mix", MIXES)
@pytest.mark.parametrize("how", ["read", "open[:]"])
def test_an_object_swapped_between_answers_is_a_data_error(hostile, mix, how):
    server, a = hostile
    first, later = MIXES[mix]
    server.load([first] + [later] * 50)
    with pytest.raises(jnrrd.DataError, match="changed"):
        if how == "read":
            jnrrd.read(server.url_for("v.jnrrd"))
        else:
            with jnrrd.open(server.url_for("v.jnrrd"), cache_bytes=0) as vol:
                vol[:]


@pytest.mark.parametrize("when", ["before unpickling", "after unpickling"])
def test_an_unpickled_volume_keeps_the_version_check(hostile, when):
    """A server that sends only Last-Modified (and ignores conditions) swaps the object for
    one of the same size: the unpickled volume refuses it, at re-open or at its next read."""
    server, a = hostile
    only_date = Behaviour(etag="drop", conditions=False)
    server.load([only_date] * 50)
    with jnrrd.open(server.url_for("v.jnrrd"), cache_bytes=0) as vol:
        blob = pickle.dumps(vol)
    if when == "before unpickling":
        server.load([only_date] * 50)
        server.swap("v.jnrrd")  # version B from the first answer on
        with pytest.raises(jnrrd.DataError, match="changed"):
            pickle.loads(blob)
        return
    server.load([Behaviour(etag="drop", conditions=False, swap=True)] + [only_date] * 50)
    vol2 = pickle.loads(blob)  # the first answer is version A; the swap follows it
    with vol2, pytest.raises(jnrrd.DataError, match="changed"):
        vol2[...]


def test_later_requests_carry_the_version_conditions(hostile):
    server, a = hostile
    server.load([])
    np.testing.assert_array_equal(jnrrd.read(server.url_for("v.jnrrd"))[0], a)
    later = server.records[1:]
    assert later and all(r.headers.get("if-match", "").startswith('"') for r in later)
    server.load([Behaviour(etag="drop")] * 50)
    np.testing.assert_array_equal(jnrrd.read(server.url_for("v.jnrrd"))[0], a)
    assert all("if-unmodified-since" in r.headers for r in server.records[1:])
    server.load([Behaviour(swap=True)])  # a server that honours If-Match answers 412
    with pytest.raises(jnrrd.DataError, match="412"):
        jnrrd.read(server.url_for("v.jnrrd"))


def test_a_server_without_validators_is_a_warning_at_open(hostile):
    server, a = hostile
    server.load([Behaviour(etag="drop", last_modified="drop")] * 50)
    with pytest.warns(JnrrdWarning, match="neither an ETag nor a Last-Modified"):
        got, _ = jnrrd.read(server.url_for("v.jnrrd"))
    np.testing.assert_array_equal(got, a)


# -- 5. one spelling of a target ----------------------------------------------------------------

@pytest.fixture
def mem():
    fs = fsspec.filesystem("memory")
    root = f"/sec{os.getpid()}_{np.random.default_rng().integers(1 << 30)}"
    yield fs, root
    try:
        fs.rm(root, recursive=True)
    except FileNotFoundError:
        pass


TARGET_KINDS = [{"storage": "external", "tile": 4}, {"detached": True}, {}]


@pytest.mark.parametrize(("name", "kw"), [
    *[(n, kw) for n in ("dd/x/../y.jnrrd", "dd/./y.jnrrd", "dd//y.jnrrd",
                        "dd/x/%2e%2e/y.jnrrd") for kw in TARGET_KINDS],
    ("dd/x/../y.nhdr", {})])
def test_a_target_with_dot_segments_is_refused_before_anything_is_written(mem, name, kw):
    fs, root = mem
    url = f"memory://{root}/{name}"
    with pytest.raises(jnrrd.UnsupportedError, match=r"dd/y\.(jnrrd|nhdr)"):
        jnrrd.write(url, np.arange(8, dtype=np.uint8), **kw)
    with pytest.raises(jnrrd.UnsupportedError):
        jnrrd.read(url)
    assert not fs.exists(root) or fs.find(root) == []


def test_s3_external_write_to_a_dot_dot_key_is_refused(s3):
    url = s3.url("dd/x/../y.jnrrd")
    with pytest.raises(jnrrd.UnsupportedError, match="dd/y.jnrrd"):
        jnrrd.write(url, np.arange(8, dtype=np.uint8), storage="external", tile=4,
                    storage_options=s3.storage_options)
    fs = fsspec.filesystem("s3", **s3.storage_options)
    assert fs.find(s3.bucket) == []


@pytest.mark.parametrize("url", ["s3://b/x/../y.jnrrd", "memory://b/a//y.jnrrd",
                                 "https://h/a/./y.jnrrd?sig=1", "s3://b/a\nb.jnrrd"])
def test_check_object_url_refuses_every_second_spelling(url):
    from jnrrd.storage.keys import check_object_url

    with pytest.raises(jnrrd.UnsupportedError):
        check_object_url(url, url)


def test_check_object_url_ignores_the_query_of_an_http_url():
    from jnrrd.storage.keys import check_object_url

    check_object_url("https://h/a/y.jnrrd?x=../..", "https://h/a/y.jnrrd?x=../..")


# -- 11. remote keys ----------------------------------------------------------------------------

def test_a_key_whose_last_part_is_over_255_bytes_writes_and_reads_back(s3):
    url = s3.url("d/" + "k" * 300 + ".jnrrd")
    a = np.arange(24, dtype=np.uint8).reshape(4, 6)
    jnrrd.write(url, a, storage_options=s3.storage_options)
    np.testing.assert_array_equal(jnrrd.read(url, storage_options=s3.storage_options)[0], a)


@pytest.mark.parametrize("name", ["a\nb.jnrrd", "a\rb.jnrrd", "a\tb.jnrrd"])
def test_a_key_with_a_newline_is_a_jnrrd_error(s3, name):
    with pytest.raises(jnrrd.JnrrdError, match="control character"):
        jnrrd.write(s3.url(name), np.arange(4, dtype=np.uint8),
                    storage_options=s3.storage_options)


def test_a_failed_upload_is_a_jnrrd_error_that_keeps_its_builtin(mem, monkeypatch):
    from jnrrd.storage import remote_writes

    fs, root = mem

    def refuse(*args, **kwargs):
        raise FileNotFoundError(2, "upload failed")

    monkeypatch.setattr(type(fs), "put_file", refuse)
    with pytest.raises(FileNotFoundError) as info:
        jnrrd.write(f"memory://{root}/v.jnrrd", np.arange(4, dtype=np.uint8))
    assert isinstance(info.value, jnrrd.JnrrdError)
    assert isinstance(remote_writes._named(PermissionError(13, "no"), "upload", "s3://b/k"),
                      (jnrrd.JnrrdError, PermissionError))


@pytest.mark.parametrize("where", ["memory", "s3"])
@pytest.mark.parametrize("ext", [".jnrrd", ".nhdr"])
def test_reading_a_detached_dataset_while_it_is_rewritten_is_a_data_error(
        mem, request, monkeypatch, where, ext):
    """The data file of the version a reader opened disappears after its first block (a
    rewrite's tidy step): the next range request finds nothing. That is a changed object, a
    ``DataError``, not a bare ``FileNotFoundError``."""
    from jnrrd.storage.remote import RemoteReader

    if where == "s3":
        s3 = request.getfixturevalue("s3")
        url, opts = s3.url(f"v{ext}"), s3.storage_options
    else:
        url, opts = f"memory://{mem[1]}/v{ext}", None
    a = np.arange(120 * 100 * 40, dtype=np.uint16).reshape(120, 100, 40)
    jnrrd.write(url, a, detached=True, storage_options=opts)
    opened = RemoteReader.__init__

    def open_then_lose(self, fetcher, path, name, **kw):
        opened(self, fetcher, path, name, **kw)
        if not path.endswith(ext):  # the data file: gone after its first block (deleted
            # through fsspec, whichever backend reads it)
            from jnrrd.storage.remote import fsspec_filesystem

            fs, p = fsspec_filesystem(fetcher.fs.unstrip_protocol(path), opts)
            fs.rm_file(p)

    monkeypatch.setattr(RemoteReader, "__init__", open_then_lose)
    with jnrrd.open(url, storage_options=opts) as vol, \
            pytest.raises(jnrrd.DataError, match="disappeared"):
        vol[...]


# -- 13. a server without Range support ---------------------------------------------------------

def test_a_server_without_ranges_is_told_what_to_do(pair):
    _, one, two = pair
    with RangeServer({"v.jnrrd": one}) as server:
        server.fail("ignore_range")
        with pytest.raises(jnrrd.RemoteError, match="does not serve byte ranges: download the "
                           "file, or serve it with a server that does"):
            jnrrd.read(server.url_for("v.jnrrd"))


# -- decided and documented: redirects, timeouts, identity, pickles ---------------------------

def test_redirects_stay_on_the_same_host_unless_asked(hostile, remote_backend):
    """The rules of jnrrd's own client; under obstore (whose client follows redirects
    anywhere) a rule other than ``True`` reads through jnrrd's client, ``True`` through
    obstore's (docs/remote.md, "Backends")."""
    server, a = hostile
    rule = {"follow_redirects": "same-host"}  # the default (the obstore half's is True)
    server.load([Behaviour(redirect="same-host")])
    np.testing.assert_array_equal(jnrrd.read(server.url_for("v.jnrrd"), **rule)[0], a)
    server.load([Behaviour(redirect="other-host")])
    with pytest.raises(jnrrd.SecurityError, match="follow_redirects=True"):
        jnrrd.read(server.url_for("v.jnrrd"), **rule)
    assert [r.status for r in server.records] == [302]
    server.load([Behaviour(redirect="other-host")])
    np.testing.assert_array_equal(
        jnrrd.read(server.url_for("v.jnrrd"), follow_redirects=True)[0], a)
    server.load([Behaviour(redirect="same-host")])
    with pytest.raises(jnrrd.RemoteError, match="follow_redirects=False"):
        jnrrd.read(server.url_for("v.jnrrd"), follow_redirects=False)
    server.load([Behaviour(redirect="bad-scheme")])
    with pytest.raises(jnrrd.SecurityError, match="not an HTTP URL"):
        jnrrd.read(server.url_for("v.jnrrd"), follow_redirects=True)
    server.load([Behaviour(redirect="loop")] * 20)
    with pytest.raises(jnrrd.RemoteError, match="redirects"):
        jnrrd.read(server.url_for("v.jnrrd"))
    loops = [r for r in server.records if r.status == 302]
    assert 0 < len(loops) <= (11 if remote_backend == "obstore" else 6)  # bounded


def test_default_timeouts_are_ones_a_person_waits_for():
    p = Policy()
    assert (p.io.connect_timeout, p.io.read_timeout, p.io.request_timeout) == (10.0, 30.0, 60.0)
    assert p.follow_redirects == "same-host" and p.allow_encoded_keys is False


@pytest.mark.timeout(30)
def test_a_silent_server_fails_in_the_read_timeout(hostile):
    server, a = hostile
    server.load([Behaviour(), Behaviour(delay=5.0)])
    out, seconds, _ = _peak(lambda: jnrrd.read(server.url_for("v.jnrrd"),
                                               io=io_settings(read_timeout=0.5)))
    assert isinstance(out, jnrrd.RemoteError) and "read_timeout" in str(out), repr(out)
    assert seconds < 4


@pytest.mark.timeout(30)
def test_a_body_that_stalls_fails_in_the_read_timeout_without_a_retry(pair):
    """A timeout is not retried, also when it strikes while the body is read (obstore: its
    client's own timeout, told from a dropped connection)."""
    a, one, two = pair
    with HostileServer({"v.jnrrd": (one, two)}, trickle_interval=1.0) as server:
        server.load([Behaviour(), Behaviour(body="trickle")])
        out, seconds, _ = _peak(lambda: jnrrd.read(server.url_for("v.jnrrd"),
                                                   io=io_settings(read_timeout=0.3)))
    assert isinstance(out, jnrrd.RemoteError) and "read_timeout" in str(out), repr(out)
    assert seconds < 4


@pytest.mark.parametrize("knob", ["connect_timeout", "read_timeout"])
@pytest.mark.parametrize("value", [0, -1, float("inf"), "5", True])
def test_timeouts_are_checked(knob, value):
    with pytest.raises(ValueError, match=knob):
        jnrrd.IOSettings(**{knob: value})


def test_follow_redirects_is_checked():
    with pytest.raises(ValueError, match="follow_redirects"):
        Policy.from_kwargs(follow_redirects="anywhere")


class GzipWholeAnswers(RangeServer):
    """A server that gzip-encodes every answer without a Range (as servers that compress
    whole answers on the fly do), whatever the request's Accept-Encoding."""

    def _serve(self, h, method, path):
        import gzip

        found = self._lookup(path)
        if found is None or h.headers.get("Range"):
            return super()._serve(h, method, path)
        data = found[0] if isinstance(found[0], bytes) else found[0].read_bytes()
        body = gzip.compress(data, mtime=0)
        h.send_response(200)
        h.send_header("Content-Encoding", "gzip")
        h.send_header("ETag", found[2])
        h.send_header("Content-Length", str(len(body)))
        self._record(method, path, None, 200, len(body), None)
        h.end_headers()
        if method == "GET":
            h.wfile.write(body)
        return None


@pytest.mark.parametrize("deep", [False, True])
def test_validate_finds_every_external_tile_of_a_server_that_gzips(tmp_path, deep):
    """Every request is ranged and asks for identity: tiles are found (and read)."""
    a = np.arange(16 * 12, dtype=np.uint16).reshape(16, 12)
    jnrrd.write(tmp_path / "e.jnrrd", a, tile=4, storage="external")
    with GzipWholeAnswers(tmp_path) as server:
        problems = jnrrd.validate(server.url_for("e.jnrrd"), deep=deep)
        assert [p for p in problems if p.severity == "error"] == [], problems
        assert all(r.range_header for r in server.records)


def test_an_encoded_answer_to_a_ranged_read_is_refused(hostile):
    server, a = hostile
    server.load([Behaviour(), Behaviour(encoding="gzip")])
    with pytest.raises(jnrrd.RemoteError, match="Content-Encoding"):
        jnrrd.read(server.url_for("v.jnrrd"))
    assert all(r.headers.get("accept-encoding") == "identity" for r in server.records)
    server.load([Behaviour(), Behaviour(encoding="br")])  # claimed, not applied: refused or
    try:  # failed by the client's decoder and retried: never other bytes
        np.testing.assert_array_equal(jnrrd.read(server.url_for("v.jnrrd"))[0], a)
    except jnrrd.RemoteError:
        pass


def test_the_policy_a_pickle_carries_is_the_callers(hostile):
    """Unpickling is trusted input (docs/security.md): the opt-ins travel with the pickle."""
    server, a = hostile
    server.load([])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with jnrrd.open(server.url_for("v.jnrrd"), allow_parent=True,
                        follow_redirects=False) as vol:
            again = pickle.loads(pickle.dumps(vol))
    with again.volume if hasattr(again, "volume") else again as v2:
        policy = dict(v2.reopen.policy)
    assert policy["allow_parent"] is True and policy["follow_redirects"] is False
