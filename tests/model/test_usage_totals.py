"""Usage stays true when a provider's cached and cache-written counts together exceed its prompt
count (docs/contract.md §5): OpenRouter does this for Gemini models. The total input is the
provider's prompt total, never the inflated sum; counts that fit are read as before."""

from __future__ import annotations

from typing import Any

import pytest

from metis.model.events import MessageComplete
from metis.model.response import TokenUsage
from metis.stacks.loader import load_stack
from metis.wire.builder import MessageBuilder
from metis.wire.codec import get_codec
from metis.wire.read import split_input

# An OpenRouter reply for google/gemini-2.5-flash (Chat Completions shape): the cache write is
# counted over the whole prompt while part of it was also read from the cache.
OPENROUTER_GEMINI = {
    "id": "gen-1764140000-abc",
    "provider": "Google",
    "model": "google/gemini-2.5-flash",
    "object": "chat.completion",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "native_finish_reason": "STOP",
            "message": {"role": "assistant", "content": "Paris."},
        }
    ],
    "usage": {
        "prompt_tokens": 5210,
        "completion_tokens": 3,
        "total_tokens": 5213,
        "prompt_tokens_details": {"cached_tokens": 4096, "cache_write_tokens": 5210},
        "completion_tokens_details": {"reasoning_tokens": 0},
    },
}


def _usage(stack: str, body: dict[str, Any], stream: bool) -> TokenUsage:
    config = load_stack(stack)
    codec = get_codec(config.codec, config.codec_settings)
    builder = MessageBuilder(stack, f"{stack}:m")
    if stream:
        parser = codec.stream_parser(builder)
        events = [event for chunk in _as_chunks(stack, body) for event in parser.feed(chunk)]
        events += parser.end()
    else:
        events = list(codec.parse_body(body, builder))
    final = events[-1]
    assert isinstance(final, MessageComplete)
    return final.usage


def _as_chunks(stack: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    if stack == "openai_responses":
        return [
            {"type": "response.created", "response": {**body, "status": "in_progress"}},
            {"type": "response.completed", "response": body},
        ]
    choice = body["choices"][0]
    delta = {"index": 0, "delta": choice["message"], "finish_reason": choice["finish_reason"]}
    return [
        {"id": body["id"], "model": body["model"], "choices": [delta]},
        {"id": body["id"], "model": body["model"], "choices": [], "usage": body["usage"]},
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_cached_and_written_over_the_prompt_keep_the_prompt_total(stream: bool) -> None:
    usage = _usage("openrouter", OPENROUTER_GEMINI, stream)
    assert usage.total_input_tokens == 5210  # the provider's prompt total, not 4096 + 5210
    assert (usage.input_tokens, usage.cached_input_tokens) == (0, 4096)
    assert usage.cache_creation_input_tokens == 5210 - 4096


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_same_on_responses(stream: bool) -> None:
    body = {
        "id": "resp_1",
        "model": "gpt-5",
        "status": "completed",
        "output": [],
        "usage": {
            "input_tokens": 300,
            "input_tokens_details": {"cached_tokens": 250, "cache_write_tokens": 300},
            "output_tokens": 1,
        },
    }
    usage = _usage("openai_responses", body, stream)
    assert usage.total_input_tokens == 300
    assert (usage.input_tokens, usage.cached_input_tokens, usage.cache_creation_input_tokens) == (
        0,
        250,
        50,
    )


def test_counts_that_fit_are_read_as_they_were() -> None:
    body = {**OPENROUTER_GEMINI, "usage": {**OPENROUTER_GEMINI["usage"]}}
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": 2000, "cache_write_tokens": 400}
    usage = _usage("openrouter", body, False)
    assert (usage.input_tokens, usage.cached_input_tokens) == (2810, 2000)
    assert usage.cache_creation_input_tokens == 400


def test_split_input_always_adds_up_to_the_total() -> None:
    assert split_input(10, 3, 4) == (3, 3, 4)
    assert split_input(10, 12, 0) == (0, 10, 0)
    assert split_input(10, 6, 9) == (0, 6, 4)
    assert split_input(0, 5, 5) == (0, 0, 0)
