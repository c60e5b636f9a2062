"""The HTTP/1.1 server: stdlib ``ThreadingHTTPServer`` in a background thread, one thread per
connection, keep-alive, chunked streams with one chunk per event, ``TCP_NODELAY``. It writes
what the one request handler (:mod:`.handler`) says, faults included.

It runs beside whatever event loop the test uses (asyncio or trio): nothing here touches the
caller's loop, and :meth:`Emulator.stop` closes every open connection, stalled ones included.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl

from metis.testing.emulator.formats import ALIASES as PROVIDER_ALIASES
from metis.testing.emulator.handler import FAULT_HEADER, Delivery, Handler, RecordedRequest, Stats
from metis.testing.emulator.websocket import (
    MAX_SECONDS,
    Connection,
    is_upgrade,
    raw_head,
    upgrade_refusal,
)
from metis.testing.emulator.wire import HttpRequest, JsonReply

log = logging.getLogger("metis.testing.emulator")
MAX_BODY = 64 << 20
__all__ = ["FAULT_HEADER", "PROVIDER_ALIASES", "RecordedRequest", "Server", "Stats"]


class Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(
        self,
        address: tuple[str, int],
        handler: Handler,
        verbose: bool = False,
        websocket: bool = True,
        websocket_max_seconds: float = MAX_SECONDS,
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.handler, self.verbose, self.websocket = handler, verbose, websocket
        self.websocket_max_seconds = websocket_max_seconds
        self.stopping = threading.Event()
        self.connections: set[socket.socket] = set()
        self.handlers: set[threading.Thread] = set()
        self.lock = threading.Lock()
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that drops its (kept-alive) connection is ordinary, not a server error:
        no traceback for it. Anything else is reported as the standard library does."""
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)

    def drop_connections(self) -> None:
        with self.lock:
            connections = list(self.connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def close_all(self) -> None:
        """Stops serving and closes every connection, stalled ones included."""
        self.stopping.set()
        self.shutdown()
        self.server_close()
        self.drop_connections()
        with self.lock:
            handlers = list(self.handlers)
        for handler in handlers:
            handler.join(timeout=2)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "metis-emulator/0.2"
    sys_version = ""
    server: Server

    def setup(self) -> None:
        super().setup()
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.lock:
            self.server.connections.add(self.connection)
            self.server.handlers.add(threading.current_thread())

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        with self.server.lock:
            self.server.connections.discard(self.connection)
            self.server.handlers.discard(threading.current_thread())

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            log.info("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._dispatch()

    do_POST = do_HEAD = do_PUT = do_DELETE = do_PATCH = do_GET

    def _dispatch(self) -> None:
        path, _, query = self.path.partition("?")
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            body = self._read_body(headers)
        except ValueError as exc:
            self.close_connection = True
            error = {"type": "invalid_request_error", "message": str(exc)}
            return self._write_json(JsonReply(400, {"error": error}))
        request = HttpRequest(self.command, path, dict(parse_qsl(query)), headers, body)
        if self.server.websocket and is_upgrade(self.command, headers) and self._upgrade(request):
            return
        self._deliver(self.server.handler.handle(request))

    def _upgrade(self, request: HttpRequest) -> bool:
        """Serve the Responses WebSocket mode on this connection (False: not an endpoint
        that has it; the request is answered as any other)."""
        handler = self.server.handler
        refused = upgrade_refusal(handler, request)
        if refused is False:
            return False
        self.close_connection = True
        if isinstance(refused, JsonReply):
            self._write_json(refused)
            return True
        self.log_request(101)
        server = self.server
        connection = Connection(
            self.connection,
            handler,
            request,
            server.stopping,
            self._abort,
            server.websocket_max_seconds,
        )
        if connection.accept(raw_head(self.command, self.path, list(self.headers.items()))):
            connection.serve()
        return True

    def _read_body(self, headers: dict[str, str]) -> bytes:
        if "chunked" not in headers.get("transfer-encoding", "").lower():
            length = int(headers.get("content-length") or 0)
            if length > MAX_BODY:
                raise ValueError("request body too large")
            return self.rfile.read(length) if length else b""
        parts: list[bytes] = []
        while size := int(self.rfile.readline(65537).split(b";")[0].strip() or b"0", 16):
            if sum(map(len, parts)) + size > MAX_BODY:
                raise ValueError("request body too large")
            parts.append(self.rfile.read(size))
            self.rfile.readline(3)
        while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
            pass
        return b"".join(parts)

    def _deliver(self, delivery: Delivery) -> None:
        handler, stopping = self.server.handler, self.server.stopping
        if delivery.body is not None:
            for step in delivery.steps:  # before a whole body: waits, or no answer at all
                if step is None or stopping.wait(step):  # type: ignore[arg-type]
                    handler.finish(delivery.record, 0 if step is None else delivery.status)
                    return self._abort()
            # before the bytes: the client may look at once
            handler.finish(delivery.record, delivery.status)
            headers = {**delivery.headers, "content-length": str(len(delivery.body))}
            if self.close_connection:
                headers["connection"] = "close"
            self._write(
                self._head(delivery.status, headers)
                + (b"" if self.command == "HEAD" else delivery.body)
            )
            return
        handler.finish(delivery.record, delivery.status)
        if not self._write(self._head(delivery.status, delivery.headers)):
            return
        for step in delivery.steps:
            if step is None or (isinstance(step, float | int) and stopping.wait(step)):
                return self._abort()
            if isinstance(step, bytes) and not self._write(b"%x\r\n%s\r\n" % (len(step), step)):
                return
        self._write(b"0\r\n\r\n")

    def _write_json(self, reply: JsonReply) -> None:
        body = reply.encode()
        head = {"content-type": "application/json", "content-length": str(len(body))}
        self._write(self._head(reply.status, {**head, **reply.headers}) + body)

    def _write(self, data: bytes) -> bool:
        try:
            self.wfile.write(data)
        except OSError:
            self.close_connection = True
            return False
        return True

    def _head(self, status: int, headers: dict[str, str]) -> bytes:
        """The status line and headers, as one block (one write with the body that follows)."""
        self.log_request(status)
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = "Overloaded" if status == 529 else ""
        lines = [
            f"HTTP/1.1 {status} {phrase}",
            f"server: {self.server_version}",
            f"date: {self.date_time_string()}",
        ]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if headers.get("connection", "").lower() == "close":
            self.close_connection = True
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _abort(self) -> None:
        """Closes the connection now, mid-response (what a dropped connection looks like)."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
