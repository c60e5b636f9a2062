"""websocket_transport: OpenAI Responses over WebSocket, one connection per session.

A streamed ``POST .../responses`` call that belongs to a session goes as a ``response.create``
message on the session's connection (``wss://`` at the same URL, the same headers: the auth
steps sign the upgrade as they would the POST), opened on its first turn and kept between
turns; its messages come back as the SSE body of the same call (:mod:`.ws_exchange`). Anything
else goes over HTTP, as the ``transport`` stage sends it: a call without a session, a call of a
session whose connection has a turn in flight, a request that is not a turn (``count_tokens``),
every call of an adapter whose HTTP client has a mock or in-process transport (the emulator's
``client()``, ``httpx.MockTransport``; respx mocks inside httpx's own transport, so under respx
the connection is still opened).

What a connection holds: the last reply that completed on it. A request that continues that
reply (``previous_response_id``, from the ``continuation`` stage) is sent as it is: only the new
items. One that continues anything else, on a new connection say, is sent with the whole
transcript (``WireRequest.full_input``).

Failures, as over HTTP:

- connecting and upgrading are bounded like a response's head (``connect_timeout``, the first
  event's time, the deadline); a refused connection is a NetworkError, an upgrade answered with
  an error status an HTTPFailure for the codec to classify (401, 429, 5xx, ...);
- an ``error`` message in place of the reply's first event, with its ``status``, is the
  HTTPFailure the same request gets over HTTP: the codec classifies it, ``retry`` and
  ``continuation`` see the same errors;
- a connection found dead when a turn starts on it (closed between turns) is replaced at once
  and the turn sent whole on the new one; so is one OpenAI closes at its age limit
  (``websocket_connection_limit_reached``); one older than ``max_connection_seconds`` is
  replaced before it is used;
- a connection lost during a turn is a NetworkError (``retry`` sends again while nothing has
  arrived; the next turn opens a new connection and sends the whole transcript).

Through an HTTP proxy (the ``proxy`` option, else the environment's as for HTTP), the
connection is a CONNECT tunnel (:mod:`.proxy`). ``wss://`` verifies the server with the HTTP
client's TLS context, so both trust the same CAs.

The mode is unavailable when the server answers the upgrade with 404, 405, 426 or 501, or with
a success that is not ``101`` (an HTTP server ignoring the upgrade). Then, with ``fallback``
on, this call and every call for ``fallback_seconds`` go over HTTP; with it off, the answer is
the call's error.
"""

from __future__ import annotations

import json
import math
import ssl
from collections import OrderedDict
from typing import Any
from urllib.parse import urlsplit

import anyio
from pydantic import Field

from metis.errors import NetworkError
from metis.pipeline.call import Call
from metis.pipeline.request import HTTPFailure, WireRequest, whole_body
from metis.transport.clients import sends_over_network
from metis.transport.exchange import Exchange, open_exchange
from metis.transport.failures import expired
from metis.transport.httpx_private import own_transport, transport_pool
from metis.transport.proxy import client_proxy, environment_proxy
from metis.transport.read_clock import ReadClock
from metis.transport.refusals import check_header_text
from metis.transport.stage import Transport
from metis.transport.websocket import ConnectionLost, UpgradeRefused, WebSocket, websocket_url
from metis.transport.ws_exchange import Lane, SocketExchange, lost, message_kind, receive

UNAVAILABLE = frozenset({404, 405, 426, 501})
"""Upgrade answers that mean the endpoint has no WebSocket mode."""
LIMIT_REACHED = "websocket_connection_limit_reached"
TRANSPORT_ONLY = ("stream", "background")
"""Body fields of the HTTP request that a ``response.create`` message does not carry."""


class Unavailable(Exception):
    """The endpoint does not speak the WebSocket mode."""


