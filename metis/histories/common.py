"""What both history formats share: stable tool ids, the WARN for what is left out, and the
shape checks that make malformed input an InvalidRequestError naming where it is."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from metis.core.ids import new_tool_id
from metis.errors import InvalidRequestError

log = logging.getLogger("metis")


class Ids:
    """Provider tool id -> canonical id, stable within one import."""

    def __init__(self) -> None:
        self.known: dict[str, str] = {}

    def __call__(self, provider_id: Any, where: str) -> str:
        if not isinstance(provider_id, str) or not provider_id:
            raise InvalidRequestError(f"{where}: expected a tool call id (a non-empty string)")
        return self.known.setdefault(provider_id, new_tool_id())


def dropped(what: str, where: str, fmt: str, why: str | None = None) -> None:
    """The lossy-projection WARN for ``what`` at ``where``, which ``fmt`` cannot hold."""
    log.warning(
        "dropped %s at %s: %s",
        what,
        where,
        why or f"{fmt} has no canonical form for it",
        extra={"event": "metis.lossy_projection", "block_type": what, "reason": where},
    )


def mapping(item: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(item, Mapping):
        raise InvalidRequestError(f"{where}: expected an object, got {type(item).__name__}")
    return item


def items(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise InvalidRequestError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def text_field(item: Mapping[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidRequestError(f"{where}.{key}: expected a non-empty string")
    return value
