"""One request and its answer on the adapter's HTTP session: the only IO of a call.

:func:`open_exchange` sends a wire request and returns an :class:`Exchange` once the answer's
head is in: its status, its content type, and ``read()``, which gives the body's chunks one
by one (None at the end). An answer that is not a success is read whole (up to a limit) and
raised as :class:`~metis.pipeline.wire.HTTPFailure`, for the provider's codec to classify.
The transport stage, the provider's send loop, ``count_tokens`` and a provider's lifespan all
send through here, so every request gets the same protections:

- every wait ends on one clock (anyio's): the head by the call's deadline (streamed: within
  ``first_event_timeout`` too), the first body bytes within ``first_event_timeout`` of sending
  (streamed) or ``idle_timeout`` of the head (not streamed), each later read within
  ``idle_timeout``, nothing past the deadline; ``cancel()`` interrupts any of them;
- on a real socket each read is bounded at the socket (``socket_reads``); elsewhere (a mock
  transport) each read waits in a cancel scope;
- redirects are followed only as ``redirects`` allows: never to another origin with a secret;
- the body is the request's bytes, serialized once (``WireRequest.content``): what a signing
  step signed is what is sent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
import httpx

from metis.errors import CancelledError, ClosedError
from metis.pipeline.call import Call
from metis.pipeline.request import HTTPFailure, WireRequest
from metis.transport import direct
from metis.transport.clients import (
    http_errors,
    request_timeout,
)
from metis.transport.decoding import decoded, encodings_of
from metis.transport.failures import Limits as Limits  # where the send paths import it
from metis.transport.failures import expired, failure, origin, too_large
from metis.transport.held_reads import held_reads
from metis.transport.read_clock import ReadClock, loop_clock
from metis.transport.redirects import redirect_target
from metis.transport.refusals import check_headers, refusal, unsendable
from metis.transport.request_body import sent_once
from metis.transport.slots import close_if_overread, drop_unclaimed_connections, served_by, slots_of
from metis.transport.socket_reads import bound_socket_reads, socket_abort


@dataclass(slots=True, eq=False)
class Exchange:
    """An answer whose head has arrived: read its body with ``read()``, then ``aclose()``."""

    status: int
    content_type: str | None
    headers: httpx.Headers
    read: Callable[[], Awaitable[bytes | None]]
    clock: ReadClock
    call: Call
    limits: Limits
    response: httpx.Response
    chunks: AsyncIterator[bytes]
    slots: anyio.Semaphore | None = None
    """The client's connection slots, one of which this exchange holds until it is closed."""
    undo: list[Callable[[], None]] = field(default_factory=list)
    http: httpx.AsyncClient | None = None

    def translate(self, error: Exception) -> Exception:
        """An HTTP client's failure while reading, as the NetworkError (or CancelledError)
        it stands for, or a ClosedError when the client was closed under it (its
        connections with it); anything else as it is."""
        if not isinstance(error, http_errors()):
            return error
        translated = failure(error, self.call, self.clock, self.limits, http=self.http)
        translated.__cause__ = error
        return translated

    async def body(self, max_bytes: int | None = None) -> bytes:
        """The rest of the body, whole (for an answer read at once); past ``max_bytes`` a
        ProtocolError, nothing more read."""
        parts: list[bytes] = []
        size = 0
        while (chunk := await self.read()) is not None:
            self.clock.received = True
            if self.call.cancel.cancelled:
                raise CancelledError("the call was cancelled")
            size += len(chunk)
            if max_bytes is not None and size > max_bytes:
                parts.clear()
                raise too_large(self.call, max_bytes)
            parts.append(chunk)
        return b"".join(parts)

    async def aclose(self) -> None:
        for step in self.undo:
            step()
        self.undo.clear()
        try:
            with anyio.CancelScope(shield=True):
                await self.chunks.aclose()  # type: ignore[attr-defined]
                await self.response.aclose()
                closed = self.http is not None and self.http.is_closed
                await close_if_overread(served_by(self.response), closed)
        finally:
            slots, self.slots = self.slots, None
            if slots is not None:
                slots.release()


def _body_chunks(response: httpx.Response, encodings: list[str] | None) -> AsyncIterator[bytes]:
    """The body's chunks as they arrive. A body without a content encoding is read from the
    response's byte stream itself: ``aiter_bytes`` would add two generator frames, a decoder
    and a chunker per chunk only to hand the same bytes on. A gzip or deflate body is decoded
    here, in bounded pieces (:mod:`metis.transport.decoding`)."""
    stream = response.stream
    if encodings == [] and isinstance(stream, httpx.AsyncByteStream):
        return stream.__aiter__()
    if encodings and not response.is_stream_consumed:  # (a mock's answer may come read)
        return decoded(response.aiter_raw(), encodings)
    return response.aiter_bytes().__aiter__()


async def open_exchange(
    http: httpx.AsyncClient, request: WireRequest, call: Call, limits: Limits
) -> Exchange:
    """Send ``request``; the exchange once its head is in, or the failure, classified (an
    unsuccessful answer as HTTPFailure, with its body)."""
    now = loop_clock()
    sent_at = now()
    first_by = min(call.deadline, sent_at + limits.first_event_timeout)
    clock = ReadClock(call.deadline, limits.idle_timeout, first_by, request.stream, now=now)
    content = request.content if request.content is not None else request.serialized().content
    built = _build(
        http, call, limits, sent_at, request.method, request.url, request.headers, content
    )
    slots = slots_of(http, built)
    if slots is not None:  # the client metis made: a connection slot first
        await _take_slot(slots, call, clock, limits)
    try:
        response = await _send(http, built, call, clock, limits)
    except BaseException:
        if slots is not None:
            slots.release()
            await drop_unclaimed_connections(http)
        raise
    encodings = encodings_of(response)
    chunks = _body_chunks(response, encodings)
    exchange = Exchange(
        status=response.status_code,
        content_type=response.headers.get("content-type"),
        headers=response.headers,
        read=partial(anext, chunks, None),
        clock=clock,
        call=call,
        limits=limits,
        response=response,
        chunks=chunks,
        slots=slots,
        http=http,
    )
    try:
        exchange.read = _reader(exchange, plain=encodings == [])
        if response.status_code >= 300:
            raise HTTPFailure(
                response.status_code, dict(response.headers), await _error_body(exchange)
            )
    except BaseException as exc:
        await exchange.aclose()
        if isinstance(exc, http_errors()):
            raise exchange.translate(exc) from exc
        raise
    return exchange


