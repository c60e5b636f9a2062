"""The request head's bounds on ``metis serve``'s HTTP server (docs/gateway.md): its size and
the time it may take to arrive.

uvicorn's httptools parser, which it runs when httptools is installed (``metis[serve]``
installs it), reads a request line and headers of any length: it held every byte of a header
that never ended (300 MiB sent, 300 MiB held) before any key was checked. Its h11 parser
refuses a head past 16 KiB by itself. :class:`BoundedHeadProtocol` is httptools' protocol
with a bound: a head longer than :data:`MAX_HEAD_BYTES` is answered 431 in the shape of the
API its path names, and the connection is closed, nothing more read.

uvicorn bounds the wait for a request only on a connection that answered one (its keep-alive
timeout, cancelled by the first byte that comes), so a connection that sent nothing, or a head
sent a byte at a time, was held for good. Here a connection that sends nothing is closed as an
idle kept-alive one is, and a head not whole within :data:`HEAD_SECONDS` is answered 408 and
closed. A body, which uvicorn waits for as long as the request may run (the gateway's
``request_timeout_seconds``, 600 s by default: a body sent a byte at a time held a connection
and a task that long), is bounded as the head is: not whole within :data:`BODY_SECONDS` of
its head's end, it is answered 408 and the connection closed.

The same protocol mends what uvicorn does with the HTTP around a request (docs/gateway.md, "In
a container"): a request that is not HTTP/1.1 is a 400 in its API's shape, after the answers
to the requests read whole before it; an upgrade it does not serve (h2c) is ignored, not the
body lost; an answer to HTTP/1.0 is not chunked; and a connection whose client reads nothing
is dropped, not held, once its answer is given up.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from metis.core.ids import new_request_id
from metis.errors import InvalidRequestError
from metis.gateway.errors import (
    BODY_LATE,
    HeadTooLargeError,
    RequestTimeoutError,
    anthropic_error,
    openai_error,
)

MAX_HEAD_BYTES = 64 * 1024
"""The longest request line and headers, together, read before the body."""
HEAD_SECONDS = 30.0
"""The longest a request line and headers may take to arrive, counted from the connection's
opening or its last answer."""
BODY_SECONDS = 120.0
"""The longest a request's body may take to arrive, counted from the end of its head (the
time the server spends not reading it, its reads paused, not counted against it). A body of
32 MiB, the gateway's default ``max_request_bytes``, arrives within it at about 2.3 Mbit/s."""


class BoundedHeadProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, refusing a request head past :data:`MAX_HEAD_BYTES`.

    A head's size is known two ways, each a lower bound: the request line and the headers
    the parser has completed (however the reads cut them, a whole head in one read included),
    and the reads that fell wholly inside the head (a header that never ends, which the
    parser holds without a callback). Either past the bound refuses it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.head_bytes = -1
        """The request line and headers completed of the head in progress; -1 outside one."""
        self.read_inside = 0
        """Bytes of the reads that fell wholly inside the head in progress."""
        self.heads = 0
        """Request heads begun on this connection."""
        self.refused = False
        self.last_answer = b""
        """The refusal of what followed the requests in hand, written once they are answered."""
        self.framing = False
        """A head of the request's framing alone is parsed (:meth:`_not_upgraded`)."""
        self.head_timer: asyncio.TimerHandle | None = None
        """The head awaited: its time running out ends the connection."""
        self.body_timer: asyncio.TimerHandle | None = None
        """The body awaited: its time running out ends the connection."""
        self.serving: Any = None
        """The request whose application runs (uvicorn's ``cycle`` is the latest read: one
        pipelined behind it, waiting its turn, when the client sent it early)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_arrived()
        self._body_arrived()
        serving = self.serving
        if serving is not None and serving is not self.cycle and not serving.response_complete:
            # uvicorn tells only its latest request: one pipelined behind the request in hand
            # was told, and the request in hand waited on, its upstream call running, for good
            serving.disconnected = True
            serving.message_event.set()
        super().connection_lost(exc)

    def _start_asgi_task(self, cycle: Any, app: Any) -> None:
        self.serving = cycle
        super()._start_asgi_task(cycle, app)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.timeout_keep_alive_task is None:  # a request of it still in hand, or closed
            return
        if self.last_answer:  # what followed the requests answered was not HTTP
            self.transport.write(self.last_answer)
            self.transport.close()
            return
        self._await_head()

    def _await_head(self) -> None:
        self._head_arrived()
        self.head_timer = self.loop.call_later(HEAD_SECONDS, self._head_late)

    def _head_arrived(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def _head_late(self) -> None:
        """The head's time ran out: a head begun is answered 408; nothing more is read."""
        self.head_timer = None
        if self.transport.is_closing():
            return
        if self.head_bytes >= 0:
            self.transport.write(head_too_slow(self.url))
        self.refused = True
        self.transport.close()

    def _body_arrived(self) -> None:
        if self.body_timer is not None:
            self.body_timer.cancel()
            self.body_timer = None

    def _body_late(self) -> None:
        """The body's time ran out: answered 408 unless its answer has begun; nothing more is
        read. While the server does not read (its reads paused: a request pipelined behind
        one still answered, or a body the application has not taken yet), it waits longer."""
        self.body_timer = None
        if self.transport.is_closing():
            return
        if self.flow.read_paused:
            self.body_timer = self.loop.call_later(BODY_SECONDS, self._body_late)
            return
        cycle = self.cycle
        cycle.scope[BODY_LATE] = body_late_said()  # type: ignore[literal-required]
        if not cycle.response_started:
            self.transport.write(body_too_slow(self.url))
        if not cycle.response_complete:  # as a client gone: the application writes no more
            cycle.disconnected = True
        cycle.message_event.set()
        self.refused = True
        self.transport.close()

    def on_message_begin(self) -> None:
        if not self.refused and not self.framing:
            super().on_message_begin()
            self.head_bytes, self.read_inside = 0, 0
            self.heads += 1

    def on_url(self, url: bytes) -> None:
        if not self.refused and not self.framing:
            super().on_url(url)
            self.head_bytes += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.refused and not self.framing:
            super().on_header(name, value)
            self.head_bytes += len(name) + len(value) + 4

    def on_headers_complete(self) -> None:
        if self.framing:
            return
        self._head_arrived()
        if self.refused or self._past_bound():
            self.refused = True
            return
        self.head_bytes = -1
        before = self.cycle
        super().on_headers_complete()
        if self.cycle is not before:  # a request begun (not a WebSocket's handshake)
            self.cycle.transport = _Dropping(self.transport, self.cycle)  # type: ignore[assignment]
            self.body_timer = self.loop.call_later(BODY_SECONDS, self._body_late)

    def on_body(self, body: bytes) -> None:
        if not self.refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        self._body_arrived()
        if not self.refused:
            super().on_message_complete()

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return
        heads, inside = self.heads, self.head_bytes >= 0
        self._unset_keepalive_if_required()
        self._feed(data)
        if inside and heads == self.heads and self.head_bytes >= 0:
            self.read_inside += len(data)
        if self.last_answer or self.transport.is_closing():
            return
        if self.refused or self._past_bound():
            self.refused = True
            self.transport.write(head_too_large(self.url))
            self.transport.close()

    def _feed(self, data: bytes) -> None:
        """As uvicorn's ``data_received``, but for an upgrade it does not serve (all but
        WebSocket's), which is ignored, as a server may: the request is answered as if it had
        not asked. httptools' parser takes all that follows such a head for the new protocol's,
        so its body (curl --http2 asks for h2c on a POST to http://) was lost, and a valid
        request answered 400, "not valid JSON"."""
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:  # uvicorn's answer was text, not the API's
            error = InvalidRequestError(f"the request is not valid HTTP/1.1: {exc}"[:300])
            refusal = _refusal(b"400 Bad Request", error, getattr(self, "url", b""))
            self.refused = True
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete and not cycle.more_body:
                self.last_answer = refusal  # the requests read whole before it answered first
                return
            self.transport.write(refusal)
            self.transport.close()
        except httptools.HttpParserUpgrade as upgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
                return
            self._not_upgraded()
            self._feed(data[upgrade.args[0] :])

    def _not_upgraded(self) -> None:
        """A parser for the body of the request in hand and the requests after it: told the
        body's framing by a head of the request's own framing headers alone, not passed on."""
        framing = b"".join(
            name + b": " + value + b"\r\n"
            for name, value in self.headers
            if name in (b"content-length", b"transfer-encoding")
        )
        self.parser = httptools.HttpRequestParser(self)
        self.cycle.more_body = True
        self.framing = True
        try:
            self.parser.feed_data(b"POST / HTTP/1.1\r\n" + framing + b"\r\n")
        finally:
            self.framing = False

    def _past_bound(self) -> bool:
        return max(self.head_bytes, self.read_inside) > MAX_HEAD_BYTES


