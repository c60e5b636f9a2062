"""A scripted provider for tests: checks each wire request by the provider's rules, answers
with the next scripted reply in that provider's own format, streamed or not.

The rules are the ones the real APIs enforce with a 400 (role alternation, every tool call
answered immediately, ids in the accepted alphabet); a request that breaks one gets a 400
whose message names the rule, so a conformance test fails saying why.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from metis.wire.rules import anthropic_problems, openai_chat_problems

Reply = dict[str, Any]  # {"text": str} | {"tools": [(name, input), ...]} | both


def text(value: str) -> Reply:
    return {"text": value}


def tools(*calls: tuple[str, dict[str, Any]], say: str | None = None) -> Reply:
    return {"tools": list(calls), **({"text": say} if say else {})}


def thinking(reasoning: str, signature: str, then: Reply) -> Reply:
    """A reply that reasons first; only the Anthropic format carries it."""
    return {"thinking": (reasoning, signature), **then}


@dataclass
class ScriptedProvider:
    """One provider flavour ("anthropic" or "openai") answering from a shared script."""

    flavour: str
    script: list[Reply]
    requests: list[dict[str, Any]] = field(default_factory=list)
    issued_ids: list[str] = field(default_factory=list)

    def handler(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        problems = (anthropic_problems if self.flavour == "anthropic" else openai_chat_problems)(
            body
        )
        if problems:
            return _error(self.flavour, "; ".join(problems))
        if not self.script:
            return _error(self.flavour, "the script has no more replies")
        reply = self.script.pop(0)
        build = _ANTHROPIC if self.flavour == "anthropic" else _OPENAI
        n = len(self.requests)
        ids = [f"{'toolu' if self.flavour == 'anthropic' else 'call'}_{n}x{i}" for i in range(9)]
        self.issued_ids.extend(ids[: len(reply.get("tools", []))])
        if body.get("stream"):
            chunks = build.stream(reply, ids)
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content="".join(chunks).encode()
            )
        return httpx.Response(200, json=build.body(reply, ids))

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self.handler))


def shared_script(script: list[Reply], *flavours: str) -> dict[str, ScriptedProvider]:
    """Providers that pop from one script, so a conversation can alternate between them."""
    return {f: ScriptedProvider(f, script) for f in flavours}


def _error(flavour: str, message: str) -> httpx.Response:
    if flavour == "anthropic":
        body = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    else:
        body = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
    return httpx.Response(400, json=body)


# Replies in each provider's format ----------------------------------------------------------


@dataclass(frozen=True)
class _Format:
    body: Callable[[Reply, list[str]], dict[str, Any]]
    stream: Callable[[Reply, list[str]], list[str]]


def _anthropic_body(reply: Reply, ids: list[str]) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.get("thinking"):
        reasoning, signature = reply["thinking"]
        content.append({"type": "thinking", "thinking": reasoning, "signature": signature})
    if reply.get("text"):
        content.append({"type": "text", "text": reply["text"]})
    for (name, args), tool_id in zip(reply.get("tools", []), ids, strict=False):
        content.append({"type": "tool_use", "id": tool_id, "name": name, "input": args})
    return {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": "claude-scripted",
        "content": content,
        "stop_reason": "tool_use" if reply.get("tools") else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 50, "output_tokens": 10},
    }


def _anthropic_stream(reply: Reply, ids: list[str]) -> list[str]:
    def event(name: str, **data: Any) -> str:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"

    def delta(index: int, **fields: Any) -> str:
        return event("content_block_delta", index=index, delta=fields)

    body = _anthropic_body(reply, ids)
    started = {**body, "content": [], "stop_reason": None}
    out = [
        event(
            "message_start", message={**started, "usage": {"input_tokens": 50, "output_tokens": 1}}
        )
    ]
    for index, block in enumerate(body["content"]):
        if block["type"] == "thinking":
            opening = {"type": "thinking", "thinking": "", "signature": ""}
            out.append(event("content_block_start", index=index, content_block=opening))
            out.append(delta(index, type="thinking_delta", thinking=block["thinking"]))
            out.append(delta(index, type="signature_delta", signature=block["signature"]))
        elif block["type"] == "text":
            opening = {"type": "text", "text": ""}
            out.append(event("content_block_start", index=index, content_block=opening))
            for piece in re.findall(r"\S+\s*", block["text"]):
                out.append(delta(index, type="text_delta", text=piece))
        else:
            out.append(
                event("content_block_start", index=index, content_block={**block, "input": {}})
            )
            raw = json.dumps(block["input"])
            for start in range(0, len(raw), 7):
                out.append(
                    delta(index, type="input_json_delta", partial_json=raw[start : start + 7])
                )
        out.append(event("content_block_stop", index=index))
    out.append(
        event(
            "message_delta", delta={"stop_reason": body["stop_reason"]}, usage={"output_tokens": 10}
        )
    )
    out.append(event("message_stop"))
    return out


def _openai_body(reply: Reply, ids: list[str]) -> dict[str, Any]:
    calls = [
        {
            "id": tool_id,
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        for (name, args), tool_id in zip(reply.get("tools", []), ids, strict=False)
    ]
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("text")}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "model": "gpt-scripted",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
    }


def _openai_stream(reply: Reply, ids: list[str]) -> list[str]:
    def chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> str:
        choices = [{"index": 0, "delta": delta, "finish_reason": finish}] if usage is None else []
        data = {
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "model": "gpt-scripted",
            "choices": choices,
            "usage": usage,
        }
        return f"data: {json.dumps(data)}\n\n"

    out = [chunk({"role": "assistant", "content": ""})]
    for piece in re.findall(r"\S+\s*", reply.get("text") or ""):
        out.append(chunk({"content": piece}))
    for index, ((name, args), tool_id) in enumerate(zip(reply.get("tools", []), ids, strict=False)):
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": tool_id,
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        raw = json.dumps(args)
        for start in range(0, len(raw), 5):
            out.append(
                chunk(
                    {
                        "tool_calls": [
                            {"index": index, "function": {"arguments": raw[start : start + 5]}}
                        ]
                    }
                )
            )
    out.append(chunk({}, finish="tool_calls" if reply.get("tools") else "stop"))
    out.append(chunk({}, usage={"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}))
    out.append("data: [DONE]\n\n")
    return out


_ANTHROPIC = _Format(_anthropic_body, _anthropic_stream)
_OPENAI = _Format(_openai_body, _openai_stream)
