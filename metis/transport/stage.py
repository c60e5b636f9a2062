"""transport: the only stage that does IO. Sends the wire request with httpx, yields the body.

The response is always read as a stream, so a non-streamed answer costs no extra copy and a
streamed one arrives chunk by chunk. A non-2xx answer is read (up to a limit) and raised as
HTTPFailure for the provider's codec to classify; connection failures become NetworkError.
The response is closed however the caller leaves.

Every wait has an end, all on one clock (anyio's) and all set here, in ``Options`` and the
call's deadline (``Call.deadline``, from ``AdapterConfig.timeout_seconds``): the response's
head is due by the deadline (streamed: within ``first_event_timeout`` too), the first body
bytes within ``first_event_timeout`` of sending (streamed) or ``idle_timeout`` of the head
(not streamed), and each later read within ``idle_timeout``; nothing outlasts the deadline.
That holds for every body, error bodies included, and ``cancel()`` interrupts any of these
waits. One loop reads every body: on a real socket each read is bounded at the socket
(``socket_reads``), elsewhere (mock transports) each read waits in a cancel scope.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
import httpx
from pydantic import BaseModel, ConfigDict, Field

from metis.errors import CancelledError, NetworkError
from metis.pipeline.call import Call
from metis.pipeline.config import AdapterConfig
from metis.pipeline.request import HTTPFailure, ResponseHead, ResponseItem, WireRequest, body_bytes
from metis.pipeline.services import StageServices, no_client
from metis.pipeline.stage import Inner, Stage
from metis.transport import slots as pool
from metis.transport.clients import http_errors, is_read_timeout, is_timeout, request_timeout
from metis.transport.redirects import redirect_target
from metis.transport.slots import slots_of
from metis.transport.socket_reads import bound_socket_reads, socket_abort

CONNECT_TIMEOUT = 10.0


def http_client(timeout_seconds: float = 600.0) -> httpx.AsyncClient:
    """The client an adapter makes when the application gives none: it follows no redirects,
    pools connections as the official SDKs do, and its calls wait for a connection in metis's
    connection slots (metis/transport/slots.py). Its timeouts only matter to requests that
    bring none; the transport's always do."""
    size = pool.MAX_CONNECTIONS
    limits = httpx.Limits(max_connections=size, max_keepalive_connections=pool.MAX_KEEPALIVE)
    client = httpx.AsyncClient(
        timeout=httpx.Timeout(timeout_seconds, connect=CONNECT_TIMEOUT),
        limits=limits,
        follow_redirects=False,
    )
    pool.give_slots(client, size)
    return client


@dataclass(slots=True)
class ReadClock:
    """When each wait of one exchange must end, on anyio's clock."""

    deadline: float
    """The whole call's end (``Call.deadline``)."""
    idle: float
    first_by: float
    """When the first body bytes are due."""
    streamed: bool
    head_arrived: bool = False
    received: bool = False

    def head_by(self) -> float:
        return self.first_by if self.streamed else self.deadline

    def on_head(self) -> None:
        self.head_arrived = True
        if not self.streamed:
            self.first_by = min(self.deadline, anyio.current_time() + self.idle)

    def read_by(self) -> float:
        if self.received:
            return min(self.deadline, anyio.current_time() + self.idle)
        return self.first_by

    def seconds_for_read(self) -> float:
        return max(0.0, self.read_by() - anyio.current_time())


