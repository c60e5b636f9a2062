"""The emulator's prompt cache for conversations: Anthropic's breakpoints with its 20-block
lookback and its limit of four, Bedrock's ``cachePoint`` blocks, and markers that are not
part of the cached prefix (docs/emulator.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from metis.testing.emulator import Emulator
from metis.testing.emulator.cache import PromptCache

HEADERS = {"x-api-key": "test", "anthropic-version": "2023-06-01"}
MARK = {"type": "ephemeral"}
LONG = "The weather report for the coast, hour by hour. " * 150


@pytest.fixture
def http(emulator: Emulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=emulator.url, timeout=10) as client:
        yield client


def conversation(turns: int, marked: tuple[int, ...] = (-1,)) -> list[dict[str, Any]]:
    """User and assistant turns, a long first one; ``marked``: messages with a breakpoint."""
    messages: list[dict[str, Any]] = []
    for i in range(turns * 2 - 1):
        role = "user" if i % 2 == 0 else "assistant"
        text = LONG if i == 0 else f"turn {i}"
        messages.append({"role": role, "content": [{"type": "text", "text": text}]})
    for i in marked:
        messages[i]["content"][-1]["cache_control"] = MARK
    return messages


def ask(http: httpx.Client, messages: list[dict[str, Any]]) -> httpx.Response:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": messages}
    return http.post("/v1/messages", json=body, headers=HEADERS)


def test_the_next_turn_reads_the_last_turn_through_the_lookback(http: httpx.Client) -> None:
    """Turn 1 marks its last message, turn 2 its own: the marker is not part of the cached
    prefix, so turn 2 finds turn 1's entry behind its breakpoint."""
    first = ask(http, conversation(1)).json()["usage"]
    second = ask(http, conversation(2)).json()["usage"]
    assert first["cache_creation_input_tokens"] > 1024 and first["cache_read_input_tokens"] == 0
    # the breakpoint moved to the new last message: the earlier entry is found behind it
    assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert 0 < second["cache_creation_input_tokens"] < 100


def test_an_entry_more_than_twenty_blocks_back_is_not_found(http: httpx.Client) -> None:
    ask(http, conversation(1))
    later = ask(http, conversation(12)).json()["usage"]  # 22 messages later
    assert later["cache_read_input_tokens"] == 0 and later["cache_creation_input_tokens"] > 1024


def test_a_fifth_cache_control_is_refused_as_anthropic_does(http: httpx.Client) -> None:
    refused = ask(http, conversation(3, marked=(0, 1, 2, 3, 4)))
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == (
        "A maximum of 4 blocks with cache_control may be provided. Found 5."
    )
    assert ask(http, conversation(3, marked=(0, 1, 2, 4))).status_code == 200


def converse(http: httpx.Client, turns: int, point: bool = True) -> dict[str, Any]:
    messages = []
    for i in range(turns * 2 - 1):
        content: list[dict[str, Any]] = [{"text": LONG if i == 0 else f"turn {i}"}]
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": content})
    if point:
        messages[-1]["content"].append({"cachePoint": {"type": "default"}})
    model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    answer = http.post(
        f"/model/{model}/converse",
        json={"messages": messages},
        headers={"authorization": "Bearer test"},
    )
    assert answer.status_code == 200, answer.text
    usage: dict[str, Any] = answer.json()["usage"]
    return usage


def test_bedrock_reads_and_writes_at_cache_points(http: httpx.Client) -> None:
    first = converse(http, 1)
    second = converse(http, 2)
    assert first["cacheWriteInputTokens"] > 1024 and first["cacheReadInputTokens"] == 0
    assert second["cacheReadInputTokens"] == first["cacheWriteInputTokens"]
    unmarked = converse(http, 3, point=False)
    assert unmarked["cacheReadInputTokens"] == unmarked["cacheWriteInputTokens"] == 0


def test_a_breakpoint_counts_the_lookback_in_blocks() -> None:
    """An entry two segments back is found within 20 blocks, not when they hold 21."""
    segments = ["system " * 50, "a " * 50, "b " * 50, "c " * 50]
    near, far = PromptCache(min_tokens=1), PromptCache(min_tokens=1)
    for cache in (near, far):
        assert cache.explicit("p", segments[:2], [1])[0] == 0
    read, _ = near.explicit("p", segments, [3], blocks=[1, 1, 1, 1])
    assert read > 0
    read, _ = far.explicit("p", segments, [3], blocks=[1, 1, 20, 1])
    assert read == 0


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses"])
def test_openai_refuses_a_prompt_cache_key_over_64_characters(
    http: httpx.Client, path: str
) -> None:
    body: dict[str, Any] = {"model": "gpt-4.1", "prompt_cache_key": "k" * 65}
    if path.endswith("completions"):
        body["messages"] = [{"role": "user", "content": "hi"}]
    else:
        body["input"] = "hi"
    headers = {"authorization": "Bearer test"}
    refused = http.post(path, json=body, headers=headers)
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["param"] == "prompt_cache_key" and error["code"] == "string_above_max_length"
    body["prompt_cache_key"] = "k" * 64
    assert http.post(path, json=body, headers=headers).status_code == 200
