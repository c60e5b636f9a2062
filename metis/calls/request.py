"""The one-line calls' options, checked, and the request they make."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict, TypeVar

from pydantic import PydanticUserError, TypeAdapter, ValidationError

from metis.adapter.adapter import Adapter
from metis.calls.model_names import stack_and_model as stack_and_model
from metis.calls.notes import call_note as call_note
from metis.calls.notes import unknown_model_note as unknown_model_note
from metis.calls.option_types import check_forced_tool, check_option_types, check_provider_keys
from metis.calls.structured_reply import validated as validated
from metis.core.options import check_options, nearest_option
from metis.errors import (
    ConfigError,
    InvalidRequestError,
)
from metis.model import message_dicts
from metis.model.cache import CachePolicy
from metis.model.content import Message
from metis.model.dicts import MessageDict
from metis.model.knobs import ReasoningEffort
from metis.model.request import CanonicalRequest, ThinkingConfig, ToolChoice, ToolDefinition
from metis.model.server_tools import ServerToolLike
from metis.pipeline.settings import setting_named
from metis.routing.router import Router
from metis.tool_making import ToolLike, as_tool_definition, described_value, tool_list
from metis.tool_schemas import typed_dict_advice
from metis.wire.knobs.reasoning import EFFORT_BUDGETS

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
    tools: Sequence[ToolLike]
    tool_choice: ToolChoice
    parallel_tool_calls: bool
    """False: at most one tool call a reply. Default: the provider's (several, where it can)."""
    max_output_tokens: int
    """Default: the model's own limit, up to 4,096."""
    temperature: float
    top_p: float
    top_k: int
    seed: int
    frequency_penalty: float
    presence_penalty: float
    stop_sequences: Sequence[str]
    output_schema: dict[str, Any]
    thinking: ThinkingConfig
    reasoning: ReasoningEffort | int
    """An effort (``"high"``) or a budget (``8000``): ``thinking``'s shorthand, not both."""
    provider_options: Mapping[str, Mapping[str, Any]]
    extra_headers: Mapping[str, Mapping[str, str]]
    extra_query: Mapping[str, Mapping[str, str]]
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
    "stream_options": "metis asks each provider for what its stream needs, usage included",
    "custom_llm_provider": "the provider is the model string's stack: 'anthropic:model-name'",
    "fallbacks": "a metis.routing.Router of models stands where the model goes (docs/routing.md)",
}
_BODY_FIELD = (
    "a field of one provider's own request goes in provider_options={{'openai': {{{name!r}: "
    "...}}}}, sent to that provider only (docs/contract.md §13); its options are: "
)
_UNSENT = ("n", "logprobs")
MESSAGES_HINT = (
    "the messages are the call's second argument: metis.{call}('provider:model', 'Hi') "
    "(a string, or a list of messages), or messages=..."
)
_PROMPT_NAMES = ("prompt", "input", "contents", "message", "text")
"""Other libraries' names for the conversation, answered with :data:`MESSAGES_HINT`."""


def check_call_options(what: str, options: Mapping[str, Any], *also: str) -> None:
    """Raise :class:`~metis.core.options.UnknownOptionError` for an option ``metis.<what>()``
    does not take, naming the nearest it does; an InvalidRequestError for a numeric option
    of the wrong type."""
    known = OPTIONS.union(also)
    if not known.issuperset(options):
        unsent = {name: f"metis does not send {name}; its options are: " for name in _UNSENT}
        hints = {name: text + ", ".join(sorted(known)) for name, text in unsent.items()}
        hints |= settings_hints(set(options) - known)
        hints |= {name: MESSAGES_HINT.format(call=what) for name in _PROMPT_NAMES}
        for name in set(options) - known - hints.keys() - _HINTS.keys():
            if nearest_option(name, known) is None:  # a wire field: user=, metadata=
                hints[name] = _BODY_FIELD.format(name=name) + ", ".join(sorted(known))
        check_options(f"metis.{what}()", options, known, {**hints, **_HINTS})
    check_option_types(options)


def settings_hints(unknown: Iterable[str]) -> dict[str, str]:
    """For each unknown option that is (or is close to) a provider setting, where it goes:
    ``regoin=`` is ``settings={'region': ...}``."""
    hints = {}
    for name in unknown:
        setting = setting_named(name)
        if setting is not None:
            hints[name] = (
                f"did you mean settings={{{setting!r}: ...}}? (a provider's own settings "
                "go in settings=, checked against its stack's: docs/calls.md)"
            )
    return hints


