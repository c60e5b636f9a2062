"""A model catalog entry's rates as a price table entry (:mod:`metis.cost` prices a call of a
catalog model with it, and builds the catalog's whole table from it)."""

from __future__ import annotations

from decimal import Decimal

from metis.catalog.audio_rates import AUDIO_RATES
from metis.catalog.model_info import ModelInfo
from metis.catalog.price_rates import ModelPrice, PriceTierEntry, ServiceTierRates
from metis.model.tier import TierKind

_KNOWN = frozenset(TierKind)
STANDARD_RATED: dict[str, tuple[TierKind, ...]] = {"anthropic": (TierKind.PRIORITY,)}
"""The service tiers a catalog provider bills at its standard rates, for its entries whose
source gives the tier no rates. Anthropic's Priority Tier draws each token down from a
capacity commitment by the standard rates' own ratios (a cache read 0.1 of an input token, a
5-minute cache write 1.25, a long prompt's input 2 and output 1.5: "these burndown rates
reflect the relative pricing of each token type", platform.claude.com/docs/en/api/service-tiers)
and publishes no rates of its own: a priority reply is priced at the standard rates."""

_STANDARD = ServiceTierRates.model_construct(
    input=None, output=None, cached_input=None, cache_creation=None
)
"""A tier's rates that are the standard rates (each left out keeps the base rate)."""

PRICES_BY_KEY: dict[str, tuple[ModelInfo, ModelPrice]] = {}
"""Each catalog entry's price, built once: the gateway prices every reply's usage."""


def priced_entry(info: ModelInfo) -> ModelPrice:
    """:func:`catalog_price`, kept for the entry it was built from (the catalog's own
    object: a catalog loaded anew is priced anew)."""
    kept = PRICES_BY_KEY.get(info.key)
    if kept is not None and kept[0] is info:
        return kept[1]
    price = catalog_price(info)
    PRICES_BY_KEY[info.key] = (info, price)
    return price


def catalog_price(info: ModelInfo) -> ModelPrice:
    """``info``'s prices as a :class:`ModelPrice`, its aliases prefixed with its provider."""
    assert info.prices is not None
    prices, audio = info.prices, AUDIO_RATES.get(info.key)
    # Built without validation: the catalog's rates are Decimals it has already checked.
    tiers = [
        PriceTierEntry.model_construct(
            above_input_tokens=t.above_input_tokens,
            input=t.input,
            output=t.output,
            cached_input=t.cache_read,
            cache_creation=t.cache_write,
        )
        for t in prices.tiers
    ]
    return ModelPrice.model_construct(
        input=prices.input,
        output=prices.output,
        reasoning=prices.reasoning,
        cached_input=prices.cache_read,
        cache_creation=prices.cache_write,
        tiers=tiers,
        web_search_per_1k=prices.web_search_per_1k,
        file_search_per_1k=prices.file_search_per_1k,
        requests_per_1k=prices.requests_per_1k,
        service_tiers={
            **dict.fromkeys(STANDARD_RATED.get(info.provider, ()), _STANDARD),
            **{
                TierKind(t.tier): ServiceTierRates.model_construct(
                    input=t.input,
                    output=t.output,
                    cached_input=t.cache_read,
                    cache_creation=t.cache_write,
                )
                for t in prices.service_tiers
                if t.tier in _KNOWN  # a tier a later metis knows is priced by a later metis
            },
        },
        geo=GEO_PRICED if _geo_priced(info) else {},
        fast=FAST_MULTIPLES.get(info.key),
        input_audio=audio[0] if audio else None,
        output_audio=audio[1] if audio else None,
        aliases=[f"{info.provider}:{alias}" for alias in info.aliases],
    )


FAST_MULTIPLES = {
    **dict.fromkeys(("anthropic/claude-opus-4-6", "anthropic/claude-opus-4-7"), Decimal(6)),
    **dict.fromkeys(
        ("anthropic/claude-opus-4-8", "anthropic/claude-opus-5", "anthropic/claude-opus-5-5"),
        Decimal(2),
    ),
}
"""The multiple of every token rate a fast-mode call (``usage.speed: fast``) is billed at, by
catalog key, for the models whose fast-mode price is published: Opus 4.6 and 4.7 at 6 times
($30 / $150 against $5 / $25), Opus 4.8 and 5 at 2 times ($10 / $50), Opus 5.5 at 2 times
($8 / $40 against $4 / $20) (platform.claude.com, "Fast mode", pricing; the same rates are
listed by the gateways that resell these models as their own "-fast" models). The catalog's
sources have no fast-mode rates."""

GEO_PRICED = {"us": Decimal("1.1")}
"""Anthropic's price for US-only inference (``inference_geo: us``): 1.1 times every rate, for
the models released from February 2026 (Claude Opus 4.6 on; platform.claude.com pricing, "Data
residency"); the catalog's sources have no such rate."""


def _geo_priced(info: ModelInfo) -> bool:
    """Whether ``info`` bills US-only inference apart: Anthropic's models released from
    February 2026, and those the catalog has no release date for (its newest)."""
    return info.provider == "anthropic" and (info.released or "9999") >= "2026-02"
