"""What one call's usage costs at one model's rates: :class:`Cost` and the formula of
:mod:`metis.cost` (docs/contract.md §5), apart from how the rates are found."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict

from metis.catalog.price_rates import FAST_MODE, ModelPrice
from metis.core.money import USD, USDAmount
from metis.core.shown_fields import shown_fields
from metis.model.response import TokenUsage
from metis.model.tier import TierKind

MILLION = Decimal(1_000_000)
THOUSAND = Decimal(1_000)
QUANTUM = Decimal("1e-8")


class Cost(BaseModel):
    """What one call cost: the total, its parts and the table it was priced under."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    """The price table entry used (its canonical id)."""
    usd: USDAmount
    input_usd: USDAmount
    output_usd: USDAmount
    cached_input_usd: USDAmount
    cache_creation_usd: USDAmount
    server_tools_usd: USDAmount = USD(0)
    """The requests of the provider's own tools (``TokenUsage.server_tools``: web searches,
    file searches) at the model's per-request rates, a kind with no rate costing nothing; and
    the fee a model bills per call for the search it makes (Perplexity's Sonar request fee,
    the catalog's ``requests_per_1k``)."""
    pricing_version: str
    estimated: bool = False
    """Copied from the usage: the token counts were estimated, so is the cost."""
    unpriced: str | None = None
    """Why there is no price (``cost_of`` of a model no table prices); every amount is then 0
    but what :attr:`other_models` adds."""
    other_models: tuple[Cost, ...] = ()
    """What the call's tokens on other models cost (``TokenUsage.other_models``), each at its
    own model's rates; included in ``usd`` and in each part."""
    service_tier: TierKind | None = None
    """The service tier whose rates priced the call (``usage.service_tier``, or a batch's);
    None: the standard rates."""
    tier_unpriced: str | None = None
    """Why a call served at a service tier was priced at the standard rates (the table has
    no rates for that tier); None when it was priced as served."""
    fee_unpriced: str | None = None
    """Why a search fee the model bills apart from its tokens is not in ``usd``: the catalog
    has no rate for it (OpenAI's Chat search models' fee per call), or the reply gave no count
    of the searches it is billed by; None when the model bills none or it is counted."""
    rate_assumed: str | None = None
    """Which rates the price assumes, the table giving none: a fast-mode call
    (``TokenUsage.speed``) of a model with no published multiple priced at
    :data:`~metis.catalog.price_rates.FAST_MODE` times the standard rates; audio
    (``TokenUsage.input_audio_tokens``...) of a model with no audio rate priced as text;
    None when every rate was the table's."""

    def __repr_args__(self) -> Iterator[tuple[str, Any]]:
        return shown_fields(self)

    @property
    def priced(self) -> bool:
        """Whether the amounts are a price (False: :attr:`unpriced` says why they are 0)."""
        return self.unpriced is None

    @property
    def breakdown(self) -> dict[str, Decimal]:
        """USD per TokenUsage field."""
        return {
            "input_tokens": self.input_usd,
            "output_tokens": self.output_usd,
            "cached_input_tokens": self.cached_input_usd,
            "cache_creation_input_tokens": self.cache_creation_usd,
            "server_tools": self.server_tools_usd,
        }


def price_usage(
    model_id: str, price: ModelPrice, usage: TokenUsage, version: str, tier: TierKind | None = None
) -> Cost:
    """What ``usage`` costs at ``price``: at the rates of the service tier that served it
    (``tier``, else ``usage.service_tier``'s) where ``price`` has them, and of its long-prompt
    tier for the call's total input."""
    served = tier or (usage.service_tier.kind if usage.service_tier is not None else None)
    more: dict[str, Any] = {}
    if served is not None and served is not TierKind.STANDARD:
        at_tier = price.for_service_tier(served)
        if at_tier is None:
            more["tier_unpriced"] = (
                f"no {served} rates for {model_id} (pricing_version {version}); "
                "priced at the standard rates"
            )
        else:
            price, more["service_tier"] = at_tier, served
    rates = price.for_input(usage.total_input_tokens)
    reasoning = min(usage.reasoning_tokens, usage.output_tokens)  # the output is what is billed
    parts: tuple[Decimal, ...] = (
        Decimal(usage.input_tokens) * rates.input / MILLION,
        (
            Decimal(usage.output_tokens - reasoning) * rates.output
            + Decimal(reasoning) * rates.reasoning_rate
        )
        / MILLION,
        Decimal(usage.cached_input_tokens) * rates.cached_input_rate / MILLION,
        (
            _cache_writes(usage, rates)
            if usage.cache_creation_1h_input_tokens
            else usage.cache_creation_input_tokens * rates.cache_creation_rate
        )
        / MILLION,
    )
    if usage.input_audio_tokens or usage.output_audio_tokens:  # most calls: none
        heard, spoken = audio_usd(model_id, rates, usage, version, more)
        parts = (parts[0] + heard, parts[1] + spoken, *parts[2:])
    if usage.speed or usage.inference_geo:  # fast mode, a place billed apart: every token
        scale = premium(model_id, price, usage, version, more)
        parts = tuple(part * scale for part in parts)
    tools = server_tools_usd(price, usage) if usage.server_tools or price.requests_per_1k else None
    if tools:  # most calls: none, the default
        more["server_tools_usd"] = money(tools)
    if SEARCH_MODELS.search(model_id) and price.requests_per_1k is None:
        more["fee_unpriced"] = fee_unpriced(model_id, price, usage, version)
    return Cost(
        model=model_id,
        usd=money(sum(parts, tools or Decimal(0))),
        input_usd=money(parts[0]),
        output_usd=money(parts[1]),
        cached_input_usd=money(parts[2]),
        cache_creation_usd=money(parts[3]),
        pricing_version=version,
        estimated=usage.estimated,
        **more,
    )


def premium(
    model_id: str, price: ModelPrice, usage: TokenUsage, version: str, more: dict[str, Any]
) -> Decimal:
    """The multiple of the rates ``usage`` is billed at for its speed and place (1: none);
    notes in ``more`` the ``rate_assumed`` when the table gives no fast-mode multiple."""
    scale = price.geo.get(usage.inference_geo, Decimal(1)) if usage.inference_geo else Decimal(1)
    if usage.speed != "fast":
        return scale
    if price.fast is None:
        assumed(
            more,
            f"no fast-mode rates for {model_id} (pricing_version {version}); priced at "
            f"{FAST_MODE} times the standard rates, the multiple of every later Claude model's "
            "published fast mode",
        )
    return scale * (FAST_MODE if price.fast is None else price.fast)


def audio_usd(
    model_id: str, rates: ModelPrice, usage: TokenUsage, version: str, more: dict[str, Any]
) -> tuple[Decimal, Decimal]:
    """What the audio of ``usage`` costs above its price as text, input and output, per
    million: the audio input taken as uncached first (the higher price: the counts do not say
    which part of it was read from the cache), at most all the uncached input. Where the
    table has no audio rate, the audio is priced as text and ``rate_assumed`` says so."""
    heard = min(usage.input_audio_tokens, usage.input_tokens)
    spoken = min(usage.output_audio_tokens, usage.output_tokens)
    missing = [
        kind
        for kind, count, rate in (
            ("input", heard, rates.input_audio),
            ("output", spoken, rates.output_audio),
        )
        if count and rate is None
    ]
    if missing:
        assumed(
            more,
            f"no audio {' or '.join(missing)} rate for {model_id} (pricing_version {version}); "
            "its audio priced as text",
        )
    extra_in = heard * (rates.input_audio - rates.input) if heard and rates.input_audio else 0
    extra_out = spoken * (rates.output_audio - rates.output) if spoken and rates.output_audio else 0
    return Decimal(extra_in) / MILLION, Decimal(extra_out) / MILLION


def assumed(more: dict[str, Any], why: str) -> None:
    """Note in ``more`` one more rate the price assumed (``Cost.rate_assumed``)."""
    more["rate_assumed"] = f"{more['rate_assumed']}; {why}" if "rate_assumed" in more else why


def _cache_writes(usage: TokenUsage, rates: ModelPrice) -> Decimal:
    """The cache writes at their rates: those kept an hour (at most all of them) at theirs."""
    hour = min(usage.cache_creation_1h_input_tokens, usage.cache_creation_input_tokens)
    five_minutes = usage.cache_creation_input_tokens - hour
    return five_minutes * rates.cache_creation_rate + hour * rates.cache_creation_1h_rate


def server_tools_usd(price: ModelPrice, usage: TokenUsage) -> Decimal:
    """The web and file searches of ``usage`` at ``price``'s rates per thousand, and the
    call's own fee (one call) where the model bills one."""
    requests = usage.server_tools
    searches = Decimal(requests.web_search) * (price.web_search_per_1k or 0)
    files = Decimal(requests.file_search) * (price.file_search_per_1k or 0)
    return (searches + files + (price.requests_per_1k or 0)) / THOUSAND


SEARCH_MODELS = re.compile(r"search-preview|search-api|sonar")
"""The models that search on every call and bill it apart from their tokens: OpenAI's Chat
search models (gpt-4o-search-preview, gpt-5-search-api) and Perplexity's Sonar."""


def fee_unpriced(model_id: str, price: ModelPrice, usage: TokenUsage, version: str) -> str | None:
    """Why a search model's fee is not counted (:attr:`Cost.fee_unpriced`); None when it is."""
    if price.web_search_per_1k is None:
        return (
            f"{model_id} bills a search fee per call that the catalog has no rate for "
            f"(pricing_version {version}); not counted"
        )
    if not usage.server_tools.web_search:
        return (
            f"{model_id} bills each web search apart from its tokens and the reply gave no "
            "count of them; not counted"
        )
    return None


PARTS = ("input_usd", "output_usd", "cached_input_usd", "cache_creation_usd", "server_tools_usd")


def with_other_models(
    cost: Cost, model: str, usage: TokenUsage, price: Callable[[str, TokenUsage], Cost]
) -> Cost:
    """``cost`` (of the call's own tokens) with what each of ``usage.other_models`` costs
    added: priced by ``price``, named under ``model``'s provider prefix."""
    if not usage.other_models:
        return cost
    others = tuple(price(other_model(model, o.model), o.usage) for o in usage.other_models)
    update: dict[str, Any] = {key: money(getattr(cost, key) + _sum(others, key)) for key in PARTS}
    update.update(usd=money(cost.usd + _sum(others, "usd")), other_models=others)
    return cost.model_copy(update=update)


def other_model(model: str, other: str) -> str:
    """The id another model's tokens of a call of ``model`` are priced and counted under:
    ``other`` (a provider's model name) under ``model``'s provider prefix."""
    prefix, sep, _ = model.partition(":")
    return f"{prefix}{sep}{other}"


def _sum(costs: Iterable[Cost], part: str) -> Decimal:
    return sum((getattr(cost, part) for cost in costs), Decimal(0))


def money(amount: Decimal) -> USD:
    """``amount`` rounded half-up to 1e-8 USD."""
    rounded = amount.quantize(QUANTUM, rounding=ROUND_HALF_UP)
    return USD(rounded or 0)  # not 0E-8, which prints and serializes as 0.00000000


def unpriced_cost(model: str, usage: TokenUsage, pricing_version: str, reason: str) -> Cost:
    """``usage`` on ``model`` counted as 0 for ``reason`` (no price: ``Cost.priced`` False)."""
    zero = Decimal(0)
    return Cost(
        model=model,
        usd=zero,
        input_usd=zero,
        output_usd=zero,
        cached_input_usd=zero,
        cache_creation_usd=zero,
        pricing_version=pricing_version,
        estimated=usage.estimated,
        unpriced=reason,
    )
