"""The canonical request (docs/contract.md §3) and what it carries: tools, tool choice, thinking."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from metis.core.empty import empty_dict, empty_list
from metis.core.ids import new_request_id
from metis.model.base import Canonical
from metis.model.cache import CachePolicy
from metis.model.content import Message
from metis.model.knobs import ReasoningEffort
from metis.model.message_dicts import as_messages
from metis.model.server_tools import ServerTool


class ToolAnnotations(Canonical):
    """Behaviour hints for a tool (docs/contract.md); never sent to providers that lack them."""

    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None


class FreeformInput(Canonical):
    """A tool whose input is free text, not JSON (OpenAI's custom tools), optionally held to a
    grammar: ``syntax`` (``lark`` or ``regex``) and its ``definition``. A call of such a tool
    is a tool call whose input is ``{"input": "<the text>"}`` (docs/contract.md §10)."""

    syntax: Literal["lark", "regex"] | None = None
    definition: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _grammar_whole(self) -> FreeformInput:
        if (self.syntax is None) != (self.definition is None):
            raise ValueError("a grammar needs both its syntax and its definition")
        return self


FREEFORM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "The tool's input, as free text."}},
    "required": ["input"],
    "additionalProperties": False,
}
"""The JSON form of a freeform tool's input, for a provider without custom tools."""


class ToolDefinition(Canonical):
    """A tool the model may call: its name, a description and a JSON schema of its input.
    :func:`metis.tool` makes one from a Python function or a pydantic model. A ``freeform``
    tool takes free text instead (its ``input_schema`` is then :data:`FREEFORM_SCHEMA`).

    ``strict``: ``True`` asks the provider to hold the call's input to the schema (OpenAI's
    strict mode, Anthropic's and Bedrock's strict tool use); where the model cannot, the flag
    is left out with the dropped-content WARN. ``False`` never sends it strict. ``None`` (the
    default) is the stack's own choice: OpenAI Chat makes a tool strict where its schema
    converts, the others send it as written (docs/contract.md §10)."""

    name: str = Field(min_length=1)
    description: str = ""
    input_schema: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    annotations: ToolAnnotations | None = None
    freeform: FreeformInput | None = None
    strict: bool | None = None

    @model_validator(mode="before")
    @classmethod
    def _freeform_schema(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("freeform") is not None:
            given = data.get("input_schema")
            if given is not None and given != FREEFORM_SCHEMA:
                raise ValueError("a freeform tool takes text: give it no input_schema")
            data = {**data, "input_schema": copy.deepcopy(FREEFORM_SCHEMA)}
        return data


class ToolChoice(Canonical):
    """auto: the model decides; any: it must call some tool; tool: it must call ``name``;
    none: it must not call tools."""

    type: Literal["auto", "any", "tool", "none"] = "auto"
    name: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _another_apis(cls, data: Any) -> Any:
        meant = tool_choice_meant(data)
        if meant is not None:
            raise ValueError(f"{data!r:.80} is another API's tool choice; metis's is {meant}")
        return data

    @model_validator(mode="after")
    def _name_iff_tool(self) -> ToolChoice:
        if (self.type == "tool") != (self.name is not None):
            raise ValueError("tool_choice 'tool' needs a name, and only 'tool' takes one")
        return self

    @classmethod
    def auto(cls) -> ToolChoice:
        """The model decides whether to call a tool (the default)."""
        return cls(type="auto")

    @classmethod
    def any(cls) -> ToolChoice:
        """The model must call a tool, any of them."""
        return cls(type="any")

    @classmethod
    def tool(cls, name: str) -> ToolChoice:
        """The model must call the tool named ``name``."""
        return cls(type="tool", name=name)

    @classmethod
    def none(cls) -> ToolChoice:
        """The model must not call a tool."""
        return cls(type="none")


_OPENAI_CHOICES = {"auto": "auto()", "none": "none()", "required": "any()", "any": "any()"}


def tool_choice_meant(value: Any) -> str | None:
    """The :class:`ToolChoice` that another API's tool choice means, as code (OpenAI's
    ``"required"`` is ``ToolChoice.any()``, its function dict ``ToolChoice.tool('name')``,
    Anthropic's ``disable_parallel_tool_use`` the call's ``parallel_tool_calls=False``); None
    for a value that is none of these (a ToolChoice, or a dict of its own fields)."""
    if isinstance(value, str):
        meant = _OPENAI_CHOICES.get(value)
        return f"ToolChoice.{meant}" if meant else None
    if not isinstance(value, dict):
        return None
    kind = value.get("type")
    if kind == "allowed_tools":
        return "ToolChoice.auto() or .any(), with tools= only the tools allowed"
    if "disable_parallel_tool_use" in value and kind in ("auto", "any", "tool"):
        own = {key: item for key, item in value.items() if key != "disable_parallel_tool_use"}
        named = f"tool({own.get('name')!r})" if kind == "tool" else f"{kind}()"
        return f"ToolChoice.{named}, parallel_tool_calls=False"
    if kind in ("function", "custom"):
        inner = value.get(kind, value)
        name = inner.get("name") if isinstance(inner, dict) else None
        return f"ToolChoice.tool({name!r})" if isinstance(name, str) else None
    return None


class ThinkingConfig(Canonical):
    """Ask the model to reason before answering: within ``budget_tokens``, or at an ``effort``
    level (one or the other). Each model is asked the way it takes (docs/reasoning.md): a
    budget for an effort model, or a level it lacks, is converted, with a warning."""

    budget_tokens: int | None = Field(default=None, ge=1, strict=True)
    effort: ReasoningEffort | None = None
    """``none`` (off where the model allows it), ``minimal``, ``low``, ``medium``, ``high``,
    ``xhigh``, ``max``."""
    summary: Literal["auto", "concise", "detailed"] | None = None
    """The reasoning summary OpenAI's Responses API returns (default ``auto``)."""
    display: Literal["summarized", "omitted"] | None = None
    """Whether the reasoning comes back as text (``summarized``, the default) or is left out
    (``omitted``: Claude's thinking blocks hold their signature alone, the Responses API is
    asked for no summary); reported dropped by providers without the choice."""

    @model_validator(mode="after")
    def _budget_or_effort(self) -> ThinkingConfig:
        if (self.budget_tokens is None) == (self.effort is None):
            raise ValueError(
                "thinking takes a budget_tokens or an effort, one of the two"
                + (" (not both)" if self.effort is not None else "")
            )
        if self.display == "omitted" and self.summary is not None:
            raise ValueError("thinking takes a summary or display 'omitted', not both")
        return self

    @classmethod
    def coerce(cls, value: Any) -> Any:
        """``"high"`` (an effort) or ``8000`` (a budget) as a ThinkingConfig; anything else
        as it is, for pydantic to check."""
        if isinstance(value, str):
            return {"effort": value}
        if isinstance(value, int) and not isinstance(value, bool):
            return {"budget_tokens": value}
        return value


class Compaction(Canonical):
    """Ask the provider to compact the conversation itself once its input passes
    ``trigger_tokens`` (Anthropic's context management, the Responses API's
    ``context_management``): the reply then holds a compaction block, an
    :class:`~metis.model.OpaqueBlock` of kind ``compaction`` that goes back only to that
    provider (docs/contract.md §8). ``instructions``: what the summary should keep (Anthropic
    only). A provider without compaction drops it with one WARN (docs/sessions.md)."""

    trigger_tokens: int = Field(ge=1)
    instructions: str | None = Field(default=None, min_length=1)


class CanonicalRequest(Canonical):
    """One call in metis's own terms, whatever the provider: the model (``provider:name``),
    the messages, the output limit, and what else the call asks for (tools, tool choice,
    system prompt, sampling, structured output, thinking, session). docs/contract.md §1."""

    model: str = Field(min_length=1, description="canonical 'provider:name' or a wire name")
    messages: list[Message]
    max_output_tokens: int = Field(ge=1, strict=True)
    request_id: str = Field(default_factory=new_request_id)
    session_id: str | None = None
    tools: list[ToolDefinition] = Field(default_factory=empty_list)
    server_tools: list[ServerTool] = Field(default_factory=empty_list)
    """Tools the provider runs itself (web search, code execution, ...: docs/contract.md §11)."""
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    system_prompt: str | None = None
    stop_sequences: list[str] = Field(default_factory=empty_list)
    temperature: float | None = Field(default=None, ge=0, strict=True)
    top_p: float | None = Field(default=None, ge=0, le=1, strict=True)
    top_k: int | None = Field(default=None, ge=1, strict=True)
    seed: int | None = Field(default=None, strict=True)
    frequency_penalty: float | None = Field(default=None, strict=True)
    presence_penalty: float | None = Field(default=None, strict=True)
    output_schema: dict[str, Any] | None = None
    thinking: ThinkingConfig | None = None
    """How the model reasons first: a :class:`ThinkingConfig`, or its effort (``"high"``) or
    budget (``8000``) alone."""
    provider_options: dict[str, dict[str, Any]] = Field(default_factory=empty_dict)
    """Wire fields for one provider only, keyed by its name (the adapter's, a stack it extends,
    or its catalog id: ``{"openai": {"service_tier": "flex"}}``); merged into that provider's
    body, ignored by every other (docs/contract.md §13)."""
    extra_headers: dict[str, dict[str, str]] = Field(default_factory=empty_dict)
    """HTTP headers for one provider only, keyed as ``provider_options``."""
    extra_query: dict[str, dict[str, str]] = Field(default_factory=empty_dict)
    """URL query parameters for one provider only, keyed as ``provider_options``."""
    compaction: Compaction | None = None
    """Compaction by the provider, where it has it (:class:`Compaction`)."""
    cache: CachePolicy | None = None
    """What to cache (docs/caching.md); None: the provider stack's default policy."""
    stream: bool | None = None
    """How the HTTP call is made: streamed (True) or one whole body (False). None, the default:
    as the method asks (``stream()`` streams where the provider can; ``complete()`` does not).
    Either method honours an explicit value: ``complete()`` of a streamed call folds its events,
    ``stream()`` of a whole-body call yields the same events at once."""

    @field_validator("thinking", mode="before")
    @classmethod
    def _thinking_shorthand(cls, value: Any) -> Any:
        return ThinkingConfig.coerce(value)

    @field_validator("output_schema")
    @classmethod
    def _a_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        """An API's wrapper given as the schema (OpenAI's ``response_format``, Anthropic's
        ``output_format``) would be sent as a schema no reply is held to, silently."""
        if value is not None and value.get("type") in ("json_schema", "json_object", "text"):
            raise ValueError(
                f"type {value['type']!r} is an API's response format, not a JSON schema: give "
                "the schema inside it (OpenAI's response_format['json_schema']['schema'])"
            )
        return value

    @field_validator("provider_options", "extra_headers", "extra_query", mode="before")
    @classmethod
    def _keyed_by_provider(cls, value: Any, info: ValidationInfo) -> Any:
        """A header or wire field given at the top (``{"x-trace": "1"}``) says what the
        field's keys are, beside pydantic's "Input should be a valid dictionary"."""
        if isinstance(value, Mapping):
            for key, inner in value.items():
                if not isinstance(inner, Mapping):
                    raise ValueError(
                        f"{info.field_name} is keyed by provider, each a dict "
                        f"({{'anthropic': {{{key!r}: ...}}}}); {key!r} is {inner!r}"
                    )
        return value

    @field_validator("messages", mode="before")
    @classmethod
    def _checked_dicts(cls, value: Any) -> Any:
        """A message given as a dict is checked with its index (``metis.model.message_dicts``)."""
        if isinstance(value, list) and not all(isinstance(m, Message) for m in value):
            return as_messages(value)
        return value
