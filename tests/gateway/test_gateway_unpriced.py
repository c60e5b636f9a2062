"""A key with a budget that may name a model the catalog has no price for (a fine-tuned or
self-hosted model) is said as the file loads: that model's replies are charged nothing, so
the budget never binds them, which passed without a word. A model priced in the file's own
``catalog:`` is charged, and a key without a budget is not said."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from metis.catalog.catalog import default_catalog
from metis.gateway.config import GatewayConfig
from metis.gateway.keys import digest, price
from metis.model.response import TokenUsage

OWN = "openai:ft-gpt-4o-acme"


@pytest.fixture(autouse=True)
def packaged_catalog_after() -> Iterator[None]:
    """A file's ``catalog:`` entry is the process's from then on: it is taken out again after
    each test, so the tests that run next in this worker see the catalog they expect (``metis
    models gpt-4o`` listed openai:ft-gpt-4o-priced after other makers' entries, and
    tests/catalog/test_first_party.py failed when it ran after this file)."""
    catalog = default_catalog()
    state = ("_raw", "_names", "_built", "_overrides", "_malformed")
    kept = {name: copy.copy(getattr(catalog, name)) for name in state}
    yield
    for name, value in kept.items():
        setattr(catalog, name, value)


def _file(own_id: str = OWN, **own: Any) -> dict[str, Any]:
    return {
        "adapters": {"openai": {"type": "openai"}},
        "models": {
            "openai:gpt-4o": {"adapter": "openai", "aliases": ["gpt"]},
            own_id: {"adapter": "openai", "aliases": ["acme"], **own},
        },
        "routes": {"either": {"models": ["gpt", "acme"]}},
        "gateway": {
            "keys": [
                {"name": "all", "sha256": digest("a"), "budget_usd": 5},
                {"name": "routed", "sha256": digest("b"), "budget_usd": 5, "models": ["either"]},
                {"name": "gpt-only", "sha256": digest("c"), "budget_usd": 5, "models": ["gpt"]},
                {"name": "free", "sha256": digest("d")},
            ]
        },
    }


def _said(caplog: pytest.LogCaptureFixture, data: dict[str, Any]) -> list[str]:
    caplog.clear()
    with caplog.at_level("WARNING", logger="metis.gateway"):
        GatewayConfig.from_dict(data, "gw.yaml", environ={"OPENAI_API_KEY": "sk"})
    return [
        r.getMessage()
        for r in caplog.records
        if r.__dict__.get("event") == "metis.gateway.unpriced"
    ]


def test_a_budgeted_key_that_may_name_an_unpriced_model_is_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    said = _said(caplog, _file())
    tail = (
        " has a budget, but the catalog has no price for openai:ft-gpt-4o-acme: its replies are "
        "charged nothing; give each its prices in the file (models.<id>.catalog.prices: input "
        "and output, USD per million tokens)"
    )
    assert said == [f"gw.yaml: gateway.keys.{name}{tail}" for name in ("all", "routed")]


def test_a_model_priced_in_the_file_is_charged_and_not_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """(A model of its own: the file's catalog entry is the process's from then on.)"""
    priced = {"catalog": {"prices": {"input": 2, "output": 8}}}
    assert _said(caplog, _file("openai:ft-gpt-4o-priced", **priced)) == []
    usd = price(
        "openai:ft-gpt-4o-priced", TokenUsage(input_tokens=1_000_000, output_tokens=1_000_000)
    )
    assert usd == Decimal(10)
