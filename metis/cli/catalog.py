"""``metis models``: the model catalog from the terminal."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import asdict
from decimal import Decimal
from typing import Any

from metis.catalog import Catalog, ModelInfo, default_catalog
from metis.catalog.first_party import is_first_party
from metis.cli.output import CliError, Output
from metis.core.suggest import did_you_mean
from metis.stacks.catalog import stack_catalog_provider
from metis.stacks.loader import builtin_stacks, load_stack

NEEDS = ("tools", "reasoning", "images", "pdf", "structured_output", "prompt_caching")


def run(args: argparse.Namespace) -> int:
    out = Output()
    if args.refresh:
        return _refresh(out)
    catalog = default_catalog()
    if args.providers:
        return _providers(out, catalog)
    search, named = _split(args.search, args.provider, catalog)
    provider = _provider(named, catalog) if named is not None else None
    needs = {need: True for need in NEEDS if getattr(args, need)}
    found = ranked(catalog.search(search, provider=provider, **needs))
    shown = found[: args.limit]
    if args.json:
        for info in shown:
            out.line(json.dumps(_as_json(info), default=str))
        return 0
    out.table(
        ["model", "context", "output", "takes", "can", "$ in", "$ out", "$ cache r/w"],
        [_row(info) for info in shown],
        right=(1, 2, 5, 6),
    )
    more = f" (first {len(shown)}; --limit N for more)" if len(found) > len(shown) else ""
    if not found and search:  # a misspelling, most often: the nearest ids, to search again
        ids = {info.id for info in catalog if provider is None or info.provider == provider}
        more = did_you_mean(search, ids)
    out.line(
        f"{len(found)} models{more}; catalog {catalog.version} from {catalog.source}; "
        "prices in USD per million tokens",
        "dim",
    )
    return 0


def ranked(found: list[ModelInfo]) -> list[ModelInfo]:
    """The model's maker first (``anthropic:claude-...``), then the platforms metis has a stack
    for (Bedrock, Vertex, Azure, ...), then the resellers; each in provider then id order."""
    from metis.stacks.loader import builtin_stacks

    with_stacks = {stack_catalog_provider(stack) for stack in builtin_stacks()}

    def rank(info: ModelInfo) -> tuple[int, str, str]:
        tier = 0 if is_first_party(info) else 1 if info.provider in with_stacks else 2
        return tier, info.provider, info.id

    return sorted(found, key=rank)


def _split(search: str, provider: str | None, catalog: Catalog) -> tuple[str, str | None]:
    """A search written as a model string (``openai:gpt-4o``, ``gemini:gemini-2.5``, as calls
    name models) is the provider and the text after it; it found nothing, no id holding one."""
    head, colon, rest = search.partition(":")
    if provider is not None or not colon:
        return search, provider
    if head in catalog.providers or stack_catalog_provider(head) is not None:
        return rest, head
    return search, provider


def _provider(name: str, catalog: Catalog) -> str:
    if not name.strip():  # an empty --provider "" listed every provider's models
        raise CliError(f"--provider: expected a provider name, got {name!r}")
    provider = name if name in catalog.providers else stack_catalog_provider(name)
    if provider is None:
        close = sorted(p for p in catalog.providers if name.lower() in p)
        hint = f"; did you mean {', '.join(close[:5])}?" if close else ""
        if not close:  # a misspelling: the nearest providers and stacks by spelling
            from metis.stacks.loader import builtin_stacks

            hint = did_you_mean(name.lower(), [*catalog.providers, *builtin_stacks()])
        raise CliError(f"no provider {name!r} in the model catalog{hint}")
    return provider


def _row(info: ModelInfo) -> list[str]:
    prices = info.prices
    reasoning = f"reasoning:{info.reasoning_form}" if info.reasoning_form else "reasoning"
    can = [
        label
        for label, value in (
            ("tools", info.tools),
            (reasoning, info.reasoning),
            ("json", info.structured_output),
            ("cache", info.prompt_caching),
        )
        if value
    ]
    takes = ",".join(m for m in info.input_modalities or () if m != "text") or "text"
    cache = "-"
    if prices is not None and (prices.cache_read is not None or prices.cache_write is not None):
        cache = f"{_rate(prices.cache_read)}/{_rate(prices.cache_write)}"
    tiers = "+" if prices is not None and prices.tiers else ""
    return [
        f"{info.provider}:{info.id}" + (" (deprecated)" if info.deprecated else ""),
        _tokens(info.context_window),
        _tokens(info.max_output_tokens),
        takes if info.input_modalities is not None else "?",
        " ".join(can) or "-",
        _rate(prices.input if prices else None) + tiers,
        _rate(prices.output if prices else None) + tiers,
        cache,
    ]


def _providers(out: Output, catalog: Catalog) -> int:
    counts = Counter(info.provider for info in catalog)
    served = _stacks_by_provider()
    rows = [
        [pid, str(counts[pid]), ", ".join(served.get(pid, {})) or "-", _keys(served.get(pid))]
        for pid in sorted(catalog.providers)
        if counts[pid]
    ]
    out.table(["provider", "models", "stacks", "key metis reads"], rows, right=(1,))
    out.line(f"{len(rows)} providers, {len(catalog)} models; catalog {catalog.version}", "dim")
    out.line(
        "(optional): a cloud's own credentials do instead (docs/cloud.md); a provider with no "
        "stack is reached by openai_compatible with its base_url= (docs/stacks.md)",
        "dim",
    )
    return 0


def _stacks_by_provider() -> dict[str, dict[str, tuple[str | None, bool]]]:
    """Each catalog provider's built-in stacks, with the key variable each reads and whether
    that key is optional."""
    served: dict[str, dict[str, tuple[str | None, bool]]] = {}
    for name in builtin_stacks():
        stack = load_stack(name)
        if stack.catalog is not None:
            served.setdefault(stack.catalog, {})[name] = (stack.auth.env, stack.auth.optional)
    return served


def _keys(stacks: dict[str, tuple[str | None, bool]] | None) -> str:
    keys = dict.fromkeys(
        f"{env} (optional)" if opt else env for env, opt in (stacks or {}).values() if env
    )
    return ", ".join(keys) or "-"


def _refresh(out: Output) -> int:
    from metis.catalog.catalog import cache_path
    from metis.catalog.refresh import online_sources, write_snapshot

    path = cache_path()
    catalog = write_snapshot(online_sources(), path)
    out.line(f"wrote {len(catalog)} models of {len(catalog.providers)} providers to {path}")
    if catalog.skipped:
        names = ", ".join(entry["entry"] for entry in catalog.skipped[:5])
        more = ", ..." if len(catalog.skipped) > 5 else ""
        out.line(f"left out {len(catalog.skipped)} malformed entries: {names}{more}", "dim")
    return 0


def _tokens(count: int | None) -> str:
    if count is None:
        return "?"
    if count >= 1_000_000 and count % 1_000_000 == 0:
        return f"{count // 1_000_000}M"
    return f"{count / 1000:.0f}k" if count >= 1000 else str(count)


def _rate(rate: Decimal | None) -> str:
    return "-" if rate is None else f"{rate:f}"


def _as_json(info: ModelInfo) -> dict[str, Any]:
    data = asdict(info)
    data["model"] = f"{info.provider}:{info.id}"
    return {k: v for k, v in data.items() if v not in (None, (), {}, [])}
