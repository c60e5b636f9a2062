"""A request as read from one of the served APIs: the canonical parts, what the reply's shape
depends on, and the fields that were left out because they have no canonical meaning."""

from __future__ import annotations

import marshal
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from metis.core.ids import TOOL_ID_PREFIX
from metis.errors import InvalidRequestError
from metis.histories.reading import Ids
from metis.model.content import Message
from metis.model.knobs import EFFORT_ORDER
from metis.model.request import CanonicalRequest, ThinkingConfig, ToolDefinition


@dataclass(slots=True)
class Inbound:
    """One request in canonical terms, before the gateway routes it. ``model`` is the name the
    client gave (a model, alias or route of the configuration); ``fields`` the other
    ``CanonicalRequest`` fields; ``ignored`` the request's fields that were left out."""

    model: str
    messages: list[Message]
    stream: bool = False
    max_output_tokens: int | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    unread: Callable[[], list[str]] | None = None
    """What the reader left out inside the messages, their parts and the tools, not looked for
    yet: nothing can be refused for it, so the gateway looks once the request is on its way
    (metis.gateway.ahead); :meth:`said` adds it to ``ignored``."""
    frame: Any = None
    """The frame kept for requests asking what this one asks beside its turns, if any
    (metis.gateway.frames): its canonical request is built from the frame's plan."""

    def said(self) -> list[str]:
        """``ignored``, with what ``unread`` finds added the first time it is asked."""
        if self.unread is not None:
            look, self.unread = self.unread, None
            self.ignored += look()
        return self.ignored

    def finished(self, later: bool) -> Inbound:
        """This request, what it left out looked for now unless ``later``."""
        if not later:
            self.said()
        return self

    def request(self, model: str, max_output_tokens: int, **changes: Any) -> CanonicalRequest:
        """The canonical request for ``model`` (its wire form, or a route)."""
        fields = {**self.fields, **changes}
        return CanonicalRequest(
            model=model, messages=self.messages, max_output_tokens=max_output_tokens, **fields
        )


class KeptIds(Ids):
    """Tool ids as a client sends them back: a canonical id the gateway gave out stays itself
    (so the tool-id store finds the provider id behind it); any other gets a canonical id,
    the same one throughout the request."""

    def __call__(self, provider_id: Any, where: str) -> str:
        if isinstance(provider_id, str) and provider_id.startswith(TOOL_ID_PREFIX):
            return provider_id
        return super().__call__(provider_id, where)


def body_object(body: Any) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise InvalidRequestError("the request body must be a JSON object")
    return body


