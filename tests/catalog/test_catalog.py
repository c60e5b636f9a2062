"""The model catalog: what it holds, how it is built, and how calls and costs use it."""

from __future__ import annotations

import gzip
import json
import logging
import sys
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from metis import build_adapter
from metis.catalog import Catalog, default_catalog, read_snapshot
from metis.catalog.build import build_snapshot, reasoning_form
from metis.catalog.capabilities import model_capabilities
from metis.catalog.lookup import _warned
from metis.catalog.refresh import MODELS_DEV_URL, online_sources, write_snapshot
from metis.cost import cost_of
from metis.errors import CapabilityError, ConfigError, NetworkError
from metis.model import Base64ImageSource, CanonicalRequest, ImageBlock, Message, TextBlock
from metis.model.response import TokenUsage
from metis.pipeline.config import AdapterConfig
from metis.registry import Registry
from metis.stacks.loader import builtin_stacks, load_stack

# What the packaged snapshot holds ----------------------------------------------------------


def test_the_packaged_catalog_covers_a_thousand_models_of_twenty_providers() -> None:
    catalog = default_catalog()
    providers = {info.provider for info in catalog}
    assert len(catalog) >= 1000 and len(providers) >= 20
    assert catalog.version and "models.dev" in catalog.sources and "genai-prices" in catalog.sources


def test_every_builtin_stack_names_a_catalog_provider_that_exists_or_none() -> None:
    catalog = default_catalog()
    named = {name: load_stack(name).catalog for name in builtin_stacks()}
    for name, provider in named.items():
        assert provider is None or catalog.models(provider), name
    assert named["anthropic"] == "anthropic" and named["gemini"] == "google"
    assert named["ollama"] is None and named["tgi"] is None  # local servers: models unknown


def test_a_model_is_found_by_alias_any_case_and_cross_region_profile() -> None:
    catalog = default_catalog()
    sonnet = catalog.get("anthropic", "claude-sonnet-4-5")
    assert sonnet is not None and sonnet.max_output_tokens and sonnet.context_window
    assert catalog.get("anthropic", "claude-sonnet-4-5-20250929") is sonnet
    assert catalog.get("anthropic", "Claude-Sonnet-4-5") is sonnet
    bedrock = catalog.models("amazon-bedrock")
    plain = next(m for m in bedrock if m.id.startswith("anthropic.claude"))
    assert catalog.get("amazon-bedrock", "us." + plain.id) is not None
    assert catalog.get("anthropic", "claude-nonexistent-9") is None


def test_search_filters_by_text_provider_and_capabilities() -> None:
    catalog = default_catalog()
    found = catalog.search("gpt-4o", provider="openai", tools=True, images=True)
    assert found and all("gpt-4o" in m.id and m.tools and m.takes("image") for m in found)
    with pytest.raises(ConfigError, match="unknown capability"):
        catalog.search(telepathy=True)


# Building a snapshot from the two sources --------------------------------------------------


@dataclass
class _Tier:
    start: int
    price: Decimal


@dataclass
class _Tiered:
    base: Decimal
    tiers: list[_Tier]


@dataclass
class _GenaiPrice:
    input_mtok: Any
    output_mtok: Any
    cache_read_mtok: Any = None
    cache_write_mtok: Any = None


@dataclass
class _GenaiModel:
    id: str
    prices: Any
    match: tuple[str, ...] = ()
    name: str | None = None
    context_window: int | None = None
    deprecated: bool | None = None


@dataclass
class _GenaiProvider:
    id: str
    models: list[_GenaiModel] = field(default_factory=list)

    def find_model(self, ref: str) -> _GenaiModel | None:
        return next((m for m in self.models if any(ref.startswith(p) for p in m.match)), None)


MODELS_DEV: dict[str, Any] = {
    "acme": {
        "id": "acme",
        "name": "Acme",
        "env": ["ACME_API_KEY"],
        "models": {
            "acme-1": {
                "name": "Acme 1",
                "tool_call": True,
                "reasoning": False,
                "limit": {"context": 100_000, "output": 8_000},
                "modalities": {"input": ["text", "image"]},
                "cost": {"input": 1.1, "output": 2},
            },
            "acme-1-20250101": {
                "name": "Acme 1 (dated)",
                "tool_call": True,
                "limit": {"context": 100_000, "output": 8_000},
            },
            "acme-think": {
                "name": "Acme Think",
                "tool_call": False,
                "reasoning": True,
                "limit": {"context": 50_000, "output": 4_000},
                "cost": {"input": 3, "output": 9, "context_over_200k": {"input": 6}},
            },
        },
    },
    "broken": "not a provider",
}


