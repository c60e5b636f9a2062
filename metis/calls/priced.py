"""A reply's cost at the model catalog's prices, as ``metis.complete`` and sessions give it
(``CanonicalResponse.cost_usd``, ``RunResult.costs``): never an error, 0 when unpriced."""

from __future__ import annotations

import functools

from metis.cost import Cost, cost_of, priced_cost, unpriced_cost
from metis.errors import ConfigError
from metis.model.response import CanonicalResponse, TokenUsage
from metis.stacks.loader import builtin_stacks, load_stack


def with_cost(response: CanonicalResponse) -> CanonicalResponse:
    """``response`` with its ``cost_usd`` and ``cost_known`` set."""
    cost = priced(response)
    return response.model_copy(update={"cost_usd": cost.usd, "cost_known": cost.priced})


def priced(response: CanonicalResponse) -> Cost:
    """The call's cost from the model catalog; a model no table prices costs 0 (unpriced)."""
    return priced_usage(response.model, response.usage)


def priced_usage(model: str, usage: TokenUsage) -> Cost:
    """``usage`` on ``model`` priced by the model catalog; 0 (unpriced) when no table prices it,
    with a WARN, but for a model of a server of your own (no WARN: nothing is billed)."""
    try:
        if own_server(model):
            found = priced_cost(model, usage)
            reason = f"{model}: a model of a server of your own, which no table prices"
            return found if found is not None else unpriced_cost(model, usage, "", reason)
        return cost_of(model, usage)
    except ConfigError as error:  # a provider's name for its model that several entries share
        return unpriced_cost(model, usage, "", str(error))


def own_server(model: str) -> bool:
    """Whether ``model``'s stack is a server of your own: one the model catalog does not cover,
    that takes no key (Ollama, vLLM, llama.cpp, TGI, any OpenAI-compatible server)."""
    return _own_server_stack(model.partition(":")[0])


@functools.cache
def _own_server_stack(stack_name: str) -> bool:
    if stack_name not in builtin_stacks():
        return False
    stack = load_stack(stack_name)
    return stack.catalog is None and stack.auth.optional
