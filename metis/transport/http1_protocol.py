"""One HTTP/1.1 connection of the lean transport (:mod:`metis.transport.http1`): an asyncio
protocol whose bytes httptools parses as they arrive.

The protocol keeps what the parser handed it for the response in flight: its head, then the
body's bytes in a list, joined when the reader asks for them, so a read returns everything
that arrived since the last one, however many HTTP chunks it spans. A reader that finds
nothing waits on one future (and one timer, for its timeout). Past ``PAUSE_AT`` bytes not yet
read the socket is no longer read, until the reader takes them. A write waits only when the
transport asked it to stop (``pause_writing``).

Failures are httpx's own exceptions, as its transport raises them: a response httptools cannot
parse, or one the server ended before its end, is a ``RemoteProtocolError``; a reset
connection a ``ReadError`` or ``WriteError``; a wait that ran out a ``ReadTimeout`` or
``WriteTimeout``.

A connection may carry another request once its response was read to its end, when neither
side said ``Connection: close`` (or spoke HTTP/1.0 without keep-alive), and no byte arrived
past that end (:meth:`Http1Connection.reusable`).
"""

from __future__ import annotations

import asyncio
import math
import select
from collections.abc import Callable
from typing import Any, cast

import httptools
import httpx

from metis.transport.http1_parse import ResponseParsing, new_parser, wake
from metis.transport.http1_repair import HEAD_END

PAUSE_AT = 256 * 1024
"""Bytes received and not yet read at which the socket is no longer read."""
MAX_HEAD_BYTES = 100 * 1024
"""The longest response head read (its status line and fields), as httpx's own transport
bounds it: a longer one is a ``RemoteProtocolError``, not held in memory as it grows."""


