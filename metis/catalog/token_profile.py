"""How one provider turns a canonical request into input tokens: the profile a stack declares
(``token_estimate:`` in its YAML), read when the stack is loaded; the estimate that uses it is
:mod:`metis.catalog.estimate`, loaded with the first estimate."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

CHARS_PER_TOKEN = 4.0
PER_MESSAGE = 4
PER_TOOL = 8
PER_IMAGE = 1_600


class TokenProfile(BaseModel):
    """How one provider turns a canonical request into input tokens.

    The defaults are the provider-neutral estimate: four characters a token, four tokens of
    framing a message, eight a tool definition, 1,600 an image."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text_counting: Literal["chars", "pieces"] = "chars"
    """``chars``: characters / ``chars_per_token``. ``pieces``: words, numbers, punctuation
    runs and line breaks, each about a token (see :func:`count_text`)."""
    chars_per_token: float = Field(default=CHARS_PER_TOKEN, gt=0)
    """``chars`` only."""
    word_chars: int = Field(default=10, ge=1)
    """``pieces`` only: a piece of n > word_chars characters costs ceil(n / word_chars)."""
    tokens_per_piece: float = Field(default=1.0, gt=0)
    """``pieces`` only: above 1 for a tokenizer with a smaller vocabulary than o200k's."""
    per_request: int = Field(default=0, ge=0)
    """Once for any request with messages: the framing that primes the reply."""
    per_message: int = Field(default=PER_MESSAGE, ge=0)
    """Framing around each message (role markers, separators)."""
    system_overhead: int = Field(default=0, ge=0)
    """Framing around the system prompt, when there is one."""
    per_tool_call: int = Field(default=0, ge=0)
    """Framing around each tool call and its result, beyond their name, input and text."""
    tool_call_rendering: Literal["json", "xml"] = "json"
    """How a tool call's input reaches the model: as JSON, or as one XML element per
    argument (``<parameter name="city">Paris</parameter>``)."""
    tool_rendering: Literal["json", "typescript"] = "json"
    """How tool definitions reach the model: JSON of name, description and schema, or
    OpenAI's TypeScript-like ``namespace functions { ... }``."""
    per_tool: int = Field(default=PER_TOOL, ge=0)
    """Framing around each tool definition."""
    tools_overhead: int = Field(default=0, ge=0)
    """The provider's hidden tool-use prompt, once when tools are present."""
    tools_overhead_forced: int | None = Field(default=None, ge=0)
    """The same when tool_choice forces a call (any, or a named tool); None: tools_overhead."""
    thinking_overhead: int = Field(default=0, ge=0)
    """Once when extended thinking is on and no tools are present."""
    thinking_overhead_with_tools: int = Field(default=0, ge=0)
    """Once when extended thinking is on and tools are present."""
    thinking_blocks: Literal["all", "current_turn", "none"] = "all"
    """Which reasoning blocks reach the model. ``current_turn``: the provider strips those of
    assistant turns that ended before the last user message, and keeps only the turn in
    progress (a tool loop). ``none``: the provider takes no reasoning blocks."""
    image_tokens: int = Field(default=PER_IMAGE, ge=0)
    """A flat cost per image, whatever its size."""
    models: dict[str, dict[str, Any]] = {}
    """Overrides for some models, by model-name prefix (the provider's name for the model):
    ``{"claude-3-opus": {"tools_overhead": 530}}``. The longest matching prefix wins."""

    @model_validator(mode="after")
    def _overrides_are_valid(self) -> TokenProfile:
        for prefix, override in self.models.items():
            if "models" in override:
                raise ValueError(f"models.{prefix}: an override cannot hold models")
            try:
                self.for_model(prefix)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
                )
                raise ValueError(f"models.{prefix}: {problems}") from None
        return self

    def for_model(self, model: str) -> TokenProfile:
        """This profile with the overrides of the longest ``models`` prefix of ``model``, made
        once per model: the same object each call, so what is kept per profile (a message's
        token count) is found again."""
        kept = _FOR_MODEL.get((id(self), model))
        if kept is not None and kept[0] is self:
            return kept[1]
        prefixes = [prefix for prefix in self.models if model.startswith(prefix)]
        found = self
        if prefixes:
            override = self.models[max(prefixes, key=len)]
            found = TokenProfile.model_validate(
                {**self.model_dump(exclude={"models"}, exclude_defaults=True), **override}
            )
        if len(_FOR_MODEL) >= 256:
            _FOR_MODEL.clear()
        _FOR_MODEL[(id(self), model)] = (self, found)
        return found


_FOR_MODEL: dict[tuple[int, str], tuple[TokenProfile, TokenProfile]] = {}
"""Each profile's per-model profiles, under the profile's address (held: a dead profile's
address taken by another never finds them)."""


DEFAULT_PROFILE = TokenProfile()
