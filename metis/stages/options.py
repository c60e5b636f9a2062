"""The options of the built-in stages a stack gives options to, apart from the stages' code.

Building an adapter checks a stack's options with these models (a misspelt option is a
StackError there); the stage modules, and the canonical model and the codecs they work with,
load when the adapter's pipeline is first used (:meth:`metis.stacks.loader.StackSpec.checked`,
the declarations in :mod:`metis.pipeline.registry`). Each stage's class names its model as
``Options``, as a stage of yours declares its own.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from metis.model.knobs import CacheTTL
from metis.wire.codec import rules_name
from metis.wire.rules import RULES, RULES_DIALECT

_FROZEN = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class CodecOptions(BaseModel):
    """The options of a stage that works through the codec (``encode``, ``normalize``): its
    name and settings (both filled in from the stack's ``codec:`` and ``codec_settings:``)."""

    model_config = _FROZEN

    codec: str
    settings: dict[str, Any] = {}


def codec_dialect(options: dict[str, Any]) -> str | None:
    """The dialect a codec stage's options name (a configured codec's own name)."""
    codec, settings = options.get("codec"), options.get("settings")
    if not isinstance(codec, str):
        return None
    return rules_name(codec, settings if isinstance(settings, dict) else None)


def rules_dialect(options: dict[str, Any]) -> str | None:
    """The dialect a ``rules`` option names (``pre_send_check``, ``cache_control``)."""
    rules = options.get("rules")
    return RULES_DIALECT.get(rules, rules) if isinstance(rules, str) else None


class ToolIdRule(BaseModel):
    """The ids of the models a ``tool_ids`` ``models`` key names."""

    model_config = _FROZEN

    prefix: str = Field(default="", description="how these models' ids begin")
    max_length: int = Field(ge=8)


class ToolNameRule(BaseModel):
    """The tool names a provider takes: characters of ``chars`` (a regular expression's
    character class, without its brackets), the first of ``first`` when set, at most
    ``max_length``. A tool whose name breaks it is sent under one that keeps it, and its calls
    come back under the name it was given (metis/stages/policy/tool_names.py)."""

    model_config = _FROZEN

    chars: str = Field(default="a-zA-Z0-9_-", min_length=1)
    first: str | None = Field(default=None, min_length=1)
    max_length: int = Field(default=64, ge=16)

    @field_validator("chars", "first")
    @classmethod
    def _a_class(cls, value: str | None, info: ValidationInfo) -> str | None:
        """A class a mended name keeps: ``_`` (and, for ``chars``, a hash's hex digits)."""
        if value is None:
            return None
        needed = "_0123456789abcdef" if info.field_name == "chars" else "_"
        try:
            takes = re.fullmatch(f"[{value}]+", needed) is not None
        except re.error as error:
            raise ValueError(f"{value!r} is not a character class's body: {error}") from None
        if not takes:
            raise ValueError(f"{value!r} must take {needed!r}, which a mended name is made of")
        return value


class ToolIdsOptions(BaseModel):
    model_config = _FROZEN

    prefix: str = Field(default="call_", description="how this provider's ids begin")
    max_length: int = Field(default=40, ge=8)
    models: dict[str, ToolIdRule] = Field(
        default={},
        description="a rule of its own for the models whose wire id begins with the key (the "
        "longest key wins): a service passing a model's own id rule through",
    )
    names: ToolNameRule = Field(
        default=ToolNameRule(),
        description="the tool names the provider takes; others are sent under names it takes",
    )
    reuse_issued_ids: bool = Field(
        default=True,
        description="send back the ids the provider issued; false for a provider that "
        "reuses ids across replies (so each reply's ids are new to it)",
    )


class CacheControlOptions(BaseModel):
    """The stack's default policy (a request's ``cache`` replaces it) and its dialect."""

    model_config = _FROZEN

    rules: str | None = None
    system: bool = True
    tools: bool = True
    conversation: bool | Literal["auto"] = "auto"
    ttl: CacheTTL | None = None
    key: bool = False
    """Send OpenAI's ``prompt_cache_key`` and ``prompt_cache_retention`` (OpenAI and
    Azure OpenAI take them; other servers of the dialect may refuse them)."""


class PreSendCheckOptions(BaseModel):
    model_config = _FROZEN

    rules: str

    @field_validator("rules")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in RULES:
            raise ValueError(f"unknown rule set {value!r}; known: {', '.join(sorted(RULES))}")
        return value


class DecodeOptions(BaseModel):
    model_config = _FROZEN

    format: Literal["sse", "ndjson", "json", "eventstream"] = "sse"


class StrictSchemaOptions(BaseModel):
    model_config = _FROZEN

    tools: bool = True
    response_format: bool = True


class SchemaCleanupOptions(BaseModel):
    model_config = _FROZEN

    remove: list[str] = Field([], description="keywords to take out")
    inline_refs: bool = False
    nullable_type_lists: bool = False
    output_schema: bool = False
    quiet_closed_objects: bool = False
    """Take out ``additionalProperties: false`` without the WARN: a closed object (every
    ``@metis.tool`` declares one) that the provider would not hold the model to anyway."""


class ThinkingFilterOptions(BaseModel):
    model_config = _FROZEN

    keep: Literal["same_model", "same_provider", "never"] = "same_model"
    as_text: bool = False
    signed_only: bool = True
    """Refuse reasoning without a signature (a provider whose reasoning carries none,
    DeepSeek's ``reasoning_content``, sets it false)."""
    quiet_own_unsigned: bool = False
    """Leave out the model's own unsigned reasoning without the WARN: nothing it needs is
    lost where its signatures ride on the parts after it (Gemini's thought summaries)."""


WIRE_ANY = "*"


def parse_path(text: str, *, wildcards: bool = True) -> tuple[str, ...]:
    """``"tools.*.function.strict"`` -> ``("tools", "*", "function", "strict")``."""
    if not isinstance(text, str) or not text:
        raise ValueError("a path must be a non-empty string")
    parts = tuple(text.split("."))
    if any(not part for part in parts):
        raise ValueError(f"path {text!r} has an empty segment")
    if not wildcards and WIRE_ANY in parts:
        raise ValueError(f"path {text!r}: '*' is not allowed here")
    return parts


class WireFieldsOptions(BaseModel):
    """``wire_fields``' edits; each path is parsed here, so a malformed one fails at assembly."""

    model_config = _FROZEN

    rename: dict[str, str] = {}
    drop: list[str] = []
    set: dict[str, Any] = {}

    @field_validator("rename")
    @classmethod
    def _rename_paths(cls, value: dict[str, str]) -> dict[str, str]:
        for source, target in value.items():
            src = parse_path(source, wildcards=False)
            dst = parse_path(target, wildcards=False)
            if src == dst[: len(src)] or dst == src[: len(dst)]:
                raise ValueError(f"cannot rename {source!r} to {target!r}: one holds the other")
        return value

    @field_validator("drop")
    @classmethod
    def _drop_paths(cls, value: list[str]) -> list[str]:
        for path in value:
            parse_path(path)
        return value

    @field_validator("set")
    @classmethod
    def _set_paths(cls, value: dict[str, Any]) -> dict[str, Any]:
        for path in value:
            parse_path(path)
        return value
