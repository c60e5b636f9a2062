"""A reply's cost at the model catalog's prices, as ``metis.complete`` and sessions give it
(``CanonicalResponse.cost_usd``, ``RunResult.costs``): never an error, 0 when unpriced."""

from __future__ import annotations

from metis.cost import Cost, cost_of, unpriced_cost
from metis.errors import ConfigError
from metis.model.response import CanonicalResponse, TokenUsage


def with_cost(response: CanonicalResponse) -> CanonicalResponse:
    """``response`` with its ``cost_usd`` set."""
    return response.model_copy(update={"cost_usd": priced(response).usd})


def priced(response: CanonicalResponse) -> Cost:
    """The call's cost from the model catalog; a model no table prices costs 0 (unpriced)."""
    return priced_usage(response.model, response.usage)


def priced_usage(model: str, usage: TokenUsage) -> Cost:
    """``usage`` on ``model`` priced by the model catalog; 0 (unpriced) when no table prices it."""
    try:
        return cost_of(model, usage)
    except ConfigError as error:  # a provider's name for its model that several entries share
        return unpriced_cost(model, usage, "", str(error))
