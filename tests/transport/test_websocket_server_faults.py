"""A WebSocket server that misbehaves between the frames of a reply: a message longer than an
event may be (a ProtocolError, the connection dropped, the rest never read), a flood of pings
(each answered, the message after them delivered), a close frame in the middle of a message
(ConnectionLost, no hang)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import anyio
import anyio.abc
import pytest
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Ping, Request, TextMessage

from metis.errors import ProtocolError
from metis.transport.websocket import ConnectionLost, WebSocket
from metis.wire.framing.sse import MAX_LINE_LENGTH

PIECE = 1 << 20


class Serving(anyio.abc.ByteStream):
    """The server's side of a connection: each read the next frame it sends; what the client
    writes is kept."""

    def __init__(self, frames: Iterator[bytes]) -> None:
        self.frames = frames
        self.written: list[bytes] = []
        self.pulled = 0

    async def receive(self, max_bytes: int = 65536) -> bytes:
        self.pulled += 1
        return next(self.frames, b"")

    async def send(self, item: bytes) -> None:
        self.written.append(item)

    async def send_eof(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


def connected(frames: Iterator[bytes], server: WSConnection) -> tuple[WebSocket, Serving]:
    client = WSConnection(ConnectionType.CLIENT)
    server.receive_data(client.send(Request(host="example.com", target="/v1/responses")))
    assert any(isinstance(event, Request) for event in server.events())
    client.receive_data(server.send(AcceptConnection()))
    assert any(isinstance(event, AcceptConnection) for event in client.events())
    stream = Serving(frames)
    return WebSocket(stream, client, {}, opened_at=0.0), stream


def overlong_message(server: WSConnection) -> Iterator[bytes]:
    """A message of 4 MiB more than an event-stream line may hold, 1 MiB a frame."""
    for _ in range(MAX_LINE_LENGTH // PIECE + 3):
        yield server.send(TextMessage(data="x" * PIECE, message_finished=False))
    yield server.send(TextMessage(data="x" * PIECE))


@pytest.mark.anyio
async def test_a_message_longer_than_an_event_may_be_is_a_protocol_error_read_no_further() -> None:
    server = WSConnection(ConnectionType.SERVER)
    socket, stream = connected(overlong_message(server), server)
    with anyio.fail_after(60), pytest.raises(ProtocolError, match="longer than 16 MiB"):
        await socket.receive()  # before: held whole, however long
    assert socket.closed and stream.pulled <= MAX_LINE_LENGTH // PIECE + 2


def pings_then_a_message(server: WSConnection) -> Iterator[bytes]:
    for _ in range(5000):
        yield server.send(Ping(payload=b"p" * 125))
    yield server.send(TextMessage(data='{"type":"response.completed"}'))


@pytest.mark.anyio
async def test_a_flood_of_pings_is_answered_and_the_message_after_it_arrives() -> None:
    server = WSConnection(ConnectionType.SERVER)
    socket, stream = connected(pings_then_a_message(server), server)
    with anyio.fail_after(60):
        assert await socket.receive() == '{"type":"response.completed"}'
    assert len(stream.written) == 5000  # a pong for each


def closed_mid_message(server: WSConnection) -> Iterator[bytes]:
    yield server.send(TextMessage(data='{"type":"response.output_text.delta","delta":"a"}'))
    yield server.send(TextMessage(data='{"type":"response.out', message_finished=False))
    yield server.send(CloseConnection(code=1011, reason="going away"))


@pytest.mark.anyio
async def test_a_close_frame_in_the_middle_of_a_message_ends_the_connection() -> None:
    server = WSConnection(ConnectionType.SERVER)
    socket, stream = connected(closed_mid_message(server), server)
    with anyio.fail_after(60):
        assert "delta" in await socket.receive()  # what arrived whole is delivered
        with pytest.raises(ConnectionLost, match=r"closed the connection \(1011: going away\)"):
            await socket.receive()  # the code and reason it gave are said (they were dropped)
    assert socket.closed and len(stream.written) == 1  # the close answered


def closed_with(server: WSConnection, code: int, reason: str) -> Iterator[bytes]:
    yield server.send(CloseConnection(code=code, reason=reason))


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("code", "reason", "said"), [(1008, "", "(1008)"), (4000, "try later é", "(4000: try later é)")]
)
async def test_a_close_between_messages_says_its_code_and_reason(
    code: int, reason: str, said: str
) -> None:
    server = WSConnection(ConnectionType.SERVER)
    socket, _ = connected(closed_with(server, code, reason), server)
    with anyio.fail_after(60), pytest.raises(ConnectionLost) as caught:
        await socket.receive()
    assert str(caught.value) == f"the server closed the connection {said}"
    with pytest.raises(ConnectionLost, match=re.escape(said)):
        await socket.receive()  # asked again, the same


def frame(opcode: int, payload: bytes) -> bytes:
    """One whole unmasked frame, as a server writes it, of any bytes (wsproto writes only
    valid ones)."""
    assert len(payload) < 126
    return bytes([0x80 | opcode, len(payload)]) + payload


@pytest.mark.anyio
async def test_a_text_message_that_is_not_utf8_is_a_protocol_error_as_over_http() -> None:
    # An event-stream line that is not UTF-8 is a ProtocolError over HTTP (never retried: the
    # reply was billed). Over the WebSocket it read as the server closing the connection, a
    # NetworkError that retry sends again.
    server = WSConnection(ConnectionType.SERVER)
    socket, stream = connected(iter([frame(1, b'{"type":"response.created","x":"\xff"}')]), server)
    with anyio.fail_after(60), pytest.raises(ProtocolError, match="not UTF-8"):
        await socket.receive()
    assert socket.closed and len(stream.written) == 1  # the close frame wsproto asks for


@pytest.mark.anyio
@pytest.mark.parametrize(
    "sent",
    [
        bytes([0x81, 0x83, 1, 2, 3, 4, 0x60, 0x60, 0x60]),  # masked: only a client masks
        frame(3, b"abc"),  # a reserved opcode
        bytes([0xC1, 3]) + b"abc",  # a reserved bit set
        frame(0, b"abc"),  # a continuation of no message
    ],
    ids=["masked", "opcode", "reserved-bit", "continuation"],
)
async def test_a_frame_against_the_protocol_says_so(sent: bytes) -> None:
    server = WSConnection(ConnectionType.SERVER)
    socket, _ = connected(iter([sent]), server)
    with anyio.fail_after(60), pytest.raises(ConnectionLost, match="broke the WebSocket protocol"):
        await socket.receive()  # before: "the server closed the connection", which it had not
    assert socket.closed
