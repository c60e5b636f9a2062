"""Reading server data: small checks that each value has the shape the wire format gives it.

Codecs read every value a server sent through these accessors. A value of the wrong shape (a
list where an object belongs, a number where a string does, a required key missing) is a
:class:`~metis.errors.ProtocolError` naming the field and what was there, such as
``message_delta.usage: expected an object, got list [1, 2]``. Anything else a codec raises is
a bug in the codec and escapes as itself, so tests catch it (h11's rule).

Each check is a class comparison or a ``dict.get``: they sit on the streaming hot path.
``where`` names the object being read (``"message_delta"``); the field accessors add the key
only when they fail, so reading builds no strings.
"""

from __future__ import annotations

import logging
import reprlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from metis.errors import ProtocolError
from metis.model.response import UsageDetail

log = logging.getLogger("metis")

MAX_TOKEN_COUNT = 10**12
"""No call reports more tokens than this; a larger count is a corrupt number, not usage."""

_SHOWN = reprlib.Repr()
_SHOWN.maxstring = 60
_SHOWN.maxother = 60
_SHOWN.maxlevel = 2
_KIND = {dict: "object", list: "list", str: "string", int: "int", float: "float", bool: "bool"}


# Values ------------------------------------------------------------------------------------


def object_value(value: Any, where: str) -> dict[str, Any]:
    if value.__class__ is dict:
        return value
    raise malformed(where, "an object", value)


def text_value(value: Any, where: str) -> str:
    if value.__class__ is str:
        return value
    raise malformed(where, "a string", value)


def list_value(value: Any, where: str) -> list[Any]:
    if value.__class__ is list:
        return value
    raise malformed(where, "a list", value)


# Fields of an object already read ----------------------------------------------------------


def required(mapping: dict[str, Any], key: str, where: str) -> Any:
    """The value at ``key``, which must be present and not null."""
    value = mapping.get(key)
    if value is None:
        raise ProtocolError(f"{where}.{key} is missing")
    return value


