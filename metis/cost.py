"""USD cost from token counts and a versioned price table (docs/contract.md §5).

Adapters report tokens only. Cost is computed here, after the fact, from a price table that
carries a ``pricing_version``, so stored usage can be repriced under any later table::

    from metis.cost import cost_of
    cost = cost_of(response.model, response.usage)      # the model catalog's prices: cost.usd

    new = PriceTable.load("prices-2027.yaml")
    costs = new.reprice([(model, usage) for model, usage in stored])

Money is :class:`decimal.Decimal` throughout (YAML rates read as decimal text, never as
floats), each amount rounded half-up to 1e-8 USD (:class:`~metis.core.money.USD`, ``0.00000036``).

The formula (docs/contract.md §5; :class:`TokenUsage`'s ``input_tokens`` is uncached input)::

    usd = (input * input_rate + output * output_rate + cached_input * cached_input_rate
           + (cache_creation - cache_creation_1h) * cache_creation_rate
           + cache_creation_1h * cache_creation_1h_rate) / 1e6
        + (web_searches * web_search_per_1k + file_searches * file_search_per_1k) / 1e3

where the cache writes kept an hour (``usage.cache_creation_1h_input_tokens``) are at twice
the input rate, never below the five-minute rate, and the reasoning part of the output
(``usage.reasoning_tokens``, at most all of it) is at the reasoning rate when the table gives
one (the output rate otherwise). What the call spent on
other models (``usage.other_models``: Anthropic's advisor) is priced at each one's own rates,
found under the call's provider, and added (``Cost.other_models`` lists each). The requests of
the provider's own tools (``usage.server_tools``) are ``Cost.server_tools_usd``, at the model's
rates per thousand (none: free), and a batch's discount leaves them at their price."""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError
from pydantic_core import PydanticCustomError

from metis.catalog.catalog import Catalog, default_catalog
from metis.catalog.catalog_prices import catalog_price, priced_entry
from metis.catalog.embedding_models import EMBEDDING_PRICES_VERSION, embedding_model
from metis.catalog.price_rates import ModelPrice
from metis.catalog.usage_cost import PARTS, money, with_other_models
from metis.catalog.usage_cost import Cost as Cost
from metis.catalog.usage_cost import price_usage as price_usage
from metis.catalog.usage_cost import unpriced_cost as unpriced_cost
from metis.core.config_files import config_error, read_yaml, show, typed
from metis.errors import ConfigError
from metis.model.response import TokenUsage
from metis.model.tier import ServiceTier, TierKind
from metis.stacks.catalog import lookup, stack_catalog_provider
from metis.stacks.embedding import embedding_catalog_provider

log = logging.getLogger("metis")


