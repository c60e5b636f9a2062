"""What a small value type prints: the fields that say something, an enum as its word."""

from __future__ import annotations

from collections.abc import Iterator
from enum import Enum
from typing import Any

from pydantic import BaseModel


def shown_fields(value: BaseModel) -> Iterator[tuple[str, Any]]:
    """``value``'s fields for its ``repr`` (pydantic's ``__repr_args__``): every required one,
    and the others that are not empty (None, 0, False, empty) or their default; an enum as
    its word, which the field takes back (``StopReason(kind='end_turn')``)."""
    for name, field in type(value).model_fields.items():
        item = getattr(value, name)
        if not field.is_required() and (not item or item == field.get_default()):
            continue
        yield name, item.value if isinstance(item, Enum) else item
