"""Upstream faults behind the gateway, on each API and both paths, streamed and not: the
emulator's refusals, a connection dropped before the answer or in the middle of a stream, a
provider's in-stream error, an upstream that stalls past the request's deadline, an HTML 5xx
and a refused connection. A fault before the answer begins is the API's error reply with its
class's status; after, the stream ends with the API's own error event and nothing that says it
ended well before it. The metrics count each in its class."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

from metis.errors import ErrorClass, NetworkError
from metis.gateway.app import create_app
from metis.gateway.config import GatewayConfig
from metis.gateway.models import Target
from metis.model.capabilities import AdapterCapabilities
from metis.model.events import StreamEvent, TextDelta
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config

pytestmark = pytest.mark.anyio
HEADERS = {"x-api-key": GATEWAY_KEY}
SAID = "Hi there how are you today"
ROUTES = [
    # (api, path, body without model, model): a passed-through and a translated model each
    (
        "anthropic",
        "/v1/messages",
        {"max_tokens": 50, "messages": [{"role": "user", "content": SAID}]},
        "sonnet",
    ),
    (
        "anthropic",
        "/v1/messages",
        {"max_tokens": 50, "messages": [{"role": "user", "content": SAID}]},
        "flash",
    ),
    ("chat", "/v1/chat/completions", {"messages": [{"role": "user", "content": SAID}]}, "gpt"),
    ("chat", "/v1/chat/completions", {"messages": [{"role": "user", "content": SAID}]}, "flash"),
    ("responses", "/v1/responses", {"input": SAID}, "gpt5"),
    ("responses", "/v1/responses", {"input": SAID}, "flash"),
]
REFUSALS = {
    # fault -> (status Anthropic, its type, status OpenAI, its type/code)
    "rate_limit=7": (429, "rate_limit_error", 429, "requests/rate_limit_exceeded"),
    "overloaded": (529, "overloaded_error", 503, "server_error/None"),
    "server_error": (500, "api_error", 500, "server_error/None"),
    "context_overflow": (
        400,
        "invalid_request_error",
        400,
        "invalid_request_error/context_length_exceeded",
    ),
    "drop=0": (502, "api_error", 502, "server_error/None"),
    "stall=30;after=0": (504, "timeout_error", 504, "server_error/timeout"),
}
CUTS = ["drop=2", "stream_error", "stall=30;after=2"]
"""Faults after a stream's first events."""
ENDED_WELL = {
    "anthropic": "event: message_stop",
    "chat": "data: [DONE]",
    "responses": "event: response.completed",
}


@pytest.fixture
def emulator() -> Emulator:
    return Emulator()


def error_of(api: str, body: Any) -> str:
    if api == "anthropic":
        assert body["type"] == "error" and set(body["error"]) == {"type", "message"}, body
        return str(body["error"]["type"])
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    return f"{body['error']['type']}/{body['error']['code']}"


def client(app: Any) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://gw", timeout=60)


def errors_counted(app: Any) -> float:
    """The gateway's count of failed requests, every API and class."""
    lines = app.state.gateway.metrics.render().splitlines()
    return sum(float(line.split()[-1]) for line in lines if line.startswith("metis_gateway_err"))


def last_event(api: str, text: str) -> tuple[str, Any]:
    """A stream's last event: its name (Anthropic, Responses; Chat: "") and its data."""
    events = [part for part in text.split("\n\n") if part.strip()]
    name, data = "", None
    for line in events[-1].splitlines():
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data = json.loads(line[5:])
    return name, data


