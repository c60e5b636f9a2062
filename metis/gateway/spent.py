"""What a served request spent: the model its usage is priced as, and the usage (charged to
its key, counted in the metrics)."""

from __future__ import annotations

from dataclasses import dataclass

from metis.model.events import MessageComplete
from metis.model.response import CanonicalResponse, TokenUsage


@dataclass(slots=True)
class Spent:
    """What a request spent: the model its usage is priced as, and the usage."""

    model: str | None = None
    usage: TokenUsage | None = None


def spent_by(response: CanonicalResponse | None) -> tuple[str | None, TokenUsage | None]:
    """The model a whole answer is priced as, and its usage (None, None: no answer)."""
    if response is None:
        return None, None
    return priced_model(response.provider, response.model), response.usage


def streamed_model(asked: str, complete: MessageComplete) -> str:
    """The model a stream's usage is priced as, the request having ``asked`` for a model: the
    routed model's canonical id, or for a route the model that answered (its wire name,
    priced when only one provider has it)."""
    return complete.model or asked if asked.startswith("route:") else asked


def priced_model(provider: str | None, model: str) -> str:
    """The name a model's price is found by: ``provider:model`` where the model has no prefix."""
    return model if ":" in model or provider is None else f"{provider}:{model}"
