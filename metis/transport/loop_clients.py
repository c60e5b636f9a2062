"""An adapter's own HTTP clients, one per event loop.

A pool's connections belong to the event loop that opened them: a call over one of them from
another loop (the next ``asyncio.run`` of a script, a test, a worker) would wait for the first
loop forever. So the client an adapter makes for itself is the running loop's: made on the
first call there, closed when that loop ends (asyncio cancels its tasks at the end of
``asyncio.run``, trio its system tasks at the end of ``trio.run``), and made anew on the next
loop that calls.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, TypeGuard

import anyio

from metis.transport.clients import AsyncHTTPClient

if TYPE_CHECKING:
    import asyncio  # imported by a running asyncio loop, not with the adapter (~10 ms)


def own_client(timeout_seconds: float) -> AsyncHTTPClient:
    """A client as an adapter makes its own (metis/transport/stage.py ``http_client``); the
    send path's modules load with the first one, not with the adapter."""
    from metis.transport.stage import http_client

    return http_client(timeout_seconds)


def running_loop() -> object:
    """The running event loop's own token (an asyncio loop, a trio run's token), or None
    outside any."""
    try:
        return anyio.lowlevel.current_token().native_token
    except RuntimeError:
        return None


def is_asyncio_loop(loop: object) -> TypeGuard[asyncio.AbstractEventLoop]:
    """Whether ``loop`` is an asyncio loop; asyncio is not imported to answer (an asyncio
    loop has imported it; a trio run need not)."""
    module = sys.modules.get("asyncio")
    return module is not None and isinstance(loop, module.AbstractEventLoop)


class LoopClients:
    """The clients ``make`` makes, by the loop each serves. One asked for outside any loop
    (``adapter.http_client()`` at import time) is the one the first loop to call takes, and
    what was set on it (headers, query parameters, ...) is set on every later loop's."""

    def __init__(self, make: Callable[[], AsyncHTTPClient]) -> None:
        self._make = make
        self._by_loop: dict[object, AsyncHTTPClient] = {}
        self._outside: AsyncHTTPClient | None = None
        self._set_up: AsyncHTTPClient | None = None
        """The first client made outside any loop: what the application set on it."""
        self._lock = threading.Lock()  # loops in several threads ask at once

    def get(self) -> AsyncHTTPClient:
        loop = running_loop()
        with self._lock:
            if loop is None:
                if self._outside is None:
                    self._outside = self._make()
                    self._set_up = self._set_up or self._outside
                return self._outside
            client = self._by_loop.get(loop)
            if client is not None:
                return client
            self._forget_closed_loops()
            client, self._outside = self._outside or self._made_as_set_up(), None
            self._by_loop[loop] = client
        at_loop_end(loop, partial(self._close, loop, client), "metis: close a client")
        return client

    def _made_as_set_up(self) -> AsyncHTTPClient:
        client = self._make()
        if self._set_up is not None:
            set_up_like(client, self._set_up)
        return client

    def any_open(self) -> bool:
        return bool(self._by_loop) or self._outside is not None

    async def aclose(self) -> None:
        """Close the running loop's client (and one made outside any loop); another loop's
        is closed as that loop ends, by the task it has for it."""
        mine = self._by_loop.pop(running_loop(), None)
        outside, self._outside = self._outside, None
        self._by_loop.clear()
        for client in (mine, outside):
            if client is not None:
                await client.aclose()

    async def _close(self, loop: object, client: AsyncHTTPClient) -> None:
        self._by_loop.pop(loop, None)
        await client.aclose()

    def _forget_closed_loops(self) -> None:
        """An asyncio loop closed without ending its tasks never ran its client's close."""
        for loop in list(self._by_loop):
            if is_asyncio_loop(loop) and loop.is_closed():
                del self._by_loop[loop]


SET_UP = (
    *("headers", "params", "cookies", "auth", "event_hooks", "base_url", "timeout"),
    *("follow_redirects", "max_redirects"),
)
"""What an application sets on a client (httpx's and httpx2's settable properties), not its
transport and pool, which are its loop's."""


def set_up_like(client: AsyncHTTPClient, model: AsyncHTTPClient) -> None:
    """Set on ``client`` what is set on ``model``."""
    for name in SET_UP:
        setattr(client, name, getattr(model, name))


def at_loop_end(loop: object, end: Callable[[], Awaitable[object]], name: str) -> object:
    """Start what runs ``end`` when ``loop`` (the running one, :func:`running_loop`) ends: a
    task asyncio cancels when ``asyncio.run`` (or ``anyio.run``) finishes, returned, or a
    system task trio cancels at the end of ``trio.run`` (None)."""

    async def wait_for_the_end() -> None:
        try:
            await anyio.sleep_forever()
        except GeneratorExit:  # dropped with a loop that never ended it: nothing can run now
            raise
        except BaseException:  # cancelled: the loop is ending
            await end()
            raise

    if is_asyncio_loop(loop):
        task = loop.create_task(wait_for_the_end(), name=name)
        task._log_destroy_pending = False  # type: ignore[attr-defined]  # a loop closed unended
        return task
    import trio  # the only other backend anyio runs on

    trio.lowlevel.spawn_system_task(wait_for_the_end, name=name)
    return None
