"""A streamed response that writes together the chunks that are ready together.

The gateway writes one SSE event per chunk. When the upstream is fast (a local model, a
loaded provider sending in bursts, or any reply read in large pieces) one upstream read holds
many events, and writing each on its own costs a socket write apiece: the largest part of a
streamed request's CPU (benchmarks/README.md, "The gateway"). Here the body is read in a task
of its own and the writer sends, in one piece, whatever has been read by the time it runs. A
chunk is never held back to wait for another, so a slow stream is written event by event as
before.
"""

from __future__ import annotations

from collections import deque

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from metis.core.raised import carrying, uncarried

MAX_READY = 256
"""Chunks read ahead of the client at most; past this the reader waits for the writer."""


class CoalescingStream(StreamingResponse):
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """As Starlette's: before ASGI 2.4 (uvicorn says 2.3) the client's disconnect is
        watched by a task of its own, which stops the stream; here that task runs in the
        stream's own task group, beside its reader, instead of in a second group wrapped round
        it (a task group and a task fewer per streamed request)."""
        spec = scope.get("asgi", {}).get("spec_version", "2.0")
        if scope["type"] != "http" or tuple(map(int, spec.split("."))) >= (2, 4):
            await super().__call__(scope, receive, send)
            return
        await self.stream_response(send, receive)
        if self.background is not None:
            await self.background()

    async def stream_response(self, send: Send, receive: Receive | None = None) -> None:
        """The body, written as it is ready; with ``receive``, stopped (nothing more sent)
        when the client disconnects."""
        start = {"type": "http.response.start", "status": self.status_code}
        await send({**start, "headers": self.raw_headers})
        ready: deque[bytes] = deque()
        produced, drained = anyio.Event(), anyio.Event()
        new_event = type(produced)  # the loop's own class: anyio.Event() looks the loop up
        finished = False

        async def read() -> None:
            nonlocal finished, drained
            try:
                async for chunk in self.body_iterator:
                    ready.append(
                        chunk.encode(self.charset) if isinstance(chunk, str) else bytes(chunk)
                    )
                    produced.set()
                    if len(ready) >= MAX_READY:
                        drained = new_event()
                        await drained.wait()
            finally:
                finished = True
                produced.set()

        gone: list[bool] = []  # the client disconnected: nothing more is sent
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(carrying, read)  # its own BaseException, not the group's
                if receive is not None:
                    group.start_soon(_until_disconnect, receive, group.cancel_scope, gone)
                while ready or not finished:
                    if not ready:
                        await produced.wait()
                        produced = new_event()
                        continue
                    body = b"".join(ready)
                    ready.clear()
                    drained.set()
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                group.cancel_scope.cancel()  # the disconnect watch, once the body is read
        except BaseExceptionGroup as failed:  # the body's own error, as a plain stream raises it
            if len(failed.exceptions) == 1:
                raise uncarried(failed.exceptions[0]) from None
            raise
        if not gone:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _until_disconnect(receive: Receive, stream: anyio.CancelScope, gone: list[bool]) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    gone.append(True)
    stream.cancel()


def _bytes(chunk: str | bytes | memoryview, charset: str) -> bytes:
    return chunk.encode(charset) if isinstance(chunk, str) else bytes(chunk)
