"""The model catalog: every model metis knows, found by provider and wire name.

The packaged snapshot (``metis/catalog/models.json.gz``) is read on first use, never at import.
``metis models --refresh`` writes a newer one to the user's cache folder, which then wins; the
``METIS_CATALOG`` environment variable names another file. Entries are built from the
snapshot's dicts only when asked for, so a lookup costs one dict access after the first. An
entry is checked when it is indexed (its names) and when it is built (every field): a malformed
one is skipped with one WARN naming it, and its model is treated as uncatalogued
(:mod:`metis.catalog.entries`).
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import re
from collections.abc import Iterator, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from metis.catalog.corrections import corrected
from metis.catalog.entries import MalformedEntry, index_names, label, model_info, warn_skipped
from metis.catalog.model_info import ModelInfo
from metis.errors import ConfigError

PACKAGED = "models.json.gz"
CACHE_FILE = "catalog.json.gz"
_REGION_PREFIX = re.compile(r"^(?:us|eu|apac|ap|jp|au|ca|us-gov|global)\.(?=[a-z])")


class Catalog:
    """Models by provider, with their aliases; ``version`` names the snapshot (it is also the
    pricing version of every cost priced from it)."""

    def __init__(self, snapshot: Mapping[str, Any], source: str = "<inline>") -> None:
        if not isinstance(snapshot, Mapping) or not isinstance(snapshot.get("models"), list):
            raise ConfigError(f"{source}: not a metis catalog snapshot (no models list)")
        self.source = source
        self.version = str(snapshot.get("version", "unknown"))
        self.sources: dict[str, Any] = dict(snapshot.get("sources") or {})
        self.providers: dict[str, dict[str, Any]] = dict(snapshot.get("providers") or {})
        self.skipped: list[dict[str, str]] = list(snapshot.get("skipped") or [])
        """The malformed entries left out when the snapshot was refreshed, and why."""
        self._raw: dict[str, Mapping[str, Any]] = {}
        self._names: dict[tuple[str, str], str] = {}
        self._built: dict[str, ModelInfo] = {}
        self._overrides: dict[str, dict[str, Any]] = {}
        self._malformed: set[str] = set()
        for position, raw in enumerate(snapshot["models"]):
            try:
                self._add(raw)
            except MalformedEntry as exc:
                warn_skipped(source, label(raw, position), str(exc))

    def __repr__(self) -> str:
        return f"<Catalog {self.version}: {len(self._raw)} models from {self.source}>"

    def __len__(self) -> int:
        return len(self._raw) - len(self._malformed)

    def __iter__(self) -> Iterator[ModelInfo]:
        for key in list(self._raw):
            info = self._info(key)
            if info is not None:
                yield info

    # Lookup ------------------------------------------------------------------------------

    def get(self, provider: str, model: str) -> ModelInfo | None:
        """The entry for ``model`` (a wire name or alias) at catalog provider ``provider``.
        A cross-region inference profile id (``us.anthropic.claude-...``) finds its model."""
        key = self._key(provider, model)
        return self._info(key) if key is not None else None

    def malformed(self, provider: str, model: str) -> bool:
        """Whether ``model`` names an entry that was skipped as malformed (and warned of)."""
        key = self._key(provider, model)
        return key is not None and self._info(key) is None

    def models(self, provider: str | None = None) -> list[ModelInfo]:
        """Every entry, or one provider's, in provider then id order."""
        found = [
            self._info(k)
            for k, raw in list(self._raw.items())
            if provider in (None, raw["provider"])
        ]
        return sorted((m for m in found if m is not None), key=lambda m: (m.provider, m.id))

    def ids(self, provider: str) -> list[str]:
        """The ids of ``provider``'s entries, without building them."""
        return sorted(raw["id"] for raw in self._raw.values() if raw["provider"] == provider)

    def search(
        self, text: str = "", *, provider: str | None = None, **needs: bool
    ) -> list[ModelInfo]:
        """Entries whose id or name holds ``text`` (any case), at ``provider`` if given, with
        every capability in ``needs`` true: ``tools``, ``reasoning``, ``images``, ``pdf``,
        ``structured_output``, ``prompt_caching``."""
        text = text.lower()
        out = []
        for info in self.models(provider):
            if text and text not in info.id.lower() and text not in info.name.lower():
                continue
            if all(_has(info, need) == wanted for need, wanted in needs.items()):
                out.append(info)
        return out

    # Overrides (models.yaml) -----------------------------------------------------------------

    def override(self, provider: str, model: str, fields: Mapping[str, Any]) -> ModelInfo:
        """Replace fields of one entry (or add the entry): what a models.yaml ``catalog:`` block
        does. Unknown field names are a ConfigError."""
        known = set(ModelInfo.__dataclass_fields__) - {"provider", "id"}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise ConfigError(
                f"catalog override for {provider}:{model}: unknown field(s) {', '.join(unknown)}; "
                f"expected some of: {', '.join(sorted(known))}"
            )
        info = self.get(provider, model)
        key = info.key if info is not None else f"{provider}/{model}"
        merged = {**self._overrides.get(key, {}), **fields}
        base = self._raw.get(key, {"provider": provider, "id": model})
        try:
            checked = model_info({**base, **merged})
        except MalformedEntry as exc:
            raise ConfigError(f"catalog override for {provider}:{model}: {exc}") from None
        if info is None and key not in self._raw:
            self._add(base)
        self._malformed.discard(key)  # the override mended it
        self._overrides[key] = merged
        self._built[key] = checked
        return checked

    # Internals ---------------------------------------------------------------------------

    def _add(self, raw: Any) -> None:
        provider, model, aliases = index_names(raw)
        key = f"{provider}/{model}"
        self._raw[key] = corrected(key, raw)
        for name in (model, *aliases):
            self._names.setdefault((provider, name), key)
            self._names.setdefault((provider, name.lower()), key)

    def _key(self, provider: str, model: str) -> str | None:
        key = self._names.get((provider, model)) or self._names.get((provider, model.lower()))
        if key is None:
            bare = _REGION_PREFIX.sub("", model)
            key = self._names.get((provider, bare)) if bare != model else None
        return key

    def _info(self, key: str) -> ModelInfo | None:
        """The entry built and checked (None, after one WARN, when it is malformed)."""
        info = self._built.get(key)
        if info is None and key not in self._malformed:
            try:
                info = model_info({**self._raw[key], **self._overrides.get(key, {})})
            except MalformedEntry as exc:
                self._malformed.add(key)
                warn_skipped(self.source, key, str(exc))
                return None
            self._built[key] = info
        return info