class Http1Connection(ResponseParsing, asyncio.Protocol):
    """One connection; at most one response in flight on it (see the module)."""

    def __init__(self, on_lost: Callable[[Http1Connection], None] | None = None) -> None:
        self.transport: asyncio.Transport | None = None
        self.fd = -1
        self.on_lost = on_lost
        """Called when the connection ends while it is idle (the pool drops it)."""
        self.parser = new_parser(self)
        self.fresh_parser = False
        """Whether the next response needs a new parser (the last answered a HEAD: httptools
        would wait for the body its head announced)."""
        self.origin: tuple[str, str, int] = ("", "", 0)
        self.idle_since = 0.0
        self.in_use = False
        self.closed = False
        self.keep_alive = True
        self.overread = False
        self.request: httpx.Request | None = None
        self._reset()
        self.lost: BaseException | None = None
        self.reading_paused = False
        self.writing_paused = False
        self.writer: asyncio.Future[bool] | None = None
        self.read_by = math.inf
        """When the pending read's wait runs out (inf: no timed wait pending)."""
        self.timer: asyncio.TimerHandle | None = None
        self.timer_at = math.inf

    def _reset(self) -> None:
        self.status = 0
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.head = False
        self.complete = False
        self.until_close = True
        self.head_request = False
        self.interim = False
        self.body: list[bytes] = []
        self.buffered = 0
        self.head_bytes = 0
        self.framing_bytes = 0
        """Bytes since the head that held no body (chunk sizes, extensions, trailers)."""
        self.raw_head: list[bytes] = []
        self.refusal = None
        self.reparses = 0
        """The response's bytes until its head is complete (:meth:`_reparse`)."""
        self.framing = 0
        """1: a Content-Length came; 2: a Transfer-Encoding; 3: both."""
        self.error: Exception | None = None
        self.reader: asyncio.Future[bool] | None = None

    def start(self, request: httpx.Request) -> None:
        """Make ready for ``request``'s response."""
        self._reset()
        if self.fresh_parser:
            self.parser = new_parser(self)
            self.fresh_parser = False
        self.in_use = True
        self.request = request
        self.keep_alive = request.headers.get("connection", "").lower() != "close"
        self.head_request = request.method == "HEAD"

    # asyncio's callbacks ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass
        sock = transport.get_extra_info("socket")
        self.fd = sock.fileno() if sock is not None else -1

    def data_received(self, data: bytes) -> None:
        if not self.in_use or self.complete:  # nothing asked for: never reused
            self.overread = True
            if not self.in_use and self.transport is not None:
                self.transport.close()
            return
        if self.head:  # (the body's bytes: one check on their way)
            before = self.buffered
            try:
                self.parser.feed_data(data)
            except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
                self._refused(exc)
            gained = self.buffered - before  # (the rest: chunk framing, trailer fields)
            self.framing_bytes = len(data) - gained + (0 if gained else self.framing_bytes)
            if self.framing_bytes > MAX_HEAD_BYTES and self.error is None:
                self._refuse_framing()
        else:
            self._head_data(data)
        if not self.head and self.error is None:
            self.head_bytes += len(data)
            if self.head_bytes > MAX_HEAD_BYTES:
                self._refuse_head()
        if self.buffered > PAUSE_AT and not self.reading_paused and self.transport is not None:
            self.reading_paused = True
            self.transport.pause_reading()
        wake(self.reader)

    def _head_data(self, data: bytes) -> None:
        """Bytes before the head is whole: kept, in case httptools refuses them (then parsed
        again once the head has all come, metis/transport/http1_parse.py)."""
        self.raw_head.append(data)
        if self.refusal is None:
            try:
                self.parser.feed_data(data)
            except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
                self._refused(exc)
        elif HEAD_END.search(b"".join(self.raw_head[-3:])[-len(data) - 2 :]):  # now whole
            self.reparse()

    def _refuse_head(self) -> None:
        self.error = httpx.RemoteProtocolError(
            f"the server's response head is longer than {MAX_HEAD_BYTES >> 10} KiB",
            request=self.request,
        )
        self.keep_alive = False
        if self.transport is not None:
            self.transport.abort()

    def _refuse_framing(self) -> None:
        self.error = httpx.RemoteProtocolError(
            f"the server sent over {MAX_HEAD_BYTES >> 10} KiB of chunk framing or trailer "
            "fields with no body between",
            request=self.request,
        )
        self.keep_alive = False
        if self.transport is not None:
            self.transport.abort()

    def eof_received(self) -> bool:
        return False  # the transport closes itself: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.lost = exc
        ending = self.in_use and self.head and not self.complete and self.until_close
        if ending and exc is None:  # a body read until the connection closes has ended
            self.complete = True
            self.keep_alive = False
        wake(self.reader)
        wake(self.writer)
        if not self.in_use and self.on_lost is not None:
            self.on_lost(self)

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        wake(self.writer)

    # What the transport asks -----------------------------------------------------------

    async def read_head(self, seconds: float | None) -> None:
        """Until the response's head has arrived."""
        while not self.head:
            self._check_failed("before a response arrived")
            await self._wait(seconds)

    async def read(self, seconds: float | None) -> bytes | None:
        """The body's bytes that arrived since the last read, joined; None at its end."""
        while True:
            body = self.body
            if body:
                self.body = []
                self.buffered = 0
                if self.reading_paused and self.transport is not None:
                    self.reading_paused = False
                    self.transport.resume_reading()
                return body[0] if len(body) == 1 else b"".join(body)
            if self.complete:
                return None
            self._check_failed("before the response's end")
            await self._wait(seconds)

    def _check_failed(self, when: str) -> None:
        if self.error is not None:
            raise self.error
        if self.closed:
            if self.lost is not None:
                raise httpx.ReadError(
                    f"the connection failed {when}: {self.lost}", request=self.request
                ) from self.lost
            raise httpx.RemoteProtocolError(
                f"the server closed the connection {when}", request=self.request
            )

    async def _wait(self, seconds: float | None) -> None:
        """Until the protocol has news; ``ReadTimeout`` after ``seconds``. A stream waits
        once per event with a timeout far longer than the events' spacing, so the timer is
        not made and cancelled per wait: one timer stands, and when it fires it expires the
        wait then pending if that wait's own time is up, else sets itself to that time."""
        loop = asyncio.get_running_loop()
        waiter = self.reader = loop.create_future()
        if seconds is not None:
            self.read_by = due = loop.time() + seconds
            if self.timer is None or self.timer_at > due:
                if self.timer is not None:
                    self.timer.cancel()
                self.timer_at = due
                self.timer = loop.call_at(due, self._time_up)
        try:
            await waiter
        finally:
            self.reader = None
            self.read_by = math.inf
        if waiter.result():
            raise httpx.ReadTimeout("timed out waiting for the response", request=self.request)

    def _time_up(self) -> None:
        self.timer = None
        if self.reader is None or self.read_by == math.inf:
            return
        loop = asyncio.get_running_loop()
        if loop.time() >= self.read_by - 0.001:  # (a timer may fire a hair early)
            _expire(self.reader)
        else:
            self.timer_at = self.read_by
            self.timer = loop.call_at(self.read_by, self._time_up)

    async def write(self, data: bytes, seconds: float | None) -> None:
        """Hand ``data`` to the transport; wait while it asks writes to stop. Once the
        response's head has come, nothing more is sent and no wait goes on (as httpx's
        transport reads an early answer after its write failed), and the connection is not
        reused."""
        if self.head:  # answered before the body was sent (a 413): the rest is not sent
            self.keep_alive = False
            return
        transport = self.transport
        if transport is None or self.closed or transport.is_closing():
            raise httpx.WriteError("the connection is closed", request=self.request)
        transport.write(data)
        while self.writing_paused and not self.closed and not self._answered():
            loop = asyncio.get_running_loop()
            waiter = self.writer = loop.create_future()
            timer = None if seconds is None else loop.call_later(seconds, _expire, waiter)
            try:
                await waiter
            finally:
                self.writer = None
                if timer is not None:
                    timer.cancel()
            if waiter.result():
                raise httpx.WriteTimeout("timed out sending the request", request=self.request)
        if self._answered() and self.writing_paused:  # (while the rest waited to be sent)
            self.keep_alive = False
        self._check_written()

    def _answered(self) -> bool:
        return self.head  # (a call: the head may arrive while a write waits)

    def _check_written(self) -> None:
        if self.closed and not self.head:  # (an answer that came before it still counts)
            if self.error is not None:
                raise self.error
            raise httpx.WriteError(f"the connection closed: {self.lost}", request=self.request)

    def reusable(self) -> bool:
        """Whether the response was read to its end and the connection may carry another."""
        return (
            self.complete
            and not self.body
            and self.keep_alive
            and not self.overread
            and not self.closed
            and self.error is None
        )

    def usable_idle(self) -> bool:
        """Whether an idle connection is still open and silent (the server may have closed
        it, or sent bytes, without the loop having told the protocol yet)."""
        if self.closed or self.overread or self.fd < 0:
            return False
        transport = self.transport
        if transport is None or transport.is_closing():
            return False
        return not self.is_readable()

    def is_readable(self) -> bool:
        """Whether the socket has bytes (or its end) the loop has not handed on yet."""
        if self.fd < 0:
            return False
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        return bool(poller.poll(0))

    def abort(self, reason: str) -> None:
        """End the response in flight from outside: a pending read raises at once."""
        if self.error is None:
            self.error = httpx.ReadError(reason, request=self.request)
        wake(self.reader)
        wake(self.writer)
        self.close()

    def close(self) -> None:
        """Close the connection (at once: nothing it was sending matters any more)."""
        self.closed = True
        self.in_use = False
        self.on_lost = None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.transport is not None:
            self.transport.abort()

    def extra(self, name: str) -> Any:
        return None if self.transport is None else self.transport.get_extra_info(name)


def _expire(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(True)
