"""The emulator in process: an httpx transport (sync and async) that hands each request to the
one request handler and returns its answer, with no socket. Faults behave as over a socket:
a drop is a ``RemoteProtocolError`` (no answer, or a stream cut short), a stall or a slow
stream waits (``anyio.sleep`` in async code), a malformed or failing stream arrives as the
provider would send it.

    emulator = Emulator(model=["Hello!"])
    client = httpx.AsyncClient(transport=emulator.transport(), base_url="http://emulator")
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import anyio
import httpx

from metis.testing.emulator.wire import HttpRequest

if TYPE_CHECKING:
    from metis.testing.emulator.handler import Delivery, Handler


class EmulatorTransport(httpx.AsyncBaseTransport, httpx.BaseTransport):
    def __init__(self, handler: Handler) -> None:
        self.handler = handler

    def _delivery(self, request: httpx.Request, body: bytes) -> Delivery:
        headers = {k.lower(): v for k, v in request.headers.items()}
        query = {k: v for k, v in request.url.params.items()}
        path = request.url.raw_path.decode("ascii").partition("?")[0]  # as sent (SigV4 signs it)
        return self.handler.handle(HttpRequest(request.method, path, query, headers, body))

    def _waits(self, request: httpx.Request, delivery: Delivery) -> list[float]:
        """The waits before a whole body (none before a stream's head); a drop raises."""
        if delivery.body is None:
            return []
        if None in delivery.steps:
            self.handler.finish(delivery.record, 0)
            raise httpx.RemoteProtocolError(
                "Server disconnected without sending a response.", request=request
            )
        return [float(step) for step in delivery.steps if step is not None]

    def _response(self, request: httpx.Request, delivery: Delivery, stream: Any) -> httpx.Response:
        self.handler.finish(delivery.record, delivery.status)
        headers = {k: v for k, v in delivery.headers.items() if k != "transfer-encoding"}
        if delivery.body is not None:
            stream = httpx.ByteStream(delivery.body)
        return httpx.Response(delivery.status, headers=headers, stream=stream, request=request)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        delivery = self._delivery(request, await request.aread())
        for wait in self._waits(request, delivery):
            await anyio.sleep(wait)
        return self._response(request, delivery, _Steps(delivery, request))

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        delivery = self._delivery(request, request.read())
        for wait in self._waits(request, delivery):
            time.sleep(wait)
        return self._response(request, delivery, _Steps(delivery, request))


class _Steps(httpx.AsyncByteStream, httpx.SyncByteStream):
    """A stream's chunks and waits, in sync or async code; a drop cuts it short."""

    def __init__(self, delivery: Delivery, request: httpx.Request) -> None:
        self.delivery, self.request = delivery, request

    def _each(self) -> Iterator[bytes | float]:
        for step in self.delivery.steps:
            if step is None:
                raise httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body",
                    request=self.request,
                )
            yield step

    def __iter__(self) -> Iterator[bytes]:
        for step in self._each():
            if isinstance(step, bytes):
                yield step
            else:
                time.sleep(step)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for step in self._each():
            if isinstance(step, bytes):
                yield step
            else:
                await anyio.sleep(step)
