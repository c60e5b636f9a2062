"""Reading an HTTP/1.1 body by what arrived, not by HTTP chunk.

Providers send each event of a stream as its own HTTP chunk, and httpcore hands the body on
one chunk at a time: each goes up through five generator frames (httpcore's connection and
pool streams, httpx's transport and response streams) and an exception-mapping context, and
the send loop then frames, reads and passes on one chunk's events. When one socket read
holds many chunks (a fast or a bursty upstream, a gateway's reply read at once) that is paid
per chunk for bytes that were all there together.

:func:`held_reads` reads the body from the response's HTTP/1.1 connection itself: one
awaited event (a socket read only when h11 holds nothing), then every chunk h11 can already
parse from what it holds, joined. The bytes are the ones httpcore would have handed on, in
the same order; only their grouping differs, which the framing already allows (a chunk may
be cut anywhere). h11 still parses every chunk, and httpcore still reads the socket (with
the transport's bounded reads) and closes the response: its connection is pooled again
when the body ended, closed otherwise, exactly as when its own iterator is closed. A failure
is raised as the client's own exception (``httpx.ReadTimeout``, ``RemoteProtocolError``, ...),
mapped by the client's own function.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

import h11
import httpx

CLIENTS = {"httpcore": "httpx", "httpcore2": "httpx2"}
"""Each connection package, and the client package that maps its exceptions."""


def held_reads(
    response: httpx.Response, connection: Any
) -> Callable[[], Awaitable[bytes | None]] | None:
    """``response``'s body read by what has arrived (None at its end), from ``connection``
    (httpcore's HTTP/1.1 connection that reads it); None when the response is not one this
    can read (another client or protocol, a traced request, a body already being read)."""
    mapping = _exception_mapping(connection)
    stream = _connection_stream(response)
    if mapping is None or stream is None or stream._connection is not connection:
        return None
    protocol_error = sys.modules[type(connection).__module__.split(".", 1)[0]].RemoteProtocolError
    request = stream._request
    if request.extensions.get("trace") is not None:  # httpcore's trace hooks stay its own
        return None
    timeout = request.extensions.get("timeout", {}).get("read")
    state = connection._h11_state
    receive, next_event, data_class = connection._receive_event, state.next_event, h11.Data
    ended = False
    failed: h11.RemoteProtocolError | None = None

    async def read() -> bytes | None:
        nonlocal ended, failed
        if ended:
            return None
        with mapping():
            if failed is not None:  # what came before it was handed on first
                raise protocol_error(str(failed)) from failed
            event = await receive(timeout=timeout)
            if event.__class__ is not data_class:  # EndOfMessage (or PAUSED: nothing more)
                ended = True
                return None
            parts = [event.data]
            try:
                while (event := next_event()).__class__ is data_class:  # what h11 holds
                    parts.append(event.data)
            except h11.RemoteProtocolError as exc:
                failed = exc
        if event.__class__ is h11.EndOfMessage:
            ended = True
        return b"".join(parts) if len(parts) > 1 else bytes(parts[0])

    return read


def _exception_mapping(connection: Any) -> Callable[[], Any] | None:
    package = type(connection).__module__.split(".", 1)[0]
    client = sys.modules.get(f"{CLIENTS.get(package)}._transports.default")
    if client is None or not hasattr(connection, "_receive_event"):
        return None
    mapping: Callable[[], Any] | None = getattr(client, "map_httpcore_exceptions", None)
    return mapping


def _connection_stream(response: httpx.Response) -> Any:
    """httpcore's byte stream of ``response``'s connection, under httpx's two and the
    pool's; None when another stream is found (a mock's, a decoder's)."""
    stream: Any = response.stream
    for attribute in ("_stream", "_httpcore_stream", "_stream"):
        stream = getattr(stream, attribute, None)
    if stream is None or not hasattr(stream, "_connection") or not hasattr(stream, "_request"):
        return None
    return stream