def _body_chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body's chunks as they arrive. A body without a content encoding is read from the
    response's byte stream itself: ``aiter_bytes`` would add two generator frames, a decoder
    and a chunker per chunk only to hand the same bytes on."""
    encoding = response.headers.get("content-encoding", "").strip().lower()
    stream = response.stream
    if encoding in ("", "identity") and isinstance(stream, httpx.AsyncByteStream):
        return stream.__aiter__()
    return response.aiter_bytes().__aiter__()


class Transport(Stage[WireRequest, Any, Any, ResponseItem]):
    name = "transport"
    terminal = True

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)

        connect_timeout: float = Field(default=CONNECT_TIMEOUT, gt=0)
        first_event_timeout: float = Field(
            default=120.0, gt=0, description="streamed: from sending to the first body bytes"
        )
        idle_timeout: float = Field(
            default=120.0, gt=0, description="the longest silence between body chunks"
        )
        max_error_body_bytes: int = Field(default=1 << 20, ge=1024)

    options: Options
    _http: Callable[[], httpx.AsyncClient] = staticmethod(no_client)
    _timeout_seconds: float = AdapterConfig.model_fields["timeout_seconds"].default

    def bind(self, services: StageServices) -> None:
        self._http = services.http
        self._timeout_seconds = services.config.timeout_seconds

    async def __call__(
        self, request: WireRequest, call: Call, inner: Inner[Any, Any]
    ) -> AsyncIterator[ResponseItem]:
        opts = self.options
        first_by = min(call.deadline, anyio.current_time() + opts.first_event_timeout)
        clock = ReadClock(call.deadline, opts.idle_timeout, first_by, request.stream)
        content = body_bytes(request.body)
        http_request = self._build(call, request.method, request.url, request.headers, content)
        response: httpx.Response | None = None
        chunks: AsyncIterator[bytes] | None = None
        undo: list[Callable[[], None]] = []
        slots = slots_of(self._http())
        taken = False
        try:
            if slots is not None:  # the client metis made: a connection slot first
                taken = await self._take_slot(slots, call, clock)
            response = await self._send(http_request, call, clock)
            chunks = _body_chunks(response)
            read = self._reader(response, chunks, call, clock, undo)
            error_body = bytearray() if response.status_code >= 300 else None
            if error_body is None:
                yield ResponseHead(response.status_code, response.headers.get("content-type"))
            while (chunk := await read()) is not None:
                clock.received = True
                if call.cancel.cancelled:
                    raise CancelledError("the call was cancelled")
                if error_body is None:
                    yield chunk
                    continue
                error_body += chunk
                if len(error_body) >= opts.max_error_body_bytes:
                    break
            if error_body is not None:
                body = bytes(error_body[: opts.max_error_body_bytes])
                raise HTTPFailure(response.status_code, dict(response.headers), body)
        except http_errors() as exc:
            raise self._failure(exc, call, clock) from exc
        finally:
            for step in undo:
                step()
            with anyio.CancelScope(shield=True):
                if chunks is not None:  # a read stopped mid-body: close its generator now
                    await chunks.aclose()  # type: ignore[attr-defined]
                if response is not None:
                    await response.aclose()
            if taken and slots is not None:
                slots.release()

    async def _take_slot(self, slots: anyio.Semaphore, call: Call, clock: ReadClock) -> bool:
        """One of the client's connection slots (metis/transport/slots.py), waited for like
        the response's head: within the call's deadline and cancel."""
        try:  # a free slot is taken at once: awaiting would queue the call behind every task
            slots.acquire_nowait()
            return True
        except anyio.WouldBlock:
            pass
        acquired = False
        try:
            with call.cancel.guard(clock.head_by()) as scope:
                await slots.acquire()
                acquired = True
        except BaseException:
            if acquired:  # taken, then cancelled in the same moment
                slots.release()
            raise
        if scope.cancelled_caught:
            raise self._expired(call, clock)
        return True

    def _build(
        self, call: Call, method: str, url: str | httpx.URL, headers: Any, content: bytes
    ) -> httpx.Request:
        # Every wait is bounded by the read clock (a cancel scope or the socket read's own
        # timeout); httpx's timeouts are only a backstop at the call's length.
        left = min(self._timeout_seconds, call.deadline - anyio.current_time())
        left = max(0.001, left)
        timeout = request_timeout(left, connect=min(left, self.options.connect_timeout))
        return self._http().build_request(
            method, url, headers=headers, content=content, timeout=timeout
        )

    async def _send(self, request: httpx.Request, call: Call, clock: ReadClock) -> httpx.Response:
        """Send, and follow the redirects ``redirects`` allows; the response's head, in time."""
        hops = 0
        while True:
            response: httpx.Response | None = None
            try:
                # Trio can hand send() its response and register the cancel in the same turn:
                # the guard then raises with the response in hand, which is closed here.
                with call.cancel.guard(clock.head_by()):
                    response = await self._http().send(request, stream=True, follow_redirects=False)
            except http_errors() as exc:
                raise self._failure(exc, call, clock, when="before a response arrived") from exc
            except BaseException:
                if response is not None:
                    with anyio.CancelScope(shield=True):
                        await response.aclose()
                raise
            if response is None:  # the guard abandoned the wait: its time ran out
                raise self._expired(call, clock)
            if not response.has_redirect_location:
                clock.on_head()
                return response
            with anyio.CancelScope(shield=True):
                await response.aclose()
            hops += 1
            target = redirect_target(request, response, self._http(), call, hops)
            request = self._build(call, request.method, target, request.headers, request.content)

    def _reader(
        self,
        response: httpx.Response,
        chunks: AsyncIterator[bytes],
        call: Call,
        clock: ReadClock,
        undo: list[Callable[[], None]],
    ) -> Callable[[], Awaitable[bytes | None]]:
        """How the loop reads the next chunk (None at the end) within the clock's time."""
        restore = bound_socket_reads(response, clock.seconds_for_read)
        abort = socket_abort(response) if restore is not None else None
        if restore is not None and abort is not None:
            undo.append(restore)
            undo.append(lambda: call.cancel.off(abort))
            call.cancel.on_cancel(abort)
            return partial(anext, chunks, None)  # no frame of ours per chunk
        if restore is not None:
            restore()

        async def guarded_read() -> bytes | None:
            with call.cancel.guard(clock.read_by()) as scope:
                chunk = await anext(chunks, None)
            if scope.cancelled_caught:
                raise self._expired(call, clock)
            return chunk

        return guarded_read

    def _failure(
        self, exc: Exception, call: Call, clock: ReadClock, when: str = ""
    ) -> CancelledError | NetworkError:
        if call.cancel.cancelled:
            return CancelledError("the call was cancelled")
        if is_read_timeout(exc) and clock.head_arrived:
            return self._expired(call, clock)
        kind = "timed out" if is_timeout(exc) else "failed"
        when = when or "while reading the response"
        return NetworkError(
            f"connection to {call.provider} {kind} {when}: {type(exc).__name__}: {exc}",
            provider=call.provider,
            request_id=call.request_id,
        )

    def _expired(self, call: Call, clock: ReadClock) -> NetworkError:
        opts = self.options
        if anyio.current_time() >= clock.deadline:
            what = f"the call's timeout ({self._timeout_seconds:g} s) ran out"
        elif clock.received:
            what = f"the response stalled for {opts.idle_timeout:g} s"
        elif clock.streamed:
            what = f"nothing arrived within {opts.first_event_timeout:g} s"
        else:
            what = f"the response body stalled for {opts.idle_timeout:g} s"
        return NetworkError(
            f"{call.provider}: {what}", provider=call.provider, request_id=call.request_id
        )
