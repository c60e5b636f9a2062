"""What both history formats share: checking stored values, naming where each one is.

A stored history is input like any other: a field of the wrong type, a list that is not one,
a block that does not validate is an InvalidRequestError naming the message, the block and
the field (``messages[2].content[0].signature: expected a string, got int``), never a bare
``TypeError`` or pydantic ``ValidationError``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from metis.adapter.sendable import first_unsendable
from metis.core.ids import new_tool_id
from metis.core.model_fields import with_hints
from metis.errors import InvalidRequestError
from metis.model.base import Canonical
from metis.model.content import Message
from metis.model.message_dicts import message_from_dict
from metis.wire.json_limits import loads
from metis.wire.unicode_text import clean

log = logging.getLogger("metis")
B = TypeVar("B", bound=BaseModel)


class Ids:
    """Provider tool id -> canonical id, stable within one import."""

    def __init__(self) -> None:
        self.known: dict[str, str] = {}
        self.servers: dict[str, str] = {}  # server tool call id -> its tool's name

    def __call__(self, provider_id: Any, where: str) -> str:
        if not isinstance(provider_id, str) or not provider_id:
            raise InvalidRequestError(f"{where}: expected a tool call id (a non-empty string)")
        return self.known.setdefault(provider_id, new_tool_id())


def dropped(what: Any, where: str, fmt: str, why: str | None = None) -> None:
    """The structured WARN for a part the other side has no canonical form for (its type as
    stored, shortened and printable, or the type of a type that is not a string); ``why``
    says what it is instead, when the form exists but this part cannot take it."""
    what = clean(what[:60]) if isinstance(what, str) else type(what).__name__
    log.warning(
        "dropped %s at %s: %s",
        what,
        where,
        why or f"{fmt} has no canonical form for it",
        extra={"event": "metis.lossy_projection", "block_type": what, "reason": where},
    )


def shown(value: Any) -> str:
    """What an error says a stored value was: its type."""
    return type(value).__name__


def role_shown(role: Any) -> str:
    """A role that is not one of the format's, as an error shows it."""
    return repr(role[:40]) if isinstance(role, str) else f"a {shown(role)}"


def mapping(item: Any, where: str) -> Mapping[str, Any]:
    if isinstance(item, Message):
        raise InvalidRequestError(f"{where}: a metis Message already: it needs no reading")
    if not isinstance(item, Mapping):
        raise InvalidRequestError(f"{where}: expected an object, got {shown(item)}")
    return item


def items(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise InvalidRequestError(f"{where}: expected a list, got {shown(value)}")
    return value


def history(messages: Any, where: str = "messages") -> list[Any]:
    """The stored messages as a list (any iterable but a string or a mapping)."""
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
        raise InvalidRequestError(f"{where}: expected a list of messages, got {shown(messages)}")
    return list(messages)


def stored_history(messages: Any) -> list[Any]:
    """:func:`history`, an official SDK's objects in it as the dicts they stand for: its reply
    appended as it came (``completion.choices[0].message``, ``response.content``)."""
    return [plain(message) for message in history(messages)]


def plain(message: Any) -> Any:
    """A message that is another library's pydantic object (an SDK's), or a dict whose lists
    hold such objects (its blocks), as its JSON form; metis's own are left for the reader to
    refuse (they are not stored form). Only these two levels: a value nested deeper is the
    reader's to check, however deep."""
    if _sdk_object(message):
        return message.model_dump(mode="json", by_alias=True, exclude_none=True)
    if not isinstance(message, Mapping) or not any(
        isinstance(value, list) and any(_sdk_object(item) for item in value)
        for value in message.values()
    ):
        return message
    return {
        key: [_dumped(item) for item in value] if isinstance(value, list) else value
        for key, value in message.items()
    }


def _sdk_object(value: Any) -> bool:
    return isinstance(value, BaseModel) and not isinstance(value, Canonical)


def _dumped(item: Any) -> Any:
    if _sdk_object(item):
        return item.model_dump(mode="json", by_alias=True, exclude_none=True)
    return item


def text(item: Mapping[str, Any], key: str, where: str, default: str | None = "") -> str:
    """``item[key]``, a string (``default`` when it is missing; None: it may not be)."""
    value = item.get(key, default)
    if value is None and default is None:
        raise InvalidRequestError(f"{where}.{key}: missing")
    if not isinstance(value, str):
        raise InvalidRequestError(f"{where}.{key}: expected a string, got {shown(value)}")
    return value


def tool_input(value: Any, where: str) -> dict[str, Any]:
    """Tool arguments: an object, or JSON text of one, holding only what JSON carries (none
    at all: an empty object)."""
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = loads(value or "{}")
        except ValueError:
            raise InvalidRequestError(
                f"{where}: expected a JSON object, got {value[:80]!r}"
            ) from None
    if not isinstance(value, dict):
        raise InvalidRequestError(f"{where}: expected a JSON object, got {shown(value)}")
    problem = first_unsendable(value, where)
    if problem:
        raise InvalidRequestError(problem)
    return value


def built(model: type[B], where: str, **fields: Any) -> B:
    """``model(**fields)``, or an InvalidRequestError naming the field that does not validate."""
    try:
        return model(**fields)
    except ValidationError as exc:
        raise InvalidRequestError(f"{where}{_problems(with_hints(exc, model))}") from None


def message(value: Any, where: str) -> Message:
    """A canonical message, or a dict of one (``metis.MessageDict``), to export."""
    if isinstance(value, Message):
        return value
    if not isinstance(value, Mapping):
        raise InvalidRequestError(
            f"{where}: expected a Message or a message dict, got {shown(value)}"
        )
    return message_from_dict(value, where)


def _problems(error: ValidationError) -> str:
    first = error.errors()[0]
    at = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
    more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
    return f"{at}: {first['msg']}{more}"