def required_object(mapping: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = mapping.get(key)
    if value.__class__ is dict:
        return value
    raise _wrong(mapping, key, where, "an object")


def required_text(mapping: dict[str, Any], key: str, where: str) -> str:
    value = mapping.get(key)
    if value.__class__ is str:
        return value
    raise _wrong(mapping, key, where, "a string")


def required_list(mapping: dict[str, Any], key: str, where: str) -> list[Any]:
    value = mapping.get(key)
    if value.__class__ is list:
        return value
    raise _wrong(mapping, key, where, "a list")


def required_index(mapping: dict[str, Any], key: str, where: str) -> int:
    """A position the server numbers blocks or items by: a whole number."""
    value = mapping.get(key)
    if value.__class__ is int:
        return value
    raise _wrong(mapping, key, where, "a whole number")


def optional_object(mapping: dict[str, Any], key: str, where: str) -> dict[str, Any] | None:
    """The object at ``key``, or ``None`` when the key is absent or null."""
    value = mapping.get(key)
    if value is None or value.__class__ is dict:
        return value
    raise malformed(f"{where}.{key}", "an object", value)


def optional_text(mapping: dict[str, Any], key: str, where: str) -> str | None:
    """The string at ``key``, or ``None`` when the key is absent or null."""
    value = mapping.get(key)
    if value is None or value.__class__ is str:
        return value
    raise malformed(f"{where}.{key}", "a string", value)


def optional_list(mapping: dict[str, Any], key: str, where: str) -> list[Any]:
    """The list at ``key``; an empty one when the key is absent or null."""
    value = mapping.get(key)
    if value.__class__ is list:
        return value
    if value is None:
        return []
    raise malformed(f"{where}.{key}", "a list", value)


def token_count(value: Any, field: str, provider: str = "provider") -> int:
    """``value`` as a token count: a whole number (``12`` or ``12.0``) from 0 to
    ``MAX_TOKEN_COUNT``. A negative one cannot be true: an :class:`UntrueCount`. Anything else
    (fractional, huge, NaN, Infinity, a string, a bool) is a ProtocolError naming ``field``;
    codecs check counts with it before doing arithmetic on them."""
    cls = value.__class__
    if cls is int:
        if 0 <= value <= MAX_TOKEN_COUNT:
            return int(value)
    elif cls is float and value.is_integer() and 0 <= value <= MAX_TOKEN_COUNT:
        return int(value)
    if negative(value):
        raise UntrueCount(field, value)
    raise ProtocolError(
        f"{provider} sent a malformed {field}: {shown(value)} (a token count is a whole number"
        " >= 0)"
    )


class UntrueCount(ProtocolError):
    """A token count below zero (OpenAI's deep-research replies have said
    ``"output_tokens": -9``): no count can be, so the reply's usage is unknown, not the reply
    broken. Codecs read usage inside :func:`counts_of`, which makes it estimated instead."""

    def __init__(self, field: str, value: Any) -> None:
        super().__init__(f"{field} {shown(value)}, a count that cannot be true")
        self.field = field
        self.value = value


def negative(value: Any) -> bool:
    """``value`` is a whole number below zero (``-9`` or ``-9.0``)."""
    if value.__class__ is int:
        return bool(value < 0)
    return value.__class__ is float and value < 0 and value.is_integer()


class _Counted(Protocol):
    provider: str
    usage_unknown: bool

    def unknown_usage(self) -> None: ...


@contextmanager
def counts_of(builder: _Counted) -> Iterator[None]:
    """Read a usage object's counts inside: an :class:`UntrueCount` among them makes the
    message's usage unknown (estimated at its end, as a reply without usage is), with a
    warning naming what the provider sent; the reply goes on."""
    try:
        yield
    except UntrueCount as error:
        if not builder.usage_unknown:
            said_untrue(builder.provider, error)
        builder.unknown_usage()


def said_untrue(provider: str, error: UntrueCount) -> None:
    """The warning that ``provider`` sent a count that cannot be true, so its usage is
    estimated (a message's, an embedding call's, a compaction pass's)."""
    log.warning(
        "%s sent %s; its token usage is estimated",
        provider,
        error.message,
        extra={"event": "metis.usage_untrue", "adapter": provider},
    )


# Errors ------------------------------------------------------------------------------------


def malformed(where: str, expected: str, value: Any) -> ProtocolError:
    """The error for ``value`` found at ``where`` where ``expected`` belongs."""
    if value is None:
        return ProtocolError(f"{where} is missing (expected {expected})")
    return ProtocolError(f"{where}: expected {expected}, got {_kind(value)} {shown(value)}")


def _wrong(mapping: dict[str, Any], key: str, where: str, expected: str) -> ProtocolError:
    return malformed(f"{where}.{key}", expected, mapping.get(key))


def _kind(value: Any) -> str:
    """What a decoded JSON value is, as the wire format would call it."""
    return _KIND.get(value.__class__, "null" if value is None else type(value).__name__)


def shown(value: Any) -> str:
    """A short excerpt of ``value`` for an error message."""
    if value.__class__ is int and abs(value) > MAX_TOKEN_COUNT:
        return f"a {value.bit_length()}-bit number"  # repr() of a huge int may itself fail
    return _SHOWN.repr(value)


def split_input(total: int, cached: int, written: int) -> tuple[int, int, int]:
    """A prompt total that includes its cached and cache-written tokens, as canonical usage:
    ``(uncached input, cached, written)``, which always add up to ``total``. A provider whose
    cached and written counts together exceed its total (OpenRouter does for Gemini) has the
    total kept: the cached count first, then as much of the written one as is left."""
    cached = min(cached, total)
    written = min(written, total - cached)
    return total - cached - written, cached, written


def audio_counts(inputs: dict[str, Any], outputs: dict[str, Any], provider: str) -> UsageDetail:
    """The ``audio_tokens`` of OpenAI's input and output details, where they are said."""
    found, said = UsageDetail(), "audio_tokens"
    if inputs.get(said) is not None:
        found["input_audio_tokens"] = token_count(inputs[said], said, provider)
    if outputs.get(said) is not None:
        found["output_audio_tokens"] = token_count(outputs[said], said, provider)
    return found


def modality_audio(usage: dict[str, Any], keys: tuple[str, str], provider: str) -> UsageDetail:
    """The ``AUDIO`` entries of the lists of counts by modality at ``keys`` (input, output:
    Gemini's ``promptTokensDetails`` and ``candidatesTokensDetails``), where they are said."""
    found = UsageDetail()
    for key in keys:
        if usage.get(key) is None:
            continue
        audio = 0
        for entry in list_value(usage[key], f"usage.{key}"):
            entry = object_value(entry, f"usage.{key}[]")
            if entry.get("modality") == "AUDIO":
                audio += token_count(entry.get("tokenCount") or 0, f"{key}[].tokenCount", provider)
        if key == keys[0]:
            found["input_audio_tokens"] = audio
        else:
            found["output_audio_tokens"] = audio
    return found
