"""The HTTP around a request, on a real server as ``metis serve`` runs it (uvicorn, httptools'
parser, metis.gateway.http_head): a head that never ends is refused at its bound, not held
(httptools held every byte of it); a long head within the bound, pipelined requests, an
HTTP/1.0 request and ``Expect: 100-continue`` are served."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from metis.cli.serve import http_protocol
from metis.gateway.app import create_app
from metis.gateway.http_head import MAX_HEAD_BYTES, BoundedHeadProtocol, head_too_large
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config, serving

BODY = json.dumps(
    {"model": "sonnet", "max_tokens": 20, "messages": [{"role": "user", "content": "Hi"}]}
).encode()


@pytest.fixture(scope="module")
def address() -> Iterator[tuple[str, int]]:
    with serving(create_app(gateway_config(Emulator()))) as (url, _):
        host, port = url.removeprefix("http://").split(":")
        yield host, int(port)


def request(version: str = "1.1", extra: bytes = b"", close: bool = True) -> bytes:
    head = (
        f"POST /v1/messages HTTP/{version}\r\nhost: gw\r\nx-api-key: {GATEWAY_KEY}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(BODY)}\r\n"
    ).encode()
    return head + (b"connection: close\r\n" if close else b"") + extra + b"\r\n" + BODY


def exchange(address: tuple[str, int], data: bytes) -> bytes:
    """``data`` sent, and all the server answers until it closes."""
    with socket.create_connection(address, timeout=60) as sock:  # a bound on a hang
        sock.sendall(data)
        answer = b""
        while piece := sock.recv(1 << 16):
            answer += piece
    return answer


def test_the_server_runs_the_bounded_protocol() -> None:
    assert http_protocol() is BoundedHeadProtocol


def test_a_head_that_never_ends_is_refused_not_held(address: tuple[str, int]) -> None:
    """One header sent without end: the server closes the connection once the head passes its
    bound (the socket buffers between take a few MiB more), where it read on."""
    sent = 0
    with socket.create_connection(address, timeout=60) as sock:
        sock.sendall(b"POST /v1/messages HTTP/1.1\r\nhost: gw\r\nx-long: ")
        with pytest.raises(OSError):  # broken pipe or reset: the server hung up
            while sent < 256 << 20:
                sock.sendall(b"a" * (1 << 16))
                sent += 1 << 16
    assert sent < 64 << 20


def test_the_refusal_is_431_in_the_shape_of_the_path() -> None:
    for path, shape in ((b"/v1/messages", "anthropic"), (b"/v1/chat/completions", "openai")):
        head, _, body = head_too_large(path).partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        assert lines[0] == "HTTP/1.1 431 Request Header Fields Too Large"
        headers = dict(line.split(": ", 1) for line in lines[1:])
        assert int(headers["content-length"]) == len(body)
        error = json.loads(body)["error"]
        assert "64 KiB" in error["message"]
        if shape == "anthropic":
            assert error["type"] == "invalid_request_error" and "request-id" in headers
        else:
            assert error["code"] == "request_header_fields_too_large"


def test_a_long_head_within_the_bound_pipelined_and_old_requests_are_served(
    address: tuple[str, int],
) -> None:
    long_header = b"x-long: " + b"a" * (MAX_HEAD_BYTES - 4096) + b"\r\n"
    cases = {
        "a long head": request(extra=long_header),
        "two pipelined": request(close=False) + request(),
        "HTTP/1.0": request("1.0"),
        "Expect: 100-continue": request(extra=b"expect: 100-continue\r\n"),
    }
    for case, data in cases.items():
        answer = exchange(address, data)
        served = answer.count(b"HTTP/1.1 200 OK")
        assert served == (2 if case == "two pipelined" else 1), (case, answer[:300])
        assert b'"type":"message"' in answer, case


def test_an_sdk_with_a_head_too_long_gets_an_error(address: tuple[str, int]) -> None:
    """Not a hang: the connection ends, with the 431 when the client reads it in time."""
    url = f"http://{address[0]}:{address[1]}/v1/messages"
    headers = {"x-api-key": GATEWAY_KEY, "x-long": "a" * (4 * MAX_HEAD_BYTES)}
    try:
        answer = httpx.post(url, content=BODY, headers=headers, timeout=60)
    except httpx.TransportError:
        return  # reset before the answer was read
    assert answer.status_code == 431 and answer.json()["type"] == "error", answer.text


class Transport:
    """What the protocol writes and whether it closed (an asyncio transport's side)."""

    def __init__(self) -> None:
        self.written = b""
        self.closing = False

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 8000) if name in ("sockname", "peername") else default

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None: ...


