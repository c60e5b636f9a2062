"""How a served answer ends before its time: a stream by its deadline or by a failure no
error class names (with the API's own error event, not a cut connection), a whole reply when
the client goes away (its upstream call cancelled)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import sniffio
from starlette.requests import ClientDisconnect, Request

from metis.core.raised import is_cancellation
from metis.errors import AdapterError
from metis.gateway.coalesce import CoalescingStream
from metis.gateway.metrics import Metrics
from metis.gateway.service import StreamResult, aclose_shielded

log = logging.getLogger("metis.gateway")
T = TypeVar("T")
LAST_WORD_SECONDS = 5.0
"""The longest the error event ending a stream cut short waits for the client to take it."""


class DeadlineStream(CoalescingStream):
    """A stream that ends by its deadline: with the API's own error event when the upstream
    call runs past it (the upstream call is cancelled, as when the client goes away), or
    when it fails in a way no error class names (a bug: logged, and the client told, not
    left with a connection cut in the middle of a stream). Each is counted in its class."""

    def __init__(self, result: StreamResult, metrics: Metrics, api: str) -> None:
        super().__init__(result.chunks, headers=result.headers)
        self.result, self.metrics, self.api = result, metrics, api

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await self._send_all(scope, receive, send)
        finally:  # its ending (the key's place given back, the upstream closed), however left
            await aclose_shielded(self.result.chunks)

    async def _send_all(self, scope: Any, receive: Any, send: Any) -> None:
        started: list[bool] = []

        async def sending(message: Any) -> None:
            started.append(message["type"] == "http.response.body" and not message.get("more_body"))
            await send(message)

        try:
            with anyio.move_on_after(self.result.deadline - anyio.current_time()) as scope_:
                await super().__call__(scope, receive, sending)
        except ClientDisconnect:  # ASGI 2.4: the client went away; no one is there to tell
            return
        except BaseException as exc:
            if not started or not answerable(exc):
                raise
            log.exception("gateway stream failed", extra={"event": "metis.gateway.error"})
            await self._end(AdapterError("internal gateway error"), send, started[-1])
            return
        if scope_.cancelled_caught and started:
            await self._end(self.result.limit.exceeded(), send, started[-1])

    async def _end(self, error: AdapterError, send: Any, sent_all: bool) -> None:
        """The stream ended by ``error``: its error event, unless all of it was sent already;
        counted unless the stream counted its own end (the cut came as that went out)."""
        if sent_all:
            return
        if not self.result.ended():
            self.metrics.error(self.api, error)
        body = self.result.failed(error)
        await last_word(send, {"type": "http.response.body", "body": body, "more_body": False})


def answerable(error: BaseException) -> bool:
    """Whether ``error``, raised while a request is answered, is a failure the caller is told
    in its API's shape (the gateway's own, when no error class names it): any but the
    process's exit (``KeyboardInterrupt``, ``SystemExit``, never swallowed), a generator's
    close and the task's cancellation. A stage's own ``BaseException``, or a
    ``CancelledError`` no one cancelled the request for (of a task the stage awaited), is
    such a failure: let out, the server would answer it in text of its own, or cut the stream."""
    if isinstance(error, Exception):
        return True
    if isinstance(error, BaseExceptionGroup):
        return all(answerable(inner) for inner in error.exceptions)
    if isinstance(error, (KeyboardInterrupt, SystemExit, GeneratorExit)):
        return False
    return not is_cancellation(error)


async def last_word(send: Any, *messages: dict[str, Any]) -> None:
    """``messages`` sent to end an answer cut short, each given up when the client is gone
    too, or when it takes none of them in :data:`LAST_WORD_SECONDS` (a client that stopped
    reading without closing: the request ends, and the server drops its connection)."""
    with contextlib.suppress(OSError), anyio.move_on_after(LAST_WORD_SECONDS):
        for message in messages:
            await send(message)


async def until_disconnect(request: Request, work: Awaitable[T]) -> T | None:
    """``work``'s result, or None when the client disconnects first (``work`` is cancelled,
    and the upstream call with it): a whole-body reply has no stream to notice it.

    Under asyncio (the server) ``work`` runs in the request's own task, and the disconnect is
    awaited by a bare task whose ending cancels ``work``'s scope from the loop, as a deadline
    does: no task group, and no second task for ``work``."""
    return (await watched(request, work, keep=False))[0]


async def watched(
    request: Request, work: Awaitable[T], keep: bool = True
) -> tuple[T | None, asyncio.Task[None] | None]:
    """:func:`until_disconnect`, and its watch of the disconnect still running when ``keep``
    (asyncio): a stream's answer goes on watching with it, not with a task of its own."""
    if sniffio.current_async_library() != "asyncio":
        return await _grouped(request, work), None
    watch = asyncio.get_running_loop().create_task(_disconnected(request.receive))
    with anyio.CancelScope() as scope:
        cancel = _cancelling(scope)
        watch.add_done_callback(cancel)
        try:
            found = await work
        except BaseException:
            watch.remove_done_callback(cancel)
            watch.cancel()
            raise
        watch.remove_done_callback(cancel)
        if not keep:
            watch.cancel()
        return found, watch if keep else None
    if not watch.cancelled() and (error := watch.exception()) is not None:
        raise error
    return None, None


async def _disconnected(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _cancelling(scope: anyio.CancelScope) -> Callable[[asyncio.Task[None]], None]:
    def cancel(watch: asyncio.Task[None]) -> None:
        if not watch.cancelled():
            scope.cancel()

    return cancel


async def _grouped(request: Request, work: Awaitable[T]) -> T | None:
    """:func:`until_disconnect` with ``work`` in a task of its own (trio)."""
    found: list[T] = []
    failed: list[BaseException] = []

    async def run(scope: anyio.CancelScope) -> None:
        try:
            found.append(await work)
        except BaseException as exc:  # raised below, outside the task group (not in a group)
            if is_cancellation(exc):
                raise
            failed.append(exc)
        finally:
            scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(run, group.cancel_scope)
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                group.cancel_scope.cancel()
                break
    if failed:
        raise failed[0]
    return found[0] if found else None
