"""Reading Anthropic Messages replies: the stream parser and the whole-body parser (an error
in a reply: :mod:`metis.wire.anthropic.errors`).

Sans-IO. The parsers turn Anthropic's objects into canonical events by driving a
:class:`~metis.wire.builder.MessageBuilder`, and return them; every value read from the server
is checked by :mod:`metis.wire.read`, so a malformed field is a ProtocolError naming it.

Anthropic numbers its content blocks itself (``index``) and the parser uses that number as the
builder's key. A server tool's call (``server_tool_use``, its input streamed as a tool call's)
and result (any ``*_tool_result`` answering it) become whole canonical blocks, and citations on
text become canonical citations (:mod:`metis.wire.anthropic.server_tools`). Blocks the canonical
model has no room for (MCP calls, whatever Anthropic adds next) are kept whole as opaque blocks
(docs/contract.md §8), a streamed one's ``input_json_delta`` fragments making its ``input``;
their other deltas are ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from metis.errors import ProtocolError
from metis.model.events import StreamEvent
from metis.model.response import StopKind, StopReason
from metis.wire.anthropic.errors import stream_error, untyped_error
from metis.wire.anthropic.server_tools import call_block, citation, result_block
from metis.wire.anthropic.usage import UsageTally
from metis.wire.builder import MessageBuilder
from metis.wire.partial_json import parse_object
from metis.wire.read import (
    list_value,
    malformed,
    object_value,
    optional_object,
    optional_text,
    required_index,
    required_list,
    required_object,
    required_text,
)

_STOP_KINDS: dict[str, StopKind] = {
    kind.value: kind
    for kind in StopKind
    if kind.value
    in ("end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal")
}
_STOP_KINDS["model_context_window_exceeded"] = StopKind.MAX_TOKENS  # the context filled up

_BLOCK = "content_block"
RESULT_TOOLS = {
    f"{name}_tool_result": name
    for name in (
        "web_search",
        "web_fetch",
        "code_execution",
        "bash_code_execution",
        "text_editor_code_execution",
    )
}
"""The server tools whose results have a type of their own (``tool_search_tool_result``
answers two tools, MCP results answer MCP calls, which have no canonical form)."""


# Parsing -----------------------------------------------------------------------------------


class AnthropicStreamParser:
    """Feeds Anthropic's stream events (parsed SSE ``data:`` objects) to a builder; each
    ``feed`` returns the canonical events the object made."""

    __slots__ = (
        "_builder",
        "_done",
        "_dropped",
        "_fragments",
        "_inputs",
        "_opaque",
        "_opaque_fields",
        "_opaque_input",
        "_server_calls",
        "_server_names",
        "_started",
        "_tally",
        "_warned",
    )

    def __init__(self, builder: MessageBuilder) -> None:
        self._builder = builder
        self._tally = UsageTally(builder)
        self._done = False
        self._started = False
        self._dropped: set[int] = set()  # indices of blocks outside the canonical model
        self._opaque: dict[int, dict[str, Any]] = {}  # those blocks, as they started
        self._opaque_input: dict[int, list[str]] = {}  # their input_json_delta fragments
        self._opaque_fields: dict[int, dict[str, str]] = {}  # a compaction block's deltas
        self._inputs: dict[int, dict[str, Any]] = {}  # tool inputs given whole at block start
        self._fragments: set[int] = set()  # tool indices that received input_json_delta text
        self._warned: set[str] = set()  # unknown delta types already reported
        # server_tool_use blocks still open: index -> (the block, its input fragments)
        self._server_calls: dict[int, tuple[dict[str, Any], list[str]]] = {}
        self._server_names: dict[str, str] = {}  # server call id -> tool name

    def feed(self, obj: dict[str, Any]) -> Sequence[StreamEvent]:
        kind = obj.get("type")
        builder = self._builder
        if kind == "content_block_delta":
            index, delta = obj.get("index"), obj.get("delta")
            if index.__class__ is int and delta.__class__ is dict:
                text = delta.get("text")  # the hot path: a text_delta
                if text.__class__ is str and delta.get("type") == "text_delta":
                    if index in self._dropped:
                        return builder.take()
                    return builder.take_text(index, text)
            self._delta(required_index(obj, "index", kind), required_object(obj, "delta", kind))
        elif kind.__class__ is str:
            self._event(kind, obj)
        elif untyped_error(obj):
            raise stream_error(obj, builder.provider)
        else:
            raise malformed("event.type", "a string", kind)
        return builder.take()

    def end(self) -> Sequence[StreamEvent]:
        if not self._done:
            raise ProtocolError(
                "anthropic stream ended before message_stop", provider=self._builder.provider
            )
        return self._builder.take()

    def interrupt(self, reason: StopReason) -> Sequence[StreamEvent]:
        self._builder.finish(reason)
        return self._builder.take()

    def _event(self, kind: str, obj: dict[str, Any]) -> None:
        builder = self._builder
        if kind == "content_block_start":
            index = required_index(obj, "index", kind)
            self._start_block(index, required_object(obj, _BLOCK, kind))
        elif kind == "content_block_stop":
            self._stop_block(required_index(obj, "index", kind))
        elif kind == "message_start":
            self._message_start(required_object(obj, "message", kind))
        elif kind == "message_delta":
            delta = required_object(obj, "delta", kind)
            _stop(builder, delta, "message_delta.delta")
            usage = optional_object(obj, "usage", kind)
            self._tally.read(usage)
            if usage and usage.get("output_tokens") is not None:
                builder.output_count_pending = False
        elif kind == "message_stop":
            self._done = True
            builder.finish()
        elif kind == "error":
            raise stream_error(obj, builder.provider)
        # ping, and event types newer than this codec: nothing to do

    def _message_start(self, message: dict[str, Any]) -> None:
        """The message's id, model, usage so far (its output count a placeholder until
        ``message_delta``) and any content it already holds, as blocks 0, 1, ..."""
        builder = self._builder
        message_id = optional_text(message, "id", "message_start.message")
        if self._started:
            open_id = builder.message_id
            if self._done or message_id is None or open_id is None or message_id == open_id:
                return  # a repeat (or nothing to tell the two apart by): ignored
            raise ProtocolError(
                f"anthropic started message {message_id!r} while {builder.message_id!r} was open",
                provider=builder.provider,
            )
        self._started = True
        builder.start(message_id, optional_text(message, "model", "message_start.message"))
        self._tally.read(optional_object(message, "usage", "message_start.message"))
        builder.output_count_pending = True
        content = message.get("content") or []
        for index, block in enumerate(list_value(content, "message_start.message.content")):
            self._start_block(index, object_value(block, "message_start.message.content[]"))
            self._stop_block(index)
        if message.get("stop_reason") is not None:  # a whole message: no message_delta follows
            _stop(builder, message, "message_start.message")
            builder.output_count_pending = False

    def _start_block(self, index: int, block: dict[str, Any]) -> None:
        kind = required_text(block, "type", _BLOCK)
        builder = self._builder
        if kind == "text":
            if text := optional_text(block, "text", _BLOCK):
                builder.text(index, text)
            for cited in list_value(block.get("citations") or [], "content_block.citations"):
                builder.citation(index, citation(object_value(cited, "content_block.citations[]")))
        elif kind == "thinking":
            if thinking := optional_text(block, "thinking", _BLOCK):
                builder.thinking(index, thinking)
            if signature := optional_text(block, "signature", _BLOCK):
                builder.thinking_signature(index, signature)
        elif kind == "redacted_thinking":
            builder.redacted_thinking(index, required_text(block, "data", _BLOCK))
        elif kind == "tool_use":
            tool_id = required_text(block, "id", _BLOCK)
            builder.tool_start(index, tool_id, required_text(block, "name", _BLOCK))
            if given := optional_object(block, "input", _BLOCK):
                self._inputs[index] = given
        elif kind == "server_tool_use":
            tool_id = required_text(block, "id", _BLOCK)
            self._server_names[tool_id] = required_text(block, "name", _BLOCK)
            self._server_calls[index] = (block, [])
        elif kind.endswith("_tool_result") and (name := self._server_tool_named(block, kind)):
            builder.server_tool(index, result_block(block, name))
        else:  # no canonical form: kept whole (docs/contract.md §8)
            self._dropped.add(index)
            self._opaque[index] = block
            builder.opaque(index, kind, block)

    def _server_tool_named(self, block: dict[str, Any], kind: str) -> str | None:
        """The name of the server tool a result answers: its call's, from this reply, or, for
        a call made in an earlier reply (a ``pause_turn`` continued), the one tool that
        answers with results of this type; None when neither tells it."""
        call_id = block.get("tool_use_id")
        if not isinstance(call_id, str):
            return None
        return self._server_names.get(call_id) or RESULT_TOOLS.get(kind)

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        kind = required_text(delta, "type", "content_block_delta.delta")
        if index in self._dropped:
            if kind == "input_json_delta" and index in self._opaque:  # a server tool's input
                self._opaque_input.setdefault(index, []).append(
                    required_text(delta, "partial_json", kind)
                )
            elif kind == "compaction_delta" and index in self._opaque:
                fields = self._opaque_fields.setdefault(index, {})
                for name in ("content", "encrypted_content"):
                    if piece := optional_text(delta, name, kind):
                        fields[name] = fields.get(name, "") + piece
            return
        builder = self._builder
        if kind == "input_json_delta":
            fragment = required_text(delta, "partial_json", kind)
            server = self._server_calls.get(index)
            if server is not None:
                server[1].append(fragment)
                return
            builder.tool_input(index, fragment)
            if fragment:
                self._fragments.add(index)
        elif kind == "thinking_delta":
            builder.thinking(index, required_text(delta, "thinking", kind))
        elif kind == "signature_delta":
            builder.thinking_signature(index, required_text(delta, "signature", kind))
        elif kind == "text_delta":  # reached only when the hot path refused it
            builder.text(index, required_text(delta, "text", kind))
        elif kind == "citations_delta":
            builder.citation(index, citation(required_object(delta, "citation", kind)))
        elif kind not in self._warned:
            self._warned.add(kind)
            builder.warn(
                kind, f"unknown delta type {kind!r} ignored", message_id=builder.message_id
            )

    def _stop_block(self, index: int) -> None:
        if index in self._dropped:
            self._opaque_done(index)
            return
        if index in self._server_calls:
            block, fragments = self._server_calls.pop(index)
            declared = optional_object(block, "input", _BLOCK) or {}
            streamed = parse_object("".join(fragments)) if fragments else None
            self._builder.server_tool(
                index, call_block(block, declared if streamed is None else streamed)
            )
            return
        given = self._inputs.pop(index, None)
        if given is not None and index not in self._fragments:
            self._builder.tool_end(index, given)
        else:
            self._builder.close(index)

    def _opaque_done(self, index: int) -> None:
        """An opaque block whose input (or a compaction block whose summary) came in deltas
        gets it whole."""
        pieces = self._opaque_input.pop(index, None)
        fields = self._opaque_fields.pop(index, None)
        block = self._opaque.get(index)
        if (pieces is None and fields is None) or block is None:
            return
        given = parse_object("".join(pieces)) if pieces is not None else None
        item = {**block, "input": given} if given is not None else dict(block)
        item.update(fields or {})
        self._builder.opaque(index, str(block.get("type")), item)


def parse_body(body: dict[str, Any], builder: MessageBuilder) -> Sequence[StreamEvent]:
    """A non-streamed Messages response, through the same block handling as the stream."""
    if body.get("type") == "error" or untyped_error(body):
        raise stream_error(body, builder.provider)
    parser = AnthropicStreamParser(builder)
    builder.start(optional_text(body, "id", "message"), optional_text(body, "model", "message"))
    for index, block in enumerate(required_list(body, "content", "message")):
        parser._start_block(index, object_value(block, "message.content[]"))
        parser._stop_block(index)
    parser._tally.read(optional_object(body, "usage", "message"))
    _stop(builder, body, "message")
    builder.finish()
    return builder.take()


def stop_reason(raw: str, sequence: str | None = None, category: str | None = None) -> StopReason:
    kind = _STOP_KINDS.get(raw, StopKind.PROVIDER_SPECIFIC)
    return StopReason(kind=kind, raw=raw, sequence=sequence, category=category)


def _stop(builder: MessageBuilder, holder: dict[str, Any], where: str) -> None:
    """The stop reason ``holder`` (a message, or a ``message_delta``'s delta) gives, the stop
    sequence that ended the reply when it names one, and a refusal's category and explanation
    (``stop_details``)."""
    raw = optional_text(holder, "stop_reason", where)
    if raw is None:
        return
    details, said = optional_object(holder, "stop_details", where) or {}, f"{where}.stop_details"
    category, explanation = (optional_text(details, k, said) for k in ("category", "explanation"))
    stop = stop_reason(raw, optional_text(holder, "stop_sequence", where), category)
    builder.stop(stop.model_copy(update={"explanation": explanation}) if explanation else stop)
