"""A web search the provider ran is counted in the reply's usage and priced, end to end on
the emulator, streamed and whole, for Anthropic (``usage.server_tool_use``), OpenAI
Responses (its ``web_search_call`` item) and Gemini (its grounding's ``webSearchQueries``)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import anyio
import pytest

from metis import AdapterConfig, build_adapter
from metis.cost import cost_of
from metis.model import CanonicalRequest, Message, ServerToolRequests, WebSearch
from metis.testing.emulator import Emulator, web_search

FOUND = [("https://www.python.org/downloads/", "Download Python")]
MODELS = {
    "anthropic": "anthropic:claude-sonnet-4-5",
    "openai_responses": "openai_responses:gpt-5",
    "gemini": "gemini:gemini-3-pro-preview",
}


async def searched(stack: str, stream: bool) -> Any:
    emulator = Emulator(model=[web_search("latest python", FOUND, say="Python 3.14 is out.")])
    adapter = build_adapter(stack, AdapterConfig(api_key="k", http_client=emulator.client()))
    request = CanonicalRequest(
        model=MODELS[stack],
        messages=[Message.user("What is the latest Python?")],
        max_output_tokens=512,
        server_tools=[WebSearch()],
        stream=stream,
    )
    with anyio.fail_after(20):
        return await adapter.complete(request)


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("stack", sorted(MODELS))
async def test_a_searching_reply_counts_and_prices_its_search(stack: str, stream: bool) -> None:
    reply = await searched(stack, stream)
    assert reply.text == "Python 3.14 is out."
    assert reply.usage.server_tools == ServerToolRequests(web_search=1)
    cost = cost_of(reply.model, reply.usage)
    tokens_only = cost_of(
        reply.model, reply.usage.model_copy(update={"server_tools": ServerToolRequests()})
    )
    assert cost.server_tools_usd > 0 and cost.usd == tokens_only.usd + cost.server_tools_usd


@pytest.mark.anyio
async def test_the_anthropic_search_costs_ten_dollars_a_thousand() -> None:
    reply = await searched("anthropic", False)
    assert cost_of(reply.model, reply.usage).server_tools_usd == Decimal("0.01")
