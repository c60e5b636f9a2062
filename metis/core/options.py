"""An unknown keyword option is an error that names the nearest known one.

``metis.complete(model, text, max_tokens=10)`` would otherwise send the default limit and say
nothing; it raises :class:`UnknownOptionError` (a ``TypeError``) instead::

    metis.complete() got an unknown option 'max_tokens'; did you mean 'max_output_tokens'?

The nearest option is the one other libraries' name stands for (:data:`ALIASES`), else the
closest spelling. :func:`checked_options` puts the check on a function whose keywords are
its options, :func:`checked_init` on a class's constructor (a plain class, a dataclass, a
pydantic model).
"""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")
C = TypeVar("C", bound=type)

ALIASES: Mapping[str, str] = {
    "max_tokens": "max_output_tokens",
    "max_completion_tokens": "max_output_tokens",
    "max_new_tokens": "max_output_tokens",
    "maxOutputTokens": "max_output_tokens",
    "system_prompt": "system",
    "system_message": "system",
    "instructions": "system",
    "stop": "stop_sequences",
    "timeout": "timeout_seconds",
    "retries": "max_retries",
    "num_retries": "max_retries",
    "response_format": "output_schema",
    "json_schema": "output_schema",
    "response_model": "output_type",
    "result_type": "output_type",
    "output_model": "output_type",
    "key": "api_key",
    "api_base": "base_url",
    "extra_body": "provider_options",
    "base": "base_url",
    "reasoning": "thinking",
    "reasoning_effort": "thinking",
    "thinking_budget": "thinking",
    "functions": "tools",
    "client": "http_client",
    "headers": "extra_headers",
    "default_headers": "extra_headers",
    "sink": "telemetry",
    "store": "tool_id_store",
    "desc": "description",
    "ttl": "ttl_seconds",
}
"""Other libraries' names (the official SDKs', LiteLLM's, pydantic-ai's) -> metis's."""


class UnknownOptionError(TypeError):
    """A keyword option the function does not take; ``suggestion`` is the nearest it does."""

    def __init__(self, where: str, option: str, known: Iterable[str], hint: str | None = None):
        self.option = option
        known = sorted(known)
        self.suggestion = nearest_option(option, known)
        if hint is not None:
            advice = hint
        elif self.suggestion is not None:
            advice = f"did you mean {self.suggestion!r}?"
        else:
            advice = f"its options are: {', '.join(known) or 'none'}"
        super().__init__(f"{where} got an unknown option {option!r}; {advice}")


def nearest_option(option: str, known: Collection[str]) -> str | None:
    """The known option ``option`` most likely stands for, if any is close."""
    alias = ALIASES.get(option)
    if alias is not None and alias in known:
        return alias
    import difflib  # only a misspelt name needs it

    close = difflib.get_close_matches(option, list(known), n=1, cutoff=0.6)
    return close[0] if close else None


def check_options(
    where: str,
    given: Iterable[str],
    known: Collection[str],
    hints: Mapping[str, str] | None = None,
) -> None:
    """Raise :class:`UnknownOptionError` for the first of ``given`` not in ``known``."""
    for option in given:
        if option not in known:
            hint = hints.get(option) if hints else None
            if hint is None and isinstance(given, Mapping):
                hint = output_hint(option, given[option], known)
            raise UnknownOptionError(where, option, known, hint)


STRUCTURED = frozenset({"response_format", "response_model", "result_type", "output_model"})
"""Other libraries' names for structured output, answered by what their value is."""


def output_hint(option: str, value: object, known: Collection[str]) -> str | None:
    """Where a structured-output value given under another library's name goes: a type is
    ``output_type`` (or its schema, where only ``output_schema`` is taken), OpenAI's
    ``response_format`` dict the schema inside it; None for anything else."""
    if option not in STRUCTURED:
        return None
    if isinstance(value, type):
        name = value.__name__
        if "output_type" in known:
            return f"did you mean 'output_type'? (output_type={name}: the reply as a {name})"
        schema = (
            f"{name}.model_json_schema()"
            if hasattr(value, "model_json_schema")
            else (f"pydantic.TypeAdapter({name}).json_schema()")
        )
        return (
            f"a type is output_type=, which complete(), acomplete() and Session.run() take; "
            f"here give its JSON schema: output_schema={schema}"
        )
    if isinstance(value, Mapping) and value.get("type") in ("json_schema", "json_object"):
        return (
            "did you mean 'output_schema'? It takes the JSON schema itself (OpenAI's "
            "response_format['json_schema']['schema']), or a type as output_type=; JSON with "
            "no schema is not an option of metis"
        )
    return None


def keyword_names(function: Callable[..., object]) -> frozenset[str]:
    """The names ``function`` takes as keywords."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    parameters = inspect.signature(function).parameters.values()
    return frozenset(p.name for p in parameters if p.kind in kinds) - {"self", "cls"}


def checked_options(function: Callable[P, R]) -> Callable[P, R]:
    """``function`` (or a class's ``__init__``), raising :class:`UnknownOptionError` for a
    keyword it does not take, before it runs."""
    known = keyword_names(function)
    owner, _, name = function.__qualname__.rpartition(".")
    where = f"{owner}()" if name == "__init__" else f"{function.__qualname__}()"

    @functools.wraps(function)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        if not known.issuperset(kwargs):
            check_options(where, kwargs, known)
        return function(*args, **kwargs)

    return checked


def checked_init(cls: C) -> C:
    """``cls``, its constructor raising :class:`UnknownOptionError` for a keyword it does not
    take (a pydantic model's: its fields and their aliases, a subclass's own included)."""
    init: Callable[..., None] = cls.__init__  # type: ignore[misc]
    is_model = hasattr(cls, "__pydantic_fields__")
    known = frozenset[str]() if is_model else keyword_names(init)

    @functools.wraps(init)
    def checked(self: object, *args: Any, **kwargs: Any) -> None:
        options = _model_options(type(self)) if is_model else known
        if not options.issuperset(kwargs):
            check_options(f"{type(self).__name__}()", kwargs, options)
        init(self, *args, **kwargs)

    cls.__init__ = checked  # type: ignore[misc]
    return cls


_model_fields: weakref.WeakKeyDictionary[type, frozenset[str]] = weakref.WeakKeyDictionary()


def _model_options(model: type) -> frozenset[str]:
    """A pydantic model's fields and their aliases (by class, computed once)."""
    known = _model_fields.get(model)
    if known is None:
        fields: dict[str, Any] = getattr(model, "__pydantic_fields__", {})
        aliases = {field.alias for field in fields.values() if field.alias}
        known = _model_fields[model] = frozenset(fields).union(aliases)
    return known
