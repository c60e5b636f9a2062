"""Providers bill the requests their own tools make (web searches, web fetches, file searches)
apart from the tokens: the canonical usage counts them as ``TokenUsage.server_tools``, read
from Anthropic's ``usage.server_tool_use``, from OpenAI Responses' ``web_search_call`` and
``file_search_call`` items, from Gemini's grounding ``webSearchQueries``, and from real
recordings of each. Sans-IO but for the recordings."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from metis.errors import ProtocolError
from metis.model.events import MessageComplete
from metis.model.response import ServerToolRequests, TokenUsage
from metis.wire.anthropic import codec as anthropic
from metis.wire.builder import MessageBuilder
from metis.wire.framing.sse import SSEDecoder
from metis.wire.openai_responses import OpenAIResponsesCodec
from tests.helpers import stack_codec
from tests.recordings import ROOT

ANTHROPIC_FETCH = (
    ROOT / "anthropic" / "pydantic-ai__test_anthropic__test_anthropic_web_fetch_tool_stream.yaml"
)
GEMINI_SEARCH = (
    ROOT / "gemini" / "pydantic-ai__test_google__test_google_model_web_search_tool_stream.yaml"
)
RESPONSES_SEARCH = (
    ROOT
    / "openai_responses"
    / "pydantic-ai__test_openai_responses__test_openai_responses_model_web_search_tool_stream.yaml"
)


def recorded_objects(path: Any) -> list[dict[str, Any]]:
    if not path.exists():
        pytest.skip(f"no recording {path}")
    cassette = yaml.safe_load(path.read_text())
    decoder = SSEDecoder()
    events = decoder.feed(cassette["interactions"][0]["response"]["body"]["string"].encode())
    return [json.loads(e.data) for e in events + decoder.close() if e.data.strip()]


def completed(events: Any) -> TokenUsage:
    done = list(events)[-1]
    assert isinstance(done, MessageComplete)
    return done.usage


def anthropic_stream(objects: list[dict[str, Any]]) -> TokenUsage:
    parser = anthropic.stream_parser(MessageBuilder("anthropic", "anthropic:claude-sonnet-4-5"))
    return completed([e for obj in objects for e in parser.feed(obj)] + list(parser.end()))


def anthropic_body(usage: dict[str, Any]) -> TokenUsage:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Sunny."}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 2, **usage},
    }
    builder = MessageBuilder("anthropic", "anthropic:claude-sonnet-4-5")
    return completed(anthropic.parse_body(body, builder))


def responses_body(*items: dict[str, Any]) -> TokenUsage:
    message = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}],
    }
    body = {
        "id": "resp_1",
        "status": "completed",
        "model": "gpt-5",
        "output": [*items, message],
        "usage": {"input_tokens": 10, "output_tokens": 2},
    }
    builder = MessageBuilder("openai_responses", "openai_responses:gpt-5")
    return completed(OpenAIResponsesCodec().parse_body(body, builder))


def search(n: int) -> dict[str, Any]:
    action = {"type": "search", "query": "weather"}
    return {"type": "web_search_call", "id": f"ws_{n}", "status": "completed", "action": action}


def test_the_counts_add_up_and_dump_only_when_any() -> None:
    plain = TokenUsage(input_tokens=5)
    assert "server_tools" not in plain.model_dump()
    searched = TokenUsage(server_tools=ServerToolRequests(web_search=2, web_fetch=1))
    total = plain.plus(searched).plus(searched)
    assert total.server_tools == ServerToolRequests(web_search=4, web_fetch=2)
    assert total.model_dump()["server_tools"] == {"web_search": 4, "web_fetch": 2, "file_search": 0}
    assert TokenUsage.model_validate(total.model_dump()) == total


def test_anthropic_server_tool_use_is_read_from_a_whole_reply() -> None:
    usage = anthropic_body({"server_tool_use": {"web_search_requests": 3, "web_fetch_requests": 1}})
    assert usage.server_tools == ServerToolRequests(web_search=3, web_fetch=1)
    assert not anthropic_body({}).server_tools
    assert not anthropic_body({"server_tool_use": {"web_search_requests": 0}}).server_tools


def test_a_negative_anthropic_request_count_makes_the_usage_estimated() -> None:
    usage = anthropic_body({"server_tool_use": {"web_search_requests": -1}})
    assert usage.estimated and usage.input_tokens == 0 and not usage.server_tools


@pytest.mark.parametrize("bad", ["2", 1.5, [1]])
def test_a_malformed_anthropic_count_is_a_protocol_error(bad: Any) -> None:
    with pytest.raises(ProtocolError, match="web_search_requests"):
        anthropic_body({"server_tool_use": {"web_search_requests": bad}})
    with pytest.raises(ProtocolError, match="server_tool_use"):
        anthropic_body({"server_tool_use": [bad]})


def test_the_recorded_anthropic_web_fetch_is_counted() -> None:
    usage = anthropic_stream(recorded_objects(ANTHROPIC_FETCH))
    assert usage.server_tools == ServerToolRequests(web_fetch=1)
    assert (usage.input_tokens, usage.output_tokens) == (7244, 153)


def test_responses_count_each_web_and_file_search_call() -> None:
    files = {"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["q"]}
    usage = responses_body(search(1), search(2), files)
    assert usage.server_tools == ServerToolRequests(web_search=2, file_search=1)
    assert "server_tools" not in responses_body().model_dump()


def test_the_recorded_responses_web_searches_are_counted() -> None:
    objects = recorded_objects(RESPONSES_SEARCH)
    calls = {
        o["item"]["id"]
        for o in objects
        if o.get("type") == "response.output_item.done" and o["item"]["type"] == "web_search_call"
    }
    builder = MessageBuilder("openai_responses", "openai_responses:gpt-5")
    parser = OpenAIResponsesCodec().stream_parser(builder)
    usage = completed([e for obj in objects for e in parser.feed(obj)] + list(parser.end()))
    assert len(calls) >= 1 and usage.server_tools == ServerToolRequests(web_search=len(calls))


def gemini_stream(*chunks: dict[str, Any], model: str = "gemini-3-pro") -> TokenUsage:
    parser = stack_codec("gemini").stream_parser(MessageBuilder("gemini", model))
    return completed([e for chunk in chunks for e in parser.feed(chunk)] + list(parser.end()))


def gemini_chunk(text: str, **candidate: Any) -> dict[str, Any]:
    content = {"role": "model", "parts": [{"text": text}]}
    usage = {"promptTokenCount": 10, "candidatesTokenCount": 2}
    return {"candidates": [{"content": content, **candidate}], "usageMetadata": usage}


def test_gemini_counts_each_grounding_search_query() -> None:
    grounding = {"webSearchQueries": ["weather today", "weather tomorrow"], "groundingChunks": []}
    usage = gemini_stream(
        gemini_chunk("Sun", groundingMetadata={}),
        gemini_chunk("ny.", finishReason="STOP", groundingMetadata=grounding),
    )
    assert usage.server_tools == ServerToolRequests(web_search=2)
    assert not gemini_stream(gemini_chunk("Sunny.", finishReason="STOP")).server_tools


@pytest.mark.parametrize(
    ("model", "billed"),
    [
        ("gemini-2.5-flash", 1),
        ("gemini-2.0-flash", 1),
        ("publishers/google/models/gemini-2.5-pro", 1),
        ("gemini-3-flash-preview", 3),
        ("gemini-3.1-pro-preview", 3),
    ],
)
def test_gemini_searches_count_as_google_bills_them(model: str, billed: int) -> None:
    """Per query from Gemini 3, per grounded prompt before: three queries of a 2.5 reply are
    one search billed ($35 a thousand prompts), not three."""
    grounding = {"webSearchQueries": ["a", "b", "c"], "groundingChunks": []}
    chunk = gemini_chunk("Sunny.", finishReason="STOP", groundingMetadata=grounding)
    assert gemini_stream(chunk, model=model).server_tools == ServerToolRequests(web_search=billed)


def test_the_recorded_gemini_search_is_counted() -> None:
    usage = gemini_stream(*recorded_objects(GEMINI_SEARCH))
    assert usage.server_tools == ServerToolRequests(web_search=1)  # "weather in San Francisco"


def test_openrouters_chat_web_searches_are_counted() -> None:
    """OpenRouter's Chat Completions usage counts its web search's requests in
    ``server_tool_use_details`` (crmne/ruby_llm's recorded openai/gpt-5.2 search: 3)."""
    codec = stack_codec("openrouter")
    usage = {
        "prompt_tokens": 900,
        "completion_tokens": 40,
        "total_tokens": 940,
        "server_tool_use_details": {"web_search_requests": 3},
    }
    body = {
        "id": "gen-1",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "4.0.6"},
             "finish_reason": "stop"}
        ],
        "usage": usage,
    }  # fmt: skip
    builder = MessageBuilder("openrouter", "openrouter:openai/gpt-5.2")
    done = completed(codec.parse_body(body, builder))
    assert done.server_tools == ServerToolRequests(web_search=3)
    assert (done.input_tokens, done.output_tokens) == (900, 40)
