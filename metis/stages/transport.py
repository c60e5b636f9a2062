"""transport: the only stage that does IO. Sends the wire request with httpx, yields the body.

The response is always read as a stream, so a non-streamed answer costs no extra copy and a
streamed one arrives chunk by chunk. A non-2xx answer is read (up to a limit) and raised as
HTTPFailure for the provider's codec to classify; connection failures become NetworkError.
The response is closed however the caller leaves.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx
from pydantic import BaseModel, ConfigDict, Field

from metis.errors import CancelledError, NetworkError
from metis.pipeline.call import Call
from metis.pipeline.stage import Inner, Stage
from metis.pipeline.wire import HTTPFailure, WireRequest, body_bytes


class Transport(Stage[WireRequest, Any, Any, bytes]):
    name = "transport"
    terminal = True

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)

        connect_timeout: float = Field(default=10.0, gt=0)
        first_event_timeout: float = Field(
            default=120.0, gt=0, description="streamed: from sending to the first body bytes"
        )
        idle_timeout: float = Field(
            default=120.0, gt=0, description="streamed: the longest silence between chunks"
        )
        max_error_body_bytes: int = Field(default=1 << 20, ge=1024)

    options: Options

    async def __call__(
        self, request: WireRequest, call: Call, inner: Inner[Any, Any]
    ) -> AsyncIterator[bytes]:
        opts = self.options
        overall = anyio.current_time() + call.config.timeout_seconds
        overall_clock = time.monotonic() + call.config.timeout_seconds
        content = body_bytes(request.body)
        # httpx's per-read timeout is the stream's idle timeout; a whole reply has only the
        # overall one.
        read = max(opts.idle_timeout, opts.first_event_timeout) if request.stream else None
        http_request = call.http.build_request(
            request.method,
            request.url,
            headers=request.headers,
            content=content,
            timeout=httpx.Timeout(
                call.config.timeout_seconds, connect=opts.connect_timeout, read=read
            ),
        )
        # A streamed reply must start within first_event_timeout and never fall silent for
        # longer than idle_timeout; a whole JSON reply only has the overall timeout.
        first = min(overall, anyio.current_time() + opts.first_event_timeout)
        deadline = first if request.stream else overall
        response: httpx.Response | None = None
        abort: Callable[[], None] | None = None
        chunks: AsyncIterator[bytes] | None = None
        received = False
        try:
            # Trio can hand send() its response and register the cancel in the same turn:
            # the guard then raises with the response in hand, which the finally closes.
            try:
                with call.cancel.guard(deadline) as scope:
                    response = await call.http.send(http_request, stream=True)
            except httpx.HTTPError as exc:
                raise _network_error(exc, call, "before a response arrived") from exc
            if scope.cancelled_caught:
                raise self._timeout(call, request.stream, overall, received=False)
            if response.status_code >= 300:
                raise HTTPFailure(
                    response.status_code, dict(response.headers), await self._read_error(response)
                )
            chunks = response.aiter_bytes().__aiter__()
            # On a real socket, after the first chunk, reads go unguarded: httpx's read timeout
            # bounds each one and cancel() shuts the socket, so a long stream does not pay for
            # a cancel scope per chunk. Without a socket (mock transports) every read is guarded.
            abort = _socket_abort(response) if request.stream else None
            if abort is not None:
                call.cancel.on_cancel(abort)
            while True:
                if abort is None or not received:
                    with call.cancel.guard(deadline) as scope:
                        chunk = await anext(chunks, None)
                    if scope.cancelled_caught:
                        raise self._timeout(call, request.stream, overall, received)
                else:
                    chunk = await anext(chunks, None)
                    if call.cancel.cancelled:
                        raise CancelledError("the call was cancelled")
                    if time.monotonic() > overall_clock:
                        raise self._timeout(call, request.stream, overall, received)
                if chunk is None:
                    break
                received = True
                yield chunk
                if request.stream and abort is None:
                    deadline = min(overall, anyio.current_time() + opts.idle_timeout)
        except httpx.HTTPError as exc:
            if call.cancel.cancelled:
                raise CancelledError("the call was cancelled") from exc
            if isinstance(exc, httpx.ReadTimeout) and received:
                raise self._timeout(call, request.stream, overall, received) from exc
            raise _network_error(exc, call, "while reading the response") from exc
        finally:
            if abort is not None:
                call.cancel.off(abort)
            with anyio.CancelScope(shield=True):
                if chunks is not None:  # a read stopped mid-body: close its generator now
                    await chunks.aclose()  # type: ignore[attr-defined]
                if response is not None:
                    await response.aclose()

    def _timeout(self, call: Call, stream: bool, overall: float, received: bool) -> NetworkError:
        if anyio.current_time() >= overall:
            what = f"the call's timeout ({call.config.timeout_seconds:g} s) ran out"
        elif received:
            what = f"the stream stalled for {self.options.idle_timeout:g} s"
        else:
            what = f"nothing arrived within {self.options.first_event_timeout:g} s"
        return NetworkError(
            f"{call.provider}: {what}", provider=call.provider, request_id=call.request_id
        )

    async def _read_error(self, response: httpx.Response) -> bytes:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size >= self.options.max_error_body_bytes:
                break
        return b"".join(chunks)[: self.options.max_error_body_bytes]


def _socket_abort(response: httpx.Response) -> Callable[[], None] | None:
    """A way to interrupt a read on this response's socket from another task, if it has one."""
    stream = response.extensions.get("network_stream")
    get_extra_info = getattr(stream, "get_extra_info", None)
    sock = get_extra_info("socket") if get_extra_info is not None else None
    if sock is None or not hasattr(sock, "shutdown"):
        return None

    def abort() -> None:
        with contextlib.suppress(OSError):  # already closed: nothing left to interrupt
            sock.shutdown(socket.SHUT_RDWR)

    return abort


def _network_error(exc: httpx.HTTPError, call: Call, when: str) -> NetworkError:
    kind = "timed out" if isinstance(exc, httpx.TimeoutException) else "failed"
    return NetworkError(
        f"connection to {call.provider} {kind} {when}: {type(exc).__name__}: {exc}",
        provider=call.provider,
        request_id=call.request_id,
    )
