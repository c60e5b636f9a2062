"""An application's own stage (docs/stages.md) that raises, in a stack the gateway serves:
an ``Exception``, a ``BaseException`` of its own, a ``CancelledError`` no one cancelled the
request for, each before the call, before the stream's first event, midway and as it ends,
through Messages, Chat and Responses, streamed and not. The caller gets its API's error
(``internal gateway error``, counted ``other``), before the first byte as an error reply in
its API's shape and after it as the API's error event with nothing of a good end before it;
the key's place is given back. ``KeyboardInterrupt`` and ``SystemExit`` are never swallowed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from metis.gateway.app import create_app
from metis.gateway.keys import digest
from metis.model import CanonicalRequest, MessageComplete, StreamEvent, TextDelta
from metis.pipeline import Call, EventHook, Inner, RequestStage, Stage, Watch
from metis.testing.emulator import Emulator
from tests.gateway_fixture import gateway_config

pytestmark = pytest.mark.anyio
SAID = "Hi there how are you today"
ROUTES = [
    (
        "anthropic",
        "/v1/messages",
        {"max_tokens": 50, "messages": [{"role": "user", "content": SAID}]},
    ),
    ("chat", "/v1/chat/completions", {"messages": [{"role": "user", "content": SAID}]}),
    ("responses", "/v1/responses", {"input": SAID}),
]
ENDED_WELL = {
    "anthropic": "event: message_stop",
    "chat": "data: [DONE]",
    "responses": "event: response.completed",
}
ONE_AT_ONCE = [{"name": "solo", "sha256": digest("solo-key"), "max_concurrent": 1}]
HEADERS = {"x-api-key": "solo-key"}


class OwnExit(BaseException):
    """An application's own way out, neither an Exception nor a cancellation."""


class Faulty:
    """What the stages raise, and where: ``before`` (a request transform), ``first`` (a
    wrapper, before its first event), ``midway`` (a hook, at the third text delta), ``end``
    (a hook, once message.complete has passed it)."""

    raised: Any = None
    where = ""

    @classmethod
    def fault(cls, where: str) -> None:
        if cls.where == where:
            raise cls.raised() if isinstance(cls.raised, type) else cls.raised


class Before(RequestStage[CanonicalRequest]):
    name = "fails_before"

    def rewrite(self, request: CanonicalRequest, call: Call) -> CanonicalRequest:
        Faulty.fault("before")
        return request


class First(Stage[CanonicalRequest, CanonicalRequest, StreamEvent, StreamEvent]):
    name = "fails_first"

    async def __call__(
        self, request: CanonicalRequest, call: Call, inner: Inner[CanonicalRequest, StreamEvent]
    ) -> AsyncIterator[StreamEvent]:
        Faulty.fault("first")
        async for event in inner(request, call):
            yield event


class Hook(EventHook[CanonicalRequest]):
    name = "fails_watching"

    async def open(self, request: CanonicalRequest, call: Call) -> tuple[CanonicalRequest, Watch]:
        return request, Watching()


class Watching(Watch):
    kinds = (TextDelta,)

    def __init__(self) -> None:
        self.deltas = 0

    def event(self, event: StreamEvent) -> Any:
        self.deltas += 1
        if self.deltas == 3:
            Faulty.fault("midway")
        return event

    async def completed(self, event: MessageComplete) -> None:
        Faulty.fault("end")


def app_with_stages() -> Any:
    app = create_app(gateway_config(Emulator(), {"keys": ONE_AT_ONCE}))
    pipeline = app.state.gateway.models.registry.adapter("flash").pipeline
    pipeline.insert_after("tool_ids", Before()).insert_after("tool_ids", First())
    pipeline.insert_after("tool_ids", Hook())
    return app


def errors_counted(app: Any) -> float:
    lines = app.state.gateway.metrics.render().splitlines()
    return sum(
        float(line.split()[-1])
        for line in lines
        if line.startswith("metis_gateway_errors_total") and 'error_class="other"' in line
    )


def error_message(api: str, data: Any) -> str:
    if api == "anthropic":
        assert data["type"] == "error" and data["error"]["type"] == "api_error", data
        return str(data["error"]["message"])
    error = data.get("response", data)["error"]
    return str(error["message"])


def last_data(text: str) -> Any:
    events = [part for part in text.split("\n\n") if part.strip()]
    lines = events[-1].splitlines()
    return json.loads(next(line[5:] for line in lines if line.startswith("data:")))


