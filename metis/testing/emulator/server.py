"""The HTTP/1.1 server: stdlib ``ThreadingHTTPServer`` in a background thread, one thread per
connection, keep-alive, chunked streams with one chunk per event, ``TCP_NODELAY``.

It runs beside whatever event loop the test uses (asyncio or trio): nothing here touches the
caller's loop, and :meth:`Emulator.stop` closes every open connection, stalled ones included.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import socket
import sys
import threading
import traceback
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qsl

from metis.core.options import checked_init
from metis.testing.emulator._wire import (
    ApiError,
    Env,
    HttpRequest,
    JsonReply,
    Provider,
    StreamReply,
)
from metis.testing.emulator.anthropic import Anthropic
from metis.testing.emulator.bedrock import Bedrock
from metis.testing.emulator.cloud import CLOUD_ALIASES, CLOUD_MOUNTS, CLOUD_PROVIDERS
from metis.testing.emulator.compatible import LONG_TAIL_ALIASES, CompatibleChat
from metis.testing.emulator.faults import (
    STATUS_KINDS,
    Fault,
    FaultPlan,
    FaultRule,
    FaultSpecError,
    delay,
    parse_faults,
    primary,
)
from metis.testing.emulator.gemini import Gemini
from metis.testing.emulator.ollama import Ollama
from metis.testing.emulator.openai_chat import OpenAIChat
from metis.testing.emulator.openai_responses import OpenAIResponses
from metis.testing.emulator.responder import PromptCache, Responder

log = logging.getLogger("metis.testing.emulator")

FAULT_HEADER = "x-emulator-fault"
MAX_BODY = 64 << 20
PROVIDER_ALIASES = {
    "anthropic": "anthropic",
    "claude": "anthropic",
    "openai": "openai",
    "openai_chat": "openai",
    "chat": "openai",
    "openai_responses": "openai_responses",
    "responses": "openai_responses",
    "gemini": "gemini",
    "google": "gemini",
    "ollama": "ollama",
    **dict.fromkeys(["bedrock", "bedrock_anthropic"], "bedrock"),
    # OpenAI-compatible stacks: served by the OpenAI Chat endpoint (at their own paths)
    **dict.fromkeys(
        ["deepseek", "groq", "mistral", "openrouter", "together", "vllm", "llamacpp", "tgi"],
        "openai",
    ),
    **CLOUD_ALIASES,  # Vertex AI and Azure OpenAI: their own paths and authentication
    **LONG_TAIL_ALIASES,
}


@dataclass(slots=True)
class RecordedRequest:
    """One request the emulator served, for tests that check what a client sent."""

    number: int
    provider: str | None
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    status: int = 0
    faults: list[str] = field(default_factory=list)

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass(frozen=True, slots=True)
class Stats:
    """Counters since start (or :meth:`Emulator.reset`)."""

    requests: int
    by_provider: dict[str, int]
    by_status: dict[int, int]
    faults: dict[str, int]

    @property
    def faults_injected(self) -> int:
        return sum(self.faults.values())


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], emulator: Emulator) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.emulator = emulator
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that drops its (kept-alive) connection is ordinary, not a server error:
        no traceback for it. Anything else is reported as the standard library does."""
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)


