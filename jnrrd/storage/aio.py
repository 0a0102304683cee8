"""The event loop remote requests run on, and the HTTP sessions of the fsspec backend.

Requests are coroutines on one event loop per process, run by a daemon thread
(:func:`loop`); a forked child starts its own. Blocking client calls (fsspec's synchronous
methods) run on the I/O pool (:func:`in_thread`), so a slow request never holds the loop.
HTTP requests use an ``aiohttp`` session of our own per set of ``storage_options``
(:func:`http_client`): fsspec's ``client_kwargs`` go to the session, ``get_client`` (a
coroutine function making the session) is honoured, ``encoded`` says the URLs are already
percent-encoded, and every other option but fsspec's caching and listing switches goes with
each request (``headers``, ``auth``, ``ssl``, ...). Only public APIs of fsspec and aiohttp
are used.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any

from .._threads import io_submit, start_daemon

__all__ = ["HttpClient", "http_client", "in_thread", "loop", "submit"]

#: fsspec HTTP options about its own caching, listing and loop: not request options
_FSSPEC_ONLY = {"simple_links", "block_size", "same_scheme", "size_policy", "cache_type",
                "cache_options", "asynchronous", "loop", "skip_instance_cache",
                "use_listings_cache", "listings_expiry_time", "max_paths"}

_lock = threading.Lock()
_state: dict[str, Any] = {}


def loop() -> asyncio.AbstractEventLoop:
    """The process's request loop (started on first use, again after a fork)."""
    with _lock:
        if _state.get("pid") != os.getpid():
            ev = asyncio.new_event_loop()
            start_daemon(ev.run_forever, name="jnrrd-aio-loop")
            _state.clear()
            _state.update(pid=os.getpid(), loop=ev, clients={})
        return _state["loop"]


def submit(coro: Coroutine[Any, Any, Any]) -> Future[Any]:
    """Run ``coro`` on the request loop; its future at once."""
    return asyncio.run_coroutine_threadsafe(coro, loop())


async def in_thread(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    """``fn(*args, **kw)`` on the I/O pool of :mod:`jnrrd._threads` (awaitable)."""
    return await asyncio.wrap_future(io_submit(lambda: fn(*args, **kw)))


class HttpClient:
    """An ``aiohttp`` session (made on the request loop when first used) and the options
    that go with each request."""

    def __init__(self, options: dict[str, Any]) -> None:
        opts = {k: v for k, v in options.items() if k not in _FSSPEC_ONLY}
        self.client_kwargs = dict(opts.pop("client_kwargs", None) or {})
        self.get_client = opts.pop("get_client", None)
        self.encoded = bool(opts.pop("encoded", False))
        self.request_kwargs = opts
        self._session: Any = None

    async def session(self) -> Any:
        """The session (on the running loop, the request loop)."""
        if self._session is None or self._session.closed:
            import aiohttp

            if self.get_client is not None:
                self._session = await self.get_client(**self.client_kwargs)
            else:
                self._session = aiohttp.ClientSession(**self.client_kwargs)
        return self._session

    def url(self, url: str) -> Any:
        """The URL as aiohttp sends it (already percent-encoded when ``encoded``)."""
        import yarl

        return yarl.URL(url, encoded=self.encoded)

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()


def http_client(options: dict[str, Any] | None) -> HttpClient:
    """The process's :class:`HttpClient` for these ``storage_options`` (one per distinct
    set, its connections reused by every object read with them)."""
    options = dict(options or {})
    key = repr(sorted(options.items(), key=lambda kv: kv[0]))
    loop()
    with _lock:
        clients = _state["clients"]
        client = clients.get(key)
        if client is None:
            client = clients[key] = HttpClient(options)
        return client


@atexit.register
def _close_sessions() -> None:
    """Close the sessions at exit (no "unclosed session" warnings), in bounded time."""
    if _state.get("pid") != os.getpid():
        return
    clients = list(_state.get("clients", {}).values())
    if not clients:
        return

    async def close_all() -> None:
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)

    try:
        submit(close_all()).result(timeout=2.0)
    except Exception:  # the loop is gone or stuck: nothing to wait for at exit
        pass
