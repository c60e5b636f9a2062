"""Compaction by the provider (docs/sessions.md "Compaction"): the request asks for it on the
wires that have it (and it is dropped with a WARN elsewhere), the compaction block the reply
holds is kept whole and goes back only to its provider, the Responses compact endpoint makes a
history that fits, and a session with ``compact="provider"`` does all of it on the emulator,
whose rules refuse every malformed form."""

from __future__ import annotations

import json
from typing import Any

import pytest

from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.errors import ConfigError, ContextOverflowError
from metis.model import CanonicalRequest, Compaction, Message, OpaqueBlock, TextBlock
from metis.routing import Router
from metis.sessions import Session
from metis.sessions.core import add_usage
from metis.testing.emulator import Emulator
from metis.wire.anthropic import codec as anthropic_codec
from metis.wire.compaction import ANTHROPIC_BETA, window_start

from .. import stack_table as families

CLAUDE = families.MODELS["anthropic"]
GPT = families.MODELS["openai_responses"]
WORDS = "The harbour was busy that morning, and every boat came in with fish. "


def text_of(tokens: int) -> str:
    """About ``tokens`` tokens of prose (four characters a token)."""
    return (WORDS * (tokens * 4 // len(WORDS) + 1))[: tokens * 4]


def compactions(messages: list[Message]) -> list[OpaqueBlock]:
    return [
        b
        for m in messages
        for b in m.content
        if isinstance(b, OpaqueBlock) and b.kind == "compaction"
    ]


def sent(emulator: Emulator, path: str) -> list[dict[str, Any]]:
    return [json.loads(r.body) for r in emulator.requests if r.path == path]


def adapter(stack: str, emulator: Emulator, window: int) -> Adapter:
    return families.adapter(stack, emulator, capabilities={"max_context_tokens": window})


# The wire ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_an_anthropic_request_asks_for_compaction_with_its_beta_and_the_minimum_trigger(
    emulator: Emulator,
) -> None:
    chat = families.adapter("anthropic", emulator)
    request = families.request("anthropic", compaction=Compaction(trigger_tokens=1000))
    await chat.complete(request)
    (body,) = sent(emulator, "/v1/messages")
    edit = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000}}
    assert body["context_management"] == {"edits": [edit]}
    assert ANTHROPIC_BETA in emulator.requests[0].headers["anthropic-beta"].split(",")


def test_the_compaction_beta_joins_the_server_tools_beta() -> None:
    body = {
        "tools": [{"type": "code_execution_20250825", "name": "code_execution"}],
        "context_management": {"edits": [{"type": "compact_20260112"}]},
    }
    betas = anthropic_codec.headers_for(body)["anthropic-beta"].split(",")  # type: ignore[attr-defined]
    assert ANTHROPIC_BETA in betas and len(betas) == 2


@pytest.mark.anyio
async def test_a_responses_request_asks_for_compaction_at_its_threshold(
    emulator: Emulator,
) -> None:
    chat = families.adapter("openai_responses", emulator)
    request = families.request("openai_responses", compaction=Compaction(trigger_tokens=9000))
    await chat.complete(request)
    (body,) = sent(emulator, "/v1/responses")
    assert body["context_management"] == [{"type": "compaction", "compact_threshold": 9000}]


@pytest.mark.anyio
@pytest.mark.parametrize("stack", ["openai", "gemini"])
async def test_a_wire_without_compaction_drops_it_with_one_warning(
    stack: str, emulator: Emulator
) -> None:
    chat = families.adapter(stack, emulator)
    response = await chat.complete(
        families.request(stack, compaction=Compaction(trigger_tokens=9000))
    )
    assert [w.block_type for w in response.warnings] == ["compaction"]
    assert "context_management" not in json.dumps([json.loads(r.body) for r in emulator.requests])


def test_a_compaction_asks_for_a_positive_trigger() -> None:
    with pytest.raises(ValueError, match="trigger_tokens"):
        Compaction(trigger_tokens=0)


# Anthropic: the block in the reply, kept whole -----------------------------------------------