def fed(reads: list[bytes]) -> tuple[Transport, list[dict[str, object]]]:
    """A protocol fed ``reads``, one ``data_received`` each: its transport and the requests
    it handed to the application."""
    import asyncio

    import uvicorn
    from uvicorn.server import ServerState

    started: list[dict[str, object]] = []

    async def app(scope: dict[str, object], receive: object, send: object) -> None:
        started.append(scope)

    async def feed() -> Transport:
        config = uvicorn.Config(app, http=BoundedHeadProtocol, lifespan="off", log_level="error")
        config.load()
        protocol = BoundedHeadProtocol(config, ServerState(), {})
        transport = Transport()
        protocol.connection_made(transport)  # type: ignore[arg-type]
        for data in reads:
            protocol.data_received(data)
        await asyncio.sleep(0)  # the application's task, if one was started
        protocol.connection_lost(None)
        return transport

    return asyncio.run(feed()), started


@pytest.mark.parametrize("cut", [None, 10, 1000, MAX_HEAD_BYTES, 3 * MAX_HEAD_BYTES])
def test_a_head_past_the_bound_is_refused_however_the_reads_cut_it(cut: int | None) -> None:
    """A whole long head in one read, or cut in two anywhere (a loaded machine's socket hands
    the server whatever has arrived), is refused: no request reaches the application."""
    data = request(extra=b"x-long: " + b"a" * (4 * MAX_HEAD_BYTES) + b"\r\n")
    reads = [data] if cut is None else [data[:cut], data[cut:]]
    transport, started = fed(reads)
    assert transport.written.startswith(b"HTTP/1.1 431 ") and transport.closing
    assert started == []


@pytest.mark.parametrize("cut", [None, 10, 1000, MAX_HEAD_BYTES - 5000])
def test_a_head_within_the_bound_is_served_however_the_reads_cut_it(cut: int | None) -> None:
    data = request(extra=b"x-long: " + b"a" * (MAX_HEAD_BYTES - 4096) + b"\r\n")
    reads = [data] if cut is None else [data[:cut], data[cut:]]
    transport, started = fed(reads)
    assert b" 431 " not in transport.written
    assert [scope["path"] for scope in started] == ["/v1/messages"]


def read_until_closed(sock: socket.socket) -> bytes:
    answer = b""
    while piece := sock.recv(1 << 16):
        answer += piece
    return answer


def one_answer(sock: socket.socket) -> bytes:
    """One answer read whole (its head and the body its Content-Length says)."""
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(1 << 16)
    head, _, body = answer.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += sock.recv(1 << 16)
    return head + b"\r\n\r\n" + body


def test_a_connection_that_sends_nothing_or_a_head_too_slowly_is_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: uvicorn waited for a first request without end (its keep-alive timeout starts
    only once a request was answered, and the first byte that comes cancels it), so a client
    that connected and sent nothing, or a head a byte now and then, held its connection for
    good. Now one that sends nothing is closed as an idle kept-alive one is, and a head not
    whole in time is a 408 in the shape of its path, on a fresh connection or a kept-alive one.
    The socket's timeout bounds a hang; nothing is timed."""
    monkeypatch.setattr("metis.gateway.http_head.HEAD_SECONDS", 0.5)
    app = create_app(gateway_config(Emulator()))
    partial = b"POST /v1/messages HTTP/1.1\r\nhost: gw\r\nx-api-"
    with serving(app, timeout_keep_alive=0.2) as (url, _):
        host, port = url.removeprefix("http://").split(":")
        address = (host, int(port))
        with socket.create_connection(address, timeout=60) as sock:
            assert read_until_closed(sock) == b""  # nothing sent: closed, nothing said
        slow = []  # both heads sent before either 408 is read: their waits run at once
        for before in (b"", request(close=False)):  # fresh, and after an answer kept alive
            sock = socket.create_connection(address, timeout=60)
            answer = b""
            if before:
                sock.sendall(before)
                answer = one_answer(sock)
            sock.sendall(partial)
            slow.append((sock, answer, before))
        for sock, answer, before in slow:
            with sock:
                answer += read_until_closed(sock)
            late = answer[answer.rfind(b"HTTP/1.1 ") :]
            head, _, body = late.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), answer[-500:]
            assert b"connection: close" in head
            assert json.loads(body)["error"]["type"] == "timeout_error", body
            assert answer.count(b"HTTP/1.1 200 OK") == (1 if before else 0)


