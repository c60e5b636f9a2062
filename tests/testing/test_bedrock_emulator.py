"""The Bedrock emulator over real sockets: SigV4 signatures checked with botocore against the
emulator's known secrets (and refused as AWS refuses them), bearer keys, event streams whose
CRCs botocore accepts, Converse validation, and full tool and reasoning loops through the
bedrock stacks."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest

from metis import AdapterConfig, AuthError, build_adapter
from metis.adapter import Adapter
from metis.errors import AdapterError, ProtocolError
from metis.model import (
    CanonicalRequest,
    Message,
    MessageComplete,
    Role,
    ThinkingConfig,
    ToolDefinition,
    ToolResultBlock,
)
from metis.model.response import StopKind
from metis.pipeline.stores import InMemoryToolIdStore
from metis.testing.emulator import Emulator
from metis.testing.emulator.formats.bedrock import CREDENTIALS, EXPIRED_TOKEN
from tests.stages.test_bedrock_auth import aws_env, frozen_clock  # noqa: F401

from ..helpers import ImportOnUse

pytestmark = [
    pytest.mark.usefixtures("no_backoff"),  # retries are not waited for
    pytest.mark.backend_independent,  # wire formats checked against the emulator
]

eventstream = ImportOnUse("botocore.eventstream")  # imported by the test using it

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)

MODELS = {
    "bedrock": "bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "bedrock_anthropic": "bedrock_anthropic:us.anthropic.claude-sonnet-4-5-20250929-v1:0",
}
DEADLINE = 20.0


def adapter(stack: str, emulator: Emulator, **config: Any) -> Adapter:
    config.setdefault("settings", {"region": "us-east-1"})
    built = build_adapter(
        stack,
        AdapterConfig(base_url=emulator.base_url("bedrock"), **config),
        tool_id_store=InMemoryToolIdStore(),
    )
    return built


def ask(stack: str, *messages: Message, **fields: Any) -> CanonicalRequest:
    return CanonicalRequest(
        model=MODELS[stack],
        session_id=f"emulator-{stack}",
        messages=list(messages) or [Message.user("What's the weather in Paris?")],
        max_output_tokens=2048,
        **{"tools": [WEATHER], **fields},
    )


def use_keys(
    monkeypatch: pytest.MonkeyPatch, key: str, secret: str, token: str | None = None
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    if token:
        monkeypatch.setenv("AWS_SESSION_TOKEN", token)


@pytest.mark.anyio
@pytest.mark.parametrize("stack", list(MODELS))
@pytest.mark.parametrize("streamed", [True, False])
@pytest.mark.usefixtures("aws_env")
async def test_a_sigv4_signed_call_is_verified_and_answered(
    stack: str,
    streamed: bool,
    emulator: Emulator,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    use_keys(monkeypatch, "AKIDEMULATOR", CREDENTIALS["AKIDEMULATOR"], "a-session-token")
    a = adapter(stack, emulator)
    with anyio.fail_after(DEADLINE):
        if streamed:
            final = [e async for e in a.stream(ask(stack))][-1]
            assert isinstance(final, MessageComplete)
            content = final.final_content
        else:
            content = (await a.complete(ask(stack))).content
    (call,) = [b for b in content if b.type == "tool_use"]
    assert call.input == {"city": "Paris"}  # type: ignore[union-attr]
    (record,) = emulator.requests[-1:]
    assert record.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEMULATOR/")
    assert "%3A" in record.path
    await a.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("key", "secret", "token", "code"),
    [
        ("AKIDEMULATOR", "not-the-secret", None, "InvalidSignatureException"),
        ("AKIDUNKNOWN", "whatever", None, "UnrecognizedClientException"),
        ("AKIDEMULATOR", CREDENTIALS["AKIDEMULATOR"], EXPIRED_TOKEN, "ExpiredTokenException"),
    ],
)
@pytest.mark.usefixtures("aws_env")
async def test_a_refused_signature_is_an_auth_error_sent_once(
    key: str,
    secret: str,
    token: str | None,
    code: str,
    emulator: Emulator,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    use_keys(monkeypatch, key, secret, token)
    a = adapter("bedrock", emulator)
    with anyio.fail_after(DEADLINE), pytest.raises(AuthError) as caught:
        await a.complete(ask("bedrock"))
    assert caught.value.provider_code == code and caught.value.provider_status == 403
    assert emulator.stats.requests == 1
    await a.aclose()


@pytest.mark.anyio
@pytest.mark.usefixtures("aws_env")
async def test_a_wrong_bearer_key_is_refused_and_the_right_one_accepted() -> None:
    with Emulator(api_keys=["ABSKgood"]) as emulator:
        bad = adapter("bedrock", emulator, api_key="ABSKbad")
        with anyio.fail_after(DEADLINE), pytest.raises(AuthError):
            await bad.complete(ask("bedrock"))
        good = adapter("bedrock", emulator, api_key="ABSKgood")
        with anyio.fail_after(DEADLINE):
            response = await good.complete(ask("bedrock"))
        assert response.stop_reason.kind is StopKind.TOOL_USE
        await bad.aclose()
        await good.aclose()


@pytest.mark.anyio
async def test_the_stream_frames_pass_botocores_own_crc_checks(emulator: Emulator) -> None:
    body = {"messages": [{"role": "user", "content": [{"text": "Tell me about the sea."}]}]}
    async with httpx.AsyncClient() as client:
        response = await client.post(
            emulator.url + "/model/us.amazon.nova-pro-v1%3A0/converse-stream",
            json=body,
            headers={"authorization": "Bearer ABSKkey"},
        )
    assert response.headers["content-type"] == "application/vnd.amazon.eventstream"
    buffer = eventstream.EventStreamBuffer()
    buffer.add_data(response.content)
    kinds = [message.headers[":event-type"] for message in buffer]  # raises on a bad CRC
    assert kinds[0] == "messageStart" and kinds[-2:] == ["messageStop", "metadata"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("body", "says"),
    [
        (
            {"messages": [{"role": "assistant", "content": [{"text": "hi"}]}]},
            "must start with a user",
        ),
        ({"messages": [{"role": "user", "content": [{"text": " "}]}]}, "is blank"),
        (
            {"messages": [{"role": "user", "content": [{"text": "hi"}]}], "model": "x"},
            "extraneous key",
        ),
    ],
)
async def test_converse_refuses_what_bedrock_refuses(
    body: dict[str, Any], says: str, emulator: Emulator
) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.post(
            emulator.url + "/model/m/converse", json=body, headers={"authorization": "Bearer k"}
        )
    assert response.status_code == 400
    assert response.headers["x-amzn-errortype"].startswith("ValidationException")
    assert says in response.json()["message"]


@pytest.mark.anyio
async def test_no_authentication_at_all_is_a_403(emulator: Emulator) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.post(emulator.url + "/model/m/converse", json={})
    assert response.status_code == 403
    assert response.headers["x-amzn-errortype"].startswith("MissingAuthenticationTokenException")


@pytest.mark.anyio
@pytest.mark.parametrize("stack", list(MODELS))
async def test_a_full_tool_loop_with_reasoning_passes_the_emulators_checks(
    stack: str, emulator: Emulator
) -> None:
    a = adapter(stack, emulator, api_key="ABSKkey")
    thinking = ThinkingConfig(budget_tokens=1024)
    question = Message.user("What's the weather in Paris?")
    with anyio.fail_after(DEADLINE):
        first = await a.complete(ask(stack, question, thinking=thinking))
        assert [b.type for b in first.content] == ["thinking", "tool_use"]
        call = first.content[-1]
        result = ToolResultBlock(tool_use_id=call.id, content="18C and sunny")  # type: ignore[union-attr]
        history = [
            question,
            Message(role=Role.ASSISTANT, content=first.content),
            Message(role=Role.USER, content=[result]),
        ]
        events = [e async for e in a.stream(ask(stack, *history, thinking=thinking))]
    final = events[-1]
    assert isinstance(final, MessageComplete) and final.stop_reason.kind is StopKind.END_TURN
    text = "".join(b.text for b in final.final_content if b.type == "text")  # type: ignore[union-attr]
    assert "18C" in text
    sent = [json.loads(r.body) for r in emulator.requests]
    assert len(sent) == 2  # both accepted: the signed reasoning and the tool ids went back intact
    await a.aclose()


@pytest.mark.anyio
async def test_a_malformed_frame_is_a_protocol_error(emulator: Emulator) -> None:
    a = adapter("bedrock", emulator, api_key="ABSKkey", max_retries=0)
    emulator.push_fault("malformed;after=2", provider="bedrock")
    with anyio.fail_after(DEADLINE), pytest.raises(ProtocolError, match=r"corrupt|inside a frame"):
        async for _ in a.stream(
            ask("bedrock", Message.user("Tell me a story about the sea."), tools=[])
        ):
            pass
    await a.aclose()


@pytest.mark.anyio
@pytest.mark.usefixtures("aws_env", "frozen_clock")
async def test_a_signature_dated_outside_the_allowed_skew_is_refused(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_keys(monkeypatch, "AKIDEMULATOR", CREDENTIALS["AKIDEMULATOR"])
    a = adapter("bedrock", emulator)
    with anyio.fail_after(DEADLINE), pytest.raises(AuthError, match="Signature expired") as e:
        await a.complete(ask("bedrock"))
    assert emulator.stats.requests == 1  # not retried: the clock is as wrong the next time
    assert "dated by this machine's clock" in str(e.value) and "set the clock right" in str(e.value)
    assert not e.value.retryable
    await a.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("fault", "error_class"),
    [
        ("context_overflow", "context_overflow"),
        ("overloaded", "overloaded"),
        ("auth", "auth"),
        ("stream_error=rate_limit;after=2", "rate_limit"),
        ("stream_error=overloaded;after=2", "overloaded"),
    ],
)
async def test_bedrock_errors_arrive_classified(
    fault: str, error_class: str, emulator: Emulator
) -> None:
    a = adapter("bedrock", emulator, api_key="ABSKkey", max_retries=0)
    emulator.push_fault(fault, provider="bedrock")
    story = Message.user("Tell me a long story about the sea.")
    with anyio.fail_after(DEADLINE), pytest.raises(AdapterError) as caught:
        async for _ in a.stream(ask("bedrock", story, tools=[])):
            pass
    assert caught.value.error_class.value == error_class
    await a.aclose()
