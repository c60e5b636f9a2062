"""The gateway charges a key's budget for the requests the provider's own tools made (web
searches, file searches), on the pass-through path (the relays read them as the translated
path does) and on the translated one (the canonical usage holds them), and a translated
Messages API answer reports them as ``usage.server_tool_use``. Sans-IO but for the
recordings."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from metis.cost import cost_of
from metis.gateway.anthropic_write import usage as written
from metis.gateway.keys import Keys, KeySpec, digest, price
from metis.gateway.relay import AnthropicRelay
from metis.gateway.relay_responses import ResponsesRelay
from metis.model.content import ProviderRaw
from metis.model.response import ServerToolRequests, TokenUsage
from tests.recordings import ROOT

SONNET = "anthropic:claude-sonnet-4-5"
SEARCHED = TokenUsage(
    input_tokens=1_000, output_tokens=100, server_tools=ServerToolRequests(web_search=3)
)
ANTHROPIC_FETCH = (
    ROOT / "anthropic" / "pydantic-ai__test_anthropic__test_anthropic_web_fetch_tool_stream.yaml"
)
RESPONSES_SEARCH = (
    ROOT
    / "openai_responses"
    / "pydantic-ai__test_openai_responses__test_openai_responses_model_web_search_tool_stream.yaml"
)


def recorded_body(path: Path) -> bytes:
    if not path.exists():
        pytest.skip(f"no recording {path}")
    body: str = yaml.safe_load(path.read_text())["interactions"][0]["response"]["body"]["string"]
    return body.encode()


def test_the_price_charged_counts_the_searches() -> None:
    tokens_only = SEARCHED.model_copy(update={"server_tools": ServerToolRequests()})
    charged, plain = price(SONNET, SEARCHED), price(SONNET, tokens_only)
    assert charged is not None and plain is not None
    assert charged - plain == Decimal("0.03")  # 3 searches at $10 a thousand
    assert charged == cost_of(SONNET, SEARCHED).usd


@pytest.mark.anyio
async def test_a_keys_budget_is_spent_by_searches() -> None:
    keys = Keys([KeySpec(name="team", sha256=digest("k"), budget_usd=Decimal(1))], {})
    state = keys.find("k")
    assert state is not None
    await keys.admit(state, "m")
    await keys.release(state, SONNET, SEARCHED)
    assert await keys.spent("team") == cost_of(SONNET, SEARCHED).usd


def test_a_passed_through_anthropic_fetch_is_read_as_the_translated_path_reads_it() -> None:
    body = recorded_body(ANTHROPIC_FETCH)
    relay = AnthropicRelay("claude-sonnet-4-5", ProviderRaw(provider="anthropic", model=SONNET))
    relayed = relay.feed(body) + relay.end()
    assert relayed.count(b"event: ") == body.count(b"event: ")
    assert relay.usage is not None
    assert relay.usage.server_tools == ServerToolRequests(web_fetch=1)


def test_a_passed_through_anthropic_search_is_charged() -> None:
    usage = {
        "input_tokens": 1_000,
        "output_tokens": 100,
        "server_tool_use": {"web_search_requests": 3},
    }
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Sunny."}],
        "stop_reason": "end_turn",
        "usage": usage,
    }
    relay = AnthropicRelay("sonnet", ProviderRaw(provider="anthropic", model=SONNET))
    relay.whole(json.dumps(message).encode())
    assert relay.usage is not None and price(SONNET, relay.usage) == price(SONNET, SEARCHED)


def responses_body(*items: Any) -> bytes:
    body = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-5",
        "output": list(items),
        "usage": {"input_tokens": 10, "output_tokens": 2},
    }
    return json.dumps(body).encode()


def test_a_passed_through_response_counts_its_search_calls() -> None:
    search = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    files = {"type": "file_search_call", "id": "fs_1", "status": "completed"}
    relay = ResponsesRelay("gpt", None)
    relay.whole(responses_body(search, dict(search, id="ws_2"), files, "not an item"))
    assert relay.usage is not None
    assert relay.usage.server_tools == ServerToolRequests(web_search=2, file_search=1)
    plain = ResponsesRelay("gpt", None)
    plain.whole(responses_body())
    assert plain.usage is not None and not plain.usage.server_tools


def test_a_passed_through_recorded_response_stream_counts_its_searches() -> None:
    body = recorded_body(RESPONSES_SEARCH)
    relay = ResponsesRelay("gpt-5", None)
    relay.feed(body)
    relay.end()
    assert relay.output is not None
    calls = [i for i in relay.output if i.get("type") == "web_search_call"]
    assert calls
    assert relay.usage is not None
    assert relay.usage.server_tools == ServerToolRequests(web_search=len(calls))


def test_a_translated_messages_answer_reports_the_searches_and_fetches() -> None:
    usage = SEARCHED.model_copy(
        update={"server_tools": ServerToolRequests(web_search=3, web_fetch=1, file_search=2)}
    )
    for whole in (True, False):
        out = written(usage, whole)
        assert out["server_tool_use"] == {"web_search_requests": 3, "web_fetch_requests": 1}
    whole_usage = written(usage, True)
    assert list(whole_usage)[-2:] == ["server_tool_use", "service_tier"]
    assert "server_tool_use" not in written(TokenUsage(input_tokens=3), True)
    only_files = TokenUsage(server_tools=ServerToolRequests(file_search=1))
    assert "server_tool_use" not in written(only_files)
