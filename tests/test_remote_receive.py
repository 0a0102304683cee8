"""How remote bytes are received and handed to the decoders.

- Tiles are decoded in the order their bytes arrive (jnrrd/engine/sources.py, ``Arrivals``):
  a request that lags never holds the decoding threads while the bytes of other requests are
  there; every tile is decoded once; a request that never answers still ends in its own
  bounded wait.
- A body is taken piece by piece as the client buffered it (jnrrd/storage/bodies.py,
  ``read_exact``; remote_http.py, ``_piece``): every byte copied once, HTTP chunk boundaries
  are not the body's end, and the bounds of issue 29 hold (a piece past the range is an
  error, a short body a retry)."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future

import numpy as np
import pytest
from http_server import RangeServer
from remote_cases import big_volume

import jnrrd
from jnrrd.engine import tiles
from jnrrd.engine.sources import Arrivals
from jnrrd.storage.bodies import LongBody, ShortBody, read_exact
from jnrrd.storage.objects import Ready
from jnrrd.storage.remote_fetch import Parts
from jnrrd.storage.remote_http import _piece

pytest.importorskip("aiohttp")


class _Pending:
    """A pending buffer of a store: a future, and ``when_ready`` on it."""

    def __init__(self) -> None:
        self.future: Future[bytes] = Future()

    def result(self) -> bytes:
        return self.future.result(timeout=10)

    def when_ready(self, fn) -> None:
        self.future.add_done_callback(lambda _: fn())


def _item(pending):
    return (("key", "data_file", 0, 1), pending)


def test_arrivals_hand_out_tiles_in_the_order_their_bytes_come() -> None:
    pending = [_Pending() for _ in range(4)]
    arrivals = Arrivals([_item(p) for p in pending])
    for i in (2, 0, 3, 1):
        pending[i].future.set_result(b"x")
    assert [arrivals.next() for _ in range(4)] == [2, 0, 3, 1]


def test_sparse_and_available_tiles_come_first() -> None:
    late = _Pending()
    arrivals = Arrivals([_item(late), None, _item(Ready(b"here"))])
    assert {arrivals.next(), arrivals.next()} == {1, 2}
    late.future.set_result(b"x")
    assert arrivals.next() == 0


def test_a_quiet_batch_hands_out_the_first_tile_left_once(monkeypatch) -> None:
    """Nothing arrives: after the quiet time the first tile not handed out is (its ``take``
    then waits within its request's bound); arriving later, it is not handed out again."""
    monkeypatch.setattr(Arrivals, "QUIET", 0.01)
    pending = [_Pending() for _ in range(3)]
    arrivals = Arrivals([_item(p) for p in pending])
    pending[1].future.set_result(b"x")
    assert arrivals.next() == 1
    assert arrivals.next() == 0  # nothing else came
    pending[0].future.set_result(b"x")
    pending[2].future.set_result(b"x")
    assert arrivals.next() == 2  # 0 was handed out already


def test_a_lagging_request_does_not_hold_the_others(tmp_path, monkeypatch) -> None:
    """One request of a full read stalls: every tile of the other requests is decoded before
    the first tile of the stalled one (decoding in request order would wait on it)."""
    a = big_volume(tmp_path / "v.jnrrd", n=128, tile=16)
    order: list[tuple[int, ...]] = []
    lock = threading.Lock()
    decode = tiles.TileDecoder.decode

    def recording(self, level, coords, *args, **kw):
        out = decode(self, level, coords, *args, **kw)
        with lock:
            order.append(coords)
        return out

    monkeypatch.setattr(tiles.TileDecoder, "decode", recording)
    with RangeServer(tmp_path) as server:
        with jnrrd.open(server.url_for("v.jnrrd"), cache_bytes=0, threads=2) as vol:
            spans = {c: (loc.offset, loc.offset + loc.size)
                     for c, loc in vol.levels[0].tile_locations()}
            fault = server.fail("stall", "/v.jnrrd", seconds=1.5, times=1)
            got = vol[...]
    np.testing.assert_array_equal(got, a)
    assert len(order) == len(spans) == 512 and len(server.ranges()) > 2
    first, last = (int(x) for x in fault.met[0].split("=")[1].split("-"))
    stalled = [c for c, (s, e) in spans.items() if first <= s and e <= last + 1]
    assert stalled and len(stalled) < len(spans)
    assert set(order[-len(stalled):]) == set(stalled)


class _Content:
    """aiohttp's ``StreamReader.readchunk`` as a list of answers."""

    def __init__(self, answers) -> None:
        self.answers = list(answers)

    async def readchunk(self):
        return self.answers.pop(0) if self.answers else (b"", False)


def _read_all(content, size, sink=None):
    return asyncio.run(read_exact(lambda _: _piece(content), size, sink))


def test_pieces_are_taken_as_buffered_and_chunk_ends_are_not_the_body_end() -> None:
    body = bytes(range(256)) * 4
    content = _Content([(body[:300], True), (b"", True), (body[300:700], False),
                        (body[700:], True)])
    assert bytes(_read_all(content, len(body))) == body
    sink = Parts([(0, 10), (500, 1024)])
    content = _Content([(body[:300], False), (b"", True), (body[300:], False)])
    got = _read_all(content, len(body), sink)
    assert bytes(got) == body and bytes(sink.futures[1].result()) == body[500:]


def test_a_piece_past_the_range_or_a_body_cut_short_is_refused() -> None:
    body = b"x" * 1000
    with pytest.raises(LongBody, match="more than the 1000 bytes"):
        _read_all(_Content([(body[:600], False), (body, False)]), 1000)
    with pytest.raises(ShortBody, match="ended early .600 of 1000"):
        _read_all(_Content([(body[:600], False), (b"", True), (b"", False)]), 1000)


def test_the_blocking_reader_keeps_the_same_bounds() -> None:
    # obstore's answers are read by blocking calls (remote_obstore_fetch.py): the same rules
    from jnrrd.storage.bodies import read_exact_blocking

    body = bytes(range(256)) * 4

    def pieces(*parts: bytes):
        left = list(parts)
        return lambda n: left.pop(0) if left else b""

    assert bytes(read_exact_blocking(pieces(body[:300], body[300:]), 1024)) == body
    sink = Parts([(0, 10), (500, 1024)])
    got = read_exact_blocking(pieces(body[:600], body[600:]), 1024, sink)
    assert bytes(got) == body and bytes(sink.futures[1].result()) == body[500:]
    assert sink.futures[0].done()
    with pytest.raises(LongBody, match="more than the 1024 bytes"):
        read_exact_blocking(pieces(body[:600], body), 1024)
    with pytest.raises(LongBody, match="more than the 1024 bytes"):
        read_exact_blocking(pieces(body), 1024, more=lambda: True)
    with pytest.raises(ShortBody, match="ended early .600 of 1024"):
        read_exact_blocking(pieces(body[:600]), 1024)