@checked_init
class Emulator:
    """A loopback server speaking Anthropic, OpenAI Chat, OpenAI Responses, Gemini and Ollama.

    ``faults`` is a run's fault plan (see :mod:`metis.testing.emulator.faults`), ``seed`` seeds its
    draws. ``api_keys``: when given, only these keys are accepted (otherwise any non-empty key).
    ``context_tokens`` overrides a provider's context window (``{"anthropic": 1000}``) so
    context overflow can happen for real. ``cache_min_tokens`` is the smallest prefix the
    simulated prompt cache keeps. ``tool_preamble`` makes the model say a sentence before its
    tool calls. ``strict_signatures`` refuses thinking signatures / encrypted reasoning this
    emulator did not issue (as the providers do). ``record`` is how many requests
    :attr:`requests` keeps.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        faults: str | Sequence[FaultRule] | None = None,
        seed: int = 0,
        *,
        api_keys: Sequence[str] | None = None,
        context_tokens: dict[str, int] | None = None,
        cache_min_tokens: int = 1024,
        tool_preamble: bool = False,
        strict_signatures: bool = True,
        record: int = 1000,
        verbose: bool = False,
    ) -> None:
        self.host = host
        self.port = port
        self.seed = seed
        self.plan = FaultPlan.parse(faults, seed)
        self.api_keys = frozenset(api_keys) if api_keys is not None else None
        self.verbose = verbose
        self.providers: list[Provider] = [
            Anthropic(),
            OpenAIChat(),
            OpenAIResponses(),
            Gemini(),
            Ollama(),
            Bedrock(),
            *(provider() for provider in CLOUD_PROVIDERS),
            CompatibleChat(),
        ]
        self.env = Env(
            responder=Responder(
                tool_preamble=tool_preamble, cache=PromptCache(min_tokens=cache_min_tokens)
            ),
            responses={},
            context_tokens={
                PROVIDER_ALIASES.get(k, k): v for k, v in (context_tokens or {}).items()
            },
            strict_signatures=strict_signatures,
        )
        self._lock = threading.Lock()
        self._numbers = itertools.count(1)
        self._queue: deque[tuple[str | None, list[Fault]]] = deque()
        self._records: deque[RecordedRequest] = deque(maxlen=max(0, record))
        self._requests = 0
        self._by_provider: Counter[str] = Counter()
        self._by_status: Counter[int] = Counter()
        self._faults: Counter[str] = Counter()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self._handlers: set[threading.Thread] = set()
        self._stopping = threading.Event()

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> Self:
        if self._server is not None:
            return self
        self._stopping = threading.Event()
        server = _Server((self.host, self.port), self)
        self._server = server
        self.port = int(server.server_address[1])
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"metis-emulator:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        with self._lock:
            connections = list(self._connections)
            handlers = list(self._handlers)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        if thread is not None:
            thread.join()
        for handler in handlers:
            handler.join(timeout=2)
        self._server = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def base_url(self, provider: str) -> str:
        """The base URL to configure a client for ``provider`` with (the root: every path the
        real API has is served under it, e.g. ``/v1/messages``, ``/api/chat``)."""
        if provider not in PROVIDER_ALIASES:
            raise ValueError(f"unknown provider {provider!r}; known: {', '.join(PROVIDER_ALIASES)}")
        return self.url + CLOUD_MOUNTS.get(PROVIDER_ALIASES[provider], "")

    # --- faults, counters, records --------------------------------------------------------

    def push_fault(self, spec: str, times: int = 1, provider: str | None = None) -> None:
        """The next ``times`` requests (to ``provider``, or any) get ``spec`` (``"drop=3"``)."""
        faults = parse_faults(spec)
        name = PROVIDER_ALIASES[provider] if provider is not None else None
        with self._lock:
            self._queue.extend((name, faults) for _ in range(times))

    def clear_faults(self) -> None:
        with self._lock:
            self._queue.clear()

    @property
    def stats(self) -> Stats:
        with self._lock:
            return Stats(
                self._requests, dict(self._by_provider), dict(self._by_status), dict(self._faults)
            )

    @property
    def requests_served(self) -> int:
        return self.stats.requests

    @property
    def faults_injected(self) -> int:
        return self.stats.faults_injected

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._records)

    def reset(self) -> None:
        """Forget counters, records, queued faults, stored responses and the prompt cache."""
        with self._lock:
            self._requests = 0
            self._by_provider.clear()
            self._by_status.clear()
            self._faults.clear()
            self._records.clear()
            self._queue.clear()
        with self.env.lock:
            self.env.responses.clear()
        self.env.responder.cache.reset()

    # --- used by the handler --------------------------------------------------------------

    def _begin(self, request: HttpRequest, provider: str | None) -> RecordedRequest:
        with self._lock:
            request.number = next(self._numbers)
            self._requests += 1
            if provider:
                self._by_provider[provider] += 1
            record = RecordedRequest(
                request.number,
                provider,
                request.method,
                request.path,
                request.query,
                request.headers,
                request.body,
            )
            self._records.append(record)
        return record

    def _finish(self, record: RecordedRequest, status: int) -> None:
        with self._lock:
            record.status = status
            self._by_status[status] += 1

    def _count(self, record: RecordedRequest, fault: Fault) -> None:
        with self._lock:
            self._faults[fault.kind] += 1
            record.faults.append(str(fault))

    def _faults_for(self, request: HttpRequest, provider: str) -> list[Fault]:
        header = request.header(FAULT_HEADER)
        if header is not None:
            faults = parse_faults(header)
        else:
            queued: list[Fault] | None = None
            with self._lock:
                for index, (wanted, item) in enumerate(self._queue):
                    if wanted is None or wanted == provider:
                        queued = item
                        del self._queue[index]
                        break
            faults = queued if queued is not None else self.plan.pick(request.number)
        return [f for f in faults if f.kind != "none"]

    def _route(self, method: str, path: str) -> tuple[Provider | None, str | None, list[str]]:
        allowed: list[str] = []
        for provider in self.providers:
            endpoint = provider.route(method, path)
            if endpoint is not None:
                return provider, endpoint, []
            allowed += provider.allowed_methods(path)
        return None, None, allowed

    def _register(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.add(connection)
            self._handlers.add(threading.current_thread())

    def _unregister(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.discard(connection)
            self._handlers.discard(threading.current_thread())


class _Dropped(Exception):
    """The client went away (or a fault dropped the connection): stop writing."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "metis-emulator/0.1"
    sys_version = ""
    server: _Server

    def setup(self) -> None:
        super().setup()
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.emulator._register(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.server.emulator._unregister(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.emulator.verbose:
            log.info("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def do_PATCH(self) -> None:
        self._dispatch()

    # --- one request ----------------------------------------------------------------------

    def _dispatch(self) -> None:
        emulator = self.server.emulator
        path, _, query = self.path.partition("?")
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            body = self._read_body(headers)
        except ValueError as exc:
            self.close_connection = True
            self._send(
                JsonReply(400, {"error": {"type": "invalid_request_error", "message": str(exc)}}),
                None,
            )
            return
        request = HttpRequest(self.command, path, dict(parse_qsl(query)), headers, body)
        provider, endpoint, allowed = emulator._route(self.command, path)
        record = emulator._begin(request, provider.name if provider else None)
        if provider is None or endpoint is None:
            if allowed:
                reply = JsonReply(
                    405,
                    {
                        "error": {
                            "type": "invalid_request_error",
                            "message": f"Method {self.command} not allowed",
                        }
                    },
                    {"allow": ", ".join(sorted(set(allowed)))},
                )
            else:
                reply = JsonReply(
                    404,
                    {"error": {"type": "not_found_error", "message": f"No such endpoint: {path}"}},
                )
            self._send(reply, record)
            return
        self._serve(request, record, provider, endpoint)

    def _serve(
        self, request: HttpRequest, record: RecordedRequest, provider: Provider, endpoint: str
    ) -> None:
        emulator = self.server.emulator
        path = request.path
        try:
            faults = emulator._faults_for(request, provider.name)
        except FaultSpecError as exc:
            self._send(
                JsonReply(400, {"error": {"type": "emulator_error", "message": str(exc)}}), record
            )
            return
        refused = provider.authenticate(endpoint, request, emulator.api_keys)
        if refused is not None:
            self._send(refused, record)
            return
        main = primary(faults)
        if main is not None and main.kind in STATUS_KINDS:
            emulator._count(record, main)
            self._send(provider.fault(main.kind, request, main.seconds), record)
            return
        try:
            reply = provider.handle(endpoint, request, emulator.env)
        except ApiError as exc:
            self._send(exc.reply, record)
            return
        except Exception:  # a bug in the emulator: answer as the provider's 500 would
            log.error("emulator error on %s %s\n%s", self.command, path, traceback.format_exc())
            self._send(provider.fault("server_error", request, 0), record)
            return
        for fault in faults:
            if fault.kind == "slow":
                emulator._count(record, fault)
        if isinstance(reply, StreamReply):
            self._stream(reply, faults, record, provider, request)
        else:
            self._whole(reply, faults, record, provider, request)

    def _read_body(self, headers: dict[str, str]) -> bytes:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            parts: list[bytes] = []
            total = 0
            while True:
                line = self.rfile.readline(65537)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                total += size
                if total > MAX_BODY:
                    raise ValueError("request body too large")
                parts.append(self.rfile.read(size))
                self.rfile.readline(3)
        length = int(headers.get("content-length") or 0)
        if length > MAX_BODY:
            raise ValueError("request body too large")
        return self.rfile.read(length) if length else b""

    def _whole(
        self,
        reply: JsonReply,
        faults: list[Fault],
        record: RecordedRequest,
        provider: Provider,
        request: HttpRequest,
    ) -> None:
        emulator = self.server.emulator
        main = primary(faults)
        wait = delay(faults)
        if main is not None:
            emulator._count(record, main)
            if main.kind == "drop":
                emulator._finish(record, 0)
                self._abort()
                return
            if main.kind == "stall":
                wait += main.seconds
            elif main.kind == "malformed":
                encoded = reply.encode()
                reply = JsonReply(
                    reply.status, headers=reply.headers, raw=encoded[: max(1, len(encoded) // 2)]
                )
            elif main.kind == "stream_error":
                reply = provider.fault(main.error_class, request, 1.0)
        if wait and emulator._stopping.wait(wait):
            self._abort()
            return
        self._send(reply, record)

    def _send(self, reply: JsonReply, record: RecordedRequest | None) -> None:
        body = reply.encode()
        if record is not None:  # before the bytes go out: the client may look at once
            self.server.emulator._finish(record, reply.status)
        headers = {"content-type": "application/json", **reply.headers}
        headers["content-length"] = str(len(body))
        if self.close_connection:
            headers["connection"] = "close"
        try:
            self.wfile.write(
                self._head(reply.status, headers) + (b"" if self.command == "HEAD" else body)
            )
        except OSError:
            self.close_connection = True

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

    def _stream(
        self,
        reply: StreamReply,
        faults: list[Fault],
        record: RecordedRequest,
        provider: Provider,
        request: HttpRequest,
    ) -> None:
        emulator = self.server.emulator
        main = primary(faults)
        wait = delay(faults)
        if main is not None:
            emulator._count(record, main)
        emulator._finish(record, reply.status)
        try:
            head = self._head(reply.status, {**reply.headers, "transfer-encoding": "chunked"})
            self.wfile.write(head)
            frames = reply.frames
            at = min(main.events, len(frames)) if main is not None else -1
            if main is not None and main.kind == "malformed":
                at = min(at, len(frames) - 1)
            for index in range(len(frames) + 1):
                if index == at and main is not None:
                    if main.kind == "drop":
                        self._abort()
                        return
                    if main.kind == "stall" and emulator._stopping.wait(main.seconds):
                        self._abort()
                        return
                    if main.kind == "stream_error":
                        for frame in reply.error_frames(main.error_class):
                            self._chunk(frame.encode())
                        break
                    if main.kind == "malformed" and index < len(frames):
                        self._chunk(frames[index].truncated())
                        continue
                if index == len(frames):
                    break
                if wait and emulator._stopping.wait(wait):
                    self._abort()
                    return
                self._chunk(frames[index].encode())
            self.wfile.write(b"0\r\n\r\n")
        except (_Dropped, OSError):
            self.close_connection = True

    def _chunk(self, data: bytes) -> None:
        if not data:
            return
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        except OSError as exc:
            raise _Dropped from exc

    def _abort(self) -> None:
        """Close the connection now, mid-response (what a dropped connection looks like)."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