async def test_a_refusal_before_the_answer_is_the_callers_error(emulator: Emulator) -> None:
    # Only the stall waits for the deadline, its cases all at once; the other faults get one
    # no loaded machine reaches first (a drop seen after 0.2 s was a 504, not its 502).
    stalled = create_app(gateway_config(emulator, {"request_timeout_seconds": 0.2}))
    app = create_app(gateway_config(emulator, {"request_timeout_seconds": 30}))
    cases = [(*route, streamed) for route in ROUTES for streamed in (False, True)]
    async with client(app) as gw, client(stalled) as gw_stalled:

        async def refused(via: httpx.AsyncClient, fault: str, said: Any, *case: Any) -> None:
            a_status, a_type, o_status, o_type = said
            api, path, body, model, streamed = case
            sent = {"model": model, **body, "stream": streamed}
            reply = await via.post(path, json=sent, headers=HEADERS)
            what = f"{fault} {api}/{model} stream={streamed}: {reply.text[:300]}"
            status, kind = (a_status, a_type) if api == "anthropic" else (o_status, o_type)
            assert reply.status_code == status, what
            assert error_of(api, reply.json()) == kind, what
            if fault.startswith("rate_limit"):
                assert reply.headers["retry-after"] == "7", what

        for fault, said in REFUSALS.items():
            emulator.clear_faults()
            if fault.startswith("stall"):
                emulator.push_fault(fault, times=len(cases))
                async with anyio.create_task_group() as group:
                    for case in cases:
                        group.start_soon(refused, gw_stalled, fault, said, *case)
                continue
            for case in cases:
                emulator.clear_faults()
                emulator.push_fault(fault)
                await refused(gw, fault, said, *case)
        metrics = (await gw.get("/metrics")).text + (await gw_stalled.get("/metrics")).text
    classes = {item.value for item in ErrorClass}
    for line in metrics.splitlines():
        if line.startswith("metis_gateway_errors_total{"):
            assert line.split('error_class="')[1].split('"')[0] in classes, line


async def test_a_stream_cut_short_ends_with_the_apis_error_event(emulator: Emulator) -> None:
    stalled = create_app(gateway_config(emulator, {"request_timeout_seconds": 0.2}))
    app = create_app(gateway_config(emulator, {"request_timeout_seconds": 30}))
    async with client(app) as gw, client(stalled) as gw_stalled:
        for fault in CUTS:
            for api, path, body, model in ROUTES:
                emulator.clear_faults()
                emulator.push_fault(fault)
                sent = {"model": model, **body, "stream": True}
                serving = stalled if fault.startswith("stall") else app
                before = errors_counted(serving)
                via = gw_stalled if fault.startswith("stall") else gw
                reply = await via.post(path, json=sent, headers=HEADERS)
                case = f"{fault} {api}/{model}: {reply.text[-600:]}"
                assert reply.status_code == 200, case
                assert errors_counted(serving) == before + 1, case  # counted once, in its class
                assert ENDED_WELL[api] not in reply.text, case
                name, data = last_event(api, reply.text)
                if api == "anthropic":
                    assert name == "error" and error_of(api, data), case
                elif api == "chat":
                    assert error_of(api, data), case
                else:
                    assert name == "response.failed" and data["response"]["error"]["code"], case
                if fault.startswith("stall"):
                    assert "timeout" in reply.text.rsplit("\n\n", 2)[-2], case
        metrics = (await gw.get("/metrics")).text + (await gw_stalled.get("/metrics")).text
    classes = {item.value for item in ErrorClass}
    for line in metrics.splitlines():
        if line.startswith("metis_gateway_errors_total{"):
            assert line.split('error_class="')[1].split('"')[0] in classes, line


async def test_a_translated_stream_names_its_request_by_one_id(emulator: Emulator) -> None:
    """The id in a translated stream's header is the one its error event gives."""
    app = create_app(gateway_config(emulator, {"request_timeout_seconds": 30}))
    async with client(app) as gw:
        emulator.clear_faults()
        emulator.push_fault("stream_error")
        sent = {"model": "flash", **ROUTES[1][2], "stream": True}
        reply = await gw.post("/v1/messages", json=sent, headers=HEADERS)
    assert reply.headers["x-metis-path"] == "translated"
    name, data = last_event("anthropic", reply.text)
    assert name == "error" and data["request_id"].startswith("req_"), reply.text[-600:]
    assert reply.headers["request-id"] == data["request_id"]


def gateway_config_with(emulator: Emulator, transport: httpx.AsyncBaseTransport) -> GatewayConfig:
    """The fixture's configuration with every upstream answered by ``transport``."""
    original = emulator.client
    emulator.client = lambda: httpx.AsyncClient(transport=transport)  # type: ignore[method-assign]
    try:
        return gateway_config(emulator)
    finally:
        emulator.client = original  # type: ignore[method-assign]


async def test_an_html_5xx_and_a_refused_connection(emulator: Emulator) -> None:
    def html(request: httpx.Request) -> httpx.Response:
        page = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
        return httpx.Response(502, content=page, headers={"content-type": "text/html"})

    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    for case, handler, a_status, o_status in (
        ("an HTML 502", html, (500, 502), (500, 502)),
        ("connection refused", refused, (502,), (502,)),
    ):
        app = create_app(gateway_config_with(emulator, httpx.MockTransport(handler)))
        async with client(app) as gw:
            for api, path, body, model in ROUTES:
                for streamed in (False, True):
                    sent = {"model": model, **body, "stream": streamed}
                    reply = await gw.post(path, json=sent, headers=HEADERS)
                    said = f"{case} {api}/{model} stream={streamed}: {reply.text[:300]}"
                    statuses = a_status if api == "anthropic" else o_status
                    assert reply.status_code in statuses, said
                    assert error_of(api, reply.json()), said
                    assert "sk-upstream" not in reply.text, said


