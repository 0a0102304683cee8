"""``jnrrd.config`` and the typed settings (docs/api.md, "Configuration"): precedence (call
keyword > ``with jnrrd.config`` > ``jnrrd.config.set`` > built-in), isolation between threads
and asyncio tasks, the deprecated spellings (each still works, with a warning naming the new
one) and clear errors for unknown keywords."""

from __future__ import annotations

import asyncio
import threading
import warnings

import numpy as np
import pytest

import jnrrd
from jnrrd._config import MOVED_TO_IO, current
from jnrrd._threads import Running, default_threads, run_parallel, thread_count

SHAPE = (16, 16, 8)


@pytest.fixture(autouse=True)
def _fresh_defaults():
    jnrrd.config.reset()
    yield
    jnrrd.config.reset()


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    p = tmp_path_factory.mktemp("config") / "v.jnrrd"
    jnrrd.write(p, np.arange(np.prod(SHAPE), dtype="u2").reshape(SHAPE), tile=4,
                compression="zstd")
    return p


def _settings(vol) -> jnrrd.Policy:
    return vol.reopen.settings()


def test_builtin_defaults():
    pol = jnrrd.config.current()
    assert pol == jnrrd.Policy() and pol.io == jnrrd.IOSettings()
    assert pol.io.threads is None and thread_count() == default_threads() >= 1


def test_precedence_call_over_block_over_set_over_builtin(path):
    nbytes = int(np.prod(SHAPE)) * 2
    assert jnrrd.read(path)[0].shape == SHAPE  # built-in cap: 16 GiB
    jnrrd.config.set(max_bytes=nbytes - 1)
    with pytest.raises(jnrrd.UnsupportedError, match="max_bytes"):
        jnrrd.read(path)
    with jnrrd.config(max_bytes=nbytes):  # the block over the set default
        assert jnrrd.read(path)[0].shape == SHAPE
        with pytest.raises(jnrrd.UnsupportedError):  # the call's keyword over the block
            jnrrd.read(path, max_bytes=nbytes - 1)
    with pytest.raises(jnrrd.UnsupportedError):
        jnrrd.read(path)  # the block ended: the set default again
    assert jnrrd.read(path, max_bytes=nbytes)[0].shape == SHAPE


def test_precedence_of_io_settings(path):
    jnrrd.config.set(threads=3, request_retries=4)
    with jnrrd.open(path) as vol:
        assert (_settings(vol).io.threads, _settings(vol).io.request_retries) == (3, 4)
    with jnrrd.config(threads=2):
        assert thread_count() == 2 and current().io.request_retries == 4
        with jnrrd.open(path, threads=1, cache_bytes=1 << 20) as vol:
            io = _settings(vol).io
            assert (io.threads, io.cache_bytes, io.request_retries) == (1, 1 << 20, 4)
            assert vol.cache_bytes == 1 << 20
        with jnrrd.open(path, io=jnrrd.IOSettings(request_retries=0)) as vol:
            # an io= object stands for all its fields: the configured threads do not apply
            assert _settings(vol).io == jnrrd.IOSettings(request_retries=0)
    assert thread_count() == 3 and thread_count(5) == 5


def test_a_policy_object_stands_for_every_policy_field(path):
    with jnrrd.config(max_bytes=1, threads=2):
        with jnrrd.open(path, policy=jnrrd.Policy(allow_parent=True)) as vol:
            pol = _settings(vol)
        assert pol.max_bytes == jnrrd.Policy().max_bytes and pol.allow_parent
        assert pol.io.threads == 2  # the I/O settings still come from the block
        with jnrrd.open(path, policy=jnrrd.Policy(), max_bytes=1 << 30) as vol:
            assert _settings(vol).max_bytes == 1 << 30  # a keyword over the object


def test_the_block_yields_the_settings_and_nests():
    with jnrrd.config(threads=2, max_tiles=10) as outer:
        assert outer.io.threads == 2 and outer.max_tiles == 10
        with jnrrd.config(io=jnrrd.IOSettings(threads=1)) as inner:
            assert inner.io.threads == 1 and inner.max_tiles == 10
        assert current().io.threads == 2
    assert current() == jnrrd.Policy()
    assert "threads=2" in repr(jnrrd.config) or repr(jnrrd.config) == "jnrrd.config()"