class PriceTable(BaseModel):
    """A versioned price table: ``pricing_version``, ``currency: USD`` and ``models``.

    :meth:`price` finds a model by canonical id (``anthropic:claude-sonnet-4-5``), then by
    alias, then by the name after the ``provider:`` prefix among that provider's entries (so
    ``anthropic:claude-sonnet-4-5-20250929`` finds the entry aliased to the dated name); a
    name with no prefix matches when exactly one provider has it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    pricing_version: str = Field(min_length=1)
    currency: Literal["USD"] = "USD"
    models: dict[str, ModelPrice]
    source: str = "<inline>"

    _index: dict[str, str] = PrivateAttr(default_factory=dict)
    _by_name: dict[str, set[str]] | None = PrivateAttr(default=None)
    """The entries each name without its provider prefix may mean (built on first use)."""

    # Loading -------------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path | None = None) -> PriceTable:
        """The table in ``path``, or, without one, the prices of the model catalog in use."""
        if path is None:
            return cls.from_catalog(default_catalog())
        return cls.from_dict(read_yaml(path, "price table"), str(path))

    @classmethod
    def from_catalog(cls, catalog: Catalog) -> PriceTable:
        """Every priced model of ``catalog``, as ``provider:id`` (its aliases too), under the
        catalog's version as ``pricing_version``."""
        models: dict[str, ModelPrice] = {}
        for info in catalog:
            if info.prices is not None:
                models[f"{info.provider}:{info.id}"] = catalog_price(info)
        return cls(pricing_version=catalog.version, models=models, source=catalog.source)

    @classmethod
    def from_dict(cls, data: Any, source: str = "<inline>") -> PriceTable:
        """A table from data in a price file's form (``pricing_version``, ``currency``,
        ``models``); ``source`` names it in errors."""
        if not isinstance(data, dict):
            raise ConfigError(
                f"{source}: expected a mapping with pricing_version, currency and models, "
                f"got {show(data)}"
            )
        if "source" in data:
            raise ConfigError(
                f"{source}: source: unknown key; expected one of: pricing_version, currency, models"
            )
        try:
            return cls.model_validate({**data, "source": source})
        except ValidationError as exc:
            raise config_error(exc, source, cls) from None

    def model_post_init(self, context: Any, /) -> None:
        for model_id, price in self.models.items():
            price._model = model_id
            self._index[model_id] = model_id
        for model_id, price in self.models.items():
            for alias in price.aliases:
                other = self._index.get(alias)
                if other is not None and other != model_id:
                    # Raised inside validation: config_error() prints it as it stands.
                    raise PydanticCustomError(
                        "config",
                        "models.{model}.aliases: '{alias}' already names {other}; expected "
                        "each alias to name one model",
                        {"model": model_id, "alias": alias, "other": other},
                    )
                self._index[alias] = model_id

    # Lookup and pricing --------------------------------------------------------------------

    def price(self, model: str) -> ModelPrice:
        """The rates for ``model``; :class:`ConfigError` naming the model and table if none."""
        return self.models[self.model_id(model)]

    def model_id(self, model: str) -> str:
        """The canonical id of the entry that prices ``model`` (found as :meth:`price` does)."""
        found = self.find(model)
        if found is None:
            raise ConfigError(self._no_price(model))
        return found

    def find(self, model: str) -> str | None:
        """:meth:`model_id`, or None when no entry prices ``model``."""
        found = self._index.get(model)
        prefix, sep, name = model.partition(":")
        provider = stack_catalog_provider(prefix) if sep else None
        translated = f"{provider}:{name}" if provider else None
        if found is None and translated:
            found = self._index.get(translated)
        if found is None:
            found = self._by_wire_name(model)
        if found is None and translated:
            found = self._by_wire_name(translated)
        return found

    def _no_price(self, model: str) -> str:
        return (
            f"no price for model {model!r} in {self.source} (pricing_version "
            f"{self.pricing_version}); add it under models: with input and output rates"
        )

    def _by_wire_name(self, model: str) -> str | None:
        provider, sep, name = model.partition(":")
        if not sep:
            provider, name = "", model
        if self._by_name is None:  # one pass over the table, not one per lookup
            by_name: dict[str, set[str]] = {}
            for key, model_id in self._index.items():
                short = key.partition(":")[2] if key == model_id else key
                by_name.setdefault(short, set()).add(model_id)
            self._by_name = by_name
        matches = {
            model_id
            for model_id in self._by_name.get(name, ())
            if not sep or model_id.partition(":")[0] == provider
        }
        if len(matches) > 1:
            raise ConfigError(
                f"model {model!r} matches several entries in {self.source}: "
                + ", ".join(sorted(matches))
                + "; expected a provider:name id, as CanonicalResponse.model (not an event's)"
            )
        return matches.pop() if matches else None

    def cost(self, model: str, usage: TokenUsage) -> Cost:
        """The formula above, over ``usage``, at this table's rates for ``model`` (and for
        each of ``usage.other_models``: a ConfigError when one has no price here)."""
        model_id = self.model_id(model)
        own = price_usage(model_id, self.models[model_id], usage, self.pricing_version)
        return with_other_models(own, model, usage, self.cost)

    def reprice(self, records: Iterable[tuple[str, TokenUsage]]) -> list[Cost]:
        """Price stored ``(model, usage)`` pairs under this table, in order."""
        return [self.cost(model, usage) for model, usage in records]


@functools.cache
def default_price_table() -> PriceTable:
    """The prices of the model catalog in use, loaded once."""
    return PriceTable.load()


BATCH_DISCOUNT = Decimal("0.5")
"""What a batch costs of the standard rate: Anthropic, OpenAI and Gemini each bill their batch
APIs at half price (their pricing pages); an embedding model's own batch price wins."""


def cost_of(
    model: str, usage: TokenUsage, table: PriceTable | None = None, *, batch: bool = False
) -> Cost:
    """The cost of one call's ``usage`` on ``model`` (the model catalog's prices unless given a
    table). A model with no price gives an unpriced Cost (``priced`` False, ``unpriced`` says
    why, every amount 0) and one WARN per model per process, so a loop summing costs goes on.
    ``batch``: the call was an item of a provider batch (docs/batches.md), priced at the batch
    rate: the model's batch rates where the catalog has them, else the discount below. A call
    served at a service tier (``usage.service_tier``: flex, priority) is priced at its rates,
    or at the standard rates with ``Cost.tier_unpriced`` and one WARN per model and tier."""
    batch = batch or _served_in_batch(usage)
    found = _own_cost(model, usage, table, TierKind.BATCH if batch else None)
    if found is None:
        found = _unpriced(model, table or default_price_table(), usage)
    elif batch:
        found = _batch_priced(model, found, usage)
    elif found.tier_unpriced is not None:
        _warn_unpriced(model, found.tier_unpriced)
    if found.fee_unpriced is not None:
        _warn_unpriced(model, found.fee_unpriced, "metis.unpriced_fee")
    if found.rate_assumed is not None:
        _warn_unpriced(model, found.rate_assumed, "metis.assumed_rate")
    return with_other_models(found, model, usage, lambda m, u: cost_of(m, u, table, batch=batch))


