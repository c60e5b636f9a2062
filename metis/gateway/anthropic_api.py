"""Anthropic Messages served: ``POST /v1/messages`` read into the canonical form, the reply and
its event stream written back as the Messages API writes them (``message_start``,
``content_block_start``/``delta``/``stop``, ``ping``, ``message_delta`` with the usage and
stop reason, ``message_stop``; ``error`` when a stream fails)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metis.errors import InvalidRequestError
from metis.gateway.errors import ThreadUnsupportedError
from metis.gateway.inbound import (
    Inbound,
    KeptIds,
    body_object,
    flag,
    model_name,
    optional_int,
    optional_number,
    string_list,
    tool_definition,
    unknown_fields,
)
from metis.gateway.provenance import restored, wrap
from metis.gateway.sse import BlockWriter, event, new_id, quoted
from metis.gateway.unread import anthropic_unread
from metis.histories.anthropic import from_anthropic
from metis.histories.reading import text
from metis.model.content import (
    ContentBlock,
    ProviderRaw,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from metis.model.events import (
    MessageComplete,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
)
from metis.model.request import ThinkingConfig, ToolChoice
from metis.model.response import CanonicalResponse, StopKind, StopReason, TokenUsage

READ = frozenset(
    {
        "model",
        "messages",
        "system",
        "max_tokens",
        "stream",
        "tools",
        "tool_choice",
        "temperature",
        "stop_sequences",
        "thinking",
        "output_format",
        "output_config",
    }
)
VERSIONS = frozenset({"2026-10-21", "2023-06-01", "2023-01-01"})
"""The ``anthropic-version`` values accepted: the current one (the 2.x SDKs') and the earlier."""
STOPS = {
    StopKind.END_TURN: "end_turn",
    StopKind.MAX_TOKENS: "max_tokens",
    StopKind.STOP_SEQUENCE: "stop_sequence",
    StopKind.TOOL_USE: "tool_use",
    StopKind.REFUSAL: "refusal",
    StopKind.CONTENT_FILTER: "refusal",
    StopKind.PAUSE_TURN: "pause_turn",
}
ADAPTIVE_BUDGET = 8192
"""The thinking budget asked of other models for ``thinking: {type: adaptive}``."""


def read_messages(raw: Any) -> Inbound:
    """A Messages API request body (parsed JSON) in canonical terms."""
    body = body_object(raw)
    model = model_name(body)
    if body.get("thread") is not None:
        raise ThreadUnsupportedError(
            "thread: this gateway holds no message threads; send the whole conversation"
        )
    ignored = unknown_fields(body, READ)
    messages = from_anthropic(
        body.get("messages", []), system=body.get("system"), model=model, ids=KeptIds()
    )
    messages = restored(messages)
    fields: dict[str, Any] = {}
    tools, skipped = _tools(body.get("tools"))
    ignored += skipped
    if tools:
        fields["tools"] = tools
    choice = body.get("tool_choice")
    if choice is not None:
        fields.update(_tool_choice(choice))
    if (temperature := optional_number(body, "temperature")) is not None:
        fields["temperature"] = temperature
    if stops := string_list(body.get("stop_sequences"), "stop_sequences"):
        fields["stop_sequences"] = stops
    if (thinking := _thinking(body.get("thinking"))) is not None:
        fields["thinking"] = thinking
    if (schema := _schema(body)) is not None:
        fields["output_schema"] = schema
    ignored += anthropic_unread(body)
    return Inbound(
        model=model,
        messages=messages,
        stream=flag(body, "stream"),
        max_output_tokens=optional_int(body, "max_tokens"),
        fields=fields,
        ignored=ignored,
    )


def _tools(raw: Any) -> tuple[list[Any], list[str]]:
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        raise InvalidRequestError("tools: expected a list of tools")
    tools, skipped = [], []
    for i, tool in enumerate(raw):
        where = f"tools[{i}]"
        if not isinstance(tool, Mapping):
            raise InvalidRequestError(f"{where}: expected an object")
        if tool.get("type", "custom") != "custom":  # a server tool (web search, ...)
            skipped.append(f"{where} ({str(tool.get('type'))[:40]})")
            continue
        name, schema, strict = tool.get("name"), tool.get("input_schema"), tool.get("strict")
        tools.append(tool_definition(name, tool.get("description"), schema, where, strict))
    return tools, skipped


def _tool_choice(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, Mapping) or raw.get("type") not in ("auto", "any", "tool", "none"):
        raise InvalidRequestError("tool_choice.type: expected auto, any, tool or none")
    name = text(raw, "name", "tool_choice", None) if raw["type"] == "tool" else None
    out: dict[str, Any] = {"tool_choice": ToolChoice(type=raw["type"], name=name)}
    if raw.get("disable_parallel_tool_use") is True:
        out["parallel_tool_calls"] = False
    return out


def _thinking(raw: Any) -> ThinkingConfig | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise InvalidRequestError("thinking: expected an object")
    kind = raw.get("type")
    if kind == "disabled":
        return None
    if kind == "adaptive":
        return ThinkingConfig(budget_tokens=ADAPTIVE_BUDGET)
    if kind != "enabled":
        raise InvalidRequestError("thinking.type: expected enabled, adaptive or disabled")
    budget = optional_int(raw, "budget_tokens")
    if budget is None:
        raise InvalidRequestError("thinking.budget_tokens: expected a positive integer")
    return ThinkingConfig(budget_tokens=budget)


def _schema(body: Mapping[str, Any]) -> dict[str, Any] | None:
    config = body.get("output_config")
    fmt = body.get("output_format") or (config.get("format") if isinstance(config, dict) else None)
    if fmt is None:
        return None
    if not isinstance(fmt, Mapping) or fmt.get("type") != "json_schema":
        raise InvalidRequestError("output_format.type: expected json_schema")
    schema = fmt.get("schema")
    if not isinstance(schema, dict):
        raise InvalidRequestError("output_format.schema: expected a JSON schema object")
    return schema


# The reply ---------------------------------------------------------------------------------

DELTA_HEAD = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,"delta":'
TEXT_DELTA = b'{"type":"text_delta","text":'
THINKING_DELTA = b'{"type":"thinking_delta","thinking":'
INPUT_DELTA = b'{"type":"input_json_delta","partial_json":'


def usage(tokens: TokenUsage) -> dict[str, Any]:
    """The usage object; ``output_tokens_details.thinking_tokens`` when the model said how
    many of its output tokens were thinking (as Anthropic does)."""
    written: dict[str, Any] = {
        "input_tokens": tokens.input_tokens,
        "cache_creation_input_tokens": tokens.cache_creation_input_tokens,
        "cache_read_input_tokens": tokens.cached_input_tokens,
        "output_tokens": tokens.output_tokens,
    }
    if tokens.reasoning_tokens:
        written["output_tokens_details"] = {"thinking_tokens": tokens.reasoning_tokens}
    return written


def stop_reason(reason: StopReason) -> str:
    return STOPS.get(reason.kind, "end_turn")


def block(item: ContentBlock) -> dict[str, Any] | None:
    if isinstance(item, TextBlock):
        return {"type": "text", "text": item.text}
    if isinstance(item, ThinkingBlock):
        signature = wrap(item.provider_raw, item.signature or "")
        return {"type": "thinking", "thinking": item.thinking, "signature": signature}
    if isinstance(item, RedactedThinkingBlock):
        return {"type": "redacted_thinking", "data": wrap(item.provider_raw, item.data)}
    if isinstance(item, ToolUseBlock):
        return {"type": "tool_use", "id": item.id, "name": item.name, "input": item.input}
    return None


def write_message(response: CanonicalResponse, model: str) -> dict[str, Any]:
    """The Messages API's reply body for ``response``, naming ``model`` as the client did."""
    content = [b for b in map(block, response.content) if b is not None]
    return {
        "id": new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(response.stop_reason),
        "stop_sequence": response.stop_reason.sequence,
        "usage": usage(response.usage),
    }


class MessageStream(BlockWriter):
    """The canonical events of one call as the Messages API streams them."""

    def __init__(self, model: str, made_by: ProviderRaw | None = None) -> None:
        super().__init__()
        self.model, self.made_by = model, made_by  # who writes the thinking, when known
        self.started = False

    def feed(self, item: StreamEvent) -> bytes:
        head = b"" if self.started else self._message_start()
        return head + super().feed(item)

    def _message_start(self) -> bytes:
        self.started = True
        message: dict[str, Any] = {
            "id": new_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage(TokenUsage(output_tokens=1)),
        }
        return event("message_start", {"type": "message_start", "message": message})

    def _event(self, name: str, **fields: Any) -> bytes:
        return event(name, {"type": name, **fields})

    def open_block(self, kind: str, item: StreamEvent) -> bytes:
        index = self.blocks
        if isinstance(item, ToolUseStart):
            opening: dict[str, Any] = {
                "type": "tool_use",
                "id": item.tool_use_id,
                "name": item.tool_name,
                "input": {},
            }
        elif kind == "thinking" and isinstance(item, ThinkingDelta) and item.redacted_data:
            opening = {"type": "redacted_thinking", "data": wrap(self.made_by, item.redacted_data)}
        elif kind == "thinking":
            opening = {"type": "thinking", "thinking": "", "signature": ""}
        else:
            opening = {"type": "text", "text": ""}
        started = self._event("content_block_start", index=index, content_block=opening)
        return started + (self._event("ping") if index == 0 else b"")

    def _delta(self, **delta: Any) -> bytes:
        return self._event("content_block_delta", index=self.blocks - 1, delta=delta)

    def _string_delta(self, kind: bytes, text: str) -> bytes:
        """``_delta(type=kind, <member>=text)`` from a template: most of a stream's events."""
        return b"".join((DELTA_HEAD % (self.blocks - 1), kind, quoted(text), b"}}\n\n"))

    def text(self, item: TextDelta) -> bytes:
        return self._string_delta(TEXT_DELTA, item.text) if item.text else b""

    def thinking(self, item: ThinkingDelta) -> bytes:
        out = self._string_delta(THINKING_DELTA, item.thinking) if item.thinking else b""
        if item.signature:
            signature = wrap(self.made_by, item.signature, item.provider_data)
            out += self._delta(type="signature_delta", signature=signature)
        return out

    def tool_input(self, item: ToolUseInputDelta) -> bytes:
        return self._string_delta(INPUT_DELTA, item.partial_json)

    def close_block(self, kind: str, end: ToolUseEnd | None) -> bytes:
        return self._event("content_block_stop", index=self.blocks - 1)

    def complete(self, item: MessageComplete) -> bytes:
        reason = item.stop_reason
        delta = {"stop_reason": stop_reason(reason), "stop_sequence": reason.sequence}
        return self._event("message_delta", delta=delta, usage=usage(item.usage)) + self._event(
            "message_stop"
        )

    def error(self, status: int, body: dict[str, Any]) -> bytes:
        return event("error", body)
