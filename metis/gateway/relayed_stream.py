"""A passed-through stream's answer, served as a plain ASGI callable in the request's own task
(docs/gateway.md, "The server"): each read of the upstream is relayed and written at once,
with no second task, no task group and no Starlette send wrappers in between.

A pass-through read holds all that arrived since the last (metis/transport/http1.py), so
its events are already written together as they are ready (what
:class:`~metis.gateway.joined_stream.JoinedStream` does for a translated stream, whose writer
makes one chunk an event, by overriding :meth:`RelayedStream._relay`); while a write waits
on a slow client nothing more is read from the upstream. The client's disconnect is watched
by one small task waiting on ``receive`` (before ASGI 2.4 nothing else says it): it cancels
the stream, and the upstream call with it. Under asyncio (the server) that task is a bare one;
an application run by trio starts it in a task group round the stream.
The stream ends by its deadline as :class:`~metis.gateway.endings.DeadlineStream` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from functools import partial
from typing import Any, Protocol

import anyio
import anyio.abc
import sniffio

from metis.errors import AdapterError
from metis.gateway.begun import finished
from metis.gateway.endings import answerable, last_word
from metis.gateway.metrics import Metrics
from metis.gateway.service import StreamResult

log = logging.getLogger("metis.gateway")


class RelayedStream:
    """The answer of ``result``, written as it is read; ``headers`` may be added to until
    it is sent. Ended by the API's own error event when it runs past its deadline or fails
    in a way no error class names (logged, and counted in its class)."""

    status_code = 200

    def __init__(
        self,
        result: StreamResult,
        metrics: Metrics,
        api: str,
        watch: asyncio.Task[None] | None = None,
    ) -> None:
        self.result, self.metrics, self.api = result, metrics, api
        self.headers = {name.lower(): value for name, value in result.headers.items()}
        self.watch = watch
        """The disconnect's watch that waited for the stream's opening, still running
        (metis.gateway.endings.watched): the stream's own, with no new task."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if sniffio.current_async_library() == "asyncio":
            await self._serve(scope, receive, send, asyncio.get_running_loop().create_task)
            return
        async with anyio.create_task_group() as group:  # the application run by trio
            await self._serve(scope, receive, send, partial(_started_in, group))
            group.cancel_scope.cancel()

    async def _serve(self, scope: Any, receive: Any, send: Any, start: _Start) -> None:
        """The stream served, its client's disconnect watched by the task ``start`` begins."""
        result, chunks = self.result, self.result.chunks
        sent: list[bool] = []  # each message tried: whether it was the last
        gone: list[bool] = []  # the client disconnected: nothing more is sent
        write = _Writes(send, sent)

        with anyio.CancelScope(deadline=result.deadline) as cancel:
            watch: _Watch
            if self.watch is not None:
                watch = _handed(self.watch, cancel, gone)
            else:
                watch = start(_watch(receive, cancel, gone))
            try:
                first = await anext(chunks, None)  # begun: its ending runs however it is left
                sent.append(False)
                await send(self._start())
                if first is not None:
                    await self._relay(first, chunks, write)
                watch.cancel()
                sent.append(True)
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            except BaseException as exc:
                if isinstance(exc, OSError) and _spec(scope) >= (2, 4):
                    return  # ASGI 2.4: the server's send says the client went away
                if not sent or not answerable(exc):
                    raise
                log.exception("gateway stream failed", extra={"event": "metis.gateway.error"})
                await self._end(AdapterError("internal gateway error"), send, sent[-1])
                return
            finally:
                watch.cancel()
                if not finished(chunks):  # its ending runs whole, whatever cancels the stream
                    with anyio.CancelScope(shield=True):
                        await chunks.aclose()  # type: ignore[attr-defined]
        if cancel.cancelled_caught and not gone:  # the head too, if it came before any chunk
            ended = result.limit.exceeded()
            await self._end(ended, send, bool(sent) and sent[-1], None if sent else self._start())

    def _start(self) -> dict[str, Any]:
        """The answer's head: made when sent, so a stream in flight does not hold it."""
        head = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in self.headers.items()]
        return {"type": "http.response.start", "status": 200, "headers": head}

    def _relay(
        self, first: bytes, chunks: AsyncIterator[bytes], write: Callable[[bytes], Awaitable[None]]
    ) -> Awaitable[None]:
        """Awaited: every chunk written, ``first`` first, each as it is read."""
        return _relayed(first, chunks, write)

    async def _end(self, error: AdapterError, send: Any, sent_all: bool, head: Any = None) -> None:
        """The stream ended by ``error``: its error event (after ``head``, when the head has
        not been sent), unless all of it was sent already; counted unless the stream counted
        its own end (the cut came as that went out)."""
        if sent_all:
            return
        if not self.result.ended():
            self.metrics.error(self.api, error)
        body = {"type": "http.response.body", "body": self.result.failed(error), "more_body": False}
        await last_word(send, *((head, body) if head is not None else (body,)))


async def _relayed(
    first: bytes, chunks: AsyncIterator[bytes], write: Callable[[bytes], Awaitable[None]]
) -> None:
    chunk: bytes | None = first
    while chunk is not None:
        await write(chunk)
        chunk = await anext(chunks, None)


class _Writes:
    """Awaited with a chunk: the chunk sent as more of the body, and said in ``sent`` (one
    small object a stream in flight, not a closure and its cells)."""

    __slots__ = ("_send", "_sent")

    def __init__(self, send: Any, sent: list[bool]) -> None:
        self._send, self._sent = send, sent

    def __call__(self, body: bytes) -> Awaitable[None]:
        self._sent.append(False)
        return self._send({"type": "http.response.body", "body": body, "more_body": True})  # type: ignore[no-any-return]


class _Watch(Protocol):
    def cancel(self) -> object: ...


_Start = Callable[[Coroutine[Any, Any, None]], _Watch]
"""Begins the disconnect's watch in a task of its own."""


def _started_in(group: anyio.abc.TaskGroup, watch: Coroutine[Any, Any, None]) -> anyio.CancelScope:
    """``watch`` run in a task of ``group``, cancelled by the scope returned."""
    scope = anyio.CancelScope()
    group.start_soon(_within, scope, watch)
    return scope


async def _within(scope: anyio.CancelScope, watch: Coroutine[Any, Any, None]) -> None:
    with scope:
        await watch


def _spec(scope: Any) -> tuple[int, ...]:
    return tuple(map(int, scope.get("asgi", {}).get("spec_version", "2.0").split(".")))


def _handed(
    watch: asyncio.Task[None], stream: anyio.CancelScope, gone: list[bool]
) -> asyncio.Task[None]:
    """``watch``, a task waiting for the client's disconnect, made to cancel ``stream`` when
    it comes, as :func:`_watch` does (a failure to say it: the stream goes on)."""

    def ended(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is None:
            gone.append(True)
            stream.cancel()

    watch.add_done_callback(ended)
    return watch


async def _watch(receive: Any, stream: anyio.CancelScope, gone: list[bool]) -> None:
    """Waits for the client's disconnect, then cancels ``stream``."""
    with contextlib.suppress(Exception):  # a server that fails to say it: the stream goes on
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.append(True)
        stream.cancel()
