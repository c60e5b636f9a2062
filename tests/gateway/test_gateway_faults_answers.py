"""Upstream answers that are wrong in their content, passed through the gateway: an error
object answered with status 200 (a whole reply's, or where a stream was asked for), a
stream whose event never ends or whose lines end in CR, one cut in the middle of an event,
and a connection reset after the head. The caller gets its API's error, as its official SDK
raises it (with its status when nothing was relayed yet), or the stream as it was sent; the
gateway holds a bounded part of an event, however long, and reads it in time linear in its
size."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from metis.gateway import relay as relay_module
from metis.gateway.app import create_app
from metis.gateway.relay import AnthropicRelay, ChatRelay, Relay
from metis.gateway.relay_responses import ResponsesRelay
from metis.model.content import ProviderRaw
from metis.testing.emulator import Emulator
from tests.gateway.test_gateway_faults_upstream import ENDED_WELL, ROUTES, gateway_config_with
from tests.gateway_fixture import GATEWAY_KEY, serving

SAID = "Hi there"
AUTH = {"authorization": f"Bearer {GATEWAY_KEY}"}
PASSED = [route for route in ROUTES if route[3] != "flash"]  # the passed-through models
ERRORS: dict[str, tuple[dict[str, Any], type[Exception]]] = {
    # the upstream's API -> (the error object it answers 200 with, the caller's SDK's error)
    "/messages": (
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        anthropic.OverloadedError,
    ),
    "/chat/completions": (
        {"error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}},
        openai.RateLimitError,
    ),
    "/responses": (  # an error that says its own status, as OpenRouter's do
        {"error": {"message": "no such model", "code": 400}},
        openai.BadRequestError,
    ),
}


def answering_errors(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json=ERRORS[request.url.path.removeprefix("/v1")][0])


@pytest.fixture(scope="module")
def gateway() -> Iterator[str]:
    emulator = Emulator()
    app = create_app(gateway_config_with(emulator, httpx.MockTransport(answering_errors)))
    with serving(app) as (url, _):
        yield url


@pytest.mark.parametrize("streamed", [False, True])
def test_an_error_object_answered_200_is_the_callers_error(gateway: str, streamed: bool) -> None:
    """Not a 200 whose body the SDK reads as a reply (it was), nor a 500 saying the stream
    was not events (it was, with the error's class lost): the error the object is."""
    claude = anthropic.Anthropic(api_key=GATEWAY_KEY, base_url=gateway, max_retries=0)
    oai = openai.OpenAI(api_key=GATEWAY_KEY, base_url=f"{gateway}/v1", max_retries=0)
    messages = [{"role": "user", "content": SAID}]
    calls = {
        "/messages": lambda: claude.messages.create(
            model="sonnet", max_tokens=50, messages=messages, stream=streamed
        ),
        "/chat/completions": lambda: oai.chat.completions.create(
            model="gpt", messages=messages, stream=streamed
        ),
        "/responses": lambda: oai.responses.create(model="gpt5", input=SAID, stream=streamed),
    }
    for path, call in calls.items():
        expected = ERRORS[path][1]
        with pytest.raises(expected) as raised:
            call()
        message = json.dumps(ERRORS[path][0]["error"]["message"])[1:-1]
        assert message in str(raised.value), f"{path} stream={streamed}: {raised.value}"


LONG_EVENT = {
    "/messages": b'event: message_start\ndata: {"type":"message_start","message":{"id":"m",'
    b'"type":"message","role":"assistant","model":"x","content":[],"stop_reason":null,'
    b'"usage":{"input_tokens":1,"output_tokens":1}}}\n\nevent: content_block_delta\ndata: ',
    "/chat/completions": b'data: {"id":"c","object":"chat.completion.chunk","model":"x",'
    b'"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\ndata: ',
    "/responses": b'event: response.created\ndata: {"type":"response.created","sequence_number"'
    b':0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}'
    b"\n\nevent: response.output_text.delta\ndata: ",
}


class Endless(httpx.AsyncByteStream):
    """A stream's first event, then one event that never ends, 1 MiB a chunk; counts what
    is read."""

    def __init__(self, head: bytes, limit: int) -> None:
        self.head = head
        self.limit = limit
        self.pulled = 0

    async def __aiter__(self) -> Any:
        yield self.head
        while self.pulled < 4 * self.limit:  # a bound for the test, should it fail
            self.pulled += 1 << 20
            yield b"x" * (1 << 20)


@pytest.mark.anyio
async def test_an_event_that_never_ends_is_refused_at_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The relay held every byte of it (and copied what it held at each chunk: quadratic):
    now the stream ends with the API's error event once the event passes its limit (made
    small here: the real one is MAX_EVENT_LENGTH)."""
    limit = 3 << 20
    monkeypatch.setattr(relay_module, "MAX_EVENT_LENGTH", limit)
    bodies: list[Endless] = []

    def endless(request: httpx.Request) -> httpx.Response:
        bodies.append(Endless(LONG_EVENT[request.url.path.removeprefix("/v1")], limit))
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, stream=bodies[-1])

    app = create_app(gateway_config_with(Emulator(), httpx.MockTransport(endless)))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as gw:
        for api, path, body, model in PASSED:
            sent = {"model": model, **body, "stream": True}
            reply = await gw.post(path, json=sent, headers={"x-api-key": GATEWAY_KEY})
            case = f"{api}: {reply.status_code} {reply.text[-300:]}"
            assert reply.status_code == 200 and ENDED_WELL[api] not in reply.text, case
            last = reply.text.rstrip().rsplit("\n\n", 1)[-1]
            assert "event longer than" in last, case
            assert bodies[-1].pulled <= limit + (2 << 20), case


def relays() -> list[Relay]:
    made_by = ProviderRaw(provider="anthropic", model="anthropic:claude-sonnet-4-5")
    return [AnthropicRelay("m", made_by), ChatRelay("m", True), ResponsesRelay("m", None)]


STREAMS = [LONG_EVENT[path] + b'{"type":"x","delta":"y"}\n\n' for path in LONG_EVENT]


@given(
    stream=st.sampled_from(range(len(STREAMS))),
    end=st.sampled_from([b"\n", b"\r\n", b"\r"]),
    cuts=st.lists(st.integers(min_value=0, max_value=1000), max_size=12),
)
def test_a_relay_reads_every_line_end_cut_anywhere(
    stream: int, end: bytes, cuts: list[int]
) -> None:
    """LF, CRLF or CR, a CRLF cut between two reads: the same events, each once (a stream
    whose lines ended in CR alone was held whole, and relayed as one event at its end)."""
    body = STREAMS[stream].replace(b"\n", end)
    whole = relays()[stream]
    expected = whole.feed(STREAMS[stream]) + whole.end()
    relay = relays()[stream]
    points = sorted({0, len(body), *(cut % (len(body) + 1) for cut in cuts)})
    out = b"".join(relay.feed(body[a:b]) for a, b in itertools.pairwise(points))
    held = relay.end()
    assert out == expected and held == b"", (out, held)


FIRST_EVENT = {path: head.rsplit(b"\n\n", 1)[0] + b"\n\n" for path, head in LONG_EVENT.items()}
HALF_EVENT = {  # an event cut in the middle of its JSON, the connection then closed cleanly
    "/messages": b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"de',
    "/chat/completions": b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"ind',
    "/responses": b'event: response.output_text.delta\ndata: {"type":"response.output_te',
}


def test_a_stream_cut_in_the_middle_of_an_event_is_the_sdks_error_not_a_json_one() -> None:
    """The half event was relayed as if whole: each SDK failed parsing it (a bare
    JSONDecodeError) before the gateway's error event that says the stream was cut."""

    def cut(request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/v1")
        content = FIRST_EVENT[path] + HALF_EVENT[path]
        return httpx.Response(200, content=content, headers={"content-type": "text/event-stream"})

    app = create_app(gateway_config_with(Emulator(), httpx.MockTransport(cut)))
    with serving(app) as (url, _):
        claude = anthropic.Anthropic(api_key=GATEWAY_KEY, base_url=url, max_retries=0)
        oai = openai.OpenAI(api_key=GATEWAY_KEY, base_url=f"{url}/v1", max_retries=0)
        messages = [{"role": "user", "content": SAID}]
        with pytest.raises(anthropic.APIStatusError, match="before its last event"):
            list(
                claude.messages.create(
                    model="sonnet", max_tokens=50, messages=messages, stream=True
                )
            )
        with pytest.raises(openai.APIError, match="before its last event"):
            list(oai.chat.completions.create(model="gpt", messages=messages, stream=True))
        events = list(oai.responses.create(model="gpt5", input=SAID, stream=True))
        assert events[-1].type == "response.failed", events[-1]


def test_an_event_without_its_blank_line_at_the_end_is_relayed_when_whole() -> None:
    for relay, path in zip(relays(), LONG_EVENT, strict=True):
        whole = FIRST_EVENT[path].rstrip(b"\n")
        assert relay.feed(whole) == b"" and relay.end() != b"", path
    chat = ChatRelay("m", True)
    assert chat.feed(b"data: [DONE]") == b"" and chat.end() == b"data: [DONE]\n\n"


class ResetAfterTheHead(httpx.AsyncByteStream):
    async def __aiter__(self) -> Any:
        raise httpx.ReadError("[Errno 104] Connection reset by peer")
        yield b""  # an async generator that never yields


def test_a_reset_after_the_head_is_a_502_before_anything_was_relayed() -> None:
    """As on the translated path: the gateway's head waits for the first bytes, so an
    upstream that fails before any is the caller's error with its status (it was a 200 and
    an error event, which the anthropic SDK raises as a bare APIStatusError, and the openai
    one gives Responses callers as a response.failed event)."""

    def reset(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, stream=ResetAfterTheHead())

    app = create_app(gateway_config_with(Emulator(), httpx.MockTransport(reset)))
    with serving(app) as (url, _):
        claude = anthropic.Anthropic(api_key=GATEWAY_KEY, base_url=url, max_retries=0)
        oai = openai.OpenAI(api_key=GATEWAY_KEY, base_url=f"{url}/v1", max_retries=0)
        messages = [{"role": "user", "content": SAID}]
        with pytest.raises(anthropic.InternalServerError, match="reset by peer") as raised:
            claude.messages.create(model="sonnet", max_tokens=50, messages=messages, stream=True)
        assert raised.value.status_code == 502
        for call in (
            lambda: oai.chat.completions.create(model="gpt", messages=messages, stream=True),
            lambda: oai.responses.create(model="gpt5", input=SAID, stream=True),
        ):
            with pytest.raises(openai.InternalServerError, match="reset by peer") as failed:
                call()
            assert failed.value.status_code == 502
        metrics = httpx.get(f"{url}/metrics").text
    counted = [line for line in metrics.splitlines() if "metis_gateway_errors_total{" in line]
    assert sum(float(line.split()[-1]) for line in counted) == 3, counted  # each once


NO_FINISH = (  # a compatible server's stream that names no finish_reason, then [DONE]
    b'data: {"id":"c","object":"chat.completion.chunk","model":"x","choices":[{"index":0,'
    b'"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}\n\n'
    b'data: {"id":"c","object":"chat.completion.chunk","model":"x","choices":[{"index":0,'
    b'"delta":{},"finish_reason":null}]}\n\n'
)


@pytest.mark.anyio
@pytest.mark.parametrize("marked", [True, False])
async def test_a_chat_stream_without_a_finish_reason_is_whole_when_done_says_so(
    marked: bool,
) -> None:
    """Passed through as the translated path reads it (the Chat codec's ``end_marked``):
    ``[DONE]`` ends a reply that never named a finish_reason (the gateway added an error
    event after it, saying the stream was cut short, and counted an error); without
    ``[DONE]`` it was cut short."""
    body = NO_FINISH + (b"data: [DONE]\n\n" if marked else b"")

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    app = create_app(gateway_config_with(Emulator(), httpx.MockTransport(answer)))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as gw:
        sent = {"model": "gpt", "messages": [{"role": "user", "content": SAID}], "stream": True}
        reply = await gw.post("/v1/chat/completions", json=sent, headers=AUTH)
    assert reply.status_code == 200, reply.text
    last = reply.text.rstrip().rsplit("\n\n", 1)[-1]
    if marked:
        assert last == "data: [DONE]" and "error" not in reply.text, reply.text
    else:
        assert "before its last event" in last, reply.text