async def _error_body(exchange: Exchange) -> bytes:
    limit = exchange.limits.max_error_body_bytes
    body = bytearray()
    while (chunk := await exchange.read()) is not None:
        exchange.clock.received = True
        if exchange.call.cancel.cancelled:
            raise CancelledError("the call was cancelled")
        body += chunk
        if len(body) >= limit:
            break
    return bytes(body[:limit])


async def _take_slot(slots: anyio.Semaphore, call: Call, clock: ReadClock, limits: Limits) -> None:
    """One of the client's connection slots (metis/transport/slots.py), waited for like the
    response's head: within the call's deadline and cancel."""
    try:  # a free slot is taken at once: awaiting would queue the call behind every task
        slots.acquire_nowait()
        return
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
        raise expired(call, clock, limits)


def _build(
    http: httpx.AsyncClient,
    call: Call,
    limits: Limits,
    now: float,
    method: str,
    url: str | httpx.URL,
    headers: Any,
    content: bytes | None,
) -> httpx.Request:
    # Every wait is bounded by the read clock (a cancel scope or the socket read's own
    # timeout); httpx's timeouts are only a backstop at the call's length.
    left = min(limits.timeout_seconds, call.deadline - now)
    left = max(0.001, left)
    timeout = request_timeout(left, connect=min(left, limits.connect_timeout))
    try:
        made = direct.built(http, method, url, headers, content, timeout) or http.build_request(
            method, url, headers=headers, content=content, timeout=timeout
        )
    except (httpx.InvalidURL, UnicodeEncodeError) as exc:
        raise unsendable(exc, call, url, headers) from None
    check_headers(made.headers.raw, call)
    return sent_once(made)


async def _send(
    http: httpx.AsyncClient, request: httpx.Request, call: Call, clock: ReadClock, limits: Limits
) -> httpx.Response:
    """Send, and follow the redirects ``redirects`` allows; the response's head, in time."""
    hops = 0
    while True:
        response: httpx.Response | None = None
        try:
            # Trio can hand send() its response and register the cancel in the same turn:
            # the guard then raises with the response in hand, which is closed here.
            with call.cancel.guard(clock.head_by()):
                response = await direct.sent(http, request)
                if response is None:
                    response = await http.send(request, stream=True, follow_redirects=False)
        except http_errors() as exc:
            refused = refusal(exc, call, request.url)
            if refused is not None:
                raise refused from exc
            when = "before a response arrived"
            raise failure(exc, call, clock, limits, when, origin(request.url), http) from exc
        except RuntimeError as exc:
            if not http.is_closed:
                raise
            raise ClosedError(  # httpx's RuntimeError, for a client its owner closed
                f"{call.provider}: the HTTP client the adapter was given is closed",
                provider=call.provider,
                request_id=call.request_id,
            ) from exc
        except BaseException:
            if response is not None:
                with anyio.CancelScope(shield=True):
                    await response.aclose()
            raise
        if response is None:  # the guard abandoned the wait: its time ran out
            raise expired(call, clock, limits)
        if not response.has_redirect_location:
            clock.on_head()
            return response
        with anyio.CancelScope(shield=True):
            await response.aclose()
        hops += 1
        target = redirect_target(request, response, http, call, hops)
        request = _build(
            http,
            call,
            limits,
            clock.now(),
            request.method,
            target,
            request.headers,
            request.content,
        )


def _reader(exchange: Exchange, plain: bool) -> Callable[[], Awaitable[bytes | None]]:
    """How the body is read, chunk by chunk (None at the end), within the clock's time."""
    response, chunks = exchange.response, exchange.chunks
    call, clock = exchange.call, exchange.clock
    lean = response.extensions.get("metis_body")  # metis/transport/http1.py
    if lean is not None and plain:
        abort = lean.abort
        exchange.undo.append(lambda: call.cancel.off(abort))
        call.cancel.on_cancel(abort)
        reader: Callable[[], Awaitable[bytes | None]] = lean.reader(clock.seconds_for_read)
        return reader  # the bytes as they arrived, no generator frame per read
    restore = bound_socket_reads(response, clock.seconds_for_read)
    abort = socket_abort(response) if restore is not None else None
    if restore is not None and abort is not None:
        exchange.undo.append(restore)
        exchange.undo.append(lambda: call.cancel.off(abort))
        call.cancel.on_cancel(abort)
        held = held_reads(response, served_by(response)) if plain else None
        if held is not None:  # the body's bytes as they arrived, not chunk by chunk
            return held
        return partial(anext, chunks, None)  # no frame of ours per chunk
    if restore is not None:
        restore()

    async def guarded_read() -> bytes | None:
        with call.cancel.guard(clock.read_by()) as scope:
            chunk = await anext(chunks, None)
        if scope.cancelled_caught:
            raise expired(call, clock, exchange.limits)
        return chunk

    return guarded_read