def _genai() -> list[_GenaiProvider]:
    tiered = _GenaiPrice(
        input_mtok=_Tiered(Decimal("0.5"), [_Tier(128_000, Decimal(1))]),
        output_mtok=Decimal(4),
        cache_read_mtok=Decimal("0.05"),
    )
    newer = _GenaiModel("acme-2", _GenaiPrice(Decimal(2), Decimal(8)), context_window=1_000_000)
    return [_GenaiProvider("acme", [_GenaiModel("acme-1", tiered, ("acme-1",)), newer])]


def test_build_takes_capabilities_from_models_dev_and_prices_from_genai_prices() -> None:
    snapshot = build_snapshot(MODELS_DEV, _genai(), sources={"x": 1}, version="v1")
    catalog = Catalog(snapshot)
    one = catalog.get("acme", "acme-1")
    assert one is not None
    assert (one.context_window, one.max_output_tokens, one.tools) == (100_000, 8_000, True)
    assert one.input_modalities == ("text", "image") and one.aliases == ("acme-1-20250101",)
    assert one.prices is not None and one.prices.input == Decimal("0.5")  # genai-prices wins
    assert one.prices.tiers[0].above_input_tokens == 128_000
    assert one.prompt_caching is True  # a cache-read price means caching
    think = catalog.get("acme", "acme-think")
    assert think is not None and think.prices is not None
    assert think.prices.input == Decimal(3)  # models.dev's cost when genai-prices has none
    assert think.prices.tiers[0].input == Decimal(6)
    newer = catalog.get("acme", "acme-2")  # only genai-prices knows it: priced, limits unknown
    assert newer is not None and newer.context_window == 1_000_000 and newer.tools is None
    assert catalog.version == "v1" and catalog.sources == {"x": 1}


def test_reasoning_form_follows_each_family() -> None:
    assert reasoning_form("claude-sonnet-4-5") == "budget"
    assert reasoning_form("claude-opus-4-6") == "adaptive"
    assert reasoning_form("us.anthropic.claude-sonnet-5-20261001-v1:0") == "adaptive"
    assert reasoning_form("claude-3-7-sonnet-20250219") == "budget"
    assert reasoning_form("gemini-2.5-flash") == "budget"
    assert reasoning_form("gemini-3-pro-preview") == "effort"
    assert reasoning_form("gpt-5-mini") == "effort" and reasoning_form("o3") == "effort"
    assert reasoning_form("llama-4") is None


def test_a_snapshot_that_is_not_one_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no models list"):
        Catalog({"format": 1})
    bad = tmp_path / "c.json.gz"
    bad.write_bytes(b"\x1f\x8b not gzip")
    monkey = pytest.MonkeyPatch()
    monkey.setenv("METIS_CATALOG", str(bad))
    default_catalog.cache_clear()
    try:
        with pytest.raises(ConfigError, match=str(bad)):
            default_catalog()
    finally:
        monkey.undo()
        default_catalog.cache_clear()


def test_a_snapshot_nested_too_deep_is_a_config_error_not_a_recursion_error(
    tmp_path: Path,
) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ConfigError, match="cannot read the model catalog"):
        read_snapshot(deep)


def test_refresh_fetches_models_dev_and_writes_a_catalog_that_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with respx.mock:
        respx.get(MODELS_DEV_URL).respond(json=MODELS_DEV)
        sources = online_sources(fetch_prices=_genai)
    path = tmp_path / "catalog.json.gz"
    written = write_snapshot(sources, path)
    assert len(written) == 3
    stored = json.loads(gzip.decompress(path.read_bytes()))
    assert stored["sources"]["models.dev"]["via"] == MODELS_DEV_URL
    monkeypatch.setenv("METIS_CATALOG", str(path))
    default_catalog.cache_clear()
    try:
        assert default_catalog().get("acme", "acme-1") is not None
    finally:
        monkeypatch.delenv("METIS_CATALOG")
        default_catalog.cache_clear()


