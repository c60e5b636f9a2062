"""OpenAI Responses served: the reply as a ``response`` object, and its stream as the API
writes it (``response.created``, ``response.in_progress``, per output item
``output_item.added`` ... ``output_item.done`` with its text, reasoning summary or function
call argument deltas, then ``response.completed``, or ``response.incomplete`` when the output
limit cut it, or ``response.failed``), every event with its ``sequence_number``."""

from __future__ import annotations

from typing import Any

from metis.gateway.inbound import Inbound
from metis.gateway.provenance import wrap
from metis.gateway.reasoning_items import REDACTED, encrypted, reasoning_id
from metis.gateway.sse import BlockWriter, dumps, event, new_id, now, quoted
from metis.model.block import ProviderRaw
from metis.model.content import (
    ContentBlock,
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
from metis.model.response import StopKind, StopReason, TokenUsage


def usage(tokens: TokenUsage) -> dict[str, Any]:
    total_input = tokens.total_input_tokens
    return {
        "input_tokens": total_input,
        "input_tokens_details": {"cached_tokens": tokens.cached_input_tokens},
        "output_tokens": tokens.output_tokens,
        "output_tokens_details": {"reasoning_tokens": tokens.reasoning_tokens},
        "total_tokens": total_input + tokens.output_tokens,
    }


def text_item(text: str, status: str = "completed") -> dict[str, Any]:
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": text}
    content = [part] if status == "completed" else []
    return {
        "id": new_id("msg_"),
        "type": "message",
        "status": status,
        "content": content,
        "role": "assistant",
    }


def reasoning_item(
    item_id: str, thinking: str, encrypted_content: str | None = None
) -> dict[str, Any]:
    """A reasoning item (its id: :func:`metis.gateway.reasoning_items.reasoning_id`);
    ``encrypted_content`` where the request asked for it (``include``)."""
    summary = [{"type": "summary_text", "text": thinking}] if thinking else []
    item = {"id": item_id, "type": "reasoning", "summary": summary}
    if encrypted_content:
        item["encrypted_content"] = encrypted_content
    return item


def call_item(call_id: str, name: str, arguments: str, status: str = "completed") -> dict[str, Any]:
    return {
        "id": new_id("fc_"),
        "type": "function_call",
        "status": status,
        "arguments": arguments,
        "call_id": call_id,
        "name": name,
    }


def output_items(
    content: list[ContentBlock], inbound: Inbound, response_id: str
) -> list[dict[str, Any]]:
    asked = inbound.options.get("encrypted_reasoning") is True
    items = []
    thoughts = 0
    for block in content:
        if isinstance(block, ThinkingBlock | RedactedThinkingBlock):
            sealed = encrypted(block, block.provider_raw) if asked else None
            item_id = reasoning_id(response_id, thoughts)
            items.append(reasoning_item(item_id, getattr(block, "thinking", ""), sealed))
            thoughts += 1
        elif isinstance(block, TextBlock):
            items.append(text_item(block.text))
        elif isinstance(block, ToolUseBlock):
            items.append(call_item(block.id, block.name, dumps(block.input)))
    return items


def response_object(
    inbound: Inbound,
    model: str,
    response_id: str,
    output: list[dict[str, Any]],
    stop: StopReason | None,
    tokens: TokenUsage | None,
) -> dict[str, Any]:
    """The ``response`` object; ``stop`` None: still in progress."""
    options = inbound.options
    incomplete = stop is not None and stop.kind in (StopKind.MAX_TOKENS, StopKind.CONTENT_FILTER)
    status = "in_progress" if stop is None else "incomplete" if incomplete else "completed"
    reason = "max_output_tokens" if stop and stop.kind is StopKind.MAX_TOKENS else "content_filter"
    asked = options.get("reasoning")
    reasoning: dict[str, Any] = asked if isinstance(asked, dict) else {}
    return {
        "id": response_id,
        "object": "response",
        "created_at": now(),
        "status": status,
        "error": None,
        "incomplete_details": {"reason": reason} if incomplete else None,
        "instructions": options.get("instructions"),
        "max_output_tokens": options.get("max_output_tokens"),
        "model": model,
        "output": output,
        "parallel_tool_calls": inbound.fields.get("parallel_tool_calls", True),
        "previous_response_id": options.get("previous_response_id"),
        "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
        "store": options.get("store", True),
        "temperature": inbound.fields.get("temperature", 1.0),
        "text": options.get("text") or {"format": {"type": "text"}},
        "tool_choice": options.get("tool_choice") or "auto",
        "tools": options.get("tools") or [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage(tokens) if tokens is not None else None,
        "metadata": {},
    }


DELTA_HEAD = (
    b'event: %s\ndata: {"type":"%s","sequence_number":%d,"item_id":%s,"output_index":%d%s,"delta":'
)
TEXT_DELTA = b"response.output_text.delta"
SUMMARY_DELTA = b"response.reasoning_summary_text.delta"
ARGUMENTS_DELTA = b"response.function_call_arguments.delta"


class ResponseStream(BlockWriter):
    """The canonical events of one call as the Responses API streams them."""

    def __init__(
        self, inbound: Inbound, model: str, response_id: str, made_by: ProviderRaw | None = None
    ) -> None:
        super().__init__()
        self.inbound, self.model, self.response_id = inbound, model, response_id
        self.made_by = made_by  # who writes the thinking, when known
        self.sealing = inbound.options.get("encrypted_reasoning") is True
        self.signature = ""  # the open thinking's, when it comes
        self.thoughts = 0  # reasoning items opened so far
        self.sequence = 0
        self.started = False
        self.items: list[dict[str, Any]] = []  # closed output items
        self.item: dict[str, Any] = {}  # the open one
        self.buffer: list[str] = []  # its text, summary or arguments so far
        self.item_id = b""  # its id, as JSON
        self.final: dict[str, Any] | None = None  # the response it ended with

    def _emit(self, kind: str, **fields: Any) -> bytes:
        out = event(kind, {"type": kind, "sequence_number": self.sequence, **fields})
        self.sequence += 1
        return out

    def _response(self, stop: StopReason | None = None, tokens: Any = None) -> dict[str, Any]:
        output = self.items if stop is not None else []
        return response_object(self.inbound, self.model, self.response_id, output, stop, tokens)

    def feed(self, item: StreamEvent) -> bytes:
        head = b""
        if not self.started:
            self.started = True
            pending = self._response()
            head = self._emit("response.created", response=pending)
            head += self._emit("response.in_progress", response=pending)
        return head + super().feed(item)

    def _where(self, **more: Any) -> dict[str, Any]:
        return {"item_id": self.item["id"], "output_index": self.blocks - 1, **more}

    def open_block(self, kind: str, item: StreamEvent) -> bytes:
        self.buffer = []
        if isinstance(item, ToolUseStart):
            self.item = call_item(item.tool_use_id, item.tool_name, "", "in_progress")
        elif kind == "thinking":
            item_id = reasoning_id(self.response_id, self.thoughts)
            self.item, self.thoughts = reasoning_item(item_id, ""), self.thoughts + 1
            self.signature = ""
            if isinstance(item, ThinkingDelta) and item.redacted_data and self.sealing:
                self.signature = REDACTED + wrap(self.made_by, item.redacted_data)
        else:
            self.item = text_item("", "in_progress")
        self.item_id = quoted(self.item["id"])
        added = self._emit("response.output_item.added", output_index=self.blocks, item=self.item)
        self.blocks += 1  # the index _where names from here on; the base counts it once more
        where = self._where()
        self.blocks -= 1
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        if kind == "text":
            added += self._emit("response.content_part.added", **where, content_index=0, part=part)
        elif kind == "thinking":
            summary = {"type": "summary_text", "text": ""}
            added += self._emit(
                "response.reasoning_summary_part.added", **where, summary_index=0, part=summary
            )
        return added

    def _delta(self, kind: bytes, index: bytes, text: str, tail: bytes = b"}") -> bytes:
        """``_emit(kind, **_where(...), delta=text)`` from a template: most of a stream's
        events. ``index``: the members between ``output_index`` and ``delta``."""
        self.buffer.append(text)
        head = DELTA_HEAD % (kind, kind, self.sequence, self.item_id, self.blocks - 1, index)
        self.sequence += 1
        return b"".join((head, quoted(text), tail, b"\n\n"))

    def text(self, item: TextDelta) -> bytes:
        return self._delta(TEXT_DELTA, b',"content_index":0', item.text, b',"logprobs":[]}')

    def thinking(self, item: ThinkingDelta) -> bytes:
        if item.signature and self.sealing:
            self.signature = wrap(self.made_by, item.signature, item.provider_data)
        if not item.thinking:
            return b""
        return self._delta(SUMMARY_DELTA, b',"summary_index":0', item.thinking)

    def tool_input(self, item: ToolUseInputDelta) -> bytes:
        return self._delta(ARGUMENTS_DELTA, b"", item.partial_json)

    def close_block(self, kind: str, end: ToolUseEnd | None) -> bytes:
        whole, out = "".join(self.buffer), b""
        if kind == "text":
            done = text_item(whole)
            done["id"] = self.item["id"]
            part = done["content"][0]
            where = self._where(content_index=0)
            out += self._emit("response.output_text.done", **where, text=whole, logprobs=[])
            out += self._emit("response.content_part.done", **where, part=part)
        elif kind == "thinking":
            done = {**self.item, "summary": [{"type": "summary_text", "text": whole}]}
            if self.signature:
                done["encrypted_content"] = self.signature
            where = self._where(summary_index=0)
            out += self._emit("response.reasoning_summary_text.done", **where, text=whole)
            out += self._emit(
                "response.reasoning_summary_part.done", **where, part=done["summary"][0]
            )
        else:
            arguments = dumps(end.final_input) if end is not None else whole
            done = {**self.item, "status": "completed", "arguments": arguments}
            where = self._where()
            out += self._emit("response.function_call_arguments.done", **where, arguments=arguments)
        self.items.append(done)
        index = self.blocks - 1
        return out + self._emit("response.output_item.done", output_index=index, item=done)

    def complete(self, item: MessageComplete) -> bytes:
        final = self.final = self._response(item.stop_reason, item.usage)
        kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        return self._emit(kind, response=final)

    def error(self, status: int, body: dict[str, Any]) -> bytes:
        failed = {**self._response(StopReason(kind=StopKind.ERROR)), "status": "failed"}
        error = body.get("error") or {}
        failed["error"] = {
            "code": error.get("code") or "server_error",
            "message": error.get("message", ""),
        }
        failed["output"] = []
        return self._emit("response.failed", response=failed)