def past_the_trigger(stream: bool) -> CanonicalRequest:
    """A request for Claude whose one message is past its compaction trigger."""
    return CanonicalRequest(
        model=CLAUDE,
        messages=[Message.user(text_of(60_000))],
        max_output_tokens=200,
        compaction=Compaction(trigger_tokens=50_000),
        stream=stream,
    )


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False])
async def test_an_anthropic_compaction_block_keeps_its_summary_streamed_or_not(
    stream: bool, emulator: Emulator
) -> None:
    chat = families.adapter("anthropic", emulator)
    response = await chat.complete(past_the_trigger(stream))
    (block,) = compactions([response.message])
    item = block.provider_raw.data["item"]
    assert item["type"] == "compaction"
    assert isinstance(item["content"], str) and item["content"].startswith("Summary of 1")
    assert response.message.content[0] == block  # first, as the API put it


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False])
async def test_a_compacted_anthropic_turn_counts_the_compaction_pass_in_its_usage(
    stream: bool, emulator: Emulator
) -> None:
    """The emulator reports a compacted reply's passes apart, as the API does (the top-level
    counts the message pass's only); the usage (and so the cost) is the billed total."""
    chat = families.adapter("anthropic", emulator)
    response = await chat.complete(past_the_trigger(stream))
    (sent_request,) = emulator.requests
    async with emulator.client() as client:  # the same request, its reply read raw
        raw = await client.post(
            "http://emulator/v1/messages",
            json={**json.loads(sent_request.body), "stream": False},
            headers=sent_request.headers,
        )
    usage = raw.json()["usage"]
    compaction, message = usage["iterations"]
    assert compaction["type"] == "compaction" and message["type"] == "message"
    assert message["input_tokens"] == usage["input_tokens"]
    assert response.usage.input_tokens == compaction["input_tokens"] + message["input_tokens"]
    assert response.usage.output_tokens == compaction["output_tokens"] + message["output_tokens"]
    assert response.usage.input_tokens > 60_000  # the compaction pass read the whole turn
    assert message["input_tokens"] < 1_000  # the reply read the summary, not the turn
    # the top-level counts are the message pass: added once, not again as an iteration
    assert response.usage.input_tokens < compaction["input_tokens"] + 1_000


# Sessions ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_session_leaving_compaction_to_anthropic_counts_from_its_block(
    emulator: Emulator,
) -> None:
    """The provider compacts past 80% of the room; the block goes back on the next turn (the
    emulator accepts it); what precedes it no longer counts, so a history that would be over
    the window as a whole is sent."""
    window = 70_000
    chat = Session(
        CLAUDE,
        adapters={"anthropic": adapter("anthropic", emulator, window)},
        compact="provider",
        context_check="estimate",
        max_output_tokens=200,
    )
    first = await chat.asend(text_of(60_000))
    (body,) = sent(emulator, "/v1/messages")
    trigger = body["context_management"]["edits"][0]["trigger"]["value"]
    assert trigger == int((window - 200) * 0.8)
    assert compactions([first.message]) and compactions(chat.messages)
    second = await chat.asend(text_of(30_000))  # 90,000 in all, 30,000 from the block
    assert second.text and not compactions([second.message])  # read from the block: under it
    assert 30_000 <= second.usage.total_input_tokens < 31_000  # and billed from the block on
    assert chat.usage == add_usage(first.usage, second.usage)
    replay = sent(emulator, "/v1/messages")[1]["messages"][1]["content"][0]
    assert replay["type"] == "compaction" and replay["content"].startswith("Summary of")


@pytest.mark.anyio
async def test_anthropic_cannot_compact_a_history_already_over_the_window(
    emulator: Emulator,
) -> None:
    chat = Session(
        CLAUDE,
        [Message.user(text_of(3000)), Message.assistant("Go on.")],
        adapters={"anthropic": adapter("anthropic", emulator, 2000)},
        compact="provider",
        context_check="estimate",
        max_output_tokens=200,
    )
    with pytest.raises(ContextOverflowError, match="compacts only past the trigger"):
        await chat.asend("And then?")
    assert emulator.requests == []


@pytest.mark.anyio
async def test_a_responses_session_over_the_window_is_compacted_by_the_compact_endpoint(
    emulator: Emulator,
) -> None:
    """Over the window, the history before the turn goes to ``/v1/responses/compact``; its
    user messages and compaction item replace it, the turn's message after them; the item goes
    back as it came (the emulator checks its content is one it sealed)."""
    history = [
        Message.user("Describe the harbour."),
        Message.assistant(text_of(2500)),
        Message.user("And its boats?"),
        Message.assistant(text_of(2500)),
    ]
    chat = Session(
        GPT,
        history,
        adapters={"openai_responses": adapter("openai_responses", emulator, 4000)},
        compact="provider",
        context_check="estimate",
        max_output_tokens=200,
    )
    reply = await chat.asend("What was the harbour like?")
    assert [r.path for r in emulator.requests] == ["/v1/responses/compact", "/v1/responses"]
    (compact_body,) = sent(emulator, "/v1/responses/compact")
    assert "context_management" not in compact_body and "stream" not in compact_body
    roles = [m.role.value for m in chat.messages]
    assert roles == ["user", "user", "assistant", "user", "assistant"]
    assert chat.messages[3].text == "What was the harbour like?" and reply.text
    (item,) = [
        i for i in sent(emulator, "/v1/responses")[0]["input"] if i.get("type") == "compaction"
    ]
    assert item["encrypted_content"].startswith("gAAAAAB")
    await chat.asend("And the boats?")  # the compacted history goes on as any other
    assert len(compactions(chat.messages)) == 1


