"""A budget that cannot bind: a key of ``gateway.keys`` with a ``budget_usd`` that may name a
model the catalog has no price for, whose replies are therefore charged nothing (a fine-tuned
or self-hosted model, a name the catalog does not know). Said as the file loads, for the
operator to price the model in the file (docs/gateway.md, "Configuration")."""

from __future__ import annotations

from metis.gateway.keys import KeySpec, price
from metis.model.response import TokenUsage
from metis.registry.registry import Registry

PROBE = TokenUsage(input_tokens=1_000_000, output_tokens=1_000_000)
"""A usage every priced model charges for."""


def unpriced(specs: list[KeySpec], registry: Registry) -> list[str]:
    """One line per budgeted key that may name models with no price (none: every such model
    has one)."""
    ids = {
        name: route.model for route in registry.routes() for name in (route.model, *route.aliases)
    }
    lines = []
    for spec in specs:
        if not spec.budget_usd:  # no budget, or 0 (every request refused, priced or not)
            continue
        missing = sorted(
            model for model in _reached(spec, ids, registry) if price(model, PROBE) is None
        )
        if missing:
            lines.append(
                f"gateway.keys.{spec.name} has a budget, but the catalog has no price for "
                f"{', '.join(missing)}: its replies are charged nothing; give each its prices in "
                "the file (models.<id>.catalog.prices: input and output, USD per million tokens)"
            )
    return lines


def _reached(spec: KeySpec, ids: dict[str, str], registry: Registry) -> set[str]:
    """The models' ids a key may reach: through the names it may give, a route's included."""
    names = list(ids) if spec.models is None else list(spec.models)
    reached: set[str] = set()
    for name in names:
        route = registry.route_specs.get(name)
        targets = [name] if route is None else [getattr(t, "model", t) for t in route.models]
        reached.update(ids[target] for target in targets if target in ids)
    return reached
