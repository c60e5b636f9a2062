"""The one request handler, under both the socket server and the in-process transport: it finds
the request's format, checks its credentials, picks its faults, answers it (a model turn: read,
ask the model, render, frame) and says how the answer goes out (:class:`Delivery`). It keeps
the counters and the recorded requests.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import traceback
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from metis.testing.emulator.faults import (
    STATUS_KINDS,
    Fault,
    FaultPlan,
    FaultSpecError,
    delay,
    parse_faults,
    primary,
)
from metis.testing.emulator.formats.base import Call, Env, Format
from metis.testing.emulator.model import measured
from metis.testing.emulator.rules import Refused
from metis.testing.emulator.script import ScriptError
from metis.testing.emulator.shim import as_tags, unshimmed
from metis.testing.emulator.wire import (
    HttpRequest,
    Ids,
    JsonReply,
    StreamReply,
    parse_json_object,
)
from metis.testing.emulator.wire import Reply as HttpReply

log = logging.getLogger("metis.testing.emulator")
FAULT_HEADER = "x-emulator-fault"
ABORT = None
"""A step of a delivery: close the connection now (what a dropped connection looks like)."""
Step = bytes | float | None


@dataclass(slots=True)
class RecordedRequest:
    """One request the emulator served, for tests that check what a client sent.
    ``call_ids`` are the tool call ids its reply gave out."""

    number: int
    provider: str | None
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    status: int = 0
    faults: list[str] = field(default_factory=list)
    call_ids: list[str] = field(default_factory=list)
    websocket: int = 0
    """The number of the WebSocket connection it came on as a ``response.create`` message
    (from 1, in the order they were opened; 0: over HTTP)."""

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


@dataclass(slots=True)
class Delivery:
    """How an answer goes out. ``steps`` come first for a whole body (waits, or ABORT: no
    answer at all) and after the head for a stream (chunks, waits, ABORT)."""

    status: int
    headers: dict[str, str]
    body: bytes | None  # None: streamed, chunked
    steps: list[Step]
    record: RecordedRequest


class Handler:
    def __init__(
        self,
        formats: Sequence[Format],
        env: Env,
        plan: FaultPlan,
        keys: frozenset[str] | None,
        record: int,
    ) -> None:
        self.formats, self.env, self.plan, self.keys = formats, env, plan, keys
        env.answer = answer  # what a batch endpoint answers each of its requests with
        self.lock = threading.Lock()
        self._numbers = itertools.count(1)
        self._queue: deque[tuple[str | None, list[Fault]]] = deque()
        self._records: deque[RecordedRequest] = deque(maxlen=max(0, record))
        self._counts: Counter[str] = Counter()
        self._statuses: Counter[int] = Counter()
        self._faults: Counter[str] = Counter()
        self.sockets = itertools.count(1)
        """Numbers for WebSocket connections."""

    # --- state ----------------------------------------------------------------------------

    def push(self, provider: str | None, faults: list[Fault], times: int) -> None:
        with self.lock:
            self._queue.extend((provider, faults) for _ in range(times))

    def clear_faults(self) -> None:
        with self.lock:
            self._queue.clear()

    @property
    def stats(self) -> Stats:
        with self.lock:
            by_provider = {k: v for k, v in self._counts.items() if k}
            return Stats(self._counts[""], by_provider, dict(self._statuses), dict(self._faults))

    @property
    def records(self) -> list[RecordedRequest]:
        with self.lock:
            return list(self._records)

    def reset(self) -> None:
        with self.lock:
            for counter in (self._counts, self._statuses, self._faults):
                counter.clear()
            self._records.clear()
            self._queue.clear()
        with self.env.lock:
            self.env.responses.clear()
            self.env.cached_contents.clear()
        self.env.cache.reset()

    # --- one request ----------------------------------------------------------------------

    def handle(self, request: HttpRequest, payloads: bool = False) -> Delivery:
        """The answer to ``request``; ``payloads``: a stream's steps are each event's JSON
        alone (a WebSocket message each), not its SSE frame."""
        found, allowed = self.route(request)
        record = self._begin(request, found[0].name if found else None)
        if found is None:
            return self._plain(record, _no_route(request, allowed))
        fmt, call = found
        try:
            faults = self._faults_for(request, fmt.name)
        except FaultSpecError as exc:
            return self._plain(
                record, JsonReply(400, {"error": {"type": "emulator_error", "message": str(exc)}})
            )
        refused = fmt.authenticate(request, self.keys)
        main = primary(faults)
        if refused is None and main is not None and main.kind in STATUS_KINDS:
            self._count(record, main)
            refused = fmt.fault(main.kind, request, main.seconds)
        if refused is not None:
            return self._plain(record, refused)
        reply = self._answer(fmt, call)
        record.call_ids = call.issued
        if isinstance(reply, JsonReply) and reply.status != 200:
            return self._plain(record, reply)  # a refusal goes out as it is, faults or not
        for fault in faults:
            if fault.kind == "slow":
                self._count(record, fault)
        if isinstance(reply, StreamReply):
            return self._streamed(record, reply, faults, payloads)
        return self._whole(record, reply, faults, fmt, call)

    def route(self, request: HttpRequest) -> tuple[tuple[Format, Call] | None, list[str]]:
        allowed: list[str] = []
        for fmt in self.formats:
            found = fmt.route(request.method, request.path)
            if found is not None and fmt.claims(found[0], request):
                return (fmt, Call(found[0], request, found[1], self.env)), []
            allowed += fmt.allowed(request.path)
        return None, allowed

    def _answer(self, fmt: Format, call: Call) -> HttpReply:
        try:
            return answer(fmt, call)
        except Refused as refused:
            return fmt.refusal(refused, call.request)
        except ScriptError as error:
            return fmt.refusal(Refused(str(error)), call.request)
        except Exception:  # a bug in the emulator: answer as the provider's 500 would
            request = call.request
            log.error(
                "emulator error on %s %s\n%s", request.method, request.path, traceback.format_exc()
            )
            return fmt.fault("server_error", request, 0)

    def _begin(self, request: HttpRequest, provider: str | None) -> RecordedRequest:
        with self.lock:
            request.number = next(self._numbers)
            self._counts.update(["", provider or ""] if provider else [""])
            record = RecordedRequest(
                request.number,
                provider,
                request.method,
                request.path,
                request.query,
                request.headers,
                request.body,
                websocket=request.connection.number if request.connection is not None else 0,
            )
            self._records.append(record)
        return record

    def finish(self, record: RecordedRequest, status: int) -> None:
        with self.lock:
            record.status = status
            self._statuses[status] += 1

    def _count(self, record: RecordedRequest, fault: Fault) -> None:
        with self.lock:
            self._faults[fault.kind] += 1
            record.faults.append(str(fault))

    def _faults_for(self, request: HttpRequest, provider: str) -> list[Fault]:
        header = request.header(FAULT_HEADER)
        faults: list[Fault] | None = parse_faults(header) if header is not None else None
        with self.lock:
            for index, (wanted, queued) in enumerate(self._queue if faults is None else ()):
                if wanted is None or wanted == provider:
                    faults = queued
                    del self._queue[index]
                    break
        faults = self.plan.pick(request.number) if faults is None else faults
        return [f for f in faults if f.kind != "none"]

    # --- how it goes out ------------------------------------------------------------------

    def _plain(self, record: RecordedRequest, reply: JsonReply) -> Delivery:
        return Delivery(
            reply.status,
            {"content-type": "application/json", **reply.headers},
            reply.encode(),
            [],
            record,
        )

    def _whole(
        self,
        record: RecordedRequest,
        reply: JsonReply,
        faults: list[Fault],
        fmt: Format,
        call: Call,
    ) -> Delivery:
        main = primary(faults)
        steps: list[Step] = [delay(faults)] if delay(faults) else []
        if main is not None:
            self._count(record, main)
            if main.kind == "drop":
                steps = [ABORT]
            elif main.kind == "stall":
                steps.append(main.seconds)
            elif main.kind == "malformed":
                encoded = reply.encode()
                reply = JsonReply(
                    reply.status, headers=reply.headers, raw=encoded[: max(1, len(encoded) // 2)]
                )
            elif main.kind == "stream_error":
                reply = fmt.fault(main.error_class, call.request, 1.0)
        delivery = self._plain(record, reply)
        delivery.steps = steps
        return delivery

    def _streamed(
        self, record: RecordedRequest, reply: StreamReply, faults: list[Fault], payloads: bool
    ) -> Delivery:
        main, wait, frames = primary(faults), delay(faults), reply.frames
        at = -1
        if main is not None:
            self._count(record, main)
            at = min(main.events, len(frames) - (1 if main.kind == "malformed" else 0))
        steps: list[Step] = []
        for index, frame in enumerate([*frames, None]):
            if index == at and main is not None:
                if main.kind == "drop":
                    return self._stream(record, reply, [*steps, ABORT])
                if main.kind == "stall":
                    steps.append(main.seconds)
                elif main.kind == "stream_error":
                    steps += [f.encode(payloads) for f in reply.error_frames(main.error_class)]
                    break
                elif main.kind == "malformed" and frame is not None:
                    steps.append(frame.truncated(payloads))
                    continue
            if frame is None:
                break
            steps += [wait, frame.encode(payloads)] if wait else [frame.encode(payloads)]
        return self._stream(record, reply, steps)

    def _stream(self, record: RecordedRequest, reply: StreamReply, steps: list[Step]) -> Delivery:
        headers = {**reply.headers, "transfer-encoding": "chunked"}
        return Delivery(reply.status, headers, None, [s for s in steps if s != b""], record)


def answer(fmt: Format, call: Call) -> HttpReply:
    """A format's answer to one call: a model turn (read, ask the model, render, frame) or, for
    endpoints that are not one, what the format serves itself."""
    if call.request.method in ("POST", "PATCH") and fmt.takes_json(call.endpoint):
        try:
            call.body = parse_json_object(call.request.body)
        except ValueError as exc:
            raise Refused(str(exc)) from None
        fmt.parse(call)
    served = fmt.serve(call)
    if served is not None:
        return served
    prompt = fmt.read(call)
    env = call.env
    if not fmt.serves(env, prompt.model):
        raise fmt.unknown_model(prompt.model)
    shimmed = unshimmed(prompt)
    reply = env.model(shimmed or prompt)
    reply = measured(prompt, as_tags(reply) if shimmed else reply)
    limit = env.context_tokens.get(fmt.name, fmt.window)
    if limit is not None and reply.usage.input_tokens > limit:
        raise fmt.overflow(reply.usage.input_tokens, limit)
    fmt.cached(call, prompt, reply)
    ids = Ids(call.request.digest)
    rendered = fmt.render(call, prompt, reply, ids)
    headers = fmt.headers(call.request)
    if call.stream:
        frames = fmt.frames(call, rendered, reply, ids)
        return StreamReply(
            frames,
            {**headers, **fmt.stream_headers(call)},
            lambda kind: fmt.stream_error(kind, call),
        )
    if isinstance(rendered, JsonReply):
        return rendered
    return JsonReply(200, rendered, {"content-type": "application/json", **headers})


def _no_route(request: HttpRequest, allowed: list[str]) -> JsonReply:
    if allowed:
        message = f"Method {request.method} not allowed"
        body = {"error": {"type": "invalid_request_error", "message": message}}
        return JsonReply(405, body, {"allow": ", ".join(sorted(set(allowed)))})
    body = {"error": {"type": "not_found_error", "message": f"No such endpoint: {request.path}"}}
    return JsonReply(404, body)
