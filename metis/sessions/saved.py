"""A session as JSON, so a conversation can move between workers.

What is saved: the session id, the model (a ``provider:model`` string; a router is given again
on restore), the history, the options (never the API key), the names of the tools (their
functions are given again on restore), the context check, compaction by the provider (a
compacting function is given again), the usage and each call's cost so far and the
provider state (tool ids, continuation: :mod:`metis.sessions.provider_state`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from metis.calls.request import ModelLike, ModelOptions
from metis.catalog.usage_cost import Cost
from metis.core.config_files import config_error
from metis.core.empty import empty_list
from metis.errors import ConfigError
from metis.model.cache import CachePolicy
from metis.model.content import Message
from metis.model.knobs import ReasoningEffort
from metis.model.request import ThinkingConfig, ToolChoice, ToolDefinition
from metis.model.response import TokenUsage
from metis.routing.router import Router
from metis.sessions.context import ContextCheck
from metis.sessions.core import Conversation
from metis.sessions.provider_state import ProviderState
from metis.tool_making import Tool

FORMAT = "metis.session/1"
NOT_SAVED = frozenset({"api_key", "tools", "extra_headers"})
"""Options a saved session leaves out: the key (and extra headers, which may carry one) are
secrets; tools are functions."""


class SavedOptions(BaseModel):
    """The session's default options that are data."""

    model_config = ConfigDict(extra="forbid")

    system: str | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0)
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    stop_sequences: list[str] | None = None
    output_schema: dict[str, Any] | None = None
    thinking: ThinkingConfig | None = None
    reasoning: ReasoningEffort | int | None = None
    provider_options: dict[str, dict[str, Any]] | None = None
    extra_query: dict[str, dict[str, str]] | None = None
    cache: CachePolicy | None = None
    base_url: str | None = None
    timeout_seconds: float | None = Field(default=None, gt=0)
    max_retries: int | None = Field(default=None, ge=0)


class SavedSession(BaseModel):
    """A session, saved: :meth:`Session.to_json` writes it, :meth:`Session.from_json` reads it."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["metis.session/1"] = "metis.session/1"
    session_id: str = Field(min_length=1)
    model: str | None = None
    """``provider:model``; None when the session talked to a router."""
    route: str | None = None
    """The router's name, when it talked to one."""
    messages: list[Message]
    options: SavedOptions = Field(default_factory=SavedOptions)
    tools: list[str] = Field(default_factory=empty_list)
    context_check: ContextCheck = "auto"
    compact: Literal["provider"] | None = None
    """``"provider"`` when the session leaves compaction to the provider (a function is not
    data: it is given again on restore)."""
    provider_state: ProviderState = Field(default_factory=ProviderState)
    usage: TokenUsage = Field(default_factory=TokenUsage)
    costs: list[Cost] | None = None
    """Each model call's cost; None in a session saved before costs were (its total is then
    unknown)."""


def saved_options(options: ModelOptions) -> SavedOptions:
    data = {key: value for key, value in options.items() if key not in NOT_SAVED}
    return SavedOptions.model_validate(data)


def restored_options(saved: SavedOptions) -> ModelOptions:
    # Field by field, so nested models stay models: the options are used as given.
    fields = {name: getattr(saved, name) for name in saved.model_fields_set}
    options: ModelOptions = {k: v for k, v in fields.items() if v is not None}  # type: ignore[assignment]
    return options


def saved_session(conversation: Conversation) -> SavedSession:
    """What :meth:`Session.to_json` writes of ``conversation``."""
    model = conversation.model
    return SavedSession(
        session_id=conversation.session_id,
        model=None if isinstance(model, Router) else model,
        route=model.name if isinstance(model, Router) else None,
        messages=list(conversation.history),
        options=saved_options(conversation.options),
        tools=tool_names(conversation.options.get("tools", ())),
        context_check=conversation.context_check,
        compact="provider" if conversation.compact == "provider" else None,
        provider_state=conversation.keeper.state,
        usage=conversation.spending.usage,
        costs=list(conversation.spending.costs),
    )


def restored(
    saved: SavedSession,
    model: ModelLike | None,
    tools: Sequence[Any] | None,
    api_key: str | None,
) -> tuple[ModelLike, ModelOptions]:
    """The model and options a saved session is restored with (given ones winning)."""
    check_tools(saved, tools)
    chosen = model if model is not None else saved.model
    if chosen is None:
        raise ConfigError(
            f"the session talked to route {saved.route!r}; give the router again: "
            "Session.from_json(data, model=router)"
        )
    options = restored_options(saved.options)
    if tools:
        options["tools"] = list(tools)
    if api_key is not None:
        options["api_key"] = api_key
    return chosen, options


def tool_names(tools: Sequence[Any]) -> list[str]:
    names = []
    for item in tools:
        if isinstance(item, ToolDefinition | Tool):
            names.append(item.name)
        else:
            names.append(getattr(item, "__name__", repr(item)))
    return names


def read_saved(data: str | bytes | dict[str, Any]) -> SavedSession:
    """A saved session from its JSON (text or parsed), or a ConfigError saying what is wrong."""
    if isinstance(data, str | bytes):
        try:
            data = json.loads(data)
        except (ValueError, RecursionError) as exc:  # nested too deep: RecursionError
            raise ConfigError(f"a saved session: not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"a saved session is a JSON object, got {type(data).__name__}")
    if data.get("format") != FORMAT:
        raise ConfigError(
            f"a saved session: format {data.get('format')!r} is not {FORMAT!r} (saved by "
            "another version of metis?)"
        )
    try:
        return SavedSession.model_validate(data)
    except ValidationError as exc:
        raise config_error(exc, "a saved session", SavedSession) from None


def check_tools(saved: SavedSession, tools: Sequence[Any] | None) -> None:
    """The tools given on restore are the ones the session was saved with."""
    given = tool_names(tools or ())
    missing = [name for name in saved.tools if name not in given]
    if missing:
        raise ConfigError(
            f"the session was saved with the tools {', '.join(saved.tools)}; give them again: "
            f"Session.from_json(data, tools=[...]) (missing: {', '.join(missing)})"
        )
