"""Routing and resilience: fallback across providers, availability, client-side limits.

See docs/routing.md. ``Router`` is a :class:`~metis.ChatModel`, as an adapter is, over an ordered
list of models.
"""

from __future__ import annotations

from metis.routing.availability import (
    Admission,
    AvailabilityRecord,
    AvailabilityStore,
    CooldownPolicy,
    InMemoryAvailability,
    State,
)
from metis.routing.limits import (
    Buckets,
    InMemoryBuckets,
    InMemorySlots,
    Limiter,
    Limits,
    SharedSlots,
)
from metis.routing.router import Router
from metis.routing.spec import DEFAULT_FALLBACK_ON, RouteSpec, TargetSpec
from metis.routing.targets import RouteTarget

__all__ = [
    "DEFAULT_FALLBACK_ON",
    "Admission",
    "AvailabilityRecord",
    "AvailabilityStore",
    "Buckets",
    "CooldownPolicy",
    "InMemoryAvailability",
    "InMemoryBuckets",
    "InMemorySlots",
    "Limiter",
    "Limits",
    "RouteSpec",
    "RouteTarget",
    "Router",
    "SharedSlots",
    "State",
    "TargetSpec",
]