def head_too_large(path: bytes) -> bytes:
    """The whole 431 answer, in the shape of the API ``path`` (as far as it came) names."""
    error = HeadTooLargeError(
        f"the request line and headers are longer than {MAX_HEAD_BYTES >> 10} KiB"
    )
    return _refusal(b"431 Request Header Fields Too Large", error, path)


def head_too_slow(path: bytes) -> bytes:
    """The whole 408 answer to a head not whole within :data:`HEAD_SECONDS`."""
    error = RequestTimeoutError(
        f"the request line and headers did not arrive within {HEAD_SECONDS:g} s"
    )
    return _refusal(b"408 Request Timeout", error, path)


def body_too_slow(path: bytes) -> bytes:
    """The whole 408 answer to a body not whole within :data:`BODY_SECONDS` of its head."""
    return _refusal(b"408 Request Timeout", RequestTimeoutError(body_late_said()), path)


def body_late_said() -> str:
    return f"the request body did not arrive within {BODY_SECONDS:g} s of its headers"


def _refusal(status: bytes, error: InvalidRequestError, path: bytes) -> bytes:
    """An answer of ``status`` written whole, the connection closed after it, ``error`` in the
    shape of the API ``path`` names."""
    request_id = new_request_id()
    if path.startswith(b"/v1/messages"):
        reply = anthropic_error(error, request_id)
    else:
        reply = openai_error(error, request_id)
    body = json.dumps(reply.body).encode()
    head = [b"HTTP/1.1 " + status]
    headers = {**reply.headers, "content-type": "application/json"}
    headers.update({"content-length": str(len(body)), "connection": "close"})
    head += [f"{name}: {value}".encode() for name, value in headers.items()]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


class _Dropping:
    """A request's view of its connection (what uvicorn's request cycle calls of it): closed
    while the answer is unfinished and the client takes none of what was written (it stopped
    reading without closing, and the stream ended, metis.gateway.endings.last_word), the
    connection is dropped, not left open until the client reads what it will never read.
    An answer to an HTTP/1.0 request, which cannot read chunks (RFC 9112, 6.1), is written
    unchunked, ended by the connection's close (uvicorn chunks one of no stated length)."""

    __slots__ = ("_cycle", "_transport", "is_closing", "write")

    def __init__(self, transport: asyncio.Transport, cycle: Any) -> None:
        self._transport, self._cycle = transport, cycle
        self.write: Callable[[bytes], None] = transport.write
        self.is_closing = transport.is_closing
        if cycle.scope["http_version"] == "1.0":
            self.write = self._head_to_1_0

    def _head_to_1_0(self, data: bytes) -> None:
        """The answer's head (uvicorn's first write): unchunked, and said to close."""
        self.write = self._transport.write
        chunked = b"\r\ntransfer-encoding: chunked\r\n"
        if chunked in data:
            data = data.replace(chunked, b"\r\n", 1)
            if b"\r\nconnection: close\r\n" not in data:
                data = data[:-2] + b"connection: close\r\n\r\n"
            self._cycle.keep_alive = False
            self.write = self._unchunked
        self._transport.write(data)

    def _unchunked(self, data: bytes) -> None:
        """A piece of the body, as uvicorn writes it: whole chunks (the last of size 0)."""
        pieces, at = [], 0
        while at < len(data):
            end = data.index(b"\r\n", at)
            size = int(data[at:end], 16)
            if size == 0:
                break
            pieces.append(data[end + 2 : end + 2 + size])
            at = end + 4 + size
        self._transport.write(b"".join(pieces))

    def close(self) -> None:
        if not self._cycle.response_complete and self._cycle.flow.write_paused:
            self._transport.abort()
        else:
            self._transport.close()
