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

import json
import re
from collections.abc import Sequence
from typing import Any, ClassVar

from metis.gateway.chat_api import read_chat
from metis.gateway.chat_write import ChunkStream, write_completion
from metis.model.content import ContentBlock, TextBlock, ThinkingBlock, ToolUseBlock
from metis.testing.emulator.formats.base import Call, Route
from metis.testing.emulator.formats.canonical_events import events_of, response_of
from metis.testing.emulator.formats.canonical_turns import prompt_of, read_by
from metis.testing.emulator.formats.chat_rules import DEEPSEEK_THINKING, RULES
from metis.testing.emulator.formats.chat_services import (
    MISTRAL_ID_LENGTH,
    always_usage,
    is_mistral,
    mistral_ids,
    usage_on_finish_chunk,
)
from metis.testing.emulator.formats.openai import (
    REASONING_MODEL,
    SERVER_ERROR,
    STREAM_ERRORS,
    OpenAI,
)
from metis.testing.emulator.formats.server_openai import (
    chat_citations,
    lists_on_every_chunk,
    source_lists,
)
from metis.testing.emulator.model import Prompt, Reply
from metis.testing.emulator.wire import (
    Frame,
    Ids,
    dumps,
    object_at,
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
            "include_usage": options.get("include_usage") is True or always_usage(body, call),
            "mistral": is_mistral(body, call),
            "mistral_ids": mistral_ids(body, call),
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
        content: list[ContentBlock] = []
        if call.options["reasoning_content"]:
            content.append(ThinkingBlock(thinking=reply.thinking))
        if reply.text:
            cited = chat_citations(reply, call.model) or None
            content.append(TextBlock(text=reply.text, citations=cited))
        for out in reply.calls:
            tool_id = (
                call.call_id(ids, "", MISTRAL_ID_LENGTH)
                if call.options["mistral_ids"]
                else call.call_id(ids, "call_", 24)
            )
            content.append(ToolUseBlock(id=tool_id, name=out.name, input=out.args))
        response = response_of(reply, content, call.model)
        call.options["response"] = response
        written = write_completion(response, call.model, completion_id=completion_id)
        _apart(written["usage"], call, reply.usage.thinking_tokens)
        more = {"service_tier": "default", "system_fingerprint": "fp_" + ids.token(10, "hex")}
        return {**written, **more, **source_lists(reply, call.model)}

    def frames(self, call: Call, rendered: Any, reply: Reply, ids: Ids) -> list[Frame]:
        more = {k: rendered[k] for k in ("service_tier", "system_fingerprint")}
        include = call.options["include_usage"]
        writer = ChunkStream(call.model, include, completion_id=rendered["id"], more=more)
        writer.base["created"] = rendered["created"]
        written = b"".join(writer.feed(e) for e in events_of(call.options["response"]))
        lists = source_lists(reply, call.model)
        every = lists_on_every_chunk(call.model)
        frames: list[Frame] = []
        payloads = [chunk.removeprefix(b"data: ") for chunk in written.split(b"\n\n")[:-1]]
        if call.options["mistral"]:
            payloads = usage_on_finish_chunk(payloads)
        for payload in payloads:
            if payload == b"[DONE]":
                frames.append(Frame(b"data: ", payload, b"\n\n"))
                continue
            data = json.loads(payload)
            choices = data["choices"]
            used = {"usage": data.pop("usage")} if "usage" in data else {}
            if used.get("usage"):
                _apart(used["usage"], call, reply.usage.thinking_tokens)
            finished = bool(choices) and choices[0]["finish_reason"] is not None
            data = {**data, **(lists if every or finished else {}), **used}
            if call.options["obfuscation"]:
                data["obfuscation"] = ids.token(1 + len(frames) % 15)
            frames.append(sse(self.chunk(data)))
        return frames

    def chunk(self, data: dict[str, Any]) -> dict[str, Any]:
        """A streamed chunk as this service sends it."""
        return data

    def stream_error(self, kind: str, call: Call) -> list[Frame]:
        message, kind, code = STREAM_ERRORS.get(kind, (SERVER_ERROR, "server_error", None))
        return [sse({"error": {"message": message, "type": kind, "param": None, "code": code}})]


def _apart(usage: dict[str, Any], call: Call, thinking: int) -> None:
    """xAI's counts, whose ``completion_tokens`` leaves the reasoning out (``total_tokens``
    adds it back)."""
    if call.options["reasoning_apart"]:
        usage["completion_tokens"] -= thinking