def model_name(body: Mapping[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequestError("model: expected the name of a model (a non-empty string)")
    return model


def whole_number(value: Any) -> int | None:
    """``value`` as an integer if JSON Schema calls it one, as the providers do (``1000``,
    ``1000.0``, ``1e3``); None for anything else."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def optional_int(body: Mapping[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    number = whole_number(value)
    if number is None or number < 1:
        raise InvalidRequestError(f"{key}: expected a positive integer, got {value!r}"[:200])
    return number


SAMPLING_RANGES: dict[str, tuple[float | None, float | None]] = {
    "temperature": (0, 2),
    "top_p": (0, 1),
    "top_k": (1, None),
    "seed": (None, None),
    "frequency_penalty": (-2, 2),
    "presence_penalty": (-2, 2),
}
"""The sampling settings a served API may give, with the range OpenAI's API reference gives
each (``top_k``, Anthropic's, and ``seed`` integers): the canonical request's own, so the
library sends each to a model that takes it and names it where the model does not. A value
the caller's own API refuses is refused (a 400 naming it); one it takes that the routed model
does not is left out and named (metis/gateway/projection.py)."""

MESSAGES_SAMPLING = {**SAMPLING_RANGES, "temperature": (0, 1)}
"""The Messages API's: its temperature is 0 to 1 (Anthropic's API reference)."""
LOGPROBS_RANGE = {"top_logprobs": (0, 20)}
"""OpenAI's ``top_logprobs`` (Chat and Responses), an integer: no model is asked for it (it is
left out and named), but a value OpenAI refuses is refused."""


def sampling(
    body: Mapping[str, Any],
    names: tuple[str, ...],
    ranges: Mapping[str, tuple[float | None, float | None]] = SAMPLING_RANGES,
) -> dict[str, Any]:
    """The request's ``names`` among ``ranges`` (the caller's API's), as canonical fields; a
    value of the wrong type or outside its range is a 400 naming it, as that API refuses it."""
    fields: dict[str, Any] = {}
    for name in names:
        value = body.get(name)
        if value is None:
            continue
        low, high = ranges[name]
        integral = name in ("top_k", "seed", "top_logprobs")
        number = whole_number(value) if integral else _finite(value)
        if (
            number is None
            or (low is not None and number < low)
            or (high is not None and number > high)
        ):
            kind = "an integer" if integral else "a number"
            bounds = (
                "" if low is None else f" from {low:g}" + ("" if high is None else f" to {high:g}")
            )
            raise InvalidRequestError(f"{name}: expected {kind}{bounds}, got {value!r}"[:200])
        fields[name] = number
    return fields


def logit_bias(raw: Any) -> None:
    """Chat's ``logit_bias`` (left out and named: no canonical form) checked as OpenAI checks
    it: an object of token ids to biases from -100 to 100."""
    if raw is None:
        return
    if not isinstance(raw, Mapping):
        raise InvalidRequestError(f"logit_bias: expected an object, got {type(raw).__name__}")
    for token, bias in raw.items():
        number = _finite(bias)
        if number is None or not -100 <= number <= 100:
            said = f"logit_bias: expected a number from -100 to 100 for {token!r}, got {bias!r}"
            raise InvalidRequestError(said[:200])


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def flag(body: Mapping[str, Any], key: str, default: bool = False) -> bool:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidRequestError(f"{key}: expected true or false, got {value!r}"[:200])
    return value


def string_list(value: Any, where: str) -> list[str]:
    """A string or a list of strings (OpenAI's ``stop``), as a list."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    raise InvalidRequestError(f"{where}: expected a string or a list of strings")


def tool_definition(
    name: Any, description: Any, schema: Any, where: str, strict: Any = None
) -> ToolDefinition:
    """The canonical tool of a client's function tool; ``strict`` its API's strict flag."""
    if not isinstance(name, str) or not name:
        raise InvalidRequestError(f"{where}.name: expected a non-empty string")
    if schema is None:
        schema = {"type": "object", "properties": {}}
    if not isinstance(schema, dict):
        raise InvalidRequestError(f"{where}: the input schema must be a JSON object")
    if strict is not None and not isinstance(strict, bool):
        raise InvalidRequestError(f"{where}.strict: expected a boolean")
    text = description if isinstance(description, str) else ""
    try:  # marshal's form holds every part's exact type (its version 2: no references
        blob = marshal.dumps(schema, 2)  # that vary with refcounts)
    except ValueError:  # not a JSON value (a client's body is parsed JSON: never)
        return ToolDefinition(name=name, description=text, input_schema=schema, strict=strict)
    key = (name, text, strict, blob)
    kept = _TOOLS.get(key)
    if kept is None:
        if len(_TOOLS) >= _TOOLS_AT_MOST:
            _TOOLS.clear()
        tool = ToolDefinition(name=name, description=text, input_schema=schema, strict=strict)
        kept = _TOOLS[key] = tool.model_copy(update={"input_schema": marshal.loads(blob)})
    return kept


_TOOLS: dict[tuple[Any, ...], ToolDefinition] = {}
"""Each tool read so far, by its content, with a schema of its own (unmarshalled from the
key: no client's body holds it). A client sends the same tools request after request (an
agent's every turn): the schema is validated once, and every request that sends it is given
the very same tool, so what the steps derive from its schema is made once
(metis/model/schema_forms.py; no step changes a schema in place, and a stage of the
application's is given its own copy: docs/stages.md)."""
_TOOLS_AT_MOST = 256


def effort_thinking(effort: Any, where: str) -> ThinkingConfig | None:
    """OpenAI's ``reasoning_effort`` (or ``reasoning.effort``) as a canonical effort level, which
    the adapter fits to the routed model (docs/reasoning.md)."""
    if effort is None:
        return None
    if effort not in EFFORT_ORDER:
        raise InvalidRequestError(
            f"{where}: expected one of {', '.join(EFFORT_ORDER)}, got {effort!r}"[:200]
        )
    return ThinkingConfig(effort=effort)


def unknown_fields(body: Mapping[str, Any], read: frozenset[str]) -> list[str]:
    """The request's fields the reader does not take, in the order they came. A field given
    as null or empty asks for nothing, and nothing of it is left out (the OpenAI Agents SDK
    sends ``include: []`` with every Responses request)."""
    return [key for key in body if key not in read and body[key] not in EMPTY]


EMPTY: tuple[Any, ...] = (None, [], {})
