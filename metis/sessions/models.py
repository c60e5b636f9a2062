"""What a session talks to for one model call: an adapter (the application's, or the one the
one-line calls keep for the running event loop) or a router, and the request's model name."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

from metis.adapter.adapter import Adapter
from metis.calls.adapters import model_adapter
from metis.calls.request import (
    ModelLike,
    ModelOptions,
    stack_and_model,
)
from metis.errors import ConfigError
from metis.routing.router import Router

ChatLike = Adapter | Router
"""What streams a canonical request: one provider's adapter, or a router over several."""


@dataclass(frozen=True, slots=True)
class Resolved:
    """The model of one call, resolved."""

    chat: ChatLike
    model: str
    """The request's model: ``provider:model``, or ``route:<name>`` for a router."""
    servers: tuple[tuple[Adapter, str], ...]
    """Every (adapter, model) that may serve the call: one, or each model of a router."""

    @property
    def wire_model(self) -> str:
        return self.chat.wire_model(self.model)

    @property
    def label(self) -> str:
        """The model as the application named it."""
        return label(self.chat if isinstance(self.chat, Router) else self.model)


def label(model: ModelLike) -> str:
    """A model as the application named it: ``provider:model``, or ``route <name>``."""
    return f"route {model.name}" if isinstance(model, Router) else model


def checked_adapters(adapters: object) -> dict[str, Adapter]:
    """``adapters`` (None: none) as a dict of stack names or ``provider:model`` names to
    Adapters, else a ConfigError."""
    if adapters is None:
        return {}
    if not isinstance(adapters, Mapping):
        got = type(adapters).__name__
        raise ConfigError(f"adapters is a mapping of stack names to Adapters, got {got}")
    for name, adapter in adapters.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"adapters is keyed by stack or 'provider:model' names, got {name!r}")
        if ":" in name:
            stack_and_model(name)
        if not isinstance(adapter, Adapter):
            raise ConfigError(f"adapters[{name!r}] is an Adapter, got {type(adapter).__name__}")
    return dict(adapters)


def given_adapter(model: str, adapters: Mapping[str, Adapter]) -> Adapter | None:
    """The application's adapter for ``model`` (``provider:model``): the one given for that
    model, else the one given for its stack, else None. An adapter given for the stack whose
    settings name another model (an Ollama adapter, which holds what its model can do) is a
    ConfigError saying to give one for this model."""
    stack_name, wire = stack_and_model(model)
    given = adapters.get(model)
    if given is not None:
        return given
    given = adapters.get(stack_name)
    named = getattr(given.settings, "model", None) if given is not None else None
    meant = named.removeprefix(f"{stack_name}:") if isinstance(named, str) else ""
    if meant and _tagged(meant) != _tagged(wire):
        raise ConfigError(
            f"adapters[{stack_name!r}] is for model {named!r} (its settings' model, whose "
            f"capabilities it holds), and this call is to {model!r}: give its adapter as "
            f"adapters[{model!r}] (an adapter given for a model is taken before its stack's)"
        )
    return given


def _tagged(model: str) -> str:
    """An Ollama model's name with its tag (``qwen3`` is ``qwen3:latest``, as Ollama reads it)."""
    return model if ":" in model else f"{model}:latest"


def checked_model(model: object) -> ModelLike:
    """``model`` if a session can talk to it: ``"provider:model"`` or a Router."""
    if isinstance(model, Router):
        return model
    if isinstance(model, str):
        stack_and_model(model)
        return model
    raise ConfigError(
        "a session's model is 'provider:model' or a Router (an Adapter is given per stack: "
        f"Session('anthropic:claude-sonnet-4-5', adapters={{'anthropic': adapter}})), got {model!r}"
    )


@contextlib.asynccontextmanager
async def resolved(
    model: ModelLike, adapters: Mapping[str, Adapter], options: ModelOptions
) -> AsyncIterator[Resolved]:
    """The chat model for ``model`` on the running event loop, open while the block runs: a
    router as it is; for ``provider:model``, the adapter given for it (:func:`given_adapter`),
    else the one the one-line calls keep for these settings (key from the stack's variable or
    ``api_key``)."""
    if isinstance(model, Router):
        servers = tuple((target.adapter, target.model) for target in model.targets)
        yield Resolved(model, f"route:{model.name}", servers)
        return
    given = given_adapter(model, adapters)
    if given is not None:
        yield Resolved(given, model, ((given, model),))
        return
    async with model_adapter(model, options) as adapter:
        yield Resolved(adapter, model, ((adapter, model),))