def test_a_body_too_slow_is_a_408_in_the_shape_of_its_path_and_the_connection_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: a body sent a byte now and then was waited for as long as the request may run
    (request_timeout_seconds, 600 s by default), holding its connection and a task. Now a body
    not whole within BODY_SECONDS of its head's end is a 408 in its API's shape, the only
    answer, and the connection is closed, on a fresh connection or a kept-alive one. The
    socket's timeout bounds a hang; nothing is timed."""
    monkeypatch.setattr("metis.gateway.http_head.BODY_SECONDS", 0.5)
    app = create_app(gateway_config(Emulator()))
    chat = json.dumps({"model": "gpt", "messages": [{"role": "user", "content": "Hi"}]})
    with serving(app) as (url, _):
        host, port = url.removeprefix("http://").split(":")
        address = (host, int(port))
        assert exchange(address, request()).startswith(b"HTTP/1.1 200 OK\r\n")  # in time
        slow = []  # every slow body sent before any 408 is read: their waits run at once
        for path, body, kind in (
            ("/v1/messages", BODY, "timeout_error"),
            ("/v1/chat/completions", chat.encode(), "invalid_request_error/request_timeout"),
        ):
            head = (
                f"POST {path} HTTP/1.1\r\nhost: gw\r\nx-api-key: {GATEWAY_KEY}\r\n"
                f"authorization: Bearer {GATEWAY_KEY}\r\ncontent-type: application/json\r\n"
                f"content-length: {len(body)}\r\n\r\n"
            ).encode()
            for before in (b"", request(close=False)):
                sock = socket.create_connection(address, timeout=60)
                answer = b""
                if before:
                    sock.sendall(before)
                    answer = one_answer(sock)
                sock.sendall(head + body[:10])
                slow.append((sock, answer, before, kind))
        for sock, answer, before, kind in slow:
            with sock:
                answer += read_until_closed(sock)
                assert answer.count(b"HTTP/1.1 ") == (2 if before else 1), answer[-500:]
                late = answer[answer.rfind(b"HTTP/1.1 ") :]
                reply_head, _, reply = late.partition(b"\r\n\r\n")
                assert reply_head.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), late
                assert b"connection: close" in reply_head
                error = json.loads(reply)["error"]
                assert "/".join(filter(None, (error["type"], error.get("code")))) == kind
                assert "body did not arrive" in error["message"], error


