"""What `metis chat` says: costs in plain digits, a failed command as a chat message."""

from __future__ import annotations

from decimal import Decimal

from metis.cli.output import usd
from metis.core.money import USD


def test_a_cost_under_a_millionth_shows_its_digits_not_zero() -> None:
    assert usd(USD("0.00000036")) == "$0.00000036"
    assert usd(Decimal("3.6E-7"), estimated=True) == "~$0.00000036"
    assert usd(Decimal("0.000052")) == "$0.000052"
    assert usd(Decimal(0)) == "$0.000000"
    assert usd(None) == "-"