def default_output_tokens(options: CallOptions | ModelOptions) -> int:
    """The reply's limit when no option sets it (the model's own caps it): 4,096, and the
    tokens of a thinking budget asked for more (an effort's by docs/reasoning.md's table),
    since Anthropic spends the budget out of it and OpenAI counts reasoning in it: under 4,096
    alone every effort from ``medium`` up was one budget, 4,095."""
    thinking: Any = options.get("thinking")
    if thinking is None:
        thinking = options.get("reasoning")
    budget = thinking if type(thinking) is int else getattr(thinking, "budget_tokens", None)
    effort = thinking if isinstance(thinking, str) else getattr(thinking, "effort", None)
    if budget is None and isinstance(effort, str):
        budget = EFFORT_BUDGETS.get(effort)  # type: ignore[call-overload]
    return DEFAULT_MAX_OUTPUT_TOKENS + (budget if type(budget) is int and budget > 0 else 0)


def build_request(
    adapter: Adapter | Router, model: ModelLike, messages: MessagesLike, options: CallOptions
) -> CanonicalRequest:
    if isinstance(model, Router):
        model = f"route:{model.name}"
    max_output_tokens = options.get("max_output_tokens")
    if max_output_tokens is None:  # the model's own limit, up to a default that fits most replies
        limit = adapter.capabilities_for(adapter.wire_model(model)).max_output_tokens
        max_output_tokens = min(limit, default_output_tokens(options))
    tools = tool_list(options.get("tools", ()))
    check_forced_tool(options.get("tool_choice"), tools)
    names = [t.adapter.name for t in adapter.targets] if isinstance(adapter, Router) else []
    check_provider_keys(options, [*names, getattr(adapter, "name", "")])
    stops = options.get("stop_sequences", ())
    if isinstance(stops, str):  # a str is a sequence of strings: its letters, each a stop
        raise InvalidRequestError(
            f"stop_sequences: expected a list of strings, got str {stops!r}; give "
            f"stop_sequences=[{stops!r}]"
        )
    try:
        return _request(model, messages, options, tools, max_output_tokens)
    except ValidationError as exc:
        raise _invalid_option(exc, options) from None


def _request(
    model: str, messages: MessagesLike, options: CallOptions, tools: list[Any], max_tokens: int
) -> CanonicalRequest:
    return CanonicalRequest(
        model=model,
        messages=as_messages(messages),
        system_prompt=options.get("system"),
        tools=_unique([as_tool_definition(t) for t in tools if not isinstance(t, ServerToolLike)]),
        server_tools=[t for t in tools if isinstance(t, ServerToolLike)],
        tool_choice=options.get("tool_choice"),
        parallel_tool_calls=options.get("parallel_tool_calls"),
        max_output_tokens=max_tokens,
        temperature=options.get("temperature"),
        top_p=options.get("top_p"),
        top_k=options.get("top_k"),
        seed=options.get("seed"),
        frequency_penalty=options.get("frequency_penalty"),
        presence_penalty=options.get("presence_penalty"),
        stop_sequences=options.get("stop_sequences") or [],
        output_schema=options.get("output_schema"),
        thinking=thinking_option(options),
        cache=options.get("cache"),
        session_id=options.get("session_id"),
        provider_options=_nested(options.get("provider_options"), "provider_options"),
        extra_headers=_nested(options.get("extra_headers"), "extra_headers"),
        extra_query=_nested(options.get("extra_query"), "extra_query"),
    )


def _unique(definitions: list[ToolDefinition]) -> list[ToolDefinition]:
    """The tools, a tool given twice once; two tools of one name an InvalidRequestError (a model
    calls a tool by its name: Anthropic refuses such a list, others keep one of them)."""
    kept: dict[str, ToolDefinition] = {}
    for definition in definitions:
        seen = kept.setdefault(definition.name, definition)
        if seen != definition:
            raise InvalidRequestError(
                f"tools: two different tools are named {definition.name!r}; a model calls a "
                "tool by its name: give one of them another, metis.tool(name=...)"
            )
    return list(kept.values())


_OPTION_OF_FIELD = {"system_prompt": "system"}


