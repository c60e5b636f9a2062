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
    """``adapters`` (None: none) as a dict of stack names to Adapters, else a ConfigError."""
    if adapters is None:
        return {}
    if not isinstance(adapters, Mapping):
        got = type(adapters).__name__
        raise ConfigError(f"adapters is a mapping of stack names to Adapters, got {got}")
    for name, adapter in adapters.items():
        if not isinstance(adapter, Adapter):
            raise ConfigError(f"adapters[{name!r}] is an Adapter, got {type(adapter).__name__}")
    return dict(adapters)


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
    router as it is; for ``provider:model``, the adapter given for that stack, else the one
    the one-line calls keep for these settings (key from the stack's variable or ``api_key``)."""
    if isinstance(model, Router):
        servers = tuple((target.adapter, target.model) for target in model.targets)
        yield Resolved(model, f"route:{model.name}", servers)
        return
    stack_name, _ = stack_and_model(model)
    given = adapters.get(stack_name)
    if given is not None:
        yield Resolved(given, model, ((given, model),))
        return
    async with model_adapter(model, options) as adapter:
        yield Resolved(adapter, model, ((adapter, model),))