class WebSocketTransport(Transport):
    name = "websocket_transport"
    zone = "transport"

    class Options(Transport.Options):
        max_connection_seconds: float = Field(
            default=3300.0,
            gt=0,
            description="replace a connection this old before a turn (OpenAI ends them at 60 min)",
        )
        max_connections: int = Field(
            default=1000, ge=1, description="sessions' connections kept; the least recent closed"
        )
        fallback: bool = Field(
            default=True, description="send over HTTP when the WebSocket mode is unavailable"
        )
        fallback_seconds: float = Field(
            default=600.0, ge=0, description="how long HTTP is used before trying again"
        )
        proxy: str | None = Field(
            default=None,
            description="an http(s):// proxy the connection tunnels through (CONNECT); '' for "
            "none; default: the HTTP client's (its proxy=, or HTTPS_PROXY, ALL_PROXY, NO_PROXY)",
        )

    options: Options

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._lanes: OrderedDict[str, Lane] = OrderedDict()
        """Cross-call state by design: each session's connection (bounded)."""
        self._unavailable_until = -math.inf

    # What each call goes over --------------------------------------------------------------

    async def open(self, request: WireRequest, call: Call) -> Exchange | SocketExchange:  # type: ignore[override]
        session = call.session_id
        if (
            not self._turn(request)
            or session is None
            or self._unavailable()
            or not sends_over_network(self._http())  # a mock or in-process transport
        ):
            return await self._over_http(request, call)
        lane = await self._lane(session)
        if lane.busy:  # one reply at a time on a connection: this call goes over HTTP
            return await self._over_http(request, call)
        lane.busy = True
        try:
            return await self._on_socket(lane, request, call)
        except Unavailable:
            lane.busy = False
            return await self._over_http(request, call)
        except HTTPFailure:  # the server refused this request; the connection stays
            lane.busy = False
            raise
        except BaseException:
            lane.busy = False
            await self._drop(lane)
            raise

    def _turn(self, request: WireRequest) -> bool:
        path = urlsplit(request.url).path
        return request.stream and request.method == "POST" and path.endswith("/responses")

    def _unavailable(self) -> bool:
        return anyio.current_time() < self._unavailable_until

    async def _over_http(self, request: WireRequest, call: Call) -> Exchange:
        if request.full_input is not None and request.body.get("store") is False:
            request = request.whole()  # HTTP holds no reply of a store: false session
        return await open_exchange(self._http(), request.serialized(), call, self.limits)

    # The session's connection --------------------------------------------------------------

    async def _on_socket(self, lane: Lane, request: WireRequest, call: Call) -> SocketExchange:
        limits = self.limits
        first_by = min(call.deadline, anyio.current_time() + limits.first_event_timeout)
        clock = ReadClock(call.deadline, limits.idle_timeout, first_by, True)
        for _ in range(3):
            reused = await self._connection(lane, request, call, clock)
            socket = lane.socket
            assert socket is not None
            try:
                # A server that stops reading would block the write for good: it is bounded
                # as the wait for the reply's first event is, and cancel interrupts it.
                with call.cancel.guard(clock.head_by()) as sending:
                    await socket.send_text(create_message(request, lane.held))
                if sending.cancelled_caught:
                    raise expired(call, clock, limits)
                lane.held = None  # until this reply completes on it
                first = await receive(socket, call, clock, limits)
            except NetworkError as error:
                await self._drop(lane)
                if reused and isinstance(error.__cause__, ConnectionLost):
                    continue  # closed between turns: a new connection, the whole transcript
                raise
            except ConnectionLost as exc:
                await self._drop(lane)
                if reused:
                    continue
                raise lost(call, exc, "before a response arrived") from exc
            kind, message = message_kind(first)
            if kind == "error" and message is not None:
                if _error_code(message) == LIMIT_REACHED:
                    await self._drop(lane)
                    continue
                status = message.get("status")
                if isinstance(status, int) and status >= 400:
                    raise HTTPFailure(status, _error_headers(message), first)
            clock.on_head()
            return SocketExchange(lane, socket, first, call, clock, limits, self._release)
        raise NetworkError(
            f"{call.provider}: no WebSocket connection lasted long enough to send the turn",
            provider=call.provider,
            request_id=call.request_id,
        )

    async def _connection(
        self, lane: Lane, request: WireRequest, call: Call, clock: ReadClock
    ) -> bool:
        """Make sure the lane has a connection young enough; True when it had one already."""
        socket = lane.socket
        age_limit = self.options.max_connection_seconds
        young = socket is not None and anyio.current_time() - socket.opened_at < age_limit
        if socket is not None and not socket.closed and young:
            return True
        await self._drop(lane)
        connect_by = min(clock.head_by(), anyio.current_time() + self.options.connect_timeout)
        url = websocket_url(request.url)
        check_header_text(request.headers, call)  # what the upgrade cannot carry, unsent
        try:
            with call.cancel.guard(connect_by) as scope:
                lane.socket = await WebSocket.connect(
                    url, request.headers, tls=self._tls(), proxy=self._proxy(url)
                )
        except ConnectionLost as exc:
            raise lost(call, exc, "before a response arrived") from exc
        except UpgradeRefused as refused:
            unavailable = refused.status in UNAVAILABLE or 200 <= refused.status < 300
            if unavailable and self.options.fallback:
                self._unavailable_until = anyio.current_time() + self.options.fallback_seconds
                raise Unavailable from None
            raise HTTPFailure(refused.status, refused.headers, refused.body) from None
        if scope.cancelled_caught:
            if anyio.current_time() >= clock.head_by():
                raise expired(call, clock, self.limits)
            raise NetworkError(
                f"{call.provider}: no WebSocket connection within "
                f"{self.options.connect_timeout:g} s",
                provider=call.provider,
                request_id=call.request_id,
            )
        return False

    def _tls(self) -> ssl.SSLContext | None:
        """The TLS context of the adapter's HTTP client (its ``verify``: a CA file or context,
        ``SSL_CERT_FILE``, truststore), so ``wss://`` trusts what the HTTP calls trust; None
        (the system's default) for a client whose transport keeps none."""
        transport = own_transport(self._http())
        pool = transport_pool(transport) if transport is not None else None
        context = getattr(pool, "_ssl_context", None) or getattr(transport, "ssl_context", None)
        return context if isinstance(context, ssl.SSLContext) else None

    def _proxy(self, url: str) -> str | None:
        """The proxy of a connection to ``url``: the option's, else the HTTP client's for the
        same URL, else the environment's when the client trusts it (:mod:`.proxy`)."""
        if self.options.proxy is not None:
            return self.options.proxy or None
        client = self._http()
        found = client_proxy(client, url)
        if found is not None:
            return found or None
        return environment_proxy(url) if getattr(client, "trust_env", True) else None

    async def _lane(self, session: str) -> Lane:
        lane = self._lanes.get(session)
        if lane is not None:
            self._lanes.move_to_end(session)
            return lane
        lane = self._lanes[session] = Lane()
        while len(self._lanes) > self.options.max_connections:
            oldest = next((key for key, kept in self._lanes.items() if not kept.busy), None)
            if oldest is None or oldest == session:
                break
            await self._drop(self._lanes.pop(oldest))
        return lane

    async def _release(self, lane: Lane) -> None:
        lane.busy = False

    async def _drop(self, lane: Lane) -> None:
        socket, lane.socket, lane.held = lane.socket, None, None
        if socket is not None:
            await socket.aclose()

    # Lifetimes -----------------------------------------------------------------------------

    def holds(self, session_id: str) -> bool:
        """Whether a connection is kept for ``session_id``."""
        lane = self._lanes.get(session_id)
        return lane is not None and lane.socket is not None

    def bytes_sent(self, session_id: str) -> int:
        """What the session's connection has sent so far: its upgrade request and frames."""
        lane = self._lanes.get(session_id)
        return lane.socket.bytes_sent if lane is not None and lane.socket is not None else 0

    async def release(self, session_id: str) -> None:
        """Close the session's connection (``Session.aclose``); a later turn opens another."""
        lane = self._lanes.pop(session_id, None)
        if lane is not None:
            await self._drop(lane)

    async def dispose(self, adapter: Any) -> None:
        """``adapter.aclose()``: every connection closed."""
        while self._lanes:
            _, lane = self._lanes.popitem()
            await self._drop(lane)


def create_message(request: WireRequest, held: str | None) -> str:
    """The ``response.create`` message for ``request`` on a connection holding ``held``."""
    body = request.body
    previous = body.get("previous_response_id")
    if previous is not None and previous != held and request.full_input is not None:
        body = whole_body(request)
    event = {"type": "response.create"}
    event.update((k, v) for k, v in body.items() if k not in TRANSPORT_ONLY)
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False)


def _error_code(message: dict[str, Any]) -> str | None:
    error = message.get("error")
    code = error.get("code") if isinstance(error, dict) else message.get("code")
    return code if isinstance(code, str) else None


def _error_headers(message: dict[str, Any]) -> dict[str, str]:
    """The HTTP headers an ``error`` message carries (``error.headers``: ``retry-after``,
    ``x-ratelimit-*``), lower-cased as httpx gives them, for the codec to read as over HTTP."""
    error = message.get("error")
    found = error.get("headers") if isinstance(error, dict) else None
    if not isinstance(found, dict):
        return {}
    return {str(k).lower(): v for k, v in found.items() if isinstance(v, str)}