def _has(info: ModelInfo, need: str) -> bool:
    if need in ("images", "pdf", "audio", "video"):
        return bool(info.takes("image" if need == "images" else need))
    value = getattr(info, need, None)
    if value is None and need not in ModelInfo.__dataclass_fields__:
        raise ConfigError(f"unknown capability {need!r} to search by")
    return bool(value)


def read_snapshot(path: str | Path) -> dict[str, Any]:
    """A snapshot file (gzip-compressed or plain JSON), or a ConfigError naming it."""
    path = Path(path)
    try:
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        loaded = json.loads(data)
    except (OSError, ValueError, EOFError, RecursionError) as exc:  # Recursion: nested too deep
        raise ConfigError(f"cannot read the model catalog {path}: {exc}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: not a metis catalog snapshot")
    return loaded


def cache_path() -> Path:
    """Where ``metis models --refresh`` writes (``$XDG_CACHE_HOME/metis`` or ``~/.cache/metis``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "metis" / CACHE_FILE


@functools.cache
def default_catalog() -> Catalog:
    """The catalog in use: ``$METIS_CATALOG``, else a refreshed one in the cache folder, else
    the snapshot packaged with metis."""
    named = os.environ.get("METIS_CATALOG")
    if named:
        return Catalog(read_snapshot(named), named)
    cached = cache_path()
    if cached.is_file():
        return Catalog(read_snapshot(cached), str(cached))
    with resources.as_file(resources.files("metis.catalog") / PACKAGED) as packaged:
        return Catalog(read_snapshot(packaged), f"metis/catalog/{PACKAGED}")