def _batch_priced(model: str, cost: Cost, usage: TokenUsage) -> Cost:
    """``cost`` as a batch's: priced at the batch rates already, or at the discount."""
    version = f"{cost.pricing_version}+batch"
    if cost.service_tier is TierKind.BATCH:
        return cost.model_copy(update={"pricing_version": version})
    stack, _, name = model.partition(":")
    info = embedding_model(embedding_catalog_provider(stack) or stack, name)
    if info is not None and info.batch_price is not None and info.price:
        rate = info.batch_price / info.price
    else:
        rate = BATCH_DISCOUNT
    # the tokens only: the server tools' requests are billed at their own rates
    parts: dict[str, Decimal] = {
        key: money(getattr(cost, key) * rate) for key in PARTS if key != "server_tools_usd"
    }
    parts["server_tools_usd"] = cost.server_tools_usd
    return cost.model_copy(
        update={
            **parts,
            "usd": money(sum(parts.values(), Decimal(0))),
            "pricing_version": version,
            "tier_unpriced": None,
        }
    )


def priced_cost(model: str, usage: TokenUsage, table: PriceTable | None = None) -> Cost | None:
    """:func:`cost_of`, or None (and no WARN) when no price is found for ``model``."""
    found = _own_cost(model, usage, table)
    if found is None:
        return None
    if _served_in_batch(usage):
        found = _batch_priced(model, found, usage)
    return with_other_models(found, model, usage, lambda m, u: cost_of(m, u, table))


def _own_cost(
    model: str, usage: TokenUsage, table: PriceTable | None, tier: TierKind | None = None
) -> Cost | None:
    """What the call's own tokens cost on ``model`` (at ``tier``'s rates, else at those of the
    tier that served it); None when nothing prices it."""
    model, usage = typed(model, str, "cost_of(model)"), typed(usage, TokenUsage, "usage")
    if table is None:
        info = lookup(model)  # one entry, not the whole table, in the common case
        if info is not None and info.prices is not None:
            catalog = default_catalog()
            key = info.key.replace("/", ":", 1)
            return price_usage(key, priced_entry(info), usage, catalog.version, tier)
        table = default_price_table()
        model_id = table.find(model)
        if model_id is None:
            return _embedding_cost(model, usage, tier)
    else:
        model_id = typed(table, PriceTable, "cost_of(table)").find(model)
    if model_id is None:
        return None
    return price_usage(model_id, table.models[model_id], usage, table.pricing_version, tier)


def _embedding_cost(model: str, usage: TokenUsage, tier: TierKind | None) -> Cost | None:
    """An embedding model's price from metis's embedding table (docs/embeddings.md), for the
    models the maintained catalog does not price (Voyage's, Cohere's, Vertex's...)."""
    stack, _, name = model.partition(":")
    info = embedding_model(embedding_catalog_provider(stack) or stack, name)
    if info is None or info.price is None:
        return None
    price = ModelPrice(input=info.price, output=Decimal(0))
    return price_usage(model, price, usage, EMBEDDING_PRICES_VERSION, tier)


def _unpriced(model: str, table: PriceTable, usage: TokenUsage) -> Cost:
    reason = table._no_price(model) + _misspelt_stack(model, table)
    if model not in _warned_unpriced:
        _warned_unpriced.add(model)
        log.warning(
            "%s; its cost is counted as 0 (Cost.priced is False)",
            reason,
            extra={"event": "metis.unpriced_model", "model": model},
        )
    return unpriced_cost(model, usage, table.pricing_version, reason)


_warned_unpriced: set[str] = set()


def _misspelt_stack(model: str, table: PriceTable) -> str:
    """``opnai:gpt-4o``: the stack meant, when the part before ``:`` is neither a stack, a
    stack file nor a provider the table prices."""
    from metis.core.suggest import did_you_mean
    from metis.stacks.loader import builtin_stacks

    prefix, colon, _ = model.partition(":")
    stacks = builtin_stacks()
    if not colon or prefix in stacks or prefix.endswith((".yaml", ".yml")):
        return ""
    if any(key.startswith(prefix + ":") for key in table.models):
        return ""
    meant = did_you_mean(prefix, stacks)
    return f"; no stack is named {prefix!r}{meant}" if meant else ""


def _served_in_batch(usage: Any) -> bool:
    tier = getattr(usage, "service_tier", None)
    return isinstance(tier, ServiceTier) and tier.kind is TierKind.BATCH


def _warn_unpriced(model: str, reason: str, event: str = "metis.unpriced_service_tier") -> None:
    if reason not in _warned_unpriced:
        _warned_unpriced.add(reason)
        log.warning("%s", reason, extra={"event": event, "model": model})
