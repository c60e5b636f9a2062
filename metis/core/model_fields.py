"""The fields a pydantic model takes at a place of its input, and a misspelt field's error that
names the nearest of them.

Every model metis reads from a user or a config file refuses unknown fields (``extra=
"forbid"``); pydantic's error says only "Extra inputs are not permitted". :func:`with_hints`
adds the nearest known names (``did you mean 'temperature'?``), found by following the error's
location through the model's fields, lists, mappings and tagged unions (:func:`fields_at`).
"""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError
from pydantic_core.core_schema import ErrorType

from metis.core.suggest import did_you_mean

EXTRA = "extra_forbidden"
_UNION_TYPES = (typing.Union, type(int | None))
_LISTS = (list, tuple, set, frozenset, Sequence)
_MAPPINGS = (dict, Mapping)
_PYDANTIC_KINDS = frozenset(typing.get_args(ErrorType))


def fields_at(schema: type[BaseModel], path: Sequence[str | int]) -> list[str]:
    """The field names of the model(s) reached by following ``path`` (a pydantic error's
    location, without its last part) from ``schema``; empty where no model is reached."""
    places: list[tuple[Any, str | None]] = [(schema, None)]
    for part in path:
        places = [step for place in places for step in _steps(place, part)] or places
    names: dict[str, None] = {}
    for annotation, _ in places:
        for member in _members(annotation):
            if _is_model(member):
                names.update(dict.fromkeys(member.model_fields))
    return list(names)


def _steps(place: tuple[Any, str | None], part: str | int) -> list[tuple[Any, str | None]]:
    """Where ``part`` of a location leads from ``place`` (an annotation, and the discriminator
    of its union); nothing where it names no field (a union's label: ``list[...]``)."""
    annotation, discriminator = place
    members = _members(annotation)
    if discriminator is not None and isinstance(part, str):
        tagged = [m for m in members if _is_model(m) and _tag(m, discriminator) == part]
        if tagged:  # the union's tag: pydantic names the member it chose, not a field
            return [(m, None) for m in tagged]
    found: list[tuple[Any, str | None]] = []
    for member in members:
        origin = typing.get_origin(member)
        if _is_model(member) and isinstance(part, str) and part in member.model_fields:
            field = member.model_fields[part]
            found.append((field.annotation, _discriminator(field.discriminator)))
        elif origin in _LISTS and isinstance(part, int):
            found.append(_unwrapped(typing.get_args(member)[0]))
        elif origin in _MAPPINGS and isinstance(part, str):
            found.append(_unwrapped(typing.get_args(member)[-1]))
    return found


def _members(annotation: Any) -> list[Any]:
    """A union's members (``X | None``: ``X``), each without its ``Annotated`` metadata."""
    annotation, _ = _unwrapped(annotation)
    if typing.get_origin(annotation) in _UNION_TYPES:
        return [m for arg in typing.get_args(annotation) for m in _members(arg)]
    return [] if annotation is type(None) else [annotation]


def _unwrapped(annotation: Any) -> tuple[Any, str | None]:
    """``Annotated[X, Field(discriminator=...)]`` as ``X`` and its discriminator."""
    discriminator = None
    while typing.get_origin(annotation) is Annotated:
        annotation, *metadata = typing.get_args(annotation)
        for item in metadata:
            discriminator = _discriminator(getattr(item, "discriminator", None)) or discriminator
    return annotation, discriminator


def _discriminator(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _tag(model: type[BaseModel], discriminator: str) -> Any:
    field = model.model_fields.get(discriminator)
    return None if field is None else field.default


def _is_model(annotation: Any) -> typing.TypeGuard[type[BaseModel]]:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def unknown_field_hint(schema: type[BaseModel], loc: Sequence[str | int]) -> str:
    """``"; did you mean 'x'?"`` for the unknown field at ``loc`` (a pydantic error's
    location) of ``schema``'s input, naming the nearest fields taken there; or ``""``."""
    if not loc:
        return ""
    return did_you_mean(str(loc[-1]), fields_at(schema, loc[:-1]))


def with_hints(error: ValidationError, schema: type[BaseModel]) -> ValidationError:
    """``error`` with each unknown field's message naming the nearest field ``schema`` takes
    there (``Extra inputs are not permitted; did you mean 'temperature'?``); ``error`` itself
    when no unknown field is near a known one."""
    details = error.errors()
    hints = [unknown_field_hint(schema, e["loc"]) if e["type"] == EXTRA else "" for e in details]
    if not any(hints):
        return error
    lines = [_detail(e, hint) for e, hint in zip(details, hints, strict=True)]
    return ValidationError.from_exception_data(error.title, lines)


def _detail(error: Any, hint: str) -> InitErrorDetails:
    """One error as ``from_exception_data`` takes it: pydantic's own kinds as they were (with
    their context), an unknown field's with its hint, a validator's own kind as its message
    (a custom kind's message is not formatted again without a context)."""
    if error["type"] in _PYDANTIC_KINDS and not hint:
        detail = InitErrorDetails(type=error["type"], loc=error["loc"], input=error["input"])
        if "ctx" in error:
            detail["ctx"] = error["ctx"]
        return detail
    kind = PydanticCustomError(error["type"], error["msg"] + hint)
    return InitErrorDetails(type=kind, loc=error["loc"], input=error["input"])
