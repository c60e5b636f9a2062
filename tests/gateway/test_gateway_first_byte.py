"""A translated stream's first byte: what nothing can refuse (the report of what the reader
left out, its log line, the stream's writer and headers) is made once the request is sent,
while the upstream thinks (metis/gateway/ahead.py), and is still there however the request
ends; the model is looked up once; ``stream`` is decided where the request is made."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest

from metis.gateway.ahead import Ahead, soon
from metis.gateway.models import ModelTable
from metis.testing.emulator import Emulator
from tests.gateway.test_gateway_faults_clients import over
from tests.gateway_fixture import scope

pytestmark = pytest.mark.anyio
ASKED = {
    "model": "gpt",  # Anthropic Messages in, a Chat upstream: translated
    "max_tokens": 50,
    "stream": True,
    "zzz_option": 5,  # no field of the Messages API: left out and named
    "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi", "zzz_hint": 1}]}],
}
LEFT_OUT = ["zzz_option", "messages[0].content[0].zzz_hint"]
CHAT_STREAM = (
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},'
    b'"finish_reason":null}]}\n\n'
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o",'
    b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


class Upstream:
    """A Chat provider that notes, as the request reaches it and once it has waited, whether
    the gateway has logged what it left out; it answers with ``status``."""

    def __init__(self, caplog: pytest.LogCaptureFixture, status: int = 200) -> None:
        self.caplog, self.status = caplog, status
        self.seen: list[bool] = []
        self.bodies: list[dict[str, Any]] = []

    def logged(self) -> bool:
        return any(getattr(r, "event", "") == "metis.gateway.dropped" for r in self.caplog.records)

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        self.seen.append(self.logged())
        await anyio.lowlevel.checkpoint()  # the upstream thinks: the gateway's task waits
        self.seen.append(self.logged())
        if self.status != 200:
            error = {"error": {"message": "slow down", "type": "rate_limit_exceeded"}}
            return httpx.Response(self.status, json=error)
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, content=CHAT_STREAM)


async def served(app: Any, asked: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    """``asked`` sent to ``app`` as a client that reads the whole answer."""
    sent: list[dict[str, Any]] = []
    given = False

    async def receive() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": json.dumps(asked).encode()}
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    with anyio.fail_after(30):  # a bound on a hang: it ends at once when right
        await app(scope(), receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], headers, body


async def test_what_was_left_out_is_looked_for_once_the_request_is_sent(
    caplog: pytest.LogCaptureFixture, anyio_backend: str
) -> None:
    upstream = Upstream(caplog)
    app = over(Emulator(), upstream)
    await served(
        app, {**ASKED, "zzz_option": None, "messages": [{"role": "user", "content": "Hi"}]}
    )
    caplog.clear()  # the first request of an app waits before it is sent (the adapter's start)
    with caplog.at_level(logging.WARNING, "metis.gateway"):
        status, headers, body = await served(app, ASKED)
    assert status == 200 and b"Hello" in body and body.startswith(b"event: message_start")
    assert headers["x-metis-dropped"].split("; ") == LEFT_OUT  # the reader's order, as before
    # under asyncio looked for while the upstream thinks; trio has no loop callback: at once
    assert upstream.seen[2:] == ([False, True] if anyio_backend == "asyncio" else [True, True])
    assert upstream.bodies[1]["stream"] is True
    logged = [r for r in caplog.records if getattr(r, "event", "") == "metis.gateway.dropped"]
    assert len(logged) == 1 and "messages[0].content[0].zzz_hint" in logged[0].getMessage()


async def test_a_refused_call_keeps_its_error_and_its_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    upstream = Upstream(caplog, status=429)
    with caplog.at_level(logging.WARNING, "metis.gateway"):
        status, headers, body = await served(over(Emulator(), upstream), ASKED)
    assert status == 429
    reply = json.loads(body)
    assert reply["type"] == "error" and reply["error"]["type"] == "rate_limit_error"
    assert headers["request-id"] == reply["request_id"]
    assert upstream.seen[-1] is True  # the report was logged though the call failed


async def test_a_client_gone_while_the_upstream_thinks_loses_no_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    asked = anyio.Event()
    closed: list[bool] = []

    async def silent(request: httpx.Request) -> httpx.Response:
        asked.set()
        try:
            await anyio.sleep_forever()
        finally:
            closed.append(True)
        raise AssertionError("unreachable")

    app = over(Emulator(), silent)
    sent: list[dict[str, Any]] = []
    given = False

    async def receive() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": json.dumps(ASKED).encode()}
        await asked.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    with caplog.at_level(logging.WARNING, "metis.gateway"), anyio.fail_after(30):
        await app(scope(), receive, send)
    assert closed == [True]
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] in ([], [499])
    assert any(getattr(r, "event", "") == "metis.gateway.dropped" for r in caplog.records)


async def test_the_model_is_looked_up_once_a_translated_request(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    names: list[str] = []
    resolve = ModelTable.resolve

    def counted(self: ModelTable, name: str) -> Any:
        names.append(name)
        return resolve(self, name)

    monkeypatch.setattr(ModelTable, "resolve", counted)
    status, _, _ = await served(over(Emulator(), Upstream(caplog)), ASKED)
    assert status == 200 and names == ["gpt"]


async def test_a_model_that_does_not_stream_still_answers_a_streamed_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``stream`` decided with the request as the adapter would: a model that cannot stream
    is called for a whole reply, which is written as the stream asked for."""
    whole = {
        "id": "c1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Whole"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
    bodies: list[dict[str, Any]] = []

    async def answer(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json=whole)

    app = over(Emulator(), answer)
    adapter = app.state.gateway.models.resolve("gpt").chat_model
    adapter.capabilities = adapter.capabilities.model_copy(update={"supports_streaming": False})
    status, _, body = await served(app, ASKED)
    assert status == 200 and b"Whole" in body and body.startswith(b"event: message_start")
    assert bodies[0].get("stream") in (None, False)


async def test_ahead_is_made_when_the_task_first_waits(anyio_backend: str) -> None:
    made: list[int] = []

    def make() -> int:
        made.append(1)
        return len(made)

    ahead = Ahead(make)
    assert made == []  # nothing made at once
    await anyio.lowlevel.checkpoint()
    assert made == ([1] if anyio_backend == "asyncio" else [])  # trio: made when asked for
    assert ahead.made() == 1 and made == [1]  # made once, either way


async def test_ahead_makes_what_has_not_come_and_raises_its_failure_there() -> None:
    calls: list[int] = []

    def failing() -> int:
        calls.append(1)
        raise ValueError("bad")

    ahead = Ahead(failing)
    await anyio.lowlevel.checkpoint()
    with pytest.raises(ValueError, match="bad"):
        ahead.made()
    assert len(calls) in (1, 2)  # tried in the wait (asyncio), then where it was asked for
    unmade = Ahead(lambda: 7)
    assert unmade.made() == 7  # asked for before any wait: made there


async def test_a_cancelled_ahead_is_never_made_and_soon_always_runs(anyio_backend: str) -> None:
    made: list[str] = []
    ahead = Ahead(lambda: made.append("ahead"))
    ahead.cancel()
    soon(lambda: made.append("soon"))
    await anyio.lowlevel.checkpoint()
    assert made == ["soon"]


@pytest.mark.parametrize("model", ["gpt", "sonnet"])  # translated; passed through
async def test_a_client_gone_mid_stream_is_seen_by_the_watch_the_opening_had(
    model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The task that watched for the disconnect while the stream opened goes on watching
    the stream (no second task): a client gone after the first bytes ends the upstream call."""
    first = CHAT_STREAM.split(b"\n\n")[0] + b"\n\n"
    if model == "sonnet":
        from tests.gateway.test_gateway_faults_clients import MESSAGE_START as first
    closed: list[bool] = []

    async def endless() -> Any:
        try:
            yield first
            await anyio.sleep_forever()
        finally:
            closed.append(True)

    async def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=endless())

    started: list[object] = []
    create_task = asyncio.BaseEventLoop.create_task

    def counted(loop: Any, coro: Any, **kwargs: Any) -> Any:
        started.append(getattr(coro, "__qualname__", ""))
        return create_task(loop, coro, **kwargs)

    monkeypatch.setattr(asyncio.BaseEventLoop, "create_task", counted)
    app = over(Emulator(), answer)
    body_sent = anyio.Event()
    sent: list[dict[str, Any]] = []
    given = False

    async def receive() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            asked = {**ASKED, "model": model, "zzz_option": None}
            return {"type": "http.request", "body": json.dumps(asked).encode()}
        await body_sent.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and message.get("body"):
            body_sent.set()

    with anyio.fail_after(30):  # a bound on a hang: it ends at once when right
        await app(scope(), receive, send)
    assert closed == [True]
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] == [200]
    watches = [name for name in started if "_disconnected" in str(name) or "_watch" in str(name)]
    assert len(watches) == 1, started
