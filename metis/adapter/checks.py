"""What would make a call fail at the provider, found before anything is sent."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from metis.core.config_files import typed
from metis.errors import (
    CapabilityError,
    ClosedError,
    ConfigError,
    InvalidRequestError,
    NotConfiguredError,
)
from metis.pipeline.config import AdapterConfig
from metis.pipeline.endpoint import Endpoint
from metis.stacks.loader import StackSpec, builtin_stacks
from metis.stacks.model_ids import own_stack_names

if TYPE_CHECKING:
    from metis.model.request import CanonicalRequest


def given(stack: object, config: object) -> tuple[StackSpec, AdapterConfig]:
    """An adapter's stack and config (None: the default), checked for their types."""
    hint = " (a stack by name: metis.build_adapter('anthropic'))" if isinstance(stack, str) else ""
    checked = typed(stack, StackSpec, "Adapter(stack)", hint)
    return checked, typed(config or AdapterConfig(), AdapterConfig, "Adapter(config)")


def of_adapter(adapter: object, what: str, example: str | None = None) -> None:
    """A ConfigError when ``adapter``, given to ``what``, is not a chat adapter: its example
    is ``example`` (the one stack ``what`` takes), else the stack of what was given where it
    names one (an embedder's), else ``anthropic``."""
    if not hasattr(adapter, "pipeline") or not hasattr(adapter, "stack"):
        name = getattr(adapter, "name", None)
        own = name if isinstance(name, str) and hasattr(adapter, "stack") else "anthropic"
        stack = example or own
        embedder = (
            " (an embedder's requests are not chat requests)" if hasattr(adapter, "embed") else ""
        )
        raise ConfigError(
            f"{what}: expected a chat adapter (metis.build_adapter({stack!r})), got "
            f"{type(adapter).__name__} {repr(adapter)[:60]}{embedder}"
        )


def check_ready(
    name: str,
    stack: StackSpec,
    endpoint: Endpoint,
    request: CanonicalRequest,
    foreign: frozenset[str],
) -> None:
    """No key for a stack that needs one is a NotConfiguredError naming its variable; a model
    of another provider (a prefix in ``foreign``: ``openai:gpt-4o`` to the Anthropic adapter)
    an InvalidRequestError."""
    missing = missing_key(name, stack, endpoint, request.model)
    if missing is not None:
        raise missing
    prefix, sep, _ = request.model.partition(":")
    if sep and prefix != name and prefix in foreign:
        raise InvalidRequestError(
            f"{request.model} is a model of {prefix}, and this adapter speaks to "
            f"{name}: use an adapter for {prefix} (build_adapter({prefix!r}))",
            provider=name,
            request_id=request.request_id,
        )


def a_request(request: object, name: str) -> None:
    """An InvalidRequestError when what an adapter was given is not a CanonicalRequest."""
    from metis.model.request import CanonicalRequest

    if not isinstance(request, CanonicalRequest):
        raise InvalidRequestError(
            f"{name}: expected a CanonicalRequest (metis.complete(model, messages) takes "
            f"messages), got {type(request).__name__} {repr(request)[:60]}",
            provider=name,
        )


def transport_mode(
    request: CanonicalRequest, default: bool, streams: bool, name: str
) -> CanonicalRequest:
    """``request`` with ``stream`` decided: its own value, else ``default``."""
    a_request(request, name)
    if request.stream is None:
        return request.model_copy(update={"stream": default})
    if request.stream and not streams:
        raise CapabilityError(
            f"{name} does not stream; the request sets stream=True",
            provider=name,
            request_id=request.request_id,
        )
    return request


def missing_key(
    name: str, stack: StackSpec, endpoint: Endpoint, model: str | None = None
) -> NotConfiguredError | None:
    """The error a call would raise for want of a key (None when the key is there or the stack
    needs none): what a router checks when it is built."""
    auth = stack.auth
    if not auth.header or not auth.env or auth.optional or endpoint.api_key:
        return None
    return NotConfiguredError(
        f"{name}: no API key: set {auth.env} (or pass api_key=...)",
        model=model,
        adapter=name,
        api_key_env=auth.env,
    )


def foreign_prefixes(stack: StackSpec) -> frozenset[str]:
    """The built-in stacks a model prefix could wrongly name for ``stack``: all of them but
    the ones it extends (``anthropic:claude-...`` is right for a stack over anthropic)."""
    return frozenset(set(builtin_stacks()) - own_stack_names(stack))


def warn_unclosed(name: str, adapter: object) -> None:
    """As an unclosed file is said: a ResourceWarning for an adapter that made its connection
    pool and was never closed, naming the fix (``warnings`` is imported with the module: an
    adapter collected at interpreter exit can import nothing)."""
    warnings.warn(
        f"the {name} adapter was never closed, its connection pool still open: use 'async with "
        "build_adapter(...) as adapter:' or 'await adapter.aclose()'",
        ResourceWarning,
        source=adapter,
        stacklevel=3,
    )


def closed_error(name: str, what: str = "adapter") -> ClosedError:
    """A call on the ``name`` adapter (or embedder) after its ``aclose()``."""
    return ClosedError(
        f"the {name} {what} was closed (aclose); build a new one to call again", provider=name
    )