def test_threads_bound_the_workers(path):
    seen: set[int] = set()
    lock = threading.Lock()

    def task() -> None:
        with lock:
            seen.add(threading.get_ident())

    with jnrrd.config(threads=1):
        run_parallel([task] * 64)
        running = Running([task] * 64)
        running.wait()
    assert seen == {threading.get_ident()}  # one thread: the caller's
    from jnrrd.engine.volume import Volume

    calls: list[int] = []
    original = Volume._decoded

    def decoded(self, *args, **kwargs):
        calls.append(threading.get_ident())
        return original(self, *args, **kwargs)

    Volume._decoded = decoded  # type: ignore[method-assign]
    try:
        data = jnrrd.read(path, threads=1)[0]
    finally:
        Volume._decoded = original  # type: ignore[method-assign]
    assert len(calls) == 32 and set(calls) == {threading.get_ident()}
    assert data.shape == SHAPE


def test_write_and_convert_take_threads(path, tmp_path):
    a = np.arange(4096, dtype="i4").reshape(16, 16, 16)
    jnrrd.write(tmp_path / "t.jnrrd", a, tile=4, compression="zstd", threads=1)
    jnrrd.convert(tmp_path / "t.jnrrd", tmp_path / "c.jnrrd", threads=2, tile=8)
    assert (jnrrd.read(tmp_path / "c.jnrrd")[0] == a).all()
    assert not jnrrd.validate(tmp_path / "c.jnrrd", deep=True, threads=1)
    with pytest.raises(ValueError, match="threads"):
        jnrrd.write(tmp_path / "x.jnrrd", a, threads=0)


def test_blocks_are_per_thread_and_set_is_process_wide():
    inside, release = threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def holder() -> None:
        with jnrrd.config(threads=1, max_tiles=7):
            inside.set()
            release.wait(10)
            seen["holder"] = current().io.threads

    t = threading.Thread(target=holder)
    t.start()
    assert inside.wait(10)
    assert current().io.threads is None and current().max_tiles == jnrrd.Policy().max_tiles
    jnrrd.config.set(threads=4)

    def other() -> None:
        seen["other"] = current().io.threads

    o = threading.Thread(target=other)
    o.start()
    o.join(10)
    release.set()
    t.join(10)
    assert seen == {"holder": 1, "other": 4}  # the block wins in its thread; set everywhere


def test_asyncio_tasks_see_their_own_block():
    async def task(n: int) -> list[int | None]:
        got = []
        with jnrrd.config(threads=n):
            for _ in range(3):
                await asyncio.sleep(0)  # the other task runs in between
                got.append(current().io.threads)
        got.append(current().io.threads)
        return got

    async def both() -> list[list[int | None]]:
        return list(await asyncio.gather(task(1), task(2)))

    assert asyncio.run(both()) == [[1, 1, 1, None], [2, 2, 2, None]]


@pytest.mark.parametrize("name", MOVED_TO_IO)
@pytest.mark.parametrize("call", ["open", "read", "read_header", "validate"])
def test_every_old_spelling_works_and_warns(path, name, call):
    value = {"coalesce_gap": 4096, "request_concurrency": 3, "request_retries": 1}.get(name, 7.5)
    fn = getattr(jnrrd, call)
    with pytest.warns(DeprecationWarning, match=rf"io=jnrrd\.IOSettings\({name}=") as rec:
        out = fn(path, **{name: value})
    assert all(w.filename == __file__ for w in rec)  # the warning points at the caller
    if call == "open":
        with out:
            assert getattr(_settings(out).io, name) == value


def test_an_old_spelling_reaches_the_store():
    from jnrrd._config import settings_for

    with pytest.warns(DeprecationWarning, match="request_timeout"):
        pol = settings_for("jnrrd.read()", options={"request_timeout": 2.5,
                                                     "max_tiles": 9})
    assert pol.io.request_timeout == 2.5 and pol.max_tiles == 9


def test_the_old_tile_layout_spelling_still_works(tmp_path):
    a = np.zeros((8, 8), "u1")
    with pytest.warns(DeprecationWarning, match="tile_format"):
        jnrrd.write(tmp_path / "a.jnrrd", a, tile=4, format="chunked")
    assert jnrrd.read_header(tmp_path / "a.jnrrd")["tile:format"] == "chunked"


