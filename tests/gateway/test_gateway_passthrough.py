"""The pass-through path: a request in the routed model's own API goes to the provider as the
caller wrote it (unknown fields, server tools, cache marks kept), the gateway still doing its
part (keys and budgets from the answer's usage, the model's name both ways, the output limit,
thinking signed with its maker, metrics, errors in its own shape); every other request is
translated. The official SDKs against the gateway, the emulator upstream."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from metis.gateway.app import create_app
from metis.gateway.keys import digest
from metis.gateway.provenance import wrap
from metis.gateway.relay import AnthropicRelay, ChatRelay
from metis.model.content import ProviderRaw, TextBlock
from metis.model.request import CanonicalRequest
from metis.pipeline import Call, RequestStage
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config, serving

from ..helpers import ImportOnUse

anthropic = ImportOnUse("anthropic")
openai = ImportOnUse("openai")

SAID = [{"role": "user", "content": "Hi"}]
KEYS = [{"name": "paying", "sha256": digest("paying-key"), "budget_usd": 100}]


@pytest.fixture(scope="module")
def emulator() -> Iterator[Emulator]:
    yield Emulator()


@pytest.fixture(scope="module")
def served(emulator: Emulator) -> Iterator[tuple[str, Any]]:
    app = create_app(gateway_config(emulator, {"keys": KEYS}))
    with serving(app) as (url, _):
        yield url, app


@pytest.fixture
def claude(served: tuple[str, Any]) -> Any:
    return anthropic.Anthropic(api_key=GATEWAY_KEY, base_url=served[0], max_retries=0)


@pytest.fixture
def oai(served: tuple[str, Any]) -> Any:
    return openai.OpenAI(api_key=GATEWAY_KEY, base_url=served[0] + "/v1", max_retries=0)


def test_an_anthropic_request_to_an_anthropic_model_keeps_every_field(
    claude: Any, emulator: Emulator
) -> None:
    cached = {"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral"}}
    raw = claude.messages.with_raw_response.create(
        model="sonnet",
        max_tokens=200,
        metadata={"user_id": "u-1"},
        extra_body={"top_k": 5, "top_p": 0.9},
        extra_headers={"anthropic-beta": "some-beta-2026-01-01"},
        messages=[{"role": "user", "content": [cached]}],
    )
    assert raw.headers["x-metis-path"] == "pass-through"
    assert "x-metis-dropped" not in raw.headers
    message = raw.parse()
    assert message.model == "sonnet" and message.content[0].text == "You said: Hi"
    sent = emulator.requests[-1]
    body = sent.json()
    assert body["model"] == "claude-sonnet-4-5" and body["top_k"] == 5
    assert body["metadata"] == {"user_id": "u-1"} and body["top_p"] == 0.9
    assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert sent.headers["anthropic-beta"] == "some-beta-2026-01-01"
    assert sent.headers["x-api-key"] == "sk-upstream"  # the provider's key, not the caller's
    # what the provider does not take, the provider refuses, as it would the caller's own call
    with pytest.raises(anthropic.BadRequestError, match="a_field_of_tomorrow"):
        claude.messages.create(
            model="sonnet", max_tokens=50, messages=SAID, extra_body={"a_field_of_tomorrow": 1}
        )


def test_a_streamed_pass_through_names_the_callers_model_and_charges_the_key(
    served: tuple[str, Any], emulator: Emulator
) -> None:
    url, app = served
    paying = anthropic.Anthropic(api_key="paying-key", base_url=url, max_retries=0)
    with paying.messages.stream(model="sonnet", max_tokens=200, messages=SAID) as stream:
        events = list(stream)
        final = stream.get_final_message()
    assert final.model == "sonnet" and final.content[0].text == "You said: Hi"
    assert events[0].type == "message_start" and final.usage.output_tokens > 0
    assert emulator.bodies("anthropic")[-1]["stream"] is True
    spent = httpx.get(url + "/metrics").text
    assert 'metis_gateway_tokens_total{model="anthropic:claude-sonnet-4-5",direction="output"}' in (
        spent
    )
    gateway = app.state.gateway
    found = gateway.keys.find("paying-key")
    assert found is not None and found.spent > 0  # the usage the stream reported, priced


def test_a_chat_request_to_an_openai_model_passes_through(oai: Any, emulator: Emulator) -> None:
    raw = oai.chat.completions.with_raw_response.create(
        model="gpt", messages=SAID, seed=7, user="u-1"
    )
    assert raw.headers["x-metis-path"] == "pass-through"
    completion = raw.parse()
    assert completion.model == "gpt" and completion.choices[0].message.content == "You said: Hi"
    body = emulator.bodies("openai")[-1]
    assert body["model"] == "gpt-4o" and body["seed"] == 7 and body["user"] == "u-1"
    # streamed without include_usage: the gateway asks for the usage, the caller does not get it
    chunks = list(oai.chat.completions.create(model="gpt", messages=SAID, stream=True))
    assert emulator.bodies("openai")[-1]["stream_options"] == {"include_usage": True}
    assert all(chunk.model == "gpt" and chunk.usage is None for chunk in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "You said: Hi"
    asked = oai.chat.completions.create(
        model="gpt", messages=SAID, stream=True, stream_options={"include_usage": True}
    )
    last = list(asked)[-1]
    assert last.choices == [] and last.usage is not None and last.usage.completion_tokens > 0


def test_other_apis_routes_and_foreign_thinking_are_translated(claude: Any, oai: Any) -> None:
    to_gemini = claude.messages.with_raw_response.create(
        model="flash", max_tokens=50, messages=SAID
    )
    assert to_gemini.headers["x-metis-path"] == "translated"
    to_claude = oai.chat.completions.with_raw_response.create(model="sonnet", messages=SAID)
    assert to_claude.headers["x-metis-path"] == "translated"
    route = claude.messages.with_raw_response.create(model="fallback", max_tokens=50, messages=SAID)
    assert route.headers["x-metis-path"] == "translated"
    gemini_thought = wrap(ProviderRaw(provider="gemini", model="gemini:gemini-2.5-flash"), "sig")
    history = [
        *SAID,
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Hmm.", "signature": gemini_thought},
                {"type": "text", "text": "Hello."},
            ],
        },
        {"role": "user", "content": "And?"},
    ]
    foreign = claude.messages.with_raw_response.create(
        model="sonnet", max_tokens=50, messages=history
    )
    assert foreign.headers["x-metis-path"] == "translated"
    assert "thinking" in foreign.headers["x-metis-dropped"]


def test_an_output_limit_written_as_a_float_is_lowered_too(claude: Any, emulator: Emulator) -> None:
    thinking = {"type": "enabled", "budget_tokens": 9e4}
    raw = claude.messages.with_raw_response.create(
        model="sonnet", max_tokens=1e5, thinking=thinking, timeout=60, messages=SAID
    )
    assert raw.headers["x-metis-path"] == "pass-through"
    assert "max_tokens lowered from 100000 to" in raw.headers["x-metis-dropped"]
    assert "thinking budget lowered from 90000 to" in raw.headers["x-metis-dropped"]
    sent = emulator.bodies("anthropic")[-1]
    assert sent["thinking"]["budget_tokens"] < sent["max_tokens"] < 100_000


def test_the_output_limit_is_lowered_to_the_models_and_said(
    claude: Any, emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    raw = claude.messages.with_raw_response.create(
        model="sonnet", max_tokens=100_000, timeout=60, messages=SAID
    )
    assert raw.headers["x-metis-path"] == "pass-through"
    assert "max_tokens lowered from 100000" in raw.headers["x-metis-dropped"]
    assert emulator.bodies("anthropic")[-1]["max_tokens"] < 100_000
    logged = [r for r in caplog.records if getattr(r, "event", "") == "metis.gateway.dropped"]
    assert logged and "max_tokens lowered" in logged[-1].getMessage()
    thinking = {"type": "enabled", "budget_tokens": 90_000}
    with claude.messages.with_streaming_response.create(
        model="sonnet", max_tokens=100_000, thinking=thinking, messages=SAID, stream=True
    ) as streamed:
        assert (
            streamed.status_code == 200
            and "thinking budget lowered" in (streamed.headers["x-metis-dropped"])
        )
    sent = emulator.bodies("anthropic")[-1]
    assert sent["thinking"]["budget_tokens"] == sent["max_tokens"] - 1


def test_a_provider_error_arrives_in_the_gateways_shape_without_the_providers_key(
    claude: Any, oai: Any, emulator: Emulator
) -> None:
    emulator.push_fault("rate_limit=7", provider="anthropic")
    with pytest.raises(anthropic.RateLimitError) as limited:
        claude.messages.create(model="sonnet", max_tokens=50, messages=SAID)
    assert limited.value.response.headers["retry-after"] == "7"
    emulator.push_fault("auth", provider="openai")
    with pytest.raises(openai.InternalServerError) as refused:  # the gateway's key, not theirs
        oai.chat.completions.create(model="gpt", messages=SAID)
    assert refused.value.status_code == 502 and refused.value.code == "provider_key_refused"
    assert "sk-upstream" not in refused.value.response.text
    emulator.push_fault("stream_error=overloaded", provider="anthropic")
    with (
        pytest.raises(anthropic.APIStatusError, match=r"(?i)overloaded"),
        claude.messages.stream(model="sonnet", max_tokens=50, messages=SAID) as stream,
    ):
        list(stream)


@pytest.mark.anyio
async def test_pass_through_can_be_turned_off() -> None:
    app = create_app(gateway_config(Emulator(), {"pass_through": False}))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        said = {"model": "sonnet", "max_tokens": 50, "messages": SAID, "metadata": {"user_id": "u"}}
        answer = await client.post("/v1/messages", json=said, headers={"x-api-key": GATEWAY_KEY})
    assert answer.status_code == 200 and answer.headers["x-metis-path"] == "translated"
    assert "metadata" in answer.headers["x-metis-dropped"]


# The relays, sans-IO ----------------------------------------------------------------------------

MAKER = ProviderRaw(provider="anthropic", model="anthropic:claude-sonnet-4-5")
ANTHROPIC_STREAM = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","model":'
    b'"claude-sonnet-4-5","content":[],"usage":{"input_tokens":12,"output_tokens":1}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"thinking","thinking":"","signature":""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"thinking_delta","thinking":"\\"model\\":\\"x\\""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"signature_delta","signature":"c2ln"}}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    b'"usage":{"output_tokens":30}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


@pytest.mark.parametrize("size", [1, 7, 64, len(ANTHROPIC_STREAM)])
def test_the_anthropic_relay_changes_only_what_the_gateway_owns(size: int) -> None:
    relay = AnthropicRelay("sonnet", MAKER)
    pieces = [ANTHROPIC_STREAM[i : i + size] for i in range(0, len(ANTHROPIC_STREAM), size)]
    out = b"".join(relay.feed(piece) for piece in pieces) + relay.end()
    assert b'"model":"sonnet"' in out and b"claude-sonnet-4-5" not in out
    assert wrap(MAKER, "c2ln").encode() in out
    thinking = ANTHROPIC_STREAM.split(b"\n\n")[2]  # passed on untouched, byte for byte
    assert thinking + b"\n\n" in out
    assert relay.usage is not None
    assert (relay.usage.input_tokens, relay.usage.output_tokens) == (12, 30)


def test_the_chat_relay_renames_the_model_and_keeps_content_that_looks_like_one() -> None:
    stream = (
        b'data: {"id":"c1","model":"gpt-4o-2024","choices":[{"index":0,"delta":'
        b'{"content":"\\"model\\":\\"gpt-4o-2024\\""}}]}\r\n\r\n'
        b'data: {"id":"c1","model":"gpt-4o-2024","choices":[],"usage":{"prompt_tokens":9,'
        b'"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":2}}}\r\n\r\n'
        b"data: [DONE]\r\n\r\n"
    )
    relay = ChatRelay("gpt", include_usage=False)
    out = relay.feed(stream[:50]) + relay.feed(stream[50:]) + relay.end()
    assert out.count(b'"model":"gpt"') == 1 and b'\\"model\\":\\"gpt-4o-2024\\"' in out
    assert b'"usage"' not in out and out.endswith(b"data: [DONE]\n\n")
    assert relay.usage is not None
    assert (relay.usage.input_tokens, relay.usage.cached_input_tokens) == (7, 2)


@pytest.mark.anyio
async def test_the_example_of_both_paths() -> None:
    from metis.gateway.config import GatewayConfig

    emulator = Emulator()
    environ = {"EMULATOR_KEY": "any", "METIS_GATEWAY_KEY": "k"}
    config = GatewayConfig.load(
        "examples/gateway_paths.yaml",
        environ=environ,
        clients={name: emulator.client() for name in ("anthropic", "openai", "responses")},
    )
    transport = httpx.ASGITransport(app=create_app(config))
    paths = []
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        for path, model in [
            ("/v1/messages", "sonnet"),
            ("/v1/messages", "gpt"),
            ("/v1/chat/completions", "gpt"),
            ("/v1/chat/completions", "sonnet"),
            ("/v1/responses", "gpt5"),
            ("/v1/responses", "sonnet"),
            ("/v1/messages", "either"),
            ("/v1/chat/completions", "either"),
        ]:
            said: dict[str, Any] = {"model": model, "max_tokens": 50, "messages": SAID}
            if path == "/v1/responses":
                said = {"model": model, "input": "Hi"}
            answer = await client.post(path, json=said, headers={"x-api-key": "k"})
            assert answer.status_code == 200, answer.text
            paths.append(answer.headers["x-metis-path"])
    assert paths == ["pass-through", "translated"] * 4


def test_a_stalled_pass_through_stream_ends_by_the_deadline_and_a_gone_client_frees_its_place() -> (
    None
):
    emulator = Emulator()
    keys = [{"name": "one", "sha256": digest("one-key"), "max_concurrent": 1}]
    settings = {"keys": keys, "request_timeout_seconds": 1}
    with serving(create_app(gateway_config(emulator, settings))) as (url, _):
        one = anthropic.Anthropic(api_key="one-key", base_url=url, max_retries=0)
        emulator.push_fault("stall=60", provider="anthropic")
        with (
            pytest.raises(
                anthropic.APIStatusError, match=r"allows: 1 s \(gateway\.request_timeout_seconds\)"
            ),
            one.messages.stream(model="sonnet", max_tokens=50, messages=SAID) as stream,
        ):
            list(stream)
        # a client that goes away mid-stream: the upstream call ends, the key's place is free
        emulator.push_fault("stall=60", provider="anthropic")
        said = {"model": "sonnet", "max_tokens": 50, "messages": SAID, "stream": True}
        with httpx.stream(
            "POST", url + "/v1/messages", json=said, headers={"x-api-key": "one-key"}
        ) as held:
            assert held.status_code == 200
            next(held.iter_bytes())
        statuses = []
        for _ in range(200):  # the gateway notices the disconnect at once; a bound, not a timing
            statuses.append(_asked(url, "one-key"))
            if statuses[-1] != 429:
                break
            time.sleep(0.05)
        assert statuses[-1] == 200, statuses


def _asked(url: str, key: str) -> int:
    said = {"model": "flash", "max_tokens": 50, "messages": SAID}
    return httpx.post(url + "/v1/messages", json=said, headers={"x-api-key": key}).status_code


class Redact(RequestStage[CanonicalRequest]):
    """A stage of the application's own: what it does must happen to every request."""

    name = "redact_secrets"

    def rewrite(self, request: CanonicalRequest, call: Call) -> CanonicalRequest:
        messages = [
            m.model_copy(
                update={
                    "content": [
                        TextBlock(text=b.text.replace("secret", "[x]"))
                        if isinstance(b, TextBlock)
                        else b
                        for b in m.content
                    ]
                }
            )
            for m in request.messages
        ]
        return request.model_copy(update={"messages": messages})


def test_a_model_whose_stack_has_a_stage_of_the_applications_own_is_translated(
    emulator: Emulator,
) -> None:
    """A gateway user's redaction stage was skipped for every client of the model's own API
    (passed through as written, the stage never ran): a stack with a stage of the
    application's own is served the translated way, so the stage sees every request."""
    app = create_app(gateway_config(emulator))
    gateway = app.state.gateway
    adapter = gateway.models.resolve("sonnet").chat_model
    adapter.pipeline.insert_after("tool_ids", Redact())
    with serving(app) as (url, _):
        client = anthropic.Anthropic(api_key=GATEWAY_KEY, base_url=url, max_retries=0)
        raw = client.messages.with_raw_response.create(
            model="sonnet", max_tokens=100, messages=[{"role": "user", "content": "my secret"}]
        )
    assert raw.headers["x-metis-path"] == "translated"
    assert raw.parse().content[0].text == "You said: my [x]"