def _invalid_option(exc: ValidationError, options: CallOptions) -> InvalidRequestError:
    """A request field's validation error as the call's option, named as the caller gave it."""
    problems: list[str] = []
    hinted: set[str] = set()
    for err in exc.errors():
        loc = [str(part) for part in err["loc"]]
        if loc and loc[0] == "thinking" and "reasoning" in options:
            loc[0] = "reasoning"
        if loc:
            loc[0] = _OPTION_OF_FIELD.get(loc[0], loc[0])
        shown = repr(err.get("input"))
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        problems.append(f"{'.'.join(loc) or 'request'}: {err['msg']} (got {shown})")
        if loc and loc[0] in _WHAT_IT_TAKES.keys() - hinted:  # said once, a field inside too
            problems[-1] += _WHAT_IT_TAKES[loc[0]]
            hinted.add(loc[0])
    return InvalidRequestError("; ".join(problems))


_WHAT_IT_TAKES = {
    "output_schema": ": output_schema is a JSON schema (a dict, Model.model_json_schema()); a "
    "type is output_type=, which complete(), acomplete() and Session.run() validate the reply "
    "against",
    "reasoning": ": reasoning is an effort ('low', 'medium', 'high', ...) or a token budget (8000)",
    "thinking": ": thinking is a metis.ThinkingConfig (effort= or budget_tokens=), an effort "
    "('high') or a token budget (8000)",
    "tool_choice": ": tool_choice is metis.ToolChoice.auto(), .any(), .none() or .tool(name) "
    "(OpenAI's 'required' is .any())",
    "cache": ": cache is a metis.CachePolicy (ttl=, conversation=, ...); no caching is "
    "metis.CachePolicy.off()",
}


def structured_output(output_type: type[T] | None, options: ModelOptions) -> TypeAdapter[T] | None:
    """``output_type``'s validator, its JSON schema put in ``options`` as the reply's
    ``output_schema``; a type with no JSON schema is a ConfigError saying what would do."""
    if output_type is None:
        return None
    if isinstance(output_type, Mapping):
        raise ConfigError("output_type is a type; a JSON schema (a dict) is output_schema=")
    if options.get("output_schema") is not None:  # output_type's schema would replace it
        raise ConfigError(
            "give output_type or output_schema, not both: output_type asks for its own schema "
            "and validates the reply against it"
        )
    try:
        output = TypeAdapter(output_type)
        options["output_schema"] = output.json_schema()
    except (PydanticUserError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"output_type {_type_name(output_type)} has no JSON schema a model can fill; use a "
            "pydantic model, a dataclass, a TypedDict or a JSON type (str, int, float, bool, "
            f"list, dict, Literal) ({getattr(exc, 'code', type(exc).__name__)})"
            + typed_dict_advice(exc)
        ) from None
    return output


def _type_name(kind: object) -> str:
    if isinstance(kind, type):
        return f"{kind.__module__}.{kind.__qualname__}".removeprefix("builtins.")
    return repr(kind)


def thinking_option(options: ModelOptions) -> ThinkingConfig | ReasoningEffort | int | None:
    """``thinking``, or its shorthand ``reasoning``; both is a ConfigError."""
    thinking, reasoning = options.get("thinking"), options.get("reasoning")
    if thinking is not None and reasoning is not None:
        raise ConfigError(
            "give thinking or its shorthand reasoning, not both "
            f"(thinking={thinking!r}, reasoning={reasoning!r})"
        )
    return thinking if thinking is not None else reasoning


def _nested(
    value: Mapping[str, Mapping[str, Any]] | None, option: str
) -> dict[str, dict[str, Any]]:
    """Options keyed by provider, each a mapping (a ConfigError naming the one that is not, and
    the form a provider's options take)."""
    form = f"; {option} is keyed by provider: {option}={_EXAMPLES[option]}"
    if value is not None and not isinstance(value, Mapping):
        raise ConfigError(
            f"{option}: expected a mapping of provider names to options, got {value!r}{form}"
        )
    out = {}
    for key, inner in (value or {}).items():
        if not isinstance(inner, Mapping):
            raise ConfigError(
                f"{option}: the options for {key!r} must be a mapping, got {inner!r}{form}"
            )
        out[key] = dict(inner)
    return out


_EXAMPLES = {
    "provider_options": "{'openai': {'service_tier': 'flex'}}",
    "extra_headers": "{'anthropic': {'anthropic-beta': '...'}}",
    "extra_query": "{'gemini': {'name': 'value'}}",
}


def as_messages(messages: MessagesLike) -> list[Message]:
    if isinstance(messages, str):
        return [Message.user(messages)]
    if isinstance(messages, Message | dict):
        messages = [messages]
    if isinstance(messages, bytes | bytearray) or not isinstance(messages, Iterable):
        raise InvalidRequestError(
            "messages: expected a string, a Message, a message dict or a list of them, got "
            + described_value(messages)
        )
    return message_dicts.as_messages(messages)
