"""The request head's bound on ``metis serve``'s HTTP server (docs/gateway.md).

uvicorn's httptools parser, which it runs when httptools is installed (``metis[serve]``
installs it), reads a request line and headers of any length: it held every byte of a header
that never ended (300 MiB sent, 300 MiB held) before any key was checked. Its h11 parser
refuses a head past 16 KiB by itself. :class:`BoundedHeadProtocol` is httptools' protocol
with a bound: a head longer than :data:`MAX_HEAD_BYTES` is answered 431 in the shape of the
API its path names, and the connection is closed, nothing more read.
"""

from __future__ import annotations

import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from metis.core.ids import new_request_id
from metis.gateway.errors import HeadTooLargeError, anthropic_error, openai_error

MAX_HEAD_BYTES = 64 * 1024
"""The longest request line and headers, together, read before the body."""


class BoundedHeadProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, refusing a request head past :data:`MAX_HEAD_BYTES`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.head_bytes = -1
        """Bytes read of the request head in progress after the read it began in (that one
        may end the request before it); -1 outside a head."""
        self.heads = 0
        """Request heads begun on this connection."""

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.head_bytes = 0
        self.heads += 1

    def on_headers_complete(self) -> None:
        self.head_bytes = -1
        super().on_headers_complete()

    def data_received(self, data: bytes) -> None:
        heads = self.heads
        super().data_received(data)
        if self.head_bytes < 0 or heads != self.heads or self.transport.is_closing():
            return
        self.head_bytes += len(data)
        if self.head_bytes > MAX_HEAD_BYTES:
            self.transport.write(head_too_large(self.url))
            self.transport.close()


def head_too_large(path: bytes) -> bytes:
    """The whole 431 answer, in the shape of the API ``path`` (as far as it came) names."""
    error = HeadTooLargeError(
        f"the request line and headers are longer than {MAX_HEAD_BYTES >> 10} KiB"
    )
    request_id = new_request_id()
    if path.startswith(b"/v1/messages"):
        reply = anthropic_error(error, request_id)
    else:
        reply = openai_error(error, request_id)
    body = json.dumps(reply.body).encode()
    head = [b"HTTP/1.1 431 Request Header Fields Too Large"]
    headers = {**reply.headers, "content-type": "application/json"}
    headers.update({"content-length": str(len(body)), "connection": "close"})
    head += [f"{name}: {value}".encode() for name, value in headers.items()]
    return b"\r\n".join(head) + b"\r\n\r\n" + body
