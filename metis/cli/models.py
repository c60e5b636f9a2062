"""Which adapter serves a model name, live or against the emulator, and what a call cost.

Models come from a models.yaml (``--models``) or, without one, from a built-in mapping: every
built-in stack as an adapter, one model per provider family (its provider name is an alias,
so ``-m gemini`` works), and any other ``provider:name`` on demand. A model whose adapter has
no key (or every model, offline) is served by an in-process
:class:`~metis.testing.emulator.Emulator` through a second registry: the same entries, pointed
at the emulator, with placeholder keys.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metis.adapter.adapter import Adapter
from metis.core.config_files import read_yaml
from metis.core.suggest import misspelt_as
from metis.cost import Cost, priced_cost
from metis.errors import ConfigError, InvalidRequestError, NotConfiguredError
from metis.model.response import TokenUsage
from metis.registry.registry import ModelRoute, Registry
from metis.stacks.loader import builtin_stacks

if TYPE_CHECKING:
    from metis.testing.emulator import Emulator

FAMILIES = (
    "anthropic", "openai", "openai_responses", "gemini", "ollama", "groq", "tgi",
    "bedrock", "vertex", "azure",
)  # fmt: skip
"""The provider families the demo visits, in order: one of each wire format, an
OpenAI-compatible service (groq), a tool-emulating one (tgi), and the cloud platforms."""

DEFAULT_MODELS: dict[str, tuple[str, dict[str, Any]]] = {
    "anthropic": ("anthropic:claude-sonnet-4-5", {}),
    "openai": ("openai:gpt-4o", {}),
    "openai_responses": ("openai_responses:gpt-4o", {}),
    "gemini": ("gemini:gemini-2.5-flash", {}),
    "ollama": ("ollama:qwen3", {"supports_tools": True}),
    "groq": ("groq:llama-3.3-70b-versatile", {}),
    "tgi": ("tgi:tgi", {}),
    "bedrock": ("bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0", {}),
    "vertex": ("vertex:gemini-2.5-flash", {}),
    "azure": ("azure:gpt-4o", {}),
}
# What a platform needs besides a key, for the emulator to stand in for it offline.
OFFLINE_OPTIONS: dict[str, dict[str, Any]] = {
    "bedrock": {"region": "us-east-1"},
    "vertex": {"project": "metis-offline", "location": "us-central1"},
    "vertex_anthropic": {"project": "metis-offline", "location": "us-east5"},
}
OFFLINE_KEY = "metis-offline"


def builtin_registry_data(extra_models: list[str] | None = None) -> dict[str, Any]:
    """The built-in models.yaml, as parsed YAML."""
    models: dict[str, Any] = {}
    for provider, (model, capabilities) in DEFAULT_MODELS.items():
        entry: dict[str, Any] = {"adapter": provider, "aliases": [provider]}
        if capabilities:
            entry["capabilities"] = capabilities
        models[model] = entry
    for model in extra_models or []:
        models.setdefault(model, {"adapter": model.partition(":")[0]})
    return {"adapters": {name: {"type": name} for name in builtin_stacks()}, "models": models}


class _AnyKey(Mapping[str, str]):
    """An environment in which every variable holds a placeholder key (for the emulator)."""

    def __getitem__(self, key: str) -> str:
        return OFFLINE_KEY

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


@dataclass(frozen=True, slots=True)
class Target:
    """A model ready to call: the adapter and the ``model`` for its requests."""

    name: str
    """The canonical model id (from the registry)."""
    model: str
    """``CanonicalRequest.model``: ``stack:wire_name``."""
    provider: str
    adapter: Adapter
    offline: bool
    reason: str | None = None
    """Why it is offline."""


class Models:
    """Resolves model names to :class:`Target`s; close with :meth:`aclose`."""

    def __init__(
        self,
        path: str | None = None,
        *,
        offline: bool = False,
        faults: str | None = None,
        seed: int = 0,
        pace: float = 0.0,
    ) -> None:
        self.path = Path(path).expanduser() if path else None
        self.offline = offline
        self.faults = faults
        self.seed = seed
        self.pace = pace
        self._extra: list[str] = []
        if self.path is not None:
            self.source = str(self.path)
            self._data: Any = read_yaml(self.path, "model registry")
            self._base: Path | None = self.path.parent
        else:
            self.source = "the built-in models"
            self._data = builtin_registry_data()
            self._base = None
        self._live: Registry | None = None
        self._offline: Registry | None = None
        self._retired: list[Registry] = []
        self.emulator: Emulator | None = None
        self.live_registry()  # a broken models.yaml fails now, before anything else

    # Registries --------------------------------------------------------------------------

    def live_registry(self) -> Registry:
        if self._live is None:
            self._live = Registry.from_dict(self._data, self.source, base_dir=self._base)
        return self._live

    def offline_registry(self) -> Registry:
        if self._offline is None:
            emulator = self.start_emulator()
            data = dict(self._data) if isinstance(self._data, dict) else {}
            adapters = data.get("adapters")
            if isinstance(adapters, dict):
                data["adapters"] = {
                    name: _offline_entry(entry, emulator, name) for name, entry in adapters.items()
                }
            self._offline = Registry.from_dict(
                data, f"{self.source} (offline)", base_dir=self._base, environ=_AnyKey()
            )
        return self._offline

    def start_emulator(self) -> Emulator:
        if self.emulator is None:
            from metis.testing.emulator import Emulator  # only a command that runs it loads it

            plan = [f for f in (self.faults, f"slow={self.pace}:1" if self.pace > 0 else "") if f]
            faults = ",".join(plan) or None
            # the registry already decides which models exist: its local ones too (tgi)
            emulator = Emulator(port=0, faults=faults, seed=self.seed, models="any")
            self.emulator = emulator.start()
        return self.emulator

    def names(self) -> list[str]:
        """Every model id and alias the registry knows."""
        registry = self.live_registry()
        return [n for r in registry.routes() for n in (r.model, *r.aliases)]

    def family_models(self) -> list[tuple[str, str]]:
        """(provider, model): one model per provider stack, the families first, in order."""
        first: dict[str, str] = {}
        for route in self.live_registry().routes():
            first.setdefault(route.stack_name, route.model)
        ordered = [(p, first[p]) for p in FAMILIES if p in first]
        return ordered + [(p, m) for p, m in first.items() if p not in FAMILIES]

    # Resolving ---------------------------------------------------------------------------

    def resolve(self, name: str, *, fallback: bool = True) -> Target:
        """The target for ``name``: live when its adapter is configured (and not offline),
        else against the emulator (``fallback``) or :class:`NotConfiguredError`."""
        try:
            return self._resolve(name, fallback)
        except InvalidRequestError as exc:
            stack, sep, wire = name.partition(":")
            if self.path is None and sep and wire and stack not in builtin_stacks():
                near = misspelt_as(stack, builtin_stacks())
                raise InvalidRequestError(
                    f"no built-in stack named {stack!r}"
                    + (f"; did you mean '{near}:{wire}'?" if near else "")
                    + " (a model is STACK:MODEL, e.g. anthropic:claude-sonnet-4-5)"
                ) from None
            if self.path is not None or ":" in name:
                raise
            raise InvalidRequestError(  # the built-in models are examples, not the only ones
                f"{exc.message}; or any model of a built-in stack as STACK:MODEL "
                "(anthropic:claude-sonnet-4-5)"
            ) from None

    def _resolve(self, name: str, fallback: bool) -> Target:
        self._learn(name)
        if self.offline:
            reason = "offline"
        else:
            live = self.live_registry()
            try:
                route = live.resolve(name)
            except NotConfiguredError as exc:
                if not fallback:
                    raise
                reason = f"{exc.api_key_env} is not set" if exc.api_key_env else str(exc)
            else:
                return _target(live, route, offline=False)
        registry = self.offline_registry()
        return _target(registry, registry.resolve(name), offline=True, reason=reason)

    def _learn(self, name: str) -> None:
        """Without a models.yaml, any ``stack:model`` is a model of that built-in stack."""
        if self.path is not None or name in self.names():
            return
        stack, sep, wire = name.partition(":")
        if not (sep and wire and stack in builtin_stacks()):
            return
        self._extra.append(name)
        self._data = builtin_registry_data(self._extra)
        self._retired += [r for r in (self._live, self._offline) if r is not None]
        self._live = self._offline = None

    async def aclose(self) -> None:
        registries = [*self._retired, self._live, self._offline]
        self._retired, self._live, self._offline = [], None, None
        try:
            for registry in registries:
                if registry is not None:
                    await registry.aclose()
        finally:
            if self.emulator is not None:
                self.emulator.stop()
                self.emulator = None


def _offline_entry(entry: Any, emulator: Emulator, name: str) -> Any:
    from metis.testing.emulator.server import PROVIDER_ALIASES

    if not isinstance(entry, dict):
        return entry
    kept = {k: v for k, v in entry.items() if k not in ("api_key", "api_key_env", "base_url")}
    stack = str(entry.get("type", name))
    options = {**OFFLINE_OPTIONS.get(stack, {}), **kept.get("options", {})}
    if options:
        kept["options"] = options
    url = emulator.base_url(stack) if stack in PROVIDER_ALIASES else emulator.url
    return {**kept, "base_url": url}


def _target(
    registry: Registry, route: ModelRoute, *, offline: bool, reason: str | None = None
) -> Target:
    return Target(
        name=route.model,
        model=route.request_model,
        provider=route.stack_name,
        adapter=registry.adapter(route.model),
        offline=offline,
        reason=reason,
    )


def price(target: Target, usage: TokenUsage) -> Cost | None:
    """The cost of a call from the model catalog's prices, or None when the model is unpriced.

    The canonical id is tried, then the request's ``stack:wire`` name.
    """
    for candidate in (target.name, target.model):
        try:
            cost = priced_cost(candidate, usage)
        except ConfigError:  # an id that matches several entries
            continue
        if cost is not None:
            return cost
    return None
