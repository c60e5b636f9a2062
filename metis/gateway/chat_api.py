"""OpenAI Chat Completions served: ``POST /v1/chat/completions`` read into the canonical form,
the reply and its chunks written back as the API writes them (``data:`` lines, the role first,
a tool call's id and name on its first fragment only, the finish_reason chunk, the usage chunk
with ``choices: []`` when ``stream_options.include_usage`` asks, then ``data: [DONE]``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metis.errors import InvalidRequestError
from metis.gateway.inbound import (
    Inbound,
    KeptIds,
    body_object,
    effort_thinking,
    flag,
    model_name,
    optional_int,
    string_list,
    tool_definition,
    unknown_fields,
)
from metis.gateway.openai_tools import chat_tool_choice, custom_tool, tool_and_sampling_fields
from metis.gateway.sse import DONE, BlockWriter, data, dumps, new_id, now, object_head, quoted
from metis.gateway.unread import chat_unread
from metis.histories.openai_chat import from_openai_chat
from metis.model.content import TextBlock, ThinkingBlock, ToolUseBlock
from metis.model.events import (
    MessageComplete,
    MessageStart,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
)
from metis.model.response import CanonicalResponse, StopKind, StopReason, TokenUsage

READ = frozenset(
    {
        "model",
        "messages",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "temperature",
        "stop",
        "max_tokens",
        "max_completion_tokens",
        "stream",
        "stream_options",
        "response_format",
        "reasoning_effort",
        "functions",
        "function_call",
    }
)
FINISH = {
    StopKind.MAX_TOKENS: "length",
    StopKind.TOOL_USE: "tool_calls",
    StopKind.CONTENT_FILTER: "content_filter",
    StopKind.REFUSAL: "content_filter",
}


def read_chat(raw: Any) -> Inbound:
    """A Chat Completions request body (parsed JSON) in canonical terms."""
    body = body_object(raw)
    model = model_name(body)
    ignored = unknown_fields(body, READ)
    fields: dict[str, Any] = {}
    legacy = body.get("functions") is not None or body.get("function_call") is not None
    if legacy and (body.get("tools") is not None or body.get("tool_choice") is not None):
        raise InvalidRequestError("functions: give tools or functions (deprecated), not both")
    tools = _functions(body.get("functions")) if legacy else _tools(body.get("tools"))
    raw_choice = body.get("function_call") if legacy else body.get("tool_choice")
    fields.update(
        tool_and_sampling_fields(body, tools, chat_tool_choice(raw_choice, ignored, legacy))
    )
    if stops := string_list(body.get("stop"), "stop"):
        fields["stop_sequences"] = stops
    if (thinking := effort_thinking(body.get("reasoning_effort"), "reasoning_effort")) is not None:
        fields["thinking"] = thinking
    schema, json_mode = output_format(body.get("response_format"), "response_format")
    if schema is not None:
        fields["output_schema"] = schema
    if json_mode:
        ignored.append("response_format (json_object)")
    limit = optional_int(body, "max_completion_tokens") or optional_int(body, "max_tokens")
    stream_options = body.get("stream_options")
    include_usage = isinstance(stream_options, Mapping) and stream_options.get("include_usage")
    messages = from_openai_chat(body.get("messages", []), ids=KeptIds())
    ignored += chat_unread(body)
    return Inbound(
        model=model,
        messages=messages,
        stream=flag(body, "stream"),
        max_output_tokens=limit,
        fields=fields,
        ignored=ignored,
        options={"include_usage": include_usage is True, "legacy_functions": legacy},
    )


def _tools(raw: Any) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InvalidRequestError("tools: expected a list of tools")
    tools = []
    for i, tool in enumerate(raw):
        where = f"tools[{i}]"
        if isinstance(tool, Mapping) and tool.get("type") == "custom":
            tools.append(custom_tool(tool.get("custom"), f"{where}.custom"))
            continue
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping):
            raise InvalidRequestError(f"{where}.function: expected an object")
        tools.append(
            tool_definition(
                function.get("name"),
                function.get("description"),
                function.get("parameters"),
                f"{where}.function",
                function.get("strict"),
            )
        )
    return tools


def _functions(raw: Any) -> list[Any]:
    """Deprecated function calling's ``functions``: tools by another name."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InvalidRequestError("functions: expected a list of functions")
    tools = []
    for i, function in enumerate(raw):
        where = f"functions[{i}]"
        if not isinstance(function, Mapping):
            raise InvalidRequestError(f"{where}: expected an object")
        name, description = function.get("name"), function.get("description")
        tools.append(tool_definition(name, description, function.get("parameters"), where))
    return tools


def output_format(raw: Any, where: str) -> tuple[dict[str, Any] | None, bool]:
    """A ``json_schema`` format's schema, and whether JSON mode (``json_object``) was asked."""
    if raw is None:
        return None, False
    kind = raw.get("type") if isinstance(raw, Mapping) else None
    if kind == "text":
        return None, False
    if kind == "json_object":
        return None, True
    spec = raw.get("json_schema", raw) if isinstance(raw, Mapping) else None
    schema = spec.get("schema") if isinstance(spec, Mapping) else None
    if kind != "json_schema" or not isinstance(schema, dict):
        raise InvalidRequestError(f"{where}: expected text, json_object or a json_schema")
    return schema, False


# The reply ---------------------------------------------------------------------------------


