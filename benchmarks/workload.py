"""The benchmark's workloads: the bodies the loopback server sends and the requests clients make.

Everything here is deterministic, so every client sees byte-identical replies. Stream bodies
follow the providers' real wire format (compact JSON, one SSE event per HTTP chunk, Anthropic's
``ping`` and empty first tool fragment, OpenAI's ``[DONE]`` and optional usage chunk).

A *scenario* names a workload in the URL path (``/s/<scenario>/v1/...``), so every client,
whatever base URL it insists on, reaches the same body: ``t<text deltas>-f<tool fragments>``,
and ``-r<bytes>`` for the large-read regime: the body then goes out in HTTP chunks of that size
(cut anywhere, mid-event and mid-character), as a proxy or a fast local server delivers it,
instead of one event per chunk as the providers send while generating.
"""

from __future__ import annotations

import base64
import json
import random
import re
from dataclasses import dataclass
from typing import Any

ANTHROPIC_MODEL = "claude-sonnet-4-5"
OPENAI_MODEL = "gpt-4o"
TOOL_NAME = "get_weather"
ANTHROPIC_TOOL_ID = "toolu_01BenchToolCall0000000000"
OPENAI_TOOL_ID = "call_BenchToolCall0000000000"

_WORDS = (
    " the weather",
    " in",
    " Paris",
    " is",
    " mild",
    ",",
    " with",
    " a",
    " light",
    " breeze",
    " from",
    " the",
    " west",
    ".",
    " Température",
    " ~18°C",
    "\n",
    ' "quoted"',
    " and",
    " sunny",
)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class Scenario:
    text_deltas: int
    tool_fragments: int
    read_size: int = 0
    """0: one event per HTTP chunk; else the body in chunks of this many bytes."""

    @property
    def name(self) -> str:
        reads = f"-r{self.read_size}" if self.read_size else ""
        return f"t{self.text_deltas}-f{self.tool_fragments}{reads}"

    @classmethod
    def parse(cls, name: str) -> Scenario:
        match = re.fullmatch(r"t(\d+)-f(\d+)(?:-r(\d+))?", name)
        if not match:
            raise ValueError(f"not a scenario: {name!r}")
        return cls(int(match[1]), int(match[2]), int(match[3] or 0))

    def words(self) -> list[str]:
        return [_WORDS[i % len(_WORDS)] for i in range(self.text_deltas)]

    def tool_input(self) -> dict[str, Any]:
        """A tool input whose compact JSON is about 12 bytes per fragment."""
        size = max(1, self.tool_fragments) * 12
        days = []
        while len(_compact(days)) < size - 60:
            n = len(days)
            days.append({"d": n, "t": 10 + n % 15})
        return {"city": "Paris", "unit": "celsius", "days": days}

    def tool_fragments_json(self) -> list[str]:
        """The tool input's JSON cut into ``tool_fragments`` pieces (mid-token, as providers
        do). Anthropic's stream sends an empty fragment first; that one is extra."""
        text = _compact(self.tool_input())
        n = max(1, self.tool_fragments)
        bounds = [round(i * len(text) / n) for i in range(n + 1)]
        return [text[bounds[i] : bounds[i + 1]] for i in range(n)]


# Stream bodies -----------------------------------------------------------------------------


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {_compact(data)}\n\n".encode()


def anthropic_stream_events(scenario: Scenario) -> list[bytes]:
    """One SSE event per element: what the Messages API sends, event by event."""
    events = [
        _sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_01BenchStream",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5-20250929",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": 412,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                        "output_tokens": 1,
                    },
                },
            },
        ),
        _sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        _sse("ping", {"type": "ping"}),
    ]
    for word in scenario.words():
        events.append(
            _sse(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": word},
                },
            )
        )
    events.append(_sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
    events.append(
        _sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {
                    "type": "tool_use",
                    "id": ANTHROPIC_TOOL_ID,
                    "name": TOOL_NAME,
                    "input": {},
                },
            },
        )
    )
    for fragment in ["", *scenario.tool_fragments_json()]:
        events.append(
            _sse(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 1,
                    "delta": {"type": "input_json_delta", "partial_json": fragment},
                },
            )
        )
    events.append(_sse("content_block_stop", {"type": "content_block_stop", "index": 1}))
    events.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": scenario.text_deltas + scenario.tool_fragments},
            },
        )
    )
    events.append(_sse("message_stop", {"type": "message_stop"}))
    return events


