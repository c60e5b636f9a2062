"""Bounding and interrupting the reads of one HTTP/1.1 response on its own socket.

A cancel scope per read would cost the streaming path a scope per chunk (a long stream has
thousands). On a real socket the transport does without one: httpcore already puts each
socket read under a timeout, and :func:`bound_socket_reads` makes that timeout the time the
transport's clock allows for this read, instead of the single value httpcore captures when the
body starts. A cancel from another task shuts the socket (:func:`socket_abort`), which ends a
pending read at once. Both touch only this response: once it is closed (its connection may
already serve another request), reads get httpcore's own timeout back and the socket is left
alone.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable
from typing import Any

import httpx


def bound_socket_reads(
    response: httpx.Response, seconds_for_read: Callable[[], float]
) -> Callable[[], None] | None:
    """Give each read of ``response``'s socket ``seconds_for_read()`` at most; return what
    undoes it, or None when the response has no HTTP/1 socket stream of its own (a mock
    transport; HTTP/2, whose connection other requests share)."""
    stream = response.extensions.get("network_stream")
    read: Any = getattr(type(stream), "read", None)
    if response.http_version not in ("HTTP/1.1", "HTTP/1.0") or read is None:
        return None

    async def bounded_read(max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        # httpcore's signature: the timeout it passes is the one it captured for the body.
        seconds = timeout if response.is_closed else seconds_for_read()
        result: bytes = await read(stream, max_bytes, seconds)
        return result

    try:
        stream.read = bounded_read  # type: ignore[union-attr]
    except AttributeError:  # a stream class with slots: keep httpcore's timeout
        return None

    def restore() -> None:
        if vars(stream).get("read") is bounded_read:
            del stream.read  # type: ignore[union-attr]

    return restore


def socket_abort(response: httpx.Response) -> Callable[[], None] | None:
    """A way to end a pending read of this response from another task, if it has a socket."""
    stream = response.extensions.get("network_stream")
    get_extra_info = getattr(stream, "get_extra_info", None)
    sock = get_extra_info("socket") if get_extra_info is not None else None
    if sock is None or not hasattr(sock, "shutdown"):
        return None

    def abort() -> None:
        if response.is_closed:  # its connection may be serving another request by now
            return
        with contextlib.suppress(OSError):  # already closed: nothing left to interrupt
            sock.shutdown(socket.SHUT_RDWR)

    return abort
