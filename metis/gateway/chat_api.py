"""OpenAI Chat Completions served: ``POST /v1/chat/completions`` read into the canonical form
(:mod:`metis.gateway.chat_write` writes the reply and its chunks back)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from metis.errors import InvalidRequestError
from metis.gateway.inbound import (
    Inbound,
    KeptIds,
    body_object,
    effort_thinking,
    flag,
    logit_bias,
    model_name,
    optional_int,
    sampling,
    string_list,
    tool_definition,
    unknown_fields,
)
from metis.gateway.openai_kept import read_chat_turns
from metis.gateway.openai_tools import chat_tool_choice, custom_tool, tool_and_sampling_fields
from metis.gateway.provenance import signed_calls
from metis.gateway.server_tools import LABELS, chat_search
from metis.gateway.unread import chat_unread

READ = frozenset(
    {
        "model",
        "messages",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "temperature",
        "top_p",
        "seed",
        "frequency_penalty",
        "presence_penalty",
        "stop",
        "max_tokens",
        "max_completion_tokens",
        "stream",
        "stream_options",
        "response_format",
        "reasoning_effort",
        "functions",
        "function_call",
        "web_search_options",
    }
)


def read_chat(raw: Any, later: bool = False) -> Inbound:
    """A Chat Completions request body (parsed JSON) in canonical terms (``later``: as
    :func:`metis.gateway.anthropic_api.read_messages`)."""
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
    fields.update(sampling(body, ("seed", "frequency_penalty", "presence_penalty")))
    logit_bias(body.get("logit_bias"))
    if stops := string_list(body.get("stop"), "stop"):
        fields["stop_sequences"] = stops
    if (thinking := effort_thinking(body.get("reasoning_effort"), "reasoning_effort")) is not None:
        fields["thinking"] = thinking
    schema, json_mode = output_format(body.get("response_format"), "response_format")
    if schema is not None:
        fields["output_schema"] = schema
    if json_mode:
        ignored.append("response_format (json_object)")
    searched = chat_search(body.get("web_search_options"))
    if searched is not None:  # a search model's search, asked of whichever model serves
        fields["server_tools"] = [searched]
    limit = optional_int(body, "max_completion_tokens") or optional_int(body, "max_tokens")
    stream_options = body.get("stream_options")
    include_usage = isinstance(stream_options, Mapping) and stream_options.get("include_usage")
    turns = body.get("messages", [])
    messages = signed_calls(read_chat_turns(turns, model, KeptIds()), turns, ignored)
    return Inbound(
        model=model,
        messages=messages,
        stream=flag(body, "stream"),
        max_output_tokens=limit,
        fields=fields,
        ignored=ignored,
        options={
            "include_usage": include_usage is True,
            "legacy_functions": legacy,
            LABELS: ["web_search_options"] if searched is not None else [],
            "limit_field": "max_completion_tokens"
            if body.get("max_completion_tokens") is not None
            else "max_tokens",
        },
        unread=partial(chat_unread, body),
    ).finished(later)


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