def openai_stream_events(scenario: Scenario, include_usage: bool) -> list[bytes]:
    """One SSE event per element: what Chat Completions sends, chunk by chunk."""
    base = {
        "id": "chatcmpl-BenchStream",
        "object": "chat.completion.chunk",
        "created": 1760000000,
        "model": "gpt-4o-2024-08-06",
        "service_tier": "default",
        "system_fingerprint": "fp_bench",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body: dict[str, Any] = {
            **base,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            body["usage"] = None
        return b"data: " + _compact(body).encode() + b"\n\n"

    events = [chunk({"role": "assistant", "content": "", "refusal": None})]
    events.extend(chunk({"content": word}) for word in scenario.words())
    events.append(
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": OPENAI_TOOL_ID,
                        "type": "function",
                        "function": {"name": TOOL_NAME, "arguments": ""},
                    }
                ]
            }
        )
    )
    events.extend(
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]})
        for fragment in scenario.tool_fragments_json()
    )
    events.append(chunk({}, "tool_calls"))
    if include_usage:
        usage = {
            **base,
            "choices": [],
            "usage": {
                "prompt_tokens": 412,
                "completion_tokens": scenario.text_deltas + scenario.tool_fragments,
                "total_tokens": 412 + scenario.text_deltas + scenario.tool_fragments,
                "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
            },
        }
        events.append(b"data: " + _compact(usage).encode() + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    return events


# Whole (non-streamed) bodies ---------------------------------------------------------------


def anthropic_json_body(scenario: Scenario) -> bytes:
    return _compact(
        {
            "id": "msg_01BenchJson",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [
                {"type": "text", "text": "".join(scenario.words())},
                {
                    "type": "tool_use",
                    "id": ANTHROPIC_TOOL_ID,
                    "name": TOOL_NAME,
                    "input": scenario.tool_input(),
                },
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {
                "input_tokens": 2048,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 1024,
                "output_tokens": 87,
            },
        }
    ).encode()


def openai_json_body(scenario: Scenario) -> bytes:
    return _compact(
        {
            "id": "chatcmpl-BenchJson",
            "object": "chat.completion",
            "created": 1760000000,
            "model": "gpt-4o-2024-08-06",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "logprobs": None,
                    "message": {
                        "role": "assistant",
                        "content": "".join(scenario.words()),
                        "refusal": None,
                        "annotations": [],
                        "tool_calls": [
                            {
                                "id": OPENAI_TOOL_ID,
                                "type": "function",
                                "function": {
                                    "name": TOOL_NAME,
                                    "arguments": _compact(scenario.tool_input()),
                                },
                            }
                        ],
                    },
                }
            ],
            "usage": {
                "prompt_tokens": 2048,
                "completion_tokens": 87,
                "total_tokens": 2135,
                "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
            },
            "system_fingerprint": "fp_bench",
        }
    ).encode()


# Requests ------------------------------------------------------------------------------------

TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"d": {"type": "integer"}, "t": {"type": "integer"}},
                "required": ["d", "t"],
            },
        },
    },
    "required": ["city"],
}
# The same in OpenAI's strict mode (what metis's strict_schema stage sends, and what the
# openai SDK's stream helper needs to parse tool arguments itself).
STRICT_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": ["string", "null"], "enum": ["celsius", "fahrenheit", None]},
        "days": {
            "type": ["array", "null"],
            "items": {
                "type": "object",
                "properties": {"d": {"type": "integer"}, "t": {"type": "integer"}},
                "required": ["d", "t"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["city", "unit", "days"],
    "additionalProperties": False,
}
SYSTEM = "You are a weather assistant. Answer briefly and call tools when useful."
QUESTION = "What's the weather in Paris this week, in Celsius?"


def image_b64(size: int = 12_000, seed: int = 7) -> str:
    """``size`` pseudo-random bytes behind a PNG signature, base64: the shape of an image
    payload (servers here never decode it)."""
    rng = random.Random(seed)
    raw = b"\x89PNG\r\n\x1a\n" + bytes(rng.getrandbits(8) for _ in range(size - 8))
    return base64.b64encode(raw).decode()


@dataclass(frozen=True)
class Turn:
    """One message of a provider-neutral history; the clients turn it into their formats."""

    role: str  # user | assistant | tool
    text: str = ""
    image: bool = False
    tool_call: int | None = None  # assistant: calls tool #n; tool: answers tool #n


def history(n_messages: int, images: int = 0) -> list[Turn]:
    """``n_messages`` turns ending with a user question: rounds of user text, an assistant
    tool call, its result and the assistant's answer. ``images`` user turns carry a PNG."""
    turns: list[Turn] = []
    call = 0
    while len(turns) < n_messages - 1:
        i = len(turns)
        pattern = i % 4
        if pattern == 0:
            turns.append(Turn("user", f"Question {i}: how is the weather in city {i}?"))
        elif pattern == 1:
            call += 1
            turns.append(Turn("assistant", f"Let me look up city {i}.", tool_call=call))
        elif pattern == 2:
            turns.append(
                Turn("tool", f'{{"city": "city {i}", "temp_c": {i % 30}}}', tool_call=call)
            )
        else:
            turns.append(Turn("assistant", f"It is {i % 30} degrees in city {i - 3}, and dry."))
    if turns and turns[-1].role == "assistant" and turns[-1].tool_call is not None:
        turns[-1] = Turn("assistant", turns[-1].text)
    turns.append(Turn("user", QUESTION))
    users = [i for i, t in enumerate(turns) if t.role == "user"]
    for k in range(min(images, len(users))):
        i = users[round(k * (len(users) - 1) / max(1, images - 1))] if images > 1 else users[0]
        turns[i] = Turn("user", turns[i].text, image=True)
    return turns


def tool_id(n: int, provider: str) -> str:
    """The provider id of tool call #n in a history (what the provider issued for it)."""
    return f"{'toolu_' if provider == 'anthropic' else 'call_'}Hist{n:08d}"


def anthropic_messages(turns: list[Turn], image: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for turn in turns:
        if turn.role == "user":
            content: list[dict[str, Any]] = [{"type": "text", "text": turn.text}]
            if turn.image:
                content.append(
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": image},
                    }
                )
            role = "user"
        elif turn.role == "assistant":
            content = [{"type": "text", "text": turn.text}]
            if turn.tool_call is not None:
                content.append(
                    {
                        "type": "tool_use",
                        "id": tool_id(turn.tool_call, "anthropic"),
                        "name": TOOL_NAME,
                        "input": {"city": "Paris"},
                    }
                )
            role = "assistant"
        else:
            content = [
                {
                    "type": "tool_result",
                    "tool_use_id": tool_id(turn.tool_call or 0, "anthropic"),
                    "content": turn.text,
                }
            ]
            role = "user"
        if out and out[-1]["role"] == role:  # tool result then user text: one user turn
            out[-1]["content"].extend(content)
        else:
            out.append({"role": role, "content": content})
    return out


def openai_messages(turns: list[Turn], image: str, system: str | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for turn in turns:
        if turn.role == "user":
            if turn.image:
                out.append(
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": turn.text},
                            {
                                "type": "image_url",
                                "image_url": {"url": f"data:image/png;base64,{image}"},
                            },
                        ],
                    }
                )
            else:
                out.append({"role": "user", "content": turn.text})
        elif turn.role == "assistant":
            message: dict[str, Any] = {"role": "assistant", "content": turn.text}
            if turn.tool_call is not None:
                message["tool_calls"] = [
                    {
                        "id": tool_id(turn.tool_call, "openai"),
                        "type": "function",
                        "function": {"name": TOOL_NAME, "arguments": '{"city":"Paris"}'},
                    }
                ]
            out.append(message)
        else:
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": tool_id(turn.tool_call or 0, "openai"),
                    "content": turn.text,
                }
            )
    return out


def anthropic_tools() -> list[dict[str, Any]]:
    return [{"name": TOOL_NAME, "description": "Current weather", "input_schema": TOOL_SCHEMA}]


def openai_tools(strict: bool = False) -> list[dict[str, Any]]:
    function: dict[str, Any] = {
        "name": TOOL_NAME,
        "description": "Current weather",
        "parameters": STRICT_TOOL_SCHEMA if strict else TOOL_SCHEMA,
    }
    if strict:
        function["strict"] = True
    return [{"type": "function", "function": function}]
