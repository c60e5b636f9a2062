"""The numeric options (and the flag) of the one-line calls and sessions, checked for their
type before anything is sent: Python takes ``True`` for the int ``1`` and pydantic's lax mode
takes ``"3"`` for ``3``, so ``max_retries=True`` would otherwise be one retry, silently."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from metis.core.suggest import did_you_mean
from metis.errors import ConfigError, InvalidRequestError
from metis.model.request import tool_choice_meant

WHOLE = {
    "max_output_tokens": "a whole number of tokens >= 1",
    "max_retries": "a whole number of retries >= 0",
    "top_k": "a whole number >= 1",
    "seed": "a whole number",
}
NUMBER = {
    "temperature": "a number >= 0",
    "top_p": "a number from 0 to 1",
    "frequency_penalty": "a number",
    "presence_penalty": "a number",
    "timeout_seconds": "a number of seconds > 0",
}


FLAG = ("parallel_tool_calls",)


def check_option_types(options: Mapping[str, Any]) -> None:
    """An InvalidRequestError for a numeric option that is not a number of its kind (a bool,
    a string, a float where a whole number is meant), or a flag that is not a bool, saying
    what the option takes; ``None`` is the option not given."""
    meant = tool_choice_meant(options.get("tool_choice"))
    if meant is not None:
        raise InvalidRequestError(
            f"tool_choice: {options['tool_choice']!r:.80} is another API's; metis's is "
            f"tool_choice=metis.{meant}"
        )
    for name, value in options.items():
        if name in FLAG and value is not None and not isinstance(value, bool):
            raise InvalidRequestError(
                f"{name}: expected True or False, got {type(value).__name__} {value!r:.80}"
            )
        if value is None or (name not in WHOLE and name not in NUMBER):
            continue
        kinds: tuple[type, ...] = (int,) if name in WHOLE else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds):
            takes = WHOLE.get(name) or NUMBER[name]
            raise InvalidRequestError(
                f"{name}: expected {takes}, got {type(value).__name__} {value!r:.80}"
            )


PER_PROVIDER = ("provider_options", "extra_headers", "extra_query")


def check_provider_keys(options: Mapping[str, Any], own: Iterable[str]) -> None:
    """A ConfigError for a key of ``provider_options``, ``extra_headers`` or ``extra_query``
    that names no provider (``opnai``): its options would never be sent. A key is a built-in
    stack, a catalog provider id or one of ``own`` (the names of the call's adapters); another
    provider's options are kept for when the conversation moves there."""
    given = {
        (option, key)
        for option in PER_PROVIDER
        if isinstance(options.get(option), Mapping)
        for key, value in options[option].items()
        if isinstance(value, Mapping)  # one that is not is refused with the form it takes
    }
    from metis.stacks.loader import builtin_stacks

    known = {*builtin_stacks(), *own}
    unknown = [(option, key) for option, key in sorted(given) if key not in known]
    if not unknown:
        return
    from metis.catalog import default_catalog

    known |= set(default_catalog().providers)
    for option, key in unknown:
        if key not in known:
            raise ConfigError(
                f"{option}: {key!r} names no provider{did_you_mean(str(key), known)}; its "
                "options would never be sent (keys are a stack or catalog provider id: "
                f"{option}={{'openai': {{...}}}})"
            )


def check_forced_tool(choice: Any, tools: list[Any]) -> None:
    """A tool_choice that forces a call (``any``, ``tool``) with no tool given: an
    InvalidRequestError, not left out (the model would answer in text)."""
    forced = getattr(choice, "type", None) in ("any", "tool")
    if forced and not tools:
        raise InvalidRequestError(
            f"tool_choice={choice!r} forces a tool call, and no tools were given; pass "
            "tools=[...] (a @metis.tool function, a ToolDefinition, a provider's tool)"
        )
