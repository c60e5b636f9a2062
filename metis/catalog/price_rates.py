"""A model's rates, USD per million tokens, as a price table gives them: base rates, the
long-prompt tiers, and the defaults for rates a table leaves out (:mod:`metis.cost` prices
calls with them)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr
from pydantic_core import PydanticCustomError

from metis.core.config_files import show
from metis.model.tier import TierKind


def _rate(value: Any) -> Any:
    """A rate from YAML: an int, a float (read through its shortest repr) or decimal text."""
    rate: Decimal | None = None
    if isinstance(value, int | float | str | Decimal) and not isinstance(value, bool):
        try:
            rate = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
        except InvalidOperation:
            rate = None
    if rate is None or not rate.is_finite():
        raise PydanticCustomError("rate_type", _RATE_ERROR.format("a number"), _got(value))
    if rate < 0:
        raise PydanticCustomError("rate_range", _RATE_ERROR.format("a number >= 0"), _got(value))
    return rate


_RATE_ERROR = "expected {} (USD per million tokens), got {{got}}"


def _got(value: Any) -> dict[str, str]:
    return {"got": show(value)}


Rate = Annotated[Decimal, BeforeValidator(_rate)]


FAST_MODE = Decimal(2)
"""The multiple of the standard rates a fast-mode call is priced at where neither the table nor
:data:`metis.catalog.catalog_prices.FAST_MULTIPLES` gives one: the multiple of every Claude
model after Opus 4.7 whose fast-mode price is published (Opus 4.8, 5 and 5.5); an assumption
``Cost.rate_assumed`` names."""


class PriceTierEntry(BaseModel):
    """Rates that apply to every token of a call whose total input exceeds
    ``above_input_tokens`` (the "cliff" tiers Anthropic and Google price long prompts by).
    A rate left out keeps the model's base rate."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    above_input_tokens: int = Field(ge=0)
    input: Rate | None = None
    output: Rate | None = None
    cached_input: Rate | None = None
    cache_creation: Rate | None = None


class ServiceTierRates(BaseModel):
    """Rates for a call served at a service tier (``TokenUsage.service_tier``: flex, priority,
    batch...). A rate left out keeps the model's base rate."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: Rate | None = None
    output: Rate | None = None
    cached_input: Rate | None = None
    cache_creation: Rate | None = None


class ModelPrice(BaseModel):
    """One model's rates, USD per million tokens, as the table gives them.

    Price with :attr:`cached_input_rate` and :attr:`cache_creation_rate`, which apply the
    defaults (the input rate) to rates the table leaves out. The server tools' rates stay
    the same in every tier.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: Rate
    output: Rate
    cached_input: Rate | None = None
    cache_creation: Rate | None = None
    reasoning: Rate | None = None
    """Reasoning output, where it is priced apart; the output rate otherwise."""
    web_search_per_1k: Rate | None = None
    """USD per thousand web searches of the provider's own tool (``TokenUsage.server_tools``);
    a search is free where no rate is given."""
    file_search_per_1k: Rate | None = None
    """USD per thousand file searches of the provider's own tool, likewise."""
    requests_per_1k: Rate | None = None
    """USD per thousand calls: a fee each call of the model costs apart from its tokens
    (Perplexity's Sonar request fee, for the search every call makes)."""
    input_audio: Rate | None = None
    """Audio input (``TokenUsage.input_audio_tokens``), where it is priced apart from text."""
    output_audio: Rate | None = None
    """Audio output (``TokenUsage.output_audio_tokens``), likewise."""
    fast: Rate | None = None
    """The multiple of the standard rates a call in fast mode is billed at (``TokenUsage.speed``
    ``fast``: Anthropic's); None where the table does not say: :data:`FAST_MODE`, assumed."""
    geo: dict[str, Rate] = {}
    """The multiple of the rates a call run in a place is billed at, by the place as the reply
    names it (``TokenUsage.inference_geo``: Anthropic's ``us``, 1.1); 1 for a place not here."""
    tiers: list[PriceTierEntry] = []
    service_tiers: dict[TierKind, ServiceTierRates] = {}
    """The rates of the service tiers billed apart; a call served at one the table has no
    rates for is priced at the base rates (``Cost.tier_unpriced`` says so)."""
    aliases: list[str] = []

    _model: str = PrivateAttr(default="")

    @property
    def model(self) -> str:
        """The canonical id this entry is listed under in its table."""
        return self._model

    @property
    def cached_input_rate(self) -> Decimal:
        """Cache reads; the input rate when the table gives none."""
        return self.input if self.cached_input is None else self.cached_input

    @property
    def reasoning_rate(self) -> Decimal:
        """Reasoning output; the output rate when the table gives none."""
        return self.output if self.reasoning is None else self.reasoning

    @property
    def cache_creation_rate(self) -> Decimal:
        """Cache writes; the input rate when the table gives none."""
        return self.input if self.cache_creation is None else self.cache_creation

    @property
    def cache_creation_1h_rate(self) -> Decimal:
        """Cache writes kept an hour (``TokenUsage.cache_creation_1h_input_tokens``): twice
        the input rate, Anthropic's price for them (and Bedrock's for Claude), which no
        catalog source gives apart; never below the rate of the five-minute writes."""
        return max(2 * self.input, self.cache_creation_rate)

    def for_service_tier(self, tier: TierKind) -> ModelPrice | None:
        """The rates of a call served at ``tier``: each rate it names replaces the base rate,
        and a long-prompt tier's rate of the same kind is changed in the same ratio (a batch
        of long prompts is half the long-prompt price); None if it has none."""
        rates = self.service_tiers.get(tier)
        if rates is None:
            return None
        base = {
            "input": self.input,
            "output": self.output,
            "cached_input": self.cached_input_rate,
            "cache_creation": self.cache_creation_rate,
        }
        changes = {name: getattr(rates, name) for name in base if getattr(rates, name) is not None}
        ratios = {name: rate / base[name] for name, rate in changes.items() if base[name]}
        tiers = [
            t.model_copy(update={n: getattr(t, n) * r for n, r in ratios.items() if getattr(t, n)})
            for t in self.tiers
        ]
        return self.model_copy(update={**changes, "tiers": tiers, "service_tiers": {}})

    def for_input(self, total_input_tokens: int) -> ModelPrice:
        """The rates for a call of ``total_input_tokens``: the highest tier it passes, if any,
        replaces each rate that tier names."""
        passed = [t for t in self.tiers if total_input_tokens > t.above_input_tokens]
        if not passed:
            return self
        tier = max(passed, key=lambda t: t.above_input_tokens)
        base = self.model_copy(update={"tiers": []})
        changes = {
            name: getattr(tier, name)
            for name in ("input", "output", "cached_input", "cache_creation")
            if getattr(tier, name) is not None
        }
        return base.model_copy(update=changes)