def cases(where: str) -> list[tuple[str, str, dict[str, Any], bool]]:
    """Each API, streamed and not; ``midway`` streamed only (a whole reply is asked whole
    upstream: its text comes in one delta)."""
    streams = (True,) if where == "midway" else (False, True)
    return [(api, path, body, stream) for api, path, body in ROUTES for stream in streams]


RAISED = [ValueError("a bug of the stage"), OwnExit, asyncio.CancelledError]


@pytest.mark.parametrize("model", ["flash", "fallback"])  # the model; a route through it
@pytest.mark.parametrize("raised", RAISED, ids=["exception", "base_exception", "cancelled"])
@pytest.mark.parametrize("where", ["before", "first", "midway", "end"])
async def test_a_stage_that_raises_is_the_callers_api_error(
    model: str, raised: Any, where: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: a BaseException or an unprompted CancelledError left the application (the
    server's own text 500, or the stream cut); a route's stream, read in a task of its own,
    ended at an unprompted CancelledError as if whole (no error event, no good end); and a
    stage failing as the stream ended came after its ``message_stop``, ``[DONE]`` or
    ``response.completed`` (the Responses reply kept), passing the failed stream off as
    whole."""
    Faulty.raised, Faulty.where = raised, where
    app = app_with_stages()
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=True)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw", timeout=30) as gw:
        for api, path, body, stream in cases(where):
            case = f"{api} stream={stream}"
            counted = errors_counted(app)
            sent = {"model": model, **body, "stream": stream}
            reply = await gw.post(path, json=sent, headers=HEADERS)
            case += f": {reply.status_code} {reply.text[-300:]}"
            assert errors_counted(app) == counted + 1, case
            if not stream or where in ("before", "first"):
                assert reply.status_code == 500, case
                assert error_message(api, reply.json()) == "internal gateway error", case
                continue
            assert reply.status_code == 200 and ENDED_WELL[api] not in reply.text, case
            assert error_message(api, last_data(reply.text)) == "internal gateway error", case
            assert where == "end" or SAID.split()[0] in reply.text, case  # what came
            if api == "responses":  # a failed stream is not kept
                made = json.loads(reply.text.split("data:", 1)[1].split("\n", 1)[0])
                kept = await gw.get(f"/v1/responses/{made['response']['id']}", headers=HEADERS)
                assert kept.status_code == 404, case
    assert "gateway request failed" in caplog.text or "gateway stream failed" in caplog.text


@pytest.mark.parametrize("model", ["flash", "fallback"])
@pytest.mark.parametrize("raised", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("where", ["before", "midway"])
async def test_a_stage_asking_the_process_to_exit_is_not_swallowed(
    model: str, raised: type[BaseException], where: str
) -> None:
    """Raised out of the application from the request's own task (a route's stream, read in
    a task of its own, let it out there: asyncio stops its loop on it, every other request
    cut and its clean-up left undone)."""
    Faulty.raised, Faulty.where = raised, where
    app = app_with_stages()
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=True)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw", timeout=30) as gw:
        for _api, path, body, stream in cases(where):
            sent = {"model": model, **body, "stream": stream}
            with pytest.raises(raised):
                await gw.post(path, json=sent, headers=HEADERS)


def test_a_stages_own_base_exception_is_the_sdks_api_error_over_a_server() -> None:
    """Served by uvicorn, as ``metis serve`` serves it: before, the server's own text 500
    ("Internal Server Error"), which no SDK reads as its API's error."""
    import anthropic
    import openai

    from tests.gateway_fixture import serving

    Faulty.raised, Faulty.where = OwnExit, "before"
    with serving(app_with_stages()) as (url, _):
        claude = anthropic.Anthropic(api_key="solo-key", base_url=url, max_retries=0)
        with pytest.raises(anthropic.InternalServerError) as refused:
            claude.messages.create(
                model="flash", max_tokens=50, messages=[{"role": "user", "content": SAID}]
            )
        said = refused.value.body
        assert isinstance(said, dict) and said["error"]["message"] == "internal gateway error"
        gpt = openai.OpenAI(api_key="solo-key", base_url=url + "/v1", max_retries=0)
        with pytest.raises(openai.InternalServerError) as failed:
            gpt.responses.create(model="flash", input=SAID, stream=True)
        assert failed.value.message.endswith("- internal gateway error"), failed.value.message
