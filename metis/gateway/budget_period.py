"""A key's budget period (``budget_period:``, docs/gateway.md): the UTC day or month its spend
is kept for, so that its budget renews as the next one starts; ``none``, one spend for ever."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

BudgetPeriod = Literal["none", "day", "month"]
ADJECTIVE = {"none": "", "day": "daily", "month": "monthly"}


@dataclass(frozen=True, slots=True)
class Period:
    """The period a time falls in."""

    label: str
    """What the period's spend is kept under: its kind and its start's UTC date
    (``month:2026-11-01``), or "" for ``none``."""
    ends: datetime | None
    """When the next period starts, the budget renewed (UTC); None: never."""


NO_PERIOD = Period("", None)


def period_at(kind: BudgetPeriod, wall: float) -> Period:
    """The period of ``kind`` that the Unix time ``wall`` falls in."""
    if kind == "none":
        return NO_PERIOD
    now = datetime.fromtimestamp(wall, UTC)
    if kind == "day":
        start = now.replace(hour=0, minute=0, second=0, microsecond=0)
        return Period(f"day:{start:%Y-%m-%d}", start + timedelta(days=1))
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    following = (start + timedelta(days=32)).replace(day=1)
    return Period(f"month:{start:%Y-%m-%d}", following)
