"""The catalog's corrections of its sources' errors (docs/catalog.md "Corrections"): applied to
any snapshot when it is read, under a models.yaml override, each with its source."""

from __future__ import annotations

from decimal import Decimal

import httpx
import pytest

from metis import build_adapter
from metis.catalog import Catalog, default_catalog
from metis.catalog.capabilities import model_capabilities
from metis.catalog.corrections import CORRECTIONS
from metis.cost import cost_of
from metis.model import CanonicalRequest, Message, TextBlock, TokenUsage, ToolDefinition
from metis.pipeline.config import AdapterConfig
from metis.stacks.loader import load_stack


@pytest.mark.parametrize("model", ["amazon.nova-2-lite-v1:0", "us.amazon.nova-2-lite-v1:0"])
def test_nova_2_lite_reasons_with_a_million_token_context(model: str) -> None:
    info = default_catalog().get("amazon-bedrock", model)
    assert info is not None and info.id == "amazon.nova-2-lite-v1:0"
    assert info.reasoning is True and info.reasoning_form == "effort"
    assert info.context_window == 1_000_000 and info.max_output_tokens == 64_000
    caps = model_capabilities(load_stack("bedrock").capabilities, info)
    assert caps.supports_thinking and caps.max_output_tokens == 64_000


def test_gpt_3_5_turbo_calls_tools() -> None:
    info = default_catalog().get("openai", "gpt-3.5-turbo")
    assert info is not None and info.tools is True and info.parallel_tools is True
    assert model_capabilities(load_stack("openai").capabilities, info).supports_tools


@pytest.mark.anyio
async def test_tools_to_gpt_3_5_turbo_are_sent() -> None:
    sent: list[httpx.Request] = []

    async def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500, json={"error": {"message": "stop here"}})

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    adapter = build_adapter("openai", AdapterConfig(api_key="k", http_client=client, max_retries=0))
    tool = ToolDefinition(name="now", description="The time", input_schema={"type": "object"})
    request = CanonicalRequest(
        model="openai:gpt-3.5-turbo",
        messages=[Message(role="user", content=[TextBlock(text="time?")])],
        tools=[tool],
        max_output_tokens=100,
    )
    with pytest.raises(Exception) as failed:
        await adapter.complete(request)
    assert "stop here" in str(failed.value)  # the provider's answer, not a CapabilityError
    assert len(sent) == 1 and b'"tools"' in sent[0].content
    await client.aclose()


def test_every_correction_names_its_source_and_a_field_an_entry_has() -> None:
    for key, correction in CORRECTIONS.items():
        assert correction.source, key
        assert correction.fields and set(correction.fields) <= set(
            default_catalog().get(*key.split("/", 1)).__dataclass_fields__  # type: ignore[union-attr]
        )


def test_a_correction_applies_to_any_snapshot_and_an_override_still_wins() -> None:
    upstream = {"provider": "amazon-bedrock", "id": "amazon.nova-2-lite-v1:0", "tools": False}
    catalog = Catalog({"models": [upstream]})
    info = catalog.get("amazon-bedrock", "us.amazon.nova-2-lite-v1:0")
    assert info is not None and info.reasoning is True and info.tools is False
    overridden = catalog.override("amazon-bedrock", info.id, {"reasoning": False})
    assert overridden.reasoning is False


@pytest.mark.parametrize("model", ["us.amazon.nova-2-lite-v1:0", "eu.amazon.nova-2-lite-v1:0"])
def test_nova_2_lite_prices_its_cache_reads_at_a_quarter(model: str) -> None:
    """A geographic profile's rates, as genai-prices gives them ($0.33, $2.75, $0.0825 cached):
    models.dev's gave no cache reads, so each was priced at the whole input rate."""
    usage = TokenUsage(input_tokens=0, cached_input_tokens=1_000_000, output_tokens=1_000_000)
    priced = cost_of(f"bedrock:{model}", usage)
    assert priced.cached_input_usd == Decimal("0.0825") and priced.output_usd == Decimal("2.75")


def test_nova_2_lite_from_any_region_has_its_limit_and_reasons() -> None:
    info = default_catalog().get("amazon-bedrock", "global.amazon.nova-2-lite-v1:0")
    assert info is not None and info.id == "global.amazon.nova-2-lite-v1:0"
    assert info.max_output_tokens == 64_000 and info.reasoning is True
    assert info.prices is not None and info.prices.input == Decimal("0.3")
