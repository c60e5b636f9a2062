"""How long each wait of an exchange may last (:class:`Limits`), and a transport failure
classified: the call cancelled, the client closed under it, a body that does not decode, a wait
that ran out, a connection that failed (naming where it went), a body too large to read whole."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
import httpx

from metis.errors import CancelledError, ClosedError, NetworkError, ProtocolError
from metis.pipeline.call import Call
from metis.transport.clients import CONNECT_TIMEOUT, is_decoding_error, is_read_timeout, is_timeout
from metis.transport.read_clock import ReadClock


@dataclass(frozen=True, slots=True)
class Limits:
    """How long each wait of an exchange may last, and how much of an error body is read."""

    connect_timeout: float = CONNECT_TIMEOUT
    first_event_timeout: float = 120.0
    idle_timeout: float = 120.0
    max_error_body_bytes: int = 1 << 20
    timeout_seconds: float = 600.0
    """The adapter's ``timeout_seconds``: the backstop given to the HTTP client."""


def failure(
    exc: Exception,
    call: Call,
    clock: ReadClock,
    limits: Limits,
    when: str = "",
    origin: str | None = None,
    http: httpx.AsyncClient | None = None,
) -> CancelledError | ClosedError | NetworkError | ProtocolError:
    """The classified error of a transport failure; ``origin`` (scheme, host and port, never
    a path or query) says where the connection went, so a wrong base URL shows. A failure of
    ``http`` closed under the call (its connections with it) is a ClosedError."""
    if call.cancel.cancelled:
        return CancelledError("the call was cancelled")
    if http is not None and http.is_closed:
        return ClosedError(
            f"{call.provider}: the HTTP client was closed while the call was in flight (the "
            "adapter's aclose(), or the owner of a client it was given)",
            provider=call.provider,
            request_id=call.request_id,
        )
    if is_decoding_error(exc):  # the server's own bytes, which another attempt would repeat
        return ProtocolError(
            f"{call.provider} sent a body its Content-Encoding does not decode: {exc}",
            provider=call.provider,
            request_id=call.request_id,
        )
    if is_read_timeout(exc) and clock.head_arrived:
        return expired(call, clock, limits)
    kind = "timed out" if is_timeout(exc) else "failed"
    when = when or "while reading the response"
    at = f" at {origin}" if origin else ""
    return NetworkError(
        f"connection to {call.provider}{at} {kind} {when}: {type(exc).__name__}: {exc}",
        provider=call.provider,
        request_id=call.request_id,
    )


def origin(url: Any) -> str:
    """Where a connection went: scheme, host and port, never a path or query."""
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme}://{url.host}{port}"


def expired(call: Call, clock: ReadClock, limits: Limits) -> NetworkError:
    """The NetworkError of a wait that ran out, saying which: the call's timeout, a stalled
    stream or body, or nothing before the first event."""
    if anyio.current_time() >= clock.deadline:
        what = f"the call's timeout ({limits.timeout_seconds:g} s) ran out"
    elif clock.received:
        what = f"the response stalled for {limits.idle_timeout:g} s"
    elif clock.streamed:
        what = f"nothing arrived within {limits.first_event_timeout:g} s"
    else:
        what = f"the response body stalled for {limits.idle_timeout:g} s"
    return NetworkError(
        f"{call.provider}: {what}", provider=call.provider, request_id=call.request_id
    )


def too_large(call: Call, max_bytes: int) -> ProtocolError:
    """An answer read whole that went past ``max_bytes``: nothing more is read."""
    return ProtocolError(
        f"{call.provider} sent a body larger than {max_bytes >> 20} MiB; "
        "metis reads no larger answer whole",
        provider=call.provider,
    )