def test_the_new_spellings_do_not_warn(path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jnrrd.read(path, io=jnrrd.IOSettings(request_timeout=5.0), max_bytes=1 << 30)
        with jnrrd.config(request_timeout=5.0):
            jnrrd.read(path)


@pytest.mark.parametrize("call", [
    lambda p: jnrrd.read(p, max_byte=1),
    lambda p: jnrrd.open(p, max_byte=1),
    lambda p: jnrrd.read_header(p, max_byte=1),
    lambda p: jnrrd.validate(p, max_byte=1),
    lambda p: jnrrd.config(max_byte=1),
    lambda p: jnrrd.config.set(max_byte=1),
])
def test_unknown_keywords_name_themselves(path, call):
    with pytest.raises(TypeError, match=r"'max_byte'.*did you mean 'max_bytes'"):
        call(path)


@pytest.mark.parametrize("call", [jnrrd.read, jnrrd.open, jnrrd.read_header])
def test_an_io_setting_given_as_a_keyword_says_where_it_goes(path, call):
    with pytest.raises(TypeError, match=r"'remote_backend' is an I/O setting: pass "
                       r"io=jnrrd.IOSettings\(remote_backend=...\)"):
        call(path, remote_backend="fsspec")


def test_unknown_write_keyword_is_named(tmp_path):
    with pytest.raises(TypeError, match="tiles_stats"):
        jnrrd.write(tmp_path / "a.jnrrd", np.zeros(4), tiles_stats=True)  # type: ignore


@pytest.mark.parametrize(("settings", "error"), [
    ({"threads": 0}, ValueError), ({"threads": "2"}, TypeError), ({"threads": True}, TypeError),
    ({"cache_bytes": -1}, ValueError), ({"request_timeout": 0}, ValueError),
    ({"follow_redirects": "anywhere"}, ValueError), ({"bfloat16": "half"}, ValueError),
])
def test_bad_values_fail_where_given_and_change_nothing(settings, error):
    name = next(iter(settings))
    with pytest.raises(error, match=name):
        jnrrd.config.set(**settings)
    with pytest.raises(error, match=name):
        jnrrd.config(**settings)
    assert current() == jnrrd.Policy() and current().io == jnrrd.IOSettings()


def test_objects_are_typed_frozen_and_checked():
    io = jnrrd.IOSettings(threads=np.int64(2), cache_bytes=np.uint32(8))
    assert io.threads == 2 and type(io.threads) is int and type(io.cache_bytes) is int
    with pytest.raises(AttributeError):
        io.threads = 3  # type: ignore[misc]
    with pytest.raises(TypeError, match="policy must be a jnrrd.Policy"):
        jnrrd.config(policy=io)  # type: ignore[arg-type]
    assert hash(jnrrd.Policy().with_io(io)) != hash(jnrrd.Policy())


def test_the_config_name_is_the_object():
    from jnrrd import config
    from jnrrd._config import Config

    assert config is jnrrd.config and isinstance(config, Config)


def test_set_inside_a_block_changes_what_the_block_leaves_alone():
    with jnrrd.config(threads=2):
        jnrrd.config.set(threads=5, max_files=9)
        assert (current().io.threads, current().max_files) == (2, 9)
    assert (current().io.threads, current().max_files) == (5, 9)


def test_allowed_roots_take_one_path_or_many(tmp_path):
    one = jnrrd.Policy(allowed_roots=str(tmp_path))  # type: ignore[arg-type]
    many = jnrrd.Policy(allowed_roots=[tmp_path])  # type: ignore[arg-type]
    assert one.allowed_roots == many.allowed_roots == (str(tmp_path.resolve()),)
    assert hash(one) == hash(many) and jnrrd.Policy(allowed_roots=None).allowed_roots == ()  # type: ignore[arg-type]


def test_the_default_thread_count_is_the_cpus_the_process_may_use():
    from jnrrd._platform import available_cpus

    assert thread_count() == available_cpus()


def test_gzip_nrrd_writes_follow_threads(tmp_path, monkeypatch):
    from jnrrd.codecs import gzip_stream

    seen: list[int] = []

    def spy_on(original):
        def spy(*args, threads, **kwargs):
            seen.append(threads)
            return original(*args, threads=threads, **kwargs)
        return spy

    for name in ("gzip_buffer", "gzip_pieces"):
        monkeypatch.setattr(gzip_stream, name, spy_on(getattr(gzip_stream, name)))
    a = np.arange(4096, dtype="i2").reshape(16, 16, 16)
    jnrrd.write(tmp_path / "a.nrrd", a, encoding="gzip", threads=1)
    with jnrrd.config(threads=3):
        jnrrd.write(tmp_path / "b.nrrd", a, encoding="gzip")
    assert seen == [1, 3]
    assert (jnrrd.read(tmp_path / "b.nrrd")[0] == a).all()