def test_a_body_waiting_on_the_server_is_not_refused_for_its_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A request pipelined behind one still answered is not read (uvicorn pauses reading):
    its body's time running out then is the server's wait, not the client's, so it is waited
    for longer, and answered once read. Ordered by events, nothing timed: the rest of its
    body is sent only once its time has run out, and the first answered only then."""
    monkeypatch.setattr("metis.gateway.http_head.BODY_SECONDS", 0.5)
    ran_out = threading.Event()
    late = BoundedHeadProtocol._body_late

    def noted(protocol: BoundedHeadProtocol) -> None:
        ran_out.set()
        late(protocol)

    monkeypatch.setattr(BoundedHeadProtocol, "_body_late", noted)
    gateway = create_app(gateway_config(Emulator()))

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope.get("path") != "/slow":
            return await gateway(scope, receive, send)
        await asyncio.to_thread(ran_out.wait, 60)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"slow"})

    with serving(app) as (url, _):  # type: ignore[arg-type]
        host, port = url.removeprefix("http://").split(":")
        second = request()
        with socket.create_connection((host, int(port)), timeout=60) as sock:
            sock.sendall(b"GET /slow HTTP/1.1\r\nhost: gw\r\n\r\n" + second[:-10])
            assert ran_out.wait(60)
            sock.sendall(second[-10:])
            answer = read_until_closed(sock)
    assert answer.count(b"HTTP/1.1 200 OK\r\n") == 2, answer[-500:]
    assert b" 408 " not in answer


H2C = (
    b"connection: Upgrade, HTTP2-Settings\r\nupgrade: h2c\r\n"
    b"http2-settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"
)


def test_an_upgrade_not_served_is_ignored_and_the_request_answered(
    address: tuple[str, int],
) -> None:
    """curl --http2 asks a POST to http:// to upgrade to h2c. Before: httptools' parser took
    what followed the head for the new protocol's, so the body was lost and a valid request
    answered 400 ("not valid JSON"). Now the upgrade is ignored, as a server may, and the
    request served, its body framed by Content-Length or chunked, and the requests after it
    on the connection too."""
    h2c_close = H2C.replace(b"Upgrade, HTTP2", b"close, Upgrade, HTTP2")
    chunked = request(close=False, extra=h2c_close).replace(
        f"content-length: {len(BODY)}\r\n".encode(), b"transfer-encoding: chunked\r\n"
    )
    chunked = chunked.replace(BODY, b"%x\r\n" % len(BODY) + BODY + b"\r\n0\r\n\r\n")
    cases = {
        "Content-Length": (request(close=False, extra=h2c_close), 1),
        "chunked": (chunked, 1),
        "and a request after it": (request(close=False, extra=H2C) + request(), 2),
    }
    for case, (data, served) in cases.items():
        answer = exchange(address, data)
        assert answer.count(b"HTTP/1.1 200 OK") == served, (case, answer[:300])
        assert answer.count(b'"type":"message"') == served, (case, answer[-300:])


def test_a_websocket_handshake_is_refused_403(address: tuple[str, int]) -> None:
    """The Responses API over WebSocket is not served: its handshake is refused with 403
    (docs/gateway.md), not a 400 for a request the parser could not read."""
    handshake = (
        b"GET /v1/responses HTTP/1.1\r\nhost: gw\r\nconnection: Upgrade\r\nupgrade: websocket\r\n"
        b"sec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    )
    assert exchange(address, handshake).startswith(b"HTTP/1.1 403 ")


@pytest.mark.parametrize(
    ("case", "path", "extra"),
    [
        ("two Content-Lengths", "/v1/messages", b"content-length: 5\r\n"),
        ("Content-Length and chunked", "/v1/chat/completions", b"transfer-encoding: chunked\r\n"),
        ("a control character in a header", "/v1/messages", b"x-odd: a\x01b\r\n"),
    ],
)
def test_a_request_that_is_not_http_is_a_400_in_the_shape_of_its_path(
    case: str, path: str, extra: bytes
) -> None:
    """Before: uvicorn's own answer, ``Invalid HTTP request received.`` as text/plain, which
    neither API's SDK reads as its error. Now the API's error shape, saying what the parser
    found, and the connection closed (nothing of it reaches the application)."""
    data = request(extra=extra).replace(b"/v1/messages", path.encode(), 1)
    transport, started = fed([data])
    head, _, body = transport.written.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 Bad Request\r\n") and transport.closing, case
    assert b"content-type: application/json" in head and b"connection: close" in head, case
    error = json.loads(body)["error"]
    assert error["type"] == "invalid_request_error", case
    assert error["message"].startswith("the request is not valid HTTP/1.1: "), case
    assert ("code" in error) == (path != "/v1/messages"), case  # OpenAI's shape for chat
    assert started == [], case


def test_a_body_longer_than_its_content_length_is_answered_then_the_rest_refused(
    address: tuple[str, int],
) -> None:
    """What follows a body's Content-Length is the next request's. Before: when it was not
    HTTP, the connection was closed at once, and the request before it, read whole and in
    hand, was never answered. Now it is answered, then the rest refused (400, then closed)."""
    answer = exchange(address, request(close=False) + b"GARBAGE AFTER THE BODY\r\n\r\n")
    first, _, rest = answer.partition(b"HTTP/1.1 400 Bad Request\r\n")
    assert first.startswith(b"HTTP/1.1 200 OK") and b'"type":"message"' in first, answer[:300]
    assert b"not valid HTTP/1.1" in rest, answer[-300:]


def test_a_request_refused_by_its_head_is_answered_before_its_body_is_asked_for(
    address: tuple[str, int],
) -> None:
    """A client that sends ``Expect: 100-continue`` with a wrong key, or a Content-Length past
    the limit, gets its refusal, not a ``100 Continue`` asking it to upload the body."""
    wrong_key = request(extra=b"expect: 100-continue\r\n").replace(GATEWAY_KEY.encode(), b"no")
    too_large = request(extra=b"expect: 100-continue\r\n").replace(
        f"content-length: {len(BODY)}".encode(), b"content-length: 1000000000"
    )
    for case, data, status in (
        ("a wrong key", wrong_key, b"401"),
        ("a body past the limit", too_large, b"413"),
    ):
        head = data[: data.index(b"\r\n\r\n") + 4]  # the body is never sent
        with socket.create_connection(address, timeout=60) as sock:  # a bound on a hang
            sock.sendall(head)
            answer = read_until_closed(sock)  # the request said connection: close
        assert answer.startswith(b"HTTP/1.1 " + status + b" "), (case, answer[:200])
        assert b"100 Continue" not in answer, case


def test_a_stream_asked_in_http_1_0_is_not_chunked(address: tuple[str, int]) -> None:
    """RFC 9112 (6.1): no Transfer-Encoding in an answer to an HTTP/1.0 request, which cannot
    read it. Before: uvicorn answered a stream (no Content-Length) chunked whatever the
    request's version. Now its events are written bare and its end is the connection's."""
    streamed = json.loads(BODY) | {"stream": True}
    body = json.dumps(streamed).encode()
    data = (
        request("1.0", close=False)
        .replace(BODY, body)
        .replace(f"content-length: {len(BODY)}".encode(), f"content-length: {len(body)}".encode())
    )
    answer = exchange(address, data)  # read until the server closes
    head, _, events = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n"), answer[:300]
    assert b"transfer-encoding" not in head.lower() and b"connection: close" in head, head
    assert events.startswith(b"event: message_start\n"), events[:100]
    assert events.endswith(b"\n\n") and b'{"type":"message_stop"}' in events[-100:], events[-100:]
    whole = exchange(address, request("1.0"))  # an answer of known length is as it was
    assert b"content-length: " in whole and b'"type":"message"' in whole, whole[:300]


def test_a_body_refused_for_its_time_is_counted_as_a_408_not_a_client_gone(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The protocol's 408 ends the request's body for the application as a disconnect would:
    it was counted ``cancelled`` (status 499), as if the client had gone away, where the
    client was answered 408 for sending its body too slowly. The socket's timeout bounds a
    hang; nothing is timed."""
    monkeypatch.setattr("metis.gateway.http_head.BODY_SECONDS", 0.5)
    app = create_app(gateway_config(Emulator()))
    head = (
        f"POST /v1/messages HTTP/1.1\r\nhost: gw\r\nx-api-key: {GATEWAY_KEY}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(BODY)}\r\n\r\n"
    ).encode()
    with caplog.at_level(logging.INFO, logger="metis.gateway"), serving(app) as (url, _):
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=60) as sock:
            sock.sendall(head + BODY[:10])
            assert read_until_closed(sock).startswith(b"HTTP/1.1 408 ")
        counted = httpx.get(f"{url}/metrics").text
    lines = [line for line in counted.splitlines() if line.startswith("metis_gateway_")]
    assert any('status="408"' in line for line in lines), lines
    assert not any('"cancelled"' in line or 'status="499"' in line for line in lines), lines
    assert any('error_class="invalid_request"' in line for line in lines), lines
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("POST ")]
    assert said and "status=408" in said[0] and "end=timeout" in said[0], said
