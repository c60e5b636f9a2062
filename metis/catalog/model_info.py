"""What the catalog knows about one model: limits, what it takes, how it reasons, what it costs.

A field the sources do not know is ``None``: capability_check then keeps the stack's
declaration for it rather than guessing (docs/catalog.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Literal

ReasoningForm = Literal["budget", "effort", "adaptive", "always"]
"""How a model is asked to think: a token ``budget`` (Anthropic's budget_tokens, Gemini 2.5's
thinkingBudget), an ``effort`` level (OpenAI's reasoning_effort, Gemini 3's thinking level),
``adaptive`` (the model decides; Anthropic from Opus 4.6), or ``always`` (it reasons and takes
no setting)."""


@dataclass(frozen=True, slots=True)
class PriceTier:
    """Rates that replace the base rates once a request's input exceeds ``above_input_tokens``."""

    above_input_tokens: int
    input: Decimal | None = None
    output: Decimal | None = None
    cache_read: Decimal | None = None
    cache_write: Decimal | None = None


@dataclass(frozen=True, slots=True)
class TierPrices:
    """Rates that replace the base rates for a call served at a service ``tier`` (``flex``,
    ``priority``, ``batch``: ``TokenUsage.service_tier``'s kinds); a rate left out is the
    base rate."""

    tier: str
    input: Decimal | None = None
    output: Decimal | None = None
    cache_read: Decimal | None = None
    cache_write: Decimal | None = None


@dataclass(frozen=True, slots=True)
class ModelPrices:
    """USD per million tokens (a cache rate left out is the input rate); the provider's own
    tools' requests (``TokenUsage.server_tools``) in USD per thousand, where they are priced."""

    input: Decimal
    output: Decimal
    cache_read: Decimal | None = None
    cache_write: Decimal | None = None
    reasoning: Decimal | None = None
    """Reasoning output, where it is priced apart from the rest of the output."""
    tiers: tuple[PriceTier, ...] = ()
    web_search_per_1k: Decimal | None = None
    file_search_per_1k: Decimal | None = None
    requests_per_1k: Decimal | None = None
    """USD per thousand calls of the model itself, billed apart from its tokens (Perplexity's
    Sonar request fee, which pays for the search each call makes)."""
    service_tiers: tuple[TierPrices, ...] = ()
    """The rates of the service tiers the provider bills apart, where the source gives them."""

    def for_input(self, total_input_tokens: int) -> ModelPrices:
        """The rates that apply to a request of ``total_input_tokens`` (the highest tier it
        passes replaces each rate it names)."""
        chosen = [t for t in self.tiers if total_input_tokens > t.above_input_tokens]
        if not chosen:
            return self
        tier = max(chosen, key=lambda t: t.above_input_tokens)
        return replace(
            self,
            tiers=(),
            input=self.input if tier.input is None else tier.input,
            output=self.output if tier.output is None else tier.output,
            cache_read=self.cache_read if tier.cache_read is None else tier.cache_read,
            cache_write=self.cache_write if tier.cache_write is None else tier.cache_write,
        )


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """One model as a provider (or platform) serves it."""

    provider: str
    """The catalog's provider id (models.dev's: ``anthropic``, ``amazon-bedrock``, ...)."""
    id: str
    """The wire name the provider knows the model by."""
    name: str = ""
    aliases: tuple[str, ...] = ()
    """Other wire names for the same model (dated snapshots, ``-latest``)."""
    context_window: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    input_modalities: tuple[str, ...] | None = None
    """Of ``text``, ``image``, ``pdf``, ``audio``, ``video``; None when unknown."""
    tools: bool | None = None
    parallel_tools: bool | None = None
    reasoning: bool | None = None
    reasoning_form: ReasoningForm | None = None
    reasoning_levels: tuple[str, ...] | None = None
    """The effort levels the model takes, where an entry states them (else read from the
    model's name: metis/catalog/knobs.py)."""
    refuses_sampling: tuple[str, ...] | None = None
    """Sampling settings the model refuses, where an entry states them (else as above)."""
    system_prompt: bool | None = None
    """Whether the model takes a system prompt, where an entry states it (else as above)."""
    structured_output: bool | None = None
    temperature: bool | None = None
    prompt_caching: bool | None = None
    prices: ModelPrices | None = None
    released: str | None = None
    deprecated: bool = False
    deprecation_date: str | None = None
    open_weights: bool | None = None
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """``provider/id``, unique in a catalog."""
        return f"{self.provider}/{self.id}"

    def takes(self, modality: str) -> bool | None:
        """Whether the model takes ``modality`` as input; None when the catalog cannot say."""
        if self.input_modalities is None:
            return None
        return modality in self.input_modalities