# Capabilities per model --------------------------------------------------------------------


def _no_network() -> tuple[httpx.AsyncClient, list[httpx.Request]]:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500)

    return httpx.AsyncClient(transport=httpx.MockTransport(handler)), sent


def _ask(model: str, *content: Any, max_output_tokens: int = 100) -> CanonicalRequest:
    return CanonicalRequest(
        model=model,
        messages=[Message(role="user", content=list(content) or [TextBlock(text="hi")])],
        max_output_tokens=max_output_tokens,
    )


@pytest.mark.anyio
async def test_a_request_over_the_models_output_limit_is_refused_before_sending() -> None:
    info = default_catalog().get("anthropic", "claude-3-5-haiku-20241022")
    assert info is not None and info.max_output_tokens == 8192
    client, sent = _no_network()
    adapter = build_adapter("anthropic", AdapterConfig(api_key="k", http_client=client))
    with pytest.raises(CapabilityError, match="above the model's 8192"):
        await adapter.complete(
            _ask("anthropic:claude-3-5-haiku-20241022", max_output_tokens=64_000)
        )
    assert sent == []
    # the same request is fine for a model whose limit is higher
    assert adapter.capabilities_for("claude-sonnet-4-5").max_output_tokens >= 64_000


@pytest.mark.anyio
async def test_an_image_to_a_model_without_vision_is_refused_before_sending() -> None:
    info = default_catalog().get("groq", "llama-3.3-70b-versatile")
    assert info is not None and info.takes("image") is False
    client, sent = _no_network()
    adapter = build_adapter("groq", AdapterConfig(api_key="k", http_client=client))
    image = ImageBlock(source=Base64ImageSource(media_type="image/png", data="aGk="))
    with pytest.raises(CapabilityError, match="images"):
        await adapter.complete(_ask("groq:llama-3.3-70b-versatile", image))
    assert sent == []


def test_the_stack_is_the_ceiling_and_the_catalog_narrows_it() -> None:
    stack = load_stack("openai")
    gpt5 = default_catalog().get("openai", "gpt-5")
    assert gpt5 is not None and gpt5.reasoning
    caps = model_capabilities(stack.capabilities, gpt5)
    assert caps.supports_thinking is False  # Chat Completions shows no reasoning
    assert caps.max_output_tokens == gpt5.max_output_tokens  # the model's own limit
    assert caps.max_context_tokens == gpt5.max_input_tokens  # input limit below the window


def test_an_uncatalogued_model_keeps_the_stacks_declaration_with_one_warn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    _warned.discard(("anthropic", "claude-from-the-future"))
    adapter = build_adapter("anthropic", AdapterConfig(api_key="k"))
    with caplog.at_level(logging.WARNING, logger="metis"):
        first = adapter.capabilities_for("claude-from-the-future")
        build_adapter("anthropic", AdapterConfig(api_key="k")).capabilities_for(
            "claude-from-the-future"
        )
    assert first == adapter.stack.capabilities
    warns = [r for r in caplog.records if getattr(r, "event", "") == "metis.uncatalogued_model"]
    assert len(warns) == 1 and "claude-from-the-future" in warns[0].getMessage()


def test_configured_capabilities_still_win_over_the_catalog() -> None:
    config = AdapterConfig(api_key="k", capabilities={"max_output_tokens": 1234})
    adapter = build_adapter("anthropic", config)
    assert adapter.capabilities_for("claude-sonnet-4-5").max_output_tokens == 1234


