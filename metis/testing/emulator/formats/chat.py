"""OpenAI Chat Completions: ``POST /v1/chat/completions``, also at the paths where the
OpenAI-compatible services serve it (DeepSeek ``/chat/completions``, Groq ``/openai/v1``,
OpenRouter ``/api/v1``, Fireworks ``/inference/v1``, DeepInfra ``/v1/openai``, Z.ai
``/api/paas/v4``, DashScope ``/compatible-mode/v1``), with ``GET .../models`` beside each.

The 400 rules are ``tables/chat.yaml`` and the checks of :mod:`.chat_rules`. Streams are
``data:``-only SSE ending in ``data: [DONE]``: the tool call ``id`` and ``name`` only on the
first fragment of each index, the finish_reason chunk, then (only with
``stream_options.include_usage``) a usage chunk with ``choices: []``; chunks carry
``obfuscation`` padding unless ``stream_options.include_obfuscation`` is false. DeepSeek's
``deepseek-reasoner`` and xAI's grok-3-mini stream their thinking as ``reasoning_content``;
xAI's usage leaves reasoning tokens out of ``completion_tokens``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

from metis.gateway.chat_api import read_chat
from metis.testing.emulator.formats.base import Call, Route
from metis.testing.emulator.formats.canonical_turns import prompt_of, read_by
from metis.testing.emulator.formats.chat_rules import DEEPSEEK_THINKING, RULES
from metis.testing.emulator.formats.openai import (
    REASONING_MODEL,
    SERVER_ERROR,
    STREAM_ERRORS,
    OpenAI,
)
from metis.testing.emulator.formats.server_openai import (
    chat_annotations,
    lists_on_every_chunk,
    source_lists,
)
from metis.testing.emulator.model import Prompt, Reply
from metis.testing.emulator.wire import (
    Frame,
    Ids,
    dumps,
    now_unix,
    object_at,
    split_json,
    split_text,
    sse,
)

GROK_REASONING = re.compile(r"^grok-(3-mini|4)")
"""xAI's reasoning models; grok-3-mini streams its reasoning as ``reasoning_content``."""
GROK_SHOWN_REASONING = re.compile(r"^grok-3-mini")
FINISH = {
    "end_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "stop_sequence": "stop",
}
# Where each service serves the format, and whose models its model list shows (/v1 is
# OpenAI's, and Mistral's, Together's, xAI's... as well).
PREFIXES = {
    "/v1": "openai",
    "": "deepseek",
    "/openai/v1": "groq",
    "/api/v1": "openrouter",
    "/inference/v1": "fireworks-ai",
    "/v1/openai": "deepinfra",
    "/api/paas/v4": "zai",
    "/compatible-mode/v1": "alibaba",
}


