"""The gateway's access log: one line per request as it ends, at INFO through the
``metis.gateway`` logger, saying what an operator follows a request by (docs/gateway.md,
"Access log")."""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import httpx
import pytest

from metis.gateway.app import create_app
from metis.gateway.keys import digest
from metis.testing.emulator import Emulator
from tests.gateway_fixture import gateway_config, scope

pytestmark = pytest.mark.anyio

SECRET = "team-secret-key"
KEYS = {"keys": [{"name": "team", "sha256": digest(SECRET)}]}
SAID = {"model": "flash", "max_tokens": 50, "messages": [{"role": "user", "content": "Hi"}]}


def lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", None) == "metis.gateway.access"]


def fields(record: logging.LogRecord) -> dict[str, str]:
    """The line's ``name=value`` words (its method, path and the rest by name)."""
    words = record.getMessage().split(" ")
    found = dict(word.split("=", 1) for word in words[2:])
    return {"method": words[0], "path": words[1], **found}


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="metis.gateway")
    return caplog


async def post(app: Any, body: dict[str, Any], key: str = SECRET) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        return await client.post("/v1/messages", json=body, headers={"x-api-key": key})


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_served_request_has_one_line_with_what_an_operator_follows(
    stream: bool, logged: pytest.LogCaptureFixture
) -> None:
    app = create_app(gateway_config(Emulator(), KEYS))
    answer = await post(app, {**SAID, "stream": stream})
    assert answer.status_code == 200
    [record] = lines(logged)
    assert record.levelno == logging.INFO and record.name == "metis.gateway"
    assert SECRET not in record.getMessage()
    line = fields(record)
    assert line["method"] == "POST" and line["path"] == "/v1/messages"
    assert line["status"] == "200" and line["api"] == "anthropic" and line["model"] == "flash"
    assert line["served"] == "gemini:gemini-2.5-flash" and line["key"] == "team"
    assert int(line["in"]) > 0 and int(line["out"]) > 0 and float(line["usd"]) > 0
    assert line["request_id"] == answer.headers["request-id"]
    assert line["end"] == "completed" and float(line["ms"]) >= 0
    if stream:
        assert 0 <= float(line["first_byte_ms"]) <= float(line["ms"])
    else:
        assert "first_byte_ms" not in line  # a whole answer's first byte is its end


async def test_a_refused_request_says_so_and_names_no_key_it_was_not(
    logged: pytest.LogCaptureFixture,
) -> None:
    app = create_app(gateway_config(Emulator(), KEYS))
    answer = await post(app, SAID, key="not-a-key-of-this-gateway")
    assert answer.status_code == 401
    [record] = lines(logged)
    assert "not-a-key" not in record.getMessage()
    line = fields(record)
    assert line["status"] == "401" and line["end"] == "refused" and line["key"] == "-"
    assert line["api"] == "anthropic" and line["served"] == "-" and "in" not in line
    assert line["request_id"] == answer.headers["request-id"]


@pytest.mark.parametrize("fault", ["overloaded", "stream_error"])
async def test_an_upstream_failure_is_told_apart_from_the_gateways_refusal(
    fault: str, logged: pytest.LogCaptureFixture
) -> None:
    emulator = Emulator()
    emulator.push_fault(fault, provider="gemini")
    app = create_app(gateway_config(emulator, KEYS))
    answer = await post(app, {**SAID, "stream": fault == "stream_error"})
    [record] = lines(logged)
    line = fields(record)
    assert line["status"] == str(answer.status_code) and line["end"] == "upstream_error"


async def test_a_client_gone_mid_stream_is_said_with_what_it_was_sent(
    logged: pytest.LogCaptureFixture,
) -> None:
    emulator = Emulator()
    emulator.push_fault("stall=30", provider="gemini")  # one event, then nothing for 30 s
    app = create_app(gateway_config(emulator, KEYS))
    head = scope()
    head["headers"] = [(b"x-api-key", SECRET.encode()), (b"content-type", b"application/json")]
    body_sent = anyio.Event()
    asked: list[bool] = []

    async def receive() -> dict[str, Any]:
        if not asked:
            asked.append(True)
            data = json.dumps({**SAID, "stream": True}).encode()
            return {"type": "http.request", "body": data, "more_body": False}
        await body_sent.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            body_sent.set()

    with anyio.fail_after(20):  # the stall is 30 s: the client's going ends it at once
        await app(head, receive, send)
    [record] = lines(logged)
    line = fields(record)
    assert line["status"] == "200" and line["end"] == "client_gone" and line["key"] == "team"
    assert "first_byte_ms" in line


async def test_a_path_that_could_forge_a_line_is_quoted(logged: pytest.LogCaptureFixture) -> None:
    app = create_app(gateway_config(Emulator(), KEYS))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        await client.get("/v1/nothing%0Aend=completed here")
    [record] = lines(logged)
    assert "\n" not in record.getMessage()
    assert '"/v1/nothing\\nend=completed here"' in record.getMessage()
    assert record.getMessage().endswith("end=refused")


async def test_the_access_log_may_be_turned_off(logged: pytest.LogCaptureFixture) -> None:
    app = create_app(gateway_config(Emulator(), {**KEYS, "access_log": False}))
    assert (await post(app, SAID)).status_code == 200
    assert lines(logged) == []


async def test_a_model_not_served_is_named_as_asked(logged: pytest.LogCaptureFixture) -> None:
    app = create_app(gateway_config(Emulator(), KEYS))
    assert (await post(app, {**SAID, "model": "no such model"})).status_code == 404
    [record] = lines(logged)
    assert ' model="no such model" ' in record.getMessage()
    assert record.getMessage().endswith(" end=refused")


async def test_a_stream_past_the_gateways_deadline_ended_by_timeout(
    logged: pytest.LogCaptureFixture,
) -> None:
    emulator = Emulator()
    emulator.push_fault("stall=30", provider="gemini")
    app = create_app(gateway_config(emulator, {**KEYS, "request_timeout_seconds": 0.5}))
    with anyio.fail_after(20):
        answer = await post(app, {**SAID, "stream": True})
    assert "error" in answer.text
    [record] = lines(logged)
    assert fields(record)["end"] == "timeout" and fields(record)["status"] == "200"


async def test_a_key_name_with_a_space_is_one_quoted_field(
    logged: pytest.LogCaptureFixture,
) -> None:
    keys = {"keys": [{"name": "ops team", "sha256": digest(SECRET)}]}
    app = create_app(gateway_config(Emulator(), keys))
    assert (await post(app, SAID)).status_code == 200
    [record] = lines(logged)
    assert ' key="ops team" ' in record.getMessage()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_passed_through_request_has_its_line_too(
    stream: bool, logged: pytest.LogCaptureFixture
) -> None:
    app = create_app(gateway_config(Emulator(), KEYS))
    body = {"model": "gpt", "messages": [{"role": "user", "content": "Hi"}], "stream": stream}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        answer = await client.post(
            "/v1/chat/completions", json=body, headers={"authorization": f"Bearer {SECRET}"}
        )
    assert answer.status_code == 200 and answer.headers["x-metis-path"] == "pass-through"
    [record] = lines(logged)
    line = fields(record)
    assert line["api"] == "chat" and line["model"] == "gpt" and line["served"] == "openai:gpt-4o"
    assert int(line["in"]) > 0 and line["end"] == "completed" and line["key"] == "team"
    assert line["request_id"] == answer.headers["x-request-id"]
