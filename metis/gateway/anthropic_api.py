"""Anthropic Messages served: ``POST /v1/messages`` read into the canonical form, and the
``anthropic-version`` header checked (:mod:`metis.gateway.anthropic_write` writes the reply
and its event stream back)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from metis.errors import InvalidRequestError
from metis.gateway.errors import ThreadUnsupportedError
from metis.gateway.frames import Frame, framed
from metis.gateway.inbound import (
    MESSAGES_SAMPLING,
    Inbound,
    KeptIds,
    body_object,
    effort_thinking,
    flag,
    model_name,
    optional_int,
    sampling,
    string_list,
    tool_definition,
    unknown_fields,
)
from metis.gateway.kept_turns import read_turns
from metis.gateway.provenance import restored
from metis.gateway.server_tools import LABELS, anthropic_tool
from metis.gateway.server_written import foreign
from metis.gateway.unread import anthropic_unread
from metis.histories.reading import text
from metis.model.request import ThinkingConfig, ToolChoice

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
        "top_p",
        "top_k",
        "stop_sequences",
        "thinking",
        "output_format",
        "output_config",
    }
)
VERSIONS = frozenset({"2026-10-21", "2023-06-01", "2023-01-01"})
"""The ``anthropic-version`` values accepted: the current one (the 2.x SDKs') and the earlier."""
ADAPTIVE_BUDGET = 8192
"""The thinking budget asked of other models for ``thinking: {type: adaptive}``."""


def read_messages(raw: Any, later: bool = False) -> Inbound:
    """A Messages API request body (parsed JSON) in canonical terms (``later``: what it left
    out inside its messages and tools looked for when asked, :meth:`Inbound.said`). All but
    its turns is read once per content (metis.gateway.frames)."""
    body = body_object(raw)
    model = model_name(body)
    if body.get("thread") is not None:
        raise ThreadUnsupportedError(
            "thread: this gateway holds no message threads; send the whole conversation"
        )
    messages = read_turns(body.get("messages", []), body.get("system"), model, KeptIds())
    messages = foreign(restored(messages))
    frame = framed(body, _frame)
    return Inbound(
        model=model,
        messages=messages,
        stream=frame.stream,
        max_output_tokens=frame.max_output_tokens,
        fields=frame.given(),
        ignored=list(frame.ignored),
        options=dict(frame.options),
        unread=partial(anthropic_unread, body),
        frame=frame if frame.kept else None,
    ).finished(later)


def _frame(body: Mapping[str, Any]) -> Frame:
    """All the body asks beside its turns."""
    ignored = unknown_fields(body, READ)
    fields: dict[str, Any] = {}
    tools, skipped, server = _tools(body.get("tools"))
    ignored += skipped
    if tools:
        fields["tools"] = tools
    if server:
        fields["server_tools"] = list(server.values())
    choice = body.get("tool_choice")
    if choice is not None:
        fields.update(_tool_choice(choice))
    fields.update(sampling(body, ("temperature",), MESSAGES_SAMPLING))
    fields.update(sampling(_set(body, "top_p", "top_k"), ("top_p", "top_k")))
    if stops := string_list(body.get("stop_sequences"), "stop_sequences"):
        fields["stop_sequences"] = stops
    if (
        thinking := _thinking(body.get("thinking"), body.get("output_config"), ignored)
    ) is not None:
        fields["thinking"] = thinking
    if (schema := _schema(body)) is not None:
        fields["output_schema"] = schema
    stream, limit = flag(body, "stream"), optional_int(body, "max_tokens")
    options = {LABELS: list(server)} if server else {}
    return Frame(fields, ignored, stream, limit, options, kept=not server)


def _set(body: Mapping[str, Any], *names: str) -> dict[str, Any]:
    """``names`` of ``body`` that are set: Anthropic reads -1, its old default, as unset."""
    return {name: body[name] for name in names if body.get(name) not in (None, -1)}


def _tools(raw: Any) -> tuple[list[Any], list[str], dict[str, Any]]:
    """The function tools, the server tools metis has no form for (named), and those it has
    (metis.gateway.server_tools), by how each is named when the model cannot take it."""
    if raw is None:
        return [], [], {}
    if not isinstance(raw, list):
        raise InvalidRequestError("tools: expected a list of tools")
    tools, skipped, server = [], [], {}
    for i, tool in enumerate(raw):
        where = f"tools[{i}]"
        if not isinstance(tool, Mapping):
            raise InvalidRequestError(f"{where}: expected an object")
        if tool.get("type", "custom") != "custom":  # a server tool (web search, ...)
            label = f"{where} ({str(tool.get('type'))[:40]})"
            if (declared := anthropic_tool(tool, where)) is not None:
                server[label] = declared
            else:
                skipped.append(label)
            continue
        name, schema, strict = tool.get("name"), tool.get("input_schema"), tool.get("strict")
        tools.append(tool_definition(name, tool.get("description"), schema, where, strict))
    return tools, skipped, server


def _tool_choice(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, Mapping) or raw.get("type") not in ("auto", "any", "tool", "none"):
        raise InvalidRequestError("tool_choice.type: expected auto, any, tool or none")
    name = text(raw, "name", "tool_choice", None) if raw["type"] == "tool" else None
    out: dict[str, Any] = {"tool_choice": ToolChoice(type=raw["type"], name=name)}
    if raw.get("disable_parallel_tool_use") is True:
        out["parallel_tool_calls"] = False
    return out


def _thinking(raw: Any, config: Any, ignored: list[str]) -> ThinkingConfig | None:
    """``thinking`` (its ``display`` too); adaptive thinking at ``output_config.effort``'s level
    when it gives one (which other models take as their reasoning effort). Beside thinking with
    a budget, or none, the effort has no canonical meaning: it is named in ``ignored``."""
    given = config.get("effort") if isinstance(config, Mapping) else None
    effort = effort_thinking(given, "output_config.effort")
    kind = raw.get("type") if isinstance(raw, Mapping) else None
    if effort is not None and kind != "adaptive":
        ignored.append("output_config.effort")
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise InvalidRequestError("thinking: expected an object")
    if kind == "disabled":
        return None
    display = raw.get("display")
    if display not in (None, "summarized", "omitted"):
        raise InvalidRequestError("thinking.display: expected summarized or omitted")
    if kind == "adaptive":
        chosen = effort or ThinkingConfig(budget_tokens=ADAPTIVE_BUDGET)
        return chosen.model_copy(update={"display": display}) if display else chosen
    if kind != "enabled":
        raise InvalidRequestError("thinking.type: expected enabled, adaptive or disabled")
    budget = optional_int(raw, "budget_tokens")
    if budget is None:
        raise InvalidRequestError("thinking.budget_tokens: expected a positive integer")
    return ThinkingConfig(budget_tokens=budget, display=display)


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


def check_version(request: Any) -> None:
    """A request's ``anthropic-version``, when it gives one, is one of the versions served."""
    version = request.headers.get("anthropic-version")
    if version is not None and version not in VERSIONS:
        raise InvalidRequestError(f"anthropic-version: invalid version {version!r}"[:200])
