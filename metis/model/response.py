"""Stop reasons, token usage and the canonical response (docs/contract.md §3)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypedDict

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from metis.core.empty import empty_list
from metis.core.money import USDAmount
from metis.core.shown_fields import shown_fields
from metis.model.base import Canonical
from metis.model.citation import Citation
from metis.model.content import (
    ContentBlock,
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from metis.model.stop import StopKind as StopKind
from metis.model.tier import ServiceTier


class StopReason(Canonical):
    """A normalized kind plus the provider's own string; nothing is silently called end_turn."""

    kind: StopKind
    raw: str | None = None
    sequence: str | None = None
    """Which of the request's stop sequences ended the reply, where the provider says it
    (Anthropic; Bedrock, for the models that report it); None otherwise."""
    category: str | None = None
    """The policy category of a refusal, where the provider names one (Anthropic's
    ``stop_details.category``: ``cyber``, ``bio``, ...); None otherwise (and not dumped)."""
    explanation: str | None = None
    """A refusal's explanation in words, where the provider gives one apart from the reply's
    text (Anthropic's ``stop_details.explanation``); None otherwise (and not dumped)."""

    def __str__(self) -> str:
        """The kind's word, and the provider's in parentheses where it differs:
        ``max_tokens (length)``; ``repr`` gives every field that is set."""
        if self.raw is None or self.raw == self.kind.value:
            return self.kind.value
        return f"{self.kind.value} ({self.raw})"

    def __repr_args__(self) -> Iterator[tuple[str, Any]]:
        return shown_fields(self)

    @model_serializer(mode="wrap")
    def _details_only_when_set(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):  # dumps as it did before them
            if self.category is None:
                data.pop("category", None)
            if self.explanation is None:
                data.pop("explanation", None)
        return data


class ServerToolRequests(Canonical):
    """The requests a provider's own tools made within one call, billed per request apart
    from the tokens (``TokenUsage.server_tools``): Anthropic's ``usage.server_tool_use``,
    OpenAI Responses' ``web_search_call`` and ``file_search_call`` items, Gemini's grounding
    ``webSearchQueries`` (docs/contract.md §5)."""

    web_search: int = Field(default=0, ge=0)
    web_fetch: int = Field(default=0, ge=0)
    file_search: int = Field(default=0, ge=0)

    def __bool__(self) -> bool:
        return bool(self.web_search or self.web_fetch or self.file_search)

    def plus(self, more: ServerToolRequests) -> ServerToolRequests:
        """The two counts added up."""
        if not more:
            return self
        if not self:
            return more
        return ServerToolRequests(
            web_search=self.web_search + more.web_search,
            web_fetch=self.web_fetch + more.web_fetch,
            file_search=self.file_search + more.file_search,
        )


