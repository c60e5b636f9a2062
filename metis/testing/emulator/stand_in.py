"""Examples and demos that run anywhere: each provider is its real API when its key is set,
and otherwise the emulator, started and stopped around the block::

    from metis.testing.emulator import stand_in

    with stand_in("anthropic", "openai") as where:
        async with where.adapter("anthropic") as adapter:
            ...

``MODELS`` names a model per provider that the emulator (and the real API) serve.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from metis.adapter.adapter import Adapter, build_adapter
from metis.core.suggest import closest
from metis.errors import ConfigError
from metis.pipeline.config import AdapterConfig
from metis.stacks.loader import load_stack
from metis.testing.emulator.emulator import Emulator

MODELS = {
    "anthropic": "anthropic:claude-sonnet-4-5",
    "openai": "openai:gpt-4o",
    "openai_responses": "openai_responses:gpt-4o",
    "gemini": "gemini:gemini-2.5-flash",
    "ollama": "ollama:qwen3",
}
# The variable that switches a provider to the real thing (Ollama: a local server's address).
REAL_WHEN_SET = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "openai_responses": "OPENAI_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "ollama": "OLLAMA_HOST",
}
# Ollama's stack declares no tool calling (it depends on the model); qwen3 has it.
CAPABILITIES: dict[str, dict[str, Any]] = {"ollama": {"supports_tools": True}}


class StandIn:
    """Which providers are real and which the emulator stands in for; adapters for each."""

    def __init__(self, emulator: Emulator | None) -> None:
        self.emulator = emulator

    def is_real(self, provider: str) -> bool:
        """Whether ``provider`` is its real API (its variable is set)."""
        return bool(os.environ.get(REAL_WHEN_SET[_taken(provider)]))

    def config(self, provider: str, **fields: Any) -> AdapterConfig:
        """An AdapterConfig for ``provider``: the real one, or pointed at the emulator."""
        fields.setdefault("capabilities", CAPABILITIES.get(provider, {}))
        if self.is_real(provider):
            if provider == "ollama":
                host = os.environ["OLLAMA_HOST"]
                fields.setdefault("base_url", host if "://" in host else f"http://{host}")
            return AdapterConfig(**fields)  # the stack reads the key from the environment
        assert self.emulator is not None
        return AdapterConfig(
            api_key="emulator", base_url=self.emulator.base_url(provider), **fields
        )

    def adapter(self, provider: str, **fields: Any) -> Adapter:
        """An adapter for ``provider`` as :meth:`config` configures it."""
        return build_adapter(provider, self.config(provider, **fields))


@contextmanager
def stand_in(*providers: str) -> Iterator[StandIn]:
    """The emulator stands in for each of ``providers`` whose key is not set (started only if
    one needs it, stopped on exit); prints what each provider uses."""
    needed = any(not os.environ.get(REAL_WHEN_SET[_taken(p)]) for p in providers)
    with Emulator(port=0) if needed else nullcontext() as emulator:
        chosen = StandIn(emulator)
        print("backends: " + backends(chosen, providers))
        yield chosen


def _taken(provider: str) -> str:
    """``provider``, when it is one this helper stands in for; else a ConfigError naming them
    (any other provider reaches an :class:`Emulator` by its ``base_url(provider)``)."""
    if provider in REAL_WHEN_SET:
        return provider
    near = closest(provider, list(REAL_WHEN_SET))
    meant = f"did you mean {near[0]!r}? " if near else ""
    raise ConfigError(
        f"stand_in({provider!r}): {meant}it stands in for {', '.join(REAL_WHEN_SET)}; give "
        f"another provider's adapter an Emulator's base_url({provider!r}) (docs/emulator.md)"
    )


def backends(chosen: StandIn, providers: tuple[str, ...]) -> str:
    """What each provider reaches: its real API, a server its SDK's base URL variable names
    (the emulator a reader started, say), or the emulator started here."""
    real: list[str] = []
    elsewhere: list[str] = []
    for provider in (p for p in providers if chosen.is_real(p)):
        variable = load_stack(provider).endpoint.base_url_env
        url = os.environ.get(variable) if variable else None
        if url:
            elsewhere.append(f"{provider} at {url} ({variable}, {REAL_WHEN_SET[provider]})")
        else:
            real.append(f"{provider} ({REAL_WHEN_SET[provider]})")
    parts = [f"real API for {', '.join(real)}"] if real else []
    parts += elsewhere
    emulated = [p for p in providers if not chosen.is_real(p)]
    if chosen.emulator is not None:
        parts.append(f"emulator at {chosen.emulator.url} for {', '.join(emulated)}")
    return "; ".join(parts)