@pytest.mark.anyio
async def test_a_compacted_responses_history_moves_to_anthropic_without_its_compaction(
    emulator: Emulator,
) -> None:
    history = [Message.user("Describe the harbour."), Message.assistant(text_of(2500))]
    chat = Session(
        GPT,
        history,
        adapters={
            "openai_responses": adapter("openai_responses", emulator, 2000),
            "anthropic": families.adapter("anthropic", emulator),
        },
        compact="provider",
        context_check="estimate",
        max_output_tokens=200,
    )
    await chat.asend("More?")
    assert compactions(chat.messages)
    chat.model = CLAUDE
    reply = await chat.asend("Summarize, please.")  # the anthropic rules accept the history
    assert [w.block_type for w in reply.warnings] == ["compaction"]
    assert "compaction" not in json.dumps(sent(emulator, "/v1/messages"))


@pytest.mark.anyio
async def test_a_turn_alone_over_the_window_is_not_compacted(emulator: Emulator) -> None:
    chat = Session(
        GPT,
        adapters={"openai_responses": adapter("openai_responses", emulator, 2000)},
        compact="provider",
        context_check="estimate",
        max_output_tokens=200,
    )
    with pytest.raises(ContextOverflowError, match="turn's own messages"):
        await chat.asend(text_of(3000))
    assert emulator.requests == [] and chat.messages == []


def test_a_session_takes_a_function_or_provider_as_its_compaction() -> None:
    with pytest.raises(ConfigError, match="'provider'"):
        Session(CLAUDE, compact="summary")  # type: ignore[arg-type]


def test_the_window_starts_at_the_latest_compaction_its_provider_made() -> None:
    def block(provider: str) -> OpaqueBlock:
        item = {"type": "compaction", "content": "s"}
        return OpaqueBlock.model_validate(
            {"kind": "compaction", "provider_raw": {"provider": provider, "data": {"item": item}}}
        )

    messages = [
        Message.user("a"),
        Message.assistant(block("anthropic"), TextBlock(text="b")),
        Message.user("c"),
        Message.assistant(block("openai_responses")),
        Message.user("d"),
    ]
    assert window_start(messages, ["anthropic"]) == 1
    assert window_start(messages, ["openai_responses"]) == 3
    assert window_start(messages, ["gemini"]) == 0


def test_compaction_by_the_provider_is_saved_with_the_session() -> None:
    saved = Session(CLAUDE, compact="provider").to_json()
    assert json.loads(saved)["compact"] == "provider"
    restored = Session.from_json(saved)
    assert json.loads(restored.to_json())["compact"] == "provider"
    assert "compact" not in json.loads(Session(CLAUDE).to_json())


@pytest.mark.anyio
async def test_over_websocket_the_compact_endpoint_goes_over_http_the_turns_on_the_connection(
    emulator: Emulator,
) -> None:
    stack = "openai_responses_ws"
    config = AdapterConfig(
        api_key="k", base_url=emulator.url, max_retries=0, capabilities={"max_context_tokens": 4000}
    )
    history = [Message.user("Describe the harbour."), Message.assistant(text_of(5000))]
    async with (
        build_adapter(stack, config) as ws,
        Session(
            f"{stack}:gpt-5",
            history,
            adapters={stack: ws},
            compact="provider",
            context_check="estimate",
            max_output_tokens=200,
        ) as chat,
    ):
        assert (await chat.asend("And the boats?")).text == "You said: And the boats?"
    compact, turn = [r for r in emulator.requests if r.method == "POST"]
    assert compact.path == "/v1/responses/compact" and not compact.websocket
    assert turn.websocket and turn.json()["context_management"][0]["compact_threshold"] == 3040
    assert [i.get("type", "message") for i in turn.json()["input"]] == [
        "message",
        "compaction",
        "message",
    ]


@pytest.mark.anyio
async def test_a_router_admits_a_history_its_model_reads_from_its_compaction_block(
    emulator: Emulator,
) -> None:
    item = {"type": "compaction", "content": "Summary: a busy harbour."}
    raw = {"provider": "anthropic", "model": "claude-sonnet-4-5", "data": {"item": item}}
    block = OpaqueBlock.model_validate({"kind": "compaction", "provider_raw": raw})
    history = [
        Message.user(text_of(3000)),  # over the window, but before the block
        Message.assistant(block, TextBlock(text="Noted.")),
    ]
    small = adapter("anthropic", emulator, 2000)
    route = Router([CLAUDE], adapters={"anthropic": small}, max_retries=0, name="compacted")
    chat = Session(route, history, context_check="estimate", max_output_tokens=200)
    assert (await chat.asend("And then?")).text
    (body,) = sent(emulator, "/v1/messages")
    assert body["messages"][1]["content"][0] == item  # back as it came
