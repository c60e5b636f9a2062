"""A loopback server that answers each request with crafted bytes, and what a client over a
given transport makes of them: the differential test of the lean transport against httpx's
own (tests/transport/test_lean_vs_httpx.py) drives one reply through both and compares."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import httpx

from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.transport.clients import is_decoding_error, is_timeout
from metis.transport.exchange import Limits, open_exchange

NEXT = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext"
"""The answer to ``GET /next``, the request sent after each reply on the same client."""


@dataclass(frozen=True)
class Reply:
    """The bytes a server sends for one request, in ``pieces`` (each written and drained on its
    own), then whether it closes the connection."""

    pieces: tuple[bytes, ...]
    close: bool = False
    method: str = "GET"


def reply(*pieces: bytes, close: bool = False, method: str = "GET") -> Reply:
    return Reply(pieces, close, method)


@dataclass
class Outcome:
    """What a client saw: the response (or the failure) and whether the next request went on
    the same connection."""

    status: int | None = None
    reason: bytes | None = None
    version: str | None = None
    headers: list[tuple[bytes, bytes]] | None = None
    body: bytes = b""
    error: str | None = None
    metis_error: str | None = None
    next_body: bytes | None = None
    reused: bool | None = None
    extensions: list[str] = field(default_factory=list)


class ReplayServer:
    """Answers ``GET /next`` with :data:`NEXT`, any other request with :attr:`reply`; records
    which connection each request came on."""

    def __init__(self) -> None:
        self.reply = reply(NEXT)
        self.seen: list[tuple[int, str]] = []
        self._connections = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None] | None] = set()
        self.port = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections += 1
        number = self._connections
        self._writers.add(writer)
        self._tasks.add(asyncio.current_task())
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                path = head.split(b" ", 2)[1].decode("ascii")
                length = re.search(rb"(?i)\r\ncontent-length: *([0-9]+)", head)
                if length:  # read, so that closing sends no reset
                    await reader.readexactly(int(length[1]))
                self.seen.append((number, path))
                answer = reply(NEXT) if path == "/next" else self.reply
                for n, piece in enumerate(answer.pieces):
                    if n:  # (so that the client may read them apart: what it reads is the same)
                        await asyncio.sleep(0.005)
                    writer.write(piece)
                    await writer.drain()
                if answer.close:
                    return
        finally:
            self._writers.discard(writer)
            writer.close()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[ReplayServer]:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        try:
            yield self
        finally:
            server.close()
            for writer in list(self._writers):
                writer.close()
            await asyncio.gather(*(task for task in self._tasks if task), return_exceptions=True)
            await server.wait_closed()

    def reused(self) -> bool:
        """Whether the last two requests came on one connection."""
        return len(self.seen) >= 2 and self.seen[-1][0] == self.seen[-2][0]


def metis_error(exc: BaseException) -> str:
    """The kind of error metis makes of a client's failure (metis/transport/exchange.py
    ``failure``): a body that does not decode is a ProtocolError, a timeout and any other
    failure of the client a NetworkError (of two kinds), anything else is not classified."""
    if is_decoding_error(exc):
        return "ProtocolError"
    if is_timeout(exc):
        return "NetworkError (timed out)"
    if isinstance(exc, httpx.HTTPError):
        return "NetworkError"
    return f"unclassified {type(exc).__name__}"


async def outcome(
    server: ReplayServer, make: Callable[[], httpx.AsyncBaseTransport], answer: Reply
) -> Outcome:
    """``answer`` read through a client over ``make()``'s transport, then ``GET /next``."""
    server.reply = answer
    server.seen.clear()
    seen = Outcome()
    base = f"http://127.0.0.1:{server.port}"
    async with httpx.AsyncClient(transport=make(), timeout=5.0) as client:
        try:
            async with client.stream(answer.method, base + "/case") as response:
                seen.status = response.status_code
                seen.reason = response.extensions.get("reason_phrase")
                seen.version = response.http_version
                seen.headers = list(response.headers.raw)
                seen.extensions = sorted(set(response.extensions) - {"metis_body"})
                async for part in response.aiter_bytes():
                    seen.body += part
        except Exception as exc:
            seen.error = type(exc).__name__
            seen.metis_error = metis_error(exc)
        try:
            seen.next_body = (await client.get(base + "/next")).content
        except httpx.HTTPError as exc:
            seen.next_body = f"{type(exc).__name__}".encode()
        seen.reused = server.reused()
    return seen


async def through_metis(
    server: ReplayServer, make: Callable[[], httpx.AsyncBaseTransport], answer: Reply
) -> tuple[int | None, bytes, str | None]:
    """``answer`` read by metis's exchange (as a provider's call reads it: its content coding
    undone by metis) over a client on ``make()``'s transport: the status, the body, and the
    class of metis's error (with its message's first words) if it failed."""
    server.reply = answer
    url = f"http://127.0.0.1:{server.port}/case"
    call = Call(
        request_id="req_1",
        provider="openai",
        model="openai:gpt-x",
        wire_model="gpt-x",
        deadline=anyio.current_time() + 10,
    )
    status: int | None = None
    async with httpx.AsyncClient(transport=make()) as client:
        try:
            wire = WireRequest(url, {"model": "gpt-x"}, {}, stream=False).serialized()
            exchange = await open_exchange(client, wire, call, Limits())
            status = exchange.status
            try:
                body = await exchange.body()
            except Exception as exc:
                raise exchange.translate(exc) from exc
            finally:
                await exchange.aclose()
        except Exception as exc:
            return status, b"", type(exc).__name__
    return status, body, None
