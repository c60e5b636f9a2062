"""What a session's model calls have spent so far: their token usage, summed, and each call's
cost at the model catalog's prices (docs/sessions.md, "What a session has cost").

A call whose model no table prices has a cost with ``priced`` False; the session's total is
then None (unknown), never a sum that counts that call as free.
"""

from __future__ import annotations

from decimal import Decimal

from metis.calls.priced import priced_usage
from metis.catalog.usage_cost import Cost, unpriced_cost
from metis.core.money import USD
from metis.model.response import TokenUsage

NOT_SAVED = "the session was saved without its costs (by an earlier metis)"


class Spending:
    """A conversation's usage and costs, one call at a time."""

    def __init__(self, usage: TokenUsage, costs: list[Cost]) -> None:
        self.usage = usage
        self.costs = costs

    def add(self, model: str, usage: TokenUsage) -> None:
        """One call's ``usage`` on ``model`` (the canonical id the reply names), priced."""
        self.usage = self.usage.plus(usage)
        self.costs.append(priced_usage(model, usage))

    def add_cost(self, usage: TokenUsage, cost: Cost) -> None:
        """One call already priced (the compact endpoint's)."""
        self.usage = self.usage.plus(usage)
        self.costs.append(cost)

    @property
    def cost_usd(self) -> USD | None:
        """Every call's cost summed; None when a call's price is unknown."""
        if not all(cost.priced for cost in self.costs):
            return None
        return USD(sum((cost.usd for cost in self.costs), Decimal(0)))


def restored_spending(usage: TokenUsage, costs: list[Cost] | None) -> Spending:
    """The spending of a restored session; one saved with usage but no costs (before they
    were saved) has a cost of that usage that is unknown, so its total is unknown too."""
    if costs is None:
        costs = [unpriced_cost("", usage, "", NOT_SAVED)] if usage != TokenUsage() else []
    return Spending(usage, list(costs))
