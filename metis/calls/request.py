"""The one-line calls' options, checked, and the request they make."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypedDict, TypeVar

from pydantic import TypeAdapter, ValidationError

from metis.adapter.adapter import Adapter
from metis.core.options import check_options
from metis.errors import ConfigError, OutputValidationError
from metis.model import message_dicts
from metis.model.cache import CachePolicy
from metis.model.content import Message
from metis.model.dicts import MessageDict
from metis.model.request import CanonicalRequest, ThinkingConfig, ToolChoice, ToolDefinition
from metis.model.response import CanonicalResponse
from metis.routing.router import Router
from metis.tools import AnyTool, as_tool_definition

MessagesLike = str | Message | MessageDict | Sequence[Message | MessageDict]
"""A user's text, one message, or the conversation: Message objects or plain dicts."""
ModelLike = str | Router
"""``"provider:model"``, or a router over several models."""
DEFAULT_MAX_OUTPUT_TOKENS = 4096
DEFAULT_TIMEOUT_SECONDS = 600.0
DEFAULT_MAX_RETRIES = 2
T = TypeVar("T")


class ModelOptions(TypedDict, total=False):
    """What a model call takes besides the messages (all keyword, all optional): the one-line
    calls' options but the session id, which a :class:`~metis.sessions.Session` owns. The
    docstring of :func:`metis.complete` says what each does."""

    system: str
    tools: Sequence[AnyTool | ToolDefinition | Callable[..., Any]]
    tool_choice: ToolChoice
    max_output_tokens: int
    """Default: the model's own limit, up to 4,096."""
    temperature: float
    stop_sequences: Sequence[str]
    output_schema: dict[str, Any]
    thinking: ThinkingConfig
    cache: CachePolicy
    """Default: the stack's policy (docs/caching.md)."""
    api_key: str
    """Default: the stack's variable (``ANTHROPIC_API_KEY``, ...)."""
    base_url: str
    """Default: the SDK's variable where the stack names one, else the provider's URL."""
    timeout_seconds: float
    max_retries: int
    settings: Mapping[str, Any]
    """The provider's own settings, of its stack's kind (``{"region": "eu-west-1"}`` for
    Bedrock; docs/engine.md), checked when the adapter is built."""


class CallOptions(ModelOptions, total=False):
    """The options every one-line call takes (all keyword, all optional); the docstring of
    :func:`metis.complete` says what each does."""

    session_id: str


OPTIONS = CallOptions.__optional_keys__

_HINTS = {
    "stream": "for a streamed call use metis.stream(...) or metis.astream(...)",
    "model": "the model is the first argument: metis.complete('provider:model', messages)",
}
_UNSENT = ("top_p", "top_k", "frequency_penalty", "presence_penalty", "seed", "n", "logprobs")


def check_call_options(what: str, options: Mapping[str, Any], *also: str) -> None:
    """Raise :class:`~metis.core.options.UnknownOptionError` for an option ``metis.<what>()``
    does not take, naming the nearest it does."""
    known = OPTIONS.union(also)
    if not known.issuperset(options):
        unsent = {name: f"metis does not send {name}; its options are: " for name in _UNSENT}
        hints = {name: text + ", ".join(sorted(known)) for name, text in unsent.items()}
        check_options(f"metis.{what}()", options, known, {**_HINTS, **hints})


def build_request(
    adapter: Adapter | Router, model: ModelLike, messages: MessagesLike, options: CallOptions
) -> CanonicalRequest:
    if isinstance(model, Router):
        model = f"route:{model.name}"
    max_output_tokens = options.get("max_output_tokens")
    if max_output_tokens is None:  # the model's own limit, up to a default that fits most replies
        limit = adapter.capabilities_for(adapter.wire_model(model)).max_output_tokens
        max_output_tokens = min(limit, DEFAULT_MAX_OUTPUT_TOKENS)
    return CanonicalRequest(
        model=model,
        messages=as_messages(messages),
        system_prompt=options.get("system"),
        tools=[as_tool_definition(t) for t in options.get("tools", ())],
        tool_choice=options.get("tool_choice"),
        max_output_tokens=max_output_tokens,
        temperature=options.get("temperature"),
        stop_sequences=list(options.get("stop_sequences", ())),
        output_schema=options.get("output_schema"),
        thinking=options.get("thinking"),
        cache=options.get("cache"),
        session_id=options.get("session_id"),
    )


def stack_and_model(model: str) -> tuple[str, str]:
    """``"provider:model"`` split, or a ConfigError saying what was expected."""
    stack_name, sep, wire = model.partition(":")
    if not sep or not stack_name or not wire:
        raise ConfigError(
            "expected a model as 'provider:model' (e.g. anthropic:claude-sonnet-4-5), "
            f"got {model!r}"
        )
    return stack_name, wire


def validated(output: TypeAdapter[T], response: CanonicalResponse) -> T:
    """The reply's structured output as ``output``'s type, or an OutputValidationError
    carrying the reply."""
    try:
        return output.validate_json(response.text)
    except ValidationError as exc:
        error = OutputValidationError(
            f"{response.model}: the reply does not validate as {output}: "
            + "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'reply'}: {e['msg']}" for e in exc.errors()
            ),
            raw_text=response.text,
            provider=response.provider,
            request_id=response.request_id,
        )
        error.partial_response = response
        raise error from None


def as_messages(messages: MessagesLike) -> list[Message]:
    if isinstance(messages, str):
        return [Message.user(messages)]
    if isinstance(messages, Message | dict):
        messages = [messages]
    return message_dicts.as_messages(messages)
