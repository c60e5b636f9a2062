"""The Responses API's WebSocket mode on the emulator's socket server, as docs/emulator.md
describes it: wsproto does the handshake and every frame, and each ``response.create`` message
goes to the one request handler as the streamed POST of its body, each event one text message.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable

from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Ping, Request, TextMessage
from wsproto.utilities import RemoteProtocolError

from metis.testing.emulator.handler import Delivery, Handler
from metis.testing.emulator.wire import HttpRequest, JsonReply, SocketMemory

READ_SIZE = 1 << 16
BODY_HEADERS = frozenset({"content-type", "content-length", "transfer-encoding", "connection"})
ENDPOINT = "responses"
MAX_SECONDS = 3600.0
"""How long a connection serves turns (OpenAI's WebSocket mode: 60 minutes)."""
LIMIT_CODE = "websocket_connection_limit_reached"
LIMIT_MESSAGE = (
    "Responses websocket connection limit reached (60 minutes). Create a new websocket "
    "connection to continue."
)


def is_upgrade(method: str, headers: dict[str, str]) -> bool:
    return method == "GET" and headers.get("upgrade", "").lower() == "websocket"


def upgrade_refusal(handler: Handler, request: HttpRequest) -> JsonReply | bool | None:
    """False when the request's path is no Responses endpoint (no WebSocket mode there);
    else the refusal of its credentials, as the POST would get it, or None to upgrade."""
    probe = HttpRequest("POST", request.path, request.query, request.headers, b"")
    found, _ = handler.route(probe)
    if found is None or found[1].endpoint != ENDPOINT:
        return False
    return found[0].authenticate(probe, handler.keys)


class Connection:
    """One upgraded connection, served on the server's thread for it until it closes."""

    def __init__(
        self,
        sock: socket.socket,
        handler: Handler,
        request: HttpRequest,
        stopping: threading.Event,
        abort: Callable[[], None],
        max_seconds: float = MAX_SECONDS,
    ) -> None:
        self.sock, self.handler, self.request = sock, handler, request
        self.stopping, self.abort = stopping, abort
        self.ends_at = time.monotonic() + max_seconds
        self.protocol = WSConnection(ConnectionType.SERVER)
        self.memory = SocketMemory(next(handler.sockets))
        self.open = True

    def accept(self, raw_head: bytes) -> bool:
        """Complete the handshake from the request's head as it was read."""
        self.protocol.receive_data(raw_head)
        for event in self.protocol.events():
            if isinstance(event, Request):
                return self._send(self.protocol.send(AcceptConnection()))
        return False

    def serve(self) -> None:
        parts: list[str] = []
        while self.open and not self.stopping.is_set():
            try:
                data = self.sock.recv(READ_SIZE)
            except OSError:
                return
            self.protocol.receive_data(data or None)
            if not data:
                return
            try:
                events = list(self.protocol.events())
            except RemoteProtocolError:
                return self.abort()
            for event in events:
                if isinstance(event, TextMessage):
                    parts.append(event.data)
                    if event.message_finished:
                        self._message("".join(parts))
                        parts.clear()
                elif isinstance(event, Ping):
                    self._send(self.protocol.send(event.response()))
                elif isinstance(event, CloseConnection):
                    self._send(self.protocol.send(event.response()))
                    self.open = False
                if not self.open:
                    return

    def _message(self, text: str) -> None:
        try:
            message = json.loads(text)
        except ValueError:
            message = None
        if not isinstance(message, dict) or message.get("type") != "response.create":
            kind = message.get("type") if isinstance(message, dict) else None
            self._error(400, "invalid_request_error", f"Unsupported event type {kind!r}.")
            return
        if time.monotonic() >= self.ends_at:  # OpenAI's limit on a connection's age
            error = {"type": "invalid_request_error", "code": LIMIT_CODE, "message": LIMIT_MESSAGE}
            self._text(json.dumps({"type": "error", "status": 400, "error": error}))
            return
        body = {k: v for k, v in message.items() if k != "type"}
        body["stream"] = True
        request = self.request
        turn = HttpRequest(
            "POST",
            request.path,
            request.query,
            {**request.headers, "content-type": "application/json"},
            json.dumps(body).encode(),
            connection=self.memory,
        )
        self._deliver(self.handler.handle(turn, payloads=True))

    def _deliver(self, delivery: Delivery) -> None:
        handler = self.handler
        if delivery.body is not None:  # a refusal: the error message the POST's answer says
            for step in delivery.steps:
                if step is None or self.stopping.wait(step):  # type: ignore[arg-type]
                    handler.finish(delivery.record, 0 if step is None else delivery.status)
                    return self._drop()
            handler.finish(delivery.record, delivery.status)
            self._refusal(delivery.status, delivery.body, delivery.headers)
            return
        handler.finish(delivery.record, delivery.status)
        for step in delivery.steps:
            if step is None or (isinstance(step, float | int) and self.stopping.wait(step)):
                return self._drop()
            if isinstance(step, bytes) and not self._text(step.decode()):
                return

    def _refusal(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        """The error message of a refused turn: the POST's status, its error object, and its
        headers (``retry-after``, ``x-ratelimit-*``) in ``error.headers``, as OpenAI sends them."""
        try:
            found = json.loads(body)
        except ValueError:
            found = None
        error = found.get("error") if isinstance(found, dict) else None
        if not isinstance(error, dict):
            error = {"type": "server_error", "message": body.decode("utf-8", "replace")}
        kept = {k: v for k, v in headers.items() if k.lower() not in BODY_HEADERS}
        if kept:
            error = {**error, "headers": kept}
        self._text(json.dumps({"type": "error", "status": status, "error": error}))

    def _error(self, status: int, kind: str, message: str) -> None:
        error = {"type": kind, "code": None, "message": message, "param": None}
        self._text(json.dumps({"type": "error", "status": status, "error": error}))

    def _text(self, text: str) -> bool:
        return self._send(self.protocol.send(TextMessage(data=text)))

    def _send(self, data: bytes) -> bool:
        try:
            self.sock.sendall(data)
        except OSError:
            self.open = False
            return False
        return True

    def _drop(self) -> None:
        """Close the connection now, mid-reply (what a dropped connection looks like)."""
        self.open = False
        self.abort()


def raw_head(method: str, target: str, headers: list[tuple[str, str]]) -> bytes:
    """A request's head as it came on the wire (for wsproto's server handshake)."""
    lines = [f"{method} {target} HTTP/1.1", *(f"{name}: {value}" for name, value in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