class TokenUsage(Canonical):
    """Token counts as the provider reported them; no cost (that is :mod:`metis.cost`'s job).

    ``input_tokens`` counts only uncached input, as Anthropic reports it: the total input is
    ``input_tokens + cached_input_tokens + cache_creation_input_tokens`` for every provider,
    so one price formula fits all (docs/contract.md §5).
    """

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cached_input_tokens: int = Field(default=0, ge=0)
    cache_creation_input_tokens: int = Field(default=0, ge=0)
    reasoning_tokens: int = Field(default=0, ge=0)
    """The part of ``output_tokens`` the model spent reasoning (OpenAI's ``reasoning_tokens``,
    Gemini's ``thoughtsTokenCount``, ...): always included in ``output_tokens``, and 0 where
    the provider does not report it."""
    estimated: bool = False
    other_models: tuple[ModelUsage, ...] = ()
    """What the call spent on models other than its own, one entry per model, apart from the
    counts above (which are the call's model's): Anthropic's advisor tool runs a second model
    within the call (``usage.iterations``' ``advisor_message`` passes). ``metis.cost_of``
    prices each at its own model's rates (docs/contract.md §5)."""
    server_tools: ServerToolRequests = ServerToolRequests()
    """The requests the provider's own tools made (web searches, fetches, file searches),
    billed per request: ``metis.cost_of`` prices them at the model's per-request rates."""
    service_tier: ServiceTier | None = None
    """The tier the provider says served the call (flex, priority, batch...), None where it
    does not say: ``metis.cost_of`` prices the call at that tier's rates."""
    cache_creation_1h_input_tokens: int = Field(default=0, ge=0)
    """The part of ``cache_creation_input_tokens`` written to be kept an hour (Anthropic's
    ``cache_creation.ephemeral_1h_input_tokens``, Bedrock's ``cacheDetails`` of ttl ``1h``),
    billed at twice the input rate; the rest were written for the default five minutes."""
    speed: str | None = None
    """The speed the provider says it ran the call at (Anthropic's ``usage.speed``:
    ``standard`` or ``fast``, its fast mode, billed at a multiple of the standard rates); None
    where it does not say."""
    inference_geo: str | None = None
    """Where the provider says it ran the call (Anthropic's ``usage.inference_geo``: ``us``,
    ``global``...; US-only inference is billed at 1.1 times the rates from the models released
    in February 2026); None where it does not say."""
    input_audio_tokens: int = Field(default=0, ge=0)
    """The part of the total input that was audio (OpenAI's ``prompt_tokens_details.
    audio_tokens``, Gemini's ``promptTokensDetails`` of modality ``AUDIO``), cached or not,
    where the provider counts it: priced at the model's audio rate where it has one."""
    output_audio_tokens: int = Field(default=0, ge=0)
    """The part of ``output_tokens`` that was audio (OpenAI's ``completion_tokens_details.
    audio_tokens``, Gemini's ``candidatesTokensDetails`` of modality ``AUDIO``), likewise."""

    def __repr_args__(self) -> Iterator[tuple[str, Any]]:
        return shown_fields(self)  # the counts that are not 0: TokenUsage(input_tokens=12)

    @model_serializer(mode="wrap")
    def _extras_only_when_any(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):  # a usage of tokens of one model dumps as it always did
            if not self.other_models:
                data.pop("other_models", None)
            if not self.server_tools:
                data.pop("server_tools", None)
            if self.service_tier is None:
                data.pop("service_tier", None)
            for name in DETAIL:
                if not data.get(name):
                    data.pop(name, None)
        return data

    @property
    def total_input_tokens(self) -> int:
        """Every input token: uncached, read from the cache and written to it."""
        return self.input_tokens + self.cached_input_tokens + self.cache_creation_input_tokens

    def plus(self, more: TokenUsage) -> TokenUsage:
        """The two usages added up (a session's or a run's total), each other model's
        counts added to that model's; the tier, speed and place are kept where both parts agree."""
        others = {other.model: other.usage for other in self.other_models}
        for other in more.other_models:
            mine = others.get(other.model)
            others[other.model] = other.usage if mine is None else mine.plus(other.usage)
        return TokenUsage(
            input_tokens=self.input_tokens + more.input_tokens,
            output_tokens=self.output_tokens + more.output_tokens,
            cached_input_tokens=self.cached_input_tokens + more.cached_input_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens
            + more.cache_creation_input_tokens,
            reasoning_tokens=self.reasoning_tokens + more.reasoning_tokens,
            estimated=self.estimated or more.estimated,
            other_models=tuple(ModelUsage(model=m, usage=u) for m, u in others.items()),
            server_tools=self.server_tools.plus(more.server_tools),
            service_tier=_summed(self, more, "service_tier"),
            speed=_summed(self, more, "speed"),
            inference_geo=_summed(self, more, "inference_geo"),
            cache_creation_1h_input_tokens=self.cache_creation_1h_input_tokens
            + more.cache_creation_1h_input_tokens,
            input_audio_tokens=self.input_audio_tokens + more.input_audio_tokens,
            output_audio_tokens=self.output_audio_tokens + more.output_audio_tokens,
        )


def _summed(one: TokenUsage, other: TokenUsage, name: str) -> Any:
    """The tier (speed, place) of a sum: the parts' where they agree, or where one part counts
    nothing (a total's start); None where they were served at different tiers."""
    mine, theirs = getattr(one, name), getattr(other, name)
    if mine == theirs or _counts_nothing(one):
        return theirs
    return mine if _counts_nothing(other) else None