def test_models_yaml_overrides_catalog_fields(tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_text(
        "adapters:\n  anthropic: {type: anthropic, api_key: k}\n"
        "models:\n  anthropic:claude-opus-4-1:\n    adapter: anthropic\n"
        "    catalog: {max_output_tokens: 7000, prices: {input: 1, output: 2}}\n",
        encoding="utf-8",
    )
    try:
        registry = Registry.load(path)
        assert registry.resolve("anthropic:claude-opus-4-1").capabilities.max_output_tokens == 7000
        usage = TokenUsage(input_tokens=1_000_000, output_tokens=1_000_000)
        assert cost_of("anthropic:claude-opus-4-1", usage).usd == Decimal(3)
        path.write_text(
            path.read_text(encoding="utf-8").replace("max_output_tokens", "max_outptu"),
            encoding="utf-8",
        )
        with pytest.raises(ConfigError, match=r"unknown field.*max_outptu"):
            Registry.load(path)
    finally:
        default_catalog.cache_clear()  # the overrides changed the process's catalog


# Prices for every catalogued provider ------------------------------------------------------


def test_cost_of_prices_every_priced_model_of_every_provider() -> None:
    catalog = default_catalog()
    usage = TokenUsage(input_tokens=1000, output_tokens=1000, cached_input_tokens=10)
    priced_providers = set()
    for info in catalog:
        if info.prices is None:
            continue
        cost = cost_of(f"{info.provider}:{info.id}", usage)
        assert cost.usd >= 0 and cost.pricing_version == catalog.version
        priced_providers.add(info.provider)
    assert len(priced_providers) >= 20


def test_metis_models_lists_filters_and_explains_an_unknown_provider(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from metis.cli import main

    assert main(["models", "claude-sonnet-4-5", "--provider", "anthropic"]) == 0
    out = capsys.readouterr().out
    assert "anthropic:claude-sonnet-4-5" in out and "200k" in out and "USD per million" in out
    assert main(["models", "gpt-4o", "--provider", "openai_responses", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows and all(row["provider"] == "openai" and "gpt-4o" in row["id"] for row in rows)
    assert main(["models", "--provider", "nowhere"]) == 1
    assert "metis: error: no provider 'nowhere'" in capsys.readouterr().err


# Malformed entries -------------------------------------------------------------------------

GOOD = {"provider": "acme", "id": "acme-good", "context_window": 1000, "max_output_tokens": 100}
MALFORMED = [
    pytest.param({"context_window": "big"}, "context_window", id="a limit that is not a number"),
    pytest.param({"max_output_tokens": [1]}, "max_output_tokens", id="a list for a limit"),
    pytest.param({"prices": {"input": "1"}}, "prices.output", id="a price missing"),
    pytest.param({"prices": {"input": "x", "output": "1"}}, "prices.input", id="not a decimal"),
    pytest.param({"prices": {"input": "1", "output": "1", "tiers": [{}]}}, "tiers", id="tier"),
    pytest.param({"prices": ["1", "2"]}, "prices", id="prices a list"),
    pytest.param({"input_modalities": "text"}, "input_modalities", id="modalities a string"),
    pytest.param({"reasoning_form": "sometimes"}, "reasoning_form", id="unknown reasoning form"),
    pytest.param({"deprecated": "maybe"}, "deprecated", id="not a boolean"),
    pytest.param({"extra": {"a": 1}}, "extra", id="extra not text"),
    pytest.param({"aliases": "acme-bad-2"}, "aliases", id="aliases a string"),
    pytest.param({"aliases": [1]}, "aliases", id="aliases not strings"),
]


def _bad(fields: dict[str, Any]) -> dict[str, Any]:
    return {"provider": "acme", "id": "acme-bad", **fields}


def _skipped(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", "") == "metis.catalog_entry_skipped"]


@pytest.mark.parametrize(("fields", "field_name"), MALFORMED)
def test_a_malformed_entry_is_skipped_with_one_warn_naming_it(
    caplog: pytest.LogCaptureFixture, fields: dict[str, Any], field_name: str
) -> None:
    with caplog.at_level(logging.WARNING, logger="metis"):
        catalog = Catalog({"models": [GOOD, _bad(fields)]}, "test.json")
        assert catalog.get("acme", "acme-bad") is None
        assert catalog.get("acme", "acme-bad") is None
        assert [m.id for m in catalog.models()] == ["acme-good"] == [m.id for m in catalog]
        assert catalog.search("acme") == catalog.models("acme")
    assert catalog.get("acme", "acme-good") is not None
    (warn,) = _skipped(caplog)
    assert "acme/acme-bad" in warn.getMessage() and field_name in warn.getMessage()
    assert "test.json" in warn.getMessage()


@pytest.mark.parametrize(
    "entry", [None, 5, "acme-bad", ["acme-bad"], {"id": "acme-bad"}, {"provider": "acme", "id": 7}]
)
def test_an_entry_without_usable_names_is_skipped_with_one_warn_naming_its_place(
    caplog: pytest.LogCaptureFixture, entry: Any
) -> None:
    with caplog.at_level(logging.WARNING, logger="metis"):
        catalog = Catalog({"models": [GOOD, entry]}, "test.json")
    assert len(catalog) == 1 and [m.id for m in catalog] == ["acme-good"]
    (warn,) = _skipped(caplog)
    assert "models[1]" in warn.getMessage()


@pytest.mark.anyio
async def test_a_call_to_a_model_whose_entry_is_malformed_runs_as_uncatalogued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    broken = {"provider": "anthropic", "id": "claude-broken-1", "max_output_tokens": "lots"}
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"version": "t", "models": [broken]}))
    monkeypatch.setenv("METIS_CATALOG", str(path))
    default_catalog.cache_clear()
    _warned.discard(("anthropic", "claude-broken-1"))
    reply = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-broken-1",
        "content": [{"type": "text", "text": "Hi."}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda r: httpx.Response(200, json=reply))
    )
    try:
        with caplog.at_level(logging.WARNING, logger="metis"):
            for _ in range(2):
                adapter = build_adapter("anthropic", AdapterConfig(api_key="k", http_client=client))
                response = await adapter.complete(_ask("anthropic:claude-broken-1"))
                assert response.text == "Hi."
                assert adapter.capabilities_for("claude-broken-1") == adapter.stack.capabilities
    finally:
        monkeypatch.delenv("METIS_CATALOG")
        default_catalog.cache_clear()
    (warn,) = _skipped(caplog)
    assert "anthropic/claude-broken-1" in warn.getMessage()
    uncatalogued = [
        r for r in caplog.records if getattr(r, "event", "") == "metis.uncatalogued_model"
    ]
    assert uncatalogued == []  # the one WARN says it already


def test_a_refresh_that_cannot_reach_models_dev_is_a_network_error_naming_it() -> None:
    """``metis models --refresh`` offline: a classified error naming what it could not read
    (it was an "internal error: ConnectError")."""
    with respx.mock:
        respx.get(MODELS_DEV_URL).mock(side_effect=httpx.ConnectError("Name or service not known"))
        with pytest.raises(NetworkError) as caught:
            online_sources(fetch_prices=_genai)
    assert f"cannot read {MODELS_DEV_URL} (ConnectError: Name or service not known)" in str(
        caught.value
    )


def test_a_refresh_without_the_catalog_extra_says_so_before_fetching(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "genai_prices", None)  # not installed
    with respx.mock(assert_all_called=False) as mocked:
        route = mocked.get(MODELS_DEV_URL).respond(json=MODELS_DEV)
        with pytest.raises(
            ConfigError, match=r"needs genai-prices: pip install 'metis\[catalog\]'"
        ):
            online_sources()
    assert not route.called


def test_refresh_leaves_out_entries_upstream_data_makes_malformed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    upstream = json.loads(json.dumps(MODELS_DEV))
    models = upstream["acme"]["models"]
    models["acme-odd"] = {"name": "Odd", "limit": {"context": "128k"}, "release_date": 2025}
    models["acme-shapes"] = {"name": "Shapes", "limit": [1, 2], "modalities": "text"}
    models["acme-form"] = {"name": "Form", "reasoning": True, "modalities": {"input": "text"}}
    with respx.mock:
        respx.get(MODELS_DEV_URL).respond(json=upstream)
        sources = online_sources(fetch_prices=_genai)
    path = tmp_path / "catalog.json.gz"
    with caplog.at_level(logging.WARNING, logger="metis"):
        written = write_snapshot(sources, path)
    stored = json.loads(gzip.decompress(path.read_bytes()))
    ids = {entry["id"] for entry in stored["models"]}
    assert "acme-odd" not in ids and "acme-form" not in ids
    assert {"acme-1", "acme-think", "acme-shapes"} <= ids  # a wrong shape reads as unknown
    assert [s["entry"] for s in stored["skipped"]] == ["acme/acme-form", "acme/acme-odd"]
    assert [s["entry"] for s in written.skipped] == ["acme/acme-form", "acme/acme-odd"]
    assert len(_skipped(caplog)) == 2
    reloaded = Catalog(stored, str(path))
    assert all(info.id in ids for info in reloaded) and len(reloaded) == len(ids)