FIRST_EVENTS = {
    "/messages": b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
    b'"type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],'
    b'"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}\n\n',
    "/chat/completions": b'data: {"id":"c","object":"chat.completion.chunk","created":0,'
    b'"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},'
    b'"finish_reason":null}]}\n\n',
    "/responses": b'event: response.created\ndata: {"type":"response.created",'
    b'"sequence_number":0,"response":{"id":"resp_1","object":"response",'
    b'"status":"in_progress","model":"gpt-5","output":[]}}\n\n',
}
SSE = {"content-type": "text/event-stream"}
WRONG_STREAMS: dict[str, Any] = {
    # case -> (the upstream's answer to a stream, the gateway's status)
    "HTML": (
        lambda path: httpx.Response(200, content=b"<html/>", headers={"content-type": "text/html"}),
        500,
    ),
    "JSON": (lambda path: httpx.Response(200, json={"id": "x"}), 500),
    "no events at all": (lambda path: httpx.Response(200, headers=SSE, content=b""), 500),
    "an event that is not JSON": (
        lambda path: httpx.Response(200, headers=SSE, content=b"data: {not json}\n\n"),
        200,
    ),
    "its first event, then a clean end": (
        lambda path: httpx.Response(200, headers=SSE, content=FIRST_EVENTS[path]),
        200,
    ),
}


async def test_a_passed_through_stream_answered_wrong_ends_in_error(emulator: Emulator) -> None:
    """An upstream that answers a stream with no events, or ends it before its last event
    (the connection closed cleanly), leaves the caller an error, not a stream that looks
    whole or a body its SDK cannot read: before anything was relayed, an error reply with
    its status (as a translated stream's is); after, the API's error event."""
    for case, (answer, status) in WRONG_STREAMS.items():

        def handler(request: httpx.Request) -> httpx.Response:
            path = request.url.path.removeprefix("/v1")
            return answer(path)  # type: ignore[no-any-return]  # noqa: B023

        app = create_app(gateway_config_with(emulator, httpx.MockTransport(handler)))
        async with client(app) as gw:
            for api, path, body, model in ROUTES:
                if model == "flash":  # the translated path: the library reads the stream
                    continue
                sent = {"model": model, **body, "stream": True}
                reply = await gw.post(path, json=sent, headers=HEADERS)
                said = f"{case} {api}/{model}: {reply.status_code} {reply.text[-400:]}"
                assert reply.status_code == status, said
                if status != 200:  # refused before anything was relayed
                    said_why = "before its last event" if "no events" in case else "not events"
                    assert said_why in error_of(api, reply.json()) + reply.text, said
                    continue
                assert ENDED_WELL[api] not in reply.text, said
                name, data = last_event(api, reply.text)
                if api == "anthropic":
                    assert name == "error" and error_of(api, data), said
                elif api == "chat":
                    assert error_of(api, data), said
                else:
                    assert name == "response.failed", said
                    assert data["response"]["id"].startswith("resp_"), said
            metrics = (await gw.get("/metrics")).text
        assert 'error_class="other"' in metrics, case


async def test_retry_after_is_whole_seconds(emulator: Emulator) -> None:
    """A provider's Retry-After as an HTTP date, or a fraction, goes to the caller as whole
    seconds, the form RFC 9110 gives a delay (not ``2.3e+09``)."""
    for given, expected in (("Wed, 21 Oct 2099 07:28:00 GMT", None), ("0.5", "1")):

        def limited(request: httpx.Request) -> httpx.Response:
            assert GATEWAY_KEY not in str(request.headers.raw)  # the caller's key stays here
            body = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}
            return httpx.Response(429, json=body, headers={"retry-after": given})  # noqa: B023

        app = create_app(gateway_config_with(emulator, httpx.MockTransport(limited)))
        async with client(app) as gw:
            for api, path, body, model in ROUTES:
                reply = await gw.post(path, json={"model": model, **body}, headers=HEADERS)
                said = f"{given} {api}/{model}: {reply.headers}"
                assert reply.status_code == 429, said
                after = reply.headers.get("retry-after")
                assert after is not None and after.isdigit(), said
                assert expected is None or after == expected, said