def _counts_nothing(usage: TokenUsage) -> bool:
    return not (
        usage.input_tokens
        or usage.output_tokens
        or usage.cached_input_tokens
        or usage.cache_creation_input_tokens
        or usage.other_models
        or usage.server_tools
    )


class UsageDetail(TypedDict, total=False):
    """What a codec reports of a :class:`TokenUsage` besides its counts and tier, each as
    the field of the same name (``MessageBuilder.usage``)."""

    cache_creation_1h_input_tokens: int
    speed: str
    inference_geo: str
    input_audio_tokens: int
    output_audio_tokens: int


DETAIL = tuple(UsageDetail.__annotations__)
"""The fields a usage dumps only when they say something (not 0, not None)."""


class ModelUsage(Canonical):
    """The tokens one call spent on another model than its own (``TokenUsage.other_models``):
    ``model`` as the provider names it (``claude-opus-4-8``), ``usage`` its counts."""

    model: str
    usage: TokenUsage


class DroppedContent(Canonical):
    """One structured WARN of a call: content (a block, or a request setting such as
    ``thinking``) that the provider could not take, left out whole, and why.

    ``repeated`` is True when an earlier call of the session already dropped the same content
    (the same kind of drop, in the same message): it is still listed with the call that made
    it. The WARN line is logged once per kind of drop in a session (docs/contract.md §8)."""

    block_type: str
    reason: str
    provider: str
    message_id: str | None = None
    repeated: bool = False


class CanonicalResponse(Canonical):
    """A whole reply, folded from the call's events: content, stop reason, usage, latency,
    and the call's warnings. ``.text``, ``.tool_calls`` and ``.message`` (the reply as the
    next assistant message) make continuing a conversation one line."""

    request_id: str
    model: str
    provider: str
    content: list[ContentBlock]
    stop_reason: StopReason
    usage: TokenUsage
    latency_ms: int
    message_id: str | None = None
    warnings: list[DroppedContent] = Field(default_factory=empty_list)
    """What this call left out, and why (also logged, once per session)."""
    cost_usd: USDAmount | None = None
    """What the call cost in USD at the model catalog's prices, on a reply of
    ``metis.complete`` or of a session, as a run's ``RunResult.cost_usd`` counts it (0 for a
    model no table prices: :attr:`cost_known` is then False); None on a reply an adapter or
    router returns itself. For its parts and pricing version:
    ``metis.cost_of(reply.model, reply.usage)``."""
    cost_known: bool = False
    """``cost_usd`` is the call's whole cost, its model priced; False when no table prices it
    (``cost_usd`` is then 0, a lower bound, as ``RunResult.cost_known`` says of a run) or
    metis did not price the reply (``cost_usd`` None)."""

    @property
    def text(self) -> str:
        """The reply's text blocks, joined."""
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def thinking(self) -> str:
        """The reasoning the reply shows (its thinking blocks, joined); empty where the model
        reasoned without showing it, or did not reason (docs/reasoning.md)."""
        return "\n\n".join(b.thinking for b in self.content if isinstance(b, ThinkingBlock))

    @property
    def citations(self) -> list[Citation]:
        """The sources the reply's text cites, in order (docs/contract.md §12)."""
        return [c for b in self.content if isinstance(b, TextBlock) for c in b.citations or []]

    @property
    def tool_calls(self) -> list[ToolUseBlock]:
        """The tool calls the reply makes, in order."""
        return [b for b in self.content if isinstance(b, ToolUseBlock)]

    @property
    def message(self) -> Message:
        """The reply as the next assistant message of the conversation. A reply cut short
        (cancelled, or ended by an error) keeps what it said, but not its tool calls: they
        were never finished, so no result may answer them, and the next request stays valid
        for every provider."""
        return reply_message(self.content, self.stop_reason)


def reply_message(content: list[ContentBlock], stop_reason: StopReason) -> Message:
    """A reply's content as the next assistant message: a reply cut short (cancelled, or
    ended by an error) keeps what it said, but not its unfinished tool calls."""
    if stop_reason.kind in (StopKind.CANCELLED, StopKind.ERROR):
        content = [b for b in content if not isinstance(b, ToolUseBlock)]
    return Message(role=Role.ASSISTANT, content=list(content))
