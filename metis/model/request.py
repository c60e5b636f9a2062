"""The canonical request (docs/contract.md §3) and what it carries: tools, tool choice, thinking."""

from __future__ import annotations

import copy
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from metis.core.ids import new_request_id
from metis.model.cache import CachePolicy
from metis.model.content import Message
from metis.model.message_dicts import as_messages


class ToolAnnotations(BaseModel):
    """Behaviour hints for a tool (docs/contract.md); never sent to providers that lack them."""

    model_config = ConfigDict(frozen=True)

    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None


class FreeformInput(BaseModel):
    """A tool whose input is free text, not JSON (OpenAI's custom tools), optionally held to a
    grammar: ``syntax`` (``lark`` or ``regex``) and its ``definition``. A call of such a tool
    is a tool call whose input is ``{"input": "<the text>"}`` (docs/contract.md §10)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

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


class ToolDefinition(BaseModel):
    """A tool the model may call: its name, a description and a JSON schema of its input.
    :func:`metis.tool` makes one from a Python function or a pydantic model. A ``freeform``
    tool takes free text instead (its ``input_schema`` is then :data:`FREEFORM_SCHEMA`)."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1)
    description: str = ""
    input_schema: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    annotations: ToolAnnotations | None = None
    freeform: FreeformInput | None = None

    @model_validator(mode="before")
    @classmethod
    def _freeform_schema(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("freeform") is not None:
            given = data.get("input_schema")
            if given is not None and given != FREEFORM_SCHEMA:
                raise ValueError("a freeform tool takes text: give it no input_schema")
            data = {**data, "input_schema": copy.deepcopy(FREEFORM_SCHEMA)}
        return data


class ToolChoice(BaseModel):
    """auto: the model decides; any: it must call some tool; tool: it must call ``name``;
    none: it must not call tools."""

    model_config = ConfigDict(frozen=True)

    type: Literal["auto", "any", "tool", "none"] = "auto"
    name: str | None = None

    @model_validator(mode="after")
    def _name_iff_tool(self) -> ToolChoice:
        if (self.type == "tool") != (self.name is not None):
            raise ValueError("tool_choice 'tool' needs a name, and only 'tool' takes one")
        return self

    @classmethod
    def auto(cls) -> ToolChoice:
        return cls(type="auto")

    @classmethod
    def any(cls) -> ToolChoice:
        return cls(type="any")

    @classmethod
    def tool(cls, name: str) -> ToolChoice:
        return cls(type="tool", name=name)

    @classmethod
    def none(cls) -> ToolChoice:
        return cls(type="none")


class ThinkingConfig(BaseModel):
    """Ask the model to reason before answering, within ``budget_tokens``."""

    model_config = ConfigDict(frozen=True)

    budget_tokens: int = Field(ge=1)


class CanonicalRequest(BaseModel):
    """One call in metis's own terms, whatever the provider: the model (``provider:name``),
    the messages, the output limit, and what else the call asks for (tools, tool choice,
    system prompt, sampling, structured output, thinking, session). docs/contract.md §1."""

    model_config = ConfigDict(frozen=True)

    model: str = Field(min_length=1, description="canonical 'provider:name' or a wire name")
    messages: list[Message]
    max_output_tokens: int = Field(ge=1)
    request_id: str = Field(default_factory=new_request_id)
    session_id: str | None = None
    tools: list[ToolDefinition] = Field(default_factory=list)
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    system_prompt: str | None = None
    stop_sequences: list[str] = Field(default_factory=list)
    temperature: float | None = Field(default=None, ge=0)
    output_schema: dict[str, Any] | None = None
    thinking: ThinkingConfig | None = None
    cache: CachePolicy | None = None
    """What to cache (docs/caching.md); None: the provider stack's default policy."""
    stream: bool | None = None
    """How the HTTP call is made: streamed (True) or one whole body (False). None, the default:
    as the method asks (``stream()`` streams where the provider can; ``complete()`` does not).
    Either method honours an explicit value: ``complete()`` of a streamed call folds its events,
    ``stream()`` of a whole-body call yields the same events at once."""

    @field_validator("messages", mode="before")
    @classmethod
    def _checked_dicts(cls, value: Any) -> Any:
        """A message given as a dict is checked with its index (``metis.model.message_dicts``)."""
        if isinstance(value, list) and not all(isinstance(m, Message) for m in value):
            return as_messages(value)
        return value
