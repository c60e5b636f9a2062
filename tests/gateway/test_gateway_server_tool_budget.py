"""End to end, the Anthropic SDK against the gateway, the emulator upstream: a reply whose
provider searched the web charges the key's budget for the search on top of the tokens, on
the pass-through path (an Anthropic model) and on the translated one (an OpenAI Responses
model), and the translated answer reports the search as ``usage.server_tool_use``."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from metis.cost import cost_of
from metis.gateway.app import create_app
from metis.gateway.keys import digest
from metis.model.response import ServerToolRequests, TokenUsage
from metis.testing.emulator import Emulator, web_search
from tests.gateway_fixture import gateway_config, serving

from ..helpers import ImportOnUse

anthropic = ImportOnUse("anthropic")

FOUND = [("https://www.python.org/downloads/", "Download Python")]
SEARCH_TOOL = {"type": "web_search_20250305", "name": "web_search"}


def charged(usage: Any) -> TokenUsage:
    """The SDK's usage as the canonical one it was priced from."""
    searches = usage.server_tool_use.web_search_requests if usage.server_tool_use else 0
    return TokenUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cached_input_tokens=usage.cache_read_input_tokens or 0,
        cache_creation_input_tokens=usage.cache_creation_input_tokens or 0,
        server_tools=ServerToolRequests(web_search=searches),
    )


@pytest.mark.parametrize(
    ("alias", "model", "path"),
    [
        ("sonnet", "anthropic:claude-sonnet-4-5", "pass-through"),
        ("gpt5", "openai_responses:gpt-5", "translated"),
    ],
)
def test_a_search_is_charged_to_the_key(alias: str, model: str, path: str) -> None:
    emulator = Emulator(model=[web_search("latest python", FOUND, say="Python 3.14 is out.")])
    keys = [{"name": "team", "sha256": digest("team-key"), "budget_usd": 100}]
    app = create_app(gateway_config(emulator, {"keys": keys}))
    with serving(app) as (url, _):
        client = anthropic.Anthropic(api_key="team-key", base_url=url, max_retries=0)
        raw = client.messages.with_raw_response.create(
            model=alias,
            max_tokens=300,
            tools=[SEARCH_TOOL],
            messages=[{"role": "user", "content": "What is the latest Python?"}],
        )
        assert raw.headers["x-metis-path"] == path
        message = raw.parse()
        state = app.state.gateway.keys.find("team-key")
    assert message.usage.server_tool_use.web_search_requests == 1
    usage = charged(message.usage)
    assert state is not None and state.spent == cost_of(model, usage).usd
    tokens_only = usage.model_copy(update={"server_tools": ServerToolRequests()})
    assert state.spent - cost_of(model, tokens_only).usd == Decimal("0.01")  # $10 a thousand
