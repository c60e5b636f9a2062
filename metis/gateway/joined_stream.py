"""A translated stream's answer, served in the request's own task (docs/gateway.md, "The
server"), the chunks that are ready together written in one piece.

The translated writer makes one chunk of each event, and one upstream read may hold many
events: written apiece they would cost a socket write each. Here, after each chunk, the
next is asked for at once; while it comes without waiting (the events of the same read,
or of reads already arrived), chunks are gathered. The first time it would wait (the
upstream has sent nothing more yet), what was gathered is written, and only then is that
wait let go on. So a chunk is never held back waiting for another, and no second task or
hand-off is needed to know where a read ends. While a write waits on a slow client, the
upstream read it was written before waits too; the deadline, the client's disconnect and
an unexpected failure end it as they end a :class:`RelayedStream`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from dataclasses import replace
from typing import Any

import sniffio

from metis.gateway.begun import next_of
from metis.gateway.endings import DeadlineStream
from metis.gateway.relayed_stream import RelayedStream

MAX_READY = 256
"""Chunks gathered at most before they are written (an upstream that is always ready)."""

Step = Generator[Any, Any, Any]
"""An awaitable's own iterator: what it yields goes to the event loop."""


class JoinedStream(RelayedStream):
    """The answer of a translated ``result``, its ready chunks written together (served by
    trio, where the server is not, a :class:`DeadlineStream`)."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if sniffio.current_async_library() != "asyncio":  # the app served by trio
            plain = DeadlineStream(
                replace(self.result, headers=self.headers), self.metrics, self.api
            )
            await plain(scope, receive, send)
            return
        # (served here, not through RelayedStream.__call__: one frame less at every event)
        await self._serve(scope, receive, send, asyncio.get_running_loop().create_task)

    def _relay(
        self, first: bytes, chunks: AsyncIterator[bytes], write: Callable[[bytes], Awaitable[None]]
    ) -> Awaitable[None]:
        return Joined(chunks, write, first)  # awaited by the stream itself: no frame between


class Joined:
    """Awaited: every chunk of ``chunks`` (after ``first``, already read) handed to
    ``write``, those ready together joined into one."""

    __slots__ = ("_chunks", "_first", "_write")

    def __init__(
        self,
        chunks: AsyncIterator[bytes],
        write: Callable[[bytes], Awaitable[None]],
        first: bytes | None = None,
    ) -> None:
        self._chunks, self._write, self._first = chunks, write, first

    def __await__(self) -> Step:
        # (the write and the wait driven here, not through generators of their own: one
        # event a wakeup is the usual paced stream, and each frame is paid at every event)
        following, write = next_of(self._chunks), self._write
        ready: list[bytes] = [] if self._first is None else [self._first]
        while True:
            step: Step = following().__await__()
            try:
                waits_on = step.send(None)
            except StopIteration as done:  # came without waiting
                ready.append(done.value)
                if len(ready) >= MAX_READY:
                    yield from _written(write, ready)
                continue
            except BaseException as exc:  # the end, or a failure: what came before goes first
                if ready:
                    yield from _written(write, ready)
                if isinstance(exc, StopAsyncIteration):
                    return
                raise
            if ready:  # it waits: what is ready goes out first, then the wait goes on
                body = ready[0] if len(ready) == 1 else b"".join(ready)
                ready.clear()
                try:
                    yield from write(body).__await__()
                except GeneratorExit:
                    step.close()
                    raise
                except BaseException:
                    yield from _stopped(step, waits_on)
                    raise
            while True:  # the wait, driven as ``yield from`` drives an awaitable
                try:
                    answer = yield waits_on
                except GeneratorExit:
                    step.close()
                    raise
                except BaseException as exc:  # the loop's cancellation, handed in
                    try:
                        waits_on = step.throw(exc)
                    except StopIteration as done:
                        ready.append(done.value)
                        break
                    except StopAsyncIteration:
                        return
                    continue
                try:
                    waits_on = step.send(answer)
                except StopIteration as done:
                    ready.append(done.value)
                    break
                except StopAsyncIteration:
                    return


def _written(write: Callable[[bytes], Awaitable[None]], ready: list[bytes]) -> Step:
    body = ready[0] if len(ready) == 1 else b"".join(ready)
    ready.clear()
    yield from write(body).__await__()


def _resumed(step: Step, waits_on: Any) -> Step:
    """What ``step`` gives, having yielded ``waits_on`` already: driven as ``yield from``
    drives an awaitable (the loop's answers and its cancellation handed in)."""
    while True:
        try:
            answer = yield waits_on
        except GeneratorExit:
            step.close()
            raise
        except BaseException as exc:
            try:
                waits_on = step.throw(exc)
            except StopIteration as done:
                return done.value
            continue
        try:
            waits_on = step.send(answer)
        except StopIteration as done:
            return done.value


def _stopped(step: Step, waits_on: Any) -> Step:
    """``step`` cancelled where it waits, as its task's cancellation would, and run to its
    end (its ``finally``: the key's place, the upstream call)."""
    if isinstance(waits_on, asyncio.Future):
        waits_on.cancel()
    try:
        waits_on = step.throw(asyncio.CancelledError())
        yield from _resumed(step, waits_on)
    except (asyncio.CancelledError, StopIteration, StopAsyncIteration):
        pass