def usage(tokens: TokenUsage) -> dict[str, Any]:
    prompt = tokens.total_input_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": tokens.output_tokens,
        "total_tokens": prompt + tokens.output_tokens,
        "prompt_tokens_details": {"cached_tokens": tokens.cached_input_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": tokens.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def finish_reason(reason: StopReason) -> str:
    return FINISH.get(reason.kind, "stop")


def write_completion(
    response: CanonicalResponse, model: str, legacy: bool = False
) -> dict[str, Any]:
    """The Chat Completions reply body for ``response``, naming ``model`` as the client did;
    ``legacy``: a tool call as deprecated function calling's ``function_call`` (the first)."""
    message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
    texts = [b.text for b in response.content if isinstance(b, TextBlock)]
    if texts:
        message["content"] = "".join(texts)
    thinking = "".join(b.thinking for b in response.content if isinstance(b, ThinkingBlock))
    if thinking:
        message["reasoning_content"] = thinking
    calls = [
        {
            "id": b.id,
            "type": "function",
            "function": {"name": b.name, "arguments": dumps(b.input)},
        }
        for b in response.content
        if isinstance(b, ToolUseBlock)
    ]
    finish = finish_reason(response.stop_reason)
    if calls and legacy:
        message["function_call"] = calls[0]["function"]
        finish = "function_call" if finish == "tool_calls" else finish
    elif calls:
        message["tool_calls"] = calls
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
    return {
        "id": new_id("chatcmpl-"),
        "object": "chat.completion",
        "created": now(),
        "model": model,
        "choices": [choice],
        "usage": usage(response.usage),
    }


class ChunkStream(BlockWriter):
    """The canonical events of one call as Chat Completions streams them."""

    def __init__(self, model: str, include_usage: bool, legacy: bool = False) -> None:
        super().__init__()
        self.legacy = legacy  # tool calls as deprecated function calling's function_call
        self.base: dict[str, Any] = {
            "id": new_id("chatcmpl-"),
            "object": "chat.completion.chunk",
            "created": now(),
            "model": model,
        }
        self.include_usage = include_usage
        self.started = False
        self.calls = 0  # tool calls opened: the index of the next one
        # _chunk(delta) around a delta written from a template (_string_chunk)
        self.head = b"data: " + object_head(self.base) + b'"choices":[{"index":0,"delta":'
        usage_member = b',"usage":null' if include_usage else b""
        self.tail = b',"logprobs":null,"finish_reason":null}]' + usage_member + b"}\n\n"

    def _chunk(self, delta: dict[str, Any] | None, finish: str | None = None) -> bytes:
        choices = (
            []
            if delta is None
            else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        )
        chunk: dict[str, Any] = {**self.base, "choices": choices}
        if self.include_usage:
            chunk["usage"] = None
        return data(chunk)

    def feed(self, item: StreamEvent) -> bytes:
        """The first chunk names the role with the reply's first content, as OpenAI writes
        it: ``content: ""`` before text, ``content: null`` beside a first tool call (a
        client that reads ``""`` as text would see an empty text part in a tool call's turn)."""
        if self.started or isinstance(item, (MessageStart, ToolUseStart)):
            return super().feed(item)
        self.started = True
        return self._chunk({"role": "assistant", "content": "", "refusal": None}) + super().feed(
            item
        )

    def open_block(self, kind: str, item: StreamEvent) -> bytes:
        if not isinstance(item, ToolUseStart):
            return b""
        role = {} if self.started else {"role": "assistant", "content": None}
        self.started = True
        function = {"name": item.tool_name, "arguments": ""}
        if self.legacy:  # one call only: the others have no place in the reply
            self.calls += 1
            if self.calls > 1:
                return b""
            return self._chunk({**role, "function_call": function, **_refusal(role)})
        opened = {"index": self.calls, "id": item.tool_use_id, "type": "function"}
        self.calls += 1
        call = {**opened, "function": function}
        return self._chunk({**role, "tool_calls": [call], **_refusal(role)})

    def _string_chunk(self, delta_head: bytes, text: str, delta_tail: bytes = b"}") -> bytes:
        """``_chunk(delta)`` for a delta of one string member, from a template: most of a
        stream's chunks."""
        return b"".join((self.head, delta_head, quoted(text), delta_tail, self.tail))

    def text(self, item: TextDelta) -> bytes:
        return self._string_chunk(b'{"content":', item.text) if item.text else b""

    def thinking(self, item: ThinkingDelta) -> bytes:
        if not item.thinking:
            return b""
        return self._string_chunk(b'{"reasoning_content":', item.thinking)

    def tool_input(self, item: ToolUseInputDelta) -> bytes:
        if self.legacy:
            arguments = {"function_call": {"arguments": item.partial_json}}
            return self._chunk(arguments) if self.calls == 1 else b""
        head = b'{"tool_calls":[{"index":%d,"function":{"arguments":' % (self.calls - 1)
        return self._string_chunk(head, item.partial_json, b"}}]}")

    def close_block(self, kind: str, end: ToolUseEnd | None) -> bytes:
        return b""

    def complete(self, item: MessageComplete) -> bytes:
        finish = finish_reason(item.stop_reason)
        if self.legacy and finish == "tool_calls":
            finish = "function_call"
        out = self._chunk({}, finish)
        if self.include_usage:
            out += data({**self.base, "choices": [], "usage": usage(item.usage)})
        return out + DONE

    def error(self, status: int, body: dict[str, Any]) -> bytes:
        return data(body)


def _refusal(role: dict[str, Any]) -> dict[str, Any]:
    """The first chunk's ``refusal: null``, after the tool call as OpenAI orders it."""
    return {"refusal": None} if role else {}
