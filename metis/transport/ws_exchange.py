"""One turn on a session's WebSocket connection, read as the HTTP stream of the same turn.

A :class:`Lane` is what the WebSocket transport keeps per session: the connection, the reply
the connection holds (the last one that completed on it: what ``previous_response_id`` may
name there), whether a turn is in flight. A :class:`SocketExchange` is one turn: it has the
HTTP exchange's shape (``content_type``, ``read``, ``clock``, ``translate``, ``aclose``), and
``read()`` gives each server message as the Server-Sent Event that carries the same JSON over
HTTP, so the stack's ``decode`` (``framing: sse``) and ``normalize`` read it unchanged: the same
objects, the same canonical events, the same invariants.

``read()`` ends (None) after the message that ends the reply (``response.completed``,
``response.incomplete``, ``response.failed``, ``error``); each wait is bounded by the exchange's
read clock (the first message within ``first_event_timeout``, each later one within
``idle_timeout``, none past the call's deadline) and interrupted by ``cancel()``. A turn that
ends before its reply did (cancelled, failed, abandoned) closes the connection: the rest of
that reply would otherwise arrive at the next turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from pydantic_core import from_json

from metis.errors import CancelledError, NetworkError, ProtocolError
from metis.pipeline.call import Call
from metis.transport.failures import Limits, expired, too_large
from metis.transport.read_clock import ReadClock
from metis.transport.websocket import ConnectionLost, WebSocket

ENDINGS = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})
HELD = frozenset({"response.completed", "response.incomplete"})
"""The endings after which the connection holds the reply, for the next turn to continue."""
_MARKERS = (b'"response.completed"', b'"response.incomplete"', b'"response.failed"', b'"error"')
"""What a message that may end the reply contains: only those are parsed here."""


@dataclass(slots=True, eq=False)
class Lane:
    """One session's connection, kept by the transport between turns."""

    socket: WebSocket | None = None
    held: str | None = None
    """The id of the reply the connection holds (None: nothing to continue on it)."""
    busy: bool = False


def message_kind(data: bytes) -> tuple[str | None, dict[str, Any] | None]:
    """The type of a message that may end the reply, and the message; (None, None) for the
    others (deltas), which are not parsed here."""
    if not any(marker in data for marker in _MARKERS):
        return None, None
    try:
        found = from_json(data)
    except ValueError:
        return None, None  # the framing reports it, as it would over HTTP
    if not isinstance(found, dict):
        return None, None
    kind = found.get("type")
    return (kind if isinstance(kind, str) else None), found


def as_event(data: bytes) -> bytes:
    """One message as the Server-Sent Event carrying it (a line per line of its text)."""
    if b"\n" not in data and b"\r" not in data:
        return b"data: " + data + b"\n\n"
    lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    return b"".join(b"data: " + line + b"\n" for line in lines) + b"\n"


async def receive(socket: WebSocket, call: Call, clock: ReadClock, limits: Limits) -> bytes:
    """The next message, within the clock's time and the call's cancel."""
    try:
        with call.cancel.guard(clock.read_by()) as scope:
            text = await socket.receive()
    except ConnectionLost as exc:
        raise lost(call, exc) from exc
    except ProtocolError as exc:
        exc.provider = exc.provider or call.provider
        raise
    if scope.cancelled_caught:
        raise expired(call, clock, limits)
    return text.encode()


def lost(call: Call, error: Exception, when: str = "while reading the response") -> NetworkError:
    return NetworkError(
        f"WebSocket connection to {call.provider} failed {when}: {error}",
        provider=call.provider,
        request_id=call.request_id,
    )


@dataclass(slots=True, eq=False)
class SocketExchange:
    """One turn's answer on a lane: its messages as an SSE body."""

    lane: Lane
    socket: WebSocket
    first: bytes | None
    call: Call
    clock: ReadClock
    limits: Limits
    release: Callable[[Lane], Awaitable[None]]
    status: int = 200
    content_type: str = "text/event-stream"
    headers: dict[str, str] = field(default_factory=dict)
    ended: bool = False
    reply_id: str | None = None

    async def read(self) -> bytes | None:
        if self.ended:
            return None
        if self.first is not None:
            data, self.first = self.first, None
        else:
            data = await receive(self.socket, self.call, self.clock, self.limits)
        self.clock.received = True
        kind, message = message_kind(data)
        if kind in ENDINGS:
            self.ended = True
            if kind in HELD and message is not None:
                response = message.get("response")
                found = response.get("id") if isinstance(response, dict) else None
                self.reply_id = found if isinstance(found, str) else None
        return as_event(data)

    def translate(self, error: Exception) -> Exception:
        if isinstance(error, ConnectionLost):
            return lost(self.call, error)
        if isinstance(error, anyio.get_cancelled_exc_class()) and self.call.cancel.cancelled:
            return CancelledError("the call was cancelled")
        return error

    async def body(self, max_bytes: int | None = None) -> bytes:
        """The rest of the reply, whole; past ``max_bytes`` a ProtocolError (as
        :meth:`Exchange.body <metis.transport.exchange.Exchange.body>`)."""
        parts: list[bytes] = []
        size = 0
        while (chunk := await self.read()) is not None:
            size += len(chunk)
            if max_bytes is not None and size > max_bytes:
                raise too_large(self.call, max_bytes)
            parts.append(chunk)
        return b"".join(parts)

    async def aclose(self) -> None:
        """The lane is free again; it keeps the connection only when the reply ended on it."""
        lane = self.lane
        if self.ended:
            lane.held = self.reply_id
        else:
            lane.held = None
            if lane.socket is self.socket:
                lane.socket = None
            with anyio.CancelScope(shield=True):
                await self.socket.aclose()
        await self.release(lane)