class Buggy:
    """A model whose stream says one word, then fails in a way no error class names."""

    async def _events(self) -> AsyncIterator[StreamEvent]:
        yield TextDelta(0, "one ")
        raise KeyError("a bug below the gateway")

    def stream(self, request: Any) -> AsyncIterator[StreamEvent]:
        return self._events()


async def test_a_stream_that_fails_unclassified_ends_with_the_apis_error_event(
    emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    """Not a connection cut in the middle of the stream: the API's error event, the failure
    logged and counted as the gateway's own (``other``)."""
    app = create_app(gateway_config(emulator))
    caps = AdapterCapabilities(max_output_tokens=100)
    app.state.gateway.models.resolve = lambda name: Target(name, Buggy(), "x:y", caps, "y")
    async with client(app) as gw:
        for api, path, body, model in ROUTES:
            if model != "flash":
                continue
            reply = await gw.post(
                path, json={"model": "m", **body, "stream": True}, headers=HEADERS
            )
            case = f"{api}: {reply.status_code} {reply.text[-400:]}"
            assert reply.status_code == 200 and "internal gateway error" in reply.text, case
            name, data = last_event(api, reply.text)
            if api == "anthropic":
                assert name == "error" and error_of(api, data) == "api_error", case
            elif api == "chat":
                assert error_of(api, data) == "server_error/None", case
            else:
                assert name == "response.failed", case
        metrics = (await gw.get("/metrics")).text
    assert (
        'metis_gateway_errors_total{api="chat",'
        'endpoint="POST /v1/chat/completions",error_class="other"} 1'
    ) in metrics
    assert "gateway stream failed" in caplog.text


class FailingLate:
    """A model whose stream fails after one word, and whose failure takes past the request's
    deadline to come out (its cleanup waits): the deadline cuts the stream as it ends."""

    async def _events(self) -> AsyncIterator[StreamEvent]:
        try:
            yield TextDelta(0, "one ")
            raise NetworkError("the connection dropped", provider="x")
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.3)  # past the 0.05 s deadline

    def stream(self, request: Any) -> AsyncIterator[StreamEvent]:
        return self._events()


async def test_a_stream_cut_as_it_fails_is_counted_once(emulator: Emulator) -> None:
    app = create_app(gateway_config(emulator, {"request_timeout_seconds": 0.05}))
    caps = AdapterCapabilities(max_output_tokens=100)
    app.state.gateway.models.resolve = lambda name: Target(name, FailingLate(), "x:y", caps, "y")
    async with client(app) as gw:
        for api, path, body, model in ROUTES:
            if model != "flash":
                continue
            before = errors_counted(app)
            sent = {"model": "m", **body, "stream": True}
            reply = await gw.post(path, json=sent, headers=HEADERS)
            case = f"{api}: {reply.status_code} {reply.text[-400:]}"
            assert reply.status_code == 200 and ENDED_WELL[api] not in reply.text, case
            assert errors_counted(app) == before + 1, case
            name, data = last_event(api, reply.text)
            assert name in ("error", "response.failed") or "error" in data, case


class Padded(httpx.AsyncByteStream):
    """A JSON object followed by ``mib`` MiB of blanks, 1 MiB a chunk, counting what is read."""

    def __init__(self, mib: int) -> None:
        self.mib = mib
        self.pulled = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b'{"id": "x"}'
        for _ in range(self.mib):
            self.pulled += 1
            yield b" " * (1 << 20)


async def test_a_passed_through_answer_too_large_to_read_whole_is_an_error_read_no_further(
    emulator: Emulator,
) -> None:
    from metis.wire.framing.objects import MAX_WHOLE_BODY

    bodies: list[Padded] = []

    def huge(request: httpx.Request) -> httpx.Response:
        bodies.append(Padded((MAX_WHOLE_BODY >> 20) + 16))
        headers = {"content-type": "application/json"}
        return httpx.Response(200, headers=headers, stream=bodies[-1])

    app = create_app(gateway_config_with(emulator, httpx.MockTransport(huge)))
    async with client(app) as gw:
        for api, path, body, model in ROUTES[::2]:  # the passed-through models
            reply = await gw.post(path, json={"model": model, **body}, headers=HEADERS)
            said = f"{api}/{model}: {reply.status_code} {reply.text[:300]}"
            assert reply.status_code >= 500 and error_of(api, reply.json()), said
            assert bodies[-1].pulled <= (MAX_WHOLE_BODY >> 20) + 1, said
