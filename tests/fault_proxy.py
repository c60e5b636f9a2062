"""A loopback HTTP/1.1 peer with scripted faults, over real sockets, under asyncio and trio.

``FaultProxy`` listens on 127.0.0.1 and answers each request it reads with the next script in
its queue: a list of steps, run in order on the client's socket. A step is raw bytes to send,
or one of the faults below. With an ``upstream`` (the emulator's address), the ``FORWARD`` step
relays the request there and its answer back, so a fault can be put in front of a real
provider stream (``Forward(stall_after=n)``: the first n bytes of the answer, then silence).
With no script left, a request is forwarded, or answered 500 when there is no upstream.

    async with FaultProxy.running() as proxy:
        proxy.script(response(500, b'{"error":...}', declared_length=400), HANG)
        ... an adapter with base_url=proxy.url ...

After a script the connection stays open for the next request (keep-alive), unless a step
ended it. ``proxy.requests`` keeps what each request carried; ``proxy.connections`` counts
accepted connections, so a test can tell whether a client reused one.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
from anyio.abc import SocketAttribute, SocketStream


class _Step:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Pause:
    """Send nothing for this long, then go on."""

    seconds: float


@dataclass(frozen=True)
class Trickle:
    """Send ``data`` one byte at a time, ``every`` seconds apart (a slowloris body)."""

    data: bytes
    every: float


@dataclass(frozen=True)
class Forward:
    """Relay the request to the upstream and its answer back; after ``stall_after`` bytes of
    the answer (headers included), stop relaying and hold the connection open."""

    stall_after: int | None = None
    then: _Step | None = None
    """What comes after those bytes (None: the connection held open, silent; or RESET, CLOSE,
    DRAIN)."""


@dataclass(frozen=True)
class Notify:
    """Set ``event`` when the script gets here (a test waits for a point in the answer)."""

    event: anyio.Event


HANG = _Step("HANG")  # half-open: the connection stays up and nothing more is ever sent
RESET = _Step("RESET")  # the connection is reset (RST), mid-answer if anything was sent
CLOSE = _Step("CLOSE")  # the connection is closed cleanly (FIN) here
DRAIN = _Step("DRAIN")  # nothing more sent; the connection read until the client closes it
FORWARD = Forward()

Step = bytes | Pause | Trickle | Forward | Notify | _Step


@dataclass
class SeenRequest:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes
    connection: int  # which accepted connection carried it (1, 2, ...)


def response(
    status: int,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    *,
    declared_length: int | None = None,
    head_only: bool = False,
) -> bytes:
    """A raw HTTP/1.1 answer. ``declared_length`` sets Content-Length to something other than
    the body's length (a short body); ``head_only`` leaves the body out (send it in later
    steps)."""
    fields = {"content-type": "application/json", **(headers or {})}
    fields["content-length"] = str(len(body) if declared_length is None else declared_length)
    head = f"HTTP/1.1 {status} X\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items())
    return head.encode() + b"\r\n" + (b"" if head_only else body)


def chunked_head(status: int = 200, headers: dict[str, str] | None = None) -> bytes:
    """The head of a chunked answer (an SSE stream by default); send ``chunk()``s after it."""
    fields = {"content-type": "text/event-stream", **(headers or {})}
    fields["transfer-encoding"] = "chunked"
    head = f"HTTP/1.1 {status} X\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items())
    return head.encode() + b"\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data) if data else b"0\r\n\r\n"


class FaultProxy:
    def __init__(self, upstream: tuple[str, int] | None = None) -> None:
        self.upstream = upstream
        self.port = 0
        self.scripts: list[list[Step]] = []
        self.requests: list[SeenRequest] = []
        self.connections = 0
        self.relayed: list[int] = []  # bytes of each whole answer FORWARD relayed
        self.answers: list[bytes] = []  # each answer FORWARD relayed, as far as it went
        self.open = 0  # connections accepted and not yet ended
        self.drained = 0  # DRAIN steps whose connection the client closed

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, *steps: Step) -> None:
        """Queue what to do for the next request that has no script yet."""
        self.scripts.append(list(steps))

    @classmethod
    @asynccontextmanager
    async def running(cls, upstream: tuple[str, int] | None = None) -> AsyncIterator[FaultProxy]:
        proxy = cls(upstream)
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        proxy.port = listener.extra(SocketAttribute.local_port)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(listener.serve, proxy._serve_connection)
            try:
                yield proxy
            finally:
                tasks.cancel_scope.cancel()
        await listener.aclose()

    async def _serve_connection(self, stream: SocketStream) -> None:
        self.connections += 1
        self.open += 1
        try:
            await self._served(stream, self.connections)
        finally:
            self.open -= 1

    async def _served(self, stream: SocketStream, number: int) -> None:
        buffer = bytearray()
        async with stream:
            while True:
                try:
                    raw = await _read_request(stream, buffer)
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return
                seen = _parse(raw, number)
                self.requests.append(seen)
                steps = self.scripts.pop(0) if self.scripts else [FORWARD]
                try:
                    if not await self._run(steps, stream, raw):
                        return
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return

    async def _run(self, steps: list[Step], stream: SocketStream, raw: bytes) -> bool:
        """Run one script; False when it ended the connection."""
        keep_open = True
        for step in steps:
            if isinstance(step, bytes):
                await stream.send(step)
            elif isinstance(step, Pause):
                await anyio.sleep(step.seconds)
            elif isinstance(step, Trickle):
                for byte in step.data:
                    await stream.send(bytes([byte]))
                    await anyio.sleep(step.every)
            elif isinstance(step, Notify):
                step.event.set()
            elif isinstance(step, Forward):
                keep_open = await self._forward(step, stream, raw) and keep_open
            elif step is HANG:
                await anyio.sleep_forever()
            elif step is DRAIN:
                await _drained(stream)
                self.drained += 1
                return False
            elif step is RESET:
                await _reset(stream)
                return False
            elif step is CLOSE:
                await stream.aclose()
                return False
        return keep_open

    async def _forward(self, step: Forward, stream: SocketStream, raw: bytes) -> bool:
        """Relay one exchange; False when the connection must end after it."""
        if self.upstream is None:
            await stream.send(response(500, b'{"error": "no upstream"}'))
            return True
        head, _, body = raw.partition(b"\r\n\r\n")
        lines = [
            line for line in head.split(b"\r\n") if not line.lower().startswith(b"connection:")
        ]
        request = b"\r\n".join([*lines, b"connection: close"]) + b"\r\n\r\n" + body
        sent = 0
        answer = bytearray()
        self.answers.append(b"")
        async with await anyio.connect_tcp(*self.upstream) as upstream:
            await upstream.send(request)
            async for received in upstream:
                data = received
                if sent == 0:  # this connection ends with the answer: say so in its head
                    line_end = data.index(b"\r\n") + 2
                    data = data[:line_end] + b"connection: close\r\n" + data[line_end:]
                if step.stall_after is not None and sent + len(data) >= step.stall_after:
                    await stream.send(data[: step.stall_after - sent])
                    self.answers[-1] = bytes(answer + data[: step.stall_after - sent])
                    if step.then is None:
                        await anyio.sleep_forever()
                    return await self._run([step.then], stream, raw)
                await stream.send(data)
                answer += data
                sent += len(data)
        self.relayed.append(sent)
        self.answers[-1] = bytes(answer)
        return False  # the upstream closed after its answer: so does this connection


async def _drained(stream: SocketStream) -> None:
    """Read (and drop) what the client sends until it closes the connection."""
    try:
        while True:
            await stream.receive()
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
        return


async def _read_request(stream: SocketStream, buffer: bytearray) -> bytes:
    while b"\r\n\r\n" not in buffer:
        buffer += await stream.receive()
    end = buffer.index(b"\r\n\r\n") + 4
    length = _parse(bytes(buffer[:end]), 0).headers.get("content-length", "0")
    while len(buffer) < end + int(length):
        buffer += await stream.receive()
    raw = bytes(buffer[: end + int(length)])
    del buffer[: end + int(length)]
    return raw


def _parse(raw: bytes, connection: int) -> SeenRequest:
    head, _, body = raw.partition(b"\r\n\r\n")
    request_line, *lines = head.decode("latin-1").split("\r\n")
    method, target, _ = request_line.split(" ", 2)
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return SeenRequest(method, target, headers, body, connection)


async def _reset(stream: SocketStream) -> None:
    """Close with SO_LINGER 0, so the peer gets a reset rather than an orderly end."""
    sock = stream.extra(SocketAttribute.raw_socket)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    await stream.aclose()
