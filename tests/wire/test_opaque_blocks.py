"""Blocks a provider returns with no canonical meaning (docs/contract.md §8): kept in the reply
and the history as opaque blocks with their provenance, sent back only to the provider that
made them (as they came), and anywhere else left out with one WARN, listed in the result's
warnings; never silently removed."""

from __future__ import annotations

import anyio
import pytest

from metis import AdapterConfig, build_adapter
from metis.errors import InvalidRequestError
from metis.model import CanonicalRequest, Message, OpaqueBlock, ProviderRaw, TextBlock
from metis.model.events import MessageComplete
from metis.pipeline.stores import InMemoryToolIdStore
from metis.testing.emulator import Emulator
from metis.wire.anthropic import codec as anthropic
from metis.wire.builder import MessageBuilder

from ..helpers import make_call

# A server tool's call and result are canonical blocks (docs/contract.md §11); an MCP
# connector's are not (anthropic-sdk-python beta_mcp_tool_use_block, beta_mcp_tool_result_block).
SEARCH = {
    "type": "mcp_tool_use",
    "id": "mcptoolu_1",
    "name": "get_weather",
    "server_name": "weather",
    "input": {},
}
RESULT = {
    "type": "mcp_tool_result",
    "tool_use_id": "mcptoolu_1",
    "is_error": False,
    "content": [{"type": "text", "text": "Oslo: -3 C, snow"}],
}
REPLY = {  # an Anthropic reply with an MCP call (its reference's shape)
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-6",
    "content": [
        {**SEARCH, "input": {"city": "Oslo"}},
        RESULT,
        {"type": "text", "text": "It is cold in Oslo."},
    ],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 10, "output_tokens": 20},
}


def _reply() -> list[object]:
    builder = MessageBuilder("anthropic", "anthropic:claude-sonnet-4-6")
    final = list(anthropic.parse_body(REPLY, builder))[-1]
    assert isinstance(final, MessageComplete)
    return list(final.final_content)


def test_a_block_with_no_canonical_form_is_kept_with_its_provenance() -> None:
    search, result, text = _reply()
    assert isinstance(search, OpaqueBlock) and search.kind == "mcp_tool_use"
    assert search.provider_raw == ProviderRaw(
        provider="anthropic",
        model="anthropic:claude-sonnet-4-6",
        data={"item": {**SEARCH, "input": {"city": "Oslo"}}},
    )
    assert isinstance(result, OpaqueBlock) and result.provider_raw.data["item"] == RESULT
    assert text == TextBlock(text="It is cold in Oslo.")
    again = Message.model_validate(Message(role="assistant", content=_reply()).model_dump())
    assert again.content[0] == search  # a history survives a round trip through JSON


def test_it_goes_back_as_it_came_to_the_provider_that_made_it() -> None:
    request = CanonicalRequest(
        model="anthropic:claude-sonnet-4-6",
        messages=[
            Message.user("Weather in Oslo?"),
            Message(role="assistant", content=_reply()),
            Message.user("Thanks. And tomorrow?"),
        ],
        max_output_tokens=64,
    )
    body = anthropic.encode(request, make_call("anthropic", "anthropic:claude-sonnet-4-6"))
    assert body["messages"][1]["content"] == REPLY["content"]


async def _ask(stack: str, model: str, emulator: Emulator) -> tuple[object, dict[str, object]]:
    adapter = build_adapter(
        stack,
        AdapterConfig(api_key="sk-test-0123456789abcdef", http_client=emulator.client()),
        tool_id_store=InMemoryToolIdStore(),
    )
    request = CanonicalRequest(
        model=model,
        messages=[
            Message.user("Weather in Oslo?"),
            Message(role="assistant", content=_reply()),
            Message.user("Thanks. And tomorrow?"),
        ],
        max_output_tokens=64,
    )
    with anyio.fail_after(20):
        reply = await adapter.complete(request)
    return reply, emulator.requests[-1].json()


@pytest.mark.anyio
async def test_elsewhere_it_is_left_out_with_one_warn_each_in_the_warnings() -> None:
    emulator = Emulator(models="any")
    reply, sent = await _ask("openai", "openai:gpt-4o", emulator)
    warned = [(w.block_type, w.reason) for w in reply.warnings]  # type: ignore[attr-defined]
    assert [kind for kind, _ in warned] == ["mcp_tool_use", "mcp_tool_result"]
    assert "goes back only to the provider that made it" in warned[0][1]
    assert "mcptoolu_1" not in str(sent)
    assert sent["messages"][1] == {"role": "assistant", "content": "It is cold in Oslo."}


@pytest.mark.anyio
async def test_the_provider_that_made_it_takes_it_back() -> None:
    emulator = Emulator(models="any")
    reply, sent = await _ask("anthropic", "anthropic:claude-sonnet-4-6", emulator)
    assert reply.warnings == []  # type: ignore[attr-defined]
    assert sent["messages"][1]["content"] == REPLY["content"]  # type: ignore[index]


@pytest.mark.anyio
async def test_a_user_message_of_only_such_blocks_elsewhere_is_refused_naming_it() -> None:
    """Left out, the last question would be gone and the model would go on from the reply
    before it: a user message with nothing left to send is refused, before sending."""
    emulator = Emulator(models="any")
    adapter = build_adapter(
        "openai",
        AdapterConfig(api_key="sk-test-0123456789abcdef", http_client=emulator.client()),
    )
    foreign = OpaqueBlock(
        kind="mcp_tool_result",
        provider_raw=ProviderRaw(provider="anthropic", data={"item": RESULT}),
    )
    request = CanonicalRequest(
        model="openai:gpt-4o",
        messages=[
            Message.user("Hi"),
            Message.assistant("Hello"),
            Message(role="user", content=[foreign]),
        ],
        max_output_tokens=64,
    )
    with pytest.raises(InvalidRequestError) as caught, anyio.fail_after(20):
        await adapter.complete(request)
    assert "messages[2]: a user message has nothing openai can read" in str(caught.value)
    assert "('mcp_tool_result') has no canonical form" in str(caught.value)
    assert emulator.stats.requests == 0