class Chat(OpenAI):
    name = "openai"
    routes: ClassVar[Sequence[Route]] = tuple(
        route
        for prefix in PREFIXES
        for route in (
            ("POST", prefix + "/chat/completions", "chat"),
            ("GET", f"(?P<prefix>{prefix})/models", "models"),
            ("GET", f"(?P<prefix>{prefix})/models/(?P<model>.+)", "model"),
        )
    )
    rules = RULES
    catalog: ClassVar[tuple[str, ...]] = ("*",)  # any OpenAI-compatible service's models

    def listed(self, call: Call) -> tuple[str, ...]:
        return (PREFIXES[call.match["prefix"]],)

    def read(self, call: Call) -> Prompt:
        body = call.body
        options = object_at(body, "stream_options")
        switched_off = object_at(body, "thinking").get("type") == "disabled"
        deepseek = bool(DEEPSEEK_THINKING.match(call.model)) and not switched_off
        thinks = deepseek or bool(GROK_SHOWN_REASONING.match(call.model))
        call.options = {
            "reasoning_content": thinks,
            "reasoning_apart": call.model.startswith("grok"),
            "include_usage": options.get("include_usage") is True,
            "obfuscation": options.get("include_obfuscation", True) is not False,
        }
        fmt = object_at(body, "response_format")
        return prompt_of(
            read_by(read_chat, body),
            call.model,
            thinking=bool(REASONING_MODEL.match(call.model) or GROK_REASONING.match(call.model))
            or thinks,
            max_tokens=body.get("max_completion_tokens", body.get("max_tokens")),
            json_mode=fmt.get("type") == "json_object",
            segments=[dumps(body.get("tools") or []).decode()]
            + [dumps(m).decode() for m in body["messages"]],
            provider=self.name,
            items=body["messages"],
        )

    def render(self, call: Call, prompt: Prompt, reply: Reply, ids: Ids) -> dict[str, Any]:
        completion_id = "chatcmpl-" + ids.token(29)
        calls = [(call.call_id(ids, "call_", 24), out) for out in reply.calls]
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.text or None,
            "refusal": None,
            "annotations": chat_annotations(reply, call.model),
        }
        if call.options["reasoning_content"]:
            message["reasoning_content"] = reply.thinking
        if calls:
            message["tool_calls"] = [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": out.name, "arguments": out.arguments},
                }
                for cid, out in calls
            ]
        choice = {
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": FINISH[reply.stop],
        }
        return {
            "id": completion_id,
            "object": "chat.completion",
            "created": now_unix(),
            "model": call.model,
            "choices": [choice],
            "usage": _usage(reply, call.options["reasoning_apart"]),
            "service_tier": "default",
            "system_fingerprint": "fp_" + ids.token(10, "hex"),
            **source_lists(reply, call.model),
        }

    def frames(self, call: Call, rendered: Any, reply: Reply, ids: Ids) -> list[Frame]:
        frames: list[Frame] = []
        base = {
            k: rendered[k] for k in ("id", "created", "model", "service_tier", "system_fingerprint")
        }
        lists = source_lists(reply, call.model)
        every = lists_on_every_chunk(call.model)

        def chunk(
            delta: dict[str, Any] | None, finish: str | None = None, usage: Any = None
        ) -> None:
            choices = (
                []
                if delta is None
                else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
            )
            data = {"object": "chat.completion.chunk", **base, "choices": choices}
            data = {"id": base["id"], **data, **(lists if every or finish else {})}
            if call.options["include_usage"]:
                data["usage"] = usage
            if call.options["obfuscation"]:
                data["obfuscation"] = ids.token(1 + len(frames) % 15)
            frames.append(sse(data))

        message = rendered["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        if call.options["reasoning_content"]:
            chunk({"role": "assistant", "content": None, "reasoning_content": ""})
            for piece in split_text(reply.thinking):
                chunk({"reasoning_content": piece})
        pieces = split_text(reply.text)
        opening: dict[str, Any] = {
            "role": "assistant",
            "content": None if calls and not pieces else "",
            "refusal": None,
        }
        if calls and not pieces:
            opening = {**opening, "tool_calls": [_call_start(0, calls[0])]}
        chunk(opening)
        for piece in pieces:
            chunk({"content": piece})
        if message["annotations"]:
            chunk({"annotations": message["annotations"]})
        for index, tool_call in enumerate(calls):
            if index or pieces:
                chunk({"tool_calls": [_call_start(index, tool_call)]})
            for fragment in split_json(tool_call["function"]["arguments"]):
                chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
        chunk({}, FINISH[reply.stop])
        if call.options["include_usage"]:
            chunk(None, usage=_usage(reply, call.options["reasoning_apart"]))
        frames.append(Frame(b"data: ", b"[DONE]", b"\n\n"))
        return frames

    def stream_error(self, kind: str, call: Call) -> list[Frame]:
        message, kind, code = STREAM_ERRORS.get(kind, (SERVER_ERROR, "server_error", None))
        return [sse({"error": {"message": message, "type": kind, "param": None, "code": code}})]


def _call_start(index: int, tool_call: dict[str, Any]) -> dict[str, Any]:
    function = {"name": tool_call["function"]["name"], "arguments": ""}
    return {"index": index, "id": tool_call["id"], "type": "function", "function": function}


def _usage(reply: Reply, reasoning_apart: bool) -> dict[str, Any]:
    """``reasoning_apart``: xAI's counts, whose ``completion_tokens`` leaves the reasoning out
    (``total_tokens`` adds it back)."""
    usage = reply.usage
    completion = usage.output_tokens - (usage.thinking_tokens if reasoning_apart else 0)
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": completion,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {
            "cached_tokens": usage.cache_read,
            "audio_tokens": 0,
            **({"cache_write_tokens": usage.cache_write} if usage.cache_write else {}),
        },
        "completion_tokens_details": {
            "reasoning_tokens": usage.thinking_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
